// Composite-op recognition for --tandem-canonicalize: GELU (erf and tanh forms), LayerNorm,
// GroupNorm and Softmax written out op by op, MatMul + Add as Gemm, two-operand Einsums
// as batched MatMuls, and a zero Pad into the Conv or AveragePool reading it. Each matcher
// looks backwards from the last op of its pattern, so a forward walk sees the operands in their
// final form, and checks the whole pattern (operands, constants, axes, broadcast shapes, readers of every op it
// makes dead) before it changes the IR: a near-match is left as it is.
#include <algorithm>
#include <cassert>
#include <cmath>

#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"
#include "runtime/Einsum.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tandem {
namespace {

/// The op of ONNX type `type` producing `v`, or null.
mlir::Operation* producer(mlir::Value v, llvm::StringRef type) {
  mlir::Operation* d = v.getDefiningOp();
  return d && onnxOpType(d) == type ? d : nullptr;
}
/// Same, and `v` has no other reader (the op disappears with the pattern).
mlir::Operation* onlyProducer(mlir::Value v, llvm::StringRef type) {
  return v.hasOneUse() ? producer(v, type) : nullptr;
}

bool scalarValue(mlir::Value v, double* out) {
  Tensor t;
  if (!getConstantValue(v, &t) || t.numel() != 1) return false;
  switch (t.dtype()) {
    case DType::F32: *out = t.data<float>()[0]; return true;
    case DType::F64: *out = t.data<double>()[0]; return true;
    case DType::I32: *out = t.data<int32_t>()[0]; return true;
    case DType::I64: *out = (double)t.data<int64_t>()[0]; return true;
    default: return false;
  }
}
/// A constant scalar equal to `want` up to f32 rounding (0.5, 1, 3, 0.044715), or, with `tol`,
/// within that relative distance (exporters round sqrt(2) and sqrt(2/pi) to a few digits).
bool isScalar(mlir::Value v, double want, double tol = 1e-6) {
  double x;
  return scalarValue(v, &x) && std::fabs(x - want) <= tol * std::max(1.0, std::fabs(want));
}
constexpr double kRoundedTol = 1e-3;

/// For a commutative binary op: the operand other than one satisfying `pred`, or null.
template <typename Pred>
mlir::Value otherThan(mlir::Operation* op, Pred pred) {
  if (!op || op->getNumOperands() != 2) return nullptr;
  if (pred(op->getOperand(0))) return op->getOperand(1);
  if (pred(op->getOperand(1))) return op->getOperand(0);
  return nullptr;
}

bool isF32(mlir::Value v) {
  auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

/// The leaves of a product tree rooted at `root` (a Mul), expanding operands that are Muls read
/// only here, up to `depth` levels.
void productLeaves(mlir::Operation* root, int depth, llvm::SmallVectorImpl<mlir::Value>* leaves) {
  for (mlir::Value v : root->getOperands()) {
    mlir::Operation* m = depth > 0 ? onlyProducer(v, "Mul") : nullptr;
    if (m) productLeaves(m, depth - 1, leaves);
    else leaves->push_back(v);
  }
}

// x^3 as Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x).
bool isCube(mlir::Value v, mlir::Value x) {
  if (mlir::Operation* p = onlyProducer(v, "Pow"))
    return p->getOperand(0) == x && isScalar(p->getOperand(1), 3.0);
  mlir::Operation* m = onlyProducer(v, "Mul");
  if (!m) return false;
  llvm::SmallVector<mlir::Value> leaves;
  productLeaves(m, 1, &leaves);
  return leaves.size() == 3 && llvm::all_of(leaves, [&](mlir::Value l) { return l == x; });
}

// erf form: 1 + erf(x / sqrt 2) (or x * (1/sqrt 2)); tanh form: 1 + tanh(sqrt(2/pi) *
// (x + 0.044715 x^3)). Returns "none", "tanh" or "" (no match).
std::string geluBracket(mlir::Value a, mlir::Value x) {
  mlir::Operation* add = onlyProducer(a, "Add");
  mlir::Value inner = otherThan(add, [](mlir::Value v) { return isScalar(v, 1.0); });
  if (!inner) return "";
  if (mlir::Operation* erf = onlyProducer(inner, "Erf")) {
    mlir::Value z = erf->getOperand(0);
    if (mlir::Operation* d = onlyProducer(z, "Div"))
      return d->getOperand(0) == x && isScalar(d->getOperand(1), std::sqrt(2.0), kRoundedTol) ? "none" : "";
    mlir::Operation* m = onlyProducer(z, "Mul");
    mlir::Value xs = otherThan(m, [](mlir::Value v) { return isScalar(v, std::sqrt(0.5), kRoundedTol); });
    return xs && xs == x ? "none" : "";
  }
  if (mlir::Operation* th = onlyProducer(inner, "Tanh")) {
    mlir::Operation* m = onlyProducer(th->getOperand(0), "Mul");
    const double c = std::sqrt(2.0 / M_PI);
    mlir::Value u = otherThan(m, [&](mlir::Value v) { return isScalar(v, c, kRoundedTol); });
    mlir::Operation* sum = u ? onlyProducer(u, "Add") : nullptr;
    mlir::Value cubeTerm = otherThan(sum, [&](mlir::Value v) { return v == x; });
    mlir::Operation* scaled = cubeTerm ? onlyProducer(cubeTerm, "Mul") : nullptr;
    mlir::Value cube = otherThan(scaled, [](mlir::Value v) { return isScalar(v, 0.044715); });
    return cube && isCube(cube, x) ? "tanh" : "";
  }
  return "";
}

bool rewriteGelu(mlir::IRRewriter& rewriter, mlir::Operation* mul) {
  llvm::SmallVector<mlir::Value> leaves;
  productLeaves(mul, 1, &leaves);
  if (leaves.size() != 3) return false;
  // Exactly: the scalar 0.5, x, and the bracket (which reads x).
  for (int half = 0; half < 3; ++half) {
    if (!isScalar(leaves[half], 0.5)) continue;
    for (int xi = 0; xi < 3; ++xi) {
      if (xi == half) continue;
      mlir::Value x = leaves[xi], bracket = leaves[3 - half - xi];
      if (!isF32(x) || x.getType() != mul->getResult(0).getType()) continue;
      std::string form = geluBracket(bracket, x);
      if (form.empty()) continue;
      rewriter.setInsertionPoint(mul);
      llvm::SmallVector<mlir::NamedAttribute> attrs;
      if (form == "tanh")
        attrs.push_back(rewriter.getNamedAttr("approximate", rewriter.getStringAttr("tanh")));
      auto gelu = createTandemOp(rewriter, mul->getLoc(), "Gelu", {x}, attrs);
      if (mlir::failed(gelu)) return false;
      rewriter.replaceOp(mul, (*gelu)->getResults());
      return true;
    }
  }
  return false;
}

/// The ranked tensor type of `v`, or null (tandem values are ranked; a defensive check).
mlir::RankedTensorType rankedType(mlir::Value v) {
  return llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
}

/// The reduced axis of a ReduceMean/ReduceMax whose `axes` attribute names exactly one axis and
/// whose keepdims is 1 (the default), as a non-negative index; -1 otherwise.
int64_t singleKeptAxis(mlir::Operation* r, int64_t rank) {
  if (!r || r->getNumOperands() != 1) return -1;
  auto keep = r->getAttrOfType<mlir::IntegerAttr>("keepdims");
  if (keep && keep.getInt() != 1) return -1;
  auto axes = r->getAttrOfType<mlir::ArrayAttr>("axes");
  if (!axes || axes.size() != 1) return -1;
  auto a0 = llvm::dyn_cast<mlir::IntegerAttr>(axes[0]);
  if (!a0) return -1;
  int64_t a = a0.getInt();
  if (a < 0) a += rank;
  return a >= 0 && a < rank ? a : -1;
}

int64_t rankOf(mlir::Value v) {
  mlir::RankedTensorType t = rankedType(v);
  return t ? t.getRank() : -1;
}

/// A LayerNorm written out, every op of it checked by matchLayerNorm; nothing changed yet.
struct LayerNormMatch {
  mlir::Operation* div = nullptr;  // (x - mean) / sqrt(var + eps), the core
  mlir::Operation* root = nullptr;  // the last op: div, or the scale Mul, or the bias Add
  mlir::Value x;
  double eps = 0;
  Tensor gamma, beta;  // [C] f32 each; undefined when the pattern has none
  mlir::Value gammaValue, betaValue;  // the constants they were read from (null when none)
};

/// The per-channel values of `v` for a LayerNorm over the last axis of size `c`: an f32
/// constant that broadcasts along that axis alone (shape [..., 1, C] or [C] of rank <= `rank`,
/// or one element, which is repeated C times). False when `v` broadcasts any other way.
bool channelValues(mlir::Value v, int64_t c, int64_t rank, Tensor* out) {
  Tensor t;
  if (!getConstantValue(v, &t) || t.dtype() != DType::F32 || t.rank() > rank) return false;
  for (int64_t d = 0; d + 1 < t.rank(); ++d)
    if (t.dim(d) != 1) return false;
  int64_t last = t.rank() ? t.dim(t.rank() - 1) : 1;
  if (t.numel() != c && t.numel() != 1) return false;
  if (last != t.numel()) return false;
  *out = Tensor::alloc(DType::F32, {c});
  for (int64_t i = 0; i < c; ++i) out->data<float>()[i] = t.data<float>()[t.numel() == 1 ? 0 : i];
  return true;
}

/// The core (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) over the last axis, every
/// intermediate read only inside the pattern (the Sub by the Div and the square, the rest once).
bool matchNormalize(mlir::Operation* div, LayerNormMatch* m) {
  if (!div || onnxOpType(div) != "Div" || div->getNumOperands() != 2) return false;
  mlir::Operation* sub = producer(div->getOperand(0), "Sub");
  if (!sub || sub->getNumOperands() != 2) return false;
  mlir::Value x = sub->getOperand(0);
  mlir::RankedTensorType xt = rankedType(x);
  if (!xt || !xt.getElementType().isF32() || xt.getRank() < 1) return false;
  int64_t rank = xt.getRank();
  if (mlir::ShapedType::isDynamic(xt.getShape().back())) return false;
  if (div->getResult(0).getType() != xt || sub->getResult(0).getType() != xt) return false;
  // mean = ReduceMean(x) over the last axis, kept.
  mlir::Operation* mean = onlyProducer(sub->getOperand(1), "ReduceMean");
  if (!mean || mean->getOperand(0) != x || singleKeptAxis(mean, rank) != rank - 1) return false;
  // Denominator: Sqrt(ReduceMean(D^2) + eps), D = the Sub.
  mlir::Value d = sub->getResult(0);
  mlir::Operation* sq = onlyProducer(div->getOperand(1), "Sqrt");
  mlir::Operation* addEps = sq ? onlyProducer(sq->getOperand(0), "Add") : nullptr;
  if (!addEps || addEps->getNumOperands() != 2) return false;
  mlir::Operation* vmean = nullptr;
  mlir::Value epsValue;
  for (int i = 0; i < 2 && !vmean; ++i) {
    vmean = onlyProducer(addEps->getOperand(i), "ReduceMean");
    epsValue = addEps->getOperand(1 - i);
  }
  double eps = 0;
  if (!vmean || singleKeptAxis(vmean, rank) != rank - 1 || !scalarValue(epsValue, &eps) ||
      !std::isfinite(eps) || eps < 0)
    return false;
  // The eps Add and the Sqrt keep the variance's shape [..., 1] (no broadcast growth).
  mlir::Type varType = vmean->getResult(0).getType();
  if (addEps->getResult(0).getType() != varType || sq->getResult(0).getType() != varType)
    return false;
  mlir::Value p = vmean->getOperand(0);
  mlir::Operation* square = nullptr;
  double exponent = 0;
  if (mlir::Operation* pw = onlyProducer(p, "Pow")) {
    if (pw->getNumOperands() == 2 && pw->getOperand(0) == d &&
        scalarValue(pw->getOperand(1), &exponent) && exponent == 2.0)
      square = pw;
  } else if (mlir::Operation* mu = onlyProducer(p, "Mul")) {
    if (mu->getOperand(0) == d && mu->getOperand(1) == d) square = mu;
  }
  if (!square || square->getResult(0).getType() != xt) return false;
  // D's readers must all be in the pattern (the Div and the square).
  for (mlir::Operation* u : d.getUsers())
    if (u != div && u != square) return false;
  m->div = div;
  m->x = x;
  m->eps = eps;
  return true;
}

/// The LayerNorm ending at `root`: the core alone (root is the Div), times a per-channel scale
/// (a Mul), plus a per-channel bias (an Add, with or without the scale). Pure: changes nothing.
bool matchLayerNorm(mlir::Operation* root, LayerNormMatch* m) {
  if (!root || root->getNumResults() != 1 || root->getNumOperands() != 2) return false;
  std::string type = onnxOpType(root);
  // Every op from the Div on keeps x's type: a scale or bias that broadcasts into more dims
  // or a longer axis would change it, and is not a LayerNorm's.
  auto scaled = [&](mlir::Operation* mul, LayerNormMatch* mm) {
    for (int i = 0; i < 2; ++i) {
      LayerNormMatch c;
      if (!matchNormalize(onlyProducer(mul->getOperand(i), "Div"), &c)) continue;
      int64_t ch = rankedType(c.x).getShape().back();
      if (mul->getResult(0).getType() != c.x.getType() ||
          !channelValues(mul->getOperand(1 - i), ch, rankOf(c.x), &c.gamma))
        continue;
      c.gammaValue = mul->getOperand(1 - i);
      *mm = c;
      return true;
    }
    return false;
  };
  if (type == "Div") {
    if (!matchNormalize(root, m)) return false;
  } else if (type == "Mul") {
    if (!scaled(root, m)) return false;
  } else if (type == "Add") {
    bool found = false;
    for (int i = 0; i < 2 && !found; ++i) {
      mlir::Value in = root->getOperand(i);
      LayerNormMatch c;
      if (mlir::Operation* mul = onlyProducer(in, "Mul")) {
        if (!scaled(mul, &c)) continue;
      } else if (!matchNormalize(onlyProducer(in, "Div"), &c)) {
        continue;
      }
      int64_t ch = rankedType(c.x).getShape().back();
      if (root->getResult(0).getType() != c.x.getType() ||
          !channelValues(root->getOperand(1 - i), ch, rankOf(c.x), &c.beta))
        continue;
      c.betaValue = root->getOperand(1 - i);
      *m = c;
      found = true;
    }
    if (!found) return false;
  } else {
    return false;
  }
  m->root = root;
  return true;
}

// LayerNormalization(x, gamma, beta, axis = -1, epsilon = eps) for the whole written-out
// pattern ending at `root`. A Div or Mul whose only reader extends the pattern is left for that
// reader, so the largest match wins. `keepParameters` (training): only a pattern whose scale,
// and bias if any, are f32 [C] constants, which become the op's operands as they are (the
// initializers stay, to be trained and written back); otherwise new [C] constants.
bool rewriteLayerNorm(mlir::IRRewriter& rewriter, mlir::Operation* root, bool keepParameters = false) {
  LayerNormMatch m;
  if (!matchLayerNorm(root, &m)) return false;
  mlir::Value r = root->getResult(0);
  if (!m.beta.defined() && r.hasOneUse()) {
    LayerNormMatch larger;
    if (matchLayerNorm(*r.getUsers().begin(), &larger) && larger.div == m.div) return false;
  }
  int64_t c = rankedType(m.x).getShape().back();
  auto vectorOfC = [&](mlir::Value v) {
    mlir::RankedTensorType t = v ? rankedType(v) : mlir::RankedTensorType();
    return t && t.getRank() == 1 && t.getShape()[0] == c;
  };
  if (keepParameters && (!vectorOfC(m.gammaValue) || (m.betaValue && !vectorOfC(m.betaValue)))) return false;
  if (!m.gamma.defined()) {
    m.gamma = Tensor::alloc(DType::F32, {c});
    std::fill_n(m.gamma.data<float>(), c, 1.f);
  }
  rewriter.setInsertionPoint(root);
  llvm::SmallVector<mlir::Value> operands = {m.x};
  if (keepParameters) {
    operands.push_back(m.gammaValue);
    if (m.betaValue) operands.push_back(m.betaValue);
  } else {
    operands.push_back(createConstant(rewriter, root->getLoc(), m.gamma));
    if (m.beta.defined()) operands.push_back(createConstant(rewriter, root->getLoc(), m.beta));
  }
  llvm::SmallVector<mlir::NamedAttribute> attrs = {
      rewriter.getNamedAttr("axis", rewriter.getI64IntegerAttr(-1)),
      rewriter.getNamedAttr("epsilon", rewriter.getF32FloatAttr((float)m.eps))};
  auto ln = createTandemOp(rewriter, root->getLoc(), "LayerNormalization", operands, attrs);
  // The match checked every type, so inference cannot refuse it.
  assert(mlir::succeeded(ln) && (*ln)->getResult(0).getType() == r.getType());
  if (mlir::failed(ln)) return false;
  rewriter.replaceOp(root, (*ln)->getResult(0));
  return true;
}

// exp(x - max(x, a)) / sum(exp(...), a), or without the max: Softmax(x, axis = a).
bool rewriteSoftmax(mlir::IRRewriter& rewriter, mlir::Operation* div) {
  mlir::Operation* exp = producer(div->getOperand(0), "Exp");
  mlir::Operation* sum = onlyProducer(div->getOperand(1), "ReduceSum");
  if (!exp || !sum || sum->getOperand(0) != exp->getResult(0)) return false;
  for (mlir::Operation* u : exp->getResult(0).getUsers())
    if (u != div && u != sum) return false;
  if (sum->getNumOperands() < 2 || exp->getNumOperands() != 1) return false;
  // With the max subtraction, x is the Sub's input; without, the Exp's.
  mlir::Value x = exp->getOperand(0);
  mlir::Operation* max = nullptr;
  if (mlir::Operation* sub = onlyProducer(x, "Sub")) {
    mlir::Operation* mx = onlyProducer(sub->getOperand(1), "ReduceMax");
    if (mx && mx->getNumOperands() == 1 && mx->getOperand(0) == sub->getOperand(0)) {
      max = mx;
      x = sub->getOperand(0);
    }
  }
  if (!isF32(x) || x.getType() != div->getResult(0).getType()) return false;
  int64_t rank = rankOf(x);
  // ReduceSum-13: axes is operand 1 (a constant here), keepdims defaults to 1.
  auto keep = sum->getAttrOfType<mlir::IntegerAttr>("keepdims");
  Tensor axes;
  if ((keep && keep.getInt() != 1) || !getConstantValue(sum->getOperand(1), &axes) || axes.numel() != 1 ||
      axes.dtype() != DType::I64)
    return false;
  int64_t axis = axes.data<int64_t>()[0];
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  if (max && singleKeptAxis(max, rank) != axis) return false;
  rewriter.setInsertionPoint(div);
  auto sm = createTandemOp(rewriter, div->getLoc(), "Softmax", {x},
                           {rewriter.getNamedAttr("axis", rewriter.getI64IntegerAttr(axis))});
  if (mlir::failed(sm)) return false;
  rewriter.replaceOp(div, (*sm)->getResult(0));
  return true;
}

// MatMul(A, B) + C with 2-D A, B and C broadcasting into [M, N]: Gemm(A, B, C).
bool rewriteMatMulAdd(mlir::IRRewriter& rewriter, mlir::Operation* add) {
  if (add->getNumOperands() != 2) return false;
  for (int i = 0; i < 2; ++i) {
    mlir::Operation* mm = onlyProducer(add->getOperand(i), "MatMul");
    mlir::Value c = add->getOperand(1 - i);
    if (!mm || !isF32(c)) continue;
    if (rankOf(mm->getOperand(0)) != 2 || rankOf(mm->getOperand(1)) != 2 || rankOf(c) > 2) continue;
    if (add->getResult(0).getType() != mm->getResult(0).getType()) continue;
    rewriter.setInsertionPoint(add);
    auto gemm = createTandemOp(rewriter, add->getLoc(), "Gemm",
                               {mm->getOperand(0), mm->getOperand(1), c}, {});
    if (mlir::failed(gemm)) return false;
    rewriter.replaceOp(add, (*gemm)->getResult(0));
    return true;
  }
  return false;
}

// ReduceMean over every spatial axis of an f32 [N, C, H, W(, D)] value (axes 2..rank-1, the
// attribute form of ReduceMean-13): GlobalAveragePool, then Flatten(axis 1) when keepdims = 0.
// PyTorch exports x.mean([2, 3]) this way (MnasNet, EfficientNet heads); the pool has a oneDNN
// kernel that reads the host activation layout, the reduction only the reference loop.
bool rewriteSpatialMean(mlir::IRRewriter& rewriter, mlir::Operation* op) {
  if (op->getNumOperands() != 1) return false;
  mlir::Value x = op->getOperand(0);
  auto xt = rankedType(x);
  auto axesAttr = op->getAttrOfType<mlir::ArrayAttr>("axes");
  // Rank 4 and up: a rank-3 mean over axis 2 is a sequence model's last-axis mean (LayerNorm's
  // pattern), better left as it is.
  if (!isF32(x) || !xt || xt.getRank() < 4 || !axesAttr) return false;
  const int64_t rank = xt.getRank();
  llvm::SmallVector<int64_t> axes;
  for (mlir::Attribute a : axesAttr) {
    auto i = llvm::dyn_cast<mlir::IntegerAttr>(a);
    if (!i) return false;
    axes.push_back(i.getInt() < 0 ? i.getInt() + rank : i.getInt());
  }
  llvm::sort(axes);
  if ((int64_t)axes.size() != rank - 2) return false;
  for (int64_t i = 0; i < rank - 2; ++i)
    if (axes[i] != i + 2) return false;
  auto keep = op->getAttrOfType<mlir::IntegerAttr>("keepdims");
  rewriter.setInsertionPoint(op);
  auto pool = createTandemOp(rewriter, op->getLoc(), "GlobalAveragePool", {x}, {});
  if (mlir::failed(pool)) return false;
  mlir::Value r = (*pool)->getResult(0);
  if (keep && keep.getInt() == 0) {
    auto flat = createTandemOp(rewriter, op->getLoc(), "Flatten", {r},
                               {rewriter.getNamedAttr("axis", rewriter.getI64IntegerAttr(1))});
    if (mlir::failed(flat)) return false;
    r = (*flat)->getResult(0);
  }
  if (r.getType() != op->getResult(0).getType()) {
    // The op's type was re-inferred just before, so only a shape inference disagreeing with
    // itself gets here; undo and leave the ReduceMean.
    if (r.getDefiningOp() != *pool) rewriter.eraseOp(r.getDefiningOp());
    rewriter.eraseOp(*pool);
    return false;
  }
  rewriter.replaceOp(op, r);
  return true;
}

/// The per-channel values of `v` for channels at dim 1 of a rank-`rank` value with `c`
/// channels: an f32 constant of shape [C, 1, ...] (rank - 1 dims), [1, C, 1, ...] (rank dims)
/// or one element (repeated). False for any other broadcast.
bool dim1Values(mlir::Value v, int64_t c, int64_t rank, Tensor* out) {
  Tensor t;
  if (!getConstantValue(v, &t) || t.dtype() != DType::F32 || t.rank() > rank) return false;
  if (t.numel() != 1) {
    const int64_t at = t.rank() - (rank - 1);  // where C sits in t's shape
    if (at < 0 || t.dim(at) != c) return false;
    for (int64_t d = 0; d < t.rank(); ++d)
      if (d != at && t.dim(d) != 1) return false;
  }
  *out = Tensor::alloc(DType::F32, {c});
  for (int64_t i = 0; i < c; ++i) out->data<float>()[i] = t.data<float>()[t.numel() == 1 ? 0 : i];
  return true;
}

// GroupNorm as PyTorch exports it up to opset 17: Reshape(x, [N, G, -1]) ->
// InstanceNormalization(scale s[G], bias b[G]) -> Reshape back to x's shape [-> Mul by gamma
// per channel] [-> Add beta per channel], each intermediate read once: GroupNormalization-21
// with scale gamma[c] * s[g] and bias gamma[c] * b[g] + beta[c] (exact when s = 1, b = 0, as
// exported). One op: the statistics and one affine pass, where the written-out form ran the
// InstanceNormalization, a Mul and an Add over the whole tensor (diffusion_unet's 12 groups).
bool rewriteGroupNorm(mlir::IRRewriter& rewriter, mlir::Operation* root) {
  const std::string type = onnxOpType(root);
  mlir::Operation* back = nullptr;  // the Reshape back to x's shape
  mlir::Value gammaV, betaV;
  auto reshapeOf = [&](mlir::Value v) { return onlyProducer(v, "Reshape"); };
  auto viaMul = [&](mlir::Operation* m) {  // m = Mul(back, gamma), either order
    for (int j = 0; m && j < 2 && !back; ++j)
      if ((back = reshapeOf(m->getOperand(j)))) gammaV = m->getOperand(1 - j);
    return back != nullptr;
  };
  if (type == "Add") {
    for (int i = 0; i < 2 && !back; ++i) {
      mlir::Value in = root->getOperand(i);
      if (viaMul(onlyProducer(in, "Mul")) || (back = reshapeOf(in))) betaV = root->getOperand(1 - i);
    }
  } else if (type == "Mul") {
    // A Mul whose one reader is an Add of a per-channel constant is left to that Add.
    mlir::Value r = root->getResult(0);
    if (r.hasOneUse() && onnxOpType(*r.getUsers().begin()) == "Add") {
      mlir::Operation* a = *r.getUsers().begin();
      mlir::Value other = a->getOperand(a->getOperand(0) == r ? 1 : 0);
      Tensor probe;
      auto rt = rankedType(r);
      if (rt && rt.getRank() >= 3 && !rt.isDynamicDim(1) &&
          dim1Values(other, rt.getDimSize(1), rt.getRank(), &probe))
        return false;
    }
    viaMul(root);
  }
  if (!back) return false;
  mlir::Operation* in = onlyProducer(back->getOperand(0), "InstanceNormalization");
  mlir::Operation* front = in ? onlyProducer(in->getOperand(0), "Reshape") : nullptr;
  if (!front) return false;
  mlir::Value x = front->getOperand(0);
  auto xt = rankedType(x), gt = rankedType(front->getResult(0));
  if (!isF32(x) || !xt || !gt || !xt.hasStaticShape() || xt.getRank() < 3 || gt.getRank() != 3 ||
      back->getResult(0).getType() != x.getType() || root->getResult(0).getType() != x.getType())
    return false;
  const int64_t rank = xt.getRank(), N = xt.getDimSize(0), C = xt.getDimSize(1);
  const int64_t G = gt.getDimSize(1);
  if (gt.getDimSize(0) != N || G < 1 || C % G != 0 || gt.getDimSize(2) * G != xt.getNumElements() / N)
    return false;
  Tensor s, b, gamma, beta;
  auto groupValues = [&](mlir::Value v, Tensor* out) {  // [G] (or one value): f32 constant
    Tensor t;
    if (!getConstantValue(v, &t) || t.dtype() != DType::F32 || (t.numel() != G && t.numel() != 1))
      return false;
    *out = Tensor::alloc(DType::F32, {G});
    for (int64_t g = 0; g < G; ++g) out->data<float>()[g] = t.data<float>()[t.numel() == 1 ? 0 : g];
    return true;
  };
  if (!groupValues(in->getOperand(1), &s) || !groupValues(in->getOperand(2), &b)) return false;
  if (gammaV && !dim1Values(gammaV, C, rank, &gamma)) return false;
  if (betaV && !dim1Values(betaV, C, rank, &beta)) return false;
  auto epsAttr = in->getAttrOfType<mlir::FloatAttr>("epsilon");
  const double eps = epsAttr ? epsAttr.getValueAsDouble() : 1e-5;
  Tensor scale = Tensor::alloc(DType::F32, {C}), bias = Tensor::alloc(DType::F32, {C});
  for (int64_t c = 0; c < C; ++c) {
    const int64_t g = c / (C / G);
    const float gm = gammaV ? gamma.data<float>()[c] : 1.f;
    const float bt = betaV ? beta.data<float>()[c] : 0.f;
    scale.data<float>()[c] = gm * s.data<float>()[g];
    bias.data<float>()[c] = gm * b.data<float>()[g] + bt;
  }
  rewriter.setInsertionPoint(root);
  llvm::SmallVector<mlir::NamedAttribute> attrs = {
      rewriter.getNamedAttr("num_groups", rewriter.getI64IntegerAttr(G)),
      rewriter.getNamedAttr("epsilon", rewriter.getF32FloatAttr((float)eps))};
  auto gn = createTandemOp(rewriter, root->getLoc(), "GroupNormalization",
                           {x, createConstant(rewriter, root->getLoc(), scale),
                            createConstant(rewriter, root->getLoc(), bias)},
                           attrs);
  if (mlir::failed(gn) || (*gn)->getResult(0).getType() != root->getResult(0).getType()) return false;
  rewriter.replaceOp(root, (*gn)->getResult(0));
  return true;
}

// Einsum of two f32 (or f64) operands of static shape whose every label is a batch label (both operands
// and the result), a row label (A and the result), a column label (B and the result) or a
// contracted one (both operands, not the result): a batched MatMul between Transposes and
// Reshapes, as torch.einsum and ONNX Runtime compute it. Einsum's own kernel is a scalar loop
// nest (MaxViT's attention, "B G H I D, B G H J D -> B G H I J", ran 300 ms of its 360 there).
// Repeated labels (diagonals), labels summed within one operand, and contracted labels whose
// extents differ (a broadcast 1) keep the Einsum.
bool rewriteEinsum(mlir::IRRewriter& rewriter, mlir::Operation* op) {
  if (op->getNumOperands() != 2) return false;
  auto eq = op->getAttrOfType<mlir::StringAttr>("equation");
  auto ta = rankedType(op->getOperand(0)), tb = rankedType(op->getOperand(1));
  auto ty = rankedType(op->getResult(0));
  if (!eq || !ta || !tb || !ty || !ta.hasStaticShape() || !tb.hasStaticShape() || !ty.hasStaticShape())
    return false;
  if (ta.getElementType() != tb.getElementType() ||
      !(ta.getElementType().isF32() || ta.getElementType().isF64()))
    return false;
  std::vector<std::vector<int64_t>> shapes = {ta.getShape().vec(), tb.getShape().vec()};
  EinsumSpec spec;
  if (!parseEinsum(eq.getValue().str(), shapes, &spec).empty()) return false;
  const std::vector<int>& la = spec.inputLabels[0];
  const std::vector<int>& lb = spec.inputLabels[1];
  const std::vector<int>& lo = spec.outputLabels;
  auto position = [](const std::vector<int>& v, int l) {
    auto it = std::find(v.begin(), v.end(), l);
    return it == v.end() ? -1 : int(it - v.begin());
  };
  for (const auto* v : {&la, &lb})
    for (size_t i = 0; i < v->size(); ++i)
      if (position(*v, (*v)[i]) != (int)i) return false;  // a diagonal
  // Batch labels in the result's order, then rows (result order), contracted (A's order), columns.
  std::vector<int> batch, rows, cols, contracted;
  for (int l : lo) {
    const bool inA = position(la, l) >= 0, inB = position(lb, l) >= 0;
    (inA && inB ? batch : inA ? rows : cols).push_back(l);
  }
  for (int l : la)
    if (position(lo, l) < 0) {
      if (position(lb, l) < 0 || shapes[0][position(la, l)] != shapes[1][position(lb, l)]) return false;
      contracted.push_back(l);
    }
  for (int l : lb)
    if (position(lo, l) < 0 && position(la, l) < 0) return false;  // summed within B alone

  mlir::Location loc = op->getLoc();
  rewriter.setInsertionPoint(op);
  auto i64Array = [&](const std::vector<int64_t>& v) { return rewriter.getI64ArrayAttr(v); };
  auto transpose = [&](mlir::Value x, const std::vector<int64_t>& perm) -> mlir::FailureOr<mlir::Value> {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == (int64_t)i;
    if (identity) return x;
    auto t = createTandemOp(rewriter, loc, "Transpose", {x}, {rewriter.getNamedAttr("perm", i64Array(perm))});
    if (mlir::failed(t)) return mlir::failure();
    return (*t)->getResult(0);
  };
  auto reshape = [&](mlir::Value x, const std::vector<int64_t>& dims) -> mlir::FailureOr<mlir::Value> {
    if (rankedType(x).getShape().vec() == dims) return x;
    mlir::Value shape = createConstant(rewriter, loc, Tensor::fromVector<int64_t>({(int64_t)dims.size()}, dims));
    auto r = createTandemOp(rewriter, loc, "Reshape", {x, shape}, {});
    if (mlir::failed(r)) return mlir::failure();
    return (*r)->getResult(0);
  };
  // One operand as [batch..., rows-or-contracted product, contracted-or-columns product].
  auto operand = [&](int k, const std::vector<int>& labels, const std::vector<int>& first,
                     const std::vector<int>& second) -> mlir::FailureOr<mlir::Value> {
    std::vector<int64_t> perm, dims;
    for (int l : batch) perm.push_back(position(labels, l)), dims.push_back(shapes[k][perm.back()]);
    int64_t p1 = 1, p2 = 1;
    for (int l : first) perm.push_back(position(labels, l)), p1 *= shapes[k][perm.back()];
    for (int l : second) perm.push_back(position(labels, l)), p2 *= shapes[k][perm.back()];
    dims.push_back(p1);
    dims.push_back(p2);
    auto t = transpose(op->getOperand(k), perm);
    if (mlir::failed(t)) return mlir::failure();
    return reshape(*t, dims);
  };
  auto a = operand(0, la, rows, contracted);
  auto b = operand(1, lb, contracted, cols);
  if (mlir::failed(a) || mlir::failed(b)) return false;
  auto mm = createTandemOp(rewriter, loc, "MatMul", {*a, *b}, {});
  if (mlir::failed(mm)) return false;
  // [batch..., rows..., columns...], then the result's label order.
  std::vector<int> order = batch;
  order.insert(order.end(), rows.begin(), rows.end());
  order.insert(order.end(), cols.begin(), cols.end());
  std::vector<int64_t> dims, perm;
  for (int l : order) dims.push_back(ty.getShape()[position(lo, l)]);
  for (int l : lo) perm.push_back(position(order, l));
  auto y = reshape((*mm)->getResult(0), dims);
  if (mlir::failed(y)) return false;
  y = transpose(*y, perm);
  if (mlir::failed(y) || (*y).getType() != op->getResult(0).getType()) return false;
  rewriter.replaceOp(op, *y);
  return true;
}

// Pad(x, pads[, 0]) -> Conv or AveragePool, a constant-mode Pad by zero over the spatial dims
// only, read by that op alone: the op with those pads added to its own, so no padded copy is
// made. ONNX Runtime's PadFusion does the same.
// - Conv (a causal Conv1d's left pad, nn.ZeroPad2d, TensorFlow exports' explicit "SAME"
//   padding): explicit pads are zeros around the input at any stride and dilation.
// - AveragePool (torch.onnx writes avg_pool2d(padding=p, count_include_pad=True), the default,
//   as this Pad and a pool without pads: Inception's pool branches): the pool then counts its
//   pads (count_include_pad 1), which is what it did with the Pad's zeros in its input. Only
//   without ceil_mode, with pads of its own only where it already counted them, and with
//   every window reaching the input.
// Negative pads (crops), pads on N or C, another mode or value, a Pad-18 axes operand and
// auto_pad SAME_* are left as they are.
bool rewritePadWindow(mlir::IRRewriter& rewriter, mlir::Operation* op, bool pool) {
  if (op->getNumOperands() < (pool ? 1u : 2u)) return false;
  mlir::Operation* pad = onlyProducer(op->getOperand(0), "Pad");
  if (!pad || pad->getNumOperands() < 2 || pad->getNumOperands() > 3) return false;
  if (auto mode = pad->getAttrOfType<mlir::StringAttr>("mode"); mode && mode.getValue() != "constant")
    return false;
  if (pad->getNumOperands() == 3 && !pad->getOperand(2).getDefiningOp<NoneOp>() &&
      !isScalar(pad->getOperand(2), 0.0, 0.0))
    return false;
  auto xt = rankedType(pad->getOperand(0));
  Tensor pads;
  if (!xt || !getConstantValue(pad->getOperand(1), &pads) || pads.dtype() != DType::I64) return false;
  const int64_t rank = xt.getRank(), sp = rank - 2;
  if (sp < 1 || pads.numel() != 2 * rank) return false;
  const int64_t* p = pads.data<int64_t>();
  for (int64_t i = 0; i < 2 * rank; ++i)
    if (p[i] < 0 || ((i % rank) < 2 && p[i] != 0)) return false;
  auto autoPad = op->getAttrOfType<mlir::StringAttr>("auto_pad");
  const bool valid = autoPad && autoPad.getValue() == "VALID";
  if (autoPad && !valid && autoPad.getValue() != "NOTSET") return false;
  llvm::SmallVector<int64_t> ownPads(2 * sp, 0);
  if (op->hasAttr("pads") && !valid) {
    ownPads = intsAttr(op, "pads");
    if ((int64_t)ownPads.size() != 2 * sp) return false;
  }
  // ONNX pads: [x1_begin, x2_begin, ..., x1_end, x2_end, ...], over every dim for Pad, over
  // the spatial dims for Conv and the pools.
  llvm::SmallVector<int64_t> merged = ownPads;
  for (int64_t i = 0; i < sp; ++i) {
    merged[i] += p[2 + i];
    merged[sp + i] += p[rank + 2 + i];
  }
  if (pool) {
    if (intAttrOr(op, "ceil_mode", 0) != 0) return false;
    const bool counted = intAttrOr(op, "count_include_pad", 0) != 0;
    if (!counted && llvm::any_of(ownPads, [](int64_t v) { return v != 0; })) return false;
    // A window lying wholly in the pads is one oneDNN's pooling does not take (the reference
    // kernel would run): such a Pad stays.
    auto k = intsAttrOr(op, "kernel_shape", sp, 1), d = intsAttrOr(op, "dilations", sp, 1);
    for (int64_t i = 0; i < sp; ++i)
      if (std::max(merged[i], merged[sp + i]) >= (k[i] - 1) * d[i] + 1) return false;
  }
  rewriter.modifyOpInPlace(op, [&] {
    op->setOperand(0, pad->getOperand(0));
    op->setAttr("pads", rewriter.getI64ArrayAttr(merged));
    if (autoPad) op->setAttr("auto_pad", rewriter.getStringAttr("NOTSET"));
    if (pool) op->setAttr("count_include_pad", rewriter.getI64IntegerAttr(1));
  });
  if (pad->use_empty()) rewriter.eraseOp(pad);
  return true;
}

}  // namespace

namespace {

// `rewrite` on every single-result op of `main` whose type is one of `types`, in program order,
// then the ops the rewrites left dead are erased. A rewrite replaces only the root it is given
// (a pattern's root comes after its ops, which stay, dead, until the sweep), so every pointer
// collected first stays valid until its turn. Returns how many rewrote.
template <typename Rewrite>
int rewriteRootsThenSweep(mlir::func::FuncOp main, std::initializer_list<llvm::StringRef> types,
                          Rewrite rewrite) {
  mlir::IRRewriter rewriter(main.getContext());
  mlir::Block& body = main.getBody().front();
  llvm::SmallVector<mlir::Operation*> roots;
  for (mlir::Operation& op : body)
    if (op.getNumResults() == 1 && llvm::is_contained(types, onnxOpType(&op))) roots.push_back(&op);
  int rewritten = 0;
  for (mlir::Operation* op : roots)
    if (rewrite(rewriter, op)) ++rewritten;
  if (rewritten)
    for (mlir::Operation& op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (mlir::isOpTriviallyDead(&op)) rewriter.eraseOp(&op);
  return rewritten;
}

}  // namespace

int rewriteWrittenOutGelu(mlir::func::FuncOp main) {
  return rewriteRootsThenSweep(main, {"Mul"}, [](mlir::IRRewriter& r, mlir::Operation* op) {
    return rewriteGelu(r, op);
  });
}

int rewriteWrittenOutLayerNorm(mlir::func::FuncOp main) {
  return rewriteRootsThenSweep(main, {"Mul", "Add"}, [](mlir::IRRewriter& r, mlir::Operation* op) {
    return rewriteLayerNorm(r, op, /*keepParameters=*/true);
  });
}

bool rewriteCompositeOp(mlir::IRRewriter& rewriter, mlir::Operation* op) {
  std::string type = onnxOpType(op);
  if (op->getNumResults() != 1) return false;
  if (type == "Mul")
    return rewriteGelu(rewriter, op) || rewriteLayerNorm(rewriter, op) || rewriteGroupNorm(rewriter, op);
  if (type == "Div") return rewriteLayerNorm(rewriter, op) || rewriteSoftmax(rewriter, op);
  if (type == "Add")
    return rewriteLayerNorm(rewriter, op) || rewriteGroupNorm(rewriter, op) ||
           rewriteMatMulAdd(rewriter, op);
  if (type == "ReduceMean") return rewriteSpatialMean(rewriter, op);
  if (type == "Einsum") return rewriteEinsum(rewriter, op);
  if (type == "Conv") return rewritePadWindow(rewriter, op, /*pool=*/false);
  if (type == "AveragePool") return rewritePadWindow(rewriter, op, /*pool=*/true);
  return false;
}

}  // namespace tandem

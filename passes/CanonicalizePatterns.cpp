// Composite-op recognition for --tandem-canonicalize: GELU (erf and tanh forms), LayerNorm and
// Softmax written out op by op, and MatMul + Add as Gemm. Each matcher looks backwards from
// the last op of its pattern, so a forward walk sees the operands in their final form.
#include <cmath>

#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "passes/Passes.h"

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
/// A constant scalar within a relative 1e-3 of `want` (exporters round sqrt(2), sqrt(2/pi)).
bool isScalar(mlir::Value v, double want) {
  double x;
  return scalarValue(v, &x) && std::fabs(x - want) <= 1e-3 * std::max(1.0, std::fabs(want));
}

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
      return d->getOperand(0) == x && isScalar(d->getOperand(1), std::sqrt(2.0)) ? "none" : "";
    mlir::Operation* m = onlyProducer(z, "Mul");
    mlir::Value xs = otherThan(m, [](mlir::Value v) { return isScalar(v, std::sqrt(0.5)); });
    return xs && xs == x ? "none" : "";
  }
  if (mlir::Operation* th = onlyProducer(inner, "Tanh")) {
    mlir::Operation* m = onlyProducer(th->getOperand(0), "Mul");
    const double c = std::sqrt(2.0 / M_PI);
    mlir::Value u = otherThan(m, [&](mlir::Value v) { return isScalar(v, c); });
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

/// The single reduced axis of a ReduceMean/ReduceMax (attribute axes) with keepdims 1, as a
/// non-negative index; -1 when not a single kept axis.
int64_t singleKeptAxis(mlir::Operation* r, int64_t rank) {
  auto keep = r->getAttrOfType<mlir::IntegerAttr>("keepdims");
  if (keep && keep.getInt() != 1) return -1;
  auto axes = r->getAttrOfType<mlir::ArrayAttr>("axes");
  if (!axes || axes.size() != 1) return -1;
  int64_t a = llvm::cast<mlir::IntegerAttr>(axes[0]).getInt();
  if (a < 0) a += rank;
  return a >= 0 && a < rank ? a : -1;
}

int64_t rankOf(mlir::Value v) { return llvm::cast<mlir::RankedTensorType>(v.getType()).getRank(); }

/// A constant 1-D tensor of `n` elements (gamma/beta of a LayerNorm over the last axis).
bool isChannelConstant(mlir::Value v, int64_t n) {
  auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
  return v.getDefiningOp<ConstantOp>() && t && t.getRank() == 1 && t.getDimSize(0) == n &&
         t.getElementType().isF32();
}

// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) over the last axis, optionally * gamma and
// + beta (constants of the last dim): LayerNormalization(x, gamma, beta, axis = -1, eps).
bool rewriteLayerNorm(mlir::IRRewriter& rewriter, mlir::Operation* root) {
  std::string type = onnxOpType(root);
  mlir::Operation* div = nullptr;
  mlir::Value gamma, beta;
  auto next = [](mlir::Operation* op) -> mlir::Operation* {
    mlir::Value r = op->getResult(0);
    return r.hasOneUse() ? *r.getUsers().begin() : nullptr;
  };
  if (type == "Div") div = root;
  else if (type == "Mul" || type == "Add") {
    mlir::Operation* cur = root;
    if (type == "Add") {
      int64_t n = rankOf(root->getResult(0)) ? llvm::cast<mlir::RankedTensorType>(root->getResult(0).getType()).getShape().back() : 0;
      mlir::Value in = otherThan(root, [&](mlir::Value v) { return isChannelConstant(v, n); });
      if (!in) return false;
      beta = in == root->getOperand(0) ? root->getOperand(1) : root->getOperand(0);
      mlir::Operation* m = onlyProducer(in, "Mul");
      cur = m ? m : onlyProducer(in, "Div");
      if (!cur) return false;
    }
    if (onnxOpType(cur) == "Mul") {
      int64_t n = llvm::cast<mlir::RankedTensorType>(cur->getResult(0).getType()).getShape().back();
      mlir::Value in = otherThan(cur, [&](mlir::Value v) { return isChannelConstant(v, n); });
      if (!in) return false;
      gamma = in == cur->getOperand(0) ? cur->getOperand(1) : cur->getOperand(0);
      div = onlyProducer(in, "Div");
    } else {
      div = cur;
    }
  }
  if (!div || onnxOpType(div) != "Div") return false;
  mlir::Value x;
  {
    mlir::Operation* sub = producer(div->getOperand(0), "Sub");
    if (!sub) return false;
    mlir::Operation* mean = onlyProducer(sub->getOperand(1), "ReduceMean");
    x = sub->getOperand(0);
    if (!mean || mean->getOperand(0) != x || !isF32(x)) return false;
    int64_t rank = rankOf(x);
    if (rank < 1 || singleKeptAxis(mean, rank) != rank - 1) return false;
    if (div->getResult(0).getType() != x.getType()) return false;
    // Denominator: Sqrt(ReduceMean(D^2) + eps), D = the Sub above (read by Div and the square).
    mlir::Value d = sub->getResult(0);
    mlir::Operation* sq = onlyProducer(div->getOperand(1), "Sqrt");
    mlir::Operation* addEps = sq ? onlyProducer(sq->getOperand(0), "Add") : nullptr;
    double eps = 0;
    mlir::Value var = otherThan(addEps, [&](mlir::Value v) { return scalarValue(v, &eps); });
    mlir::Operation* vmean = var ? onlyProducer(var, "ReduceMean") : nullptr;
    if (!vmean || singleKeptAxis(vmean, rank) != rank - 1) return false;
    mlir::Value p = vmean->getOperand(0);
    bool squared = false;
    if (mlir::Operation* pw = onlyProducer(p, "Pow"))
      squared = pw->getOperand(0) == d && isScalar(pw->getOperand(1), 2.0);
    else if (mlir::Operation* m = onlyProducer(p, "Mul"))
      squared = m->getOperand(0) == d && m->getOperand(1) == d;
    if (!squared || !(eps > 0)) return false;
    // D's readers must all be in the pattern (the Div and the square).
    for (mlir::Operation* u : d.getUsers())
      if (u != div && u != p.getDefiningOp()) return false;
    // Prefer the largest match: leave a Div or Mul whose only reader would extend it.
    if (root == div || (type == "Mul" && !beta)) {
      if (mlir::Operation* n = next(root)) {
        std::string nt = onnxOpType(n);
        int64_t c = llvm::cast<mlir::RankedTensorType>(x.getType()).getShape().back();
        bool extends = (nt == "Mul" && root == div) || nt == "Add";
        if (extends && otherThan(n, [&](mlir::Value v) { return isChannelConstant(v, c); }))
          return false;
      }
    }
    rewriter.setInsertionPoint(root);
    int64_t c = llvm::cast<mlir::RankedTensorType>(x.getType()).getShape().back();
    if (!gamma) {
      Tensor ones = Tensor::alloc(DType::F32, {c});
      std::fill_n(ones.data<float>(), c, 1.f);
      gamma = createConstant(rewriter, root->getLoc(), ones);
    }
    llvm::SmallVector<mlir::NamedAttribute> attrs = {
        rewriter.getNamedAttr("axis", rewriter.getI64IntegerAttr(-1)),
        rewriter.getNamedAttr("epsilon", rewriter.getF32FloatAttr((float)eps))};
    llvm::SmallVector<mlir::Value> operands = {x, gamma};
    if (beta) operands.push_back(beta);
    auto ln = createTandemOp(rewriter, root->getLoc(), "LayerNormalization", operands, attrs);
    if (mlir::failed(ln)) return false;
    rewriter.replaceOp(root, (*ln)->getResult(0));
    return true;
  }
}

// exp(x - max(x, a)) / sum(exp(...), a), or without the max: Softmax(x, axis = a).
bool rewriteSoftmax(mlir::IRRewriter& rewriter, mlir::Operation* div) {
  mlir::Operation* exp = producer(div->getOperand(0), "Exp");
  mlir::Operation* sum = onlyProducer(div->getOperand(1), "ReduceSum");
  if (!exp || !sum || sum->getOperand(0) != exp->getResult(0)) return false;
  for (mlir::Operation* u : exp->getResult(0).getUsers())
    if (u != div && u != sum) return false;
  mlir::Value x = exp->getOperand(0);
  if (mlir::Operation* sub = onlyProducer(x, "Sub")) {
    mlir::Operation* mx = onlyProducer(sub->getOperand(1), "ReduceMax");
    if (mx && mx->getOperand(0) == sub->getOperand(0)) {
      int64_t a = singleKeptAxis(mx, rankOf(sub->getOperand(0)));
      if (a < 0) return false;
      x = sub->getOperand(0);
    }
  }
  if (!isF32(x) || x.getType() != div->getResult(0).getType()) return false;
  int64_t rank = rankOf(x);
  // ReduceSum-13: axes is operand 1 (a constant here), keepdims defaults to 1.
  auto keep = sum->getAttrOfType<mlir::IntegerAttr>("keepdims");
  Tensor axes;
  if ((keep && keep.getInt() != 1) || sum->getNumOperands() < 2 ||
      !getConstantValue(sum->getOperand(1), &axes) || axes.numel() != 1 ||
      axes.dtype() != DType::I64)
    return false;
  int64_t axis = axes.data<int64_t>()[0];
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  if (x != exp->getOperand(0)) {
    mlir::Operation* mx = exp->getOperand(0).getDefiningOp()->getOperand(1).getDefiningOp();
    if (singleKeptAxis(mx, rank) != axis) return false;
  }
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

}  // namespace

bool rewriteCompositeOp(mlir::IRRewriter& rewriter, mlir::Operation* op) {
  std::string type = onnxOpType(op);
  if (op->getNumResults() != 1) return false;
  if (type == "Mul") return rewriteGelu(rewriter, op) || rewriteLayerNorm(rewriter, op);
  if (type == "Div") return rewriteLayerNorm(rewriter, op) || rewriteSoftmax(rewriter, op);
  if (type == "Add") return rewriteLayerNorm(rewriter, op) || rewriteMatMulAdd(rewriter, op);
  return false;
}

}  // namespace tandem

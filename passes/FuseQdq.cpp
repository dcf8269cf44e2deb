// --tandem-fuse-qdq: a convolution or matrix product written in QDQ form (DequantizeLinear ->
// Conv | MatMul | Gemm [-> bias Add] [-> Relu] -> QuantizeLinear, what PyTorch's
// quantization-aware training and ONNX Runtime's static quantizer export) becomes one int8
// QLinearConv, QLinearMatMul or QLinearMatMulBias, where the CPU has a fast kernel for it
// (passes/Passes.td).
#include <cmath>
#include <limits>

#include "compiler/ConstantFold.h"
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"
#include "runtime/Kernel.h"

namespace tandem {
#define GEN_PASS_DEF_TANDEMFUSEQDQ
#include "passes/Passes.h.inc"
}  // namespace tandem

namespace tandem {
namespace {

constexpr const char* kWho = "tandem-fuse-qdq";

/// The op of ONNX type `type` producing `v`, or null.
/// A Q or DQ op with scales per block (block_size, opsets 21+): never fused (the quantized
/// kernels take a scale per tensor or per channel).
bool blocked(mlir::Operation* op) {
  auto b = op->getAttrOfType<mlir::IntegerAttr>("block_size");
  return b && b.getInt() != 0;
}

/// The op of type `type` (not blocked) that defines v, or null.
mlir::Operation* producer(mlir::Value v, llvm::StringRef type) {
  mlir::Operation* d = v ? v.getDefiningOp() : nullptr;
  return d && onnxOpType(d) == type && !blocked(d) ? d : nullptr;
}

/// `op`'s operand i, or null when absent (past the end, or a tandem.none).
mlir::Value operandOrNull(mlir::Operation* op, unsigned i) {
  if (i >= op->getNumOperands()) return nullptr;
  mlir::Value v = op->getOperand(i);
  return v.getDefiningOp<NoneOp>() ? nullptr : v;
}

bool is8Bit(DType t) { return t == DType::U8 || t == DType::I8; }

/// One product in QDQ form, its constants read: DQ(x) -> Conv | MatMul | Gemm (-> Add of a
/// bias, MatMul only) [-> Relu] -> Q.
struct QdqProduct {
  mlir::Operation *dqX = nullptr, *dqW = nullptr, *product = nullptr, *transposeW = nullptr,
                  *add = nullptr, *dqB = nullptr, *relu = nullptr, *q = nullptr;
  bool conv = false;
  Tensor xScale, xZp, w, wScale, wZp, yScale, yZp, bias;
  /// The constants in the IR that hold them (null: made here, e.g. an absent zero point, or
  /// W transposed to [K, N]).
  mlir::Value xScaleV, xZpV, wV, wScaleV, wZpV, yScaleV, yZpV, biasV;

  /// The int8 op it becomes.
  const char* fusedType() const {
    return conv ? "QLinearConv" : bias.defined() ? "QLinearMatMulBias" : "QLinearMatMul";
  }
};

/// The element of a zero point as an integer.
int32_t intAt(const Tensor& t, int64_t i) {
  return t.dtype() == DType::U8 ? t.data<uint8_t>()[i] : t.data<int8_t>()[i];
}

/// A scale: f32, one value, or (per channel) `channels` values; all finite and > 0.
bool goodScale(const Tensor& t, int64_t channels) {
  if (t.dtype() != DType::F32 || (t.numel() != 1 && t.numel() != channels)) return false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float s = t.data<float>()[i];
    if (!(s > 0) || !std::isfinite(s)) return false;
  }
  return true;
}

/// The zero point operand i of a Q/DQ op as a constant of `type` with the scale's element
/// count, or (absent) zeros of `type`; false when it is not a constant or does not fit.
bool zeroPoint(mlir::Operation* op, unsigned i, DType type, int64_t count, Tensor* out,
               mlir::Value* value) {
  mlir::Value v = operandOrNull(op, i);
  *value = v;
  if (!v) {
    *out = Tensor::alloc(type, count == 1 ? Shape{} : Shape{count});  // zero-filled
    return true;
  }
  return getConstantValue(v, out) && out->dtype() == type && out->numel() == count;
}

/// The quantized weights behind the DequantizeLinear `dqW`: a constant, or a QuantizeLinear of
/// constants (folded here, by the CPU reference kernel, as canonicalize would).
bool quantizedWeights(mlir::Operation* dqW, mlir::RewriterBase& rewriter, Tensor* out,
                      mlir::Value* value) {
  mlir::Value v = dqW->getOperand(0);
  *value = v;
  if (getConstantValue(v, out)) return true;
  mlir::Operation* q = producer(v, "QuantizeLinear");
  if (!q || !v.hasOneUse()) return false;
  for (mlir::Value o : q->getOperands())
    if (!o.getDefiningOp<NoneOp>() && !getConstantValue(o, nullptr)) return false;
  llvm::SmallVector<mlir::Value> folded;
  mlir::FailureOr<bool> done = foldWithCpuKernel(rewriter, q, "QuantizeLinear",
                                                 std::numeric_limits<int64_t>::max(), kWho, &folded);
  if (mlir::failed(done) || !*done) return false;
  *value = folded[0];
  return getConstantValue(folded[0], out);
}

DType elementType(mlir::Value v) {
  auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
  return t ? mlirToDType(t.getElementType()) : DType::Undefined;
}

/// Whether this CPU runs the op `ctx` describes with a kernel other than the scalar reference
/// (about 100x slower than the f32 product a fusion would replace): the registry's variants.
/// `int8Only`: the exact f32 variants ("dnnl-f32", "avx2-f32": runtime/cpu/dnnl/
/// DnnlQuantized.cpp) do not count. They replace a QDQ group's f32 product by the same f32
/// product plus widening and requantization passes, and double it where W is split (measured,
/// AVX2 without VNNI: qdq_bert 12.0 ms fused vs 8.6 as written, qdq_resnet18 44.7 vs 21.3).
bool offersFastCpuKernel(const KernelContext& ctx, bool int8Only) {
  for (const std::string& v : KernelRegistry::global().variants("cpu", ctx))
    if (v != "ref" && !(int8Only && v.find("f32") != std::string::npos)) return true;
  return false;
}

/// The only reader of `v`, or null.
mlir::Operation* soleUser(mlir::Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

/// From the product's f32 result: [Add of a bias (matmul)] [Relu] QuantizeLinear, each value
/// read once; fills m->add, m->relu, m->q. Returns the bias operand of the Add, or null.
bool matchOutput(QdqProduct* m, mlir::Value* addBias) {
  mlir::Value y = m->product->getResult(0);
  mlir::Operation* user = soleUser(y);
  if (!user) return false;
  if (!m->conv && onnxOpType(user) == "Add") {
    m->add = user;
    *addBias = user->getOperand(user->getOperand(0) == y ? 1 : 0);
    if (user->getOperand(0) == user->getOperand(1) || user->getResult(0).getType() != y.getType())
      return false;  // x + x, or a bias that broadcasts the product to a larger shape
    y = user->getResult(0);
    if (!(user = soleUser(y))) return false;
  }
  if (onnxOpType(user) == "Relu") {
    m->relu = user;
    y = user->getResult(0);
    if (!(user = soleUser(y))) return false;
  }
  if (onnxOpType(user) != "QuantizeLinear" || user->getOperand(0) != y || blocked(user)) return false;
  m->q = user;
  return true;
}

/// x (DequantizeLinear's input) and y (the QuantizeLinear's result): 8-bit, scales and zero
/// points constant and per tensor.
bool matchActivations(QdqProduct* m) {
  const DType xType = elementType(m->dqX->getOperand(0)), yType = elementType(m->q->getResult(0));
  if (!is8Bit(xType) || !is8Bit(yType) || elementType(m->product->getResult(0)) != DType::F32)
    return false;
  m->xScaleV = m->dqX->getOperand(1);
  m->yScaleV = m->q->getOperand(1);
  if (!getConstantValue(m->xScaleV, &m->xScale) || !goodScale(m->xScale, 1) ||
      !zeroPoint(m->dqX, 2, xType, 1, &m->xZp, &m->xZpV))
    return false;
  if (!getConstantValue(m->yScaleV, &m->yScale) || !goodScale(m->yScale, 1) ||
      !zeroPoint(m->q, 2, yType, 1, &m->yZp, &m->yZpV))
    return false;
  // Relu before the quantization is the saturation at y's zero point when that is the type's
  // least value: Q(max(v, 0)) = max(Q(v), zp).
  return !m->relu || intAt(m->yZp, 0) == (yType == DType::U8 ? 0 : -128);
}

/// W_q [rows, ...] behind m->dqW: 8-bit constant, scales per tensor or per channel along
/// `channelAxis` (0 or 1) of `channels` channels.
bool matchWeights(QdqProduct* m, mlir::RewriterBase& rewriter, int64_t channelAxis,
                  int64_t channels) {
  m->wScaleV = m->dqW->getOperand(1);
  if (!getConstantValue(m->wScaleV, &m->wScale) || !goodScale(m->wScale, channels)) return false;
  if (m->wScale.numel() > 1) {
    auto axis = m->dqW->getAttrOfType<mlir::IntegerAttr>("axis");
    const int64_t rank = llvm::cast<mlir::RankedTensorType>(m->dqW->getResult(0).getType()).getRank();
    const int64_t a = axis ? axis.getInt() : 1;  // DequantizeLinear's default axis is 1
    if ((a < 0 ? a + rank : a) != channelAxis) return false;
  }
  return quantizedWeights(m->dqW, rewriter, &m->w, &m->wV) && is8Bit(m->w.dtype()) &&
         zeroPoint(m->dqW, 2, m->w.dtype(), m->wScale.numel(), &m->wZp, &m->wZpV);
}

/// B_q, the product's bias in i32 at scale x_scale * w_scale[c]: from an f32 constant
/// (round(B / (x_scale * w_scale)), half to even, as ONNX Runtime's quantizer does), or from a
/// DequantizeLinear of an i32 constant (what that quantizer writes): taken as it is where its
/// scale is x_scale * w_scale (in f32) and its zero point 0, else dequantized and requantized.
/// `b` must hold `channels` values (shape [channels], or [1, channels] for a matmul's Add).
bool matchBias(QdqProduct* m, mlir::Value b, int64_t channels) {
  auto t = llvm::dyn_cast<mlir::RankedTensorType>(b.getType());
  if (!t || !t.hasStaticShape() || t.getNumElements() != channels) return false;
  for (int64_t i = 0; i + 1 < t.getRank(); ++i)
    if (t.getShape()[i] != 1) return false;
  const float xs = m->xScale.data<float>()[0];
  auto biasScale = [&](int64_t c) {
    return xs * m->wScale.data<float>()[m->wScale.numel() == 1 ? 0 : c];  // f32, as ORT's
  };
  m->bias = Tensor::alloc(DType::I32, {channels});
  Tensor bf;
  if (mlir::Operation* dq = producer(b, "DequantizeLinear")) {
    Tensor q, s, z;
    mlir::Value zv;
    if (!b.hasOneUse() || !getConstantValue(dq->getOperand(0), &q) || q.dtype() != DType::I32 ||
        !getConstantValue(dq->getOperand(1), &s) || s.dtype() != DType::F32 ||
        (s.numel() != 1 && s.numel() != channels) ||
        !zeroPoint(dq, 2, DType::I32, s.numel(), &z, &zv))
      return false;
    m->dqB = dq;
    bool exact = true;
    for (int64_t c = 0; c < channels && exact; ++c)
      exact = s.data<float>()[s.numel() == 1 ? 0 : c] == biasScale(c) &&
              z.data<int32_t>()[z.numel() == 1 ? 0 : c] == 0;
    if (exact) {
      std::copy(q.data<int32_t>(), q.data<int32_t>() + channels, m->bias.data<int32_t>());
      if (q.shape() == Shape{channels}) m->biasV = dq->getOperand(0);
      return true;
    }
    // DequantizeLinear's own f32 arithmetic: (q - zp) * scale.
    bf = Tensor::alloc(DType::F32, {channels});
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t k = s.numel() == 1 ? 0 : c;
      bf.data<float>()[c] =
          float(q.data<int32_t>()[c] - z.data<int32_t>()[z.numel() == 1 ? 0 : k]) * s.data<float>()[k];
    }
  } else if (!getConstantValue(b, &bf) || bf.dtype() != DType::F32) {
    return false;
  }
  for (int64_t c = 0; c < channels; ++c) {
    const double r = std::nearbyint(double(bf.data<float>()[c]) / double(biasScale(c)));
    if (!(std::fabs(r) <= 2147483647.0)) return false;
    m->bias.data<int32_t>()[c] = int32_t(r);
  }
  return true;
}

/// W_q [N, K] as [K, N] (a matmul's b, columns the output channels).
Tensor transposed(const Tensor& w) {
  const int64_t rows = w.shape()[0], cols = w.shape()[1];
  Tensor t = Tensor::alloc(w.dtype(), {cols, rows});
  const auto* src = static_cast<const uint8_t*>(w.raw());  // 8-bit either way
  auto* dst = static_cast<uint8_t*>(t.raw());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  return t;
}

/// Whether `conv` heads a QDQ convolution; fills `m`. Reads constants, changes nothing but a
/// weight QuantizeLinear of constants, which it folds (an equivalent graph either way).
bool matchConv(mlir::Operation* conv, mlir::RewriterBase& rewriter, QdqProduct* m) {
  m->product = conv;
  m->conv = true;
  m->dqX = producer(conv->getOperand(0), "DequantizeLinear");
  m->dqW = producer(conv->getOperand(1), "DequantizeLinear");
  mlir::Value unused;
  if (!m->dqX || !m->dqW || !matchOutput(m, &unused) || !matchActivations(m)) return false;
  auto wt = llvm::dyn_cast<mlir::RankedTensorType>(conv->getOperand(1).getType());
  if (!wt || !wt.hasStaticShape() || wt.getRank() < 3) return false;
  const int64_t channels = wt.getShape()[0];
  if (!matchWeights(m, rewriter, 0, channels)) return false;
  mlir::Value b = operandOrNull(conv, 2);
  return !b || matchBias(m, b, channels);
}

/// The weights of the MatMul or Gemm `op` as written before any transpose: *w is Gemm's B
/// (*rowsAreChannels = transB: W [N, K]) or MatMul's B, or the operand of a Transpose (perm
/// [1, 0]) that gives MatMul's B (*transpose = it, *rowsAreChannels). False for a Gemm other
/// than A' = A, alpha 1, beta 1, or a Transpose of another permutation.
bool weightOperand(mlir::Operation* op, mlir::Value* w, mlir::Operation** transpose,
                   bool* rowsAreChannels) {
  *w = op->getOperand(1);
  *transpose = nullptr;
  *rowsAreChannels = false;
  if (onnxOpType(op) == "Gemm") {
    auto attrInt = [&](const char* n) {
      auto a = op->getAttrOfType<mlir::IntegerAttr>(n);
      return a ? a.getInt() : 0;
    };
    auto attrFloat = [&](const char* n) {
      auto a = op->getAttrOfType<mlir::FloatAttr>(n);
      return a ? a.getValueAsDouble() : 1.0;
    };
    if (attrInt("transA") != 0 || attrFloat("alpha") != 1.0 || attrFloat("beta") != 1.0) return false;
    *rowsAreChannels = attrInt("transB") != 0;
  } else if (mlir::Operation* t = producer(*w, "Transpose")) {
    auto perm = t->getAttrOfType<mlir::ArrayAttr>("perm");
    const bool swap = !perm || (perm.size() == 2 &&
                                llvm::cast<mlir::IntegerAttr>(perm[0]).getInt() == 1 &&
                                llvm::cast<mlir::IntegerAttr>(perm[1]).getInt() == 0);
    if (!swap) return false;
    *transpose = t;
    *w = t->getOperand(0);
    *rowsAreChannels = true;
  }
  return true;
}

/// Whether `op` (MatMul or Gemm) heads a QDQ matrix product with constant weights; fills `m`.
/// W reaches it as DequantizeLinear(W_q [K, N]), or transposed: through Transpose (MatMul) or
/// transB = 1 (Gemm) from W_q [N, K], which is then transposed here.
bool matchMatMul(mlir::Operation* op, mlir::RewriterBase& rewriter, QdqProduct* m) {
  m->product = op;
  const bool gemm = onnxOpType(op) == "Gemm";
  m->dqX = producer(op->getOperand(0), "DequantizeLinear");
  if (!m->dqX) return false;
  mlir::Value w;
  bool rowsAreChannels = false;
  if (!weightOperand(op, &w, &m->transposeW, &rowsAreChannels) ||
      (m->transposeW && !op->getOperand(1).hasOneUse()))
    return false;
  m->dqW = producer(w, "DequantizeLinear");
  auto wt = llvm::dyn_cast<mlir::RankedTensorType>(w.getType());
  if (!m->dqW || !wt || !wt.hasStaticShape() || wt.getRank() != 2) return false;
  auto xt = llvm::dyn_cast<mlir::RankedTensorType>(op->getOperand(0).getType());
  if (!xt || xt.getRank() < 2 || (gemm && xt.getRank() != 2)) return false;
  mlir::Value addBias;
  if (!matchOutput(m, &addBias) || !matchActivations(m)) return false;
  const int64_t channels = wt.getShape()[rowsAreChannels ? 0 : 1];
  if (!matchWeights(m, rewriter, rowsAreChannels ? 0 : 1, channels)) return false;
  if (rowsAreChannels) {
    m->w = transposed(m->w);
    m->wV = nullptr;
  }
  mlir::Value b = gemm ? operandOrNull(op, 2) : addBias;
  return !b || matchBias(m, b, channels);
}

/// A product of ONNX Runtime's dynamic quantization (quantize_dynamic): DynamicQuantizeLinear(x)
/// -> MatMulInteger(x_q, W_q, x_zero_point[, w_zero_point]) -> Cast(f32) -> Mul by
/// Mul(x_scale, w_scale), W_q a constant matrix and w_scale a constant.
struct DynamicProduct {
  mlir::Operation *dql = nullptr, *matmul = nullptr, *cast = nullptr, *scale = nullptr,
                  *mul = nullptr;
  mlir::Value w, wScale, wZp;
  Tensor wT, wScaleT, wZpT;
};

/// Whether the Mul `mul` ends a dynamically quantized product; fills `m`.
bool matchDynamic(mlir::Operation* mul, DynamicProduct* m) {
  m->mul = mul;
  for (unsigned i = 0; i < 2 && !m->cast; ++i) {
    mlir::Operation* c = producer(mul->getOperand(i), "Cast");
    mlir::Operation* s = producer(mul->getOperand(1 - i), "Mul");
    if (c && s) m->cast = c, m->scale = s;
  }
  if (!m->cast || !m->cast->getResult(0).hasOneUse() ||
      elementType(m->cast->getResult(0)) != DType::F32 || elementType(mul->getResult(0)) != DType::F32)
    return false;
  m->matmul = producer(m->cast->getOperand(0), "MatMulInteger");
  if (!m->matmul || !m->matmul->getResult(0).hasOneUse() || m->matmul->getNumOperands() < 3)
    return false;
  m->dql = producer(m->matmul->getOperand(0), "DynamicQuantizeLinear");
  if (!m->dql || m->matmul->getOperand(0) != m->dql->getResult(0) ||
      operandOrNull(m->matmul, 2) != m->dql->getResult(2))
    return false;
  // The scale: Mul(x_scale, w_scale) in either order, w_scale a constant f32 of 1 or N values.
  m->w = m->matmul->getOperand(1);
  if (!getConstantValue(m->w, &m->wT) || m->wT.shape().size() != 2 || !is8Bit(m->wT.dtype()))
    return false;
  const int64_t n = m->wT.shape()[1];
  mlir::Value s0 = m->scale->getOperand(0), s1 = m->scale->getOperand(1);
  if (s1 == m->dql->getResult(1)) std::swap(s0, s1);
  if (s0 != m->dql->getResult(1)) return false;
  m->wScale = s1;
  if (!getConstantValue(s1, &m->wScaleT) || m->wScaleT.dtype() != DType::F32 ||
      (m->wScaleT.numel() != 1 && m->wScaleT.numel() != n))
    return false;
  // Y's shape is the Mul's: the scale must not broadcast it further.
  if (mul->getResult(0).getType() != m->cast->getResult(0).getType()) return false;
  m->wZp = operandOrNull(m->matmul, 3);
  return !m->wZp || (getConstantValue(m->wZp, &m->wZpT) && m->wZpT.dtype() == m->wT.dtype() &&
                     (m->wZpT.numel() == 1 || m->wZpT.numel() == n));
}

/// Whether this CPU has a kernel other than the reference for the DynamicQuantizeMatMul (the
/// exact f32 ones count: MatMulInteger as written would take them too).
bool hasFastCpuKernel(const DynamicProduct& m) {
  AttrMap attrs;
  KernelContext ctx;
  ctx.opType = "DynamicQuantizeMatMul";
  ctx.nodeName = nodeName(m.matmul->getLoc());
  ctx.attrs = &attrs;
  ctx.inputTypes = {tensorTypeOf(m.dql->getOperand(0)), {m.wT.dtype(), m.wT.shape()},
                    {DType::F32, m.wScaleT.shape()}};
  ctx.constInputs = {nullptr, &m.wT, &m.wScaleT};
  if (m.wZp) {
    ctx.inputTypes.push_back({m.wZpT.dtype(), m.wZpT.shape()});
    ctx.constInputs.push_back(&m.wZpT);
  }
  ctx.outputTypes = {tensorTypeOf(m.mul->getResult(0))};
  return offersFastCpuKernel(ctx, /*int8Only=*/false);
}

/// A matrix product of f32 activations (not dequantized) and weights that are DequantizeLinear
/// of 8-bit constants, whose result stays f32 (weight-only quantization: ONNX Runtime's 4-bit and 8-bit weight quantizers, in
/// their QDQ form): MatMul(A, DQ(W_q [K, N])) or through Transpose from W_q [N, K], or
/// Gemm(A, DQ(W_q), C) with transB; [-> Add of a constant bias row] for MatMul. Scales per
/// tensor, per output column, or in blocks along K (DequantizeLinear-21's block_size).
struct WeightOnlyProduct {
  mlir::Operation *product = nullptr, *dq = nullptr, *transpose = nullptr, *add = nullptr;
  /// Canonical operands of DequantizeMatMul: B_q [K, N]; scale and zero point [], [N] or
  /// [ceil(K / blockSize), N]; bias [N].
  Tensor b, scale, zp, bias;
  /// The IR's constants that hold them as they are (null: made here, transposed or reshaped),
  /// so that products sharing one DequantizeLinear share its constants.
  mlir::Value bV, scaleV, zpV, biasV;
  int64_t blockSize = 0;
};

/// A constant f32 row of `n` values, shape [n] or [1, ..., 1, n].
bool constantRow(mlir::Value v, int64_t n, Tensor* out) {
  if (!getConstantValue(v, out) || out->dtype() != DType::F32 || out->numel() != n) return false;
  const Shape& s = out->shape();
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (s[i] != 1) return false;
  *out = out->reshaped({n});
  return true;
}

/// An f32 or 8-bit [rows, cols] matrix transposed.
Tensor transposedMatrix(const Tensor& t) {
  if (t.dtype() != DType::F32) return transposed(t);
  const int64_t rows = t.shape()[0], cols = t.shape()[1];
  Tensor r = Tensor::alloc(DType::F32, {cols, rows});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) r.data<float>()[j * rows + i] = t.data<float>()[i * cols + j];
  return r;
}

/// Whether `op` (MatMul or Gemm) is a weight-only quantized product; fills `m` (reads
/// constants, changes nothing).
bool matchWeightOnly(mlir::Operation* op, WeightOnlyProduct* m) {
  m->product = op;
  const bool gemm = onnxOpType(op) == "Gemm";
  // A must not come from a DequantizeLinear: a QDQ product (static quantization) that did not
  // become an int8 op stays as written, its weights folded to f32, as before this fusion.
  auto at = llvm::dyn_cast<mlir::RankedTensorType>(op->getOperand(0).getType());
  mlir::Operation* aDef = op->getOperand(0).getDefiningOp();
  if (!at || at.getRank() < 2 || (gemm && at.getRank() != 2) ||
      elementType(op->getOperand(0)) != DType::F32 || elementType(op->getResult(0)) != DType::F32 ||
      (aDef && onnxOpType(aDef) == "DequantizeLinear"))
    return false;
  mlir::Value w;
  bool rowsAreChannels = false;  // W_q is [N, K]
  if (!weightOperand(op, &w, &m->transpose, &rowsAreChannels)) return false;
  mlir::Operation* dq = w.getDefiningOp();
  if (!dq || onnxOpType(dq) != "DequantizeLinear" || elementType(w) != DType::F32) return false;
  m->dq = dq;
  Tensor q, scale, zp;
  if (!getConstantValue(dq->getOperand(0), &q) || !is8Bit(q.dtype()) || q.shape().size() != 2 ||
      !getConstantValue(dq->getOperand(1), &scale) || scale.dtype() != DType::F32)
    return false;
  mlir::Value zpV = operandOrNull(dq, 2);
  if (zpV && (!getConstantValue(zpV, &zp) || zp.dtype() != q.dtype() || zp.shape() != scale.shape()))
    return false;
  const int64_t kAxis = rowsAreChannels ? 1 : 0;
  const int64_t K = q.shape()[kAxis], N = q.shape()[1 - kAxis];
  auto axisAttr = dq->getAttrOfType<mlir::IntegerAttr>("axis");
  auto blockAttr = dq->getAttrOfType<mlir::IntegerAttr>("block_size");
  int64_t axis = axisAttr ? axisAttr.getInt() : 1;
  if (axis < 0) axis += 2;
  m->blockSize = blockAttr ? blockAttr.getInt() : 0;
  if (m->blockSize > 0) {
    // Blocks along K; the scale is W_q's shape with ceil(K / block_size) along K.
    Shape want = q.shape();
    want[kAxis] = (K + m->blockSize - 1) / m->blockSize;
    if (axis != kAxis || scale.shape() != want) return false;
  } else if (scale.numel() != 1 && !(scale.shape() == Shape{N} && axis == 1 - kAxis)) {
    return false;  // per row of K (no such kernel): folded to f32 as before
  }
  const bool reshapeParams = m->blockSize > 0 && rowsAreChannels;
  m->b = rowsAreChannels ? transposed(q) : q;
  m->scale = reshapeParams ? transposedMatrix(scale) : scale;
  if (zpV) m->zp = reshapeParams ? transposed(zp) : zp;
  if (!rowsAreChannels) m->bV = dq->getOperand(0);
  if (!reshapeParams) m->scaleV = dq->getOperand(1), m->zpV = zpV;
  // The bias: Gemm's C, or the Add right after a MatMul read by nothing else.
  if (gemm) {
    mlir::Value c = operandOrNull(op, 2);
    if (c && !constantRow(c, N, &m->bias)) return false;
    if (c && m->bias.shape() == tensorTypeOf(c).shape) m->biasV = c;
  } else if (mlir::Operation* add = soleUser(op->getResult(0))) {
    mlir::Value y = op->getResult(0);
    if (onnxOpType(add) == "Add" && add->getOperand(0) != add->getOperand(1) &&
        add->getResult(0).getType() == y.getType() &&
        constantRow(add->getOperand(add->getOperand(0) == y ? 1 : 0), N, &m->bias)) {
      m->add = add;
      mlir::Value c = add->getOperand(add->getOperand(0) == y ? 1 : 0);
      if (m->bias.shape() == tensorTypeOf(c).shape) m->biasV = c;
    }
  }
  return true;
}

/// Whether this CPU has a kernel other than the reference for the DequantizeMatMul `m` makes
/// (the reference dequantizes B on every run: slower than the f32 product it would replace).
bool hasFastCpuKernel(const WeightOnlyProduct& m) {
  AttrMap attrs;
  attrs.set("block_size", Attr::ofInt(m.blockSize));
  KernelContext ctx;
  ctx.opType = "DequantizeMatMul";
  ctx.nodeName = nodeName(m.product->getLoc());
  ctx.attrs = &attrs;
  ctx.inputTypes = {tensorTypeOf(m.product->getOperand(0)), {m.b.dtype(), m.b.shape()},
                    {DType::F32, m.scale.shape()}};
  ctx.constInputs = {nullptr, &m.b, &m.scale};
  for (const Tensor* t : {&m.zp, &m.bias}) {
    ctx.inputTypes.push_back(t->defined() ? TensorType{t->dtype(), t->shape()} : TensorType{});
    ctx.constInputs.push_back(t->defined() ? t : nullptr);
  }
  ctx.outputTypes = {tensorTypeOf((m.add ? m.add : m.product)->getResult(0))};
  return offersFastCpuKernel(ctx, /*int8Only=*/false);
}

/// The fused op's operand types, constants and attributes as the kernel registry reads them.
struct KernelQuery {
  std::vector<Tensor> consts;
  AttrMap attrs;
  KernelContext ctx;
};

void buildQuery(const QdqProduct& m, KernelQuery* k) {
  k->consts = {Tensor(), m.xScale, m.xZp, m.w, m.wScale, m.wZp, m.yScale, m.yZp};
  if (m.conv || m.bias.defined()) k->consts.push_back(m.bias);
  if (m.conv) k->attrs = toAttrMap(m.product);
  k->ctx.opType = m.fusedType();
  k->ctx.nodeName = nodeName(m.product->getLoc());
  k->ctx.attrs = &k->attrs;
  for (size_t i = 0; i < k->consts.size(); ++i) {
    const Tensor& t = k->consts[i];
    if (i == 0) k->ctx.inputTypes.push_back(tensorTypeOf(m.dqX->getOperand(0)));
    else k->ctx.inputTypes.push_back(t.defined() ? TensorType{t.dtype(), t.shape()} : TensorType{});
    k->ctx.constInputs.push_back(i > 0 && t.defined() ? &k->consts[i] : nullptr);
  }
  k->ctx.outputTypes.push_back(tensorTypeOf(m.q->getResult(0)));
}

/// Whether this CPU runs the fused op with an int8 kernel (the reference is about 100x slower
/// than the f32 product it would replace, the exact f32 variants slower too).
bool hasFastCpuKernel(const QdqProduct& m) {
  KernelQuery k;
  buildQuery(m, &k);
  return offersFastCpuKernel(k.ctx, /*int8Only=*/true);
}

/// Creates Tandem op `type` of `operands` before `old` and replaces `old`'s results by it; fails
/// (with an error on `old`) where the new op does not infer `old`'s result type.
mlir::LogicalResult replaceByFused(mlir::RewriterBase& rewriter, mlir::Operation* old,
                                   mlir::Location loc, const char* type,
                                   llvm::ArrayRef<mlir::Value> operands,
                                   llvm::ArrayRef<mlir::NamedAttribute> attrs) {
  rewriter.setInsertionPoint(old);
  mlir::FailureOr<mlir::Operation*> fused = createTandemOp(rewriter, loc, type, operands, attrs);
  if (mlir::failed(fused)) return mlir::failure();
  if ((*fused)->getResult(0).getType() != old->getResult(0).getType())
    return old->emitError() << kWho << ": " << type << " infers " << (*fused)->getResult(0).getType()
                            << " where the " << onnxOpType(old) << " it replaces gives "
                            << old->getResult(0).getType();
  rewriter.replaceOp(old, (*fused)->getResults());
  return mlir::success();
}

struct FuseQdqPass : public impl::TandemFuseQdqBase<FuseQdqPass> {
  using TandemFuseQdqBase::TandemFuseQdqBase;

  void runOnOperation() override {
    mlir::func::FuncOp main = getMainFunc(getOperation());
    if (!main) return;
    mlir::IRRewriter rewriter(&getContext());
    // Identity between a constant and its readers (exporters name every scale and zero point
    // through one) would hide the constant: its readers read the constant instead.
    llvm::SmallVector<mlir::Operation*> ops;
    for (mlir::Operation& op : main.getBody().front()) ops.push_back(&op);
    for (mlir::Operation* op : ops)
      if (onnxOpType(op) == "Identity" && getConstantValue(op->getOperand(0), nullptr))
        op->getResult(0).replaceUsesWithIf(op->getOperand(0), [](mlir::OpOperand& u) {
          return !llvm::isa<mlir::func::ReturnOp>(u.getOwner());
        });
    llvm::DenseSet<mlir::Operation*> erased;  // ops of `ops` a fusion removed
    int64_t withoutFastKernel = 0, weightOnlyWithoutFastKernel = 0;
    for (mlir::Operation* op : ops) {
      if (erased.contains(op)) continue;
      const std::string type = onnxOpType(op);
      QdqProduct m;
      if (type == "Conv") {
        if (!matchConv(op, rewriter, &m)) continue;
      } else if (type == "MatMul" || type == "Gemm") {
        if (!matchMatMul(op, rewriter, &m)) {
          WeightOnlyProduct w;
          if (!matchWeightOnly(op, &w)) continue;
          if (requireFastKernel && !hasFastCpuKernel(w)) {
            ++weightOnlyWithoutFastKernel;
            continue;
          }
          mlir::Operation* last = w.add ? w.add : op;
          rewriter.setInsertionPoint(last);
          const mlir::Location loc = op->getLoc();
          auto constant = [&](mlir::Value v, const Tensor& t) {
            return v ? v : t.defined() ? createConstant(rewriter, loc, t) : mlir::Value();
          };
          llvm::SmallVector<mlir::Value> operands = {
              op->getOperand(0), constant(w.bV, w.b), constant(w.scaleV, w.scale),
              constant(w.zpV, w.zp), constant(w.biasV, w.bias)};
          llvm::SmallVector<mlir::NamedAttribute> attrs;
          if (w.blockSize > 0)
            attrs.push_back(rewriter.getNamedAttr("block_size", rewriter.getI64IntegerAttr(w.blockSize)));
          if (mlir::failed(replaceByFused(rewriter, last, loc, "DequantizeMatMul", operands, attrs)))
            return signalPassFailure();
          for (mlir::Operation* dead : {w.add, op}) {
            if (!dead) continue;
            if (dead != last) rewriter.eraseOp(dead);
            erased.insert(dead);
          }
          for (mlir::Operation* dead : {w.transpose, w.dq})
            if (dead && dead->use_empty()) {
              rewriter.eraseOp(dead);
              erased.insert(dead);
            }
          continue;
        }
      } else if (type == "Mul") {
        DynamicProduct d;
        if (!matchDynamic(op, &d)) continue;
        if (requireFastKernel && !hasFastCpuKernel(d)) {
          ++withoutFastKernel;
          continue;
        }
        llvm::SmallVector<mlir::Value> operands = {d.dql->getOperand(0), d.w, d.wScale};
        if (d.wZp) operands.push_back(d.wZp);
        if (mlir::failed(replaceByFused(rewriter, op, d.matmul->getLoc(), "DynamicQuantizeMatMul",
                                        operands, {})))
          return signalPassFailure();
        erased.insert(op);
        for (mlir::Operation* dead : {d.cast, d.matmul, d.scale, d.dql})
          if (dead->use_empty()) {
            rewriter.eraseOp(dead);
            erased.insert(dead);
          }
        continue;
      } else {
        continue;
      }
      if (requireFastKernel && !hasFastCpuKernel(m)) {
        ++withoutFastKernel;
        continue;
      }
      rewriter.setInsertionPoint(m.q);
      const mlir::Location loc = op->getLoc();
      // The graph's own constants where it has them; new ones for absent zero points, a
      // transposed W and B_q.
      auto constant = [&](mlir::Value v, const Tensor& t) {
        return v ? v : createConstant(rewriter, loc, t);
      };
      llvm::SmallVector<mlir::Value> operands = {
          m.dqX->getOperand(0),    m.xScaleV, constant(m.xZpV, m.xZp), constant(m.wV, m.w),
          m.wScaleV,               constant(m.wZpV, m.wZp), m.yScaleV, constant(m.yZpV, m.yZp)};
      if (m.bias.defined()) operands.push_back(constant(m.biasV, m.bias));
      llvm::SmallVector<mlir::NamedAttribute> attrs;
      if (m.conv)
        for (const char* name : {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})
          if (mlir::Attribute a = op->getAttr(name)) attrs.push_back(rewriter.getNamedAttr(name, a));
      if (mlir::failed(replaceByFused(rewriter, m.q, loc, m.fusedType(), operands, attrs)))
        return signalPassFailure();
      // The chain from the QuantizeLinear back to the product, each read only by the next.
      for (mlir::Operation* dead : {m.q, m.relu, m.add, op}) {
        if (!dead) continue;
        if (dead != m.q) rewriter.eraseOp(dead);
        erased.insert(dead);
      }
      // Earlier in `ops` (already passed): erased once nothing reads them.
      for (mlir::Operation* dq : {m.dqB, m.transposeW, m.dqW, m.dqX})
        if (dq && dq->use_empty()) {
          rewriter.eraseOp(dq);
          erased.insert(dq);
        }
    }
    if (withoutFastKernel > 0)
      getOperation()->setAttr(kQdqWithoutFastKernelAttr,
                              rewriter.getI64IntegerAttr(withoutFastKernel));
    if (weightOnlyWithoutFastKernel > 0)
      getOperation()->setAttr(kWeightOnlyWithoutFastKernelAttr,
                              rewriter.getI64IntegerAttr(weightOnlyWithoutFastKernel));
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createFuseQdqPass() { return std::make_unique<FuseQdqPass>(); }
std::unique_ptr<mlir::Pass> createFuseQdqPass(const TandemFuseQdqOptions& options) {
  return std::make_unique<FuseQdqPass>(options);
}

}  // namespace tandem

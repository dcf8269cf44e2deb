// --tandem-fuse-qdq: a convolution written in QDQ form (DequantizeLinear -> Conv [-> Relu] ->
// QuantizeLinear, what PyTorch's quantization-aware training and ONNX Runtime's static quantizer
// export) becomes one int8 QLinearConv, where the CPU has a fast kernel for it (passes/Passes.td).
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
mlir::Operation* producer(mlir::Value v, llvm::StringRef type) {
  mlir::Operation* d = v ? v.getDefiningOp() : nullptr;
  return d && onnxOpType(d) == type ? d : nullptr;
}

/// `op`'s operand i, or null when absent (past the end, or a tandem.none).
mlir::Value operandOrNull(mlir::Operation* op, unsigned i) {
  if (i >= op->getNumOperands()) return nullptr;
  mlir::Value v = op->getOperand(i);
  return v.getDefiningOp<NoneOp>() ? nullptr : v;
}

bool is8Bit(DType t) { return t == DType::U8 || t == DType::I8; }

/// One convolution in QDQ form, its constants read.
struct QdqConv {
  mlir::Operation *dqX = nullptr, *dqW = nullptr, *conv = nullptr, *relu = nullptr, *q = nullptr;
  Tensor xScale, xZp, w, wScale, wZp, yScale, yZp, bias;
  /// The constants in the IR that hold them (null: made here, e.g. an absent zero point).
  mlir::Value xScaleV, xZpV, wV, wScaleV, wZpV, yScaleV, yZpV;
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

/// Whether `conv` heads a QDQ convolution; fills `m`. Reads constants, changes nothing but a
/// weight QuantizeLinear of constants, which it folds (an equivalent graph either way).
bool match(mlir::Operation* conv, mlir::RewriterBase& rewriter, QdqConv* m) {
  m->conv = conv;
  m->dqX = producer(conv->getOperand(0), "DequantizeLinear");
  m->dqW = producer(conv->getOperand(1), "DequantizeLinear");
  if (!m->dqX || !m->dqW) return false;
  // The result: QuantizeLinear, maybe through a Relu, each value read once.
  mlir::Value y = conv->getResult(0);
  if (!y.hasOneUse()) return false;
  mlir::Operation* user = *y.getUsers().begin();
  if (onnxOpType(user) == "Relu") {
    m->relu = user;
    if (!user->getResult(0).hasOneUse()) return false;
    user = *user->getResult(0).getUsers().begin();
  }
  if (onnxOpType(user) != "QuantizeLinear" || user->getOperand(0) != (m->relu ? m->relu : conv)->getResult(0))
    return false;
  m->q = user;
  auto type = [](mlir::Value v) {
    auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
    return t ? mlirToDType(t.getElementType()) : DType::Undefined;
  };
  const DType xType = type(m->dqX->getOperand(0)), yType = type(m->q->getResult(0));
  if (!is8Bit(xType) || !is8Bit(yType) || type(conv->getResult(0)) != DType::F32) return false;
  // x and y: per tensor.
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
  if (m->relu && intAt(m->yZp, 0) != (yType == DType::U8 ? 0 : -128)) return false;
  // W: constant 8-bit, per tensor or per output channel (axis 0).
  auto wt = llvm::dyn_cast<mlir::RankedTensorType>(conv->getOperand(1).getType());
  if (!wt || !wt.hasStaticShape() || wt.getRank() < 3) return false;
  const int64_t channels = wt.getShape()[0];
  m->wScaleV = m->dqW->getOperand(1);
  if (!getConstantValue(m->wScaleV, &m->wScale) || !goodScale(m->wScale, channels)) return false;
  auto axis = m->dqW->getAttrOfType<mlir::IntegerAttr>("axis");
  if (m->wScale.numel() > 1 && (!axis || axis.getInt() != 0)) return false;
  if (!quantizedWeights(m->dqW, rewriter, &m->w, &m->wV) || !is8Bit(m->w.dtype()) ||
      !zeroPoint(m->dqW, 2, m->w.dtype(), m->wScale.numel(), &m->wZp, &m->wZpV))
    return false;
  // The f32 bias, quantized at x_scale * w_scale (ONNX Runtime's quantizer does the same):
  // B_q = round(B / (x_scale * w_scale[m])), half to even, which must fit i32.
  if (mlir::Value b = operandOrNull(conv, 2)) {
    Tensor bf;
    if (!getConstantValue(b, &bf) || bf.dtype() != DType::F32 || bf.numel() != channels) return false;
    m->bias = Tensor::alloc(DType::I32, {channels});
    const float xs = m->xScale.data<float>()[0];
    for (int64_t c = 0; c < channels; ++c) {
      const float ws = m->wScale.data<float>()[m->wScale.numel() == 1 ? 0 : c];
      const double q = std::nearbyint(double(bf.data<float>()[c]) / double(xs * ws));
      if (!(std::fabs(q) <= 2147483647.0)) return false;
      m->bias.data<int32_t>()[c] = int32_t(q);
    }
  }
  return true;
}

/// The QLinearConv's operand types, constants and attributes as the kernel registry reads them.
struct KernelQuery {
  std::vector<Tensor> consts;
  AttrMap attrs;
  KernelContext ctx;
};

void buildQuery(const QdqConv& m, KernelQuery* k) {
  auto shapeOf = [](mlir::Value v) {
    auto t = llvm::cast<mlir::RankedTensorType>(v.getType());
    return TensorType{mlirToDType(t.getElementType()), Shape(t.getShape().begin(), t.getShape().end())};
  };
  k->consts = {Tensor(), m.xScale, m.xZp, m.w, m.wScale, m.wZp, m.yScale, m.yZp, m.bias};
  k->attrs = toAttrMap(m.conv);
  k->ctx.opType = "QLinearConv";
  k->ctx.nodeName = nodeName(m.conv->getLoc());
  k->ctx.attrs = &k->attrs;
  for (size_t i = 0; i < k->consts.size(); ++i) {
    const Tensor& t = k->consts[i];
    if (i == 0) k->ctx.inputTypes.push_back(shapeOf(m.dqX->getOperand(0)));
    else k->ctx.inputTypes.push_back(t.defined() ? TensorType{t.dtype(), t.shape()} : TensorType{});
    k->ctx.constInputs.push_back(i > 0 && t.defined() ? &k->consts[i] : nullptr);
  }
  k->ctx.outputTypes.push_back(shapeOf(m.q->getResult(0)));
}

/// Whether this CPU runs the QLinearConv with a kernel other than the scalar reference (which
/// is about 100x slower than the f32 convolution it would replace): the registry's variants.
bool hasFastCpuKernel(const QdqConv& m) {
  KernelQuery k;
  buildQuery(m, &k);
  for (const std::string& v : KernelRegistry::global().variants("cpu", k.ctx))
    if (v != "ref") return true;
  return false;
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
    int64_t withoutFastKernel = 0;
    for (mlir::Operation* op : ops) {
      if (erased.contains(op) || onnxOpType(op) != "Conv") continue;
      QdqConv m;
      if (!match(op, rewriter, &m)) continue;
      if (requireFastKernel && !hasFastCpuKernel(m)) {
        ++withoutFastKernel;
        continue;
      }
      rewriter.setInsertionPoint(m.q);
      const mlir::Location loc = op->getLoc();
      // The graph's own constants where it has them; new ones for absent zero points and B_q.
      auto constant = [&](mlir::Value v, const Tensor& t) {
        return v ? v : createConstant(rewriter, loc, t);
      };
      llvm::SmallVector<mlir::Value> operands = {
          m.dqX->getOperand(0),        m.xScaleV, constant(m.xZpV, m.xZp), m.wV, m.wScaleV,
          constant(m.wZpV, m.wZp),     m.yScaleV, constant(m.yZpV, m.yZp),
          m.bias.defined() ? constant(nullptr, m.bias) : mlir::Value()};
      llvm::SmallVector<mlir::NamedAttribute> attrs;
      for (const char* name : {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})
        if (mlir::Attribute a = op->getAttr(name)) attrs.push_back(rewriter.getNamedAttr(name, a));
      mlir::FailureOr<mlir::Operation*> qconv =
          createTandemOp(rewriter, loc, "QLinearConv", operands, attrs);
      if (mlir::failed(qconv)) return signalPassFailure();
      if ((*qconv)->getResult(0).getType() != m.q->getResult(0).getType()) {
        op->emitError() << kWho << ": QLinearConv infers " << (*qconv)->getResult(0).getType()
                        << " where the QuantizeLinear it replaces gives "
                        << m.q->getResult(0).getType();
        return signalPassFailure();
      }
      rewriter.replaceOp(m.q, (*qconv)->getResults());
      erased.insert(m.q);
      if (m.relu) {
        rewriter.eraseOp(m.relu);
        erased.insert(m.relu);
      }
      rewriter.eraseOp(op);
      for (mlir::Operation* dq : {m.dqW, m.dqX})
        if (dq->use_empty()) rewriter.eraseOp(dq);  // earlier in `ops`: already passed
    }
    if (withoutFastKernel > 0)
      getOperation()->setAttr(kQdqWithoutFastKernelAttr,
                              rewriter.getI64IntegerAttr(withoutFastKernel));
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createFuseQdqPass() { return std::make_unique<FuseQdqPass>(); }
std::unique_ptr<mlir::Pass> createFuseQdqPass(const TandemFuseQdqOptions& options) {
  return std::make_unique<FuseQdqPass>(options);
}

}  // namespace tandem

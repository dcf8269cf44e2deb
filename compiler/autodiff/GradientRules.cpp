// The gradient rules (one function per op, GradientRules.h) and the builder they share. Each rule
// is written with ordinary forward ops (MatMul, Transpose, ReduceSum, ConvTranspose, ...), so the
// backward graph gets kernels, placement and fusion on every backend for free; MaxPool's and
// GlobalMaxPool's use MaxPoolGrad.
#include "compiler/autodiff/GradientRules.h"

#include "compiler/IrConventions.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "compiler/OpBuilding.h"
#include "mlir/IR/Diagnostics.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem::autodiff {

// ---- GradBuilder ----------------------------------------------------------------------------

mlir::Value GradBuilder::op(llvm::StringRef onnxType, llvm::ArrayRef<mlir::Value> operands,
                            llvm::ArrayRef<mlir::NamedAttribute> attrs) {
  llvm::SmallVector<mlir::Value> r = opN(onnxType, operands, attrs, 1);
  return r.empty() ? mlir::Value() : r[0];
}

llvm::SmallVector<mlir::Value> GradBuilder::opN(llvm::StringRef onnxType,
                                                llvm::ArrayRef<mlir::Value> operands,
                                                llvm::ArrayRef<mlir::NamedAttribute> attrs,
                                                unsigned numResults) {
  // A null operand would be read as a skipped optional input: it can only come from an
  // earlier failure, which has been reported.
  if (failed_ || llvm::any_of(operands, [](mlir::Value v) { return !v; })) {
    failed_ = true;
    return {};
  }
  mlir::FailureOr<mlir::Operation*> made =
      createTandemOp(b_, loc_, onnxType, operands, attrs, numResults);
  if (mlir::failed(made)) {
    failed_ = true;
    return {};
  }
  return llvm::SmallVector<mlir::Value>((*made)->getResults());
}

mlir::NamedAttribute GradBuilder::intAttr(llvm::StringRef name, int64_t v) {
  return b_.getNamedAttr(name, b_.getI64IntegerAttr(v));
}
mlir::NamedAttribute GradBuilder::intsAttr(llvm::StringRef name, llvm::ArrayRef<int64_t> v) {
  return b_.getNamedAttr(name, b_.getI64ArrayAttr(v));
}
mlir::NamedAttribute GradBuilder::floatAttr(llvm::StringRef name, double v) {
  return b_.getNamedAttr(name, b_.getF32FloatAttr((float)v));
}
mlir::NamedAttribute GradBuilder::strAttr(llvm::StringRef name, llvm::StringRef v) {
  return b_.getNamedAttr(name, b_.getStringAttr(v));
}

mlir::Value GradBuilder::constant(llvm::ArrayRef<double> values, llvm::ArrayRef<int64_t> shape,
                                  mlir::Type et) {
  Shape s(shape.begin(), shape.end());
  if (et.isF64()) return createConstant(b_, loc_, Tensor::fromVector<double>(s, values.vec()));
  std::vector<float> f(values.begin(), values.end());
  return createConstant(b_, loc_, Tensor::fromVector<float>(s, f));
}

mlir::Value GradBuilder::scalar(double v, mlir::Type et) { return constant({v}, {}, et); }

mlir::Value GradBuilder::ints(llvm::ArrayRef<int64_t> v) {
  return createConstant(b_, loc_, Tensor::fromVector<int64_t>({(int64_t)v.size()}, v.vec()));
}

mlir::Value GradBuilder::zeros(mlir::Type t) {
  auto rt = llvm::cast<mlir::RankedTensorType>(t);
  std::vector<double> z(rt.getNumElements(), 0.0);
  return constant(z, rt.getShape(), rt.getElementType());
}

mlir::Value GradBuilder::mulS(mlir::Value a, double s) {
  return a ? mul(a, scalar(s, elementTypeOf(a))) : a;
}
mlir::Value GradBuilder::addS(mlir::Value a, double s) {
  return a ? add(a, scalar(s, elementTypeOf(a))) : a;
}
mlir::Value GradBuilder::rsubS(double s, mlir::Value a) {
  return a ? sub(scalar(s, elementTypeOf(a)), a) : a;
}

mlir::Value GradBuilder::reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape) {
  if (!v || shapeOf(v) == llvm::SmallVector<int64_t>(shape)) return v;
  return op("Reshape", {v, ints(shape)});
}

mlir::Value GradBuilder::transpose(mlir::Value v, llvm::ArrayRef<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == (int64_t)i;
  if (identity) return v;
  return op("Transpose", {v}, {intsAttr("perm", perm)});
}

mlir::Value GradBuilder::expand(mlir::Value v, llvm::ArrayRef<int64_t> shape) {
  if (!v || shapeOf(v) == llvm::SmallVector<int64_t>(shape)) return v;
  return op("Expand", {v, ints(shape)});
}

mlir::Value GradBuilder::reduceSum(mlir::Value v, llvm::ArrayRef<int64_t> axes, bool keepdims) {
  return op("ReduceSum", {v, ints(axes)}, {intAttr("keepdims", keepdims)});
}

mlir::Value GradBuilder::reduceMean(mlir::Value v, llvm::ArrayRef<int64_t> axes, bool keepdims) {
  return op("ReduceMean", {v}, {intsAttr("axes", axes), intAttr("keepdims", keepdims)});
}

mlir::Value GradBuilder::reduceToShape(mlir::Value g, llvm::ArrayRef<int64_t> shape) {
  if (!g) return g;
  llvm::SmallVector<int64_t> gs = shapeOf(g);
  const int64_t lead = (int64_t)gs.size() - (int64_t)shape.size();
  assert(lead >= 0 && "reduceToShape: target rank above the gradient's");
  llvm::SmallVector<int64_t> axes;
  for (int64_t i = 0; i < (int64_t)gs.size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && gs[i] != 1)) axes.push_back(i);
  if (!axes.empty()) g = reduceSum(g, axes, /*keepdims=*/true);
  return reshape(g, shape);
}

mlir::LogicalResult GradBuilder::error(const llvm::Twine& message) {
  if (!failed_) mlir::emitError(loc_) << message;
  failed_ = true;
  return mlir::failure();
}

llvm::SmallVector<int64_t> shapeOf(mlir::Value v) {
  auto t = llvm::cast<mlir::RankedTensorType>(v.getType());
  return llvm::SmallVector<int64_t>(t.getShape());
}

mlir::Type elementTypeOf(mlir::Value v) {
  return llvm::cast<mlir::ShapedType>(v.getType()).getElementType();
}

namespace {

using mlir::Value;
using Dx = llvm::MutableArrayRef<mlir::Value>;
using Dy = llvm::ArrayRef<mlir::Value>;
using Needed = llvm::ArrayRef<bool>;

// ---- forward operands ----

// An optional operand: null when absent or a tandem.none.
Value operandOr(mlir::Operation* op, unsigned i) {
  if (i >= op->getNumOperands()) return {};
  Value v = op->getOperand(i);
  return llvm::isa<mlir::RankedTensorType>(v.getType()) ? v : Value();
}
// The i64 values of a constant operand (axes, splits, slice bounds); false when not constant.
bool constInts(Value v, llvm::SmallVector<int64_t>* out) {
  Tensor t;
  if (!v || !getConstantValue(v, &t)) return false;
  out->clear();
  for (int64_t i = 0; i < t.numel(); ++i)
    out->push_back(t.dtype() == DType::I32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i]);
  return true;
}
int64_t normAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// ---- element-wise ----

mlir::LogicalResult gradAdd(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  for (unsigned i = 0; i < 2; ++i)
    if (need[i]) dx[i] = g.reduceToShape(dy[0], shapeOf(op->getOperand(i)));
  return mlir::success();
}

mlir::LogicalResult gradSum(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    if (need[i]) dx[i] = g.reduceToShape(dy[0], shapeOf(op->getOperand(i)));
  return mlir::success();
}

mlir::LogicalResult gradSub(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  if (need[0]) dx[0] = g.reduceToShape(dy[0], shapeOf(op->getOperand(0)));
  if (need[1]) dx[1] = g.reduceToShape(g.neg(dy[0]), shapeOf(op->getOperand(1)));
  return mlir::success();
}

mlir::LogicalResult gradMul(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  Value a = op->getOperand(0), b = op->getOperand(1);
  if (need[0]) dx[0] = g.reduceToShape(g.mul(dy[0], b), shapeOf(a));
  if (need[1]) dx[1] = g.reduceToShape(g.mul(dy[0], a), shapeOf(b));
  return mlir::success();
}

// y = a / b: da = dy / b, db = -dy * y / b (= -dy * a / b^2, without squaring b).
mlir::LogicalResult gradDiv(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  Value a = op->getOperand(0), b = op->getOperand(1), y = op->getResult(0);
  if (need[0]) dx[0] = g.reduceToShape(g.div(dy[0], b), shapeOf(a));
  if (need[1]) dx[1] = g.reduceToShape(g.neg(g.mul(dy[0], g.div(y, b))), shapeOf(b));
  return mlir::success();
}

// y = x ^ e: dx = dy * e * x^(e-1); de = dy * y * ln(x) (where x > 0; ONNX leaves x < 0 with a
// fractional exponent undefined). An integer exponent is cast to x's type first.
mlir::LogicalResult gradPow(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  Value x = op->getOperand(0), e = op->getOperand(1), y = op->getResult(0);
  mlir::Type et = elementTypeOf(x);
  Value ef = e;
  if (elementTypeOf(e) != et)
    ef = g.op("Cast", {e}, {g.intAttr("to", et.isF64() ? 11 : 1)});
  if (need[0])
    dx[0] = g.reduceToShape(g.mul(dy[0], g.mul(ef, g.op("Pow", {x, g.addS(ef, -1.0)}))),
                            shapeOf(x));
  if (need[1] && elementTypeOf(e) == et)
    dx[1] = g.reduceToShape(g.mul(dy[0], g.mul(y, g.op("Log", {x}))), shapeOf(e));
  return mlir::success();
}

mlir::LogicalResult gradNeg(GradBuilder& g, mlir::Operation*, Dy dy, Needed, Dx dx) {
  dx[0] = g.neg(dy[0]);
  return mlir::success();
}

// Identity, inference Dropout (its mask result is bool: never differentiated).
mlir::LogicalResult gradIdentity(GradBuilder&, mlir::Operation*, Dy dy, Needed, Dx dx) {
  dx[0] = dy[0];
  return mlir::success();
}

// Dropout. Inference form (training_mode absent or a constant false): the identity. Training
// mode: y = x * mask / (1 - ratio), so dx = dy * mask / (1 - ratio), which is a Dropout of dy
// drawing the same mask. The mask is a function of the seed (attribute, else the plan's), the
// stream (the node name) and the counter (runtime/Philox.h), so the backward Dropout takes the
// forward op's location (its node name), seed attribute and ratio/training_mode/counter
// operands: it recomputes the mask instead of keeping a bool tensor alive until the backward
// pass. A counter added later (the training step graph's `step`) must go to both; no operand
// but x has a gradient (ratio, training_mode and counter select the mask).
mlir::LogicalResult gradDropout(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  Tensor mode;
  bool training = false;
  if (Value m = operandOr(op, 2))
    training = !getConstantValue(m, &mode) || (mode.numel() == 1 && mode.data<uint8_t>()[0] != 0);
  if (!need[0]) return mlir::success();
  if (!training) {
    dx[0] = dy[0];
    return mlir::success();
  }
  llvm::SmallVector<Value> operands = {dy[0]};
  for (unsigned i = 1; i < op->getNumOperands(); ++i) operands.push_back(op->getOperand(i));
  llvm::SmallVector<mlir::NamedAttribute> attrs;
  if (auto seed = op->getAttr("seed")) attrs.push_back(g.builder().getNamedAttr("seed", seed));
  GradBuilder same(g.builder(), op->getLoc());
  dx[0] = same.op("Dropout", operands, attrs);
  if (same.failed()) return g.error("Dropout: could not build the backward Dropout");
  return mlir::success();
}

mlir::LogicalResult gradCast(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  mlir::Type in = elementTypeOf(op->getOperand(0));
  if (!llvm::isa<mlir::FloatType>(in)) return mlir::success();  // not differentiable
  dx[0] = in == elementTypeOf(dy[0])
              ? dy[0]
              : g.op("Cast", {dy[0]}, {g.intAttr("to", in.isF64() ? 11 : 1)});
  return mlir::success();
}

// Relu: dy where x > 0, else 0 (the subgradient 0 at x == 0, as PyTorch and TensorFlow), as
// dy * Sign(y) of the result y = max(x, 0) (Sign(y) is 1 where x > 0, 0 elsewhere): two
// element-wise ops the CPU loop fuses into one pass over y and dy (Where and a bool Greater
// ran as two reference passes), and y is what a Conv with a fused ReLU already writes.
mlir::LogicalResult gradRelu(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  dx[0] = g.mul(dy[0], g.op("Sign", {op->getResult(0)}));
  return mlir::success();
}

// LeakyRelu: dy where x >= 0 (ONNX takes the x branch at 0), else alpha * dy.
mlir::LogicalResult gradLeakyRelu(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value x = op->getOperand(0);
  double alpha = floatAttrOr(op, "alpha", 0.01);
  dx[0] = g.op("Where", {g.op("Less", {x, g.scalar(0, elementTypeOf(x))}), g.mulS(dy[0], alpha),
                         dy[0]});
  return mlir::success();
}

mlir::LogicalResult gradAbs(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value x = op->getOperand(0);
  dx[0] = g.op("Where", {g.op("Less", {x, g.scalar(0, elementTypeOf(x))}), g.neg(dy[0]), dy[0]});
  return mlir::success();
}

// Elu: dy where x > 0, else dy * (y + alpha) (= dy * alpha * e^x).
mlir::LogicalResult gradElu(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value x = op->getOperand(0), y = op->getResult(0);
  double alpha = floatAttrOr(op, "alpha", 1.0);
  dx[0] = g.op("Where", {g.op("Greater", {x, g.scalar(0, elementTypeOf(x))}), dy[0],
                         g.mul(dy[0], g.addS(y, alpha))});
  return mlir::success();
}

// Selu: gamma * dy where x > 0, else dy * (y + gamma * alpha).
mlir::LogicalResult gradSelu(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value x = op->getOperand(0), y = op->getResult(0);
  double alpha = floatAttrOr(op, "alpha", 1.67326319217681884765625),
         gamma = floatAttrOr(op, "gamma", 1.05070102214813232421875);
  dx[0] = g.op("Where", {g.op("Greater", {x, g.scalar(0, elementTypeOf(x))}),
                         g.mulS(dy[0], gamma), g.mul(dy[0], g.addS(y, gamma * alpha))});
  return mlir::success();
}

// HardSigmoid: alpha * dy where 0 < alpha * x + beta < 1, else 0.
mlir::LogicalResult gradHardSigmoid(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value x = op->getOperand(0);
  mlir::Type et = elementTypeOf(x);
  double alpha = floatAttrOr(op, "alpha", 0.2), beta = floatAttrOr(op, "beta", 0.5);
  Value v = g.addS(g.mulS(x, alpha), beta), zero = g.scalar(0, et);
  Value inner = g.op("Where", {g.op("Greater", {v, g.scalar(1, et)}), zero, g.mulS(dy[0], alpha)});
  dx[0] = g.op("Where", {g.op("Less", {v, zero}), zero, inner});
  return mlir::success();
}

// HardSwish-14, y = x * HardSigmoid(x) with alpha 1/6, beta 1/2 and v = x / 6 + 1/2:
// dx = 0 where v < 0 (x < -3), dy where v > 1 (x > 3), else dy * (x / 3 + 1/2) (PyTorch's
// hardswish_backward, the same at both ends: -dy / 2 at x = -3, 3 dy / 2 at x = 3).
mlir::LogicalResult gradHardSwish(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value x = op->getOperand(0);
  mlir::Type et = elementTypeOf(x);
  Value v = g.addS(g.mulS(x, 1.0 / 6.0), 0.5), zero = g.scalar(0, et);
  Value inner = g.op("Where", {g.op("Greater", {v, g.scalar(1, et)}), dy[0],
                               g.mul(dy[0], g.addS(g.mulS(x, 1.0 / 3.0), 0.5))});
  dx[0] = g.op("Where", {g.op("Less", {v, zero}), zero, inner});
  return mlir::success();
}

// PRelu: dx = dy where x >= 0, else slope * dy; dslope = x * dy where x < 0, summed over the
// dims slope was broadcast along.
mlir::LogicalResult gradPRelu(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  Value x = op->getOperand(0), slope = op->getOperand(1);
  mlir::Type et = elementTypeOf(x);
  Value neg = g.op("Less", {x, g.scalar(0, et)});
  if (need[0]) dx[0] = g.op("Where", {neg, g.mul(dy[0], slope), dy[0]});
  if (need[1])
    dx[1] = g.reduceToShape(g.op("Where", {neg, g.mul(dy[0], x), g.scalar(0, et)}),
                            shapeOf(slope));
  return mlir::success();
}

// Clip: dy where min <= x <= max (bounds included, as PyTorch), else 0. The bounds get none.
mlir::LogicalResult gradClip(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  if (!need[0]) return mlir::success();
  Value x = op->getOperand(0), d = dy[0], zero = g.scalar(0, elementTypeOf(x));
  if (Value lo = operandOr(op, 1)) d = g.op("Where", {g.op("Less", {x, lo}), zero, d});
  if (Value hi = operandOr(op, 2)) d = g.op("Where", {g.op("Greater", {x, hi}), zero, d});
  dx[0] = d;
  return mlir::success();
}

// Where(cond, X, Y): dy goes to X where cond holds, to Y elsewhere.
mlir::LogicalResult gradWhere(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  Value c = op->getOperand(0), zero = g.scalar(0, elementTypeOf(dy[0]));
  if (need[1])
    dx[1] = g.reduceToShape(g.op("Where", {c, dy[0], zero}), shapeOf(op->getOperand(1)));
  if (need[2])
    dx[2] = g.reduceToShape(g.op("Where", {c, zero, dy[0]}), shapeOf(op->getOperand(2)));
  return mlir::success();
}

// Max / Min of one or two operands: dy goes to the operand that was selected (the first on a
// tie).
mlir::LogicalResult gradMaxMin(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx,
                               bool isMax) {
  if (op->getNumOperands() == 1) {
    dx[0] = dy[0];
    return mlir::success();
  }
  if (op->getNumOperands() != 2)
    return g.error(onnxOpType(op) + ": no gradient for more than two operands yet");
  Value a = op->getOperand(0), b = op->getOperand(1), zero = g.scalar(0, elementTypeOf(a));
  Value bWins = g.op(isMax ? "Less" : "Greater", {a, b});
  if (need[0]) dx[0] = g.reduceToShape(g.op("Where", {bWins, zero, dy[0]}), shapeOf(a));
  if (need[1]) dx[1] = g.reduceToShape(g.op("Where", {bWins, dy[0], zero}), shapeOf(b));
  return mlir::success();
}
mlir::LogicalResult gradMax(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  return gradMaxMin(g, op, dy, need, dx, true);
}
mlir::LogicalResult gradMin(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  return gradMaxMin(g, op, dy, need, dx, false);
}

mlir::LogicalResult gradSin(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  dx[0] = g.mul(dy[0], g.op("Cos", {op->getOperand(0)}));
  return mlir::success();
}

mlir::LogicalResult gradCos(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  dx[0] = g.neg(g.mul(dy[0], g.op("Sin", {op->getOperand(0)})));
  return mlir::success();
}

// Sigmoid: dy * y * (1 - y).
mlir::LogicalResult gradSigmoid(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value y = op->getResult(0);
  dx[0] = g.mul(dy[0], g.mul(y, g.rsubS(1.0, y)));
  return mlir::success();
}

// Tanh: dy * (1 - y^2).
mlir::LogicalResult gradTanh(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value y = op->getResult(0);
  dx[0] = g.mul(dy[0], g.rsubS(1.0, g.mul(y, y)));
  return mlir::success();
}

mlir::LogicalResult gradExp(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  dx[0] = g.mul(dy[0], op->getResult(0));
  return mlir::success();
}

mlir::LogicalResult gradLog(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  dx[0] = g.div(dy[0], op->getOperand(0));
  return mlir::success();
}

// Sqrt: dy / (2 y).
mlir::LogicalResult gradSqrt(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  dx[0] = g.div(dy[0], g.mulS(op->getResult(0), 2.0));
  return mlir::success();
}

// Reciprocal: -dy * y^2.
mlir::LogicalResult gradReciprocal(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value y = op->getResult(0);
  dx[0] = g.neg(g.mul(dy[0], g.mul(y, y)));
  return mlir::success();
}

// Erf: dy * 2/sqrt(pi) * exp(-x^2).
mlir::LogicalResult gradErf(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value x = op->getOperand(0);
  dx[0] = g.mul(dy[0], g.mulS(g.op("Exp", {g.neg(g.mul(x, x))}), 2.0 / std::sqrt(M_PI)));
  return mlir::success();
}

// Softplus: dy * sigmoid(x).
mlir::LogicalResult gradSoftplus(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  dx[0] = g.mul(dy[0], g.op("Sigmoid", {op->getOperand(0)}));
  return mlir::success();
}

// Gelu-20: dx = GeluGrad(dy, x) (Tandem's op: "none": Phi(x) + x*phi(x); "tanh": with t =
// tanh(k*(x + c*x^3)), 0.5*(1 + t) + 0.5*x*(1 - t^2)*k*(1 + 3c*x^2); times dy), one pass
// where the chain rule wrote 17 ops.
mlir::LogicalResult gradGelu(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  llvm::SmallVector<mlir::NamedAttribute> attrs;
  if (strAttrOr(op, "approximate", "none") == "tanh") attrs.push_back(g.strAttr("approximate", "tanh"));
  dx[0] = g.op("GeluGrad", {dy[0], op->getOperand(0)}, attrs);
  return mlir::success();
}

// ---- contractions ----

// MatMul (numpy): 1-D operands are promoted ([K] -> [1, K] for A, [K, 1] for B); batch dims
// broadcast. dA = dY . B^T and dB = A^T . dY on the promoted shapes, summed over the batch
// dims the operand was broadcast along.
mlir::LogicalResult gradMatMul(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  Value a = op->getOperand(0), b = op->getOperand(1);
  llvm::SmallVector<int64_t> as = shapeOf(a), bs = shapeOf(b);
  llvm::SmallVector<int64_t> ap = as, bp = bs;
  if (ap.size() == 1) ap.insert(ap.begin(), 1);
  if (bp.size() == 1) bp.push_back(1);
  const size_t batch = std::max(ap.size(), bp.size()) - 2;
  llvm::SmallVector<int64_t> yp;
  for (size_t i = 0; i < batch; ++i) {
    auto dim = [&](const llvm::SmallVector<int64_t>& s) {
      int64_t j = (int64_t)i - (int64_t)(batch - (s.size() - 2));
      return j < 0 ? 1 : s[j];
    };
    yp.push_back(std::max(dim(ap), dim(bp)));
  }
  yp.push_back(ap[ap.size() - 2]);
  yp.push_back(bp.back());
  auto swapLast = [](size_t rank) {
    llvm::SmallVector<int64_t> p(rank);
    std::iota(p.begin(), p.end(), 0);
    std::swap(p[rank - 1], p[rank - 2]);
    return p;
  };
  Value dY = g.reshape(dy[0], yp);
  Value a2 = g.reshape(a, ap), b2 = g.reshape(b, bp);
  if (need[0]) {
    Value d = g.op("MatMul", {dY, g.transpose(b2, swapLast(bp.size()))});
    dx[0] = g.reshape(g.reduceToShape(d, ap), as);
  }
  if (need[1] && bp.size() == 2 && ap.size() > 2) {
    // A weight applied to a batch of matrices (a transformer's Linear, x [N, T, K] . W [K, M]):
    // the batch folds into one product over N * T rows, A^T . dY with transA, instead of a
    // batched product into [N, K, M] summed over N (N times the weight's size in memory).
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < ap.size(); ++i) rows *= ap[i];
    Value af = g.reshape(a2, {rows, ap.back()}), yf = g.reshape(dY, {rows, bp.back()});
    dx[1] = g.reshape(g.op("Gemm", {af, yf}, {g.intAttr("transA", 1)}), bs);
  } else if (need[1]) {
    Value d = g.op("MatMul", {g.transpose(a2, swapLast(ap.size())), dY});
    dx[1] = g.reshape(g.reduceToShape(d, bp), bs);
  }
  return mlir::success();
}

// Gemm: Y = alpha * A' . B' + beta * C with A' = transA ? A^T : A (B' likewise). Each operand's
// gradient is itself one Gemm with the transposes folded into its flags:
//   dA  = alpha * dY . B'^T   (transA = 0)   or   alpha * B' . dY^T   (transA = 1)
//   dB  = alpha * A'^T . dY   (transB = 0)   or   alpha * dY^T . A'   (transB = 1)
//   dC  = beta * dY summed over C's broadcast dims.
mlir::LogicalResult gradGemm(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  Value a = op->getOperand(0), b = op->getOperand(1), d = dy[0];
  const double alpha = floatAttrOr(op, "alpha", 1.0), beta = floatAttrOr(op, "beta", 1.0);
  const bool ta = intAttrOr(op, "transA", 0) != 0, tb = intAttrOr(op, "transB", 0) != 0;
  auto gemm = [&](Value l, Value r, bool tl, bool tr) {
    return g.op("Gemm", {l, r}, {g.floatAttr("alpha", alpha), g.intAttr("transA", tl),
                                  g.intAttr("transB", tr)});
  };
  if (need[0]) dx[0] = ta ? gemm(b, d, tb, true) : gemm(d, b, false, !tb);
  if (need[1]) dx[1] = tb ? gemm(d, a, true, ta) : gemm(a, d, !ta, false);
  if (op->getNumOperands() > 2 && need[2]) {
    Value c = op->getOperand(2);
    dx[2] = g.reduceToShape(beta == 1.0 ? d : g.mulS(d, beta), shapeOf(c));
  }
  return mlir::success();
}

// ---- softmax and reductions ----

// Softmax along `axis`: dx = y * (dy - sum(dy * y, axis)).
mlir::LogicalResult gradSoftmax(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value y = op->getResult(0);
  int64_t axis = normAxis(intAttrOr(op, "axis", -1), (int64_t)shapeOf(y).size());
  Value s = g.reduceSum(g.mul(dy[0], y), {axis}, true);
  dx[0] = g.mul(y, g.sub(dy[0], s));
  return mlir::success();
}

// LogSoftmax along `axis`: dx = dy - exp(y) * sum(dy, axis).
mlir::LogicalResult gradLogSoftmax(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value y = op->getResult(0);
  int64_t axis = normAxis(intAttrOr(op, "axis", -1), (int64_t)shapeOf(y).size());
  Value s = g.reduceSum(dy[0], {axis}, true);
  dx[0] = g.sub(dy[0], g.mul(g.op("Exp", {y}), s));
  return mlir::success();
}

// The reduced axes of a ReduceSum (operand 1) or other Reduce* (attribute), normalised; all
// axes when none are given (ReduceSum's noop_with_empty_axes: none).
bool reducedAxes(mlir::Operation* op, int64_t rank, llvm::SmallVector<int64_t>* axes,
                 bool axesOperand) {
  axes->clear();
  if (axesOperand) {
    Value a = operandOr(op, 1);
    if (a && !constInts(a, axes)) return false;
    if (axes->empty() && intAttrOr(op, "noop_with_empty_axes", 0)) return true;
  } else {
    *axes = intsAttr(op, "axes");
  }
  if (axes->empty())
    for (int64_t i = 0; i < rank; ++i) axes->push_back(i);
  for (int64_t& a : *axes) a = normAxis(a, rank);
  return true;
}

// Reductions broadcast the gradient back: dy reshaped to the kept-dims shape, expanded to x's
// (ReduceMean scales by 1 / the reduced count).
mlir::LogicalResult gradReduce(GradBuilder& g, mlir::Operation* op, Dy dy, Dx dx, bool mean) {
  Value x = op->getOperand(0);
  llvm::SmallVector<int64_t> xs = shapeOf(x), axes;
  if (!reducedAxes(op, (int64_t)xs.size(), &axes, !mean))
    return g.error("ReduceSum: no gradient with non-constant axes");
  llvm::SmallVector<int64_t> kept = xs;
  int64_t count = 1;
  for (int64_t a : axes) {
    count *= xs[a];
    kept[a] = 1;
  }
  Value d = g.expand(g.reshape(dy[0], kept), xs);
  dx[0] = mean && count != 1 ? g.mulS(d, 1.0 / (double)count) : d;
  return mlir::success();
}
mlir::LogicalResult gradReduceSum(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  return gradReduce(g, op, dy, dx, false);
}
mlir::LogicalResult gradReduceMean(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  return gradReduce(g, op, dy, dx, true);
}

// ReduceMax / ReduceMin: dy goes to the elements equal to the extremum, shared evenly among
// ties (the subgradient TensorFlow takes).
mlir::LogicalResult gradReduceExtremum(GradBuilder& g, mlir::Operation* op, Dy dy, Needed,
                                       Dx dx) {
  Value x = op->getOperand(0), y = op->getResult(0);
  llvm::SmallVector<int64_t> xs = shapeOf(x), axes;
  reducedAxes(op, (int64_t)xs.size(), &axes, false);
  llvm::SmallVector<int64_t> kept = xs;
  for (int64_t a : axes) kept[a] = 1;
  mlir::Type et = elementTypeOf(x);
  Value hit = g.op("Where", {g.op("Equal", {x, g.reshape(y, kept)}), g.scalar(1, et),
                             g.scalar(0, et)});
  Value share = g.div(g.reshape(dy[0], kept), g.reduceSum(hit, axes, true));
  dx[0] = g.mul(hit, share);
  return mlir::success();
}

// ReduceSumSquare: 2 x dy; ReduceL2: x dy / y (y > 0 wherever x is not all zero).
mlir::LogicalResult gradReduceSumSquare(GradBuilder& g, mlir::Operation* op, Dy dy, Needed,
                                        Dx dx) {
  Value x = op->getOperand(0);
  llvm::SmallVector<int64_t> xs = shapeOf(x), axes;
  reducedAxes(op, (int64_t)xs.size(), &axes, false);
  llvm::SmallVector<int64_t> kept = xs;
  for (int64_t a : axes) kept[a] = 1;
  dx[0] = g.mul(g.mulS(x, 2.0), g.reshape(dy[0], kept));
  return mlir::success();
}

mlir::LogicalResult gradReduceL2(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value x = op->getOperand(0);
  llvm::SmallVector<int64_t> xs = shapeOf(x), axes;
  reducedAxes(op, (int64_t)xs.size(), &axes, false);
  llvm::SmallVector<int64_t> kept = xs;
  for (int64_t a : axes) kept[a] = 1;
  dx[0] = g.mul(x, g.div(g.reshape(dy[0], kept), g.reshape(op->getResult(0), kept)));
  return mlir::success();
}

// ---- normalisation ----

// LayerNormalization over the dims from `axis` on, with xhat = (x - mean) * rstd:
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dxhat = dy * scale
//   dscale = sum(dy * xhat), dbias = sum(dy), summed over the dims scale/bias broadcast along.
// Mean and rstd are recomputed (the forward op's optional outputs are not relied on). With
// f32/f64 X and scale and bias of the normalised shape (a model's usual LayerNorm) that is one
// LayerNormalizationGrad op (TandemOps.td); otherwise the ops below.
mlir::LogicalResult gradLayerNorm(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need,
                                  Dx dx) {
  Value x = op->getOperand(0), scale = op->getOperand(1), bias = operandOr(op, 2);
  if (!dy[0]) return g.error("LayerNormalization: only the gradient of output 0 is supported");
  llvm::SmallVector<int64_t> xs = shapeOf(x), axes;
  const int64_t rank = (int64_t)xs.size(), axis = normAxis(intAttrOr(op, "axis", -1), rank);
  for (int64_t i = axis; i < rank; ++i) axes.push_back(i);
  const double eps = floatAttrOr(op, "epsilon", 1e-5);
  const llvm::SmallVector<int64_t> norm(xs.begin() + axis, xs.end());
  mlir::Type et = elementTypeOf(x);
  if ((et.isF32() || et.isF64()) && shapeOf(scale) == norm && (!bias || shapeOf(bias) == norm)) {
    llvm::SmallVector<Value> r = g.opN("LayerNormalizationGrad", {x, dy[0], scale},
                                       {g.intAttr("axis", axis), g.floatAttr("epsilon", eps)}, 3);
    if (r.empty()) return mlir::failure();
    if (need[0]) dx[0] = r[0];
    if (need[1]) dx[1] = r[1];
    if (bias && need[2]) dx[2] = r[2];
    return mlir::success();
  }
  Value xc = g.sub(x, g.reduceMean(x, axes, true));
  Value rstd = g.op("Reciprocal",
                    {g.op("Sqrt", {g.addS(g.reduceMean(g.mul(xc, xc), axes, true), eps)})});
  Value xhat = g.mul(xc, rstd);
  if (need[0]) {
    Value dxhat = g.mul(dy[0], scale);
    Value m1 = g.reduceMean(dxhat, axes, true), m2 = g.reduceMean(g.mul(dxhat, xhat), axes, true);
    dx[0] = g.mul(rstd, g.sub(g.sub(dxhat, m1), g.mul(xhat, m2)));
  }
  if (need[1]) dx[1] = g.reduceToShape(g.mul(dy[0], xhat), shapeOf(scale));
  if (bias && need[2]) dx[2] = g.reduceToShape(dy[0], shapeOf(bias));
  return mlir::success();
}

// GroupNormalization-21 and InstanceNormalization-6 (groups = C), X [N, C, D..], scale and
// bias [C]: LayerNormalization's rule over each (n, group) of C/G channels, X viewed as
// [N, G, C/G * D..] (mean and rstd recomputed):
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dxhat = dy * scale[c]
//   dscale = sum over N and D.. of dy * xhat, dbias = sum of dy.
mlir::LogicalResult gradGroupNorm(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need,
                                  Dx dx) {
  Value x = op->getOperand(0), scale = op->getOperand(1), bias = operandOr(op, 2);
  llvm::SmallVector<int64_t> xs = shapeOf(x), bshape(xs.size(), 1), other;
  if (xs.size() < 2) return g.error(onnxOpType(op) + ": needs X of rank 2 or more");
  const int64_t N = xs[0], C = xs[1];
  const int64_t G = onnxOpType(op) == "InstanceNormalization" ? C : intAttrOr(op, "num_groups", 0);
  if (G < 1 || C % G != 0 || (int64_t)shapeOf(scale).size() != 1 || shapeOf(scale)[0] != C)
    return g.error(onnxOpType(op) + ": the gradient needs scale and bias of C elements and "
                                    "num_groups dividing C");
  int64_t len = 1;
  for (int64_t d : xs) len *= d;
  len /= N * G;
  bshape[1] = C;
  for (int64_t i = 0; i < (int64_t)xs.size(); ++i)
    if (i != 1) other.push_back(i);
  const double eps = floatAttrOr(op, "epsilon", 1e-5);
  Value xg = g.reshape(x, {N, G, len});
  Value xc = g.sub(xg, g.reduceMean(xg, {2}, true));
  Value rstd = g.op("Reciprocal", {g.op("Sqrt", {g.addS(g.reduceMean(g.mul(xc, xc), {2}, true), eps)})});
  Value xhat = g.mul(xc, rstd);  // [N, G, len]
  if (need[0]) {
    Value dxhat = g.reshape(g.mul(dy[0], g.reshape(scale, bshape)), {N, G, len});
    Value m1 = g.reduceMean(dxhat, {2}, true), m2 = g.reduceMean(g.mul(dxhat, xhat), {2}, true);
    dx[0] = g.reshape(g.mul(rstd, g.sub(g.sub(dxhat, m1), g.mul(xhat, m2))), xs);
  }
  if (need[1]) dx[1] = g.reduceSum(g.mul(dy[0], g.reshape(xhat, xs)), other, false);
  if (bias && need[2]) dx[2] = g.reduceSum(dy[0], other, false);
  return mlir::success();
}

// BatchNormalization in training mode (training_mode=1: batch statistics over N and the
// spatial dims, M elements per channel, population variance; running_mean' = m * mean + (1 - m)
// * bmean and running_var' = m * var + (1 - m) * bvar for momentum m), with xc = x - bmean,
// rstd = 1/sqrt(bvar + eps) and xhat = xc * rstd: LayerNormalization's rule per channel over
// N and the spatial dims,
//   dx = scale * rstd * (dy - mean(dy) - xhat * mean(dy * xhat))
//        + (1 - m) / M * drunning_mean + 2 (1 - m) / M * xc * drunning_var
//   dscale = sum(dy * xhat), dbias = sum(dy), dmean = m * drunning_mean, dvar = m * drunning_var
// (batch statistics recomputed, BatchNormalization-15 having no saved-statistics outputs): dX,
// dscale and dB from Y's gradient are one BatchNormalizationGrad op (TandemOps.td).
mlir::LogicalResult gradBatchNormTraining(GradBuilder& g, mlir::Operation* op, Dy dy,
                                          Needed need, Dx dx) {
  Value x = op->getOperand(0), scale = op->getOperand(1);
  llvm::SmallVector<int64_t> xs = shapeOf(x), bshape(xs.size(), 1), other;
  if (xs.size() < 2) return g.error("BatchNormalization: needs X of rank 2 or more");
  bshape[1] = xs[1];
  int64_t count = 1;
  for (int64_t i = 0; i < (int64_t)xs.size(); ++i)
    if (i != 1) {
      other.push_back(i);
      count *= xs[i];
    }
  const double eps = floatAttrOr(op, "epsilon", 1e-5), m = floatAttrOr(op, "momentum", 0.9);
  const Value dyRunMean = dy.size() > 1 ? dy[1] : Value(), dyRunVar = dy.size() > 2 ? dy[2] : Value();
  if (need[0] || need[1] || need[2]) {
    if (dy[0]) {
      // One BatchNormalizationGrad (three passes over X and dY) for dX, dscale and dB.
      llvm::SmallVector<Value> r = g.opN("BatchNormalizationGrad", {x, dy[0], scale},
                                         {g.floatAttr("epsilon", eps)}, 3);
      if (r.empty()) return mlir::failure();
      if (need[0]) dx[0] = r[0];
      if (need[1]) dx[1] = r[1];
      if (need[2]) dx[2] = r[2];
    } else {
      // Only the running statistics reach the loss: Y's parameters get zeros.
      if (need[1]) dx[1] = g.zeros(scale.getType());
      if (need[2]) dx[2] = g.zeros(op->getOperand(2).getType());
      if (need[0]) dx[0] = g.zeros(x.getType());
    }
    if (need[0] && dyRunMean)
      dx[0] = g.add(dx[0], g.reshape(g.mulS(dyRunMean, (1 - m) / (double)count), bshape));
    if (need[0] && dyRunVar) {
      Value xc = g.sub(x, g.reduceMean(x, other, true));
      dx[0] = g.add(dx[0], g.mul(xc, g.reshape(g.mulS(dyRunVar, 2 * (1 - m) / (double)count), bshape)));
    }
  }
  if (need[3]) dx[3] = dyRunMean ? g.mulS(dyRunMean, m) : g.zeros(op->getOperand(3).getType());
  if (need[4]) dx[4] = dyRunVar ? g.mulS(dyRunVar, m) : g.zeros(op->getOperand(4).getType());
  return mlir::success();
}

// BatchNormalization in inference form, per channel c (dim 1), with inv = 1/sqrt(var + eps):
//   y = (x - mean) * inv * scale + bias
//   dx = dy * scale * inv;  dscale = sum(dy * (x - mean) * inv);  dbias = sum(dy)
//   dmean = -dbias * scale * inv;  dvar = -0.5 * sum(dy * (x - mean)) * scale * inv^3.
mlir::LogicalResult gradBatchNorm(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need,
                                  Dx dx) {
  if (intAttrOr(op, "training_mode", 0) != 0) return gradBatchNormTraining(g, op, dy, need, dx);
  Value x = op->getOperand(0), scale = op->getOperand(1), mean = op->getOperand(3),
        var = op->getOperand(4);
  llvm::SmallVector<int64_t> xs = shapeOf(x), bshape(xs.size(), 1), other;
  bshape[1] = xs[1];
  for (int64_t i = 0; i < (int64_t)xs.size(); ++i)
    if (i != 1) other.push_back(i);
  const double eps = floatAttrOr(op, "epsilon", 1e-5);
  Value inv = g.op("Reciprocal", {g.op("Sqrt", {g.addS(var, eps)})});
  Value si = g.mul(scale, inv);  // [C]
  Value xc = g.sub(x, g.reshape(mean, bshape));
  Value sumDy = (need[2] || need[3]) ? g.reduceSum(dy[0], other, false) : Value();
  Value sumDyXc = (need[1] || need[4]) ? g.reduceSum(g.mul(dy[0], xc), other, false) : Value();
  if (need[0]) dx[0] = g.mul(dy[0], g.reshape(si, bshape));
  if (need[1]) dx[1] = g.mul(sumDyXc, inv);
  if (need[2]) dx[2] = sumDy;
  if (need[3]) dx[3] = g.neg(g.mul(sumDy, si));
  if (need[4]) dx[4] = g.mulS(g.mul(sumDyXc, g.mul(si, g.mul(inv, inv))), -0.5);
  return mlir::success();
}

// ---- shape and data movement ----

// Reshape, Flatten, Squeeze, Unsqueeze: the same bytes, so the gradient is dy reshaped back.
mlir::LogicalResult gradReshape(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  if (need[0]) dx[0] = g.reshape(dy[0], shapeOf(op->getOperand(0)));
  return mlir::success();
}

mlir::LogicalResult gradExpand(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  if (need[0]) dx[0] = g.reduceToShape(dy[0], shapeOf(op->getOperand(0)));
  return mlir::success();
}

mlir::LogicalResult gradTranspose(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  const int64_t rank = (int64_t)shapeOf(op->getOperand(0)).size();
  llvm::SmallVector<int64_t> perm = intsAttr(op, "perm"), inv(rank);
  if (perm.empty())
    for (int64_t i = 0; i < rank; ++i) perm.push_back(rank - 1 - i);
  for (int64_t i = 0; i < rank; ++i) inv[perm[i]] = i;
  dx[0] = g.transpose(dy[0], inv);
  return mlir::success();
}

// Concat: the gradient splits back into the operands' extents along the axis.
mlir::LogicalResult gradConcat(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  const int64_t rank = (int64_t)shapeOf(dy[0]).size(),
                axis = normAxis(intAttrOr(op, "axis", 0), rank);
  llvm::SmallVector<int64_t> sizes;
  for (Value v : op->getOperands()) sizes.push_back(shapeOf(v)[axis]);
  if (sizes.size() == 1) {
    dx[0] = dy[0];
    return mlir::success();
  }
  llvm::SmallVector<Value> parts =
      g.opN("Split", {dy[0], g.ints(sizes)}, {g.intAttr("axis", axis)}, sizes.size());
  for (unsigned i = 0; i < parts.size(); ++i)
    if (need[i]) dx[i] = parts[i];
  return mlir::success();
}

// Split: the results' gradients concatenate back; a result no gradient reached contributes 0.
mlir::LogicalResult gradSplit(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  if (!need[0]) return mlir::success();
  const int64_t rank = (int64_t)shapeOf(op->getOperand(0)).size(),
                axis = normAxis(intAttrOr(op, "axis", 0), rank);
  llvm::SmallVector<Value> parts;
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    parts.push_back(dy[i] ? dy[i] : g.zeros(op->getResult(i).getType()));
  dx[0] = parts.size() == 1 ? parts[0] : g.op("Concat", parts, {g.intAttr("axis", axis)});
  return mlir::success();
}

// Slice with constant starts, ends, axes and steps: dy placed back where the slice read it,
// zeros elsewhere. A unit-step axis is a Pad. An axis of step k != 1 that read m elements,
// the lowest at lo (for k < 0 dy is first reversed along it, so its elements ascend), is
// spread out: Unsqueeze after the axis, Pad that new axis to |k| (each element then |k| - 1
// zeros), Reshape back ([.., m * |k|, ..], element j at j * |k|), Slice its first
// (m - 1) |k| + 1, then Pad lo before and the rest of the axis after.
mlir::LogicalResult gradSlice(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  if (!need[0]) return mlir::success();
  llvm::SmallVector<int64_t> xs = shapeOf(op->getOperand(0)), starts, ends, axes, steps;
  const int64_t rank = (int64_t)xs.size();
  if (!constInts(op->getOperand(1), &starts) || !constInts(op->getOperand(2), &ends) ||
      (operandOr(op, 3) && !constInts(op->getOperand(3), &axes)) ||
      (operandOr(op, 4) && !constInts(op->getOperand(4), &steps)))
    return g.error("Slice: no gradient with non-constant starts, ends, axes or steps");
  if (axes.empty())
    for (int64_t i = 0; i < (int64_t)starts.size(); ++i) axes.push_back(i);
  llvm::SmallVector<int64_t> pads(2 * rank, 0);
  Value d = dy[0];
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = normAxis(axes[i], rank), n = xs[a], k = steps.empty() ? 1 : steps[i];
    if (k == 0) return g.error("Slice: a step of 0");
    if (k == 1) {
      auto clampIdx = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
      const int64_t s = clampIdx(starts[i]), e = std::max(s, clampIdx(ends[i]));
      pads[a] = s;
      pads[rank + a] = n - e;
      continue;
    }
    // ONNX Slice-13's clamping: [0, n] for a positive step, [0, n - 1] (start) and [-1, n - 1]
    // (end) for a negative one.
    int64_t s = starts[i] < 0 ? starts[i] + n : starts[i], e = ends[i] < 0 ? ends[i] + n : ends[i];
    int64_t m = 0, lo = 0;
    if (k > 0) {
      s = std::clamp<int64_t>(s, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
      m = e > s ? (e - s + k - 1) / k : 0;
      lo = s;
    } else {
      s = std::clamp<int64_t>(s, 0, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
      m = s > e ? (s - e - k - 1) / -k : 0;
      lo = s + k * (m - 1);
    }
    if (m == 0) {
      dx[0] = g.zeros(op->getOperand(0).getType());
      return mlir::success();
    }
    const int64_t step = std::abs(k);
    if (k < 0)
      d = g.op("Slice", {d, g.ints({-1}), g.ints({std::numeric_limits<int64_t>::min()}), g.ints({a}),
                         g.ints({-1})});
    llvm::SmallVector<int64_t> shape = shapeOf(d), spreadPads(2 * (rank + 1), 0);
    d = g.op("Unsqueeze", {d, g.ints({a + 1})});
    spreadPads[rank + 1 + a + 1] = step - 1;
    d = g.op("Pad", {d, g.ints(spreadPads)});
    shape[a] = m * step;
    d = g.reshape(d, shape);
    d = g.op("Slice", {d, g.ints({0}), g.ints({(m - 1) * step + 1}), g.ints({a})});
    llvm::SmallVector<int64_t> place(2 * rank, 0);
    place[a] = lo;
    place[rank + a] = n - (lo + (m - 1) * step + 1);
    d = g.op("Pad", {d, g.ints(place)});
  }
  dx[0] = g.op("Pad", {d, g.ints(pads)});
  return mlir::success();
}

// Pad in constant mode with constant, non-negative pads: the gradient is dy cropped back.
mlir::LogicalResult gradPad(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  if (!need[0]) return mlir::success();
  llvm::SmallVector<int64_t> xs = shapeOf(op->getOperand(0)), pads, starts, ends, axes;
  const int64_t rank = (int64_t)xs.size();
  if (strAttrOr(op, "mode", "constant") != "constant")
    return g.error("Pad: no gradient for mode '" + strAttrOr(op, "mode", "constant") + "' yet");
  if (!constInts(op->getOperand(1), &pads) || (int64_t)pads.size() != 2 * rank ||
      llvm::any_of(pads, [](int64_t p) { return p < 0; }))
    return g.error("Pad: no gradient with non-constant or negative pads");
  for (int64_t i = 0; i < rank; ++i) {
    starts.push_back(pads[i]);
    ends.push_back(pads[i] + xs[i]);
    axes.push_back(i);
  }
  dx[0] = g.op("Slice", {dy[0], g.ints(starts), g.ints(ends), g.ints(axes)});
  return mlir::success();
}

// Tile: dy viewed as [r0, d0, r1, d1, ...] and summed over the repeat dims.
mlir::LogicalResult gradTile(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  if (!need[0]) return mlir::success();
  llvm::SmallVector<int64_t> xs = shapeOf(op->getOperand(0)), reps, split, axes;
  if (!constInts(op->getOperand(1), &reps))
    return g.error("Tile: no gradient with non-constant repeats");
  for (size_t i = 0; i < xs.size(); ++i) {
    split.push_back(reps[i]);
    split.push_back(xs[i]);
    axes.push_back(2 * (int64_t)i);
  }
  dx[0] = g.reshape(g.reduceSum(g.reshape(dy[0], split), axes, false), xs);
  return mlir::success();
}

// Gather along axis 0 (embedding lookups): the rows of dy are added into a zero table at their
// indices (ScatterND with reduction "add", so repeated indices accumulate). Along axis a > 0
// (a transformer's last position, x[:, -1]) the same with axis a moved to the front: the data
// as [x_a, x_0..x_a-1, x_a+1..], dy's index dims moved first to match, the sum moved back.
mlir::LogicalResult gradGather(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  if (!need[0]) return mlir::success();
  Value data = op->getOperand(0), idx = op->getOperand(1);
  llvm::SmallVector<int64_t> xs = shapeOf(data), is = shapeOf(idx);
  const int64_t rank = (int64_t)xs.size(), r = (int64_t)is.size();
  const int64_t axis = normAxis(intAttrOr(op, "axis", 0), rank);
  int64_t n = 1;
  for (int64_t d : is) n *= d;
  // permX: the data's dims with `axis` first; permDy: dy's [x_0..x_a-1, idx.., rest] as
  // [idx.., x_0..x_a-1, rest].
  llvm::SmallVector<int64_t> permX = {axis}, permDy, table = {xs[axis]}, updates = {n};
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis) {
      permX.push_back(i);
      table.push_back(xs[i]);
      updates.push_back(xs[i]);
    }
  for (int64_t i = 0; i < r; ++i) permDy.push_back(axis + i);
  for (int64_t i = 0; i < axis; ++i) permDy.push_back(i);
  for (int64_t i = axis + r; i < rank - 1 + r; ++i) permDy.push_back(i);
  llvm::SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[permX[i]] = i;
  if (!elementTypeOf(idx).isInteger(64)) idx = g.op("Cast", {idx}, {g.intAttr("to", 7)});
  Value sum = g.op("ScatterND",
                   {g.zeros(mlir::RankedTensorType::get(table, elementTypeOf(data))),
                    g.reshape(idx, {n, 1}), g.reshape(g.transpose(dy[0], permDy), updates)},
                   {g.strAttr("reduction", "add")});
  dx[0] = g.transpose(sum, inverse);
  return mlir::success();
}

// EmbeddingBag (tandem): the weight's gradient is Tandem's EmbeddingBagGrad, each bag's dY row
// added into the rows it read (scaled by the per-sample weights, by 1 / length for mean; for
// max only into the row that gave each column's max). The per-sample weights' gradient is not
// written yet: a wrt path through them is reported as not differentiable.
mlir::LogicalResult gradEmbeddingBag(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need,
                                     Dx dx) {
  if (!need[0]) return mlir::success();
  llvm::SmallVector<Value> in = {op->getOperand(0), op->getOperand(1), op->getOperand(2),
                                 op->getOperand(3), dy[0]};
  // createTandemOp drops a trailing absent operand, so a fifth one is the weights.
  if (op->getNumOperands() > 4) in.push_back(op->getOperand(4));
  dx[0] = g.op("EmbeddingBagGrad", in, {g.strAttr("mode", strAttrOr(op, "mode", "sum"))});
  return mlir::success();
}

// ---- convolution and pooling ----

// Explicit begin/end pads of a Conv or pool: `pads` as given, or computed from auto_pad the
// way ONNX does (SAME_UPPER puts the odd pixel at the end, SAME_LOWER at the beginning).
llvm::SmallVector<int64_t> explicitPads(mlir::Operation* op, llvm::ArrayRef<int64_t> in,
                                        llvm::ArrayRef<int64_t> k, llvm::ArrayRef<int64_t> s,
                                        llvm::ArrayRef<int64_t> d) {
  const size_t n = in.size();
  std::string autoPad = strAttrOr(op, "auto_pad", "NOTSET");
  llvm::SmallVector<int64_t> pads = intsAttr(op, "pads");
  if (autoPad == "NOTSET" && pads.size() == 2 * n) return pads;
  pads.assign(2 * n, 0);
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER") return pads;
  for (size_t i = 0; i < n; ++i) {
    const int64_t out = (in[i] + s[i] - 1) / s[i];
    const int64_t total = std::max<int64_t>(0, (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in[i]);
    pads[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
    pads[n + i] = total - pads[i];
  }
  return pads;
}

// A convolution's bias gradient: dY [N, M, O..] summed over N and O.
Value convBiasGrad(GradBuilder& g, Value d) {
  llvm::SmallVector<int64_t> axes = {0};
  for (size_t i = 2; i < shapeOf(d).size(); ++i) axes.push_back((int64_t)i);
  return g.reduceSum(d, axes, false);
}

// `r` [A, B, K..] sliced to its first `extent` elements along each spatial dim K (a backward
// Conv's extent can exceed the forward one by the rows the forward op never read).
Value sliceSpatial(GradBuilder& g, Value r, llvm::ArrayRef<int64_t> extent) {
  if (!r) return r;
  llvm::SmallVector<int64_t> rs = shapeOf(r), starts, ends, axes;
  for (size_t i = 0; i < extent.size(); ++i)
    if (rs[2 + i] != extent[i]) {
      starts.push_back(0);
      ends.push_back(extent[i]);
      axes.push_back(2 + (int64_t)i);
    }
  return axes.empty() ? r : g.op("Slice", {r, g.ints(starts), g.ints(ends), g.ints(axes)});
}

// The weight gradient of a Conv (groups G, kernel k, strides s, dilations dil, explicit pads)
// whose input is `src` [N, C, D..] and whose output's gradient is `dst` [N, M, O..]:
//   dW[m, c, t] = sum_{n, o} dst[n, m, o] * src[n, c, o*s + t*d - p], [M, C/G, k..]:
// Tandem's ConvWeightGrad (oneDNN's convolution backward-weights primitive on the CPU). Written
// as a forward Conv of src by dst (batch and channels swapped) it was one op too, but with a
// kernel the size of the output: the Keras MNIST CNN's ran at about 2 GFLOP/s.
Value convWeightGrad(GradBuilder& g, Value src, Value dst, int64_t G, llvm::ArrayRef<int64_t> k,
                     llvm::ArrayRef<int64_t> s, llvm::ArrayRef<int64_t> dil,
                     llvm::ArrayRef<int64_t> pads) {
  return g.op("ConvWeightGrad", {src, dst},
              {g.intsAttr("kernel_shape", k), g.intsAttr("strides", s), g.intsAttr("dilations", dil),
               g.intsAttr("pads", pads), g.intAttr("group", G)});
}

// Conv-11 (N-D, groups, strides, pads, dilations), X [N, C, D..], W [M, C/G, k..], Y [N, M, O..]:
//   dB = dY summed over N and O.
//   dX = ConvTranspose(dY, W) with the Conv's strides, pads, dilations and groups, and the
//        output_padding that gives back X's extent (the rows the strided Conv never read).
//   dW = convWeightGrad(X, dY).
mlir::LogicalResult gradConv(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  Value x = op->getOperand(0), w = op->getOperand(1), d = dy[0];
  llvm::SmallVector<int64_t> xs = shapeOf(x), ws = shapeOf(w), ys = shapeOf(d);
  const size_t sp = xs.size() - 2;
  const int64_t G = intAttrOr(op, "group", 1);
  llvm::SmallVector<int64_t> in(xs.begin() + 2, xs.end()), k(ws.begin() + 2, ws.end()),
      out(ys.begin() + 2, ys.end());
  llvm::SmallVector<int64_t> s = intsAttrOr(op, "strides", sp, 1),
                             dil = intsAttrOr(op, "dilations", sp, 1);
  llvm::SmallVector<int64_t> pads = explicitPads(op, in, k, s, dil);
  if (operandOr(op, 2) && need.size() > 2 && need[2]) dx[2] = convBiasGrad(g, d);
  if (need[0]) {
    llvm::SmallVector<int64_t> outPad(sp);
    for (size_t i = 0; i < sp; ++i)
      outPad[i] = in[i] - (s[i] * (out[i] - 1) + (k[i] - 1) * dil[i] + 1 - pads[i] - pads[sp + i]);
    dx[0] = g.op("ConvTranspose", {d, w},
                 {g.intsAttr("strides", s), g.intsAttr("pads", pads), g.intsAttr("dilations", dil),
                  g.intAttr("group", G), g.intsAttr("output_padding", outPad)});
  }
  if (need[1]) dx[1] = convWeightGrad(g, x, d, G, k, s, dil, pads);
  return mlir::success();
}

// ConvTranspose-11, X [N, C, I..], W [C, M/G, k..], Y [N, M, O..]: Y is the uncropped result
// (length full = s*(I-1) + output_padding + (k-1)*d + 1 per dim) from offset pb, where pb is
// the begin pad as given, or split from output_shape / SAME_* as the kernel does (the odd unit
// at the end for SAME_UPPER, floor division: runtime/cpu/dnnl/DnnlConv.cpp); pe = full - pb - O.
//   dB = dY summed over N and O.
//   dX[n, c, q] = sum_{m, t} W[c, m, t] * dY[n, m, q*s + t*d - pb]: a Conv of dY by W (W read
//        as [C filters, M/G channels, k..]) with strides s, dilations d, pads (pb, pe), groups
//        G; its extent is I plus what output_padding >= s adds, sliced to I.
//   dW[c, m, t] = sum_{n, q} X[n, c, q] * dY[n, m, q*s + t*d - pb] = convWeightGrad(dY, X):
//        the weight gradient of the Conv above, which is [C, M/G, k..], W's own layout.
// Negative pads (an output_shape past the uncropped result) have no Conv form: an error.
mlir::LogicalResult gradConvTranspose(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need,
                                      Dx dx) {
  Value x = op->getOperand(0), w = op->getOperand(1), d = dy[0];
  llvm::SmallVector<int64_t> xs = shapeOf(x), ws = shapeOf(w), ys = shapeOf(d);
  const size_t sp = xs.size() - 2;
  const int64_t G = intAttrOr(op, "group", 1);
  llvm::SmallVector<int64_t> in(xs.begin() + 2, xs.end()), k(ws.begin() + 2, ws.end());
  llvm::SmallVector<int64_t> s = intsAttrOr(op, "strides", sp, 1),
                             dil = intsAttrOr(op, "dilations", sp, 1),
                             outPad = intsAttrOr(op, "output_padding", sp, 0),
                             given = intsAttrOr(op, "pads", 2 * sp, 0), outShape = intsAttr(op, "output_shape");
  const std::string autoPad = strAttrOr(op, "auto_pad", "NOTSET");
  llvm::SmallVector<int64_t> pads(2 * sp);
  for (size_t i = 0; i < sp; ++i) {
    const int64_t full = s[i] * (in[i] - 1) + outPad[i] + (k[i] - 1) * dil[i] + 1;
    int64_t pb = given[i];
    if (!outShape.empty() || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      const int64_t want = !outShape.empty() ? outShape[outShape.size() - sp + i] : in[i] * s[i];
      const int64_t total = full - want;
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor(total / 2)
      pb = autoPad == "SAME_UPPER" ? half : total - half;
    } else if (autoPad == "VALID") {
      pb = 0;
    }
    pads[i] = pb;
    pads[sp + i] = full - pb - ys[2 + i];
    if (pads[i] < 0 || pads[sp + i] < 0)
      return g.error("ConvTranspose: no gradient where the output extends past the uncropped "
                     "result (negative pads)");
  }
  if (operandOr(op, 2) && need.size() > 2 && need[2]) dx[2] = convBiasGrad(g, d);
  if (need[0]) {
    dx[0] = sliceSpatial(g, g.op("Conv", {d, w},
                                 {g.intsAttr("strides", s), g.intsAttr("pads", pads),
                                  g.intsAttr("dilations", dil), g.intAttr("group", G)}),
                         in);
  }
  if (need[1]) dx[1] = convWeightGrad(g, d, x, G, k, s, dil, pads);
  return mlir::success();
}

// ---- image sampling ----

// Resize-13 (every mode, Resize-18's antialias): separable, one weight matrix A [out, in] per
// axis that changes, from the taps the kernels sample (ref::resizePlan: idx and w per output
// coordinate; a tf_crop_and_resize point outside the box is the extrapolation value, which has
// no gradient). dX = dY times A along each such axis: a MatMul by the constant A along the
// last axis, the others transposed there and back. Scales, sizes and roi must be constants, as
// the kernels need them.
mlir::LogicalResult gradResize(GradBuilder& g, mlir::Operation* op, Dy dy, Needed need, Dx dx) {
  if (!need[0]) return mlir::success();
  Value x = op->getOperand(0);
  AttrMap attrs = toAttrMap(op);
  KernelContext ctx;
  ctx.opType = "Resize";
  ctx.attrs = &attrs;
  std::vector<Tensor> consts(op->getNumOperands());
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    ctx.inputTypes.push_back(tensorTypeOf(op->getOperand(i)));
    ctx.constInputs.push_back(i > 0 && getConstantValue(op->getOperand(i), &consts[i]) ? &consts[i] : nullptr);
  }
  ctx.outputTypes = {tensorTypeOf(op->getResult(0))};
  std::vector<ref::ResizeAxis> axes;
  std::vector<size_t> axisDim;
  if (Status st = ref::resizePlan(ctx, &axes, &axisDim); !st.isOk())
    return g.error("Resize: no gradient: " + st.message());
  Value cur = dy[0];
  const int64_t rank = (int64_t)shapeOf(x).size();
  const mlir::Type et = elementTypeOf(x);
  for (size_t k = 0; k < axes.size(); ++k) {
    const ref::ResizeAxis& a = axes[k];
    std::vector<double> m(a.out * a.in, 0.0);
    for (int64_t j = 0; j < a.out; ++j) {
      if (!a.outside.empty() && a.outside[j]) continue;
      for (int64_t t = 0; t < a.taps; ++t)
        m[j * a.in + a.idx[j * a.taps + t]] += a.taps == 1 && a.w.empty() ? 1.0 : a.w[j * a.taps + t];
    }
    const int64_t d = (int64_t)axisDim[k];
    llvm::SmallVector<int64_t> perm;
    for (int64_t i = 0; i < rank; ++i) perm.push_back(i);
    std::swap(perm[d], perm[rank - 1]);
    if (d != rank - 1) cur = g.transpose(cur, perm);
    cur = g.op("MatMul", {cur, g.constant(m, {a.out, a.in}, et)});
    if (d != rank - 1) cur = g.transpose(cur, perm);
  }
  dx[0] = cur;
  return mlir::success();
}

// GlobalAveragePool: dy spread evenly over each channel's extent.
mlir::LogicalResult gradGlobalAveragePool(GradBuilder& g, mlir::Operation* op, Dy dy, Needed,
                                          Dx dx) {
  llvm::SmallVector<int64_t> xs = shapeOf(op->getOperand(0));
  int64_t count = 1;
  for (size_t i = 2; i < xs.size(); ++i) count *= xs[i];
  dx[0] = g.mulS(g.expand(dy[0], xs), 1.0 / (double)count);
  return mlir::success();
}

// AveragePool-11 (no dilations): each output spreads dy / count over its window, with count the
// window's cells inside the input (count_include_pad = 0) or inside the padded input (= 1):
// a depthwise ConvTranspose by a kernel of ones of dy divided by a constant count map.
mlir::LogicalResult gradAveragePool(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  Value x = op->getOperand(0), d = dy[0];
  llvm::SmallVector<int64_t> xs = shapeOf(x), ys = shapeOf(d);
  const size_t sp = xs.size() - 2;
  llvm::SmallVector<int64_t> in(xs.begin() + 2, xs.end()), out(ys.begin() + 2, ys.end());
  llvm::SmallVector<int64_t> k = intsAttr(op, "kernel_shape"), s = intsAttrOr(op, "strides", sp, 1),
                             ones(sp, 1);
  llvm::SmallVector<int64_t> pads = explicitPads(op, in, k, s, ones);
  const bool includePad = intAttrOr(op, "count_include_pad", 0) != 0;
  // The count map, [1, 1, O..]: per spatial dim the window [o*s - p, o*s - p + k) clipped to
  // the input or padded input, the product over dims.
  int64_t nOut = 1;
  for (int64_t o : out) nOut *= o;
  std::vector<double> inv(nOut);
  for (int64_t flat = 0; flat < nOut; ++flat) {
    int64_t rem = flat, cells = 1;
    for (int64_t i = (int64_t)sp - 1; i >= 0; --i) {
      const int64_t o = rem % out[i];
      rem /= out[i];
      const int64_t lo = includePad ? -pads[i] : 0, hi = includePad ? in[i] + pads[sp + i] : in[i];
      const int64_t b = o * s[i] - pads[i];
      cells *= std::max<int64_t>(0, std::min(b + k[i], hi) - std::max(b, lo));
    }
    inv[flat] = cells ? 1.0 / (double)cells : 0.0;
  }
  llvm::SmallVector<int64_t> mapShape = {1, 1};
  mapShape.append(out.begin(), out.end());
  mlir::Type et = elementTypeOf(x);
  Value scaled = g.mul(d, g.constant(inv, mapShape, et));
  llvm::SmallVector<int64_t> kshape = {xs[1], 1};
  kshape.append(k.begin(), k.end());
  int64_t kn = xs[1];
  for (int64_t v : k) kn *= v;
  llvm::SmallVector<int64_t> outPad(sp);
  for (size_t i = 0; i < sp; ++i)
    outPad[i] = std::max<int64_t>(0, in[i] - (s[i] * (out[i] - 1) + k[i] - pads[i] - pads[sp + i]));
  Value kernel = g.constant(std::vector<double>(kn, 1.0), kshape, et);
  Value spread = g.op("ConvTranspose", {scaled, kernel},
                      {g.intsAttr("strides", s), g.intsAttr("pads", pads),
                       g.intAttr("group", xs[1]), g.intsAttr("output_padding", outPad)});
  // ceil_mode windows may reach past the padded input: ConvTranspose then yields a larger
  // extent, of which X's is the front.
  if (spread && shapeOf(spread) != xs) {
    llvm::SmallVector<int64_t> starts(sp, 0), axes;
    for (size_t i = 0; i < sp; ++i) axes.push_back(2 + i);
    spread = g.op("Slice", {spread, g.ints(starts), g.ints(in), g.ints(axes)});
  }
  dx[0] = spread;
  return mlir::success();
}

// MaxPool-12: each output's dy goes to the element its window took the max from (the first of
// equal maxima, as the forward kernel picks): Tandem's MaxPoolGrad op, one pass over the
// windows of X.
mlir::LogicalResult gradMaxPool(GradBuilder& g, mlir::Operation* op, Dy dy, Needed, Dx dx) {
  llvm::SmallVector<mlir::NamedAttribute> attrs;
  for (mlir::NamedAttribute a : op->getAttrs())
    if (llvm::is_contained(
            {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides"},
            a.getName().getValue()))
      attrs.push_back(a);
  dx[0] = g.op("MaxPoolGrad", {op->getOperand(0), dy[0]}, attrs);
  return mlir::success();
}

// GlobalMaxPool: a MaxPool whose window is the whole spatial extent.
mlir::LogicalResult gradGlobalMaxPool(GradBuilder& g, mlir::Operation* op, Dy dy, Needed,
                                      Dx dx) {
  llvm::SmallVector<int64_t> xs = shapeOf(op->getOperand(0));
  llvm::SmallVector<int64_t> k(xs.begin() + 2, xs.end());
  dx[0] = g.op("MaxPoolGrad", {op->getOperand(0), dy[0]}, {g.intsAttr("kernel_shape", k)});
  return mlir::success();
}

// The loss's reduction and ignore_index, as given (absent ones keep the Grad op's defaults,
// which are the loss's).
llvm::SmallVector<mlir::NamedAttribute> lossAttrs(mlir::Operation* op) {
  llvm::SmallVector<mlir::NamedAttribute> attrs;
  for (mlir::NamedAttribute a : op->getAttrs())
    if (llvm::is_contained({"ignore_index", "reduction"}, a.getName().getValue()))
      attrs.push_back(a);
  return attrs;
}

// NegativeLogLikelihoodLoss-13: d input = NegativeLogLikelihoodLossGrad(dY, input, target[,
// weight]), -dY * weight[target] (scaled by 1 / sum(weight) for mean) at each row's target, 0
// elsewhere. Target is integer and weight has no rule (its operand stays without a gradient).
mlir::LogicalResult gradNegativeLogLikelihoodLoss(GradBuilder& g, mlir::Operation* op, Dy dy,
                                                  Needed need, Dx dx) {
  if (!need[0]) return mlir::success();
  llvm::SmallVector<Value> operands = {dy[0], op->getOperand(0), op->getOperand(1)};
  if (Value w = operandOr(op, 2)) operands.push_back(w);
  dx[0] = g.op("NegativeLogLikelihoodLossGrad", operands, lossAttrs(op));
  return mlir::success();
}

// SoftmaxCrossEntropyLoss-13: d scores = SoftmaxCrossEntropyLossGrad(dY, log_prob, label[,
// weight]) = g * (softmax - onehot(label)) for the loss, plus LogSoftmax's rule for a gradient
// reaching the optional log_prob result. Without that result, log_prob is recomputed
// (LogSoftmax over axis 1, as the loss defines it).
mlir::LogicalResult gradSoftmaxCrossEntropyLoss(GradBuilder& g, mlir::Operation* op, Dy dy,
                                                Needed need, Dx dx) {
  if (!need[0]) return mlir::success();
  Value scores = op->getOperand(0);
  Value logp = op->getNumResults() > 1
                   ? op->getResult(1)
                   : g.op("LogSoftmax", {scores}, {g.intAttr("axis", 1)});
  Value d;
  if (dy[0]) {
    llvm::SmallVector<Value> operands = {dy[0], logp, op->getOperand(1)};
    if (Value w = operandOr(op, 2)) operands.push_back(w);
    d = g.op("SoftmaxCrossEntropyLossGrad", operands, lossAttrs(op));
  }
  if (dy.size() > 1 && dy[1]) {
    Value viaLogp = g.sub(dy[1], g.mul(g.op("Exp", {logp}), g.reduceSum(dy[1], {1}, true)));
    d = d ? g.add(d, viaLogp) : viaLogp;
  }
  dx[0] = d;
  return mlir::success();
}

// The rules by ONNX op type. The op table's kGradient rows must name exactly these
// (op_table_test).
const std::map<std::string, GradientRule, std::less<>>& rules() {
  static const std::map<std::string, GradientRule, std::less<>> table = {
      {"Abs", gradAbs},
      {"Add", gradAdd},
      {"AveragePool", gradAveragePool},
      {"BatchNormalization", gradBatchNorm},
      {"Cast", gradCast},
      {"Clip", gradClip},
      {"Concat", gradConcat},
      {"Conv", gradConv},
      {"GroupNormalization", gradGroupNorm},
      {"InstanceNormalization", gradGroupNorm},
      {"Resize", gradResize},
      {"ConvTranspose", gradConvTranspose},
      {"Cos", gradCos},
      {"Div", gradDiv},
      {"Dropout", gradDropout},
      {"Elu", gradElu},
      {"Erf", gradErf},
      {"Exp", gradExp},
      {"Expand", gradExpand},
      {"Flatten", gradReshape},
      {"EmbeddingBag", gradEmbeddingBag},
      {"Gather", gradGather},
      {"Gelu", gradGelu},
      {"Gemm", gradGemm},
      {"GlobalAveragePool", gradGlobalAveragePool},
      {"GlobalMaxPool", gradGlobalMaxPool},
      {"HardSigmoid", gradHardSigmoid},
      {"HardSwish", gradHardSwish},
      {"Identity", gradIdentity},
      {"LayerNormalization", gradLayerNorm},
      {"LeakyRelu", gradLeakyRelu},
      {"Log", gradLog},
      {"LogSoftmax", gradLogSoftmax},
      {"MatMul", gradMatMul},
      {"Max", gradMax},
      {"MaxPool", gradMaxPool},
      {"Min", gradMin},
      {"Mul", gradMul},
      {"Neg", gradNeg},
      {"NegativeLogLikelihoodLoss", gradNegativeLogLikelihoodLoss},
      {"PRelu", gradPRelu},
      {"Pad", gradPad},
      {"Pow", gradPow},
      {"Reciprocal", gradReciprocal},
      {"ReduceL2", gradReduceL2},
      {"ReduceMax", gradReduceExtremum},
      {"ReduceMean", gradReduceMean},
      {"ReduceMin", gradReduceExtremum},
      {"ReduceSum", gradReduceSum},
      {"ReduceSumSquare", gradReduceSumSquare},
      {"Relu", gradRelu},
      {"Reshape", gradReshape},
      {"Selu", gradSelu},
      {"Sigmoid", gradSigmoid},
      {"Sin", gradSin},
      {"Slice", gradSlice},
      {"Softmax", gradSoftmax},
      {"SoftmaxCrossEntropyLoss", gradSoftmaxCrossEntropyLoss},
      {"Softplus", gradSoftplus},
      {"Split", gradSplit},
      {"Sqrt", gradSqrt},
      {"Squeeze", gradReshape},
      {"Sub", gradSub},
      {"Sum", gradSum},
      {"Tanh", gradTanh},
      {"Tile", gradTile},
      {"Transpose", gradTranspose},
      {"Unsqueeze", gradReshape},
      {"Where", gradWhere},
  };
  return table;
}

}  // namespace

GradientRule findGradientRule(llvm::StringRef onnxType) {
  auto it = rules().find(onnxType);
  return it == rules().end() ? nullptr : it->second;
}

std::vector<std::string> gradientRuleOps() {
  std::vector<std::string> out;
  for (const auto& [name, rule] : rules()) out.push_back(name);
  return out;
}

mlir::LogicalResult reverseSweep(mlir::OpBuilder& b, llvm::ArrayRef<mlir::Operation*> forward,
                                 const llvm::DenseSet<mlir::Value>& active,
                                 llvm::DenseMap<mlir::Value, mlir::Value>& grads) {
  for (mlir::Operation* op : llvm::reverse(forward)) {
    llvm::SmallVector<mlir::Value> dy;
    bool any = false;
    for (mlir::Value r : op->getResults()) {
      auto it = grads.find(r);
      dy.push_back(it == grads.end() ? mlir::Value() : it->second);
      any |= (bool)dy.back();
    }
    if (!any) continue;
    llvm::SmallVector<bool> needed;
    for (mlir::Value v : op->getOperands()) needed.push_back(active.count(v) != 0);
    if (!llvm::is_contained(needed, true)) continue;
    std::string type = onnxOpType(op), node = nodeName(op->getLoc());
    if (node.empty()) node = locationString(op->getLoc());
    autodiff::GradientRule rule = autodiff::findGradientRule(type);
    if (!rule)
      return op->emitError() << "no gradient for op '"
                             << (type.empty() ? op->getName().getStringRef().str() : type)
                             << "' (node '" << node << "')";
    for (mlir::Value v : op->getOperands())
      if (active.count(v) && !llvm::cast<mlir::RankedTensorType>(v.getType()).hasStaticShape())
        return op->emitError() << "tandem-autodiff: " << type << " (node '" << node
                               << "') has an operand of dynamic shape; bind its dims first";
    mlir::Location loc = mlir::NameLoc::get(b.getStringAttr(node + "/grad"), op->getLoc());
    autodiff::GradBuilder g(b, loc);
    llvm::SmallVector<mlir::Value> dx(op->getNumOperands());
    if (mlir::failed(rule(g, op, dy, needed, dx)) || g.failed()) return mlir::failure();
    for (unsigned i = 0; i < dx.size(); ++i) {
      if (!needed[i]) continue;
      mlir::Value v = op->getOperand(i);
      if (!dx[i])
        return op->emitError() << "no gradient for operand " << i << " of op '" << type
                               << "' (node '" << node << "')";
      // A rule's result type must be the operand's: a mismatch is a bug in the rule.
      assert(dx[i].getType() == v.getType() && "gradient rule returned the wrong type");
      auto [it, inserted] = grads.try_emplace(v, dx[i]);
      if (!inserted) {
        it->second = g.add(it->second, dx[i]);
        if (g.failed()) return mlir::failure();
      }
    }
  }
  return mlir::success();
}

}  // namespace tandem::autodiff

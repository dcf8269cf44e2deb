// The C++ graph API: each method is one ONNX op built through createTandemOp at the call site.
#include "frontend/GraphBuilder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "compiler/OpBuilding.h"
#include "compiler/ShapeInference.h"
#include "compiler/TandemDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

namespace tandem {

// ---------------------------------------------------------------------------------------------
// Value
// ---------------------------------------------------------------------------------------------

DType Value::dtype() const {
  if (!v_) return DType::Undefined;
  auto t = llvm::dyn_cast<mlir::ShapedType>(v_.getType());
  return t ? mlirToDType(t.getElementType()) : DType::Undefined;
}

std::vector<int64_t> Value::shape() const {
  if (!v_) return {};
  auto t = llvm::dyn_cast<mlir::RankedTensorType>(v_.getType());
  if (!t) return {};
  std::vector<int64_t> dims;
  for (int64_t d : t.getShape()) dims.push_back(mlir::ShapedType::isDynamic(d) ? -1 : d);
  return dims;
}

// ---------------------------------------------------------------------------------------------
// Builder state
// ---------------------------------------------------------------------------------------------

struct GraphBuilder::Impl {
  explicit Impl(mlir::MLIRContext* c, std::unique_ptr<mlir::MLIRContext> owned)
      : ownedCtx(std::move(owned)), ctx(c), b(c) {
    ctx->getOrLoadDialect<TandemDialect>();
    ctx->getOrLoadDialect<mlir::func::FuncDialect>();
    mlir::Location loc = mlir::UnknownLoc::get(ctx);
    module = mlir::ModuleOp::create(loc);
    func = mlir::func::FuncOp::create(loc, "main", b.getFunctionType({}, {}));
    module->push_back(func);
    body = func.addEntryBlock();
    b.setInsertionPointToStart(body);
  }

  std::unique_ptr<mlir::MLIRContext> ownedCtx;  // declared first: destroyed last
  mlir::MLIRContext* ctx;
  mlir::OpBuilder b;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  mlir::Block* body = nullptr;
  std::vector<std::string> inputNames;
  std::set<std::string> constantNames;  // namedConstant's
  std::vector<mlir::ArrayAttr> inputDimParams;
  std::vector<std::pair<mlir::Value, std::string>> outputs;
  bool finished = false;
};

GraphBuilder::GraphBuilder() {
  auto owned = std::make_unique<mlir::MLIRContext>();
  mlir::MLIRContext* c = owned.get();
  impl_ = std::make_unique<Impl>(c, std::move(owned));
}

GraphBuilder::GraphBuilder(mlir::MLIRContext* ctx) : impl_(std::make_unique<Impl>(ctx, nullptr)) {}

GraphBuilder::~GraphBuilder() {
  // The module must go before a context the builder owns.
  if (impl_) impl_->module = nullptr;
}

mlir::MLIRContext* GraphBuilder::context() const { return impl_->ctx; }

namespace {

const char* baseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

mlir::Location locOf(mlir::MLIRContext* ctx, const SourceLoc& loc) {
  return mlir::FileLineColLoc::get(ctx, baseName(loc.file), (unsigned)loc.line, 0);
}

mlir::Attribute toMlirAttr(mlir::Builder& b, const Attr& a) {
  switch (a.kind) {
    case Attr::Kind::Int: return b.getI64IntegerAttr(a.i);
    case Attr::Kind::Float: return b.getF32FloatAttr(a.f);
    case Attr::Kind::String: return b.getStringAttr(a.s);
    case Attr::Kind::Ints: return b.getI64ArrayAttr(a.ints);
    case Attr::Kind::Floats: return b.getF32ArrayAttr(a.floats);
    case Attr::Kind::Strings: {
      llvm::SmallVector<llvm::StringRef> s(a.strings.begin(), a.strings.end());
      return b.getStrArrayAttr(s);
    }
    case Attr::Kind::Tensor: return tensorToAttr(b.getContext(), a.t);
    case Attr::Kind::Graph: return b.getStringAttr(a.s);  // OpBuilding's toAttrMap reads it back
  }
  return {};
}

}  // namespace

void GraphBuilder::recordError(const SourceLoc& loc, const std::string& msg) {
  if (!error_.empty()) return;
  error_ = std::string(baseName(loc.file)) + ":" + std::to_string(loc.line) + ": " + msg;
  std::replace(error_.begin(), error_.end(), '\n', ' ');
}

bool GraphBuilder::usable(const SourceLoc& loc, const char* opType) {
  if (!error_.empty()) return false;
  if (impl_->finished) {
    recordError(loc, std::string(opType) + ": the builder is finished (finish() was called)");
    return false;
  }
  return true;
}

std::vector<Value> GraphBuilder::build(const char* opType,
                                       const std::vector<std::optional<Value>>& inputs,
                                       const AttrMap& attrs, unsigned numOutputs,
                                       const SourceLoc& loc) {
  std::vector<Value> none(numOutputs);
  if (!usable(loc, opType)) return none;
  llvm::SmallVector<mlir::Value> operands;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      operands.push_back(nullptr);
      continue;
    }
    mlir::Value v = inputs[i]->raw();
    if (!v) {
      recordError(loc, std::string(opType) + ": input " + std::to_string(i) +
                           " is an invalid Value (default-constructed, not built by this builder)");
      return none;
    }
    if (v.getParentBlock() != impl_->body) {
      recordError(loc, std::string(opType) + ": input " + std::to_string(i) +
                           " was built by another GraphBuilder");
      return none;
    }
    operands.push_back(v);
  }
  llvm::SmallVector<mlir::NamedAttribute> named;
  for (const auto& [name, a] : attrs.all())
    named.push_back(impl_->b.getNamedAttr(name, toMlirAttr(impl_->b, a)));

  std::string diag;
  mlir::FailureOr<mlir::Operation*> op;
  {
    mlir::ScopedDiagnosticHandler handler(impl_->ctx, [&](mlir::Diagnostic& d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error && diag.empty()) diag = d.str();
      return mlir::success();
    });
    op = createTandemOp(impl_->b, locOf(impl_->ctx, loc), opType, operands, named, numOutputs);
  }
  if (mlir::failed(op)) {
    // Shape functions start their reason with the op type; other diagnostics get it added.
    std::string prefix = std::string(opType) + ": ";
    if (diag.compare(0, prefix.size(), prefix) != 0) diag = prefix + (diag.empty() ? "could not be built" : diag);
    recordError(loc, diag);
    return none;
  }
  if (!device_.empty()) (*op)->setAttr("device", impl_->b.getStringAttr(device_));
  std::vector<Value> results;
  for (mlir::Value r : (*op)->getResults()) results.emplace_back(r);
  return results;
}

Value GraphBuilder::build1(const char* opType, const std::vector<std::optional<Value>>& inputs,
                           const AttrMap& attrs, const SourceLoc& loc) {
  return build(opType, inputs, attrs, 1, loc)[0];
}

std::vector<Value> GraphBuilder::op(const std::string& opType, const std::vector<Value>& inputs,
                                    const AttrMap& attrs, unsigned numOutputs, SourceLoc loc) {
  if (!usable(loc, opType.c_str())) return std::vector<Value>(numOutputs);
  if (!isKnownOp(opType) || opType == "Constant") {
    recordError(loc, opType + ": unsupported op type '" + opType + "'" +
                         (opType == "Constant" ? " (use constant())" : ""));
    return std::vector<Value>(numOutputs);
  }
  // In the generic form an invalid Value marks a skipped optional input.
  std::vector<std::optional<Value>> ins;
  for (const Value& v : inputs) ins.push_back(v.valid() ? std::optional<Value>(v) : std::nullopt);
  return build(opType.c_str(), ins, attrs, numOutputs, loc);
}

mlir::OwningOpRef<mlir::ModuleOp> GraphBuilder::finish(std::string* error) {
  auto failWith = [&](const std::string& e) -> mlir::OwningOpRef<mlir::ModuleOp> {
    if (error) *error = e;
    return nullptr;
  };
  if (!error_.empty()) return failWith(error_);
  if (impl_->finished) return failWith("GraphBuilder: finish() was already called");
  if (impl_->outputs.empty()) return failWith("GraphBuilder: the graph has no outputs (call output())");
  impl_->finished = true;

  mlir::OpBuilder& b = impl_->b;
  llvm::SmallVector<mlir::Value> results;
  llvm::SmallVector<mlir::Type> resultTypes;
  for (const auto& [v, name] : impl_->outputs) {
    results.push_back(v);
    resultTypes.push_back(v.getType());
  }
  b.setInsertionPointToEnd(impl_->body);
  b.create<mlir::func::ReturnOp>(mlir::UnknownLoc::get(impl_->ctx), results);
  mlir::func::FuncOp func = impl_->func;
  func.setType(b.getFunctionType(impl_->body->getArgumentTypes(), resultTypes));
  for (size_t i = 0; i < impl_->inputNames.size(); ++i) {
    func.setArgAttr(i, "tandem.name", b.getStringAttr(impl_->inputNames[i]));
    func.setArgAttr(i, "tandem.dim_params", impl_->inputDimParams[i]);
  }
  for (size_t i = 0; i < impl_->outputs.size(); ++i)
    func.setResultAttr(i, "tandem.name", b.getStringAttr(impl_->outputs[i].second));
  return std::move(impl_->module);
}

// ---------------------------------------------------------------------------------------------
// Inputs, outputs, constants
// ---------------------------------------------------------------------------------------------

Value GraphBuilder::input(const std::string& name, DType dtype, const std::vector<Dim>& dims,
                          SourceLoc loc) {
  if (!usable(loc, "input")) return Value();
  mlir::Type et = isHalfFloat(dtype) ? mlir::Type() : dtypeToMlir(impl_->ctx, dtype);
  if (!et) {
    recordError(loc, "input '" + name + "': dtype " + dtypeName(dtype) + " is not supported");
    return Value();
  }
  if (name.empty()) {
    recordError(loc, "input: the name must not be empty");
    return Value();
  }
  for (const std::string& n : impl_->inputNames) {
    if (n == name) {
      recordError(loc, "input '" + name + "': a graph input of that name already exists");
      return Value();
    }
  }
  if (impl_->constantNames.count(name)) {
    recordError(loc, "input '" + name + "': a named constant of that name already exists");
    return Value();
  }
  llvm::SmallVector<int64_t> shape;
  llvm::SmallVector<mlir::Attribute> params;
  for (const Dim& d : dims) {
    if (!d.param.empty() || d.value == -1) {
      shape.push_back(mlir::ShapedType::kDynamic);
    } else if (d.value >= 0) {
      shape.push_back(d.value);
    } else {
      recordError(loc, "input '" + name + "': dim " + std::to_string(d.value) +
                           " is invalid (>= 0, or -1 / a name for a symbolic dim)");
      return Value();
    }
    params.push_back(impl_->b.getStringAttr(d.param));
  }
  auto type = mlir::RankedTensorType::get(shape, et);
  mlir::Location l = mlir::NameLoc::get(impl_->b.getStringAttr(name), locOf(impl_->ctx, loc));
  mlir::Value arg = impl_->body->addArgument(type, l);
  impl_->inputNames.push_back(name);
  impl_->inputDimParams.push_back(impl_->b.getArrayAttr(params));
  return Value(arg);
}

void GraphBuilder::output(Value v, const std::string& name, SourceLoc loc) {
  if (!usable(loc, "output")) return;
  if (!v.valid() || v.raw().getParentBlock() != impl_->body) {
    recordError(loc, "output '" + name + "': not a Value built by this builder");
    return;
  }
  if (name.empty()) {
    recordError(loc, "output: the name must not be empty");
    return;
  }
  for (const auto& o : impl_->outputs) {
    if (o.second == name) {
      recordError(loc, "output '" + name + "': a graph output of that name already exists");
      return;
    }
  }
  impl_->outputs.push_back({v.raw(), name});
}

Value GraphBuilder::constant(const Tensor& t, SourceLoc loc) {
  if (!usable(loc, "constant")) return Value();
  if (!t.defined() || isHalfFloat(t.dtype()) || !dtypeToMlir(impl_->ctx, t.dtype())) {
    recordError(loc, std::string("constant: dtype ") + dtypeName(t.dtype()) + " is not supported");
    return Value();
  }
  if (t.device() != "cpu") {
    recordError(loc, "constant: the tensor lives on '" + t.device() + "'; pass a cpu tensor");
    return Value();
  }
  mlir::Value v = createConstant(impl_->b, locOf(impl_->ctx, loc), t);
  if (!device_.empty()) v.getDefiningOp()->setAttr("device", impl_->b.getStringAttr(device_));
  return Value(v);
}

Value GraphBuilder::namedConstant(const std::string& name, const Tensor& t, SourceLoc loc) {
  if (!usable(loc, "constant")) return Value();
  if (name.empty()) {
    recordError(loc, "constant: the name must not be empty");
    return Value();
  }
  bool isInput = std::find(impl_->inputNames.begin(), impl_->inputNames.end(), name) !=
                 impl_->inputNames.end();
  if (isInput || !impl_->constantNames.insert(name).second) {
    recordError(loc, "constant '" + name + "': " + (isInput ? "an input" : "a constant") +
                         " of that name already exists");
    return Value();
  }
  Value v = constant(t, loc);
  if (v) v.raw().getDefiningOp()->setLoc(mlir::NameLoc::get(impl_->b.getStringAttr(name),
                                                             locOf(impl_->ctx, loc)));
  return v;
}

Value GraphBuilder::constant(const std::vector<float>& values, const Shape& shape, SourceLoc loc) {
  if (!usable(loc, "constant")) return Value();
  for (int64_t d : shape) {
    if (d < 0) {
      recordError(loc, "constant: shape " + shapeToString(shape) + " has a negative dim");
      return Value();
    }
  }
  if ((int64_t)values.size() != numElements(shape)) {
    recordError(loc, "constant: " + std::to_string(values.size()) + " values for shape " +
                         shapeToString(shape) + " (" + std::to_string(numElements(shape)) +
                         " elements)");
    return Value();
  }
  return constant(Tensor::fromVector<float>(shape, values), loc);
}

Value GraphBuilder::constantInts(const std::vector<int64_t>& values, SourceLoc loc) {
  return constant(Tensor::fromVector<int64_t>({(int64_t)values.size()}, values), loc);
}

Value GraphBuilder::operandConstant(const Tensor& t, const SourceLoc& loc) {
  std::string saved = std::move(device_);
  device_.clear();
  Value v = constant(t, loc);
  device_ = std::move(saved);
  return v;
}

Value GraphBuilder::intsOperand(const std::vector<int64_t>& values, const SourceLoc& loc) {
  return operandConstant(Tensor::fromVector<int64_t>({(int64_t)values.size()}, values), loc);
}

Value GraphBuilder::scalar(float v, SourceLoc loc) {
  return constant(Tensor::fromVector<float>({}, {v}), loc);
}

// ---------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------

Value GraphBuilder::add(Value a, Value b, SourceLoc loc) { return build1("Add", {a, b}, {}, loc); }
Value GraphBuilder::sub(Value a, Value b, SourceLoc loc) { return build1("Sub", {a, b}, {}, loc); }
Value GraphBuilder::mul(Value a, Value b, SourceLoc loc) { return build1("Mul", {a, b}, {}, loc); }
Value GraphBuilder::div(Value a, Value b, SourceLoc loc) { return build1("Div", {a, b}, {}, loc); }
Value GraphBuilder::pow(Value x, Value y, SourceLoc loc) { return build1("Pow", {x, y}, {}, loc); }

namespace {
std::vector<std::optional<Value>> asInputs(const std::vector<Value>& xs) {
  return std::vector<std::optional<Value>>(xs.begin(), xs.end());
}
}  // namespace

Value GraphBuilder::min(const std::vector<Value>& xs, SourceLoc loc) {
  return build1("Min", asInputs(xs), {}, loc);
}
Value GraphBuilder::max(const std::vector<Value>& xs, SourceLoc loc) {
  return build1("Max", asInputs(xs), {}, loc);
}
Value GraphBuilder::sum(const std::vector<Value>& xs, SourceLoc loc) {
  return build1("Sum", asInputs(xs), {}, loc);
}
Value GraphBuilder::equal(Value a, Value b, SourceLoc loc) { return build1("Equal", {a, b}, {}, loc); }
Value GraphBuilder::less(Value a, Value b, SourceLoc loc) { return build1("Less", {a, b}, {}, loc); }
Value GraphBuilder::greater(Value a, Value b, SourceLoc loc) {
  return build1("Greater", {a, b}, {}, loc);
}
Value GraphBuilder::where(Value cond, Value x, Value y, SourceLoc loc) {
  return build1("Where", {cond, x, y}, {}, loc);
}

Value GraphBuilder::sqrt(Value x, SourceLoc loc) { return build1("Sqrt", {x}, {}, loc); }
Value GraphBuilder::exp(Value x, SourceLoc loc) { return build1("Exp", {x}, {}, loc); }
Value GraphBuilder::log(Value x, SourceLoc loc) { return build1("Log", {x}, {}, loc); }
Value GraphBuilder::neg(Value x, SourceLoc loc) { return build1("Neg", {x}, {}, loc); }
Value GraphBuilder::abs(Value x, SourceLoc loc) { return build1("Abs", {x}, {}, loc); }
Value GraphBuilder::reciprocal(Value x, SourceLoc loc) { return build1("Reciprocal", {x}, {}, loc); }
Value GraphBuilder::erf(Value x, SourceLoc loc) { return build1("Erf", {x}, {}, loc); }
Value GraphBuilder::relu(Value x, SourceLoc loc) { return build1("Relu", {x}, {}, loc); }
Value GraphBuilder::sigmoid(Value x, SourceLoc loc) { return build1("Sigmoid", {x}, {}, loc); }
Value GraphBuilder::tanh(Value x, SourceLoc loc) { return build1("Tanh", {x}, {}, loc); }
Value GraphBuilder::softplus(Value x, SourceLoc loc) { return build1("Softplus", {x}, {}, loc); }
Value GraphBuilder::identity(Value x, SourceLoc loc) { return build1("Identity", {x}, {}, loc); }

Value GraphBuilder::leakyRelu(Value x, float alpha, SourceLoc loc) {
  AttrMap a;
  a.set("alpha", Attr::ofFloat(alpha));
  return build1("LeakyRelu", {x}, a, loc);
}
Value GraphBuilder::prelu(Value x, Value slope, SourceLoc loc) {
  return build1("PRelu", {x, slope}, {}, loc);
}
Value GraphBuilder::elu(Value x, float alpha, SourceLoc loc) {
  AttrMap a;
  a.set("alpha", Attr::ofFloat(alpha));
  return build1("Elu", {x}, a, loc);
}
Value GraphBuilder::selu(Value x, float alpha, float gamma, SourceLoc loc) {
  AttrMap a;
  a.set("alpha", Attr::ofFloat(alpha));
  a.set("gamma", Attr::ofFloat(gamma));
  return build1("Selu", {x}, a, loc);
}
Value GraphBuilder::hardSigmoid(Value x, float alpha, float beta, SourceLoc loc) {
  AttrMap a;
  a.set("alpha", Attr::ofFloat(alpha));
  a.set("beta", Attr::ofFloat(beta));
  return build1("HardSigmoid", {x}, a, loc);
}
Value GraphBuilder::clip(Value x, std::optional<Value> min, std::optional<Value> max,
                         SourceLoc loc) {
  return build1("Clip", {x, min, max}, {}, loc);
}
Value GraphBuilder::clip(Value x, float min, float max, SourceLoc loc) {
  if (!usable(loc, "Clip")) return Value();
  return clip(x, operandConstant(Tensor::fromVector<float>({}, {min}), loc),
              operandConstant(Tensor::fromVector<float>({}, {max}), loc), loc);
}
Value GraphBuilder::softmax(Value x, int64_t axis, SourceLoc loc) {
  AttrMap a;
  a.set("axis", Attr::ofInt(axis));
  return build1("Softmax", {x}, a, loc);
}
Value GraphBuilder::logSoftmax(Value x, int64_t axis, SourceLoc loc) {
  AttrMap a;
  a.set("axis", Attr::ofInt(axis));
  return build1("LogSoftmax", {x}, a, loc);
}
Value GraphBuilder::cast(Value x, DType to, SourceLoc loc) {
  AttrMap a;
  a.set("to", Attr::ofInt((int64_t)to));
  return build1("Cast", {x}, a, loc);
}

// ---------------------------------------------------------------------------------------------
// Matrix products, convolution, pooling, normalisation
// ---------------------------------------------------------------------------------------------

namespace {
void setConvAttrs(const ConvOptions& o, AttrMap* a) {
  if (!o.kernelShape.empty()) a->set("kernel_shape", Attr::ofInts(o.kernelShape));
  if (!o.strides.empty()) a->set("strides", Attr::ofInts(o.strides));
  if (!o.pads.empty()) a->set("pads", Attr::ofInts(o.pads));
  if (!o.dilations.empty()) a->set("dilations", Attr::ofInts(o.dilations));
  if (o.group != 1) a->set("group", Attr::ofInt(o.group));
  if (o.autoPad != "NOTSET") a->set("auto_pad", Attr::ofString(o.autoPad));
}
}  // namespace

Value GraphBuilder::conv(Value x, Value w, std::optional<Value> b, const ConvOptions& opts,
                         SourceLoc loc) {
  AttrMap a;
  setConvAttrs(opts, &a);
  return build1("Conv", {x, w, b}, a, loc);
}

Value GraphBuilder::convTranspose(Value x, Value w, std::optional<Value> b,
                                  const ConvTransposeOptions& opts, SourceLoc loc) {
  AttrMap a;
  setConvAttrs(opts, &a);
  if (!opts.outputPadding.empty()) a.set("output_padding", Attr::ofInts(opts.outputPadding));
  if (!opts.outputShape.empty()) a.set("output_shape", Attr::ofInts(opts.outputShape));
  return build1("ConvTranspose", {x, w, b}, a, loc);
}

Value GraphBuilder::gemm(Value a, Value b, std::optional<Value> c, const GemmOptions& opts,
                         SourceLoc loc) {
  AttrMap m;
  if (opts.alpha != 1.0f) m.set("alpha", Attr::ofFloat(opts.alpha));
  if (opts.beta != 1.0f) m.set("beta", Attr::ofFloat(opts.beta));
  if (opts.transA) m.set("transA", Attr::ofInt(1));
  if (opts.transB) m.set("transB", Attr::ofInt(1));
  return build1("Gemm", {a, b, c}, m, loc);
}

Value GraphBuilder::dense(Value x, Value w, std::optional<Value> b, SourceLoc loc) {
  return gemm(x, w, b, GemmOptions{}, loc);
}

Value GraphBuilder::matMul(Value a, Value b, SourceLoc loc) {
  return build1("MatMul", {a, b}, {}, loc);
}

namespace {
void setPoolAttrs(const PoolOptions& o, AttrMap* a) {
  if (!o.kernelShape.empty()) a->set("kernel_shape", Attr::ofInts(o.kernelShape));
  if (!o.strides.empty()) a->set("strides", Attr::ofInts(o.strides));
  if (!o.pads.empty()) a->set("pads", Attr::ofInts(o.pads));
  if (o.ceilMode) a->set("ceil_mode", Attr::ofInt(1));
  if (o.autoPad != "NOTSET") a->set("auto_pad", Attr::ofString(o.autoPad));
}
}  // namespace

Value GraphBuilder::maxPool(Value x, const PoolOptions& opts, SourceLoc loc) {
  if (!usable(loc, "MaxPool")) return Value();
  if (opts.countIncludePad) {
    recordError(loc, "MaxPool: countIncludePad is an AveragePool option");
    return Value();
  }
  AttrMap a;
  setPoolAttrs(opts, &a);
  if (!opts.dilations.empty()) a.set("dilations", Attr::ofInts(opts.dilations));
  return build1("MaxPool", {x}, a, loc);
}

Value GraphBuilder::averagePool(Value x, const PoolOptions& opts, SourceLoc loc) {
  if (!usable(loc, "AveragePool")) return Value();
  if (!opts.dilations.empty()) {
    recordError(loc, "AveragePool: dilations are not an attribute of AveragePool-11");
    return Value();
  }
  AttrMap a;
  setPoolAttrs(opts, &a);
  if (opts.countIncludePad) a.set("count_include_pad", Attr::ofInt(1));
  return build1("AveragePool", {x}, a, loc);
}

Value GraphBuilder::globalAveragePool(Value x, SourceLoc loc) {
  return build1("GlobalAveragePool", {x}, {}, loc);
}
Value GraphBuilder::globalMaxPool(Value x, SourceLoc loc) {
  return build1("GlobalMaxPool", {x}, {}, loc);
}

Value GraphBuilder::batchNormalization(Value x, Value scale, Value bias, Value mean, Value var,
                                       float epsilon, SourceLoc loc) {
  AttrMap a;
  a.set("epsilon", Attr::ofFloat(epsilon));
  return build1("BatchNormalization", {x, scale, bias, mean, var}, a, loc);
}

Value GraphBuilder::layerNormalization(Value x, Value scale, std::optional<Value> bias,
                                       int64_t axis, float epsilon, SourceLoc loc) {
  AttrMap a;
  a.set("axis", Attr::ofInt(axis));
  a.set("epsilon", Attr::ofFloat(epsilon));
  return build1("LayerNormalization", {x, scale, bias}, a, loc);
}

Value GraphBuilder::dropout(Value x, float ratio, SourceLoc loc) {
  if (!usable(loc, "Dropout")) return Value();
  if (!(ratio >= 0.0f && ratio < 1.0f)) {
    recordError(loc, "Dropout: ratio " + std::to_string(ratio) + " is outside [0, 1)");
    return Value();
  }
  // Ratio 0.5 is Dropout-13's default; leave the input out so the IR stays minimal.
  if (ratio == 0.5f) return build1("Dropout", {x}, {}, loc);
  return build1("Dropout", {x, operandConstant(Tensor::fromVector<float>({}, {ratio}), loc)}, {},
                loc);
}

// ---------------------------------------------------------------------------------------------
// Shape manipulation
// ---------------------------------------------------------------------------------------------

Value GraphBuilder::flatten(Value x, int64_t axis, SourceLoc loc) {
  AttrMap a;
  a.set("axis", Attr::ofInt(axis));
  return build1("Flatten", {x}, a, loc);
}

Value GraphBuilder::reshape(Value x, const std::vector<int64_t>& shape, bool allowZero,
                            SourceLoc loc) {
  if (!usable(loc, "Reshape")) return Value();
  return reshape(x, intsOperand(shape, loc), allowZero, loc);
}

Value GraphBuilder::reshape(Value x, Value shape, bool allowZero, SourceLoc loc) {
  AttrMap a;
  if (allowZero) a.set("allowzero", Attr::ofInt(1));
  return build1("Reshape", {x, shape}, a, loc);
}

Value GraphBuilder::transpose(Value x, const std::vector<int64_t>& perm, SourceLoc loc) {
  AttrMap a;
  if (!perm.empty()) a.set("perm", Attr::ofInts(perm));
  return build1("Transpose", {x}, a, loc);
}

Value GraphBuilder::squeeze(Value x, const std::vector<int64_t>& axes, SourceLoc loc) {
  if (!usable(loc, "Squeeze")) return Value();
  if (axes.empty()) return build1("Squeeze", {x}, {}, loc);
  return build1("Squeeze", {x, intsOperand(axes, loc)}, {}, loc);
}

Value GraphBuilder::unsqueeze(Value x, const std::vector<int64_t>& axes, SourceLoc loc) {
  if (!usable(loc, "Unsqueeze")) return Value();
  return build1("Unsqueeze", {x, intsOperand(axes, loc)}, {}, loc);
}

Value GraphBuilder::concat(const std::vector<Value>& xs, int64_t axis, SourceLoc loc) {
  AttrMap a;
  a.set("axis", Attr::ofInt(axis));
  return build1("Concat", asInputs(xs), a, loc);
}

std::vector<Value> GraphBuilder::split(Value x, int64_t axis, const std::vector<int64_t>& split,
                                       SourceLoc loc) {
  if (!usable(loc, "Split")) return std::vector<Value>(split.size());
  if (split.empty()) {
    recordError(loc, "Split: the split sizes are empty (use splitEqual for equal parts)");
    return {};
  }
  AttrMap a;
  a.set("axis", Attr::ofInt(axis));
  return build("Split", {x, intsOperand(split, loc)}, a, (unsigned)split.size(), loc);
}

std::vector<Value> GraphBuilder::splitEqual(Value x, int64_t axis, int numOutputs, SourceLoc loc) {
  if (!usable(loc, "Split")) return std::vector<Value>(std::max(numOutputs, 0));
  if (numOutputs < 1) {
    recordError(loc, "Split: numOutputs must be >= 1, got " + std::to_string(numOutputs));
    return {};
  }
  AttrMap a;
  a.set("axis", Attr::ofInt(axis));
  return build("Split", {x}, a, (unsigned)numOutputs, loc);
}

Value GraphBuilder::slice(Value x, const std::vector<int64_t>& starts,
                          const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                          const std::vector<int64_t>& steps, SourceLoc loc) {
  if (!usable(loc, "Slice")) return Value();
  std::vector<std::optional<Value>> ins = {x, intsOperand(starts, loc), intsOperand(ends, loc)};
  if (!axes.empty() || !steps.empty())
    ins.push_back(axes.empty() ? std::nullopt : std::optional<Value>(intsOperand(axes, loc)));
  if (!steps.empty()) ins.push_back(intsOperand(steps, loc));
  return build1("Slice", ins, {}, loc);
}

Value GraphBuilder::gather(Value x, Value indices, int64_t axis, SourceLoc loc) {
  AttrMap a;
  a.set("axis", Attr::ofInt(axis));
  return build1("Gather", {x, indices}, a, loc);
}

Value GraphBuilder::embeddingBag(Value weight, Value indices, Value starts, Value ends,
                                 const std::string& mode, std::optional<Value> perSampleWeights,
                                 SourceLoc loc) {
  AttrMap a;
  a.set("mode", Attr::ofString(mode));
  std::vector<std::optional<Value>> in = {weight, indices, starts, ends};
  if (perSampleWeights) in.push_back(perSampleWeights);
  return build1("EmbeddingBag", in, a, loc);
}

Value GraphBuilder::shapeOf(Value x, int64_t start, std::optional<int64_t> end, SourceLoc loc) {
  AttrMap a;
  if (start != 0) a.set("start", Attr::ofInt(start));
  if (end) a.set("end", Attr::ofInt(*end));
  return build1("Shape", {x}, a, loc);
}

Value GraphBuilder::constantOfShape(const std::vector<int64_t>& shape, const Tensor& value,
                                    SourceLoc loc) {
  if (!usable(loc, "ConstantOfShape")) return Value();
  AttrMap a;
  if (value.defined()) a.set("value", Attr::ofTensor(value));
  return build1("ConstantOfShape", {intsOperand(shape, loc)}, a, loc);
}

Value GraphBuilder::expand(Value x, const std::vector<int64_t>& shape, SourceLoc loc) {
  if (!usable(loc, "Expand")) return Value();
  return build1("Expand", {x, intsOperand(shape, loc)}, {}, loc);
}

Value GraphBuilder::pad(Value x, const std::vector<int64_t>& pads, const std::string& mode,
                        double value, SourceLoc loc) {
  if (!usable(loc, "Pad")) return Value();
  AttrMap a;
  a.set("mode", Attr::ofString(mode));
  std::vector<std::optional<Value>> ins = {x, intsOperand(pads, loc)};
  if (value != 0.0) {
    DType dt = x.dtype();
    if (dt == DType::Undefined || isHalfFloat(dt)) {
      recordError(loc, "Pad: the fill value needs x of a supported dtype");
      return Value();
    }
    Tensor t = Tensor::alloc(dt, {});
    dispatchDType(dt, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) *t.data<uint8_t>() = value != 0;
      else *t.data<T>() = static_cast<T>(value);
    });
    ins.push_back(operandConstant(t, loc));
  }
  return build1("Pad", ins, a, loc);
}

Value GraphBuilder::tile(Value x, const std::vector<int64_t>& repeats, SourceLoc loc) {
  if (!usable(loc, "Tile")) return Value();
  return build1("Tile", {x, intsOperand(repeats, loc)}, {}, loc);
}

// ---------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------

namespace {
AttrMap reduceAttrs(const std::vector<int64_t>* axes, bool keepDims) {
  AttrMap a;
  if (axes && !axes->empty()) a.set("axes", Attr::ofInts(*axes));
  if (!keepDims) a.set("keepdims", Attr::ofInt(0));
  return a;
}
}  // namespace

Value GraphBuilder::reduceMean(Value x, const std::vector<int64_t>& axes, bool keepDims,
                               SourceLoc loc) {
  return build1("ReduceMean", {x}, reduceAttrs(&axes, keepDims), loc);
}
Value GraphBuilder::reduceMax(Value x, const std::vector<int64_t>& axes, bool keepDims,
                              SourceLoc loc) {
  return build1("ReduceMax", {x}, reduceAttrs(&axes, keepDims), loc);
}
Value GraphBuilder::reduceMin(Value x, const std::vector<int64_t>& axes, bool keepDims,
                              SourceLoc loc) {
  return build1("ReduceMin", {x}, reduceAttrs(&axes, keepDims), loc);
}
Value GraphBuilder::reduceSum(Value x, const std::vector<int64_t>& axes, bool keepDims,
                              SourceLoc loc) {
  // ReduceSum-13 takes its axes as an input (the others keep an attribute until opset 18).
  if (!usable(loc, "ReduceSum")) return Value();
  AttrMap a = reduceAttrs(nullptr, keepDims);
  if (axes.empty()) return build1("ReduceSum", {x}, a, loc);
  return build1("ReduceSum", {x, intsOperand(axes, loc)}, a, loc);
}

Value GraphBuilder::argMax(Value x, int64_t axis, bool keepDims, bool selectLastIndex,
                           SourceLoc loc) {
  AttrMap a;
  a.set("axis", Attr::ofInt(axis));
  if (!keepDims) a.set("keepdims", Attr::ofInt(0));
  if (selectLastIndex) a.set("select_last_index", Attr::ofInt(1));
  return build1("ArgMax", {x}, a, loc);
}

}  // namespace tandem

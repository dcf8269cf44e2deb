// The tandem dialect: registration, the ONNX-name table, and the one generic type inference
// that every ONNX op's InferTypeOpInterface methods forward to.
#include "compiler/TandemDialect.h"

#include "compiler/OpBuilding.h"
#include "compiler/ShapeInference.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeUtilities.h"

// Generated from TandemOps.td.
#include "compiler/TandemDialect.cpp.inc"

#define GET_OP_CLASSES
#include "compiler/TandemOps.cpp.inc"

namespace tandem {

namespace {

// Constant operands larger than this are not handed to shape functions: shape operands are small
// and the verifier runs inference on every op, so converting weights each time would be costly.
constexpr int64_t kMaxConstOperandElements = 4096;

template <typename... Ops>
void addOnnxNames(llvm::StringMap<std::string>& onnxToOp, llvm::StringMap<std::string>& opToOnnx) {
  auto add = [&](llvm::StringRef onnx, llvm::StringRef op) {
    if (onnx.empty()) return;
    onnxToOp[onnx] = op.str();
    opToOnnx[op] = onnx.str();
  };
  (add(Ops::getOnnxName(), Ops::getOperationName()), ...);
}

}  // namespace

void TandemDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "compiler/TandemOps.cpp.inc"
      >();
  registerOnnxNames();
}

void TandemDialect::registerOnnxNames() {
  addOnnxNames<
#define GET_OP_LIST
#include "compiler/TandemOps.cpp.inc"
      >(onnxToOp_, opToOnnx_);
}

llvm::StringRef TandemDialect::opNameForOnnx(llvm::StringRef onnxType) const {
  auto it = onnxToOp_.find(onnxType);
  return it == onnxToOp_.end() ? llvm::StringRef() : llvm::StringRef(it->second);
}

llvm::StringRef TandemDialect::onnxNameForOp(llvm::StringRef opName) const {
  auto it = opToOnnx_.find(opName);
  return it == opToOnnx_.end() ? llvm::StringRef() : llvm::StringRef(it->second);
}

mlir::Operation* TandemDialect::materializeConstant(mlir::OpBuilder& builder, mlir::Attribute value,
                                                    mlir::Type type, mlir::Location loc) {
  auto elements = llvm::dyn_cast<mlir::ElementsAttr>(value);
  if (!elements || elements.getType() != type) return nullptr;
  return builder.create<ConstantOp>(loc, type, elements);
}

// ---- tandem.constant ----

mlir::OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

mlir::LogicalResult ConstantOp::inferReturnTypes(mlir::MLIRContext*,
                                                 std::optional<mlir::Location> location,
                                                 mlir::ValueRange, mlir::DictionaryAttr attributes,
                                                 mlir::OpaqueProperties, mlir::RegionRange,
                                                 llvm::SmallVectorImpl<mlir::Type>& inferred) {
  auto value = attributes ? attributes.getAs<mlir::ElementsAttr>("value") : nullptr;
  if (!value)
    return mlir::emitOptionalError(location, "tandem.constant needs an elements attribute `value`");
  inferred.push_back(value.getType());
  return mlir::success();
}

// ---- tandem.fused ----

mlir::LogicalResult FusedOp::verify() {
  mlir::Block& body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "region has " << body.getNumArguments() << " arguments for "
                         << getInputs().size() << " inputs";
  for (auto [arg, in] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != in.getType())
      return emitOpError() << "region argument type " << arg.getType()
                           << " differs from its input " << in.getType();
  auto yield = llvm::dyn_cast<YieldOp>(body.getTerminator());
  if (!yield) return emitOpError("region must end in tandem.yield");
  if (yield.getValues().getTypes() != getOutputs().getTypes())
    return emitOpError("tandem.yield types differ from the results");
  return mlir::success();
}

// ---- Generic inference for ONNX ops ----

namespace detail {

namespace {

// The natural result count when a builder does not say: Split's is its number of pieces.
size_t defaultNumResults(llvm::StringRef onnxName, const std::vector<OperandInfo>& in,
                         const AttrMap& attrs) {
  if (onnxName != "Split") return 1;
  if (attrs.has("num_outputs")) return (size_t)std::max<int64_t>(1, attrs.getInt("num_outputs", 1));
  if (in.size() > 1 && in[1].present) {
    if (in[1].value) return (size_t)std::max<int64_t>(1, in[1].value->numel());
    if (in[1].dims.size() == 1 && in[1].dims[0] >= 0)
      return (size_t)std::max<int64_t>(1, in[1].dims[0]);
  }
  return 1;
}

// Operand types + small constant values -> OperandInfo. `storage` owns the constant tensors.
std::string collectOperands(llvm::StringRef onnxName, mlir::ValueRange operands,
                            std::vector<OperandInfo>* out, std::vector<Tensor>* storage) {
  storage->reserve(operands.size());
  for (auto [i, v] : llvm::enumerate(operands)) {
    OperandInfo info;
    mlir::Type t = v.getType();
    if (llvm::isa<mlir::NoneType>(t)) {
      info.present = false;
      out->push_back(info);
      continue;
    }
    auto ranked = llvm::dyn_cast<mlir::RankedTensorType>(t);
    if (!ranked) return (onnxName + ": input " + llvm::Twine(i) + " has unknown rank").str();
    info.dtype = mlirToDType(ranked.getElementType());
    if (info.dtype == DType::Undefined) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << onnxName << ": input " << i << " has unsupported element type "
         << ranked.getElementType();
      return os.str();
    }
    for (int64_t d : ranked.getShape())
      info.dims.push_back(mlir::ShapedType::isDynamic(d) ? kUnknownDim : d);
    if (ranked.hasStaticShape() && ranked.getNumElements() <= kMaxConstOperandElements) {
      Tensor value;
      if (getConstantValue(v, &value)) {
        storage->push_back(std::move(value));
        info.value = &storage->back();
      }
    }
    out->push_back(std::move(info));
  }
  return "";
}

mlir::LogicalResult fail(std::optional<mlir::Location> location, const std::string& msg) {
  return mlir::emitOptionalError(location, msg);
}

}  // namespace

mlir::LogicalResult inferOnnxOpTypes(llvm::StringRef onnxName,
                                     llvm::ArrayRef<llvm::StringRef> attrNames,
                                     mlir::MLIRContext* ctx, std::optional<mlir::Location> location,
                                     mlir::ValueRange operands, mlir::DictionaryAttr attributes,
                                     size_t numResults,
                                     llvm::SmallVectorImpl<mlir::Type>& inferred) {
  std::vector<OperandInfo> in;
  std::vector<Tensor> storage;
  std::string err = collectOperands(onnxName, operands, &in, &storage);
  if (!err.empty()) return fail(location, err);
  AttrMap attrs;
  err = toAttrMap(onnxName, attributes, attrNames, &attrs);
  if (!err.empty()) return fail(location, err);
  if (numResults == 0) numResults = defaultNumResults(onnxName, in, attrs);

  std::vector<ResultInfo> results;
  err = inferResultTypes(onnxName.str(), in, attrs, numResults, &results);
  if (!err.empty()) return fail(location, err);
  if (results.size() != numResults)
    return fail(location, (onnxName + ": shape function gave " + llvm::Twine(results.size()) +
                           " results, expected " + llvm::Twine(numResults))
                              .str());
  for (auto [i, r] : llvm::enumerate(results)) {
    mlir::Type et = dtypeToMlir(ctx, r.dtype);
    if (!et)
      return fail(location, (onnxName + ": result " + llvm::Twine(i) + " has unsupported dtype " +
                             dtypeName(r.dtype))
                                .str());
    llvm::SmallVector<int64_t> dims;
    for (int64_t d : r.dims) dims.push_back(d < 0 ? mlir::ShapedType::kDynamic : d);
    inferred.push_back(mlir::RankedTensorType::get(dims, et));
  }
  return mlir::success();
}

mlir::LogicalResult refineOnnxOpTypes(llvm::StringRef onnxName,
                                      llvm::ArrayRef<llvm::StringRef> attrNames,
                                      mlir::MLIRContext* ctx,
                                      std::optional<mlir::Location> location,
                                      mlir::ValueRange operands, mlir::DictionaryAttr attributes,
                                      llvm::SmallVectorImpl<mlir::Type>& returnTypes) {
  llvm::SmallVector<mlir::Type, 4> inferred;
  if (mlir::failed(inferOnnxOpTypes(onnxName, attrNames, ctx, location, operands, attributes,
                                    returnTypes.size(), inferred)))
    return mlir::failure();
  if (returnTypes.empty())
    return fail(location, (onnxName + ": an ONNX op needs at least one result").str());
  for (size_t i = 0; i < returnTypes.size(); ++i) {
    auto have = llvm::dyn_cast<mlir::RankedTensorType>(returnTypes[i]);
    auto want = llvm::cast<mlir::RankedTensorType>(inferred[i]);
    // Declared types may be less refined than inference (before --tandem-infer-shapes binds
    // symbolic dims) or more refined (a pass already knew more); they must never contradict.
    if (!have || have.getElementType() != want.getElementType() ||
        mlir::failed(mlir::verifyCompatibleShape(have, want))) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << onnxName << ": result " << i << " is declared " << returnTypes[i]
         << " but its operands and attributes give " << inferred[i];
      return fail(location, os.str());
    }
    llvm::SmallVector<int64_t> dims;
    for (auto [h, w] : llvm::zip(have.getShape(), want.getShape()))
      dims.push_back(mlir::ShapedType::isDynamic(h) ? w : h);
    returnTypes[i] = mlir::RankedTensorType::get(dims, have.getElementType());
  }
  return mlir::success();
}

}  // namespace detail
}  // namespace tandem

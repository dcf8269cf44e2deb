// Generic op building and reading by ONNX op type, and the tensor <-> attribute conversions.
#include "compiler/OpBuilding.h"

#include <cstring>

#include "compiler/ShapeInference.h"
#include "compiler/TandemDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

namespace tandem {

// ---- dtypes ----

mlir::Type dtypeToMlir(mlir::MLIRContext* ctx, DType t) {
  switch (t) {
    case DType::F32:
      return mlir::Float32Type::get(ctx);
    case DType::F64:
      return mlir::Float64Type::get(ctx);
    case DType::F16:
      return mlir::Float16Type::get(ctx);
    case DType::BF16:
      return mlir::BFloat16Type::get(ctx);
    case DType::I32:
      return mlir::IntegerType::get(ctx, 32);
    case DType::I64:
      return mlir::IntegerType::get(ctx, 64);
    case DType::Bool:
      return mlir::IntegerType::get(ctx, 1);
    case DType::I8:
      return mlir::IntegerType::get(ctx, 8);
    case DType::U8:
      return mlir::IntegerType::get(ctx, 8, mlir::IntegerType::Unsigned);
    case DType::I16:
      return mlir::IntegerType::get(ctx, 16);
    case DType::U16:
      return mlir::IntegerType::get(ctx, 16, mlir::IntegerType::Unsigned);
    case DType::U32:
      return mlir::IntegerType::get(ctx, 32, mlir::IntegerType::Unsigned);
    case DType::U64:
      return mlir::IntegerType::get(ctx, 64, mlir::IntegerType::Unsigned);
    default:
      return nullptr;
  }
}

TensorType tensorTypeOf(mlir::Value v) {
  TensorType t;
  if (auto r = llvm::dyn_cast<mlir::RankedTensorType>(v.getType())) {
    t.dtype = mlirToDType(r.getElementType());
    for (int64_t d : r.getShape()) t.shape.push_back(mlir::ShapedType::isDynamic(d) ? -1 : d);
  }
  return t;
}

DType mlirToDType(mlir::Type t) {
  if (!t) return DType::Undefined;
  if (t.isF32()) return DType::F32;
  if (t.isF64()) return DType::F64;
  if (t.isF16()) return DType::F16;
  if (t.isBF16()) return DType::BF16;
  if (auto it = llvm::dyn_cast<mlir::IntegerType>(t)) {
    if (it.isSignless()) {
      switch (it.getWidth()) {
        case 1:
          return DType::Bool;
        case 8:
          return DType::I8;
        case 16:
          return DType::I16;
        case 32:
          return DType::I32;
        case 64:
          return DType::I64;
        default:
          return DType::Undefined;
      }
    }
    if (it.isUnsigned()) {
      switch (it.getWidth()) {
        case 8:
          return DType::U8;
        case 16:
          return DType::U16;
        case 32:
          return DType::U32;
        case 64:
          return DType::U64;
        default:
          return DType::Undefined;
      }
    }
  }
  return DType::Undefined;
}

// ---- tensors <-> attributes ----

mlir::DenseElementsAttr tensorToAttr(mlir::MLIRContext* ctx, const Tensor& t) {
  mlir::Type et = dtypeToMlir(ctx, t.dtype());
  assert(et && "tensorToAttr: tensor dtype has no MLIR element type");
  auto type = mlir::RankedTensorType::get(t.shape(), et);
  if (t.dtype() == DType::Bool) {
    // MLIR packs i1 elements as bits; the runtime stores one byte per bool.
    llvm::SmallVector<bool> bits(t.numel());
    const uint8_t* p = static_cast<const uint8_t*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i) bits[i] = p[i] != 0;
    return mlir::DenseElementsAttr::get(type, llvm::ArrayRef<bool>(bits));
  }
  // One copy of the bytes, no per-element APInt/APFloat: weights can be tens of MB.
  llvm::ArrayRef<char> raw(static_cast<const char*>(t.raw()), t.bytes());
  return mlir::DenseElementsAttr::getFromRawBuffer(type, raw);
}

Tensor attrToTensor(mlir::DenseElementsAttr a) {
  auto type = llvm::cast<mlir::ShapedType>(a.getType());
  DType dt = mlirToDType(type.getElementType());
  assert(dt != DType::Undefined && "attrToTensor: element type has no tandem dtype");
  Tensor t = Tensor::alloc(dt, Shape(type.getShape().begin(), type.getShape().end()));
  int64_t n = t.numel();
  if (n == 0) return t;
  if (dt == DType::Bool) {
    uint8_t* p = t.data<uint8_t>();
    int64_t i = 0;
    for (bool b : a.getValues<bool>()) p[i++] = b ? 1 : 0;
    return t;
  }
  llvm::ArrayRef<char> raw = a.getRawData();
  size_t elem = dtypeSize(dt);
  char* dst = static_cast<char*>(t.raw());
  if (a.isSplat()) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * elem, raw.data(), elem);
  } else {
    assert(raw.size() == t.bytes());
    std::memcpy(dst, raw.data(), raw.size());
  }
  return t;
}

bool getConstantValue(mlir::Value v, Tensor* out) {
  if (!v) return false;
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c) return false;
  auto dense = llvm::dyn_cast<mlir::DenseElementsAttr>(c.getValue());
  if (!dense || mlirToDType(dense.getElementType()) == DType::Undefined) return false;
  if (out) *out = attrToTensor(dense);
  return true;
}

// ---- attributes ----

namespace detail {

// Control-flow ops carry each subgraph as a string attribute holding its compiled plan::Plan
// (the importer compiles it, frontend/OnnxImporter.cpp); everywhere else it is a Graph.
bool isGraphAttr(llvm::StringRef onnxName, llvm::StringRef name) {
  if (onnxName == "If") return name == "then_branch" || name == "else_branch";
  return (onnxName == "Loop" || onnxName == "Scan" || onnxName == "DynamicRegion") && name == "body";
}

std::string toAttrMap(llvm::StringRef onnxName, mlir::DictionaryAttr attributes,
                      llvm::ArrayRef<llvm::StringRef> attrNames, AttrMap* out) {
  if (!attributes) return "";
  for (llvm::StringRef name : attrNames) {
    mlir::Attribute a = attributes.get(name);
    if (!a) continue;
    auto bad = [&](const char* why) {
      return (onnxName + ": attribute '" + name + "' " + why).str();
    };
    if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(a)) {
      out->set(name.str(), Attr::ofInt(i.getValue().getSExtValue()));
    } else if (auto f = llvm::dyn_cast<mlir::FloatAttr>(a)) {
      out->set(name.str(), Attr::ofFloat((float)f.getValueAsDouble()));
    } else if (auto s = llvm::dyn_cast<mlir::StringAttr>(a)) {
      out->set(name.str(), isGraphAttr(onnxName, name) ? Attr::ofGraph(s.str()) : Attr::ofString(s.str()));
    } else if (auto arr = llvm::dyn_cast<mlir::ArrayAttr>(a)) {
      std::vector<int64_t> ints;
      std::vector<float> floats;
      std::vector<std::string> strings;
      for (mlir::Attribute e : arr) {
        if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(e))
          ints.push_back(i.getValue().getSExtValue());
        else if (auto f = llvm::dyn_cast<mlir::FloatAttr>(e))
          floats.push_back((float)f.getValueAsDouble());
        else if (auto s = llvm::dyn_cast<mlir::StringAttr>(e))
          strings.push_back(s.str());
        else
          return bad("has an array element that is not an int, float or string");
      }
      int kinds = !ints.empty() + !floats.empty() + !strings.empty();
      if (kinds > 1) return bad("mixes ints, floats and strings");
      if (!floats.empty())
        out->set(name.str(), Attr::ofFloats(std::move(floats)));
      else if (!strings.empty())
        out->set(name.str(), Attr::ofStrings(std::move(strings)));
      else
        out->set(name.str(), Attr::ofInts(std::move(ints)));  // [] reads as empty INTS
    } else if (auto d = llvm::dyn_cast<mlir::DenseElementsAttr>(a)) {
      if (mlirToDType(d.getElementType()) == DType::Undefined)
        return bad("has an unsupported element type");
      out->set(name.str(), Attr::ofTensor(attrToTensor(d)));
    } else {
      return bad("is not an int, float, string, array or dense tensor");
    }
  }
  return "";
}

}  // namespace detail

namespace {
// The op's ODS-declared (inherent) attributes: for ONNX ops exactly its ONNX attributes.
llvm::SmallVector<llvm::StringRef> attributeNamesOf(mlir::RegisteredOperationName info) {
  llvm::SmallVector<llvm::StringRef> names;
  for (mlir::StringAttr a : info.getAttributeNames()) names.push_back(a.getValue());
  return names;
}
}  // namespace

AttrMap toAttrMap(mlir::Operation* op) {
  AttrMap m;
  auto info = op->getRegisteredInfo();
  if (!info || !llvm::isa<TandemDialect>(op->getDialect())) return m;
  llvm::SmallVector<llvm::StringRef> names = attributeNamesOf(*info);
  std::string err = detail::toAttrMap(onnxOpType(op), op->getAttrDictionary(), names, &m);
  // The ODS verifier constrains attribute kinds, so a verified op always converts.
  assert(err.empty() && "toAttrMap on an op that does not verify");
  (void)err;
  return m;
}

std::string onnxOpType(mlir::Operation* op) {
  auto* dialect = llvm::dyn_cast_if_present<TandemDialect>(op->getDialect());
  if (!dialect) return "";
  return dialect->onnxNameForOp(op->getName().getStringRef()).str();
}

// ---- building ----

mlir::Value createConstant(mlir::OpBuilder& b, mlir::Location loc, const Tensor& t) {
  b.getContext()->getOrLoadDialect<TandemDialect>();
  mlir::DenseElementsAttr value = tensorToAttr(b.getContext(), t);
  return b.create<ConstantOp>(loc, value.getType(), value).getResult();
}

mlir::FailureOr<mlir::Operation*> createTandemOp(mlir::OpBuilder& b, mlir::Location loc,
                                                 llvm::StringRef onnxType,
                                                 llvm::ArrayRef<mlir::Value> operands,
                                                 llvm::ArrayRef<mlir::NamedAttribute> attrs,
                                                 unsigned numResults) {
  mlir::MLIRContext* ctx = b.getContext();
  auto* dialect = ctx->getOrLoadDialect<TandemDialect>();
  llvm::StringRef opName = dialect->opNameForOnnx(onnxType);
  if (opName.empty() || onnxType == "Copy")
    return mlir::emitError(loc) << "unsupported op type " << onnxType;
  auto info = mlir::RegisteredOperationName::lookup(opName, ctx);
  assert(info && "tandem op in the name table but not registered");

  // Only ONNX attributes of this op are accepted: a stray one means the importer or the builder
  // did not normalise an older opset, and silently ignoring it would change semantics.
  llvm::SmallVector<llvm::StringRef> attrNames = attributeNamesOf(*info);
  for (const mlir::NamedAttribute& a : attrs)
    if (!llvm::is_contained(attrNames, a.getName().getValue()))
      return mlir::emitError(loc) << onnxType << ": attribute '" << a.getName().getValue()
                                  << "' is not an attribute of ONNX " << onnxType << " at opset 17";
  mlir::DictionaryAttr dict = mlir::DictionaryAttr::get(ctx, attrs);

  // Trailing skipped inputs are dropped; inner ones become a tandem.none value.
  size_t n = operands.size();
  while (n > 0 && !operands[n - 1]) --n;
  llvm::SmallVector<mlir::Value> ins;
  llvm::SmallVector<mlir::Operation*> nones;
  for (size_t i = 0; i < n; ++i) {
    if (!operands[i]) nones.push_back(b.create<NoneOp>(loc));
    ins.push_back(operands[i] ? operands[i] : nones.back()->getResult(0));
  }
  // A failed build leaves the IR as it was.
  auto abandon = [&]() -> mlir::FailureOr<mlir::Operation*> {
    for (mlir::Operation* none : nones) none->erase();
    return mlir::failure();
  };

  llvm::SmallVector<mlir::Type> types;
  if (onnxType == "Constant") {
    if (!ins.empty()) {
      mlir::emitError(loc) << "Constant: takes no inputs";
      return abandon();
    }
    if (mlir::failed(ConstantOp::inferReturnTypes(ctx, loc, ins, dict,
                                                  mlir::OpaqueProperties(nullptr), {}, types)))
      return abandon();
  } else if (mlir::failed(detail::inferOnnxOpTypes(onnxType, attrNames, ctx, loc, ins, dict,
                                                   numResults, types))) {
    return abandon();
  }

  mlir::OperationState state(loc, opName);
  state.addOperands(ins);
  state.addAttributes(attrs);
  state.addTypes(types);
  mlir::Operation* op = b.create(state);
  // Attribute kinds (i64 vs i32, f32 arrays, ...) are checked by the ODS verifier; a failure
  // has been reported at `loc`, and the half-built op must not stay in the IR.
  if (mlir::failed(mlir::verify(op, /*verifyRecursively=*/false))) {
    op->erase();
    return abandon();
  }
  return op;
}

}  // namespace tandem

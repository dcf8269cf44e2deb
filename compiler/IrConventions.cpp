// The IR conventions of compiler/IrConventions.h: names, devices, type re-inference.
#include "compiler/IrConventions.h"

#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "runtime/Device.h"

namespace tandem {

mlir::func::FuncOp getMainFunc(mlir::ModuleOp module) {
  return module.lookupSymbol<mlir::func::FuncOp>("main");
}

std::string nodeName(mlir::Location loc) {
  if (auto n = llvm::dyn_cast<mlir::NameLoc>(loc)) return n.getName().str();
  if (auto c = llvm::dyn_cast<mlir::CallSiteLoc>(loc)) return nodeName(c.getCallee());
  if (auto f = llvm::dyn_cast<mlir::FusedLoc>(loc))
    for (mlir::Location l : f.getLocations())
      if (std::string s = nodeName(l); !s.empty()) return s;
  return "";
}

std::string valueName(mlir::Value v) {
  if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(v)) {
    auto func = llvm::dyn_cast<mlir::func::FuncOp>(arg.getOwner()->getParentOp());
    if (func)
      if (auto name = func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), kNameAttr))
        return name.str();
    return "arg" + std::to_string(arg.getArgNumber());
  }
  mlir::Operation* op = v.getDefiningOp();
  std::string base = nodeName(op->getLoc());
  if (base.empty()) {
    std::string type = onnxOpType(op);
    base = type.empty() ? op->getName().getStringRef().str() : type;
    if (std::string where = locationString(op->getLoc()); !where.empty()) base += "@" + where;
  }
  unsigned idx = llvm::cast<mlir::OpResult>(v).getResultNumber();
  return idx == 0 ? base : base + ":" + std::to_string(idx);
}

std::string locationString(mlir::Location loc) {
  if (auto n = llvm::dyn_cast<mlir::NameLoc>(loc)) {
    std::string child = locationString(n.getChildLoc());
    return child.empty() ? n.getName().str() : n.getName().str() + " at " + child;
  }
  if (auto f = llvm::dyn_cast<mlir::FileLineColLoc>(loc))
    return f.getFilename().str() + ":" + std::to_string(f.getLine()) + ":" +
           std::to_string(f.getColumn());
  if (auto c = llvm::dyn_cast<mlir::CallSiteLoc>(loc)) return locationString(c.getCallee());
  if (auto f = llvm::dyn_cast<mlir::FusedLoc>(loc)) {
    std::string s;
    for (mlir::Location l : f.getLocations())
      if (std::string part = locationString(l); !part.empty()) s += (s.empty() ? "" : ", ") + part;
    return s;
  }
  return "";
}

std::string canonicalDevice(const std::string& name) { return canonicalDeviceName(name); }

std::string deviceKindOf(const std::string& device) { return device.substr(0, device.find(':')); }

std::string deviceOfOp(mlir::Operation* op) {
  auto d = op->getAttrOfType<mlir::StringAttr>(kDeviceAttr);
  return d ? d.str() : "";
}

std::string deviceOfValue(mlir::Value v) {
  if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(v)) {
    auto func = llvm::dyn_cast<mlir::func::FuncOp>(arg.getOwner()->getParentOp());
    if (!func) return "";
    auto d = func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), kArgDeviceAttr);
    return d ? d.str() : "";
  }
  return deviceOfOp(v.getDefiningOp());
}

bool isAllocatedAtRunTime(mlir::Value v) {
  return llvm::isa_and_nonnull<DynamicRegionOp>(v.getDefiningOp());
}

std::string resultLayout(mlir::Value v) {
  auto r = llvm::dyn_cast<mlir::OpResult>(v);
  if (!r) return "";
  auto list = r.getOwner()->getAttrOfType<mlir::ArrayAttr>(kResultLayoutsAttr);
  if (!list || r.getResultNumber() >= list.size()) return "";
  auto s = llvm::dyn_cast<mlir::StringAttr>(list[r.getResultNumber()]);
  return s ? s.str() : "";
}

bool isVariableArg(mlir::Value v) {
  auto arg = llvm::dyn_cast<mlir::BlockArgument>(v);
  if (!arg) return false;
  auto func = llvm::dyn_cast_or_null<mlir::func::FuncOp>(arg.getOwner()->getParentOp());
  return func && func.getArgAttr(arg.getArgNumber(), kVariableAttr);
}

bool isVariableUpdateResult(mlir::func::FuncOp main, unsigned i) {
  return i < main.getNumResults() && main.getResultAttr(i, kVariableUpdateAttr);
}

mlir::LogicalResult reinferResultTypes(mlir::Operation* op) {
  if (!llvm::isa_and_present<TandemDialect>(op->getDialect())) return mlir::success();
  if (auto copy = llvm::dyn_cast<CopyOp>(op)) {
    copy.getOutput().setType(copy.getInput().getType());
    return mlir::success();
  }
  auto infer = llvm::dyn_cast<mlir::InferTypeOpInterface>(op);
  if (!infer) return mlir::success();
  llvm::SmallVector<mlir::Type, 4> types(op->getResultTypes());
  if (mlir::failed(infer.refineReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                           op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                           op->getRegions(), types)))
    return mlir::failure();
  for (auto [result, type] : llvm::zip(op->getResults(), types)) result.setType(type);
  return mlir::success();
}

void updateMainResultTypes(mlir::func::FuncOp main) {
  auto ret = llvm::cast<mlir::func::ReturnOp>(main.getBody().front().getTerminator());
  main.setFunctionType(
      mlir::FunctionType::get(main.getContext(), main.getArgumentTypes(), ret.getOperandTypes()));
}

int64_t intAttrOr(mlir::Operation* op, llvm::StringRef name, int64_t dflt) {
  auto a = op->getAttrOfType<mlir::IntegerAttr>(name);
  return a ? a.getValue().getSExtValue() : dflt;
}

double floatAttrOr(mlir::Operation* op, llvm::StringRef name, double dflt) {
  auto a = op->getAttrOfType<mlir::FloatAttr>(name);
  return a ? a.getValueAsDouble() : dflt;
}

std::string strAttrOr(mlir::Operation* op, llvm::StringRef name, llvm::StringRef dflt) {
  auto a = op->getAttrOfType<mlir::StringAttr>(name);
  return a ? a.str() : dflt.str();
}

llvm::SmallVector<int64_t> intsAttr(mlir::Operation* op, llvm::StringRef name) {
  llvm::SmallVector<int64_t> out;
  if (auto a = op->getAttrOfType<mlir::ArrayAttr>(name))
    for (mlir::Attribute e : a)
      if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(e)) out.push_back(i.getValue().getSExtValue());
  return out;
}

llvm::SmallVector<int64_t> intsAttrOr(mlir::Operation* op, llvm::StringRef name, int64_t n,
                                      int64_t dflt) {
  llvm::SmallVector<int64_t> out(n, dflt);
  if (auto a = op->getAttrOfType<mlir::ArrayAttr>(name))
    for (auto [i, e] : llvm::enumerate(a))
      if (auto v = llvm::dyn_cast<mlir::IntegerAttr>(e); v && (int64_t)i < n)
        out[i] = v.getValue().getSExtValue();
  return out;
}

}  // namespace tandem

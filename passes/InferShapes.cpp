// --tandem-infer-shapes: bind symbolic input dims, then re-infer every result type in order.
#include "compiler/TandemDialect.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"

namespace tandem {
#define GEN_PASS_DEF_TANDEMINFERSHAPES
#include "passes/Passes.h.inc"
}  // namespace tandem

namespace tandem {

mlir::LogicalResult bindInputShapes(mlir::ModuleOp module,
                                    const std::map<std::string, int64_t>& dimBindings,
                                    const std::map<std::string, Shape>& inputShapes,
                                    int64_t defaultDim, std::vector<std::string>* notes) {
  mlir::func::FuncOp main = getMainFunc(module);
  if (!main) return module.emitError("bind inputs: module has no func.func @main");
  for (const auto& [name, value] : dimBindings)
    if (value < 0)
      return main.emitError() << "bind inputs: symbolic dim '" << name << "' bound to " << value
                              << "; a dim must be >= 0";
  std::map<std::string, bool> shapeUsed;
  for (const auto& kv : inputShapes) shapeUsed[kv.first] = false;

  llvm::SmallVector<mlir::Type> argTypes;
  for (mlir::BlockArgument arg : main.getArguments()) {
    auto type = llvm::dyn_cast<mlir::RankedTensorType>(arg.getType());
    if (!type) {
      argTypes.push_back(arg.getType());
      continue;
    }
    std::string name = valueName(arg);
    llvm::SmallVector<int64_t> dims(type.getShape());
    auto given = inputShapes.find(name);
    if (given != inputShapes.end()) {
      shapeUsed[name] = true;
      const Shape& shape = given->second;
      if ((int64_t)shape.size() != type.getRank())
        return main.emitError() << "bind inputs: input '" << name << "' has rank " << type.getRank()
                                << " but the given shape " << shapeToString(shape) << " has rank "
                                << shape.size();
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] < 0)
          return main.emitError() << "bind inputs: input '" << name << "' given shape "
                                  << shapeToString(shape) << " has a negative dim";
        if (!mlir::ShapedType::isDynamic(dims[d]) && dims[d] != shape[d])
          return main.emitError() << "bind inputs: input '" << name << "' dim " << d << " is "
                                  << dims[d] << " in the model but " << shape[d]
                                  << " in the given shape";
        dims[d] = shape[d];
      }
    } else {
      auto params = main.getArgAttrOfType<mlir::ArrayAttr>(arg.getArgNumber(), kDimParamsAttr);
      for (size_t d = 0; d < dims.size(); ++d) {
        if (!mlir::ShapedType::isDynamic(dims[d])) continue;
        std::string param;
        if (params && d < params.size())
          if (auto s = llvm::dyn_cast<mlir::StringAttr>(params[d])) param = s.str();
        auto bound = param.empty() ? dimBindings.end() : dimBindings.find(param);
        if (bound != dimBindings.end()) {
          dims[d] = bound->second;
        } else if (defaultDim >= 0) {
          dims[d] = defaultDim;
          if (notes) {
            notes->push_back(param.empty() ? "unnamed dim " + std::to_string(d) + " of input '" +
                                                 name + "' bound to " + std::to_string(defaultDim)
                                           : "symbolic dim '" + param + "' of input '" + name +
                                                 "' bound to " + std::to_string(defaultDim));
          }
        }
      }
    }
    auto newType = mlir::RankedTensorType::get(dims, type.getElementType());
    arg.setType(newType);
    argTypes.push_back(newType);
  }
  for (const auto& [name, used] : shapeUsed) {
    if (used) continue;
    std::string known;
    for (mlir::BlockArgument arg : main.getArguments())
      known += (known.empty() ? "" : ", ") + valueName(arg);
    return main.emitError() << "bind inputs: no graph input named '" << name
                            << "' (inputs: " << known << ")";
  }
  main.setFunctionType(
      mlir::FunctionType::get(main.getContext(), argTypes, main.getFunctionType().getResults()));
  return mlir::success();
}

namespace {

class InferShapesPass : public impl::TandemInferShapesBase<InferShapesPass> {
 public:
  using TandemInferShapesBase::TandemInferShapesBase;

  void runOnOperation() override {
    // 1. Bind symbolic argument dims from the options (dims=NAME=VALUE, default-dim).
    // 2. Walk @main's ops in order (operands are always defined before use, so each op sees
    //    its operands' final types) and re-infer each op's result types.
    // 3. Set @main's result types to those of the returned values.
    mlir::ModuleOp module = getOperation();
    mlir::func::FuncOp main = getMainFunc(module);
    if (!main) {
      module.emitError("tandem-infer-shapes: module has no func.func @main");
      return signalPassFailure();
    }
    std::map<std::string, int64_t> bindings;
    for (const std::string& entry : dims) {
      size_t eq = entry.find('=');
      char* end = nullptr;
      long long value =
          eq == std::string::npos ? -1 : std::strtoll(entry.c_str() + eq + 1, &end, 10);
      if (eq == std::string::npos || eq == 0 || !end || *end != '\0' || value < 0) {
        module.emitError() << "tandem-infer-shapes: bad dims entry '" << entry
                           << "'; expected NAME=VALUE with VALUE >= 0";
        return signalPassFailure();
      }
      bindings[entry.substr(0, eq)] = value;
    }
    if (!bindings.empty() || defaultDim >= 0) {
      std::vector<std::string> notes;
      if (mlir::failed(bindInputShapes(module, bindings, {}, defaultDim, &notes)))
        return signalPassFailure();
      for (const std::string& note : notes) main.emitRemark() << note;
    }

    for (mlir::Operation& op : main.getBody().front())
      if (mlir::failed(reinferResultTypes(&op))) return signalPassFailure();
    updateMainResultTypes(main);
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createInferShapesPass() { return std::make_unique<InferShapesPass>(); }
std::unique_ptr<mlir::Pass> createInferShapesPass(const TandemInferShapesOptions& options) {
  return std::make_unique<InferShapesPass>(options);
}

}  // namespace tandem

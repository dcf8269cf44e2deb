// compileModule: the pass pipeline as straight-line code, one step per line (Halide Lower.cpp
// style), with the IR printable after every step.
#include <algorithm>
#include <set>

#include "compiler/Compiler.h"
#include "compiler/TandemDialect.h"
#include "compiler/pipeline/EmitPlan.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"

namespace tandem {

void loadTandemDialects(mlir::MLIRContext* ctx) {
  ctx->getOrLoadDialect<TandemDialect>();
  ctx->getOrLoadDialect<mlir::func::FuncDialect>();
}

namespace {

void printIr(mlir::ModuleOp module, const CompileOptions& options, llvm::StringRef step) {
  if (!options.printIrAfterAll) return;
  llvm::raw_ostream& os = *options.printIrAfterAll;
  os << "// -----// IR Dump After " << step << " //----- //\n";
  // Weights would drown the graph: print large constants as dense_resource placeholders.
  module->print(os, mlir::OpPrintingFlags().elideLargeElementsAttrs(16));
  os << "\n";
  os.flush();
}

// Runs one pass on the module (the pass manager also verifies the IR after it).
mlir::LogicalResult runPass(mlir::ModuleOp module, std::unique_ptr<mlir::Pass> pass,
                            const CompileOptions& options) {
  std::string name = pass->getArgument().str();
  mlir::PassManager pm(module->getContext(), mlir::ModuleOp::getOperationName());
  pm.addPass(std::move(pass));
  if (mlir::failed(pm.run(module))) return mlir::failure();
  printIr(module, options, name);
  return mlir::success();
}

mlir::LogicalResult bindInputs(mlir::ModuleOp module, const CompileOptions& options,
                               CompileResult* result) {
  if (mlir::failed(bindInputShapes(module, options.dimBindings, options.inputShapes,
                                   options.defaultDim, &result->notes)))
    return mlir::failure();
  printIr(module, options, "bind-inputs");
  return mlir::success();
}

// A pin naming no node of the model (a typo, another model's name) is an error that lists the
// nearest node names, not a silent no-op. Checked on the module as given, before any pass folds
// a node away (a pin on a node canonicalize folds is only a warning of the place pass).
mlir::LogicalResult checkPinsNameNodes(mlir::ModuleOp module, const CompileOptions& o) {
  if (o.pins.empty()) return mlir::success();
  std::set<std::string> names;
  module.walk([&](mlir::Operation* op) {
    std::string n = nodeName(op->getLoc());
    if (!n.empty()) names.insert(n);
  });
  for (const placement::NodePin& pin : o.pins) {
    if (names.count(pin.node)) continue;
    std::vector<std::pair<unsigned, std::string>> near;
    for (const std::string& n : names)
      near.push_back({llvm::StringRef(n).edit_distance(pin.node, true, 64), n});
    std::sort(near.begin(), near.end());
    std::string list;
    for (size_t i = 0; i < near.size() && i < 5; ++i) list += (i ? ", '" : "'") + near[i].second + "'";
    module.emitError() << "--pin " << pin.node << "=" << pin.device << ": the model has no node named '"
                       << pin.node << "'"
                       << (list.empty() ? " (its nodes have no names)" : "; nearest: " + list);
    return mlir::failure();
  }
  return mlir::success();
}

std::unique_ptr<mlir::Pass> placePass(const CompileOptions& options) {
  PlaceConfig c;
  c.devices = options.devices;
  c.profilePath = options.profilePath;
  c.policy = options.placementPolicy;
  c.pins = options.pins;
  c.strict = options.strictPlacement;
  return createPlacePass(std::move(c));
}

}  // namespace

mlir::LogicalResult compileModule(mlir::ModuleOp module, const CompileOptions& options,
                                  CompileResult* result) {
  loadTandemDialects(module->getContext());
  if (mlir::failed(checkPinsNameNodes(module, options))) return mlir::failure();
  if (mlir::failed(bindInputs(module, options, result))) return mlir::failure();
  if (mlir::failed(runPass(module, createVerifyPass(), options))) return mlir::failure();
  if (mlir::failed(runPass(module, createInferShapesPass(), options))) return mlir::failure();
  if (mlir::failed(runPass(module, createCanonicalizePass(), options))) return mlir::failure();
  if (mlir::failed(runPass(module, placePass(options), options))) return mlir::failure();
  if (mlir::failed(runPass(module, createInsertTransfersPass(), options))) return mlir::failure();
  if (options.fuse && mlir::failed(runPass(module, createFusePass(), options)))
    return mlir::failure();
  if (mlir::failed(runPass(module, createPlanMemoryPass(), options))) return mlir::failure();
  if (mlir::failed(emitPlan(module, result))) return mlir::failure();
  return mlir::success();
}

}  // namespace tandem

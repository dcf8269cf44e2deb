// compileModule: the pass pipeline as straight-line code, one step per line (Halide Lower.cpp
// style), with the IR printable after every step.
#include "compiler/Compiler.h"
#include "compiler/TandemDialect.h"
#include "compiler/pipeline/EmitPlan.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
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

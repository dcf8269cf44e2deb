// tandem-opt: runs tandem passes on textual IR (for lit/FileCheck tests), like mlir-opt.
#include "compiler/TandemDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<tandem::TandemDialect, mlir::func::FuncDialect>();
  tandem::registerTandemPasses();
  // MLIR's own cse/canonicalize/... are handy next to ours when reducing a test case.
  mlir::registerTransformsPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "Tandem pass driver\n", registry));
}

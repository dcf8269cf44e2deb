// libFuzzer target: ONNX model bytes -> importOnnxBytes -> the whole compile pipeline for a CPU
// target, in-process, as `tandem compile` runs it (tools/driver/Driver.cpp, compileOnnxFile).
// Constant folding runs the reference kernels, so hostile constants reach them too. A refusal
// is fine and must say something; a crash, leak, hang or sanitizer report is a finding.
#include <cstdint>
#include <string>

#include "mlir/IR/MLIRContext.h"
#include "tests/fuzz/FuzzCommon.h"
#include "tools/driver/Driver.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tandem::fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  // A fresh context per input, as the CLI has: MLIR uniques types and attributes for the
  // context's lifetime, so a shared one would grow with every input.
  mlir::MLIRContext ctx;
  ctx.disableMultithreading();
  tandem::loadTandemDialects(&ctx);
  std::string error;
  tandem::ImportOptions importOptions;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  {
    // Import diagnostics (shape functions) go to a handler that drops them, as the driver's
    // collector would; an import failure must leave an error.
    mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic&) { return mlir::success(); });
    module = tandem::importOnnxBytes(&ctx, bytes, "fuzz.onnx", importOptions, &error);
  }
  if (!module) return 0;
  tandem::CompileOptions compileOptions;
  if (!tandem::setTargetDevices(&compileOptions, "cpu").isOk()) __builtin_trap();
  tandem::CompileResult result;
  tandem::Status st = tandem::compileModuleToPlan(*module, compileOptions, &result);
  if (!st.isOk() && st.message().empty()) __builtin_trap();
  return 0;
}

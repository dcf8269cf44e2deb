// Compiling ../shared/models/<name>/model.onnx in-process for the tools tests (the models sit
// beside the checkout; a test skips when one is absent).
#pragma once
#include <sys/stat.h>

#include <string>

#include "compiler/Compiler.h"
#include "frontend/OnnxImporter.h"
#include "mlir/IR/MLIRContext.h"

namespace tandem {

inline const std::string kSharedModels = std::string(TANDEM_SOURCE_DIR) + "/../shared/models/";

/// Compiles ../shared/models/<name>/model.onnx for `target` (a device list such as "cpu" or
/// "cpu,cuda:0=h100") with symbolic dims bound to `batch`; false with the reason in *why when
/// the model is absent ("... is absent") or does not compile.
inline bool compileSharedModel(const std::string& name, const std::string& target, int64_t batch,
                               plan::Plan* out, std::string* why,
                               placement::PlacementPolicy policy =
                                   placement::PlacementPolicy::Cost) {
  std::string path = kSharedModels + name + "/model.onnx";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    *why = path + " is absent";
    return false;
  }
  mlir::MLIRContext ctx;
  loadTandemDialects(&ctx);
  auto module = importOnnxFile(&ctx, path, {}, why);
  if (!module) return false;
  CompileOptions opts;
  opts.defaultDim = batch;
  opts.placementPolicy = policy;
  if (Status s = setTargetDevices(&opts, target); !s.isOk()) {
    *why = s.message();
    return false;
  }
  CompileResult res;
  if (mlir::failed(compileModule(*module, opts, &res))) {
    *why = "compile for " + target + " failed";
    return false;
  }
  *out = res.plan;
  return true;
}

}  // namespace tandem

// The compile half of the GPU benchmark examples (links MLIR): a GraphBuilder graph compiled
// with every op placed on cuda:0 (the real pipeline, so whatever the compiler does, fusion
// included, is measured), either for the live devices and loaded in-process, or for a target
// list (cpu,cuda:0=h100: no GPU needed) and written as a plan for the examples' *_run builds.
#pragma once
#include <string>

#include "GpuBench.h"
#include "compiler/Compiler.h"
#include "frontend/GraphBuilder.h"
#include "mlir/IR/Diagnostics.h"
#include "runtime/WeightsFile.h"

namespace gpubench {

/// The device list plans are written for: cuda:0 modelled as an H100, so the placer can put
/// every op there on a machine without a GPU.
inline const char* const kPlanTarget = "cpu,cuda:0=h100";

/// Compiles `g`'s graph with --placement gpu for `target` ("" = the live devices). `gpuKernels`
/// gets the number of non-Copy steps on cuda:0 (0 is an error). Returns "" or the reason.
inline std::string compileGraph(tandem::GraphBuilder& g, const std::string& target, tandem::plan::Plan* plan,
                                int* gpuKernels) {
  std::string err;
  mlir::OwningOpRef<mlir::ModuleOp> module = g.finish(&err);
  if (!module) return "graph: " + err;
  tandem::CompileOptions options;
  options.placementPolicy = tandem::placement::PlacementPolicy::Gpu;
  if (!target.empty()) {
    tandem::Status st = tandem::setTargetDevices(&options, target);
    if (!st.isOk()) return "target: " + st.message();
  }
  tandem::CompileResult compiled;
  std::string diagnostics;
  {
    mlir::ScopedDiagnosticHandler handler(g.context(), [&](mlir::Diagnostic& d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error) diagnostics += " " + d.str();
      return mlir::success();
    });
    if (mlir::failed(tandem::compileModule(*module, options, &compiled)))
      return "compilation failed:" + diagnostics;
  }
  *gpuKernels = 0;
  for (const auto& s : compiled.plan.steps())
    if (s.device() == "cuda:0" && s.op_type() != "Copy") ++*gpuKernels;
  if (*gpuKernels == 0) return "the plan put no kernel on cuda:0 (is the GPU visible to the placer?)";
  *plan = std::move(compiled.plan);
  return "";
}

/// Compiles for the live devices and loads without device fallback (GpuBench.h's loadOnGpu).
inline std::string compileOnGpu(tandem::GraphBuilder& g, std::unique_ptr<tandem::Executable>* exe,
                                int* gpuKernels) {
  tandem::plan::Plan plan;
  std::string err = compileGraph(g, "", &plan, gpuKernels);
  if (!err.empty()) return err;
  tandem::LoadOptions lo;
  lo.deviceFallback = false;
  tandem::Status st = tandem::Executable::load(plan, lo, exe);
  return st.isOk() ? "" : "load: " + st.message();
}

/// Compiles for kPlanTarget and writes DIR/FILE, its large constants into DIR/WEIGHTS (shared
/// by every plan of the directory that holds the same tensor). Returns "" or the reason.
inline std::string writeGraphPlan(tandem::GraphBuilder& g, const std::string& dir, const std::string& file,
                                  const std::string& weights, int* gpuKernels) {
  tandem::plan::Plan plan;
  std::string err = compileGraph(g, kPlanTarget, &plan, gpuKernels);
  if (!err.empty()) return err;
  std::string path = dir + "/" + file;
  tandem::ExternalizeStats stats;
  tandem::Status st = tandem::externalizeConstants(&plan, dir + "/" + weights, path, &stats);
  if (!st.isOk()) return st.message();
  std::string bytes;
  if (!plan.SerializeToString(&bytes)) return "cannot serialise the plan " + path;
  std::string tmp = path + ".tmp";
  if (std::string e = writeText(tmp, bytes); !e.empty()) return e;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return path + ": cannot rename the temporary";
  return "";
}

}  // namespace gpubench

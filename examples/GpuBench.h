// What the GPU benchmark examples share: compile a GraphBuilder graph with every op placed on
// cuda:0 (the real pipeline, so whatever the compiler does, fusion included, is measured), count
// the kernels that landed there, and time runs.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "compiler/Compiler.h"
#include "frontend/GraphBuilder.h"
#include "mlir/IR/Diagnostics.h"
#include "runtime/Executable.h"

namespace gpubench {

/// Compiles `g`'s graph with --placement gpu over the live devices and loads it without device
/// fallback (a benchmark that silently ran on the CPU would be wrong). `gpuKernels` gets the
/// number of non-Copy steps on cuda:0. Returns "" or the reason.
inline std::string compileOnGpu(tandem::GraphBuilder& g, std::unique_ptr<tandem::Executable>* exe,
                                int* gpuKernels) {
  std::string err;
  mlir::OwningOpRef<mlir::ModuleOp> module = g.finish(&err);
  if (!module) return "graph: " + err;
  tandem::CompileOptions options;
  options.placementPolicy = "gpu";
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
  tandem::LoadOptions lo;
  lo.deviceFallback = false;
  tandem::Status st = tandem::Executable::load(compiled.plan, lo, exe);
  return st.isOk() ? "" : "load: " + st.message();
}

/// Median wall-clock seconds of `runs` runs of `exe` after `warmup` runs. Each run copies the
/// inputs in and the outputs out and synchronises once (Executable::run).
inline std::string medianRunSeconds(tandem::Executable& exe, const std::vector<tandem::Tensor>& inputs,
                                    int warmup, int runs, double* seconds) {
  std::vector<tandem::Tensor> out;
  std::vector<double> t;
  for (int i = 0; i < warmup + runs; ++i) {
    tandem::RunStats s;
    tandem::Status st = exe.run(inputs, &out, &s);
    if (!st.isOk()) return "run: " + st.message();
    if (i >= warmup) t.push_back(s.seconds);
  }
  std::sort(t.begin(), t.end());
  *seconds = t[t.size() / 2];
  return "";
}

/// Median over `runs` profiled runs of the summed time of the cuda:0 kernel steps (Copy steps
/// excluded). Profiling synchronises the device after every step, so each step's time is its
/// launch plus its kernel plus one host-device round trip.
inline std::string medianProfiledGpuSeconds(tandem::Executable& exe, const std::vector<tandem::Tensor>& inputs,
                                            int runs, double* seconds) {
  std::vector<tandem::Tensor> out;
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    tandem::RunStats s;
    tandem::Status st = exe.run(inputs, &out, &s, /*profile=*/true);
    if (!st.isOk()) return "profiled run: " + st.message();
    double sum = 0;
    for (const auto& step : s.steps)
      if (step.device == "cuda:0" && step.opType != "Copy") sum += step.seconds;
    t.push_back(sum);
  }
  std::sort(t.begin(), t.end());
  *seconds = t[t.size() / 2];
  return "";
}

}  // namespace gpubench

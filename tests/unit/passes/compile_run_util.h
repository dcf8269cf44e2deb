// Helpers for the pass tests that compile a graph end to end and run its plan on the CPU:
// random f32 tensors, and a GraphBuilder module or an in-memory ONNX model compiled
// (compiler/Compiler.h through tools/driver/Driver.h), loaded and run (runtime/Executable.h).
// A failing step is a gtest failure and leaves the rest of the result empty.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "frontend/OnnxImporter.h"
#include "mlir/IR/MLIRContext.h"
#include "tools/driver/Driver.h"

namespace tandem::passtest {

/// An f32 tensor of shape `s`, uniform in [lo, hi) from `seed`.
inline Tensor randomTensor(Shape s, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(numElements(s));
  for (float& x : v) x = u(rng);
  return Tensor::fromVector<float>(s, v);
}

/// The largest |a - b| / (1e-3 + |b|) over two f32 tensors of one shape.
inline double maxRelDiff(const Tensor& a, const Tensor& b) {
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.data<float>()[i], y = b.data<float>()[i];
    worst = std::max(worst, std::fabs(x - y) / (1e-3 + std::fabs(y)));
  }
  return worst;
}

struct CompiledRun {
  plan::Plan plan;                 // as compiled, before loading
  std::string log;                 // the placement log (text)
  std::vector<Tensor> outputs;     // in the graph's output order
  std::vector<std::string> impls;  // each step's implementation in the run
};

/// Compiles `module` with `co` ("cpu" as the only target when `co.devices` is unset), loads the plan
/// with `threads` CPU threads and runs it once on `inputs`.
inline CompiledRun compileAndRun(mlir::ModuleOp module, CompileOptions co,
                                 const std::vector<Tensor>& inputs, int threads = 2) {
  CompiledRun run;
  if (!co.devices) {
    EXPECT_TRUE(setTargetDevices(&co, "cpu").isOk());
  }
  CompileResult r;
  Status st = compileModuleToPlan(module, co, &r);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!st.isOk()) return run;
  run.plan = r.plan;
  run.log = r.placementLogText;
  std::unique_ptr<Executable> exe;
  st = Executable::load(std::move(r.plan), LoadOptions{threads}, &exe);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!exe) return run;
  st = exe->run(inputs, &run.outputs);
  EXPECT_TRUE(st.isOk()) << st.message();
  run.impls = exe->stepImpls();
  return run;
}

/// The same for an ONNX model serialized in `bytes` (`name` is the file name its messages give),
/// compiled with the default options (for the CPU).
inline CompiledRun compileAndRunOnnx(const std::string& bytes, const std::string& name,
                                     const std::vector<Tensor>& inputs, int threads = 2) {
  mlir::MLIRContext ctx;
  loadTandemDialects(&ctx);
  std::string err;
  auto module = importOnnxBytes(&ctx, bytes, name, {}, &err);
  EXPECT_TRUE(module) << err;
  if (!module) return {};
  return compileAndRun(*module, CompileOptions{}, inputs, threads);
}

}  // namespace tandem::passtest

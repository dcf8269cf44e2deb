// compileModule end to end on small textual modules: the emitted Plan (values, offsets, constant
// bytes, steps) and the placement log (text lines and JSON).
#include <gtest/gtest.h>

#include <cstdlib>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "compiler/Compiler.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

namespace tandem {
namespace {

// x[N,4] + w -> relu -> y, plus a Shape->Gather chain that must fold away.
constexpr const char* kAddRelu = R"mlir(
module attributes {tandem.model_name = "tiny"} {
  func.func @main(%x: tensor<?x4xf32> {tandem.name = "x", tandem.dim_params = ["N", ""]})
      -> (tensor<?x?xf32> {tandem.name = "y"}) {
    %w = tandem.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32> loc("w")
    %0 = tandem.add %x, %w : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32> loc("add1")
    %1 = tandem.relu %0 : (tensor<?x4xf32>) -> tensor<?x4xf32> loc("relu1")
    %s = tandem.shape %1 : (tensor<?x4xf32>) -> tensor<2xi64> loc("shape1")
    %2 = tandem.reshape %1, %s : (tensor<?x4xf32>, tensor<2xi64>) -> tensor<?x?xf32> loc("reshape1")
    return %2 : tensor<?x?xf32>
  }
}
)mlir";

class PipelineTest : public ::testing::Test {
 protected:
  PipelineTest() { loadTandemDialects(&ctx_); }

  // Compiles `ir`; diagnostics are collected in errors_.
  mlir::LogicalResult compile(const char* ir, const CompileOptions& options,
                              CompileResult* result) {
    mlir::ScopedDiagnosticHandler handler(&ctx_, [&](mlir::Diagnostic& d) {
      errors_ += d.str() + "\n";
      return mlir::success();
    });
    module_ = mlir::parseSourceString<mlir::ModuleOp>(ir, &ctx_);
    if (!module_) return mlir::failure();
    return compileModule(*module_, options, result);
  }

  const plan::Value& value(const CompileResult& r, int id) { return r.plan.values(id); }

  mlir::MLIRContext ctx_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  std::string errors_;
};

TEST_F(PipelineTest, EmitsValuesStepsConstantsAndArena) {
  CompileOptions options;
  ASSERT_TRUE(setTargetDevices(&options, "cpu").isOk());  // the live set would add any GPU of the machine running the test
  options.dimBindings = {{"N", 2}};
  CompileResult r;
  ASSERT_TRUE(mlir::succeeded(compile(kAddRelu, options, &r))) << errors_;
  const plan::Plan& p = r.plan;
  EXPECT_EQ(p.version(), 3);
  EXPECT_EQ(p.model_name(), "tiny");
  EXPECT_TRUE(r.notes.empty());

  // Values: input first, then the constant, then each step's results.
  ASSERT_EQ(p.inputs_size(), 1);
  const plan::Value& x = value(r, p.inputs(0));
  EXPECT_EQ(x.id(), 0);
  EXPECT_EQ(x.name(), "x");
  EXPECT_EQ(x.kind(), plan::Value::INPUT);
  EXPECT_EQ(x.dtype(), 1);  // ONNX FLOAT
  EXPECT_EQ(std::vector<int64_t>(x.dims().begin(), x.dims().end()), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(x.bytes(), 32);

  const plan::Value& w = value(r, 1);
  EXPECT_EQ(w.kind(), plan::Value::CONSTANT);
  EXPECT_EQ(w.name(), "w");
  ASSERT_EQ(w.constant().raw().size(), 16u);
  float wv[4];
  std::memcpy(wv, w.constant().raw().data(), 16);
  EXPECT_EQ(wv[0], 1.0f);
  EXPECT_EQ(wv[3], 4.0f);

  // Steps: Shape folded to a constant, then Reshape to the same shape kept (a real op).
  ASSERT_EQ(p.steps_size(), 3);
  EXPECT_EQ(p.steps(0).op_type(), "Add");
  EXPECT_EQ(p.steps(0).name(), "add1");
  EXPECT_EQ(p.steps(0).device(), "cpu");
  EXPECT_EQ(p.steps(0).placement_reason(), "only-kernel");
  EXPECT_EQ(p.steps(0).inputs(0), 0);
  EXPECT_EQ(p.steps(0).inputs(1), 1);
  EXPECT_EQ(p.steps(1).op_type(), "Relu");
  EXPECT_EQ(p.steps(1).inputs(0), p.steps(0).outputs(0));
  EXPECT_EQ(p.steps(2).op_type(), "Reshape");
  const plan::Value& shapeConst = value(r, p.steps(2).inputs(1));
  EXPECT_EQ(shapeConst.kind(), plan::Value::CONSTANT);
  int64_t sv[2];
  ASSERT_EQ(shapeConst.constant().raw().size(), sizeof(sv));
  std::memcpy(sv, shapeConst.constant().raw().data(), sizeof(sv));
  EXPECT_EQ(sv[0], 2);
  EXPECT_EQ(sv[1], 4);

  // The output keeps its ONNX name and static type.
  ASSERT_EQ(p.outputs_size(), 1);
  const plan::Value& y = value(r, p.outputs(0));
  EXPECT_EQ(y.name(), "y");
  EXPECT_EQ(y.id(), p.steps(2).outputs(0));
  EXPECT_EQ(std::vector<int64_t>(y.dims().begin(), y.dims().end()), (std::vector<int64_t>{2, 4}));

  // Arena: four 32-byte values padded to 64; x[-1,1] add[1,2] relu[2,4] reshape[4,end]. Add
  // overwrites x (its last reader, same size), Relu the Add's result and Reshape (same bytes,
  // row-major) the Relu's, in place: all four share offset 0.
  EXPECT_EQ(x.arena_offset(), 0);
  EXPECT_EQ(value(r, p.steps(0).outputs(0)).arena_offset(), 0);
  EXPECT_EQ(value(r, p.steps(1).outputs(0)).arena_offset(), 0);
  EXPECT_EQ(y.arena_offset(), 0);
  ASSERT_EQ(p.arenas_size(), 1);
  EXPECT_EQ(p.arenas(0).device(), "cpu");
  EXPECT_EQ(p.arenas(0).bytes(), 64);
  EXPECT_EQ(p.arenas(0).unplanned_bytes(), 256);
}

TEST_F(PipelineTest, PlacementLogTextAndJson) {
  CompileOptions options;
  ASSERT_TRUE(setTargetDevices(&options, "cpu").isOk());
  CompileResult r;
  ASSERT_TRUE(mlir::succeeded(compile(kAddRelu, options, &r))) << errors_;
  // defaultDim 1 bound the symbolic batch and said so.
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0], "symbolic dim 'N' of input 'x' bound to 1");
  // One line per op with each candidate's estimated time (tiny ops: the 1 us CPU dispatch
  // overhead; the Reshape, last reader of its input, shares its buffer but still runs as a
  // step: its dispatch), the summary, and the estimates of the plan and the baselines.
  // The Add broadcasts a vector: the fuse pass's loop takes same-shaped operands only, so
  // neither it nor the placer's costs fuse the Relu into it.
  EXPECT_EQ(r.placementLogText,
            "add1 (Add): cpu [only-kernel] candidates: cpu 1us\n"
            "relu1 (Relu): cpu [only-kernel] candidates: cpu 1us\n"
            "reshape1 (Reshape): cpu [only-kernel] candidates: cpu 1us\n"
            "summary: ops: cpu 3; copies: 0 (0 bytes moved); arena peak: cpu 64 bytes\n"
            "per run: in 16 bytes (x 16); out 16 bytes (y 16); between devices 0 bytes\n"
            "kernels before -> after fusion: cpu 3 -> 3; arena peak of all intermediates: cpu "
            "64 of 256 bytes\n"
            "estimated time: plan (cost) 3us; baselines: cost 3us, cpu 3us, gpu 3us, "
            "greedy 3us, ort 3us\n");
  auto j = nlohmann::json::parse(r.placementLogJson);
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["devices"], nlohmann::json::array({"cpu"}));
  ASSERT_EQ(j["ops"].size(), 3u);
  EXPECT_EQ(j["ops"][1]["name"], "relu1");
  EXPECT_EQ(j["ops"][1]["reason"], "only-kernel");
  EXPECT_EQ(j["summary"]["ops_per_device"]["cpu"], 3);
  EXPECT_EQ(j["summary"]["arena_peak_bytes"]["cpu"], 64);
  EXPECT_EQ(j["constants"]["count_per_device"]["cpu"], 2);
  EXPECT_EQ(r.plan.placement_log_json(), r.placementLogJson);
}

TEST_F(PipelineTest, TwoDevicesGetOneCopyPerValueAndTwoArenas) {
  CompileOptions options;
  options.inputShapes = {{"x", {2, 4}}};
  ASSERT_TRUE(setTargetDevices(&options, "cpu,cpu:1").isOk());
  options.pins = {{"add1", "cpu"}, {"relu1", "cpu:1"}, {"reshape1", "CPU:1"}};
  CompileResult r;
  ASSERT_TRUE(mlir::succeeded(compile(kAddRelu, options, &r))) << errors_;
  const plan::Plan& p = r.plan;
  ASSERT_EQ(p.steps_size(), 5);
  EXPECT_EQ(p.steps(0).op_type(), "Add");
  EXPECT_EQ(p.steps(0).placement_reason(), "pinned");
  EXPECT_EQ(p.steps(1).op_type(), "Copy");
  EXPECT_EQ(p.steps(1).device(), "cpu:1");
  EXPECT_EQ(p.steps(1).name(), "copy:add1->cpu:1");
  EXPECT_EQ(p.steps(1).placement_reason(), "transfer");
  EXPECT_EQ(p.steps(1).inputs(0), p.steps(0).outputs(0));
  EXPECT_EQ(p.steps(2).op_type(), "Relu");
  EXPECT_EQ(p.steps(2).placement_reason(), "pinned");
  EXPECT_EQ(p.steps(2).inputs(0), p.steps(1).outputs(0));
  EXPECT_EQ(value(r, p.steps(2).outputs(0)).device(), "cpu:1");
  // The Reshape's constant shape is on its consumer's device.
  EXPECT_EQ(value(r, p.steps(3).inputs(1)).device(), "cpu:1");
  // The graph output, made on cpu:1, comes back to the host (where the input arrived).
  EXPECT_EQ(p.steps(4).op_type(), "Copy");
  EXPECT_EQ(p.steps(4).name(), "copy:reshape1->cpu");
  EXPECT_EQ(p.steps(4).inputs(0), p.steps(3).outputs(0));
  EXPECT_EQ(value(r, p.steps(4).outputs(0)).device(), "cpu");
  ASSERT_EQ(p.arenas_size(), 2);
  EXPECT_EQ(p.arenas(0).device(), "cpu");
  EXPECT_EQ(p.arenas(1).device(), "cpu:1");
  // cpu: the add overwrites x in place. cpu:1: copy[2,3], relu[3,5], reshape[5,6]: relu
  // overwrites the copy and reshape the relu's result: one slot.
  EXPECT_EQ(p.arenas(0).bytes(), 64);
  EXPECT_EQ(p.arenas(1).bytes(), 64);
  EXPECT_EQ(p.arenas(1).unplanned_bytes(), 192);
  EXPECT_NE(r.placementLogText.find("copy add1: cpu -> cpu:1, 32 bytes, "), std::string::npos)
      << r.placementLogText;
  EXPECT_NE(r.placementLogText.find("relu1 (Relu): cpu:1 [pinned] candidates: cpu "),
            std::string::npos)
      << r.placementLogText;
  EXPECT_NE(r.placementLogText.find("copy reshape1: cpu:1 -> cpu, 32 bytes, "), std::string::npos)
      << r.placementLogText;
  EXPECT_NE(r.placementLogText.find("copies: 2 (64 bytes moved)"), std::string::npos);
  auto j = nlohmann::json::parse(r.placementLogJson);
  ASSERT_EQ(j["copies"].size(), 2u);
  EXPECT_EQ(j["copies"][0]["to"], "cpu:1");
  EXPECT_EQ(j["copies"][0]["bytes"], 32);
  EXPECT_EQ(j["copies"][1]["from"], "cpu:1");
  EXPECT_EQ(j["copies"][1]["to"], "cpu");
  EXPECT_EQ(j["summary"]["copies"], 2);
  // The typed summary agrees with the log's.
  EXPECT_EQ(r.kernelsBeforeFusion, (std::map<std::string, int64_t>{{"cpu", 1}, {"cpu:1", 2}}));
  EXPECT_EQ(j["summary"]["kernels_after_fusion"]["cpu:1"], r.kernelsAfterFusion["cpu:1"]);
}

TEST_F(PipelineTest, StepTimesNameEveryPassInOrder) {
  // ctest sets TANDEM_VERIFY_EACH_PASS=1 for every test; this one sets the option itself.
  const char* env = std::getenv("TANDEM_VERIFY_EACH_PASS");
  std::string saved = env ? env : "";
  unsetenv("TANDEM_VERIFY_EACH_PASS");
  for (bool eachPass : {false, true}) {
    CompileOptions options;
    ASSERT_TRUE(setTargetDevices(&options, "cpu").isOk());
    options.verifyEachPass = eachPass;
    CompileResult r;
    ASSERT_TRUE(mlir::succeeded(compile(kAddRelu, options, &r))) << errors_;
    std::vector<std::string> steps;
    for (const auto& [step, seconds] : r.stepSeconds) {
      steps.push_back(step);
      EXPECT_GE(seconds, 0.0) << step;
    }
    std::vector<std::string> want = {"tandem-verify", "tandem-infer-shapes", "tandem-legalize-f16",
                                     "tandem-fuse-qdq", "tandem-canonicalize", "tandem-outline-dynamic",
                                     "tandem-place", "tandem-insert-transfers", "tandem-fuse",
                                     "tandem-plan-memory"};
    if (!eachPass) want.push_back("verify-ir");  // once, before the plan is emitted
    want.push_back("emit-plan");
    EXPECT_EQ(steps, want) << "verifyEachPass " << eachPass;
  }
  // QDQ fusion runs for CPU-only targets alone (a GPU target keeps QDQ convolutions in f32), and
  // not when it is turned off.
  for (const char* target : {"cpu,cuda:0=h100", "cpu"}) {
    CompileOptions options;
    ASSERT_TRUE(setTargetDevices(&options, target).isOk());
    options.qdqFusion = std::string(target) != "cpu";
    CompileResult r;
    ASSERT_TRUE(mlir::succeeded(compile(kAddRelu, options, &r))) << errors_;
    for (const auto& [step, seconds] : r.stepSeconds) EXPECT_NE(step, "tandem-fuse-qdq") << target;
  }
  if (env) setenv("TANDEM_VERIFY_EACH_PASS", saved.c_str(), 1);
}

TEST_F(PipelineTest, StrictPinWithoutKernelFails) {
  CompileOptions options;
  ASSERT_TRUE(setTargetDevices(&options, "cpu,cuda:0=h100").isOk());
  options.pins = {{"relu1", "cuda:1"}};
  options.strictPlacement = true;
  CompileResult r;
  EXPECT_TRUE(mlir::failed(compile(kAddRelu, options, &r)));
  EXPECT_NE(errors_.find("op 'relu1' (Relu) is pinned to cuda:1 (strict placement), but cuda:1 "
                         "is not a target"),
            std::string::npos)
      << errors_;
}

TEST_F(PipelineTest, BadInputShapeIsAnError) {
  CompileOptions options;
  options.inputShapes = {{"x", {2, 5}}};
  CompileResult r;
  EXPECT_TRUE(mlir::failed(compile(kAddRelu, options, &r)));
  EXPECT_NE(errors_.find("input 'x' dim 1 is 4 in the model but 5 in the given shape"),
            std::string::npos)
      << errors_;
}

TEST_F(PipelineTest, PrintsIrAfterEveryStep) {
  std::string ir;
  llvm::raw_string_ostream os(ir);
  CompileOptions options;
  options.printIrAfterAll = &os;
  CompileResult r;
  ASSERT_TRUE(mlir::succeeded(compile(kAddRelu, options, &r))) << errors_;
  os.flush();
  size_t last = 0;
  for (const char* step :
       {"bind-inputs", "tandem-verify", "tandem-infer-shapes", "tandem-canonicalize",
        "tandem-place", "tandem-insert-transfers", "tandem-plan-memory"}) {
    size_t at = ir.find(std::string("IR Dump After ") + step + " ");
    ASSERT_NE(at, std::string::npos) << step;
    EXPECT_GT(at, last == 0 ? 0 : last) << step << " out of order";
    last = at;
  }
  // plan-memory records each value's offset (everything shares slot 0 here).
  EXPECT_NE(ir.find("arena_offset = [0]"), std::string::npos);
}

}  // namespace
}  // namespace tandem

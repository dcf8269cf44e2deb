// Baseline policies on a hand-built graph with hand-computed costs (issue 3 item 7c): what
// TensorFlow (greedy), ONNX Runtime (EP order + small-input CPU fallback), all-cpu and all-gpu
// would do, priced by the same evaluator as the cost plan.
#include <gtest/gtest.h>

#include "compiler/placement/Placer.h"

namespace tandem::placement {
namespace {

// in (host) -> a:Conv -> s:Shape -> g:Gather(idx) -> r:Reshape(a, g) -> n:NoGpu -> m:Relu -> out
//                 \________________________________/
// Times (cpu, cuda:0) and transfers (H2D, D2H) in seconds.
PlacementProblem shapeGraph() {
  PlacementProblem p;
  p.devices = {{"cpu", "cpu", 0}, {"cuda:0", "cuda", 0}};
  auto op = [&](const std::string& name, const std::string& type, double cpu, double gpu) {
    p.ops.push_back({name, type, {cpu, gpu}, 0, std::nullopt, {}});
  };
  op("a", "Conv", 10, 1);        // 0
  op("s", "Shape", 0.1, 0.5);    // 1
  op("g", "Gather", 0.1, 0.5);   // 2
  op("r", "Reshape", 2, 1);      // 3
  op("n", "NoGpu", 3, kNoKernel);  // 4
  op("m", "Relu", 1, 0.1);       // 5
  auto val = [&](const std::string& name, ValueSource src, OpId producer, std::vector<OpId> readers,
                 double h2d, double d2h, std::int64_t elements = 1000) {
    p.values.push_back({name, src, producer, src == ValueSource::GraphInput ? 0 : kNone, readers, {},
                        std::uint64_t(elements * 4), elements, {0, h2d, d2h, 0}});
  };
  val("in", ValueSource::GraphInput, kNone, {0}, 2, 2);
  val("va", ValueSource::Op, 0, {1, 3}, 4, 5);
  val("vs", ValueSource::Op, 1, {2}, 0.01, 0.02, 4);
  val("idx", ValueSource::Constant, kNone, {2}, 0, 0, 1);
  val("vg", ValueSource::Op, 2, {3}, 0.01, 0.02, 4);
  val("vr", ValueSource::Op, 3, {4}, 0.3, 0.4);
  val("vn", ValueSource::Op, 4, {5}, 0.3, 0.4);
  val("vm", ValueSource::Op, 5, {}, 0.3, 0.4);
  p.values.back().outputDevices = {0};
  return p;
}

PlaceResult place(const PlacementProblem& p, PlacementPolicy policy) {
  PlacerOptions o;
  o.policy = policy;
  return placeGraph(p, o);
}

TEST(PlacerBaselines, HandComputedCosts) {
  PlacementProblem p = shapeGraph();

  // cpu: everything on the host, nothing moves: 10 + 0.1 + 0.1 + 2 + 3 + 1.
  PlaceResult cpu = place(p, PlacementPolicy::Cpu);
  ASSERT_TRUE(cpu.ok()) << cpu.error;
  EXPECT_EQ(cpu.placement.device, (std::vector<DeviceId>{0, 0, 0, 0, 0, 0}));
  EXPECT_DOUBLE_EQ(cpu.placement.cost.totalSeconds, 16.2);
  EXPECT_TRUE(cpu.placement.cost.copies.empty());
  EXPECT_EQ(cpu.placement.reason[0], "policy(cpu)");
  EXPECT_EQ(cpu.placement.reason[4], "only-kernel");

  // gpu and greedy (TensorFlow): every op with a CUDA kernel on cuda:0, n on the cpu.
  // compute 1 + 0.5 + 0.5 + 1 + 3 + 0.1 = 6.1; copies in 2, vr 0.4 (D2H), vn 0.3, vm 0.4.
  for (PlacementPolicy policy : {PlacementPolicy::Gpu, PlacementPolicy::Greedy}) {
    PlaceResult r = place(p, policy);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.placement.device, (std::vector<DeviceId>{1, 1, 1, 1, 0, 1}));
    EXPECT_DOUBLE_EQ(r.placement.cost.computeSeconds, 6.1);
    EXPECT_DOUBLE_EQ(r.placement.cost.transferSeconds, 3.1);
    EXPECT_EQ(r.placement.cost.copies.size(), 4u);
    EXPECT_EQ(r.placement.reason[0], std::string("policy(") + policyName(policy) + ")");
  }

  // ort: cuda first, then GetCpuPreferredNodes: Shape's output is a host tensor, so Gather (its
  // other input a 1-element initializer) falls back to the cpu; Reshape reads the GPU tensor va
  // and stays; m reads only n's host output and falls back too.
  // compute 1 + 0.5 + 0.1 + 1 + 3 + 1 = 6.6; copies in 2, vs 0.02, vg 0.01, vr 0.4.
  PlaceResult ort = place(p, PlacementPolicy::Ort);
  ASSERT_TRUE(ort.ok()) << ort.error;
  EXPECT_EQ(ort.placement.device, (std::vector<DeviceId>{1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(ort.placement.reason[2], "policy(ort-cpu-fallback)");
  EXPECT_EQ(ort.placement.reason[5], "policy(ort-cpu-fallback)");
  EXPECT_EQ(ort.placement.reason[3], "policy(ort)");
  EXPECT_DOUBLE_EQ(ort.placement.cost.totalSeconds, 6.6 + 2.43);

  // cost: like ORT for the shape subgraph (0.1 + 0.03 of copies beats 0.5 on the GPU), but m
  // goes back to the GPU: 0.1 + 0.3 + 0.4 < 1. compute 5.7, copies 2 + 0.02 + 0.01 + 0.4 +
  // 0.3 + 0.4 = 3.13.
  PlaceResult cost = place(p, PlacementPolicy::Cost);
  ASSERT_TRUE(cost.ok()) << cost.error;
  EXPECT_EQ(cost.placement.device, (std::vector<DeviceId>{1, 1, 0, 1, 0, 1}));
  EXPECT_DOUBLE_EQ(cost.placement.cost.totalSeconds, 5.7 + 3.13);
  EXPECT_EQ(cost.placement.cost.copies.size(), 6u);
  // Serial graph: the makespan is the total (in at 2, a 2-3, s 3-3.5, vs 3.52, g -3.62, vg
  // 3.63, r -4.63, vr 5.03, n -8.03, vn 8.33, m -8.43, vm on the host 8.83).
  EXPECT_DOUBLE_EQ(cost.placement.cost.makespanSeconds, 8.83);
  for (PlaceResult* b : {&cpu, &ort})
    EXPECT_LT(cost.placement.cost.totalSeconds, b->placement.cost.totalSeconds);
}

// With several GPUs, greedy and gpu take the first one with a kernel; the rest follow the same
// constraints as the cost plan (pins win).
TEST(PlacerBaselines, FirstGpuWithAKernelAndPinsHonoured) {
  PlacementProblem p;
  p.devices = {{"cpu", "cpu", 0}, {"cuda:0", "cuda", 0}, {"cuda:1", "cuda", 0}};
  p.ops.push_back({"x", "Relu", {1, kNoKernel, 1}, 0, std::nullopt, {}});
  p.ops.push_back({"y", "Relu", {1, 1, 1}, 0, Pin{"cpu"}, {}});
  p.ops.push_back({"z", "Relu", {1, 1, 1}, 0, std::nullopt, {}});
  for (PlacementPolicy policy : {PlacementPolicy::Gpu, PlacementPolicy::Greedy}) {
    PlaceResult r = place(p, policy);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.placement.device, (std::vector<DeviceId>{2, 0, 1}));
    EXPECT_EQ(r.placement.reason[1], "pinned");
  }
  EXPECT_EQ(place(p, PlacementPolicy::Cpu).placement.device, (std::vector<DeviceId>{0, 0, 0}));
  EXPECT_EQ(parsePolicy("ort"), PlacementPolicy::Ort);
  EXPECT_FALSE(parsePolicy("fastest").has_value());
}

// The evaluator charges one copy per (value, destination device) and the transfer in its
// direction, and lists the copies.
TEST(PlacerBaselines, EvaluatorCountsOneCopyPerValueAndDevice) {
  PlacementProblem p;
  p.devices = {{"cpu", "cpu", 0}, {"cuda:0", "cuda", 0}, {"cuda:1", "cuda", 0}};
  for (int i = 0; i < 5; ++i) p.ops.push_back({"o" + std::to_string(i), "Op", {1, 2, 3}, 0, {}, {}});
  // o0's value read by o1, o2 on cuda:0 and o3, o4 on cuda:1: two copies, cpu -> each GPU.
  std::vector<double> t = {0, 0.5, 0.7, 0.6, 0, 0.1, 0.8, 0.2, 0};
  p.values.push_back({"v", ValueSource::Op, 0, kNone, {1, 2, 3, 4, 4}, {0}, 64, 16, t});
  EvalResult e = evaluatePlacement(p, {0, 1, 1, 2, 2});
  ASSERT_TRUE(e.ok()) << e.error;
  ASSERT_EQ(e.cost.copies.size(), 2u);
  EXPECT_EQ(e.cost.copies[0].to, 1);
  EXPECT_EQ(e.cost.copies[1].to, 2);
  EXPECT_EQ(e.cost.copies[1].bytes, 64u);
  EXPECT_DOUBLE_EQ(e.cost.transferSeconds, 0.5 + 0.7);  // the output on the cpu is home
  EXPECT_DOUBLE_EQ(e.cost.computeSeconds, 1 + 2 + 2 + 3 + 3);
  // Devices in parallel: o0 ends 1; cuda:0 gets v at 1.5 and runs o1, o2 until 5.5; cuda:1 at
  // 1.7 runs o3, o4 until 7.7.
  EXPECT_DOUBLE_EQ(e.cost.makespanSeconds, 7.7);
  // Produced on cuda:0 instead: to the cpu output 0.6 (D2H) and to cuda:1 0.1 (P2P).
  e = evaluatePlacement(p, {1, 1, 1, 2, 2});
  EXPECT_DOUBLE_EQ(e.cost.transferSeconds, 0.6 + 0.1);
}

}  // namespace
}  // namespace tandem::placement

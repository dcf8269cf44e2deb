// Placement constraints (issue 3 item 7d): pins, soft fallback and its reason, strict errors,
// conflicts naming both constraints, colocation sets by union-find, and invalid problems.
#include <gtest/gtest.h>

#include "compiler/placement/Placer.h"

namespace tandem::placement {
namespace {

// cpu + cuda:0; ops added with their times; values with H2D = D2H = `t`.
struct Builder {
  PlacementProblem p;
  Builder() { p.devices = {{"cpu", "cpu", 0}, {"cuda:0", "cuda", 0}}; }
  OpId op(const std::string& name, const std::string& type, double cpu, double gpu) {
    p.ops.push_back({name, type, {cpu, gpu}, 0, std::nullopt, {}});
    return static_cast<OpId>(p.ops.size()) - 1;
  }
  void edge(OpId from, OpId to, double t) {
    p.values.push_back({p.ops[from].name, ValueSource::Op, from, kNone, {to}, {}, 4, -1,
                        {0, t, t, 0}});
  }
  PlacementOp& operator[](OpId i) { return p.ops[i]; }
};

TEST(PlacerConstraints, PinIsHonouredAgainstCost) {
  Builder b;
  OpId a = b.op("a", "MatMul", 10, 1);
  OpId c = b.op("c", "Relu", 10, 1);
  b.edge(a, c, 0.5);
  b[a].pin = Pin{"cpu"};
  PlaceResult r = placeGraph(b.p);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.placement.device, (std::vector<DeviceId>{0, 1}));
  EXPECT_EQ(r.placement.reason, (std::vector<std::string>{"pinned", "cost"}));
  EXPECT_DOUBLE_EQ(r.placement.cost.totalSeconds, 10 + 1 + 0.5);
}

TEST(PlacerConstraints, SoftFallbackSaysWhy) {
  Builder b;
  OpId a = b.op("a", "NonMaxSuppression", 2, kNoKernel);
  OpId c = b.op("c", "Relu", 3, 1);
  b.edge(a, c, 5);
  b[a].pin = Pin{"cuda:0"};
  b[c].pin = Pin{"cuda:3"};
  PlaceResult r = placeGraph(b.p);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.placement.device, (std::vector<DeviceId>{0, 0}));  // c by cost: 3 < 1 + 5
  EXPECT_EQ(r.placement.reason[0],
            "fallback(pinned device cuda:0 has no kernel for NonMaxSuppression)");
  EXPECT_EQ(r.placement.reason[1], "fallback(cuda:3 is not a target)");
}

TEST(PlacerConstraints, StrictPlacementMakesUnsatisfiablePinsErrors) {
  Builder b;
  OpId a = b.op("a", "NonMaxSuppression", 2, kNoKernel);
  b[a].pin = Pin{"cuda:0"};
  PlacerOptions strict;
  strict.strict = true;
  PlaceResult r = placeGraph(b.p, strict);
  EXPECT_EQ(r.error,
            "op 'a' (NonMaxSuppression) is pinned to cuda:0 (strict placement), but cuda:0 has no "
            "kernel for NonMaxSuppression");
  // A pin can ask for strictness by itself.
  b[a].pin = Pin{"cuda:7", /*strict=*/true};
  r = placeGraph(b.p);
  EXPECT_EQ(r.error,
            "op 'a' (NonMaxSuppression) is pinned to cuda:7 (strict placement), but cuda:7 is not "
            "a target");
}

TEST(PlacerConstraints, ConflictingPinsInAGroupNameBoth) {
  Builder b;
  OpId a = b.op("a", "MatMul", 1, 1);
  OpId c = b.op("b", "Add", 1, 1);
  b[a].pin = Pin{"cuda:0"};
  b[c].pin = Pin{"cpu"};
  b[a].colocation = {"w1"};
  b[c].colocation = {"w1"};
  PlaceResult r = placeGraph(b.p);
  EXPECT_EQ(r.error,
            "op 'a' is pinned to cuda:0 but is colocated (group 'w1') with op 'b' pinned to cpu");
}

TEST(PlacerConstraints, GroupWithoutACommonDeviceNamesBothOps) {
  Builder b;
  OpId a = b.op("a", "CudaOnly", kNoKernel, 1);
  OpId c = b.op("b", "CpuOnly", 1, kNoKernel);
  b[a].colocation = {"w1"};
  b[c].colocation = {"w1"};
  PlaceResult r = placeGraph(b.p);
  EXPECT_EQ(r.error,
            "op 'b' (CpuOnly) has kernels only on {cpu} but is colocated (group 'w1') with op 'a' "
            "(CudaOnly), which has kernels only on {cuda:0}");
}

// Groups that share an op merge (union-find): a-b by g1, b-c by g2 -> one set on one device,
// chosen by the sum of the three ops' costs.
TEST(PlacerConstraints, ColocationSetsMergeAndMoveTogether) {
  Builder b;
  OpId a = b.op("a", "Var", 1, 5);    // alone: cpu
  OpId m = b.op("m", "MatMul", 9, 1);  // alone: cuda:0
  OpId c = b.op("c", "Assign", 1, 2);  // alone: cpu
  OpId free = b.op("free", "Relu", 4, 1);
  b[a].colocation = {"g1"};
  b[m].colocation = {"g1", "g2"};
  b[c].colocation = {"g2"};
  b.edge(c, free, 0.5);
  PlaceResult r = placeGraph(b.p);
  ASSERT_TRUE(r.ok()) << r.error;
  // Together: cpu 1 + 9 + 1 = 11, cuda:0 5 + 1 + 2 = 8 -> cuda:0; free follows (no copy).
  EXPECT_EQ(r.placement.device, (std::vector<DeviceId>{1, 1, 1, 1}));
  EXPECT_EQ(r.placement.reason[0], "colocated(g1)");
  EXPECT_EQ(r.placement.reason[1], "colocated(g1)");
  EXPECT_EQ(r.placement.reason[2], "colocated(g1)");
  EXPECT_EQ(r.placement.reason[3], "cost");
  EXPECT_DOUBLE_EQ(r.placement.cost.totalSeconds, 9.0);
  EXPECT_EQ(r.placement.stats.units, 2);

  // A pin on one member pins the set; the others say colocated.
  b[c].pin = Pin{"cpu"};
  r = placeGraph(b.p);
  ASSERT_TRUE(r.ok()) << r.error;
  // The set: cpu 11 (cuda:0 is out). free: cuda:0 1 + copy 0.5 < cpu 4.
  EXPECT_EQ(r.placement.device, (std::vector<DeviceId>{0, 0, 0, 1}));
  EXPECT_DOUBLE_EQ(r.placement.cost.totalSeconds, 11 + 1 + 0.5);
  EXPECT_EQ(r.placement.reason[0], "colocated(g1)");
  EXPECT_EQ(r.placement.reason[2], "pinned");
}

// A pin that a colocated op cannot follow falls back (soft) and names that op.
TEST(PlacerConstraints, PinThatTheGroupCannotFollowFallsBack) {
  Builder b;
  OpId a = b.op("a", "MatMul", 5, 1);
  OpId c = b.op("b", "StringOp", 1, kNoKernel);
  b[a].pin = Pin{"cuda:0"};
  b[a].colocation = {"g"};
  b[c].colocation = {"g"};
  PlaceResult r = placeGraph(b.p);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.placement.device, (std::vector<DeviceId>{0, 0}));
  EXPECT_EQ(r.placement.reason[0],
            "fallback(pinned device cuda:0 has no kernel for StringOp (op 'b', colocated in group "
            "'g'))");
  EXPECT_EQ(r.placement.reason[1], "colocated(g)");
  PlacerOptions strict;
  strict.strict = true;
  EXPECT_EQ(placeGraph(b.p, strict).error,
            "op 'a' (MatMul) is pinned to cuda:0 (strict placement), but cuda:0 has no kernel for "
            "StringOp (op 'b', colocated in group 'g')");
}

TEST(PlacerConstraints, ReasonsForUnconstrainedOps) {
  Builder b;
  b.op("gpuOnly", "FlashAttention", kNoKernel, 1);
  b.op("either", "Relu", 1, 2);
  PlaceResult r = placeGraph(b.p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.placement.reason, (std::vector<std::string>{"only-kernel", "cost"}));
}

TEST(PlacerConstraints, UserErrorsAreMessagesNotCrashes) {
  Builder b;
  b.op("nowhere", "Mystery", kNoKernel, kNoKernel);
  EXPECT_EQ(placeGraph(b.p).error,
            "op 'nowhere' (Mystery) has no kernel on any target device {cpu, cuda:0}");

  Builder bad;
  bad.p.ops.push_back({"a", "Relu", {1.0}, 0, std::nullopt, {}});
  EXPECT_EQ(placeGraph(bad.p).error,
            "invalid placement problem: op 'a' has 1 compute times for 2 devices");

  Builder cyc;
  OpId x = cyc.op("x", "Add", 1, 1), y = cyc.op("y", "Add", 1, 1);
  cyc.edge(x, y, 1);
  cyc.edge(y, x, 1);
  EXPECT_EQ(placeGraph(cyc.p).error, "invalid placement problem: the value graph has a cycle");

  Builder ok;
  ok.op("g", "FlashAttention", kNoKernel, 1);
  EXPECT_EQ(evaluatePlacement(ok.p, {0}).error,
            "op 'g' (FlashAttention) is on cpu, which has no kernel for it");
  EXPECT_EQ(evaluatePlacement(ok.p, {0, 1}).error, "placement has 2 devices for 1 ops");
  EXPECT_TRUE(evaluatePlacement(ok.p, {1}).ok());
}

}  // namespace
}  // namespace tandem::placement

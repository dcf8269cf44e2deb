// Exactness of the two-device placement: Stone's min cut with per-value gadgets equals the brute-
// force optimum over all 2^n placements of random DAGs (issue 3 item 7a).
#include <gtest/gtest.h>

#include <cstdio>

#include "compiler/placement/PlacerInternal.h"
#include "tests/unit/compiler/placement/placer_test_util.h"

namespace tandem::placement {
namespace {

using testing::nearlyEqual;
using testing::randomProblem;
using testing::RandomSpec;
using testing::referenceCost;

// The optimum over every placement of a two-device problem (n <= 20), by enumeration with bit
// masks (bit i set = op i on device 1). Written from the definition, sharing no placer code.
double bruteForceOptimum(const PlacementProblem& p, std::uint32_t* bestMask) {
  const int n = static_cast<int>(p.ops.size());
  std::uint32_t mustA = 0, mustB = 0;
  double base = 0;
  std::vector<double> delta(n);
  for (int i = 0; i < n; ++i) {
    const PlacementOp& op = p.ops[i];
    bool a = op.feasible(0), b = op.feasible(1);
    if (op.pin && op.pin->device == p.devices[0].name && a) b = false;
    if (op.pin && op.pin->device == p.devices[1].name && b) a = false;
    if (!a) mustB |= 1u << i;
    if (!b) mustA |= 1u << i;
    double ca = a ? op.computeSeconds[0] : 0, cb = b ? op.computeSeconds[1] : 0;
    base += ca;
    delta[i] = cb - ca;
  }
  std::vector<std::pair<int, int>> together;
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      for (const std::string& g : p.ops[i].colocation)
        for (const std::string& h : p.ops[j].colocation)
          if (g == h) together.push_back({i, j});
  struct Val { int producer, home; std::uint32_t readers; bool outA, outB; double ab, ba; };
  std::vector<Val> vals;
  for (const PlacementValue& v : p.values) {
    if (v.source == ValueSource::Constant || v.transferSeconds.empty()) continue;
    Val x{v.source == ValueSource::Op ? v.producer : -1, v.inputDevice, 0, false, false,
          v.transferSeconds[0 * 2 + 1], v.transferSeconds[1 * 2 + 0]};
    for (OpId c : v.consumers) x.readers |= 1u << c;
    for (DeviceId d : v.outputDevices) (d == 0 ? x.outA : x.outB) = true;
    vals.push_back(x);
  }
  std::vector<double> sum(std::size_t(1) << n, 0.0);
  double best = kNoKernel;
  for (std::uint32_t m = 0; m < (1u << n); ++m) {
    if (m) sum[m] = sum[m & (m - 1)] + delta[__builtin_ctz(m)];
    if ((m & mustA) || (~m & mustB)) continue;
    bool ok = true;
    for (auto [i, j] : together) ok &= ((m >> i) & 1) == ((m >> j) & 1);
    if (!ok) continue;
    double cost = base + sum[m];
    for (const Val& v : vals) {
      int home = v.producer >= 0 ? (m >> v.producer) & 1 : v.home;
      if (home == 0 && ((v.readers & m) || v.outB)) cost += v.ab;
      if (home == 1 && ((v.readers & ~m) || v.outA)) cost += v.ba;
    }
    if (cost < best) best = cost, *bestMask = m;
  }
  return best;
}

TEST(PlacerMinCut, EqualsBruteForceOnRandomDags) {
  std::mt19937 rng(20240611);
  RandomSpec spec;  // 1..16 ops, 2 devices, infeasibilities, pins, colocation, fan-out <= 4
  int exact = 0, withInfeasible = 0, withPins = 0, withGroups = 0, sixteen = 0;
  double maxRel = 0;
  const int kGraphs = 1200;
  for (int t = 0; t < kGraphs; ++t) {
    PlacementProblem p = randomProblem(rng, spec);
    std::uint32_t bestMask = 0;
    double optimum = bruteForceOptimum(p, &bestMask);
    PlaceResult r = placeGraph(p);
    ASSERT_TRUE(r.ok()) << r.error;
    const Placement& pl = r.placement;
    EXPECT_EQ(pl.stats.algorithm, "min-cut");
    ASSERT_TRUE(testing::honoursConstraints(p, pl.device)) << "graph " << t;
    // The placer's own price agrees with the independent one, and both with the optimum.
    double mine = referenceCost(p, pl.device);
    EXPECT_TRUE(nearlyEqual(pl.cost.totalSeconds, mine)) << pl.cost.totalSeconds << " vs " << mine;
    EXPECT_TRUE(nearlyEqual(mine, optimum)) << "graph " << t << ": cut " << mine
                                            << " brute force " << optimum;
    maxRel = std::max(maxRel, std::abs(mine - optimum) / std::max(1.0, optimum));
    exact += nearlyEqual(mine, optimum);
    bool infeasible = false, pins = false, groups = false;
    for (const PlacementOp& op : p.ops) {
      infeasible |= !op.feasible(0) || !op.feasible(1);
      pins |= op.pin.has_value();
      groups |= !op.colocation.empty();
    }
    withInfeasible += infeasible, withPins += pins, withGroups += groups;
    sixteen += p.ops.size() == 16;
  }
  std::printf("min-cut vs brute force: %d/%d graphs exact (max relative difference %.3g); "
              "%d with infeasible ops, %d with pins, %d with colocation, %d with 16 ops\n",
              exact, kGraphs, maxRel, withInfeasible, withPins, withGroups, sixteen);
  EXPECT_EQ(exact, kGraphs);
  EXPECT_GT(withInfeasible, kGraphs / 2);
  EXPECT_GT(withPins, kGraphs / 10);
  EXPECT_GT(withGroups, kGraphs / 3);
}

// The Boost max-flow wrapper: random binary energies (unary terms, pairs in both directions,
// terminal ends, infinite edges) against enumeration of all 2^n sides.
TEST(PlacerMinCut, BinaryCutMatchesEnumeration) {
  using detail::BinaryCut;
  std::mt19937 rng(5);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  for (int t = 0; t < 300; ++t) {
    const int n = 1 + t % 8;
    auto node = [&](bool terminals) {
      int k = std::uniform_int_distribution<int>(terminals ? -2 : 0, n - 1)(rng);
      return k;  // -1 = kSource, -2 = kSink
    };
    struct Term { int u, v; double uv, vu; bool inf; };
    std::vector<Term> terms;
    std::vector<std::pair<double, double>> unary(n);
    BinaryCut cut(n);
    double constant = uni(0, 1);
    cut.addConstant(constant);
    for (int i = 0; i < n; ++i) {
      unary[i] = {uni(0, 5), uni(0, 5)};
      cut.addUnary(i, unary[i].first, unary[i].second);
    }
    for (int k = 0; k < 3 * n; ++k) {
      Term e{node(true), node(true), uni(0, 3), uni(0, 3), false};
      cut.addPair(e.u, e.v, e.uv, e.vu);
      terms.push_back(e);
    }
    for (int k = 0; k < n / 3; ++k) {
      Term e{node(false), node(false), 0, 0, true};
      cut.addInfinite(e.u, e.v);
      terms.push_back(e);
    }
    // side(-1) = 0 (s in S), side(-2) = 1 (t in T).
    auto energyOf = [&](std::uint32_t m) {
      auto side = [&](int x) { return x == -1 ? 0 : x == -2 ? 1 : int(m >> x & 1); };
      double e = constant;
      for (int i = 0; i < n; ++i) e += side(i) ? unary[i].second : unary[i].first;
      for (const Term& x : terms) {
        if (x.u == x.v) continue;
        bool uvCut = side(x.u) == 0 && side(x.v) == 1, vuCut = side(x.v) == 0 && side(x.u) == 1;
        if (x.inf && uvCut) return kNoKernel;
        e += (uvCut ? x.uv : 0) + (vuCut && !x.inf ? x.vu : 0);
      }
      return e;
    };
    double best = kNoKernel;
    for (std::uint32_t m = 0; m < (1u << n); ++m) best = std::min(best, energyOf(m));
    std::vector<char> side;
    double value = cut.solve(side);
    std::uint32_t m = 0;
    for (int i = 0; i < n; ++i) m |= std::uint32_t(side[i]) << i;
    EXPECT_TRUE(nearlyEqual(value, best)) << "case " << t << ": " << value << " vs " << best;
    EXPECT_TRUE(nearlyEqual(energyOf(m), best)) << "case " << t;
  }
}

// A value is charged once per destination device however many readers it has there, and in the
// direction it moves: H2D for cpu -> cuda:0, D2H for the way back.
TEST(PlacerMinCut, OneChargePerValueAndDirection) {
  PlacementProblem p;
  p.devices = {{"cpu", "cpu", 0}, {"cuda:0", "cuda", 0}};
  auto op = [&](const std::string& name, double cpu, double gpu) {
    p.ops.push_back({name, "Op", {cpu, gpu}, 0, std::nullopt, {}});
  };
  op("src", 1.0, kNoKernel);  // only the cpu can produce x
  op("r1", 10.0, 1.0);        // three readers, each 9 s faster on the gpu
  op("r2", 10.0, 1.0);
  op("r3", 10.0, 1.0);
  op("sink", kNoKernel, 1.0);  // reads y from the gpu readers
  // x: cpu -> cuda:0 costs 12 (H2D), 1 the other way. Per-edge costs would charge 3 x 12 = 36 >
  // the 27 s saved, so a per-edge model keeps the readers on the cpu; per value it is 12 < 27.
  PlacementValue x{"x", ValueSource::Op, 0, kNone, {1, 2, 3}, {}, 4, -1, {0, 12, 1, 0}};
  PlacementValue y{"y", ValueSource::Op, 1, kNone, {4}, {}, 4, -1, {0, 2, 3, 0}};
  // The result goes back to host memory: D2H 3 s (H2D would have been 2 s).
  PlacementValue z{"z", ValueSource::Op, 4, kNone, {}, {0}, 4, -1, {0, 2, 3, 0}};
  p.values = {x, y, z};
  PlaceResult r = placeGraph(p);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.placement.device, (std::vector<DeviceId>{0, 1, 1, 1, 1}));
  // compute 1 + 3 x 1 + 1, copies x: 12 (once), z back to the cpu: 3.
  EXPECT_DOUBLE_EQ(r.placement.cost.computeSeconds, 5.0);
  EXPECT_DOUBLE_EQ(r.placement.cost.transferSeconds, 15.0);
  ASSERT_EQ(r.placement.cost.copies.size(), 2u);
  EXPECT_EQ(r.placement.cost.copies[0].value, 0);
  EXPECT_EQ(r.placement.cost.copies[0].to, 1);
  EXPECT_EQ(r.placement.cost.copies[1].value, 2);
  EXPECT_EQ(r.placement.cost.copies[1].from, 1);
  EXPECT_EQ(r.placement.cost.copies[1].to, 0);
  EXPECT_DOUBLE_EQ(r.placement.cost.copies[1].seconds, 3.0);
  EXPECT_EQ(r.placement.reason[0], "only-kernel");
  EXPECT_EQ(r.placement.reason[1], "cost");

  // Raise the H2D cost of x to 30: all-gpu costs 5 + 30 + 3 = 38 > all-cpu 32 + 2 (y) + 3 = 37,
  // so all three readers stay on the cpu and y crosses instead.
  p.values[0].transferSeconds = {0, 30, 1, 0};
  r = placeGraph(p);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.placement.device, (std::vector<DeviceId>{0, 0, 0, 0, 1}));
  EXPECT_DOUBLE_EQ(r.placement.cost.totalSeconds, 1 + 30 + 1 + 2 /*y H2D*/ + 3 /*z D2H*/);
}

// Graph inputs on the host act as pinned producers; free transfers cost nothing.
TEST(PlacerMinCut, HostInputsAndSingleDevice) {
  PlacementProblem p;
  p.devices = {{"cpu", "cpu", 0}, {"cuda:0", "cuda", 0}};
  p.ops.push_back({"a", "Relu", {3.0, 1.0}, 0, std::nullopt, {}});
  PlacementValue in{"in", ValueSource::GraphInput, kNone, 0, {0}, {}, 8, 2, {0, 2.5, 2.5, 0}};
  PlacementValue out{"out", ValueSource::Op, 0, kNone, {}, {0}, 8, 2, {0, 2.5, 0.5, 0}};
  p.values = {in, out};
  // GPU: 1 + 2.5 (in) + 0.5 (out) = 4 > 3 on the cpu.
  PlaceResult r = placeGraph(p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.placement.device[0], 0);
  EXPECT_DOUBLE_EQ(r.placement.cost.totalSeconds, 3.0);
  p.values[0].transferSeconds = {0, 1.0, 1.0, 0};  // 1 + 1 + 0.5 = 2.5 < 3
  r = placeGraph(p);
  EXPECT_EQ(r.placement.device[0], 1);
  EXPECT_DOUBLE_EQ(r.placement.cost.totalSeconds, 2.5);
  EXPECT_DOUBLE_EQ(r.placement.cost.makespanSeconds, 2.5);

  PlacementProblem one;
  one.devices = {{"cpu", "cpu", 0}};
  one.ops.push_back({"a", "Relu", {3.0}, 0, std::nullopt, {}});
  r = placeGraph(one);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.placement.stats.algorithm, "single-device");
  EXPECT_EQ(r.placement.reason[0], "only-kernel");
}

// A variable lives with its home op (its update's producer): a reader on another device pays a
// per-run copy from there, and the variable is no data dependency (its update comes after).
TEST(PlacerMinCut, VariableReadOffItsHomeIsCopiedEveryRun) {
  PlacementProblem p;
  p.devices = {{"cpu", "cpu", 0}, {"cuda:0", "cuda", 0}};
  p.ops.push_back({"update", "Add", {1.0, 5.0}, 0, std::nullopt, {}});   // home: cpu is cheaper
  p.ops.push_back({"reader", "Dropout", {9.0, 5.0}, 0, std::nullopt, {}});  // cuda:0 saves 4
  PlacementValue var{"step", ValueSource::Variable, 0, kNone, {0, 1}, {}, 4, 1, {0, 5.0, 5.0, 0}};
  p.values = {var};
  // Split: 1 + 5 + copy 5 = 11; both on cpu: 10; both on cuda:0: 10 + 0. Without the copy the
  // split (6) would win.
  PlaceResult r = placeGraph(p);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.placement.device[0], r.placement.device[1]);
  EXPECT_DOUBLE_EQ(r.placement.cost.totalSeconds, 10.0);
  p.values[0].transferSeconds = {0, 3.0, 3.0, 0};  // split: 1 + 5 + 3 = 9 < 10
  r = placeGraph(p);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.placement.device[0], 0);
  EXPECT_EQ(r.placement.device[1], 1);
  EXPECT_DOUBLE_EQ(r.placement.cost.totalSeconds, 9.0);
  ASSERT_EQ(r.placement.cost.copies.size(), 1u);
  EXPECT_EQ(r.placement.cost.copies[0].from, 0);
  EXPECT_EQ(r.placement.cost.copies[0].to, 1);
}

}  // namespace
}  // namespace tandem::placement

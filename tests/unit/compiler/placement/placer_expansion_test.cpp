// Quality of the multi-device placement: alpha-expansion against the exact optimum of an integer
// program solved by GLPK on random graphs of <= 40 ops and 3-4 devices (issue 3 item 7b), and
// the HEFT refinement's makespan on a graph with parallel branches.
#include <glpk.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/unit/compiler/placement/placer_test_util.h"

namespace tandem::placement {
namespace {

using testing::nearlyEqual;
using testing::randomProblem;
using testing::RandomSpec;
using testing::referenceCost;

// The exact minimum total cost as a mixed-integer program:
//   x[i][d] in {0,1}: op i on device d (only feasible d; a pin leaves one; colocated ops equal);
//   sum_d x[i][d] = 1;
//   f[v][s][d] in [0,1], s != d: v is copied from s to d, at cost T_v(s -> d);
//   f[v][s][d] <= x[producer][s]            (a copy leaves from where v is produced)
//   sum_{s != d} f[v][s][d] >= x[c][d] - x[producer][d]   for every reader c and device d
//   (an output on device o is a reader fixed there; a graph input has its home fixed).
// minimise sum compute * x + sum T * f. With x integral the best f is exactly the set of
// (value, destination) copies, one per destination, charged from the producer's device.
double ilpOptimum(const PlacementProblem& p, bool* solved) {
  const int D = static_cast<int>(p.devices.size());
  const int n = static_cast<int>(p.ops.size());
  glp_prob* lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0};
  auto addCol = [&](double cost, int kind, double lo, double hi) {
    int col = glp_add_cols(lp, 1);
    glp_set_col_kind(lp, col, kind);
    glp_set_col_bnds(lp, col, lo == hi ? GLP_FX : GLP_DB, lo, hi);
    glp_set_obj_coef(lp, col, cost);
    return col;
  };
  auto addRow = [&](const std::vector<std::pair<int, double>>& terms, int type, double lo,
                    double hi) {
    int row = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, row, type, lo, hi);
    for (auto [col, coef] : terms)
      if (col) ia.push_back(row), ja.push_back(col), ar.push_back(coef);
  };
  std::vector<int> x(n * D, 0);
  for (int i = 0; i < n; ++i) {
    std::vector<std::pair<int, double>> one;
    for (int d = 0; d < D; ++d) {
      const PlacementOp& op = p.ops[i];
      if (!op.feasible(d) || (op.pin && op.pin->device != p.devices[d].name)) continue;
      x[i * D + d] = addCol(op.computeSeconds[d], GLP_BV, 0, 1);
      one.push_back({x[i * D + d], 1.0});
    }
    addRow(one, GLP_FX, 1, 1);
  }
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      for (const std::string& g : p.ops[i].colocation)
        for (const std::string& h : p.ops[j].colocation)
          if (g == h)
            for (int d = 0; d < D; ++d) {
              if (!x[i * D + d] && !x[j * D + d]) continue;
              addRow({{x[i * D + d], 1.0}, {x[j * D + d], -1.0}}, GLP_FX, 0, 0);
            }
  for (const PlacementValue& v : p.values) {
    if (v.source == ValueSource::Constant || v.transferSeconds.empty()) continue;
    bool fromOp = v.source == ValueSource::Op;
    auto home = [&](int s) { return fromOp ? x[v.producer * D + s] : 0; };
    auto homeCan = [&](int s) { return fromOp ? x[v.producer * D + s] != 0 : s == v.inputDevice; };
    std::vector<int> f(D * D, 0);
    for (int s = 0; s < D; ++s)
      for (int d = 0; d < D; ++d) {
        if (s == d || !homeCan(s)) continue;
        f[s * D + d] = addCol(v.transferSeconds[s * D + d], GLP_CV, 0, 1);
        if (fromOp) addRow({{f[s * D + d], 1.0}, {home(s), -1.0}}, GLP_UP, 0, 0);
      }
    auto atLeast = [&](int d, int readerCol, double rhs) {
      // sum_s f[s][d] - x_reader[d] + x_producer[d] >= rhs
      std::vector<std::pair<int, double>> t;
      for (int s = 0; s < D; ++s)
        if (f[s * D + d]) t.push_back({f[s * D + d], 1.0});
      if (readerCol) t.push_back({readerCol, -1.0});
      if (fromOp) t.push_back({home(d), 1.0});
      else if (d == v.inputDevice) rhs -= 1;  // the input is already there
      addRow(t, GLP_LO, rhs, 0);
    };
    std::vector<OpId> readers(v.consumers);
    std::sort(readers.begin(), readers.end());
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    for (OpId c : readers)
      for (int d = 0; d < D; ++d)
        if (x[c * D + d]) atLeast(d, x[c * D + d], 0);
    for (DeviceId o : v.outputDevices) atLeast(o, 0, 1);
  }
  glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  parm.tm_lim = 20000;
  int rc = glp_intopt(lp, &parm);
  *solved = rc == 0 && glp_mip_status(lp) == GLP_OPT;
  double obj = glp_mip_obj_val(lp);
  glp_delete_prob(lp);
  return obj;
}

// The ILP agrees with brute force where both are cheap, so it is a trustworthy reference.
TEST(PlacerExpansion, IlpMatchesEnumerationOnTinyGraphs) {
  std::mt19937 rng(7);
  RandomSpec spec;
  spec.minOps = 2, spec.maxOps = 6, spec.devices = 3;
  for (int t = 0; t < 40; ++t) {
    PlacementProblem p = randomProblem(rng, spec);
    const int n = static_cast<int>(p.ops.size());
    double best = kNoKernel;
    std::vector<int> dev(n, 0);
    int codes = 1;
    for (int i = 0; i < n; ++i) codes *= 3;
    for (int code = 0; code < codes; ++code) {
      for (int i = 0, k = code; i < n; ++i) dev[i] = k % 3, k /= 3;
      if (testing::honoursConstraints(p, dev)) best = std::min(best, referenceCost(p, dev));
    }
    bool solved = false;
    double ilp = ilpOptimum(p, &solved);
    ASSERT_TRUE(solved);
    EXPECT_TRUE(nearlyEqual(ilp, best, 1e-7)) << "graph " << t << ": ilp " << ilp << " enum " << best;
  }
}

// Costs are deliberately hard: compute times independent and uniform per device (no device is
// better overall), 15% of ops lack a kernel on one device, pins and colocation pairs, and half
// the graphs have independent random link times (no triangle inequality), the rest latency +
// bytes / bandwidth per ordered link.
TEST(PlacerExpansion, WithinThreePercentOfIlpOptimum) {
  std::mt19937 rng(424242);
  const int kGraphs = 120;
  int solved = 0, optimal = 0;
  double sumGap = 0, maxGap = 0;
  int structured = 0;
  for (int t = 0; t < kGraphs; ++t) {
    RandomSpec spec;
    spec.minOps = 8, spec.maxOps = 40;
    spec.devices = 3 + t % 2;
    spec.maxGroups = 3;
    spec.structuredTransfers = (t / 2) % 2 == 1;  // half latency + bytes/bandwidth links
    structured += spec.structuredTransfers;
    PlacementProblem p = randomProblem(rng, spec);
    PlacerOptions o;
    o.refinement = MakespanRefinement::Off;  // the total-cost optimum is what the ILP computes
    PlaceResult r = placeGraph(p, o);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.placement.stats.algorithm, "alpha-expansion");
    ASSERT_TRUE(testing::honoursConstraints(p, r.placement.device));
    double mine = referenceCost(p, r.placement.device);
    EXPECT_TRUE(nearlyEqual(mine, r.placement.cost.totalSeconds));
    bool ok = false;
    double opt = ilpOptimum(p, &ok);
    if (!ok) continue;
    ++solved;
    EXPECT_GE(mine, opt - 1e-7 * std::max(1.0, opt)) << "below the optimum: graph " << t;
    double gap = (mine - opt) / opt;
    sumGap += gap;
    maxGap = std::max(maxGap, gap);
    optimal += gap <= 1e-7;
  }
  std::printf("alpha-expansion vs GLPK optimum: %d graphs (3-4 devices, 8-40 ops, %d with "
              "latency+bandwidth links), %d solved, %d optimal, mean gap %.4f%%, max gap %.4f%%\n",
              kGraphs, structured, solved, optimal, 100 * sumGap / std::max(solved, 1),
              100 * maxGap);
  EXPECT_GE(solved, 100);
  EXPECT_LE(maxGap, 0.03);
}

// Two independent heavy branches from a host input: the cut/expansion puts both on the fastest
// device (least total time, run one after the other); the HEFT sweep moves one branch to an
// idle device and the makespan drops to one branch.
TEST(PlacerExpansion, HeftRefinementRunsBranchesInParallel) {
  PlacementProblem p;
  p.devices = {{"cpu", "cpu", 0}, {"cuda:0", "cuda", 0}, {"cuda:1", "cuda", 0}};
  auto op = [&](const std::string& name, std::vector<double> t) {
    p.ops.push_back({name, "MatMul", std::move(t), 0, std::nullopt, {}});
  };
  op("a1", {50, 10, 11});
  op("a2", {50, 10, 11});
  op("b1", {50, 10, 11});
  op("b2", {50, 10, 11});
  std::vector<double> link = {0, 1, 1, 1, 0, 1, 1, 1, 0};
  p.values = {
      {"in", ValueSource::GraphInput, kNone, 0, {0, 2}, {}, 4, -1, link},
      {"a", ValueSource::Op, 0, kNone, {1}, {}, 4, -1, link},
      {"b", ValueSource::Op, 2, kNone, {3}, {}, 4, -1, link},
      {"ya", ValueSource::Op, 1, kNone, {}, {0}, 4, -1, link},
      {"yb", ValueSource::Op, 3, kNone, {}, {0}, 4, -1, link},
  };
  PlacerOptions off;
  off.refinement = MakespanRefinement::Off;
  PlaceResult base = placeGraph(p, off);
  ASSERT_TRUE(base.ok());
  // Least total: everything on cuda:0: 40 compute + 1 (in) + 2 (ya, yb back) = 43; serial.
  EXPECT_DOUBLE_EQ(base.placement.cost.totalSeconds, 43.0);
  EXPECT_DOUBLE_EQ(base.placement.cost.makespanSeconds, 1 + 40 + 1);
  PlaceResult r = placeGraph(p);  // Auto: refinement on for 3 devices
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r.placement.stats.makespanBeforeRefinement, 42.0);
  // One branch on cuda:1: in arrives at 1 on both, branch a ends 21 -> ya at 22; branch b on
  // cuda:1 ends 1 + 22 = 23 -> yb on the cpu at 24.
  EXPECT_DOUBLE_EQ(r.placement.cost.makespanSeconds, 24.0);
  EXPECT_EQ(r.placement.stats.heftMoves, 2);
  EXPECT_EQ(r.placement.device[0], r.placement.device[1]);
  EXPECT_EQ(r.placement.device[2], r.placement.device[3]);
  EXPECT_NE(r.placement.device[0], r.placement.device[2]);
  EXPECT_DOUBLE_EQ(r.placement.cost.totalSeconds, 1 + 1 + 20 + 22 + 2);  // two H2D copies now
}

// A device's memory capacity bounds the bytes placed there; the next best device takes the rest.
TEST(PlacerExpansion, MemoryCapacityMovesTheCheapestOpsOff) {
  for (int devices : {2, 3}) {
    PlacementProblem p;
    p.devices = {{"cpu", "cpu", 0}, {"cuda:0", "cuda", 100}};
    if (devices == 3) p.devices.push_back({"cuda:1", "cuda", 60});
    const int D = devices;
    // Four independent ops, each 50 bytes: the gpus save 9, 8, 7, 6 s over the cpu.
    for (int i = 0; i < 4; ++i) {
      std::vector<double> t(D, 10.0);
      t[1] = 1.0 + i;
      if (D == 3) t[2] = 1.5 + i;
      p.ops.push_back({"op" + std::to_string(i), "Op", t, 50, std::nullopt, {}});
    }
    PlaceResult r = placeGraph(p);
    ASSERT_TRUE(r.ok()) << r.error;
    // cuda:0 holds two ops (100 bytes): the two that save most; cuda:1 holds one (60 bytes).
    // With three devices any one of op0..op2 may take cuda:1 (each costs 0.5 s more there).
    if (D == 2) {
      EXPECT_EQ(r.placement.device, (std::vector<DeviceId>{1, 1, 0, 0}));
    }
    EXPECT_EQ(r.placement.device[3], 0);
    EXPECT_LE(r.placement.cost.bytesPerDevice[1], 100u);
    if (D == 3) {
      EXPECT_LE(r.placement.cost.bytesPerDevice[2], 60u);
    }
    EXPECT_DOUBLE_EQ(r.placement.cost.totalSeconds, D == 3 ? 1 + 2 + 3.5 + 10 : 1 + 2 + 10 + 10);
    EXPECT_GE(r.placement.stats.memoryRounds, 1);
  }
  // Pinned ops alone over capacity: an error naming the device.
  PlacementProblem p;
  p.devices = {{"cpu", "cpu", 0}, {"cuda:0", "cuda", 100}};
  for (int i = 0; i < 3; ++i)
    p.ops.push_back({"op" + std::to_string(i), "Op", {1, 1}, 50, Pin{"cuda:0"}, {}});
  PlaceResult r = placeGraph(p);
  EXPECT_EQ(r.error,
            "device cuda:0 holds 100 bytes but the ops that must run there (pinned, or with no "
            "kernel elsewhere) need 150 bytes");
}

}  // namespace
}  // namespace tandem::placement

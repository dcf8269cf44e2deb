// Placement speed (issue 3 item 9; a benchmark, not a test): placeGraph on chains with skip
// connections and on random DAGs of 1k, 10k and 100k ops, for cpu+cuda:0 (min cut) and
// cpu+3 GPUs (alpha-expansion + HEFT refinement). Goal: <= 50 ms at 10k, <= 1 s at 100k.
#include <benchmark/benchmark.h>

#include <random>

#include "compiler/placement/Placer.h"

namespace tandem::placement {
namespace {

enum Shape { kChainSkip = 0, kRandomDag = 1 };

// Costs shaped like a CPU + GPUs over PCIe: GPU ops 15-25x faster than the CPU plus 5 us launch
// on cuda:0 and cuda:1 (the same model), 1.6x slower on cuda:2 (an older part); H2D/D2H at
// ~12/13 GB/s plus 10 us, P2P at 50 GB/s plus 5 us; 5% of ops have no GPU kernel.
PlacementProblem makeGraph(int n, int numDevices, Shape shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> logTime(-6, -3), unit(0, 1);
  PlacementProblem p;
  p.devices.push_back({"cpu", "cpu", 0});
  for (int d = 1; d < numDevices; ++d) p.devices.push_back({"cuda:" + std::to_string(d - 1), "cuda", 0});
  const int D = numDevices;
  auto transfers = [&](double bytes) {
    std::vector<double> t(D * D, 0.0);
    for (int a = 0; a < D; ++a)
      for (int b = 0; b < D; ++b) {
        if (a == b) continue;
        if (a == 0) t[a * D + b] = 10e-6 + bytes / 12e9;       // H2D
        else if (b == 0) t[a * D + b] = 10e-6 + bytes / 13e9;  // D2H
        else t[a * D + b] = 5e-6 + bytes / 50e9;               // P2P
      }
    return t;
  };
  p.ops.resize(n);
  p.values.resize(n + 1);
  p.values[n] = {"input", ValueSource::GraphInput, kNone, 0, {0}, {}, 1 << 20, -1, transfers(1 << 20)};
  for (int i = 0; i < n; ++i) {
    PlacementOp& op = p.ops[i];
    op.name = "op" + std::to_string(i);
    op.opType = "Op";
    double cpu = std::pow(10.0, logTime(rng));
    op.computeSeconds.assign(D, cpu);
    bool gpuKernel = unit(rng) > 0.05;
    double gpu = cpu / (15 + 10 * unit(rng)) + 5e-6;
    for (int d = 1; d < D; ++d)
      op.computeSeconds[d] = gpuKernel ? (d == 3 ? 1.6 * gpu : gpu) : kNoKernel;
    op.memoryBytes = 1 << 16;
    double bytes = std::pow(10.0, 3 + 4 * unit(rng));
    p.values[i] = {"v" + std::to_string(i), ValueSource::Op, i, kNone, {}, {}, std::uint64_t(bytes),
                   -1, transfers(bytes)};
    if (i + 1 == n) p.values[i].outputDevices = {0};
  }
  for (int i = 1; i < n; ++i) {
    if (shape == kChainSkip) {
      p.values[i - 1].consumers.push_back(i);
      if (i % 3 == 0 && i >= 4) p.values[i - 4].consumers.push_back(i);  // residual edge
    } else {
      int reads = 1 + static_cast<int>(unit(rng) * 3);
      for (int r = 0; r < reads; ++r) {
        int window = std::min(i, 100);
        int from = i - 1 - static_cast<int>(unit(rng) * window);
        p.values[from].consumers.push_back(i);
      }
    }
  }
  return p;
}

void BM_Place(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int devices = static_cast<int>(state.range(1));
  const Shape shape = static_cast<Shape>(state.range(2));
  PlacementProblem p = makeGraph(n, devices, shape, 7);
  PlaceResult r;
  for (auto _ : state) {
    r = placeGraph(p);
    benchmark::DoNotOptimize(r);
  }
  if (!r.ok()) state.SkipWithError(r.error.c_str());
  state.SetLabel(std::string(shape == kChainSkip ? "chain+skip" : "random-dag") + " " +
                 r.placement.stats.algorithm);
  state.counters["solves"] = r.placement.stats.maxflowSolves;
  state.counters["cycles"] = r.placement.stats.expansionCycles;
  state.counters["heft_moves"] = r.placement.stats.heftMoves;
  state.counters["total_ms"] = r.placement.cost.totalSeconds * 1e3;
  state.counters["makespan_ms"] = r.placement.cost.makespanSeconds * 1e3;
}

BENCHMARK(BM_Place)
    ->ArgsProduct({{1000, 10000, 100000}, {2, 4}, {kChainSkip, kRandomDag}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);

}  // namespace
}  // namespace tandem::placement

BENCHMARK_MAIN();

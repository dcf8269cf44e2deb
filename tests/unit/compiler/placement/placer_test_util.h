// Placer test helpers: random placement problems and an independent reference pricer.
#pragma once
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compiler/placement/Placer.h"

namespace tandem::placement::testing {

struct RandomSpec {
  int minOps = 1, maxOps = 16;
  int devices = 2;
  double pInfeasible = 0.15;  // per op: one random device has no kernel
  double pPin = 0.05;         // per op: pinned to a device where its set can run
  int maxGroups = 2;          // colocation groups of 2 ops
  double pOutput = 0.2;       // per value: also a graph output on a random device
  int maxGraphInputs = 2;
  int maxFanOut = 4;
  bool structuredTransfers = false;  // latency + bytes / bandwidth per ordered link
};

inline std::vector<std::string> deviceNames(int n) {
  std::vector<std::string> names = {"cpu"};
  for (int i = 1; i < n; ++i) names.push_back("cuda:" + std::to_string(i - 1));
  return names;
}

/// A random DAG: op i reads values of earlier ops and graph inputs; every op produces one value
/// with 0..maxFanOut readers. Costs are random with H2D != D2H.
inline PlacementProblem randomProblem(std::mt19937& rng, const RandomSpec& s) {
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  auto chance = [&](double q) { return uni(0, 1) < q; };
  PlacementProblem p;
  std::vector<std::string> names = deviceNames(s.devices);
  for (int d = 0; d < s.devices; ++d) p.devices.push_back({names[d], d == 0 ? "cpu" : "cuda", 0});
  const int D = s.devices;
  int n = s.minOps + pick(s.maxOps - s.minOps + 1);
  // Links: per ordered pair a latency and a bandwidth (structured), or nothing (random).
  std::vector<double> lat(D * D), bw(D * D);
  for (int k = 0; k < D * D; ++k) lat[k] = uni(0.1, 1.0), bw[k] = uni(0.5, 4.0);
  auto transfers = [&](double bytes) {
    std::vector<double> t(D * D, 0.0);
    for (int a = 0; a < D; ++a)
      for (int b = 0; b < D; ++b)
        if (a != b) t[a * D + b] = s.structuredTransfers ? lat[a * D + b] + bytes / bw[a * D + b]
                                                         : uni(0.0, 6.0);
    return t;
  };
  for (int i = 0; i < n; ++i) {
    PlacementOp op;
    op.name = "op" + std::to_string(i);
    op.opType = "T" + std::to_string(pick(4));
    op.computeSeconds.resize(D);
    for (int d = 0; d < D; ++d) op.computeSeconds[d] = uni(0.0, 10.0);
    if (D > 1 && chance(s.pInfeasible)) op.computeSeconds[pick(D)] = kNoKernel;
    p.ops.push_back(op);
  }
  int inputs = s.maxGraphInputs ? pick(s.maxGraphInputs + 1) : 0;
  for (int k = 0; k < inputs; ++k) {
    PlacementValue v;
    v.name = "in" + std::to_string(k);
    v.source = ValueSource::GraphInput;
    v.inputDevice = chance(0.7) ? 0 : pick(D);
    v.bytes = 1 + pick(8);
    v.transferSeconds = transfers(double(v.bytes));
    int readers = 1 + pick(3);
    for (int r = 0; r < readers; ++r) v.consumers.push_back(pick(n));
    p.values.push_back(v);
  }
  for (int i = 0; i < n; ++i) {
    PlacementValue v;
    v.name = "v" + std::to_string(i);
    v.producer = i;
    v.bytes = 1 + pick(8);
    v.transferSeconds = transfers(double(v.bytes));
    if (i + 1 < n) {
      int readers = pick(s.maxFanOut + 1);
      for (int r = 0; r < readers; ++r) v.consumers.push_back(i + 1 + pick(n - i - 1));
    }
    if (chance(s.pOutput) || v.consumers.empty()) {
      if (chance(0.5)) v.outputDevices.push_back(chance(0.7) ? 0 : pick(D));
    }
    p.values.push_back(v);
  }
  // Colocation pairs that can share a device; at most one pin per set, always satisfiable.
  std::vector<std::uint64_t> mask(n, 0);
  for (int i = 0; i < n; ++i)
    for (int d = 0; d < D; ++d)
      if (p.ops[i].feasible(d)) mask[i] |= 1ull << d;
  std::vector<int> setOf(n);  // the set's first op; groups are disjoint pairs
  for (int i = 0; i < n; ++i) setOf[i] = i;
  std::vector<char> grouped(n, 0);
  int groups = n >= 2 ? pick(s.maxGroups + 1) : 0;
  for (int gi = 0; gi < groups; ++gi) {
    int a = pick(n), b = pick(n);
    if (a == b || grouped[a] || grouped[b] || (mask[a] & mask[b]) == 0) continue;
    grouped[a] = grouped[b] = 1;
    std::string g = "g" + std::to_string(gi);
    p.ops[a].colocation.push_back(g);
    p.ops[b].colocation.push_back(g);
    setOf[b] = a;
    mask[a] &= mask[b];
    mask[b] = mask[a];
  }
  std::set<int> pinnedSets;
  for (int i = 0; i < n; ++i) {
    int root = setOf[i];
    if (!chance(s.pPin) || pinnedSets.count(root)) continue;
    std::vector<int> ok;
    for (int d = 0; d < D; ++d)
      if (mask[root] >> d & 1) ok.push_back(d);
    p.ops[i].pin = Pin{p.devices[ok[pick(int(ok.size()))]].name, false};
    pinnedSets.insert(root);
  }
  return p;
}

/// Total cost by the definition, written independently of the placer: compute of each op on its
/// device plus, per value, T(home -> d) once for each distinct reading device d != home.
inline double referenceCost(const PlacementProblem& p, const std::vector<int>& device) {
  const int D = static_cast<int>(p.devices.size());
  double total = 0;
  for (size_t i = 0; i < p.ops.size(); ++i) total += p.ops[i].computeSeconds[device[i]];
  for (const PlacementValue& v : p.values) {
    if (v.source == ValueSource::Constant || v.transferSeconds.empty()) continue;
    int home = v.source == ValueSource::Op ? device[v.producer] : v.inputDevice;
    std::set<int> readers(v.outputDevices.begin(), v.outputDevices.end());
    for (int c : v.consumers) readers.insert(device[c]);
    for (int d : readers)
      if (d != home) total += v.transferSeconds[home * D + d];
  }
  return total;
}

/// Whether a placement honours feasibility, satisfiable pins and colocation groups.
inline bool honoursConstraints(const PlacementProblem& p, const std::vector<int>& device) {
  std::map<std::string, int> groupDevice;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const PlacementOp& op = p.ops[i];
    if (!op.feasible(device[i])) return false;
    if (op.pin && p.devices[device[i]].name != op.pin->device) return false;
    for (const std::string& g : op.colocation) {
      auto [it, fresh] = groupDevice.emplace(g, device[i]);
      if (!fresh && it->second != device[i]) return false;
    }
  }
  return true;
}

inline bool nearlyEqual(double a, double b, double rel = 1e-9) {
  return std::abs(a - b) <= rel * std::max({1.0, std::abs(a), std::abs(b)});
}

}  // namespace tandem::placement::testing

// Placement constraints: colocation sets by union-find, pins, fallbacks and conflict messages.
#include <map>
#include <numeric>

#include "compiler/placement/PlacerInternal.h"

namespace tandem::placement::detail {
namespace {

// Union-find with path halving and union by size (Tarjan 1975).
struct UnionFind {
  std::vector<int> parent, size;
  explicit UnionFind(int n) : parent(n), size(n, 1) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(int a, int b) {
    a = find(a), b = find(b);
    if (a == b) return;
    if (size[a] < size[b]) std::swap(a, b);
    parent[b] = a;
    size[a] += size[b];
  }
};

std::uint64_t opMask(const PlacementOp& op, int numDevices) {
  std::uint64_t m = 0;
  for (int d = 0; d < numDevices; ++d)
    if (op.feasible(d)) m |= std::uint64_t(1) << d;
  return m;
}

std::string opText(const PlacementOp& op) { return "op '" + op.name + "' (" + op.opType + ")"; }

}  // namespace

std::string deviceSetText(const PlacementProblem& p, std::uint64_t mask) {
  std::string s;
  for (int d = 0; d < static_cast<int>(p.devices.size()); ++d)
    if (mask >> d & 1) s += (s.empty() ? "" : ", ") + p.devices[d].name;
  return "{" + s + "}";
}

std::string resolveConstraints(const PlacementProblem& p, bool strict, Constraints& c) {
  const int n = static_cast<int>(p.ops.size());
  const int numDevices = static_cast<int>(p.devices.size());
  std::uint64_t all = numDevices == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << numDevices) - 1;

  // 1. Every op needs a kernel somewhere.
  std::vector<std::uint64_t> mask(n);
  for (int i = 0; i < n; ++i) {
    mask[i] = opMask(p.ops[i], numDevices);
    if (!mask[i])
      return opText(p.ops[i]) + " has no kernel on any target device " + deviceSetText(p, all);
  }

  // 2. Union-find over colocation groups: ops naming the same group join, and an op naming two
  //    groups joins them. A set takes the name of the first group met in op order.
  UnionFind uf(n);
  std::map<std::string, int> firstOp;
  for (int i = 0; i < n; ++i)
    for (const std::string& g : p.ops[i].colocation) {
      auto [it, fresh] = firstOp.emplace(g, i);
      if (!fresh) uf.unite(it->second, i);
    }
  std::vector<int> unitOfRoot(n, kNone);
  c = Constraints();
  c.unitOf.assign(n, kNone);
  c.reason.assign(n, "");
  for (int i = 0; i < n; ++i) {
    int r = uf.find(i);
    if (unitOfRoot[r] == kNone) {
      unitOfRoot[r] = c.numUnits++;
      c.members.emplace_back();
      c.groupName.emplace_back();
      c.fixedDevice.push_back(kNone);
      c.feasibleMask.push_back(all);
    }
    int u = c.unitOf[i] = unitOfRoot[r];
    c.members[u].push_back(i);
    if (c.groupName[u].empty() && !p.ops[i].colocation.empty())
      c.groupName[u] = p.ops[i].colocation.front();
  }

  // 3. A set runs where all its members have kernels. When that is nowhere, name two members
  //    whose devices are disjoint if there are such, else the member that emptied the set.
  for (int u = 0; u < c.numUnits; ++u) {
    std::uint64_t m = all;
    const std::vector<OpId>& mem = c.members[u];
    for (size_t k = 0; k < mem.size(); ++k) {
      const PlacementOp& op = p.ops[mem[k]];
      if ((m & mask[mem[k]]) == 0) {
        std::string msg = opText(op) + " has kernels only on " + deviceSetText(p, mask[mem[k]]) +
                          " but is colocated (group '" + c.groupName[u] + "') with ";
        for (size_t j = 0; j < k; ++j)
          if ((mask[mem[j]] & mask[mem[k]]) == 0)
            return msg + opText(p.ops[mem[j]]) + ", which has kernels only on " +
                   deviceSetText(p, mask[mem[j]]);
        std::string others;
        for (size_t j = 0; j < k; ++j) others += (j ? ", '" : "'") + p.ops[mem[j]].name + "'";
        return msg + "ops " + others + ", which together run only on " + deviceSetText(p, m);
      }
      m &= mask[mem[k]];
    }
    c.feasibleMask[u] = m;
  }

  // 4. Pins. A satisfiable pin fixes its set; two satisfiable pins in one set on different
  //    devices conflict. An unsatisfiable pin falls back (soft) or fails (strict).
  std::vector<OpId> pinnedBy(c.numUnits, kNone);
  for (int i = 0; i < n; ++i) {
    const PlacementOp& op = p.ops[i];
    if (!op.pin) continue;
    int u = c.unitOf[i];
    DeviceId d = kNone;
    for (int k = 0; k < numDevices; ++k)
      if (p.devices[k].name == op.pin->device) d = k;
    // `problem` completes "cuda:0 ...": "is not a target", "has no kernel for Relu", ...
    std::string problem;
    if (d == kNone) {
      problem = "is not a target";
    } else if (!op.feasible(d)) {
      problem = "has no kernel for " + op.opType;
    } else if (!(c.feasibleMask[u] >> d & 1)) {
      for (OpId j : c.members[u])
        if (!p.ops[j].feasible(d)) {
          problem = "has no kernel for " + p.ops[j].opType + " (op '" + p.ops[j].name +
                    "', colocated in group '" + c.groupName[u] + "')";
          break;
        }
    }
    if (!problem.empty()) {
      if (strict || op.pin->strict)
        return opText(op) + " is pinned to " + op.pin->device + " (strict placement), but " +
               op.pin->device + " " + problem;
      c.reason[i] = "fallback(" + std::string(d == kNone ? "" : "pinned device ") +
                    op.pin->device + " " + problem + ")";
      continue;
    }
    if (pinnedBy[u] != kNone && c.fixedDevice[u] != d) {
      const PlacementOp& first = p.ops[pinnedBy[u]];
      return "op '" + first.name + "' is pinned to " + first.pin->device +
             " but is colocated (group '" + c.groupName[u] + "') with op '" + op.name +
             "' pinned to " + op.pin->device;
    }
    if (pinnedBy[u] == kNone) pinnedBy[u] = i;
    c.fixedDevice[u] = d;
    c.reason[i] = "pinned";
  }

  // 5. The rest of a colocation set says so.
  for (int i = 0; i < n; ++i) {
    const std::string& g = c.groupName[c.unitOf[i]];
    if (c.reason[i].empty() && !g.empty()) c.reason[i] = "colocated(" + g + ")";
  }
  return "";
}

}  // namespace tandem::placement::detail

// The binary cut: Stone's two-device placement cut with one transfer gadget per (value, device),
// generalised to the alpha-expansion move, solved by Boost.Graph's Boykov-Kolmogorov max-flow.
//
// ---- The construction and why the cut equals the placement's cost ----------------------------
//
// A binary move gives every unit u (a colocation set) two labels: S keeps srcLabel[u], T moves it
// to alpha. Stone 1977's two-device cut is the move with srcLabel = A for every unit and
// alpha = B. z_u = 0 means u in S, 1 means u in T; a unit is fixed when pinned, already on
// alpha, or infeasible on one side. Edges u -> v cost their capacity iff u in S and v in T.
//
// Compute: a free unit gets s -> u with cost(u on alpha) and u -> t with cost(u on srcLabel).
//
// Transfers: value v with home h (its producer's device, or the graph input's device) costs
//   sum over distinct devices d != h that read v of T_v(h -> d)
// (a reader is a consumer unit or an output device). With P = srcLabel[producer], the devices
// that can read v split into alpha and the source-side labels d != alpha of the readers; let
// C_d be the free readers whose srcLabel is d and [C_d in S] mean "some member of C_d is in S".
//
// (alpha term) v costs T(P -> alpha) iff the producer is in S and some reader is in T.
//   Gadget "v present on alpha": auxiliary node b, edge p -> b with capacity T(P -> alpha),
//   edges b -> c (infinite) for every free reader c. Proof: if p in S and some c in T, b in S
//   would cut an infinite edge b -> c, so b in T and p -> b is cut: T(P -> alpha). If no reader
//   is in T, b in S cuts nothing. If p in T, p -> b is never cut (it is T -> S or T -> T) and
//   b in T cuts nothing. The cut picks b's side optimally, so the gadget costs exactly
//   T(P -> alpha) [p in S and some c in T]. A reader fixed in T (pinned there, already on alpha,
//   an output on alpha) makes this a unary cost on p; with one free reader the gadget is the
//   edge p -> c.
//
// (term for d = P) v costs T(alpha -> P) iff the producer is in T and some c in C_P is in S.
//   Gadget "v present on P": node a, edges c -> a (infinite) for c in C_P, edge a -> p with
//   capacity T(alpha -> P). Proof: some c in S forces a in S (else c -> a is cut at infinite
//   cost), and then a -> p is cut iff p in T. With all of C_P in T, a in T cuts nothing.
//
// (term for d != P, d != alpha; only with three or more devices) v costs
//   [C_d in S] * (p in S ? T(P -> d) : T(alpha -> d)).
//   If T(alpha -> d) >= T(P -> d): node a, c -> a infinite, a -> t with capacity T(P -> d),
//   a -> p with capacity T(alpha -> d) - T(P -> d); the same argument gives exactly the cost
//   above. If T(alpha -> d) < T(P -> d) the term is not submodular (it would need a negative
//   capacity), so we use the upper bound [C_d in S] * T(P -> d) (a -> t only): exact whenever
//   the producer stays, so exact at the current labelling, which is all alpha-expansion needs to
//   never increase the energy ("truncation", Rother, Kumar, Kolmogorov & Blake 2005). The caller
//   re-prices the result exactly and keeps it only if it is cheaper.
//
// (producer fixed) A graph input on h != alpha or a pinned producer is the source vertex: the
//   gadgets above with p = s (a -> s edges vanish: they can never be cut). A producer on alpha
//   is the sink: only the C_d terms remain, [C_d in S] * T(alpha -> d), node a with a -> t.
//
// Readers fixed in S with label d (pinned, infeasible on alpha, outputs on d) make [C_d in S]
// always true: the d term becomes a unary cost on the producer, exact even when not submodular.
//
// Each auxiliary node appears only in its own gadget, so for any labelling of the units the
// minimum over the auxiliary nodes is the sum of the gadgets' exact (or bounded) costs, and the
// minimum cut is the minimum of the move's energy. With two devices every reader's srcLabel is
// A = P, so only the alpha and d = P terms occur and the cut is exact: Stone's result with
// per-value gadgets (a value crossing to a device is charged once, in its own direction).
#include <algorithm>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <cassert>
#include <cmath>
#include <cstdint>

#include "compiler/placement/PlacerInternal.h"

namespace tandem::placement::detail {

BinaryCut::BinaryCut(int numNodes) : termS_(numNodes, 0.0), termT_(numNodes, 0.0) {}

int BinaryCut::addNode() {
  termS_.push_back(0.0);
  termT_.push_back(0.0);
  return numNodes() - 1;
}

void BinaryCut::addUnary(int node, double ifS, double ifT) {
  if (node == kSource) return addConstant(ifS);
  if (node == kSink) return addConstant(ifT);
  termT_[node] += ifS;  // edge node -> t is cut when node is in S
  termS_[node] += ifT;  // edge s -> node is cut when node is in T
}

void BinaryCut::addPair(int u, int v, double capUV, double capVU) {
  if (u == v) return;
  // Terminal ends turn into unary terms or constants: s is always in S, t always in T.
  if (u < 0 || v < 0) {
    // An edge into s or out of t is never cut; s -> t always is.
    if (u == kSource && v == kSink) addConstant(capUV);
    else if (u == kSink && v == kSource) addConstant(capVU);
    else if (u == kSource) addUnary(v, 0, capUV);  // s -> v: cut iff v in T
    else if (u == kSink) addUnary(v, capVU, 0);    // v -> t: cut iff v in S
    else if (v == kSource) addUnary(u, 0, capVU);  // s -> u: cut iff u in T
    else addUnary(u, capUV, 0);                    // u -> t: cut iff u in S
    return;
  }
  if (capUV <= 0 && capVU <= 0) return;
  pairs_.push_back({u, v, capUV, capVU, false});
}

void BinaryCut::addInfinite(int u, int v) {
  if (u == v || u == kSink || v == kSource) return;  // never cut
  assert(!(u == kSource && v == kSink) && "an infinite source-sink edge has no finite cut");
  // The capacity is fixed at solve time: larger than all finite capacities together.
  pairs_.push_back({u, v, 0.0, 0.0, true});
}

double BinaryCut::solve(std::vector<char>& side) const {
  using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property,
                                                   boost::no_property, boost::no_property,
                                                   int /*vertex*/, int /*edge index*/>;
  using Edge = boost::graph_traits<Graph>::edge_descriptor;
  using Cap = std::int64_t;
  const int n = numNodes();
  const int s = n, t = n + 1;

  // Subtract the smaller terminal capacity from both (a constant): less flow to push.
  double constant = constant_, finite = 0;
  std::vector<double> toS(n), toT(n);
  for (int i = 0; i < n; ++i) {
    double m = std::min(termS_[i], termT_[i]);
    constant += m;
    toS[i] = termS_[i] - m;
    toT[i] = termT_[i] - m;
    finite += toS[i] + toT[i];
  }
  for (const Pair& e : pairs_)
    if (!e.infinite) finite += e.uv + e.vu;

  // Integer capacities: seconds scaled so that all finite capacities together are 2^60. Integer
  // residuals are exactly zero when saturated; with doubles, rounding leaves residuals like
  // 1e-19 along which the max-flow keeps augmenting. Rounding moves each capacity by at most
  // 2^-53 of the total, far below the 1e-9 relative accuracy the tests demand; the caller
  // re-prices the chosen labelling in doubles anyway. "Infinite" is 2^61: more than any cut of
  // finite edges, and with the flow (<= 2^60) still inside int64.
  const double scale = finite > 0 ? std::ldexp(1.0, 60) / finite : 1.0;
  const Cap inf = Cap(1) << 61;
  auto scaled = [&](double c) { return static_cast<Cap>(std::llround(c * scale)); };

  // Directed edges in pairs (e, reverse e). Counting sort by source gives the CSR order, which
  // the edges_are_sorted constructor keeps, so edge k's index is pos[k]. Buffers persist per
  // thread: a 100k-op move has ~1M arcs, and fresh allocations cost as much as the flow.
  struct Arc { int from, to; Cap cap; };
  thread_local std::vector<Arc> arcs;
  thread_local std::vector<int> start, pos, next;
  thread_local std::vector<std::pair<int, int>> sorted;
  thread_local std::vector<Cap> capacity, residual;
  thread_local std::vector<Edge> reverse, pred;
  thread_local std::vector<boost::default_color_type> color;
  thread_local std::vector<long> dist;
  arcs.clear();
  for (int i = 0; i < n; ++i) {
    if (Cap c = scaled(toS[i]); c > 0) arcs.push_back({s, i, c}), arcs.push_back({i, s, 0});
    if (Cap c = scaled(toT[i]); c > 0) arcs.push_back({i, t, c}), arcs.push_back({t, i, 0});
  }
  for (const Pair& e : pairs_) {
    int u = e.u < 0 ? (e.u == kSource ? s : t) : e.u;
    int v = e.v < 0 ? (e.v == kSource ? s : t) : e.v;
    Cap uv = e.infinite ? inf : scaled(e.uv), vu = e.infinite ? 0 : scaled(e.vu);
    if (uv == 0 && vu == 0) continue;
    arcs.push_back({u, v, uv});
    arcs.push_back({v, u, vu});
  }
  const int numVertices = n + 2;
  const size_t m = arcs.size();
  start.assign(numVertices + 1, 0);
  for (const Arc& a : arcs) ++start[a.from + 1];
  for (int v = 0; v < numVertices; ++v) start[v + 1] += start[v];
  pos.resize(m);
  next.assign(start.begin(), start.end() - 1);
  for (size_t k = 0; k < m; ++k) pos[k] = next[arcs[k].from]++;
  sorted.resize(m);
  capacity.resize(m);
  residual.resize(m);
  reverse.resize(m);
  for (size_t k = 0; k < m; ++k) {
    sorted[pos[k]] = {arcs[k].from, arcs[k].to};
    capacity[pos[k]] = arcs[k].cap;
    size_t r = k ^ 1;  // the pair partner, whose source is this arc's target
    reverse[pos[k]] = Edge(arcs[r].from, pos[r]);
  }
  Graph g(boost::edges_are_sorted, sorted.begin(), sorted.end(), numVertices);
  color.resize(numVertices);
  pred.resize(numVertices);
  dist.resize(numVertices);
  auto edgeIndex = boost::get(boost::edge_index, g);
  auto vertexIndex = boost::get(boost::vertex_index, g);
  Cap flow = boost::boykov_kolmogorov_max_flow(
      g, boost::make_iterator_property_map(capacity.begin(), edgeIndex),
      boost::make_iterator_property_map(residual.begin(), edgeIndex),
      boost::make_iterator_property_map(reverse.begin(), edgeIndex),
      boost::make_iterator_property_map(pred.begin(), vertexIndex),
      boost::make_iterator_property_map(color.begin(), vertexIndex),
      boost::make_iterator_property_map(dist.begin(), vertexIndex), vertexIndex, s, t);
  assert(flow < inf && "constraints admit no finite cut");

  // The source tree (black) is the set reachable from s in the residual graph: side S.
  side.assign(n, 0);
  for (int i = 0; i < n; ++i)
    side[i] = color[i] == boost::color_traits<boost::default_color_type>::black() ? 0 : 1;
  return double(flow) / scale + constant;
}

double solveBinaryMove(const UnitGraph& g, const std::vector<double>& unitCost,
                       const std::vector<DeviceId>& srcLabel, DeviceId alpha,
                       std::vector<DeviceId>& outLabel, int& truncated,
                       const std::vector<char>* frozen) {
  const int D = g.numDevices;
  const int U = g.numUnits;
  // Each unit's source-side label (a pin overrides) and its node: >= 0 when free, kSource when
  // it must keep its label, kSink when it is (or must go) on alpha.
  std::vector<DeviceId> src(U);
  std::vector<int> node(U);
  int numFree = 0;
  for (int u = 0; u < U; ++u) {
    src[u] = g.fixedDevice[u] != kNone ? g.fixedDevice[u] : srcLabel[u];
    bool onAlpha = src[u] == alpha || unitCost[u * D + src[u]] == kNoKernel;
    bool stays = g.fixedDevice[u] != kNone || unitCost[u * D + alpha] == kNoKernel ||
                 (frozen && (*frozen)[u]);
    node[u] = onAlpha ? BinaryCut::kSink : stays ? BinaryCut::kSource : numFree++;
  }
  BinaryCut cut(numFree);
  for (int u = 0; u < U; ++u) {
    double costS = node[u] == BinaryCut::kSink ? 0 : unitCost[u * D + src[u]];
    double costT = node[u] == BinaryCut::kSource ? 0 : unitCost[u * D + alpha];
    cut.addUnary(node[u], costS, costT);
  }

  // Scratch indexed by device, reset after each value.
  std::vector<int> freeCount(D, 0), auxNode(D, kNone);
  std::vector<char> fixedS(D, 0);
  std::vector<DeviceId> touched;
  std::vector<std::pair<int, DeviceId>> freeReaders;  // (node, source-side label)
  truncated = 0;
  for (const UnitGraph::Value& v : g.values) {
    // The producer: node pn and source-side label P (alpha when it is fixed on alpha).
    int pn;
    DeviceId P;
    if (v.producerUnit == kNone) {
      P = v.sourceDevice;
      pn = P == alpha ? BinaryCut::kSink : BinaryCut::kSource;
    } else {
      pn = node[v.producerUnit];
      P = pn == BinaryCut::kSink ? alpha : src[v.producerUnit];
    }
    // The readers: fixed on alpha, fixed on a device d != alpha, or free with label d.
    bool readerFixedT = false;
    freeReaders.clear();
    touched.clear();
    auto fixedOn = [&](DeviceId d) {
      if (d == alpha) return void(readerFixedT = true);
      if (!fixedS[d] && !freeCount[d]) touched.push_back(d);
      fixedS[d] = 1;
    };
    for (int k = v.consBegin; k < v.consEnd; ++k) {
      int c = g.consUnits[k];
      if (node[c] == BinaryCut::kSink) readerFixedT = true;
      else if (node[c] == BinaryCut::kSource) fixedOn(src[c]);
      else {
        DeviceId d = src[c];
        if (!fixedS[d] && !freeCount[d]) touched.push_back(d);
        ++freeCount[d];
        freeReaders.push_back({node[c], d});
      }
    }
    for (int k = v.outBegin; k < v.outEnd; ++k) fixedOn(g.outDevices[k]);

    if (pn == BinaryCut::kSink) {
      // Home is alpha: each other device d costs T(alpha -> d) iff some reader stays on d.
      for (DeviceId d : touched)
        if (fixedS[d]) cut.addConstant(g.transfer(v, alpha, d));
      for (auto [cn, d] : freeReaders) {
        if (fixedS[d]) continue;
        double a = g.transfer(v, alpha, d);
        if (freeCount[d] == 1) {
          cut.addUnary(cn, a, 0);
          continue;
        }
        if (auxNode[d] == kNone) cut.addUnary(auxNode[d] = cut.addNode(), a, 0);
        cut.addInfinite(cn, auxNode[d]);
      }
    } else {
      // (alpha term) T(P -> alpha) iff the producer stays and some reader goes to alpha.
      double toAlpha = g.transfer(v, P, alpha);
      if (readerFixedT) {
        cut.addUnary(pn, toAlpha, 0);
      } else if (freeReaders.size() == 1) {
        cut.addPair(pn, freeReaders[0].first, toAlpha);
      } else if (!freeReaders.empty() && toAlpha > 0) {
        int b = cut.addNode();
        cut.addPair(pn, b, toAlpha);
        for (auto [cn, d] : freeReaders) cut.addInfinite(b, cn);
      }
      // (d terms) A reader fixed on d: a unary term on the producer, exact.
      for (DeviceId d : touched)
        if (fixedS[d]) cut.addUnary(pn, g.transfer(v, P, d), g.transfer(v, alpha, d));
      // Free readers on d: [C_d in S] * (p in S ? T(P -> d) : T(alpha -> d)).
      for (auto [cn, d] : freeReaders) {
        if (fixedS[d]) continue;
        double a = g.transfer(v, P, d);  // 0 when d == P
        double b = g.transfer(v, alpha, d);
        bool exact = pn == BinaryCut::kSource || b >= a;
        if (freeCount[d] == 1) {
          cut.addUnary(cn, a, 0);
          if (exact && pn != BinaryCut::kSource) cut.addPair(cn, pn, b - a);
          continue;
        }
        if (auxNode[d] == kNone) {
          auxNode[d] = cut.addNode();
          cut.addUnary(auxNode[d], a, 0);
          if (exact && pn != BinaryCut::kSource) cut.addPair(auxNode[d], pn, b - a);
        }
        cut.addInfinite(cn, auxNode[d]);
      }
      for (DeviceId d : touched)
        if (!fixedS[d] && pn != BinaryCut::kSource && g.transfer(v, alpha, d) < g.transfer(v, P, d))
          ++truncated;
    }
    for (DeviceId d : touched) freeCount[d] = 0, fixedS[d] = 0, auxNode[d] = kNone;
  }

  std::vector<char> side;
  double bound = cut.solve(side);
  outLabel.resize(U);
  for (int u = 0; u < U; ++u)
    outLabel[u] = node[u] == BinaryCut::kSink     ? alpha
                  : node[u] == BinaryCut::kSource ? src[u]
                  : side[node[u]]                  ? alpha
                                                   : src[u];
  return bound;
}

}  // namespace tandem::placement::detail

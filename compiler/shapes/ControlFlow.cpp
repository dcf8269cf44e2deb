// Shape functions of the control-flow ops If-16, Loop-16 and Scan-16: result types come from the
// subgraphs' compiled plans (runtime/ControlFlow.h says how operands map onto their inputs).
// Also Tandem's DynamicRegion, whose body plan gives its result types, dims it cannot know
// before run time unknown (runtime/DynamicRegion.h).
#include "compiler/shapes/ShapeFns.h"
#include "runtime/ControlFlow.h"

namespace tandem::shapes {
namespace {

std::string typeStr(DType t, const std::vector<int64_t>& dims) {
  return std::string(dtypeName(t)) + dimsStr(dims);
}

// Subgraph input `k` must take operand `i` as it is (an unknown dim on either side matches any).
std::string checkInput(const Ctx& c, const std::string& graph, const SubgraphSignature& sig,
                       size_t k, size_t i, const std::string& what) {
  const SubgraphValueType& want = sig.inputs[k];
  const OperandInfo& got = c.in[i];
  bool ok = got.present && got.dtype == want.dtype && got.dims.size() == want.dims.size();
  for (size_t d = 0; ok && d < want.dims.size(); ++d)
    ok = got.dims[d] == kUnknownDim || want.dims[d] == kUnknownDim || got.dims[d] == want.dims[d];
  if (ok) return "";
  return c.fail(graph + " input " + std::to_string(k) + " (" + what + ") was compiled for " +
                subgraphTypeString(want) + " but " + operandLabel(i, nullptr) + " is " +
                (got.present ? typeStr(got.dtype, got.dims) : std::string("absent")));
}

std::string readGraph(const Ctx& c, const char* name, plan::Plan* p, SubgraphSignature* sig) {
  Status st = parseSubgraph(c.attrs, name, p, sig);
  return st.isOk() ? "" : c.fail(st.message());
}

// Operand i as a scalar (one element) of an integer or bool dtype, when it is a constant.
std::optional<int64_t> scalarValue(const Ctx& c, size_t i) {
  if (!c.has(i) || !c.in[i].value || c.in[i].value->numel() != 1) return std::nullopt;
  const Tensor& t = *c.in[i].value;
  switch (t.dtype()) {
    case DType::Bool: return *t.data<uint8_t>() != 0;
    case DType::I64: return *t.data<int64_t>();
    case DType::I32: return *t.data<int32_t>();
    default: return std::nullopt;
  }
}

}  // namespace

std::string inferIf(const Ctx& c) {
  if (c.in.empty() || !c.has(0)) return c.fail("needs input 0 (cond)");
  if (c.in[0].dtype != DType::Bool || (!c.in[0].dims.empty() && c.in[0].dims != std::vector<int64_t>{1}))
    return c.fail("input 0 (cond) must be a bool scalar, is " + typeStr(c.in[0].dtype, c.in[0].dims));
  plan::Plan thenPlan, elsePlan;
  SubgraphSignature thenSig, elseSig;
  if (auto e = readGraph(c, "then_branch", &thenPlan, &thenSig); !e.empty()) return e;
  if (auto e = readGraph(c, "else_branch", &elsePlan, &elseSig); !e.empty()) return e;
  const std::pair<const char*, const SubgraphSignature*> branches[] = {{"then_branch", &thenSig},
                                                                       {"else_branch", &elseSig}};
  for (const auto& [name, sig] : branches) {
    if (sig->outputs.size() != c.numResults)
      return c.fail(std::string(name) + " has " + std::to_string(sig->outputs.size()) +
                    " outputs but the op has " + std::to_string(c.numResults));
    if (sig->inputs.size() != c.in.size() - 1)
      return c.fail(std::string(name) + " takes " + std::to_string(sig->inputs.size()) +
                    " outer values but the op passes " + std::to_string(c.in.size() - 1));
    for (size_t k = 0; k < sig->inputs.size(); ++k)
      if (auto e = checkInput(c, name, *sig, k, k + 1, "captured value"); !e.empty()) return e;
  }
  std::optional<int64_t> cond = scalarValue(c, 0);
  for (size_t k = 0; k < c.numResults; ++k) {
    const SubgraphValueType& t = thenSig.outputs[k];
    const SubgraphValueType& e = elseSig.outputs[k];
    if (t.dtype != e.dtype)
      return c.fail("output " + std::to_string(k) + " is " + subgraphTypeString(t) +
                    " in then_branch but " + subgraphTypeString(e) + " in else_branch");
    if (t.dims == e.dims || cond) {
      const SubgraphValueType& pick = !cond || *cond ? t : e;
      c.set(k, pick.dtype, pick.dims);
      continue;
    }
    if (t.dims.size() != e.dims.size())
      return c.fail("output " + std::to_string(k) + " is " + subgraphTypeString(t) +
                    " in then_branch but " + subgraphTypeString(e) +
                    " in else_branch (a different rank), and input 0 (cond) is not a constant "
                    "that would pick one");
    // The branch taken at run time sizes the dims they disagree on: unknown until then, which
    // puts the If in a dynamic region (--tandem-outline-dynamic, passes/Passes.td).
    std::vector<int64_t> dims = t.dims;
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d] != e.dims[d]) dims[d] = kUnknownDim;
    c.set(k, t.dtype, dims);
  }
  return "";
}

std::string inferLoop(const Ctx& c) {
  plan::Plan body;
  SubgraphSignature sig;
  if (auto e = readGraph(c, "body", &body, &sig); !e.empty()) return e;
  const int64_t captures = c.attrs.getInt("num_captures", 0);
  if (c.in.size() < 2 || captures < 0 || (int64_t)c.in.size() - 2 < captures)
    return c.fail("needs inputs M, cond, the loop-carried values and num_captures outer values");
  const size_t n = c.in.size() - 2 - captures;  // loop-carried values
  if (c.numResults < n)
    return c.fail("has " + std::to_string(n) + " loop-carried values but only " +
                  std::to_string(c.numResults) + " results");
  const size_t s = c.numResults - n;  // scan outputs
  if (sig.inputs.size() != 2 + n + captures)
    return c.fail("body takes " + std::to_string(sig.inputs.size()) + " inputs but the op passes " +
                  std::to_string(2 + n + captures) + " (iteration number, condition, " +
                  std::to_string(n) + " loop-carried, " + std::to_string(captures) + " outer)");
  if (sig.outputs.size() != 1 + n + s)
    return c.fail("body has " + std::to_string(sig.outputs.size()) + " outputs but the op needs " +
                  std::to_string(1 + n + s) + " (condition, " + std::to_string(n) +
                  " loop-carried, " + std::to_string(s) + " scan outputs)");
  if (c.has(0) && (c.in[0].dtype != DType::I64 || !(c.in[0].dims.empty() || c.in[0].dims == std::vector<int64_t>{1})))
    return c.fail("input 0 (M) must be an i64 scalar, is " + typeStr(c.in[0].dtype, c.in[0].dims));
  if (c.has(1) && (c.in[1].dtype != DType::Bool || !(c.in[1].dims.empty() || c.in[1].dims == std::vector<int64_t>{1})))
    return c.fail("input 1 (cond) must be a bool scalar, is " + typeStr(c.in[1].dtype, c.in[1].dims));
  auto scalarType = [&](const SubgraphValueType& t, DType dt) {
    return t.dtype == dt && (t.dims.empty() || t.dims == std::vector<int64_t>{1});
  };
  if (!scalarType(sig.inputs[0], DType::I64) || !scalarType(sig.inputs[1], DType::Bool) ||
      !scalarType(sig.outputs[0], DType::Bool))
    return c.fail("body must take (i64 iteration number, bool condition, ...) and return a bool "
                  "condition first");
  for (size_t k = 0; k < n + captures; ++k)
    if (auto e = checkInput(c, "body", sig, 2 + k, 2 + k, k < n ? "loop-carried" : "captured value");
        !e.empty())
      return e;
  for (size_t k = 0; k < n; ++k) {
    const SubgraphValueType& out = sig.outputs[1 + k];
    if (body.eager()) {
      // An eager body (runtime/ControlFlow.h) may reshape a loop-carried value each iteration:
      // a dim is known only where the body gives it the initial value's size (or no iteration
      // runs and it keeps that size).
      if (out.dtype != c.in[2 + k].dtype || out.dims.size() != c.in[2 + k].dims.size())
        return c.fail("loop-carried value " + std::to_string(k) + " enters the body as " +
                      typeStr(c.in[2 + k].dtype, c.in[2 + k].dims) + " but leaves it as " +
                      subgraphTypeString(out) + " (a loop-carried value keeps its dtype and rank)");
      std::vector<int64_t> dims = c.in[2 + k].dims;
      for (size_t d = 0; d < dims.size(); ++d)
        if (out.dims[d] != dims[d]) dims[d] = kUnknownDim;
      c.set(k, out.dtype, dims);
      continue;
    }
    if (out.dtype != c.in[2 + k].dtype || out.dims != sig.inputs[2 + k].dims)
      return c.fail("loop-carried value " + std::to_string(k) + " enters the body as " +
                    subgraphTypeString(sig.inputs[2 + k]) + " but leaves it as " +
                    subgraphTypeString(out) +
                    " (plans have static shapes: a loop-carried value must keep its type)");
    c.set(k, out.dtype, out.dims);
  }
  if (s == 0) return "";
  std::optional<int64_t> m = scalarValue(c, 0), cond = scalarValue(c, 1);
  bool mKnown = !c.has(0) || m.has_value(), condKnown = !c.has(1) || cond.has_value();
  std::optional<bool> condBool;
  if (cond) condBool = *cond != 0;
  int64_t iterations = plannedLoopIterations(loopConditionOf(body), m, mKnown, condBool, condKnown);
  // Unknown iterations (M or cond computed, or a condition the body computes) leave the scan
  // outputs' length unknown: the Loop then runs in a dynamic region and its kernel sizes them.
  if (iterations < 0) iterations = kUnknownDim;
  for (size_t k = 0; k < s; ++k) {
    const SubgraphValueType& out = sig.outputs[1 + n + k];
    std::vector<int64_t> dims = {iterations};
    dims.insert(dims.end(), out.dims.begin(), out.dims.end());
    c.set(n + k, out.dtype, dims);
  }
  return "";
}

std::string inferScan(const Ctx& c) {
  plan::Plan body;
  SubgraphSignature sig;
  if (auto e = readGraph(c, "body", &body, &sig); !e.empty()) return e;
  const int64_t m = c.attrs.getInt("num_scan_inputs", 0);
  const int64_t captures = c.attrs.getInt("num_captures", 0);
  if (m < 1 || captures < 0 || (int64_t)c.in.size() < m + captures)
    return c.fail("needs num_scan_inputs >= 1 scan inputs (has " + std::to_string(m) +
                  ") and num_captures outer values among its " + std::to_string(c.in.size()) +
                  " inputs");
  const size_t n = c.in.size() - m - captures;  // state variables
  if (c.numResults < n)
    return c.fail("has " + std::to_string(n) + " state variables but only " +
                  std::to_string(c.numResults) + " results");
  const size_t s = c.numResults - n;
  if (sig.inputs.size() != n + m + captures)
    return c.fail("body takes " + std::to_string(sig.inputs.size()) + " inputs but the op passes " +
                  std::to_string(n + m + captures) + " (" + std::to_string(n) + " state, " +
                  std::to_string(m) + " scan, " + std::to_string(captures) + " outer)");
  if (sig.outputs.size() != n + s)
    return c.fail("body has " + std::to_string(sig.outputs.size()) + " outputs but the op needs " +
                  std::to_string(n + s) + " (" + std::to_string(n) + " state, " +
                  std::to_string(s) + " scan outputs)");
  auto axesOf = [&](const char* name, size_t count) -> std::vector<int64_t> {
    std::vector<int64_t> a = c.attrs.getInts(name);
    if (a.empty()) a.assign(count, 0);
    return a;
  };
  std::vector<int64_t> inAxes = axesOf("scan_input_axes", m), outAxes = axesOf("scan_output_axes", s);
  if (inAxes.size() != (size_t)m || outAxes.size() != s)
    return c.fail("scan_input_axes / scan_output_axes must have one entry per scan input / output");
  for (const char* dirs : {"scan_input_directions", "scan_output_directions"})
    for (int64_t d : c.attrs.getInts(dirs))
      if (d != 0 && d != 1) return c.fail(std::string(dirs) + " entries must be 0 or 1");
  int64_t length = kUnknownDim;
  for (int64_t j = 0; j < m; ++j) {
    const OperandInfo& x = c.in[n + j];
    int64_t axis;
    if (auto e = normAxis(c, inAxes[j], x.dims.size(), "scan_input_axes entry", &axis); !e.empty())
      return e;
    int64_t len = x.dims[axis];
    if (length != kUnknownDim && len != length)
      return c.fail("scan inputs have different lengths along their scan axes (" +
                    std::to_string(length) + " and " + std::to_string(len) + ")");
    length = len;
    std::vector<int64_t> slice = x.dims;
    slice.erase(slice.begin() + axis);
    const SubgraphValueType& want = sig.inputs[n + j];
    if (want.dtype != x.dtype || want.dims != slice)
      return c.fail("body input " + std::to_string(n + j) + " (scan slice) was compiled for " +
                    subgraphTypeString(want) + " but a slice of input " + std::to_string(n + j) +
                    " is " + typeStr(x.dtype, slice));
  }
  for (size_t k = 0; k < n; ++k)
    if (auto e = checkInput(c, "body", sig, k, k, "state"); !e.empty()) return e;
  for (int64_t k = 0; k < captures; ++k)
    if (auto e = checkInput(c, "body", sig, n + m + k, n + m + k, "captured value"); !e.empty())
      return e;
  for (size_t k = 0; k < n; ++k) {
    const SubgraphValueType& out = sig.outputs[k];
    if (out.dtype != sig.inputs[k].dtype || out.dims != sig.inputs[k].dims)
      return c.fail("state variable " + std::to_string(k) + " enters the body as " +
                    subgraphTypeString(sig.inputs[k]) + " but leaves it as " +
                    subgraphTypeString(out) + " (a state variable must keep its type)");
    c.set(k, out.dtype, out.dims);
  }
  for (size_t k = 0; k < s; ++k) {
    const SubgraphValueType& out = sig.outputs[n + k];
    int64_t axis;
    if (auto e = normAxis(c, outAxes[k], out.dims.size() + 1, "scan_output_axes entry", &axis);
        !e.empty())
      return e;
    std::vector<int64_t> dims = out.dims;
    dims.insert(dims.begin() + axis, length);
    c.set(n + k, out.dtype, dims);
  }
  return "";
}

std::string inferDynamicRegion(const Ctx& c) {
  plan::Plan body;
  SubgraphSignature sig;
  if (auto e = readGraph(c, "body", &body, &sig); !e.empty()) return e;
  if (sig.inputs.size() != c.in.size())
    return c.fail("body takes " + std::to_string(sig.inputs.size()) + " inputs but the op has " +
                  std::to_string(c.in.size()) + " operands");
  if (sig.outputs.size() != c.numResults)
    return c.fail("body has " + std::to_string(sig.outputs.size()) + " outputs but the op has " +
                  std::to_string(c.numResults) + " results");
  for (size_t k = 0; k < c.in.size(); ++k)
    if (auto e = checkInput(c, "body", sig, k, k, "outer value"); !e.empty()) return e;
  for (size_t k = 0; k < c.numResults; ++k) c.set(k, sig.outputs[k].dtype, sig.outputs[k].dims);
  return "";
}

}  // namespace tandem::shapes

// Shape functions of the recurrent ops RNN-14, GRU-14 and LSTM-14 (layout 0 and 1).
#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {
namespace {

bool agree(int64_t a, int64_t b) { return a == kUnknownDim || b == kUnknownDim || a == b; }

// Checks operand i is present-or-absent with shape `want` (kUnknownDim entries match anything).
std::string checkShape(const Ctx& c, size_t i, const std::vector<const char*>& names,
                       const std::vector<int64_t>& want) {
  if (!c.has(i)) return "";
  const auto& d = c.in[i].dims;
  bool ok = d.size() == want.size();
  for (size_t k = 0; ok && k < d.size(); ++k) ok = agree(d[k], want[k]);
  if (!ok)
    return c.fail(operandLabel(i, names[i]) + " must have shape " + dimsStr(want) + ", got " +
                  dimsStr(d));
  return "";
}

}  // namespace

std::string inferRecurrent(const Ctx& c) {
  // X [seq, batch, input] (layout 1: [batch, seq, input]); W [dirs, g*H, input]; R [dirs, g*H, H];
  // optional B [dirs, 2*g*H], sequence_lens [batch] i32, initial_h [dirs, batch, H] (layout 1:
  // [batch, dirs, H]); LSTM also initial_c like initial_h and P [dirs, 3*H]. g = 1 (RNN), 3 (GRU),
  // 4 (LSTM). Results Y [seq, dirs, batch, H] (layout 1: [batch, seq, dirs, H]), Y_h and (LSTM)
  // Y_c like initial_h.
  const bool lstm = c.op == "LSTM";
  const int64_t g = c.op == "RNN" ? 1 : c.op == "GRU" ? 3 : 4;
  static const std::vector<const char*> names = {"X", "W", "R", "B", "sequence_lens",
                                                 "initial_h", "initial_c", "P"};
  if (auto e = checkArity(c, 3, lstm ? 8 : 6, 1, lstm ? 3 : 2, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  for (size_t i : {1, 2, 3, 5, 6, 7})
    if (i < c.in.size() && c.has(i))
      if (auto e = checkSameDType(c, i, 0, names); !e.empty()) return e;
  if (c.has(4))
    if (auto e = checkDTypeIn(c, 4, {DType::I32}, names); !e.empty()) return e;
  const std::string dir = c.attrs.getString("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return c.fail("attribute direction='" + dir + "' is not one of forward, reverse, bidirectional");
  const int64_t layout = c.attrs.getInt("layout", 0);
  if (layout != 0 && layout != 1)
    return c.fail("attribute layout=" + std::to_string(layout) + " must be 0 or 1");
  const int64_t dirs = dir == "bidirectional" ? 2 : 1;
  const auto& x = c.in[0].dims;
  if (x.size() != 3)
    return c.fail("input 0 (X) must be 3-D " +
                  std::string(layout ? "[batch, seq, input]" : "[seq, batch, input]") + ", got " +
                  dimsStr(x));
  const int64_t seq = layout ? x[1] : x[0], batch = layout ? x[0] : x[1], in = x[2];
  const auto& r = c.in[2].dims;
  int64_t h = c.attrs.getInt("hidden_size", r.size() == 3 ? r[2] : kUnknownDim);
  if (h != kUnknownDim && h < 1)
    return c.fail("attribute hidden_size=" + std::to_string(h) + " must be >= 1");
  const int64_t gh = h == kUnknownDim ? kUnknownDim : g * h;
  if (auto e = checkShape(c, 1, names, {dirs, gh, in}); !e.empty()) return e;
  if (auto e = checkShape(c, 2, names, {dirs, gh, h}); !e.empty()) return e;
  if (auto e = checkShape(c, 3, names, {dirs, gh == kUnknownDim ? kUnknownDim : 2 * gh});
      !e.empty())
    return e;
  if (auto e = checkShape(c, 4, names, {batch}); !e.empty()) return e;
  const std::vector<int64_t> state =
      layout ? std::vector<int64_t>{batch, dirs, h} : std::vector<int64_t>{dirs, batch, h};
  if (auto e = checkShape(c, 5, names, state); !e.empty()) return e;
  if (lstm) {
    if (auto e = checkShape(c, 6, names, state); !e.empty()) return e;
    if (auto e = checkShape(c, 7, names, {dirs, h == kUnknownDim ? kUnknownDim : 3 * h});
        !e.empty())
      return e;
  }
  const DType t = c.in[0].dtype;
  c.set(0, t, layout ? std::vector<int64_t>{batch, seq, dirs, h}
                     : std::vector<int64_t>{seq, dirs, batch, h});
  for (size_t i = 1; i < c.numResults; ++i) c.set(i, t, state);
  return "";
}

}  // namespace tandem::shapes

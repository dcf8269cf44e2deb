// Test helper: the attributes of a "Fused" step (a tandem.fused in the plan), in the encoding of
// runtime/cpu/ref/Fused.h, for the CPU and CUDA fused-kernel tests.
#pragma once

#include <string>
#include <vector>

#include "runtime/Attr.h"

namespace tandem {

/// Body op types `ops`; each op's operands (k >= 0: step input k, -1: absent, -2 - j: body op
/// j's result); the body op each step output comes from.
inline AttrMap fusedAttrs(const std::string& kind, std::vector<std::string> ops,
                          std::vector<std::vector<int64_t>> operands,
                          std::vector<int64_t> outputsFrom) {
  AttrMap a;
  a.set("kind", Attr::ofString(kind));
  std::vector<int64_t> counts, flat;
  for (auto& o : operands) {
    counts.push_back((int64_t)o.size());
    flat.insert(flat.end(), o.begin(), o.end());
  }
  a.set("ops", Attr::ofStrings(std::move(ops)));
  a.set("op_input_counts", Attr::ofInts(counts));
  a.set("op_inputs", Attr::ofInts(flat));
  std::vector<int64_t> from;
  for (int64_t j : outputsFrom) from.push_back(-2 - j);
  a.set("outputs_from", Attr::ofInts(from));
  return a;
}

}  // namespace tandem

// The op table's rows as data (runtime/OpTable.h) and the lookup by ONNX name.
#include "runtime/OpTable.h"

#include <algorithm>
#include <array>

namespace tandem {

namespace {

constexpr OpInfo kOps[] = {
#define TANDEM_OP(Name, since, shapeFn, work, flops, flags) \
  {#Name, since, OpWorkKind::work, flops, flags, nullptr},
#define TANDEM_MATH_OP(Name, since, shapeFn, work, flops, flags, formula) \
  {#Name, since, OpWorkKind::work, flops, flags, #formula},
#include "runtime/core/OpTable.def"
};
constexpr size_t kNumOps = sizeof(kOps) / sizeof(kOps[0]);

// Row indices sorted by name, for binary search; built once.
const std::array<uint16_t, kNumOps>& byName() {
  static const std::array<uint16_t, kNumOps> order = [] {
    std::array<uint16_t, kNumOps> o{};
    for (size_t i = 0; i < kNumOps; ++i) o[i] = (uint16_t)i;
    std::sort(o.begin(), o.end(), [](uint16_t a, uint16_t b) {
      return std::string_view(kOps[a].name) < std::string_view(kOps[b].name);
    });
    return o;
  }();
  return order;
}

}  // namespace

const OpInfo* findOp(std::string_view onnxName) {
  const auto& order = byName();
  auto it = std::lower_bound(order.begin(), order.end(), onnxName, [](uint16_t i, std::string_view n) {
    return std::string_view(kOps[i].name) < n;
  });
  if (it == order.end() || kOps[*it].name != onnxName) return nullptr;
  return &kOps[*it];
}

const OpInfo* allOps(size_t* count) {
  *count = kNumOps;
  return kOps;
}

}  // namespace tandem

// Philox4x32-10, the counter-based random number generator of Salmon et al., "Parallel Random
// Numbers: As Easy as 1, 2, 3" (SC 2011), and the dropout mask Tandem draws from it. Header-only,
// no dependencies: the same arithmetic runs in the CPU kernels and can be pasted into generated
// CUDA code, so a mask is the same bits on every device and any thread count.
#pragma once
#include <array>
#include <cstdint>

namespace tandem {

/// Four 32-bit counter words and two key words in, four pseudo-random words out; a pure function
/// (Random123's philox4x32_R<10>). Known answers: counter 0, key 0 gives 6627e8d5 e169c58d
/// bc57ac4c 9b00dbd8 (Random123 tests/kat_vectors).
inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    const uint64_t p0 = (uint64_t)kM0 * c[0];
    const uint64_t p1 = (uint64_t)kM1 * c[2];
    c = {(uint32_t)(p1 >> 32) ^ c[1] ^ k[0], (uint32_t)p1, (uint32_t)(p0 >> 32) ^ c[3] ^ k[1],
         (uint32_t)p0};
  }
  return c;
}

/// The dropout mask of one Dropout op, element by element, independent of how elements are
/// split among threads or devices. Element i uses word i % 4 of
///   philox4x32_10(counter = {block lo, block hi, stream, step}, key = {seed lo, seed hi}),
/// block = i / 4, and is kept when that word is >= threshold = floor(ratio * 2^32), i.e. when a
/// uniform draw u in [0, 1) (u = word / 2^32) is >= ratio, as ONNX Dropout's reference keeps
/// elements (with numpy's generator instead). `stream` tells apart ops sharing a seed; `step`
/// is the training step (Dropout's optional `counter` operand, mod 2^32; 0 when absent), so
/// each step of a training plan draws a new mask.
struct DropoutMask {
  uint64_t seed = 0;
  uint32_t stream = 0;
  uint32_t step = 0;
  uint32_t threshold = 0;  // ratio * 2^32; ratio 0 keeps every element

  /// `ratio` in [0, 1).
  static uint32_t thresholdFor(double ratio) {
    const double t = ratio * 4294967296.0;
    return t <= 0 ? 0u : t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
  }
  /// The four random words of elements 4*block .. 4*block + 3.
  std::array<uint32_t, 4> words(uint64_t block) const {
    return philox4x32_10({(uint32_t)block, (uint32_t)(block >> 32), stream, step},
                         {(uint32_t)seed, (uint32_t)(seed >> 32)});
  }
  /// Whether element i is kept (one Philox call; loops should call words() once per 4).
  bool keep(uint64_t i) const { return words(i / 4)[i % 4] >= threshold; }
};

/// FNV-1a, 32 bits: a stable stream id from a name (the op's node name).
inline uint32_t fnv1a32(const char* s, std::size_t n) {
  uint32_t h = 2166136261u;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h;
}

}  // namespace tandem

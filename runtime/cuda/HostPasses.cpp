// The host-side halves of CUDA kernels (runtime/cuda/HostPasses.h): the NonMaxSuppression walk
// and the ONNX -> cuDNN recurrent weight repacking.
#include "runtime/cuda/HostPasses.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

namespace tandem {
namespace cuda {

void nmsSelect(const float* scores, const uint64_t* mask, int64_t batches, int64_t classes, int64_t n,
               int64_t maxPerClass, bool hasScoreThreshold, float scoreThreshold, std::vector<int64_t>* selected) {
  selected->clear();
  if (maxPerClass <= 0) return;
  const int64_t words = nmsMaskWords(n);
  std::vector<int64_t> order;
  std::vector<uint64_t> removed(words);
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores + (b * classes + c) * n;
      order.clear();
      for (int64_t i = 0; i < n; ++i)
        if (!hasScoreThreshold || s[i] > scoreThreshold) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      // A candidate is suppressed when some kept box's row has its bit: the reference's "IoU
      // with a box already kept exceeds the threshold", with every kept row OR-ed in once.
      std::fill(removed.begin(), removed.end(), 0);
      int64_t kept = 0;
      for (int64_t i : order) {
        if (kept >= maxPerClass) break;
        if (removed[i / 64] >> (i % 64) & 1) continue;
        selected->insert(selected->end(), {b, c, i});
        ++kept;
        const uint64_t* row = mask + (b * n + i) * words;
        for (int64_t w = 0; w < words; ++w) removed[w] |= row[w];
      }
    }
}

int recurrentGates(RecurrentCell c) { return c == RecurrentCell::Rnn ? 1 : c == RecurrentCell::Gru ? 3 : 4; }

int onnxGateOfCudnnLayer(RecurrentCell c, int linLayerId) {
  const int G = recurrentGates(c);
  if (linLayerId < 0 || linLayerId >= 2 * G) return -1;
  static const int lstm[4] = {0, 2, 3, 1};  // cuDNN i, f, g, o -> ONNX i, o, f, c
  static const int gru[3] = {1, 0, 2};      // cuDNN r, z, h -> ONNX z, r, h
  const int k = linLayerId % G;
  return c == RecurrentCell::Lstm ? lstm[k] : c == RecurrentCell::Gru ? gru[k] : 0;
}

Status packCudnnRnnWeights(RecurrentCell cell, int64_t dirs, int64_t H, int64_t I, const float* W, const float* R,
                           const float* B, const std::vector<CudnnRnnSlot>& slots, std::vector<float>* space) {
  const int G = recurrentGates(cell);
  if ((int64_t)slots.size() != dirs * 2 * G)
    return Status::error("cuDNN RNN weights: " + std::to_string(slots.size()) + " slots for " + std::to_string(dirs) +
                         " direction(s) of " + std::to_string(2 * G) + " linear layers");
  std::fill(space->begin(), space->end(), 0.f);
  const int64_t size = (int64_t)space->size();
  for (int64_t d = 0; d < dirs; ++d)
    for (int k = 0; k < 2 * G; ++k) {
      const CudnnRnnSlot& slot = slots[d * 2 * G + k];
      const bool recurrent = k >= G;
      const int64_t cols = recurrent ? H : I;
      const int64_t gate = onnxGateOfCudnnLayer(cell, k);
      if (slot.matrix < 0 || slot.matrix + H * cols > size || slot.bias < 0 || slot.bias + H > size)
        return Status::error("cuDNN RNN weights: linear layer " + std::to_string(k) + " of direction " +
                             std::to_string(d) + " lies outside the weight space");
      // ONNX keeps a gate's rows contiguous, row-major like cuDNN's matrix: one block copy.
      const float* src = (recurrent ? R + d * G * H * H : W + d * G * H * I) + gate * H * cols;
      std::memcpy(space->data() + slot.matrix, src, sizeof(float) * H * cols);
      if (B) {
        const float* bias = B + d * 2 * G * H + (recurrent ? G * H : 0) + gate * H;
        std::memcpy(space->data() + slot.bias, bias, sizeof(float) * H);
      }
    }
  return Status::ok();
}

}  // namespace cuda
}  // namespace tandem

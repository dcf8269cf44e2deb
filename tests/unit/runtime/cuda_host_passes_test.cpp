// The host-side halves of CUDA kernels (runtime/cuda/HostPasses.h) without a GPU: cuDNN's gate
// order against ONNX's, the weight repacking into a made-up weight-space layout, and the
// NonMaxSuppression walk over a hand-built suppression mask.
#include <gtest/gtest.h>

#include <numeric>

#include "runtime/cuda/HostPasses.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

// cuDNN (cudnnRNNMode_t): LSTM linear layers i, f, g(c), o; GRU r, z, h. ONNX: LSTM i, o, f, c;
// GRU z, r, h. Written out by hand, input ids then recurrent ids.
TEST(CudnnRnnGates, PermutationIsTheHandWrittenOne) {
  const int lstm[8] = {0, 2, 3, 1, 0, 2, 3, 1};
  for (int k = 0; k < 8; ++k) EXPECT_EQ(onnxGateOfCudnnLayer(RecurrentCell::Lstm, k), lstm[k]) << k;
  const int gru[6] = {1, 0, 2, 1, 0, 2};
  for (int k = 0; k < 6; ++k) EXPECT_EQ(onnxGateOfCudnnLayer(RecurrentCell::Gru, k), gru[k]) << k;
  EXPECT_EQ(onnxGateOfCudnnLayer(RecurrentCell::Rnn, 0), 0);
  EXPECT_EQ(onnxGateOfCudnnLayer(RecurrentCell::Rnn, 1), 0);
  EXPECT_EQ(onnxGateOfCudnnLayer(RecurrentCell::Rnn, 2), -1);
  EXPECT_EQ(onnxGateOfCudnnLayer(RecurrentCell::Lstm, 8), -1);
}

// W[d][g*H + h][i] = 1000 d + 100 g + 10 h + i (R likewise + 5000, B input half 100 d + 10 g + h,
// recurrent half + 50), so every copied element says where it came from. The slots put cuDNN's
// linear layers in reverse id order with a gap, as a real layout need not be ordered either.
TEST(CudnnRnnGates, PackingCopiesEachGateBlockToItsSlot) {
  const int64_t dirs = 2, H = 2, I = 3, G = 4;
  std::vector<float> W(dirs * G * H * I), R(dirs * G * H * H), B(dirs * 2 * G * H);
  for (int64_t d = 0; d < dirs; ++d)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < I; ++i) W[((d * G + g) * H + h) * I + i] = 1000 * d + 100 * g + 10 * h + i;
        for (int64_t i = 0; i < H; ++i) R[((d * G + g) * H + h) * H + i] = 5000 + 1000 * d + 100 * g + 10 * h + i;
        B[d * 2 * G * H + g * H + h] = 100 * d + 10 * g + h;
        B[d * 2 * G * H + G * H + g * H + h] = 50 + 100 * d + 10 * g + h;
      }
  std::vector<CudnnRnnSlot> slots(dirs * 2 * G);
  int64_t at = 7;  // a gap before the first block: untouched space stays 0
  for (int64_t d = dirs - 1; d >= 0; --d)
    for (int k = 2 * G - 1; k >= 0; --k) {
      const int64_t cols = k >= G ? H : I;
      slots[d * 2 * G + k].matrix = at;
      at += H * cols;
      slots[d * 2 * G + k].bias = at;
      at += H;
    }
  std::vector<float> space(at, -1.f);
  ASSERT_TRUE(packCudnnRnnWeights(RecurrentCell::Lstm, dirs, H, I, W.data(), R.data(), B.data(), slots, &space).isOk());
  for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(space[i], 0.f);
  // Direction 1, cuDNN's forget gate (id 1) is ONNX gate 2: W row h = 1, column 2.
  const CudnnRnnSlot& f1 = slots[1 * 8 + 1];
  EXPECT_EQ(space[f1.matrix + 1 * I + 2], 1000 + 200 + 10 + 2);
  EXPECT_EQ(space[f1.bias + 1], 100 + 20 + 1);
  // Direction 0, recurrent output gate (id 7) is ONNX gate 1 of R and of B's recurrent half.
  const CudnnRnnSlot& o0 = slots[7];
  EXPECT_EQ(space[o0.matrix + 0 * H + 1], 5000 + 100 + 0 + 1);
  EXPECT_EQ(space[o0.bias + 0], 50 + 10 + 0);
  // cuDNN's cell gate g (id 2) is ONNX c (gate 3).
  EXPECT_EQ(space[slots[2].matrix], 300);
  // Every element of every block, against the permutation.
  for (int64_t d = 0; d < dirs; ++d)
    for (int k = 0; k < 2 * G; ++k) {
      const bool rec = k >= G;
      const int64_t cols = rec ? H : I, g = onnxGateOfCudnnLayer(RecurrentCell::Lstm, k);
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < cols; ++i)
          EXPECT_EQ(space[slots[d * 8 + k].matrix + h * cols + i], (rec ? 5000 : 0) + 1000 * d + 100 * g + 10 * h + i);
        EXPECT_EQ(space[slots[d * 8 + k].bias + h], (rec ? 50 : 0) + 100 * d + 10 * g + h);
      }
    }
  // No B: zero biases.
  ASSERT_TRUE(packCudnnRnnWeights(RecurrentCell::Lstm, dirs, H, I, W.data(), R.data(), nullptr, slots, &space).isOk());
  EXPECT_EQ(space[f1.bias + 1], 0.f);
  EXPECT_EQ(space[f1.matrix + 1 * I + 2], 1000 + 200 + 10 + 2);
  // A slot past the space is an error, not a write out of bounds.
  slots[3].matrix = at;
  Status st = packCudnnRnnWeights(RecurrentCell::Lstm, dirs, H, I, W.data(), R.data(), B.data(), slots, &space);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("outside the weight space"), std::string::npos) << st.message();
}

TEST(CudnnRnnGates, GruBlocksFollowResetUpdateNew) {
  const int64_t H = 1, I = 1, G = 3;
  std::vector<float> W = {10, 11, 12}, R = {20, 21, 22}, B = {30, 31, 32, 40, 41, 42};  // ONNX z, r, h
  std::vector<CudnnRnnSlot> slots;
  for (int k = 0; k < 2 * G; ++k) slots.push_back({2 * k, 2 * k + 1});
  std::vector<float> space(4 * G);
  ASSERT_TRUE(packCudnnRnnWeights(RecurrentCell::Gru, 1, H, I, W.data(), R.data(), B.data(), slots, &space).isOk());
  // cuDNN r, z, h (input), r, z, h (recurrent): matrix then bias each.
  EXPECT_EQ(space, (std::vector<float>{11, 31, 10, 30, 12, 32, 21, 41, 20, 40, 22, 42}));
}

// Three boxes, 0 and 1 overlapping (0 suppresses 1 and 1 suppresses 0), box 2 apart; two
// classes with other score orders; a batch of its own.
TEST(NmsWalk, KeepsByScoreAndSuppressesThroughKeptRows) {
  const int64_t n = 3;
  std::vector<uint64_t> mask = {0b010, 0b001, 0b000,   // batch 0: rows of boxes 0, 1, 2
                                0b000, 0b000, 0b000};  // batch 1: nothing overlaps
  std::vector<float> scores = {0.9f, 0.8f, 0.1f,   // b0 c0: 0 kept, 1 suppressed, 2 kept
                               0.2f, 0.7f, 0.7f,   // b0 c1: 1 (tie with 2: lower index), 2, not 0
                               0.5f, 0.5f, 0.6f};  // b1 c0 (one class per batch below)
  std::vector<int64_t> sel;
  nmsSelect(scores.data(), mask.data(), 1, 2, n, 10, false, 0, &sel);
  EXPECT_EQ(sel, (std::vector<int64_t>{0, 0, 0, 0, 0, 2, 0, 1, 1, 0, 1, 2}));
  // At most 1 per class; a score threshold (strictly above) drops box 2 of class 0.
  nmsSelect(scores.data(), mask.data(), 1, 2, n, 1, true, 0.1f, &sel);
  EXPECT_EQ(sel, (std::vector<int64_t>{0, 0, 0, 0, 1, 1}));
  nmsSelect(scores.data(), mask.data(), 1, 2, n, 0, false, 0, &sel);
  EXPECT_TRUE(sel.empty());
  // Two batches of one class: batch 1 keeps all three, by score then index.
  std::vector<float> s2 = {0.9f, 0.8f, 0.1f, 0.5f, 0.5f, 0.6f};
  nmsSelect(s2.data(), mask.data(), 2, 1, n, 5, false, 0, &sel);
  EXPECT_EQ(sel, (std::vector<int64_t>{0, 0, 0, 0, 0, 2, 1, 0, 2, 1, 0, 0, 1, 0, 1}));
}

TEST(NmsWalk, MaskRowsSpanWords) {
  EXPECT_EQ(nmsMaskWords(0), 0);
  EXPECT_EQ(nmsMaskWords(64), 1);
  EXPECT_EQ(nmsMaskWords(65), 2);
  // 70 boxes: box 0 suppresses box 69 (word 1, bit 5) and nothing else.
  const int64_t n = 70, w = 2;
  std::vector<uint64_t> mask(n * w, 0);
  mask[0 * w + 1] = 1ull << 5;
  std::vector<float> scores(n);
  for (int64_t i = 0; i < n; ++i) scores[i] = float(n - i);
  std::vector<int64_t> sel;
  nmsSelect(scores.data(), mask.data(), 1, 1, n, 100, false, 0, &sel);
  ASSERT_EQ(sel.size(), 3u * 69);
  EXPECT_EQ(sel[3 * 68 + 2], 68);
}

}  // namespace

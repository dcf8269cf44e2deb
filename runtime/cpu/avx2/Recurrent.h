// ONNX RNN-14 / GRU-14 / LSTM-14 (layout 0, f32) for small batches with AVX2 + FMA: the input
// projection of every time step in one packed GEMM (Sgemm.h), then per step one GEMM of the
// batch's hidden states with the packed recurrence weights (for batch 1 a GEMV whose
// accumulators stay in registers) and the gate math over whole gate rows (Activation.h's
// logistic and tanh). Bidirectional ops run their two directions on two threads when given.
// Per step this costs about a third of oneDNN 2.6's RNN primitive at batch 1 (which pays
// several microseconds of fixed cost per cell); DnnlRecurrent.cpp offers both as variants.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/cpu/avx2/Sgemm.h"

namespace tandem {
namespace avx2 {

class RecurrentCell {
 public:
  enum class Kind { Rnn, Gru /* linear_before_reset 0 */, LbrGru /* 1 */, Lstm };
  /// RNN's activation (GRU and LSTM use ONNX's defaults: logistic gates, tanh candidates).
  enum class RnnActivation { Tanh, Logistic, Relu };
  struct Config {
    Kind kind = Kind::Lstm;
    int64_t T = 0, N = 0, C = 0, H = 0;  // seq_length, batch, input size, hidden size
    int64_t D = 1;                       // directions: 1, or 2 (bidirectional)
    bool reverse = false;                // D == 1: direction "reverse"
    RnnActivation rnnActivation = RnnActivation::Tanh;
  };
  /// Packs the ONNX weights (gate order as ONNX: LSTM i, o, f, c; GRU z, r, h): W [D, G*H, C],
  /// R [D, G*H, H], B [D, 2*G*H] or null (zeros), P [D, 3H] (LSTM peepholes i, o, f) or null.
  /// False when avx2::available() is false or a size is not positive.
  bool init(const Config& config, const float* W, const float* R, const float* B, const float* P);
  /// Floats of scratch run() needs.
  int64_t workspaceFloats() const;
  /// X [T, N, C]; h0, c0 [D, N, H] or null (zeros); outputs Y [T, D, N, H], Yh and Yc
  /// [D, N, H], each may be null (not written). `ws`: workspaceFloats() floats, 32-byte
  /// aligned. `threads` >= 1: the directions run in parallel, each single-threaded.
  void run(const float* X, const float* h0, const float* c0, float* Y, float* Yh, float* Yc,
           float* ws, int threads) const;

 private:
  struct Direction {
    PackedB w;        // K = C, N = G*H: the input projection
    PackedB r;        // K = H, N = G*H (GRU: N = 2H, the z and r gates)
    PackedB rh;       // GRU only: K = H, N = H, the candidate's recurrence on r * h
    std::vector<float> xBias;  // G*H: added to the input projection
    std::vector<float> hBias;  // G*H or empty: added to the recurrence (lbr GRU: Rb_h)
    std::vector<float> peep;   // 3H or empty
  };
  void runDirection(int64_t d, const float* X, const float* h0, const float* c0, float* Y,
                    float* Yh, float* Yc, float* ws) const;
  int64_t perDirectionFloats() const;

  Config c_;
  int64_t G_ = 1;
  std::vector<Direction> dirs_;
};

}  // namespace avx2
}  // namespace tandem

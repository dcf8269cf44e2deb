// 3x3 stride-1 convolution by Winograd's minimal filtering F(2x2, 3x3) (Lavin & Gray, "Fast
// Algorithms for Convolutional Neural Networks", CVPR 2016): 16 multiplies per 2x2 output tile
// and channel pair instead of 36, i.e. 2.25x fewer than direct convolution, on activations in
// oneDNN's 8-channel-blocked layout (nChw8c). The 16 per-position products are GEMMs over a
// prepacked transformed filter (Sgemm.h). AVX2 + FMA only (avx2::available()).
//
// F(2x2, 3x3) is chosen over F(4x4, 3x3) (4x fewer multiplies) for accuracy: its transforms use
// only 0, +-1 and +-1/2, so rounding stays at direct convolution's level.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/cpu/avx2/Sgemm.h"

namespace tandem {
namespace avx2 {

/// Shape of one convolution: input [N, C, H, W], weights [K, C, 3, 3], output [N, K, OH, OW]
/// with stride 1, dilation 1, group 1, and zero padding padTop / padLeft (bottom and right
/// padding follow from OH, OW: OH = H + padTop + padBottom - 2).
struct Conv3x3Shape {
  int64_t N = 0, C = 0, H = 0, W = 0, K = 0, OH = 0, OW = 0, padTop = 0, padLeft = 0;
};

class WinogradConv3x3 {
 public:
  /// Transforms and packs the filter (`weights`: [K, C, 3, 3] f32, ONNX layout) and keeps the
  /// bias ([K] f32, or null). Returns false when the shape is not supported: C or K not a
  /// multiple of 8, pads outside [0, 2], or OH/OW inconsistent with H/W and the pads.
  bool prepare(const Conv3x3Shape& s, const float* weights, const float* bias);

  /// dst = conv(src) + bias (+ dst's previous contents when accumulate: oneDNN's `sum`), then
  /// max(., 0) when relu. src: [N, C/8, H, W, 8] f32 (nChw8c), dst: [N, K/8, OH, OW, 8].
  /// Tiles are split among `threads` OpenMP threads; scratch is per thread and grows on
  /// demand (16 * tilesPerBlock * (C + K) floats).
  void run(const float* src, float* dst, bool accumulate, bool relu, int threads) const;

  const Conv3x3Shape& shape() const { return s_; }
  /// Output tiles per block: the GEMMs' row count.
  int64_t tilesPerBlock() const { return tb_; }

 private:
  // The three phases of one block of `tiles` tiles from tile0, each over a part of its range
  // (channel blocks, B panels, output channel blocks) so that threads can share a block.
  // scratch: V [16][tiles][C] then M [16][tiles][K].
  void inputPhase(const float* src, int64_t tile0, int64_t tiles, float* scratch, int64_t cb0,
                  int64_t cb1) const;
  void gemmPhase(int64_t tiles, float* scratch, int64_t panel0, int64_t panel1) const;
  void outputPhase(float* dst, int64_t tile0, int64_t tiles, const float* scratch,
                   bool accumulate, bool relu, int64_t kb0, int64_t kb1) const;

  Conv3x3Shape s_;
  int64_t tilesH_ = 0, tilesW_ = 0, tb_ = 0;
  std::vector<PackedB> u_;   // 16 transformed filters, each C x K
  std::vector<float> bias_;  // K floats (zeros without bias)
};

}  // namespace avx2
}  // namespace tandem

// 3x3 stride-1 convolution by Winograd's minimal filtering (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", CVPR 2016) on activations in oneDNN's 8-channel-blocked
// layout (nChw8c): F(4x4, 3x3), 36 multiplies per 4x4 output tile and channel pair (4x fewer
// than direct convolution), or F(2x2, 3x3), 16 per 2x2 tile (2.25x fewer). The per-position
// products are GEMMs over a prepacked transformed filter (Sgemm.h). AVX2 + FMA only
// (avx2::available()).
//
// Accuracy, against a direct sum in double (C input channels, 20x20, weights and inputs in
// [-1, 1], outputs up to 20-60): F(2x2) max abs error 0.5x that of a naive f32 loop (its
// transforms use only 0, +-1, +-1/2); F(4x4) (points 0, +-1, +-2) 5-7x: 6.8e-5 at C = 32,
// 1.6e-4 at 64, 5.3e-4 at 256, i.e. about 1e-5 of the output range. On ResNet-18 the model
// output's max abs error is 3.8e-6 (batch 1) and 7.2e-6 (batch 32).
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
  /// bias ([K] f32, or null). outputTile: 2 for F(2x2, 3x3), 4 for F(4x4, 3x3), 0 to choose
  /// by shape (see outputTile()). Returns false when the shape is not supported: C or K not a
  /// multiple of 8, pads outside [0, 2], OH/OW inconsistent with H/W and the pads, or another
  /// outputTile.
  bool prepare(const Conv3x3Shape& s, const float* weights, const float* bias,
               int outputTile = 0);

  /// dst = conv(src) + bias (+ dst's previous contents when accumulate: oneDNN's `sum`), then
  /// max(., 0) when relu. src: [N, C/8, H, W, 8] f32 (nChw8c), dst: [N, K/8, OH, OW, 8].
  /// Tiles are split among `threads` OpenMP threads; scratch is per thread and grows on
  /// demand ((m + 2)^2 * tilesPerBlock * (C + K) floats).
  void run(const float* src, float* dst, bool accumulate, bool relu, int threads) const;

  const Conv3x3Shape& shape() const { return s_; }
  /// Output tile edge m of F(m x m, 3x3): 2 or 4.
  int outputTile() const { return m_; }
  /// Output tiles per block: the GEMMs' row count.
  int64_t tilesPerBlock() const { return tb_; }

 private:
  // The three phases of one block of `tiles` tiles from tile0, each over a part of its range
  // (channel blocks, B panels, output channel blocks) so that threads can share a block.
  // scratch: V [P][tiles][C] then M [P][tiles][K], P = positions().
  void inputPhase(const float* src, int64_t tile0, int64_t tiles, float* scratch, int64_t cb0,
                  int64_t cb1) const;
  void gemmPhase(int64_t tiles, float* scratch, int64_t panel0, int64_t panel1) const;
  void outputPhase(float* dst, int64_t tile0, int64_t tiles, const float* scratch,
                   bool accumulate, bool relu, int64_t kb0, int64_t kb1) const;

  int alpha() const { return m_ + 2; }          // transformed patch edge
  int positions() const { return alpha() * alpha(); }  // 16 or 36 GEMMs per block

  Conv3x3Shape s_;
  int m_ = 2;
  int64_t tilesH_ = 0, tilesW_ = 0, tb_ = 0;
  std::vector<PackedB> u_;   // positions() transformed filters, each C x K
  std::vector<float> bias_;  // K floats (zeros without bias)
};

}  // namespace avx2
}  // namespace tandem

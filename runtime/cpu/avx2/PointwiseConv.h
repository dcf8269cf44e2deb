// 1x1 stride-1 convolution (a "pointwise" one: MobileNet's, RegNet's, DenseNet's bottlenecks,
// ResNet's projections at stride 1) as the packed AVX2 GEMM of Sgemm.h, read and written in the
// host's channel layout without a reorder: for one image of P = H * W positions, output
// [P x K] = input [P x C] * W^T, with input and output in nhwc (row-major, the whole batch one
// GEMM of N * P rows) or nChw8c (MatrixLayout {8, 8P} per image).
//
// Why: oneDNN 2.6's jit_1x1:avx2 ran RegNetX-400MF's 1x1 convolutions at 90-110 GFLOP/s where
// the packed GEMM runs 125-140 (AMD EPYC Zen 5 capped to AVX2, 1 thread: 32 -> 32 channels at
// 112 x 112, 0.291 ms against 0.197 ms). Chosen per step by measurement (runtime/Tuning.h:
// variant "pointwise-gemm" of Conv), so where oneDNN is faster it stays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cpu/avx2/GroupedConv.h"
#include "runtime/cpu/avx2/Sgemm.h"

namespace tandem {
namespace avx2 {

/// One 1x1 stride-1 unpadded ungrouped convolution: input [N, C, H, W], output [N, K, H, W].
struct PointwiseConvShape {
  int64_t N = 0, C = 0, K = 0, H = 0, W = 0;
};

/// True when the kernel can run `s` in `layout` on this host: AVX2 + FMA (avx2::available()),
/// nhwc, or nChw8c with C and K multiples of 8 (no channel padding); else false with *why.
bool pointwiseConvApplies(const PointwiseConvShape& s, ChannelLayout layout, std::string* why);

class PointwiseConv {
 public:
  /// Packs the filter (`weights`: [K, C, 1, 1] f32, ONNX layout) and keeps the bias ([K] f32,
  /// or null). False with *why as pointwiseConvApplies().
  bool prepare(const PointwiseConvShape& s, ChannelLayout layout, const float* weights,
               const float* bias, std::string* why);
  /// dst = conv(src) + bias, + dst's previous contents when accumulate (a residual sum), then
  /// max(., 0) when relu. src and dst in the layout given to prepare(), not overlapping.
  /// Images are split among `threads` OpenMP threads when there are at least as many images,
  /// else each image's GEMM is.
  void run(const float* src, float* dst, bool accumulate, bool relu, int threads) const;

 private:
  PointwiseConvShape s_;
  ChannelLayout layout_ = ChannelLayout::Nhwc;
  PackedB packed_;
  std::vector<float> bias_;
};

}  // namespace avx2
}  // namespace tandem

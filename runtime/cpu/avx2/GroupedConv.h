// Grouped 2-D convolution by direct summation on activations in the host's channel layout
// (nhwc, nChw8c or nChw16c), register-blocked over a row of output pixels: each step loads one
// vector of a group's output channels' weights for one input channel and tap, and multiplies it
// by that input channel's value at P consecutive output pixels (P accumulators; the input value
// broadcast), ONNX Runtime's MLAS NCHWc convolution scheme. AVX-512F (16 output channels per
// vector) or AVX2 + FMA (8), dispatched on the CPU's flags and TANDEM_MAX_CPU_ISA.
//
// Why: oneDNN 2.6 runs grouped convolutions with jit:avx512_core / jit:avx2, whose blocking
// suits wide groups. RegNetX-400MF's 2-group 32-channel 3x3 stride-2 convolution at 112x112,
// batch 32, took it 12.9 ms (AMD EPYC Zen 5, avx512_core, 1 thread, random data; ~70 GFLOP/s)
// and ONNX Runtime 5.8 ms. Chosen per step by measurement (runtime/Tuning.h: variant
// "grouped-direct" of Conv), so where oneDNN is faster it stays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {
namespace avx2 {

/// Activation layout of source and destination: channels-last, or channels blocked by 8 / 16
/// ([N, C/B, H, W, B], C a multiple of B).
enum class ChannelLayout { Nhwc, NChw8c, NChw16c };

/// One convolution: input [N, C, H, W], weights [K, C/G, KH, KW] (ONNX), output [N, K, OH, OW];
/// strides, dilations (ONNX's: 1 = dense) and the top/left zero padding (bottom and right
/// follow from OH, OW).
struct GroupedConvShape {
  int64_t N = 0, C = 0, H = 0, W = 0, K = 0, OH = 0, OW = 0, G = 1;
  int64_t KH = 1, KW = 1, strideH = 1, strideW = 1, dilationH = 1, dilationW = 1;
  int64_t padTop = 0, padLeft = 0;
};

/// The vector width (floats) the kernel would use for `s` in `layout` on this host: 16 with
/// AVX-512F, 8 with AVX2 + FMA; 0 with *why when it cannot run: a group's output channels not a
/// multiple of a vector, a blocked layout whose channel count is not a multiple of its block,
/// inconsistent sizes, or neither ISA available.
int groupedConvVectorWidth(const GroupedConvShape& s, ChannelLayout layout, std::string* why);

class GroupedConv {
 public:
  /// Packs the filter (`weights`: [K, C/G, KH, KW] f32, ONNX layout) per group and output
  /// vector, and keeps the bias ([K] f32, or null). False with *why as
  /// groupedConvVectorWidth().
  bool prepare(const GroupedConvShape& s, ChannelLayout layout, const float* weights,
               const float* bias, std::string* why);

  /// dst = conv(src) + bias (+ dst's previous contents when accumulate: oneDNN's `sum`), then
  /// max(., 0) when relu. src and dst in the layout given to prepare(); dst must not overlap
  /// src. Output rows are split among `threads` OpenMP threads.
  void run(const float* src, float* dst, bool accumulate, bool relu, int threads) const;

  /// Floats per vector: 16 (AVX-512F) or 8 (AVX2).
  int vectorWidth() const { return vl_; }
  const GroupedConvShape& shape() const { return s_; }

 private:
  GroupedConvShape s_;
  ChannelLayout layout_ = ChannelLayout::Nhwc;
  int vl_ = 0;
  std::vector<float> w_;        // [G][K/G/vl][KH][KW][C/G][vl]
  std::vector<float> bias_;     // K floats (zeros without bias)
  std::vector<int64_t> icOff_;  // [G][C/G]: offset of each input channel from a pixel's base
};

}  // namespace avx2
}  // namespace tandem

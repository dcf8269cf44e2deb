// Per-channel affine map y = x * scale[c] + shift[c], optionally followed by max(y, 0), over an
// activation in plain or channel-blocked layout: inference BatchNormalization (+ Relu) in one
// pass. oneDNN 2.6 runs an NCHW batch norm with its generic ncsp_bnorm (~10x slower than this
// loop on densenet121's pre-activation blocks) and fuses Relu only into its blocked kernels.
#pragma once

#include <cstdint>
#include <vector>

namespace tandem {
namespace avx2 {

/// How an [N, C, S] activation (S: the product of the spatial dims, 1 for [N, C]) is stored.
enum class ChannelLayout {
  Plain,         // [N][C][S] (row-major NCHW)
  ChannelsLast,  // [N][S][C] (nhwc)
  Blocked8,      // [N][C/8][S][8] (nChw8c; C a multiple of 8)
  Blocked16,     // [N][C/16][S][16] (nChw16c; C a multiple of 16)
};

/// dst = src * scale[c] + shift[c] (then ReLU when `relu`), f32, both in `layout`; src == dst is
/// allowed. scale and shift have C elements. Uses AVX2+FMA where available() (runtime/cpu/avx2/
/// Sgemm.h), scalar code otherwise; split over `threads` OpenMP threads.
void channelAffine(ChannelLayout layout, int64_t N, int64_t C, int64_t S, const float* scale,
                   const float* shift, bool relu, const float* src, float* dst, int threads);

/// The channel Concat of `srcs` followed by channelAffine, in one pass (DenseNet's
/// Concat -> BatchNormalization -> Relu: the concatenation is never written). Input i is an
/// [N, channels[i], S] activation in `layout`; dst has sum(channels) channels, in `layout` too,
/// and must not overlap an input. scale and shift have sum(channels) elements. Blocked layouts
/// need every channels[i] to be a multiple of the block (8 or 16).
void concatChannelAffine(ChannelLayout layout, int64_t N, int64_t S,
                         const std::vector<const float*>& srcs,
                         const std::vector<int64_t>& channels, const float* scale,
                         const float* shift, bool relu, float* dst, int threads);

/// Inference BatchNormalization's parameters as an affine map (ONNX BatchNormalization-15):
/// y = (x - mean) / sqrt(var + eps) * gamma + beta = x * scale + shift, with
/// scale = gamma / sqrt(var + eps) and shift = beta - mean * scale (the Conv fold's arithmetic).
/// Every array has C elements.
void foldBatchNorm(int64_t C, const float* gamma, const float* beta, const float* mean,
                   const float* var, float eps, float* scale, float* shift);

}  // namespace avx2
}  // namespace tandem

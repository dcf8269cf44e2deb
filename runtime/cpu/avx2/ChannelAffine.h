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

/// GroupNormalization-21 (InstanceNormalization-6: groups == C) of an f32 [N, C, S] activation
/// stored in `layout`, then SiLU y * sigmoid(y) when `silu` (a diffusion U-Net's GroupNorm +
/// SiLU in one step). Each (n, group) of C / groups channels gets its mean and biased variance
/// over Cg * S elements: per channel, the sums of d = x - x0 and d * d (x0 the channel's first
/// element, so a large mean does not cancel), in f32 over chunks of at most 4096 elements and
/// f64 across chunks, the channels combined by Chan's formula; then channel c of the group
/// y = (x - x0) * a + (bias[c] + (x0 - mean) * a), a = scale[c] / sqrt(var + eps) (the same
/// shift, so values around 1000 with a spread of 1 keep f32 precision). scale and bias have C
/// elements; groups >= 1 divides C; blocked layouts need C a multiple of the block. src == dst
/// is allowed. Uses AVX2+FMA where available() (SiLU: Activation.h's Swish), scalar code
/// otherwise; split over `threads` OpenMP threads.
void groupNorm(ChannelLayout layout, int64_t N, int64_t C, int64_t S, int64_t groups,
               const float* scale, const float* bias, float eps, bool silu, const float* src,
               float* dst, int threads);

/// Training-mode BatchNormalization-15's Y of an f32 [N, C, S] activation stored in `layout`:
/// each channel's mean and biased (population) variance over its N * S elements, by
/// groupNorm's shifted sums (per image and channel; Chan's formula across the images), then
/// y = (x - x0) * a + (bias[c] + (x0 - mean) * a), a = scale[c] / sqrt(var + eps), x0 the
/// channel's first element in each image. Writes the statistics to mean[c] and var[c] (C
/// doubles each: the running statistics are the caller's). scale and bias have C elements;
/// blocked layouts need C a multiple of the block; src == dst is allowed. AVX2+FMA where
/// available(), scalar otherwise; `threads` OpenMP threads.
void batchNormTraining(ChannelLayout layout, int64_t N, int64_t C, int64_t S, const float* scale,
                       const float* bias, float eps, const float* src, float* dst, double* mean,
                       double* var, int threads);

/// BatchNormalizationGrad (Tandem, autodiff) of an f32 plain [N, C, S] activation x with
/// incoming gradient dy: the batch statistics as batchNormTraining computes them, then per
/// channel dbias = sum(dy), dscale = sum(dy * xhat) (C doubles each) and dx = scale * rstd *
/// (dy - mean(dy) - xhat * mean(dy * xhat)), xhat = (x - mean) * rstd, in three passes (the
/// moments; the sums of dy and dy * (x - x0) per image and channel, f32 within 4096-element
/// chunks, f64 across; dx as one fused multiply-add per operand). dx may alias dy. AVX2+FMA
/// where available(), scalar otherwise; `threads` OpenMP threads.
void batchNormTrainingGrad(int64_t N, int64_t C, int64_t S, const float* x, const float* dy,
                           const float* scale, float eps, float* dx, double* dscale,
                           double* dbias, int threads);

/// Inference BatchNormalization's parameters as an affine map (ONNX BatchNormalization-15):
/// y = (x - mean) / sqrt(var + eps) * gamma + beta = x * scale + shift, with
/// scale = gamma / sqrt(var + eps) and shift = beta - mean * scale (the Conv fold's arithmetic).
/// Every array has C elements.
void foldBatchNorm(int64_t C, const float* gamma, const float* beta, const float* mean,
                   const float* var, float eps, float* scale, float* shift);

}  // namespace avx2
}  // namespace tandem

// 2-D max pooling on oneDNN's 8-channel-blocked activations (nChw8c), writing blocked or plain
// NCHW output. oneDNN 2.6's jit:avx2 max pool ran ~3x slower than ONNX Runtime's on ResNet-18's
// 3x3/2 pool here, and a pool feeding Flatten paid a separate blocked-to-plain reorder; this
// kernel reads each input vector once per window and writes the output in its final layout.
// AVX2 only (avx2::available()).
#pragma once

#include <cstdint>

namespace tandem {
namespace avx2 {

/// Input [N, C, H, W] as nChw8c (C a multiple of 8), output [N, C, OH, OW]; window kh x kw,
/// stride sh x sw, dilation 1, zero-based padding padTop / padLeft (padded positions are
/// ignored: ONNX MaxPool's -inf padding). Every window must hold at least one input element.
struct MaxPool2dShape {
  int64_t N = 0, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, padTop = 0, padLeft = 0;
};

/// dst: nChw8c when dstBlocked, else plain NCHW. Split over (n, channel block) among `threads`
/// OpenMP threads.
void maxPool2dBlocked8(const MaxPool2dShape& s, const float* src, float* dst, bool dstBlocked,
                       int threads);

}  // namespace avx2
}  // namespace tandem

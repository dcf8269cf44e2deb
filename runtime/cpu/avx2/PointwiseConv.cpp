// 1x1 convolution as the packed AVX2 GEMM over the host layout (see PointwiseConv.h).
#include "runtime/cpu/avx2/PointwiseConv.h"

#include <omp.h>

namespace tandem {
namespace avx2 {

bool pointwiseConvApplies(const PointwiseConvShape& s, ChannelLayout layout, std::string* why) {
  if (!available()) {
    *why = "no AVX2 + FMA (or TANDEM_MAX_CPU_ISA caps it)";
    return false;
  }
  if (s.N < 1 || s.C < 1 || s.K < 1 || s.H < 1 || s.W < 1) {
    *why = "empty shape";
    return false;
  }
  if (layout == ChannelLayout::NChw16c) {
    *why = "nChw16c activations (the GEMM reads 8-channel blocks)";
    return false;
  }
  if (layout == ChannelLayout::NChw8c && (s.C % 8 != 0 || s.K % 8 != 0)) {
    *why = "nChw8c with channels not a multiple of 8";
    return false;
  }
  return true;
}

bool PointwiseConv::prepare(const PointwiseConvShape& s, ChannelLayout layout,
                            const float* weights, const float* bias, std::string* why) {
  if (!pointwiseConvApplies(s, layout, why)) return false;
  s_ = s;
  layout_ = layout;
  // B[c][k] = W[k][c]: element (c, k) at weights[c * 1 + k * C].
  if (!packed_.pack(weights, s.C, s.K, 1, s.C)) {
    *why = "cannot pack the filter";
    return false;
  }
  if (bias) bias_.assign(bias, bias + s.K);
  else bias_.clear();
  return true;
}

void PointwiseConv::run(const float* src, float* dst, bool accumulate, bool relu,
                        int threads) const {
  GemmEpilogue ep;
  ep.bias = bias_.empty() ? nullptr : bias_.data();
  ep.accumulate = accumulate;
  ep.relu = relu;
  const int64_t P = s_.H * s_.W;
  if (layout_ == ChannelLayout::Nhwc) {
    sgemmParallel(s_.N * P, src, MatrixLayout{s_.C}, packed_, dst, MatrixLayout{s_.K}, ep,
                  threads);
    return;
  }
  const MatrixLayout image{8, 8 * P};
  if (threads > 1 && s_.N >= threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t n = 0; n < s_.N; ++n)
      sgemm(P, src + n * s_.C * P, image, packed_, dst + n * s_.K * P, image, ep, 0,
            packed_.panels());
    return;
  }
  for (int64_t n = 0; n < s_.N; ++n)
    sgemmParallel(P, src + n * s_.C * P, image, packed_, dst + n * s_.K * P, image, ep, threads);
}

}  // namespace avx2
}  // namespace tandem

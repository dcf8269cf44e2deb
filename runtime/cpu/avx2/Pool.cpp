// AVX2 2-D max pooling over nChw8c input.
#include "runtime/cpu/avx2/Pool.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#define TANDEM_AVX2 __attribute__((target("avx2,fma")))

namespace tandem {
namespace avx2 {

namespace {

// One output row (all OW positions of channel block cb at row oh) into row[ow * 8 + c].
TANDEM_AVX2 void poolRow(const MaxPool2dShape& s, const float* plane, int64_t oh, float* row) {
  const int64_t y0 = oh * s.sh - s.padTop;
  const int64_t ya = std::max<int64_t>(0, y0), yb = std::min(s.H, y0 + s.kh);
  for (int64_t ow = 0; ow < s.OW; ++ow) {
    const int64_t x0 = ow * s.sw - s.padLeft;
    const int64_t xa = std::max<int64_t>(0, x0), xb = std::min(s.W, x0 + s.kw);
    __m256 m = _mm256_set1_ps(-__builtin_inff());
    for (int64_t y = ya; y < yb; ++y) {
      const float* p = plane + (y * s.W) * 8;
      for (int64_t x = xa; x < xb; ++x) m = _mm256_max_ps(m, _mm256_loadu_ps(p + x * 8));
    }
    _mm256_storeu_ps(row + ow * 8, m);
  }
}

}  // namespace

void maxPool2dBlocked8(const MaxPool2dShape& s, const float* src, float* dst, bool dstBlocked,
                       int threads) {
  const int64_t CB = s.C / 8, planes = s.N * CB;
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1)
  {
    // One output row of 8-channel vectors before it is spread to 8 planes; kept per thread
    // across runs (no allocation per run).
    thread_local std::vector<float> row;
    if (!dstBlocked && row.size() < (size_t)s.OW * 8) row.resize(s.OW * 8);
#pragma omp for schedule(static)
    for (int64_t pc = 0; pc < planes; ++pc) {
      const int64_t n = pc / CB, cb = pc % CB;
      const float* plane = src + pc * s.H * s.W * 8;
      for (int64_t oh = 0; oh < s.OH; ++oh) {
        if (dstBlocked) {
          poolRow(s, plane, oh, dst + (pc * s.OH + oh) * s.OW * 8);
          continue;
        }
        // Plain output: the row's 8 channels go to 8 planes, each written contiguously.
        poolRow(s, plane, oh, row.data());
        for (int64_t c = 0; c < 8; ++c) {
          float* out = dst + ((n * s.C + cb * 8 + c) * s.OH + oh) * s.OW;
          for (int64_t ow = 0; ow < s.OW; ++ow) out[ow] = row[ow * 8 + c];
        }
      }
    }
  }
}

}  // namespace avx2
}  // namespace tandem

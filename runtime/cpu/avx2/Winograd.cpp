// Winograd F(2x2, 3x3) convolution on nChw8c activations: input transform, 16 GEMMs, output
// transform with bias / residual sum / ReLU, one block of output tiles at a time.
#include "runtime/cpu/avx2/Winograd.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#define TANDEM_AVX2 __attribute__((target("avx2,fma")))

namespace tandem {
namespace avx2 {

namespace {

// Scratch of one block (transformed inputs V and products M) stays around this size, so a
// block's V and M live in L2/L3 between the three phases; at least kMinTiles rows keep the
// GEMMs efficient and bound how often the (possibly large) transformed filter is re-read.
constexpr int64_t kBlockBytes = 768 << 10;
constexpr int64_t kMinTiles = 48, kMaxTiles = 256;

float* threadScratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.assign(floats, 0.f);
  return buf.data();
}

// Input transform of one 4x4 patch (8 channels per vector): V = B^T d B with
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
TANDEM_AVX2 inline void inputTransform(__m256 d[4][4], __m256 v[4][4]) {
  __m256 t[4][4];
  for (int j = 0; j < 4; ++j) {
    t[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
    t[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
    t[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
    t[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
  }
  for (int i = 0; i < 4; ++i) {
    v[i][0] = _mm256_sub_ps(t[i][0], t[i][2]);
    v[i][1] = _mm256_add_ps(t[i][1], t[i][2]);
    v[i][2] = _mm256_sub_ps(t[i][2], t[i][1]);
    v[i][3] = _mm256_sub_ps(t[i][1], t[i][3]);
  }
}

}  // namespace

bool WinogradConv3x3::prepare(const Conv3x3Shape& s, const float* weights, const float* bias) {
  if (s.N < 1 || s.C < 8 || s.K < 8 || s.C % 8 || s.K % 8) return false;
  const int64_t padBottom = s.OH - s.H - s.padTop + 2, padRight = s.OW - s.W - s.padLeft + 2;
  for (int64_t p : {s.padTop, s.padLeft, padBottom, padRight})
    if (p < 0 || p > 2) return false;
  if (s.OH < 1 || s.OW < 1) return false;
  s_ = s;
  tilesH_ = (s.OH + 1) / 2;
  tilesW_ = (s.OW + 1) / 2;
  const int64_t C = s.C, K = s.K;

  // U = G g G^T per (k, c), G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]; stored per
  // position xi as a C x K matrix (the GEMM's B).
  std::vector<float> u((size_t)16 * C * K);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) {
      const float* g = weights + (k * C + c) * 9;
      float gg[4][3];
      for (int j = 0; j < 3; ++j) {
        gg[0][j] = g[j];
        gg[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        gg[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        gg[3][j] = g[6 + j];
      }
      for (int i = 0; i < 4; ++i) {
        float r[4] = {gg[i][0], 0.5f * (gg[i][0] + gg[i][1] + gg[i][2]),
                      0.5f * (gg[i][0] - gg[i][1] + gg[i][2]), gg[i][2]};
        for (int j = 0; j < 4; ++j) u[((size_t)(i * 4 + j) * C + c) * K + k] = r[j];
      }
    }
  u_.clear();
  u_.resize(16);
  for (int xi = 0; xi < 16; ++xi)
    if (!u_[xi].pack(u.data() + (size_t)xi * C * K, C, K, K, 1)) return false;
  bias_.assign(K, 0.f);
  if (bias) std::copy(bias, bias + K, bias_.begin());
  tb_ = std::clamp<int64_t>(kBlockBytes / (64 * (C + K)), kMinTiles, kMaxTiles);
  return true;
}

void WinogradConv3x3::run(const float* src, float* dst, bool accumulate, bool relu,
                          int threads) const {
  const int64_t tiles = s_.N * tilesH_ * tilesW_;
  int64_t tb = std::min(tb_, tiles);
  // Enough blocks for every thread when the tiles are few (batch 1, small images).
  if (threads > 1) tb = std::min(tb, std::max<int64_t>(6, (tiles + threads - 1) / threads));
  const int64_t blocks = (tiles + tb - 1) / tb;
  const size_t scratchFloats = (size_t)16 * tb * (s_.C + s_.K);
#pragma omp parallel for num_threads(std::max(1, threads)) schedule(static) if (threads > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t t0 = b * tb;
    runBlock(src, dst, t0, std::min(tb, tiles - t0), threadScratch(scratchFloats), accumulate,
             relu);
  }
}

TANDEM_AVX2 void WinogradConv3x3::runBlock(const float* src, float* dst, int64_t tile0,
                                           int64_t tiles, float* scratch, bool accumulate,
                                           bool relu) const {
  const int64_t C = s_.C, K = s_.K, H = s_.H, W = s_.W, OH = s_.OH, OW = s_.OW;
  const int64_t perImage = tilesH_ * tilesW_;
  float* V = scratch;                    // [16][tiles][C]
  float* M = scratch + 16 * tiles * C;   // [16][tiles][K]
  const __m256 zero = _mm256_setzero_ps();

  // 1. Input transform: channel block outer so that neighbouring tiles share source lines.
  for (int64_t cb = 0; cb < C / 8; ++cb) {
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t id = tile0 + t, n = id / perImage, r = id % perImage;
      const int64_t y0 = (r / tilesW_) * 2 - s_.padTop, x0 = (r % tilesW_) * 2 - s_.padLeft;
      const float* plane = src + ((n * (C / 8) + cb) * H) * W * 8;
      __m256 d[4][4], v[4][4];
      for (int i = 0; i < 4; ++i) {
        const int64_t y = y0 + i;
        const bool rowIn = y >= 0 && y < H;
        for (int j = 0; j < 4; ++j) {
          const int64_t x = x0 + j;
          d[i][j] = rowIn && x >= 0 && x < W ? _mm256_loadu_ps(plane + (y * W + x) * 8) : zero;
        }
      }
      inputTransform(d, v);
      for (int xi = 0; xi < 16; ++xi)
        _mm256_storeu_ps(V + (xi * tiles + t) * C + cb * 8, v[xi / 4][xi % 4]);
    }
  }

  // 2. One GEMM per position: M[xi] (tiles x K) = V[xi] (tiles x C) * U[xi] (C x K).
  GemmEpilogue none;
  for (int xi = 0; xi < 16; ++xi)
    sgemm(tiles, V + xi * tiles * C, C, u_[xi], M + xi * tiles * K, K, none, 0, u_[xi].panels());

  // 3. Output transform Y = A^T m A, A^T = [1 1 1 0; 0 1 -1 -1], then bias, sum, ReLU.
  for (int64_t kb = 0; kb < K / 8; ++kb) {
    const __m256 bias = _mm256_loadu_ps(bias_.data() + kb * 8);
    for (int64_t t = 0; t < tiles; ++t) {
      __m256 m[4][4];
      for (int xi = 0; xi < 16; ++xi)
        m[xi / 4][xi % 4] = _mm256_loadu_ps(M + (xi * tiles + t) * K + kb * 8);
      __m256 s0[4], s1[4];
      for (int j = 0; j < 4; ++j) {
        s0[j] = _mm256_add_ps(_mm256_add_ps(m[0][j], m[1][j]), m[2][j]);
        s1[j] = _mm256_sub_ps(_mm256_sub_ps(m[1][j], m[2][j]), m[3][j]);
      }
      __m256 y[2][2] = {
          {_mm256_add_ps(_mm256_add_ps(s0[0], s0[1]), s0[2]),
           _mm256_sub_ps(_mm256_sub_ps(s0[1], s0[2]), s0[3])},
          {_mm256_add_ps(_mm256_add_ps(s1[0], s1[1]), s1[2]),
           _mm256_sub_ps(_mm256_sub_ps(s1[1], s1[2]), s1[3])}};
      const int64_t id = tile0 + t, n = id / perImage, r = id % perImage;
      const int64_t oy = (r / tilesW_) * 2, ox = (r % tilesW_) * 2;
      float* plane = dst + ((n * (K / 8) + kb) * OH) * OW * 8;
      for (int i = 0; i < 2 && oy + i < OH; ++i)
        for (int j = 0; j < 2 && ox + j < OW; ++j) {
          float* out = plane + ((oy + i) * OW + ox + j) * 8;
          __m256 v = _mm256_add_ps(y[i][j], bias);
          if (accumulate) v = _mm256_add_ps(v, _mm256_loadu_ps(out));
          if (relu) v = _mm256_max_ps(v, zero);
          _mm256_storeu_ps(out, v);
        }
    }
  }
}

}  // namespace avx2
}  // namespace tandem

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

// Scratch of one block (transformed inputs V and products M) stays around this size, half of
// a 512 KiB L2 (Zen 3, Sapphire Rapids: 2 MiB), so a block's V and M stay in L2 between the
// three phases. Measured on the ResNet-18 and MNIST shapes (1 thread): 192-384 KiB beat 768 KiB
// by 10-30% on C = 32-128. At least kMinTiles rows keep the GEMMs efficient and bound how
// often the (possibly large: 16 MiB at C = K = 512) transformed filter is re-read.
constexpr int64_t kBlockBytes = 256 << 10;
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
  const int64_t CB = s_.C / 8, KB = s_.K / 8, panels = u_[0].panels();
  threads = std::max(1, threads);
  const int64_t filterBytes = 16 * s_.C * s_.K * (int64_t)sizeof(float);
  if (threads > 1 && tiles < 2 * threads * kMinTiles && filterBytes > (1 << 20)) {
    // Few tiles and a large transformed filter (batch 1, late layers: 16 tiles at 7x7, 16 MiB
    // at 512 channels): splitting the tiles would make every thread stream the whole filter
    // for a sliver of work. Threads share each block instead, splitting channels and B panels
    // phase by phase (three barriers per block, so not for small filters: MNIST's 128 KiB).
    const int64_t tb = std::min(tb_, tiles);
    float* scratch = threadScratch((size_t)16 * tb * (s_.C + s_.K));
#pragma omp parallel num_threads(threads)
    {
      const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
      for (int64_t t0 = 0; t0 < tiles; t0 += tb) {
        const int64_t count = std::min(tb, tiles - t0);
        inputPhase(src, t0, count, scratch, CB * t / n, CB * (t + 1) / n);
#pragma omp barrier
        gemmPhase(count, scratch, panels * t / n, panels * (t + 1) / n);
#pragma omp barrier
        outputPhase(dst, t0, count, scratch, accumulate, relu, KB * t / n, KB * (t + 1) / n);
#pragma omp barrier
      }
    }
    return;
  }
  // Blocks of near-equal size, their count a multiple of the threads (196 tiles on 2 threads:
  // 4 blocks of 49, not 48+48+48+48+4 split 3:2).
  int64_t blocks = (tiles + tb_ - 1) / tb_;
  blocks = (blocks + threads - 1) / threads * threads;
  const int64_t tb = (tiles + blocks - 1) / blocks;
  blocks = (tiles + tb - 1) / tb;
  const size_t scratchFloats = (size_t)16 * tb * (s_.C + s_.K);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t t0 = b * tb, count = std::min(tb, tiles - t0);
    float* scratch = threadScratch(scratchFloats);
    inputPhase(src, t0, count, scratch, 0, CB);
    gemmPhase(count, scratch, 0, panels);
    outputPhase(dst, t0, count, scratch, accumulate, relu, 0, KB);
  }
}

TANDEM_AVX2 void WinogradConv3x3::inputPhase(const float* src, int64_t tile0, int64_t tiles,
                                             float* scratch, int64_t cb0, int64_t cb1) const {
  const int64_t C = s_.C, H = s_.H, W = s_.W;
  const int64_t perImage = tilesH_ * tilesW_;
  float* V = scratch;
  const __m256 zero = _mm256_setzero_ps();
  // Channel block outer so that neighbouring tiles share source lines.
  for (int64_t cb = cb0; cb < cb1; ++cb) {
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t id = tile0 + t, n = id / perImage, r = id % perImage;
      const int64_t y0 = (r / tilesW_) * 2 - s_.padTop, x0 = (r % tilesW_) * 2 - s_.padLeft;
      const float* plane = src + ((n * (C / 8) + cb) * H) * W * 8;
      __m256 d[4][4], v[4][4];
      if (y0 >= 0 && x0 >= 0 && y0 + 4 <= H && x0 + 4 <= W) {
        // Interior patch (most of them): no bounds checks.
        const float* p = plane + (y0 * W + x0) * 8;
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) d[i][j] = _mm256_loadu_ps(p + (i * W + j) * 8);
      } else {
        for (int i = 0; i < 4; ++i) {
          const int64_t y = y0 + i;
          const bool rowIn = y >= 0 && y < H;
          for (int j = 0; j < 4; ++j) {
            const int64_t x = x0 + j;
            d[i][j] = rowIn && x >= 0 && x < W ? _mm256_loadu_ps(plane + (y * W + x) * 8) : zero;
          }
        }
      }
      inputTransform(d, v);
      for (int xi = 0; xi < 16; ++xi)
        _mm256_storeu_ps(V + (xi * tiles + t) * C + cb * 8, v[xi / 4][xi % 4]);
    }
  }
}

void WinogradConv3x3::gemmPhase(int64_t tiles, float* scratch, int64_t panel0,
                                int64_t panel1) const {
  // One GEMM per position: M[xi] (tiles x K) = V[xi] (tiles x C) * U[xi] (C x K).
  const int64_t C = s_.C, K = s_.K;
  float* V = scratch;
  float* M = scratch + 16 * tiles * C;
  GemmEpilogue none;
  for (int xi = 0; xi < 16; ++xi)
    sgemm(tiles, V + xi * tiles * C, C, u_[xi], M + xi * tiles * K, K, none, panel0, panel1);
}

TANDEM_AVX2 void WinogradConv3x3::outputPhase(float* dst, int64_t tile0, int64_t tiles,
                                              const float* scratch, bool accumulate, bool relu,
                                              int64_t kb0, int64_t kb1) const {
  // Y = A^T m A, A^T = [1 1 1 0; 0 1 -1 -1], then bias, sum, ReLU.
  const int64_t C = s_.C, K = s_.K, OH = s_.OH, OW = s_.OW;
  const int64_t perImage = tilesH_ * tilesW_;
  const float* M = scratch + 16 * tiles * C;
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t kb = kb0; kb < kb1; ++kb) {
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

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

// Tiles per block for P positions: the L2 rule above, at least kMinTiles, but only half that
// when the transformed filter is small (<= 4 MiB) and re-reading it per block is cheap. With
// F(4x4, 3x3)'s 36 positions the L2 rule asks for 14-24 tiles at 64-128 channels; measured
// (1 thread, 7 alternating windows): 24-tile blocks ran 64 ch @ 56 in 0.70x of F(2x2)'s time,
// 48-tile ones 0.97x. At 256 channels (9.4 MiB filter) 48 tiles beat 24 (0.90x vs 1.01x).
int64_t blockTiles(int64_t P, int64_t C, int64_t K) {
  const int64_t filterBytes = P * C * K * (int64_t)sizeof(float);
  const int64_t minTiles = filterBytes <= (4 << 20) ? kMinTiles / 2 : kMinTiles;
  return std::clamp<int64_t>(kBlockBytes / (P * (int64_t)sizeof(float) * (C + K)), minTiles,
                             kMaxTiles);
}

float* threadScratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.assign(floats, 0.f);
  return buf.data();
}

// Input transforms V = B^T d B of one alpha x alpha patch (8 channels per vector), applied to
// the columns then the rows of d (in place). F(2x2, 3x3): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0;
// 0 1 0 -1]. F(4x4, 3x3): B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0;
// 0 2 -1 -2 1 0; 0 4 0 -5 0 1].
template <int A>
TANDEM_AVX2 inline void inputTransform1d(__m256* d, int stride) {
  __m256 x[A];
  for (int i = 0; i < A; ++i) x[i] = d[i * stride];
  if constexpr (A == 4) {
    d[0] = _mm256_sub_ps(x[0], x[2]);
    d[1 * stride] = _mm256_add_ps(x[1], x[2]);
    d[2 * stride] = _mm256_sub_ps(x[2], x[1]);
    d[3 * stride] = _mm256_sub_ps(x[1], x[3]);
  } else {
    const __m256 four = _mm256_set1_ps(4.f), five = _mm256_set1_ps(5.f),
                 two = _mm256_set1_ps(2.f);
    const __m256 a = _mm256_fnmadd_ps(four, x[2], x[4]);          // d4 - 4 d2
    const __m256 b = _mm256_fnmadd_ps(four, x[1], x[3]);          // d3 - 4 d1
    const __m256 c = _mm256_sub_ps(x[4], x[2]);                   // d4 - d2
    const __m256 e = _mm256_mul_ps(two, _mm256_sub_ps(x[3], x[1]));  // 2 (d3 - d1)
    d[0] = _mm256_fnmadd_ps(five, x[2], _mm256_fmadd_ps(four, x[0], x[4]));
    d[1 * stride] = _mm256_add_ps(a, b);
    d[2 * stride] = _mm256_sub_ps(a, b);
    d[3 * stride] = _mm256_add_ps(c, e);
    d[4 * stride] = _mm256_sub_ps(c, e);
    d[5 * stride] = _mm256_fnmadd_ps(five, x[3], _mm256_fmadd_ps(four, x[1], x[5]));
  }
}

// Output transforms Y = A^T m A, on one column or row of m (in place, the first M entries).
// F(2x2, 3x3): A^T = [1 1 1 0; 0 1 -1 -1]. F(4x4, 3x3): A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0;
// 0 1 1 4 4 0; 0 1 -1 8 -8 1].
template <int A>
TANDEM_AVX2 inline void outputTransform1d(__m256* m, int stride) {
  __m256 x[A];
  for (int i = 0; i < A; ++i) x[i] = m[i * stride];
  if constexpr (A == 4) {
    m[0] = _mm256_add_ps(_mm256_add_ps(x[0], x[1]), x[2]);
    m[1 * stride] = _mm256_sub_ps(_mm256_sub_ps(x[1], x[2]), x[3]);
  } else {
    const __m256 s12 = _mm256_add_ps(x[1], x[2]), d12 = _mm256_sub_ps(x[1], x[2]);
    const __m256 s34 = _mm256_add_ps(x[3], x[4]), d34 = _mm256_sub_ps(x[3], x[4]);
    m[0] = _mm256_add_ps(_mm256_add_ps(x[0], s12), s34);
    m[1 * stride] = _mm256_fmadd_ps(_mm256_set1_ps(2.f), d34, d12);
    m[2 * stride] = _mm256_fmadd_ps(_mm256_set1_ps(4.f), s34, s12);
    m[3 * stride] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.f), d34, d12), x[5]);
  }
}

// Transforms the input patches of `tiles` tiles from tile0, channel blocks [cb0, cb1), into
// V [alpha^2][tiles][C]. Output tile M, patch alpha = M + 2, patches M apart.
template <int M>
TANDEM_AVX2 void inputTiles(const Conv3x3Shape& s, int64_t tilesH, int64_t tilesW,
                            const float* src, int64_t tile0, int64_t tiles, float* V, int64_t cb0,
                            int64_t cb1) {
  constexpr int A = M + 2;
  const int64_t C = s.C, H = s.H, W = s.W;
  const int64_t perImage = tilesH * tilesW;
  const __m256 zero = _mm256_setzero_ps();
  // Channel block outer so that neighbouring tiles share source lines.
  for (int64_t cb = cb0; cb < cb1; ++cb) {
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t id = tile0 + t, n = id / perImage, r = id % perImage;
      const int64_t y0 = (r / tilesW) * M - s.padTop, x0 = (r % tilesW) * M - s.padLeft;
      const float* plane = src + ((n * (C / 8) + cb) * H) * W * 8;
      __m256 d[A * A];
      if (y0 >= 0 && x0 >= 0 && y0 + A <= H && x0 + A <= W) {
        // Interior patch (most of them): no bounds checks.
        const float* p = plane + (y0 * W + x0) * 8;
        for (int i = 0; i < A; ++i)
          for (int j = 0; j < A; ++j) d[i * A + j] = _mm256_loadu_ps(p + (i * W + j) * 8);
      } else {
        for (int i = 0; i < A; ++i) {
          const int64_t y = y0 + i;
          const bool rowIn = y >= 0 && y < H;
          for (int j = 0; j < A; ++j) {
            const int64_t x = x0 + j;
            d[i * A + j] =
                rowIn && x >= 0 && x < W ? _mm256_loadu_ps(plane + (y * W + x) * 8) : zero;
          }
        }
      }
      for (int j = 0; j < A; ++j) inputTransform1d<A>(d + j, A);  // columns
      for (int i = 0; i < A; ++i) inputTransform1d<A>(d + i * A, 1);  // rows
      for (int xi = 0; xi < A * A; ++xi)
        _mm256_storeu_ps(V + (xi * tiles + t) * C + cb * 8, d[xi]);
    }
  }
}

// Output transform of `tiles` tiles from M [alpha^2][tiles][K] into dst's output channel blocks
// [kb0, kb1), then bias, the residual sum, ReLU. Partial tiles at the bottom and right edges
// store only their in-range pixels.
template <int M>
TANDEM_AVX2 void outputTiles(const Conv3x3Shape& s, int64_t tilesH, int64_t tilesW,
                             const float* bias, float* dst, int64_t tile0, int64_t tiles,
                             const float* scratch, bool accumulate, bool relu, int64_t kb0,
                             int64_t kb1) {
  constexpr int A = M + 2;
  const int64_t C = s.C, K = s.K, OH = s.OH, OW = s.OW;
  const int64_t perImage = tilesH * tilesW;
  const float* prod = scratch + A * A * tiles * C;
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t kb = kb0; kb < kb1; ++kb) {
    const __m256 b = _mm256_loadu_ps(bias + kb * 8);
    for (int64_t t = 0; t < tiles; ++t) {
      __m256 m[A * A];
      for (int xi = 0; xi < A * A; ++xi)
        m[xi] = _mm256_loadu_ps(prod + (xi * tiles + t) * K + kb * 8);
      for (int j = 0; j < A; ++j) outputTransform1d<A>(m + j, A);  // columns: rows 0..M-1
      for (int i = 0; i < M; ++i) outputTransform1d<A>(m + i * A, 1);  // rows: columns 0..M-1
      const int64_t id = tile0 + t, n = id / perImage, r = id % perImage;
      const int64_t oy = (r / tilesW) * M, ox = (r % tilesW) * M;
      float* plane = dst + ((n * (K / 8) + kb) * OH) * OW * 8;
      for (int i = 0; i < M && oy + i < OH; ++i)
        for (int j = 0; j < M && ox + j < OW; ++j) {
          float* out = plane + ((oy + i) * OW + ox + j) * 8;
          __m256 v = _mm256_add_ps(m[i * A + j], b);
          if (accumulate) v = _mm256_add_ps(v, _mm256_loadu_ps(out));
          if (relu) v = _mm256_max_ps(v, zero);
          _mm256_storeu_ps(out, v);
        }
    }
  }
}

// F(4x4, 3x3) does 36 multiplies per 4x4 tile (2.25 per output) against F(2x2, 3x3)'s 16 per
// 2x2 (4 per output), but its transformed filter is 36 / 16 larger, and every block of tiles
// reads all of it. So F(2x2) where there are few tiles for a large filter: fewer than 32 4x4
// tiles in all and a filter over 2 MiB (ResNet-18 at batch 1: 256 ch @ 14, 512 @ 7). Measured
// against F(2x2), 1 thread, same run: 4x4 tiles 0.56-0.71x on 64-128 ch at batch 1, 0.70-0.90x
// at batch 32, MNIST's 32 -> 64 @ 26 0.79x; 256 ch @ 14 at batch 1 1.09x, 512 @ 7 1.39x.
int chooseOutputTile(const Conv3x3Shape& s) {
  const int64_t tiles4 = s.N * ((s.OH + 3) / 4) * ((s.OW + 3) / 4);
  const int64_t filter4Bytes = 36 * s.C * s.K * (int64_t)sizeof(float);
  return tiles4 < 32 && filter4Bytes > (2 << 20) ? 2 : 4;
}

}  // namespace

bool WinogradConv3x3::prepare(const Conv3x3Shape& s, const float* weights, const float* bias,
                              int outputTile) {
  if (s.N < 1 || s.C < 8 || s.K < 8 || s.C % 8 || s.K % 8) return false;
  if (outputTile != 0 && outputTile != 2 && outputTile != 4) return false;
  const int64_t padBottom = s.OH - s.H - s.padTop + 2, padRight = s.OW - s.W - s.padLeft + 2;
  for (int64_t p : {s.padTop, s.padLeft, padBottom, padRight})
    if (p < 0 || p > 2) return false;
  if (s.OH < 1 || s.OW < 1) return false;
  s_ = s;
  m_ = outputTile ? outputTile : chooseOutputTile(s);
  tilesH_ = (s.OH + m_ - 1) / m_;
  tilesW_ = (s.OW + m_ - 1) / m_;
  const int64_t C = s.C, K = s.K;

  // U = G g G^T per (k, c), computed in double, stored per position xi as a C x K matrix (the
  // GEMM's B). F(2x2, 3x3): G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. F(4x4, 3x3)
  // (interpolation points 0, +-1, +-2): G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6;
  // 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1].
  static const double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static const double kG4[6][3] = {{0.25, 0, 0},           {-1 / 6., -1 / 6., -1 / 6.},
                                   {-1 / 6., 1 / 6., -1 / 6.}, {1 / 24., 1 / 12., 1 / 6.},
                                   {1 / 24., -1 / 12., 1 / 6.}, {0, 0, 1}};
  const int a = alpha();
  auto G = [&](int i, int j) { return m_ == 2 ? kG2[i][j] : kG4[i][j]; };
  std::vector<float> u((size_t)a * a * C * K);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) {
      const float* g = weights + (k * C + c) * 9;
      double gg[6][3];  // G g
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < 3; ++j)
          gg[i][j] = G(i, 0) * g[j] + G(i, 1) * g[3 + j] + G(i, 2) * g[6 + j];
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < a; ++j)
          u[((size_t)(i * a + j) * C + c) * K + k] =
              (float)(gg[i][0] * G(j, 0) + gg[i][1] * G(j, 1) + gg[i][2] * G(j, 2));
    }
  u_.clear();
  u_.resize(a * a);
  for (int xi = 0; xi < a * a; ++xi)
    if (!u_[xi].pack(u.data() + (size_t)xi * C * K, C, K, K, 1)) return false;
  bias_.assign(K, 0.f);
  if (bias) std::copy(bias, bias + K, bias_.begin());
  tb_ = blockTiles(positions(), C, K);
  return true;
}

void WinogradConv3x3::run(const float* src, float* dst, bool accumulate, bool relu,
                          int threads) const {
  const int64_t tiles = s_.N * tilesH_ * tilesW_;
  const int64_t CB = s_.C / 8, KB = s_.K / 8, panels = u_[0].panels();
  threads = std::max(1, threads);
  const int64_t P = positions();
  const int64_t filterBytes = P * s_.C * s_.K * (int64_t)sizeof(float);
  if (threads > 1 && tiles < 2 * threads * kMinTiles && filterBytes > (1 << 20)) {
    // Few tiles and a large transformed filter (batch 1, late layers: 16 tiles at 7x7, 16 MiB
    // at 512 channels): splitting the tiles would make every thread stream the whole filter
    // for a sliver of work. Threads share each block instead, splitting channels and B panels
    // phase by phase (three barriers per block, so not for small filters: MNIST's 128 KiB).
    const int64_t tb = std::min(tb_, tiles);
    float* scratch = threadScratch((size_t)P * tb * (s_.C + s_.K));
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
  const size_t scratchFloats = (size_t)P * tb * (s_.C + s_.K);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t t0 = b * tb, count = std::min(tb, tiles - t0);
    float* scratch = threadScratch(scratchFloats);
    inputPhase(src, t0, count, scratch, 0, CB);
    gemmPhase(count, scratch, 0, panels);
    outputPhase(dst, t0, count, scratch, accumulate, relu, 0, KB);
  }
}

void WinogradConv3x3::inputPhase(const float* src, int64_t tile0, int64_t tiles, float* scratch,
                                 int64_t cb0, int64_t cb1) const {
  if (m_ == 2)
    inputTiles<2>(s_, tilesH_, tilesW_, src, tile0, tiles, scratch, cb0, cb1);
  else
    inputTiles<4>(s_, tilesH_, tilesW_, src, tile0, tiles, scratch, cb0, cb1);
}

void WinogradConv3x3::gemmPhase(int64_t tiles, float* scratch, int64_t panel0,
                                int64_t panel1) const {
  // One GEMM per position: M[xi] (tiles x K) = V[xi] (tiles x C) * U[xi] (C x K).
  const int64_t C = s_.C, K = s_.K;
  float* V = scratch;
  float* M = scratch + positions() * tiles * C;
  GemmEpilogue none;
  for (int xi = 0; xi < positions(); ++xi)
    sgemm(tiles, V + xi * tiles * C, C, u_[xi], M + xi * tiles * K, K, none, panel0, panel1);
}

void WinogradConv3x3::outputPhase(float* dst, int64_t tile0, int64_t tiles, const float* scratch,
                                  bool accumulate, bool relu, int64_t kb0, int64_t kb1) const {
  if (m_ == 2)
    outputTiles<2>(s_, tilesH_, tilesW_, bias_.data(), dst, tile0, tiles, scratch, accumulate,
                   relu, kb0, kb1);
  else
    outputTiles<4>(s_, tilesH_, tilesW_, bias_.data(), dst, tile0, tiles, scratch, accumulate,
                   relu, kb0, kb1);
}

}  // namespace avx2
}  // namespace tandem

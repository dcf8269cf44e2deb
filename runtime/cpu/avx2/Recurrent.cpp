// Small-batch RNN / GRU / LSTM on the packed GEMM: see Recurrent.h.
#include "runtime/cpu/avx2/Recurrent.h"

#include <algorithm>
#include <cstring>

#include <immintrin.h>

#include "runtime/cpu/avx2/Activation.h"

#define TANDEM_AVX2 __attribute__((target("avx2,fma")))

namespace tandem {
namespace avx2 {

namespace {

void activate(Activation a, float* x, int64_t n) {
  const ActivationStep step{a, 1.f};
  applyActivations(&step, 1, x, n);
}

// y[k] = a[k] + b[k]
TANDEM_AVX2 void addRows(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t k = 0; k < n; ++k) y[k] = a[k] + b[k];
}

// y[0, N) = x[0, K) B (+ bias) for a PackedB B (K x N, panels of 16 columns, the last 8 or 16
// wide): the packed GEMM's 6-row tile would do six rows' work for this one. Four panels at a
// time, two accumulators each, so eight FMA chains are in flight.
TANDEM_AVX2 void gemvRow(const float* x, const PackedB& B, const float* bias, float* y) {
  const int64_t K = B.rows(), N = B.cols(), P = B.panels(), padded = B.paddedCols();
  int64_t p = 0;
  for (; p + 4 <= P && (p + 4) * 16 <= N; p += 4) {
    __m256 acc[8];
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
    const float* b0 = B.panel(p);
    const float* b1 = B.panel(p + 1);
    const float* b2 = B.panel(p + 2);
    const float* b3 = B.panel(p + 3);
    for (int64_t k = 0; k < K; ++k) {
      const __m256 v = _mm256_broadcast_ss(x + k);
      acc[0] = _mm256_fmadd_ps(v, _mm256_load_ps(b0 + k * 16), acc[0]);
      acc[1] = _mm256_fmadd_ps(v, _mm256_load_ps(b0 + k * 16 + 8), acc[1]);
      acc[2] = _mm256_fmadd_ps(v, _mm256_load_ps(b1 + k * 16), acc[2]);
      acc[3] = _mm256_fmadd_ps(v, _mm256_load_ps(b1 + k * 16 + 8), acc[3]);
      acc[4] = _mm256_fmadd_ps(v, _mm256_load_ps(b2 + k * 16), acc[4]);
      acc[5] = _mm256_fmadd_ps(v, _mm256_load_ps(b2 + k * 16 + 8), acc[5]);
      acc[6] = _mm256_fmadd_ps(v, _mm256_load_ps(b3 + k * 16), acc[6]);
      acc[7] = _mm256_fmadd_ps(v, _mm256_load_ps(b3 + k * 16 + 8), acc[7]);
    }
    for (int j = 0; j < 8; ++j) {
      const int64_t col = p * 16 + j * 8;  // every column of these four panels is real
      __m256 r = acc[j];
      if (bias) r = _mm256_add_ps(r, _mm256_loadu_ps(bias + col));
      _mm256_storeu_ps(y + col, r);
    }
  }
  for (; p < P; ++p) {  // the rest one panel at a time; the last may be 8 wide or partly padding
    const int64_t width = std::min<int64_t>(16, padded - p * 16);
    const float* b = B.panel(p);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; ++k) {
      const __m256 v = _mm256_broadcast_ss(x + k);
      a0 = _mm256_fmadd_ps(v, _mm256_load_ps(b + k * width), a0);
      if (width == 16) a1 = _mm256_fmadd_ps(v, _mm256_load_ps(b + k * 16 + 8), a1);
    }
    alignas(32) float tmp[16];
    _mm256_store_ps(tmp, a0);
    _mm256_store_ps(tmp + 8, a1);
    for (int64_t j = 0; j < width && p * 16 + j < N; ++j)
      y[p * 16 + j] = tmp[j] + (bias ? bias[p * 16 + j] : 0.f);
  }
}

// Rows [0, M) of x (lda apart) times B into y (ldy apart), + bias.
TANDEM_AVX2 void gemvRows(int64_t M, const float* x, int64_t lda, const PackedB& B,
                          const float* bias, float* y, int64_t ldy) {
  for (int64_t m = 0; m < M; ++m) gemvRow(x + m * lda, B, bias, y + m * ldy);
}

// n floats rounded up to a whole 32-byte vector: the workspace regions' sizes.
int64_t vectors(int64_t n) { return (n + 7) / 8 * 8; }

}  // namespace

bool RecurrentCell::init(const Config& config, const float* W, const float* R, const float* B,
                         const float* P) {
  if (!available() || config.T < 1 || config.N < 1 || config.C < 1 || config.H < 1 ||
      (config.D != 1 && config.D != 2))
    return false;
  c_ = config;
  const int64_t H = c_.H, C = c_.C;
  G_ = c_.kind == Kind::Lstm ? 4 : c_.kind == Kind::Rnn ? 1 : 3;
  const int64_t GH = G_ * H;
  dirs_.resize(c_.D);
  for (int64_t d = 0; d < c_.D; ++d) {
    Direction& dir = dirs_[d];
    const float* Wd = W + d * GH * C;
    const float* Rd = R + d * GH * H;
    // Element (k, n) of W_d^T is W_d[n, k]: strideK 1, strideN C.
    if (!dir.w.pack(Wd, C, GH, 1, C)) return false;
    if (c_.kind == Kind::Gru) {
      if (!dir.r.pack(Rd, H, 2 * H, 1, H) || !dir.rh.pack(Rd + 2 * H * H, H, H, 1, H)) return false;
    } else if (!dir.r.pack(Rd, H, GH, 1, H)) {
      return false;
    }
    dir.xBias.assign(GH, 0.f);
    if (B) {
      const float* wb = B + d * 2 * GH;
      const float* rb = wb + GH;
      for (int64_t k = 0; k < GH; ++k) {
        // A linear-before-reset GRU adds Rb_h inside r * (h R_h^T + Rb_h): the recurrence's bias.
        const bool inRecurrence = c_.kind == Kind::LbrGru && k >= 2 * H;
        dir.xBias[k] = wb[k] + (inRecurrence ? 0.f : rb[k]);
      }
      if (c_.kind == Kind::LbrGru) {
        dir.hBias.assign(GH, 0.f);
        std::copy(rb + 2 * H, rb + 3 * H, dir.hBias.begin() + 2 * H);
      }
    }
    if (P && c_.kind == Kind::Lstm) dir.peep.assign(P + d * 3 * H, P + (d + 1) * 3 * H);
  }
  return true;
}

int64_t RecurrentCell::perDirectionFloats() const {
  const int64_t GH = G_ * c_.H, NH = c_.N * c_.H;
  // xw [T*N, GH], gates [N, GH], hr [N, GH], h, c, tmp [N, H].
  return vectors(c_.T * c_.N * GH) + 2 * vectors(c_.N * GH) + 3 * vectors(NH);
}

int64_t RecurrentCell::workspaceFloats() const { return c_.D * perDirectionFloats(); }

void RecurrentCell::run(const float* X, const float* h0, const float* c0, float* Y, float* Yh,
                        float* Yc, float* ws, int threads) const {
  const int64_t per = perDirectionFloats();
  if (c_.D == 2 && threads >= 2) {
#pragma omp parallel for num_threads(2) schedule(static)
    for (int64_t d = 0; d < 2; ++d) runDirection(d, X, h0, c0, Y, Yh, Yc, ws + d * per);
  } else {
    for (int64_t d = 0; d < c_.D; ++d) runDirection(d, X, h0, c0, Y, Yh, Yc, ws + d * per);
  }
}

TANDEM_AVX2 void RecurrentCell::runDirection(int64_t d, const float* X, const float* h0,
                                             const float* c0, float* Y, float* Yh, float* Yc,
                                             float* ws) const {
  const Direction& dir = dirs_[d];
  const int64_t T = c_.T, N = c_.N, H = c_.H, D = c_.D, GH = G_ * H, NH = N * H;
  float* xw = ws;  // the regions perDirectionFloats counts, in its order
  float* gates = xw + vectors(T * N * GH);
  float* hr = gates + vectors(N * GH);
  float* h = hr + vectors(N * GH);
  float* c = h + vectors(NH);
  float* tmp = c + vectors(NH);
  const bool reverse = c_.reverse || d == 1;

  // Every step's input projection at once: xw[t*N + n] = X[t, n] W^T + xBias.
  GemmEpilogue inEp;
  inEp.bias = dir.xBias.data();
  sgemm(T * N, X, c_.C, dir.w, xw, GH, inEp, 0, dir.w.panels());
  GemmEpilogue recEp;
  recEp.bias = dir.hBias.empty() ? nullptr : dir.hBias.data();

  if (h0) std::copy(h0 + d * NH, h0 + (d + 1) * NH, h);
  else std::fill(h, h + NH, 0.f);
  if (c_.kind == Kind::Lstm) {
    if (c0) std::copy(c0 + d * NH, c0 + (d + 1) * NH, c);
    else std::fill(c, c + NH, 0.f);
  }
  for (int64_t step = 0; step < T; ++step) {
    const int64_t t = reverse ? T - 1 - step : step;
    // hr = h R^T (GRU: the z and r gates only), for the whole batch.
    if (N <= 4) gemvRows(N, h, H, dir.r, recEp.bias, hr, GH);
    else sgemm(N, h, H, dir.r, hr, GH, recEp, 0, dir.r.panels());
    for (int64_t n = 0; n < N; ++n) {
      const float* x = xw + (t * N + n) * GH;
      float* g = gates + n * GH;
      float* hn = h + n * H;
      const float* r = hr + n * GH;
      switch (c_.kind) {
        case Kind::Rnn: {
          addRows(x, r, hn, H);
          if (c_.rnnActivation == RnnActivation::Relu)
            for (int64_t k = 0; k < H; ++k) hn[k] = hn[k] > 0.f ? hn[k] : 0.f;
          else
            activate(c_.rnnActivation == RnnActivation::Tanh ? Activation::Tanh : Activation::Logistic, hn, H);
          break;
        }
        case Kind::Lstm: {
          // ONNX gate blocks i, o, f, c; peepholes P = [Pi, Po, Pf] read c_{t-1} (i, f), c_t (o).
          float* cn = c + n * H;
          addRows(x, r, g, GH);
          float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
          if (!dir.peep.empty()) {
            const float *pi = dir.peep.data(), *po = pi + H, *pf = pi + 2 * H;
            for (int64_t k = 0; k < H; ++k) {
              gi[k] += pi[k] * cn[k];
              gf[k] += pf[k] * cn[k];
            }
            activate(Activation::Logistic, gi, H);
            activate(Activation::Logistic, gf, H);
            activate(Activation::Tanh, gc, H);
            for (int64_t k = 0; k < H; ++k) {
              cn[k] = gf[k] * cn[k] + gi[k] * gc[k];
              go[k] += po[k] * cn[k];
            }
            activate(Activation::Logistic, go, H);
          } else {
            activate(Activation::Logistic, g, 3 * H);
            activate(Activation::Tanh, gc, H);
            for (int64_t k = 0; k < H; ++k) cn[k] = gf[k] * cn[k] + gi[k] * gc[k];
          }
          float* th = tmp + n * H;
          std::copy(cn, cn + H, th);
          activate(Activation::Tanh, th, H);
          for (int64_t k = 0; k < H; ++k) hn[k] = go[k] * th[k];
          break;
        }
        case Kind::Gru:
        case Kind::LbrGru: {
          // z and r; the candidate waits for r (and, without linear_before_reset, for the
          // batch's r * h times R_h below).
          addRows(x, r, g, 2 * H);
          activate(Activation::Logistic, g, 2 * H);
          if (c_.kind == Kind::LbrGru) {
            const float* rr = g + H;
            for (int64_t k = 0; k < H; ++k) g[2 * H + k] = x[2 * H + k] + rr[k] * r[2 * H + k];
          } else {
            for (int64_t k = 0; k < H; ++k) tmp[n * H + k] = g[H + k] * hn[k];
          }
          break;
        }
      }
    }
    if (c_.kind == Kind::Gru || c_.kind == Kind::LbrGru) {
      if (c_.kind == Kind::Gru) {
        // hr's h block = (r * h) R_h^T for the whole batch.
        if (N <= 4) {
          gemvRows(N, tmp, H, dir.rh, nullptr, hr + 2 * H, GH);
        } else {
          GemmEpilogue none;
          sgemm(N, tmp, H, dir.rh, hr + 2 * H, GH, none, 0, dir.rh.panels());
        }
      }
      for (int64_t n = 0; n < N; ++n) {
        float* g = gates + n * GH;
        float* hn = h + n * H;
        if (c_.kind == Kind::Gru) addRows(xw + (t * N + n) * GH + 2 * H, hr + n * GH + 2 * H, g + 2 * H, H);
        activate(Activation::Tanh, g + 2 * H, H);
        const float* z = g;
        for (int64_t k = 0; k < H; ++k) hn[k] = (1.f - z[k]) * g[2 * H + k] + z[k] * hn[k];
      }
    }
    if (Y)
      for (int64_t n = 0; n < N; ++n)
        std::copy(h + n * H, h + (n + 1) * H, Y + ((t * D + d) * N + n) * H);
  }
  if (Yh) std::copy(h, h + NH, Yh + d * NH);
  if (Yc && c_.kind == Kind::Lstm) std::copy(c, c + NH, Yc + d * NH);
}

}  // namespace avx2
}  // namespace tandem

// AVX2 + FMA element-wise activations over f32 rows, in place: tanh, the tanh form of GELU,
// the logistic sigmoid and swish, all from one exp. Used after the packed GEMM (Sgemm.h's
// epilogue, on the tile just stored, while it is in L1) instead of oneDNN 2.6's jit:avx2
// eltwise, whose tanh (and so tanh-GELU) looks its polynomial coefficients up with vgatherdps:
// on this project's AMD EPYC (Zen 5) capped to AVX2 that eltwise takes 134 us over a 64 x 1024
// tanh-GELU (gpt_like's fc1) where these take about 20 (oneDNN's jit:avx512_core, without
// gathers, 17 us).
#pragma once

#include <cstdint>

namespace tandem {
namespace avx2 {

/// Activations these kernels compute (f32 in, f32 out):
///   Tanh      tanh(x): Cephes' odd polynomial for |x| < 0.625, else 1 - 2 / (exp(2|x|) + 1)
///             with x's sign; max error about 2 ulp near 0, 1e-7 absolute elsewhere.
///   GeluTanh  0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed as
///             x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))) (the same function; no
///             cancellation, relative error about 1e-7 for every x).
///   Logistic  1 / (1 + exp(-x)).
///   Swish     x / (1 + exp(-alpha x)) (alpha = 1: SiLU).
/// NaN in gives NaN out. exp's argument is clamped to [-87.3, 88.3]: where a gate is below
/// 1.2e-38 it stays there (logistic(-inf) = 4.5e-39, GELU and swish of x far below 0 are
/// x * 4.5e-39, so -inf at -inf), tanh(+-inf) = +-1.
enum class Activation { Tanh, GeluTanh, Logistic, Swish };

/// One activation with its parameter (Swish's alpha; unused by the others).
struct ActivationStep {
  Activation kind = Activation::Tanh;
  float alpha = 1.f;
};

/// x[i] = act(x[i]) for i in [0, n), for each step in order (steps[0] first). Requires
/// avx2::available() (Sgemm.h). n >= 0; no alignment required.
void applyActivations(const ActivationStep* steps, int count, float* x, int64_t n);

/// The same over a tile of `rows` x `cols` elements in blocks of 8 columns (Sgemm.h's
/// MatrixLayout): element (r, j) at x[r * rowStride + (j / 8) * blockStride + j % 8]. A
/// row-major tile has blockStride 8. Sgemm's epilogue calls it once per tile (up to 6 x 16)
/// instead of once per row: gpt_like's fc1 (64 x 256 x 1024 with tanh-GELU, AVX2, stand-alone)
/// 1-3% faster; the activation's arithmetic is most of its cost either way. rows, cols >= 0.
void applyActivationsTile(const ActivationStep* steps, int count, float* x, int64_t rows,
                          int64_t cols, int64_t rowStride, int64_t blockStride);

/// GeluGrad: dx[i] = dy[i] * Gelu'(x[i]) for i in [0, n), f32, on `threads` OpenMP threads
/// (one below 64K elements). erf form (tanhForm false): Gelu'(x) = Phi(x) + x phi(x), erf from
/// Eigen's rational approximation on [-4, 4] (6.5e-8 absolute), phi's exp from VecExp.h. tanh
/// form: 0.5 (1 + tanh u) = s = 1 / (1 + exp(-2u)) with 2u = x (c1 + c3 x^2), c1 = 2 sqrt(2/pi),
/// c3 = 0.044715 c1, so Gelu'(x) = s + x s (1 - s) (c1 + 3 c3 x^2), 1 - s as exp(-2u) s (no cancellation). x is
/// clamped to [-20, 20] first (Gelu' is 0 and 1 beyond, to f32 precision), so -inf and +inf
/// give 0 and dy; NaN in x gives NaN. The last n % 8 elements go through a lane mask, the same
/// arithmetic. Requires avx2::available().
void geluGrad(const float* dy, const float* x, float* dx, int64_t n, bool tanhForm, int threads);

}  // namespace avx2
}  // namespace tandem

// AVX2 + FMA row kernels of the fused row loop (runtime/cpu/ref/Fused.cpp's RowKernel): the
// softmax, log-softmax and layer normalisation of one f32 row, 8 lanes at a time; and the
// statistics and affine passes of InstanceNormalization and GroupNormalization
// (runtime/cpu/ref/Image.cpp). The row loop
// computed them with scalar double exp and sums, 6-7 ns an element: 0.45 ms for one attention's
// Div -> Softmax over [1, 4, 128, 128] on this project's AMD EPYC (Zen 5), where oneDNN's
// stand-alone softmax takes about 0.03 ms.
#pragma once

#include <cstdint>

namespace tandem {
namespace avx2 {

/// Softmax (log = false) or LogSoftmax (log = true) of the row x[0, n) into y[0, n):
/// m = max x, s = sum exp(x - m) (accumulated in double), y = exp(x - m) / s, or
/// y = x - (m + log s). exp is the shared vector exp (about 1 ulp); an argument below -87.3
/// (so -inf, a masked element) gives exactly 0, so masked elements stay 0.
/// Returns false and writes nothing when x holds a NaN or m is not finite (+inf anywhere, or
/// every element -inf): ONNX's results there are NaN, which the caller's scalar path gives.
/// Requires available() (Sgemm.h) and n >= 1; x and y must not overlap.
bool softmaxRow(const float* x, float* y, int64_t n, bool log);

/// y[i] = scale * exp(x[i]) for i < n (y may be x): the shared vector exp; an argument below
/// -87.3 (-inf included) gives exactly 0, a NaN stays NaN. The softmax cross-entropy's gradient
/// from the log-probabilities (runtime/cpu/ref/Loss.cpp). Requires available().
void scaledExpRow(const float* x, float* y, int64_t n, float scale);

/// LayerNormalization of the row x[0, n) into y[0, n) (may be x): mean and variance in double,
/// then y = (x - mean) * (1 / sqrt(var + epsilon)) * scale + bias in f32 (bias may be null).
/// Requires available() and n >= 1.
void layerNormRow(const float* x, float* y, int64_t n, const float* scale, const float* bias,
                  double epsilon);

/// The mean of x[0, n) and the sum of its squared deviations from it, in double: two passes
/// (no cancellation). Requires available() and n >= 1.
void meanAndSquares(const float* x, int64_t n, double* mean, double* squares);

/// LayerNormalizationGrad (TandemOps.td) over `rows` rows of n: per row mean and rstd = 1 /
/// sqrt(var + eps) (in double, two passes), g = dy * scale, xhat = (x - mean) * rstd, then
/// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) (row sums f32 lanes, f64 totals);
/// dscale[i] = sum over rows of dy * xhat, dbias[i] = sum of dy (f32 within blocks of 32
/// rows, f64 across in block order: the same for any thread count). x, dy, dx [rows, n]
/// (dx may not alias x), scale, dscale, dbias [n]. AVX2 + FMA where available(), scalar
/// otherwise; `threads` OpenMP threads. runtime/cpu/avx2/LayerNormGrad.cpp.
void layerNormGrad(int64_t rows, int64_t n, const float* x, const float* dy, const float* scale, double eps,
                   float* dx, double* dscale, double* dbias, int threads);

/// y[i] = f32(double(x[i]) * k + b) for i < n (y may be x). Requires available().
void affineRow(const float* x, float* y, int64_t n, double k, double b);

/// The folds of the reference reductions' vector path (runtime/cpu/ref/Reduction.cpp): sums
/// (of x or x * x) accumulated in double as the scalar reduction does; Max and Min exact, a NaN
/// anywhere in the folded elements giving NaN.
enum class Fold { Sum, SumSquare, Max, Min };

/// x viewed as [outer, count, inner] (row-major, count >= 1): out[o * inner + i] = the fold
/// over c < count of x[(o * count + c) * inner + i]. inner = 1 folds rows of count contiguous
/// elements; inner > 1 folds count rows of inner elements into one, 8 lanes of inner at a
/// time. Requires available().
void foldAxis(const float* x, int64_t outer, int64_t count, int64_t inner, Fold fold, double* out);

}  // namespace avx2
}  // namespace tandem

// f32 GEMM with a prepacked right-hand matrix, AVX2 + FMA register-blocked micro-kernels
// (6 rows x 16 columns in 12 ymm accumulators, the BLIS/GotoBLAS scheme: Goto & van de Geijn,
// "Anatomy of High-Performance Matrix Multiplication", TOMS 2008). Used where oneDNN 2.6's
// gemm:jit (which packs nothing ahead of time) leaves speed on the table: Gemm/MatMul with
// constant weights and the Winograd convolution's per-position products.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/cpu/avx2/Activation.h"

namespace tandem {
namespace avx2 {

/// True when this CPU executes AVX2 and FMA3 and TANDEM_MAX_CPU_ISA does not cap below AVX2
/// (runtime/cpu/avx2/IsaCap.h); the kernels below must not be called otherwise.
bool available();

/// A K x N f32 matrix packed in column panels of 16, N padded with zero columns to a multiple
/// of 8 (so the last panel is 8 wide when the padded N % 16 == 8): panel p holds columns
/// [16p, 16p + width) as K rows of `width` contiguous floats, 32-byte aligned. sgemm stores
/// only the N real columns.
class PackedB {
 public:
  /// Packs b, whose element (k, n) is b[k * strideK + n * strideN] (strideK = N, strideN = 1 for
  /// a row-major K x N matrix; strideK = 1, strideN = K for its transpose stored N x K).
  /// Returns false (and packs nothing) when K < 1 or N < 1.
  bool pack(const float* b, int64_t K, int64_t N, int64_t strideK, int64_t strideN);
  /// Sizes the packing for a K x N matrix (K, N >= 1) and returns its storage, for the caller
  /// to fill in the panel layout above, padding columns included (contents undefined; the
  /// allocation is reused when it is large enough: DequantGemm.h's per-thread panels).
  float* allocate(int64_t K, int64_t N);
  int64_t rows() const { return K_; }
  int64_t cols() const { return N_; }
  int64_t paddedCols() const { return (N_ + 7) / 8 * 8; }
  int64_t panels() const { return (N_ + 15) / 16; }
  /// First float of panel p; its width is min(16, paddedCols() - 16p).
  const float* panel(int64_t p) const { return data_.get() + p * 16 * K_; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> data_;
  size_t capacity_ = 0;  // bytes of data_
  int64_t K_ = 0, N_ = 0;
};

/// What is applied to each result element before it is stored, in this order: + bias[n]
/// (optional, N floats), + the value C held before (accumulate: a residual sum, oneDNN's `sum`
/// post-op), max(x, 0) when relu, then the `activationCount` activations (Activation.h) over
/// each tile of up to 6 x 16 just stored, while it is in L1.
struct GemmEpilogue {
  const float* bias = nullptr;
  bool accumulate = false;
  bool relu = false;
  const ActivationStep* activations = nullptr;
  int activationCount = 0;
};

/// C[M x N] = A[M x K] * B, then the epilogue. A's rows are lda floats apart, C's ldc; no
/// alignment is required of A or C. Single-threaded over panels [panelBegin, panelEnd) of B
/// (callers split panels or rows among threads). M >= 0.
void sgemm(int64_t M, const float* A, int64_t lda, const PackedB& B, float* C, int64_t ldc,
           const GemmEpilogue& ep, int64_t panelBegin, int64_t panelEnd);

/// The same over all panels, split among `threads` OpenMP threads (1: the calling thread).
void sgemmParallel(int64_t M, const float* A, int64_t lda, const PackedB& B, float* C,
                   int64_t ldc, const GemmEpilogue& ep, int threads);

/// Where a matrix's elements are, in blocks of 8 columns: element (i, j) at
/// [i * rowStride + (j / 8) * blockStride + j % 8]. Row-major with leading dimension ld:
/// {ld, 8} (the default). One image of P positions in nChw8c (a 1x1 convolution's A or C, rows
/// = positions, columns = channels): {8, 8 * P}.
struct MatrixLayout {
  int64_t rowStride;
  int64_t blockStride = 8;
};

/// sgemm and sgemmParallel over A and C in those layouts. A blocked A (blockStride != 8) needs
/// K % 8 == 0, a blocked C N % 8 == 0 (what nChw8c's channel padding holds when the channels
/// are multiples of 8).
void sgemm(int64_t M, const float* A, MatrixLayout a, const PackedB& B, float* C,
           MatrixLayout c, const GemmEpilogue& ep, int64_t panelBegin, int64_t panelEnd);
void sgemmParallel(int64_t M, const float* A, MatrixLayout a, const PackedB& B, float* C,
                   MatrixLayout c, const GemmEpilogue& ep, int threads);

}  // namespace avx2
}  // namespace tandem

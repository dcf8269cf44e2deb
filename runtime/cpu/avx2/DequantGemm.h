// f32 GEMM against 8-bit or 4-bit quantized weights that stay quantized in memory: C = A *
// DequantizeLinear(B_q, scale, zero_point) without an f32 copy of B (weight-only quantization:
// ONNX Runtime's MatMulNBits, TensorRT-LLM's weight-only GEMM). Decoding a language model reads
// every weight once per token, so the product is bound by reading B: 1 byte a weight (or half
// of one) instead of 4.
//
// Two paths (DequantGemmPath), by the number of rows M:
//   - few rows (a decoding step): the weights are widened to f32 in registers and multiplied
//     straight away, the scale applied once per block of K (AVX-512F or AVX2 + FMA);
//   - more rows (a prefill): each panel of B is dequantized into an f32 panel in L1/L2 and
//     multiplied by Sgemm.h's micro-kernels, so the product is the f32 GEMM's, on weights equal
//     to DequantizeLinear's bit for bit.
// dequantizeColumns gives a third: blocks of B dequantized for another GEMM (oneDNN's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cpu/avx2/Sgemm.h"

namespace tandem {
namespace avx2 {

/// Where B_q and its quantization parameters come from (ONNX DequantizeLinear-21 along K for
/// blocks, along N per column): B = (float(B_q[k, n]) - float(zp)) * scale.
struct QuantBSource {
  const void* q = nullptr;      // K x N row-major, int8 or uint8
  bool isUnsigned = false;      // uint8 (else int8)
  int64_t K = 0, N = 0;
  /// f32 scales: 1 (per tensor), N (per column), or blocks x N (blockSize > 0: block b holds
  /// rows [b * blockSize, min(K, (b + 1) * blockSize)), the last may be shorter), row-major.
  const float* scale = nullptr;
  int64_t scaleCount = 0;
  /// Zero points of q's dtype, one per scale; null: 0.
  const void* zeroPoint = nullptr;
  int64_t blockSize = 0;  // 0: one block of all K rows
};

/// B_q packed in panels of 16 columns (N padded with zero columns to a multiple of 16): panel p
/// holds columns [16p, 16p + 16) as K rows of 16 int8 values d = q - c, where c is, per block
/// and column, the zero point when every q - zp of the block fits the storage (always for int8
/// with zero point 0), else the value nearest the zero point that makes every d fit. What c
/// leaves of the zero point (zp - c, usually 0) is kept as a residual per block and column,
/// with the scale. Where every block and column spans at most 16 values (4-bit weights: ONNX's
/// INT4/UINT4, widened to 8 bits at import) and blocks hold an even number of rows, d is in
/// [-8, 7] and kept in 4 bits (nibbles()): each pair of rows
/// (k, k + 1), k even, is 16 bytes, byte j holding d[k][j] + 8 in its low nibble and
/// d[k + 1][j] + 8 in its high one (a last odd row pairs with zeros): half the bytes to read
/// per weight and to keep. The register path sums the nibbles as they are (0-15) and takes 8 x
/// the block's row sum of A off with the residual zero point. Measured on one decoding step of
/// Llama-style layers with uint4 weights in blocks of 32 (AMD EPYC Zen 5, AVX-512, 1 thread):
/// hidden 2048 (45 MB of 4-bit weights, past the last-level cache) 2.5-2.6 ms in 4 bits against
/// 3.5-3.7 in 8; hidden 512 (5.6 MB, in cache, where unpacking is the cost) 0.34 against
/// 0.29-0.32. 4 bits are kept wherever they fit: weights that big are what 4-bit models hold.
class PackedQuantB {
 public:
  /// Packs `s`. Returns false (and packs nothing) with *why set when the sizes or counts do not
  /// fit: K, N >= 1; scaleCount 1, N, or ceil(K / blockSize) * N; blockSize >= 0.
  bool pack(const QuantBSource& s, std::string* why);
  int64_t rows() const { return K_; }
  int64_t cols() const { return N_; }
  int64_t panels() const { return (N_ + 15) / 16; }
  int64_t blockSize() const { return bs_; }
  int64_t blocks() const { return (K_ + bs_ - 1) / bs_; }
  /// True when some block and column has a nonzero residual zero point (the row sums of A per
  /// block are then needed).
  bool hasResidualZeroPoint() const { return residual_; }
  /// Whether d is kept in 4 bits (see above).
  bool nibbles() const { return nibbles_; }
  /// Panel p's first byte: K rows of 16 bytes, or (nibbles()) ceil(K / 2) pairs of rows.
  const int8_t* panel(int64_t p) const { return q_.data() + p * 16 * storedRows(); }
  int64_t storedRows() const { return nibbles_ ? (K_ + 1) / 2 : K_; }
  /// 16 floats each, for panel p and block b.
  const float* scale(int64_t p, int64_t b) const { return scale_.data() + (p * blocks() + b) * 16; }
  const float* residualZeroPoint(int64_t p, int64_t b) const { return zp_.data() + (p * blocks() + b) * 16; }
  /// Bytes held: the packed weights (16 x K per panel, half that in nibbles) and the scales and
  /// residual zero points (16 floats each per panel and block).
  int64_t bytes() const;

 private:
  std::vector<int8_t> q_;
  std::vector<float> scale_, zp_;
  int64_t K_ = 0, N_ = 0, bs_ = 1;
  bool residual_ = false, nibbles_ = false;
};

/// Rows at most this many take the register path where the caller leaves the choice (Auto).
/// Measured on products of 512 x 1408 and 1408 x 512 int8 weights (AMD EPYC Zen 5, 1 thread,
/// 50+ runs): the register path is the faster up to 16 rows with AVX-512 and with AVX2 (16
/// rows: 0.105 against 0.128 ms for the faster of the panel path and oneDNN on dequantized
/// columns, AVX2 0.200 against 0.212); with AVX-512 it stays ahead up to 32 rows, with AVX2 it
/// falls behind at 32; at 128 rows it is 6% (AVX-512) to 15% (AVX2) behind. Past 16 rows the
/// kernel (runtime/cpu/dnnl/DnnlDequantizeMatMul.cpp) times the paths on the instance.
int64_t dequantGemmRegisterRows();

/// Which path dequantGemm takes (see the top of this file).
enum class DequantGemmPath {
  Auto,       // Registers up to dequantGemmRegisterRows() rows, else Panels
  Registers,  // B widened in registers, scaled once per block: reads 1 byte per weight
  Panels,     // panels of B dequantized into f32 in L2, then Sgemm.h's micro-kernels
};

/// C[M x N] = A[M x K] * B, then `ep` (Sgemm.h's GemmEpilogue: bias, accumulate, relu,
/// activations). A's rows lda floats apart, C's ldc. Split among `threads` OpenMP threads (1:
/// the calling thread). Requires available() (Sgemm.h). M >= 0.
void dequantGemm(int64_t M, const float* A, int64_t lda, const PackedQuantB& B, float* C,
                 int64_t ldc, const GemmEpilogue& ep, int threads,
                 DequantGemmPath path = DequantGemmPath::Auto);

/// Panels [p0, p0 + count) of B dequantized ((q - zp) * scale, in f32, as DequantizeLinear)
/// into dst as a row-major K x (16 * count) matrix with rows ld floats apart (ld >= 16 * count;
/// the padding columns of the last panel are 0). Split among `threads` OpenMP threads.
void dequantizeColumns(const PackedQuantB& B, int64_t p0, int64_t count, float* dst, int64_t ld,
                       int threads);

/// Which vector width the register path uses on this host: "avx512" (AVX-512F, not capped by
/// TANDEM_MAX_CPU_ISA) or "avx2".
const char* dequantGemmIsa();

}  // namespace avx2
}  // namespace tandem

// C = A * DequantizeLinear(B_q) with A quantized to int8 per row and block of K: ONNX Runtime's
// accuracy level 4 of MatMulNBits (MLAS's SQNBIT_CompInt8), for 4-bit and 8-bit weights.
// Products of int8 activations and 4-bit values (an 8-bit weight as two of them) are summed in
// int32, four at a time (AVX-512 VNNI's vpdpbusd; AVX2's vpmaddubsw + vpmaddwd), and scaled
// once per block, where the f32 path (DequantGemm.h) widens every weight to f32 and takes one
// FMA per weight and row.
//
// Numbers: for each row m and block b of K, s_a = max |A[m, k]| / 127 over the block, a_q =
// round(A / s_a) (ties to even) in [-127, 127]; then Y[m, n] = sum over blocks of s_a * s_b[b, n]
// * sum_k a_q[k] * (q[k, n] - zp[b, n]). The error against f32 arithmetic is that of rounding A
// to 8 bits per block (about 2^-8 of the block's largest |A| per element), as ONNX Runtime's.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/cpu/avx2/DequantGemm.h"

namespace tandem {
namespace avx2 {

/// B of a PackedQuantB in the layout of int8 dot products, per panel of 16 columns and block:
///   - held in 4 bits (nibbles()): groups of 8 rows as 64 bytes, byte 4j + i holding row i of
///     the group in its low nibble and row 4 + i in its high one for column j (the 4-bit values
///     d + 8, 0-15, of PackedQuantB);
///   - held in 8 bits: groups of 4 rows as 64 bytes, byte 4j + i holding row i for column j as
///     u = d + 128 (0-255), whose two nibbles are summed as two 4-bit planes (16 x the high one's
///     sum plus the low one's), so that no int16 sum of the AVX2 path saturates.
/// Blocks are padded to a multiple of 8 rows (the padding rows meet A's zeros).
class PackedDotB {
 public:
  /// From `src` (any PackedQuantB); false (nothing packed) with *why set when src is empty.
  bool pack(const PackedQuantB& src, std::string* why);
  int64_t rows() const { return K_; }
  int64_t cols() const { return N_; }
  int64_t panels() const { return (N_ + 15) / 16; }
  int64_t blockSize() const { return bs_; }
  int64_t blocks() const { return (K_ + bs_ - 1) / bs_; }
  /// Whether B is held in 8 bits (else 4).
  bool eightBit() const { return eight_; }
  /// Rows per block as stored: blockSize() rounded up to a multiple of 8.
  int64_t paddedBlock() const { return pbs_; }
  /// Panel p, block b: paddedBlock() / 8 (4-bit) or / 4 (8-bit) groups of 64 bytes.
  const uint8_t* block(int64_t p, int64_t b) const {
    return q_.data() + (p * blocks() + b) * pbs_ * (eight_ ? 16 : 8);
  }
  /// 16 floats each, for panel p and block b: B's scale, and the zero point as the stored
  /// values read it (zp - c + 8, or + 128 in 8 bits; PackedQuantB::residualZeroPoint).
  const float* scale(int64_t p, int64_t b) const { return scale_.data() + (p * blocks() + b) * 16; }
  const float* zeroPoint(int64_t p, int64_t b) const { return zp_.data() + (p * blocks() + b) * 16; }
  /// Bytes held (half a byte or one per weight, plus 8 bytes of scale and zero point per
  /// block and column).
  int64_t bytes() const { return (int64_t)q_.size() + (int64_t)(scale_.size() + zp_.size()) * 4; }

 private:
  std::vector<uint8_t> q_;
  std::vector<float> scale_, zp_;
  int64_t K_ = 0, N_ = 0, bs_ = 1, pbs_ = 8;
  bool eight_ = false;
};

/// Whether dequantGemmInt8 runs on this host: AVX-512 (F, BW, VNNI) or AVX2 + FMA, within
/// TANDEM_MAX_CPU_ISA.
bool int8DotAvailable();

/// "avx512_vnni" or "avx2": the instructions dequantGemmInt8 uses here.
const char* int8DotIsa();

/// A [M x K] (rows lda floats apart) quantized as above into a_q (M x blocks x paddedBlock
/// int8, zero past K), s_a and the sums of a_q (M x blocks floats each). Exposed for the tests.
void quantizeRowsInt8(int64_t M, const float* A, int64_t lda, int64_t K, int64_t blockSize,
                      int64_t paddedBlock, int8_t* aq, float* scale, float* sum);

/// C[M x N] = A[M x K] * B (+ bias[N] when non-null), A quantized to int8 per row and block.
/// C's rows ldc floats apart. Split among `threads` OpenMP threads. Requires int8DotAvailable().
void dequantGemmInt8(int64_t M, const float* A, int64_t lda, const PackedDotB& B, float* C,
                     int64_t ldc, const float* bias, int threads);

}  // namespace avx2
}  // namespace tandem

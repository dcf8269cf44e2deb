// Tandem's DequantizeMatMul (compiler/TandemOps.td): Y = A x DequantizeLinear(B, b_scale,
// b_zero_point) + bias with B kept 8-bit. The operand checks both CPU kernels share, and the
// reference kernel (the oneDNN / AVX2 one is runtime/cpu/dnnl/DnnlDequantizeMatMul.cpp).
#pragma once

#include <memory>

#include "runtime/Kernel.h"

namespace tandem {
namespace ref {

/// The operands as the kernels read them: A [rows..., K] (rows = every dim but the last, any
/// count), B [K, N], the scale and zero point per tensor, per column or per (block, column).
struct DequantizeMatMulShape {
  int64_t rows = 0, K = 0, N = 0;
  int64_t blockSize = 0;   // the attribute (0: not blocked)
  int64_t scaleCount = 0;  // 1, N, or ceil(K / blockSize) * N
  bool hasZeroPoint = false, hasBias = false;
};

/// Checks ctx's operand types against the op's definition (A and Y f32, B u8/i8 [K, N], b_scale
/// f32 of scaleCount values, b_zero_point of B's dtype and b_scale's count, bias f32 [N]);
/// errors name the op and the operand.
Status dequantizeMatMulShape(const KernelContext& ctx, DequantizeMatMulShape* s);

/// Whether B, b_scale, b_zero_point and bias (where present) are constants.
bool dequantizeMatMulConstants(const KernelContext& ctx);

/// The reference kernel: B dequantized per run as DequantizeLinear does ((float(q) -
/// float(zp)) * scale, in f32), products summed in f64.
Status createDequantizeMatMulRef(const KernelContext& ctx, std::unique_ptr<Kernel>* out);

}  // namespace ref
}  // namespace tandem

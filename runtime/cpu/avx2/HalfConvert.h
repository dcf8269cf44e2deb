// f16 <-> f32 conversion of whole arrays with the F16C instructions (vcvtph2ps / vcvtps2ph), for
// the Cast kernels that surround every f32-computed op of an f16 model.
#pragma once
#include <cstdint>

namespace tandem {
namespace avx2 {

/// True where the packed GEMM's AVX2 + FMA kernels may run (avx2::available(), which applies
/// TANDEM_MAX_CPU_ISA) and the CPU has F16C.
bool f16cAvailable();
/// y[i] = the f16 x[i] as a float, for i < n (exact; a signaling NaN comes out quiet, with its
/// sign and payload). Requires f16cAvailable().
void halfToFloatArray(const uint16_t* x, float* y, int64_t n);
/// y[i] = the f16 nearest to x[i], ties to even; beyond the f16 range +-inf; subnormals as
/// IEEE 754 says; a NaN becomes sign | 0x7E00, as runtime/Half.h's halfFromDouble gives.
/// Bit for bit the scalar conversion's result. Requires f16cAvailable().
void floatToHalfArray(const float* x, uint16_t* y, int64_t n);

}  // namespace avx2
}  // namespace tandem

// AVX2 Dropout in training mode: the Philox4x32-10 mask of runtime/Philox.h (DropoutMask) for 8
// blocks (32 elements) at a time, its 32 x 32 -> 64-bit round products by vpmuludq. The scalar
// draw took about 6 ns an element here (Intel Xeon, family 6 model 167; the Keras MNIST CNN's
// [128, 64, 12, 12] Dropout 8 ms, four of them a training step), this about 1.
#pragma once

#include <cstdint>

#include "runtime/Philox.h"

namespace tandem {
namespace avx2 {

/// y[i] = keep(i) ? x[i] * scale : 0 and, when mask is not null, mask[i] = keep(i), for i in
/// [0, n), keep(i) = DropoutMask::keep(i): bit-identical to the scalar mask on every thread
/// count. x and y may be the same buffer. Uses up to `threads` OpenMP threads. Call only when
/// avx2::available() (runtime/cpu/avx2/Sgemm.h).
void dropoutF32(const DropoutMask& m, float scale, int64_t n, int threads, const float* x, float* y,
                bool* mask);

}  // namespace avx2
}  // namespace tandem

// Just enough of CUDA to compile generated kernels as host C++ and run them as one thread of one
// block (blockDim = gridDim = 1 unless a test sets gridDim/blockIdx to walk blocks): shuffles
// return the lane's own value (what an out-of-range __shfl_down_sync gives), barriers do nothing,
// the _rn intrinsics are one IEEE operation each (volatile keeps GCC from contracting them; the
// x86-64 build has no FMA anyway). Include inside a namespace, before the dumped sources.
#pragma once
// The CUDA headers (through runtime/cuda/CudaCommon.h) define these for nvcc's host pass.
#undef __global__
#undef __device__
#undef __forceinline__
#undef __restrict__
#undef __shared__
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
struct Dim3 {
  unsigned x;
};
inline Dim3 blockIdx{0}, blockDim{1}, gridDim{1}, threadIdx{0};
template <class T>
T __shfl_down_sync(unsigned, T v, int) { return v; }
template <class T>
T __shfl_xor_sync(unsigned, T v, int) { return v; }
inline void __syncthreads() {}
inline float __int_as_float(int i) {
  float f;
  __builtin_memcpy(&f, &i, 4);
  return f;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
inline double __dadd_rn(double a, double b) { volatile double r = a + b; return r; }

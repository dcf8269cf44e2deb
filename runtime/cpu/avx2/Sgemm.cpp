// AVX2 + FMA f32 GEMM over a prepacked B: micro-kernels of up to 6 rows x 16 columns.
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/avx2/IsaCap.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#define TANDEM_AVX2 __attribute__((target("avx2,fma")))

namespace tandem {
namespace avx2 {

bool available() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         cpuIsaCap() >= CpuIsaCap::Avx2;
  return ok;
}

void PackedB::Free::operator()(float* p) const { std::free(p); }

bool PackedB::pack(const float* b, int64_t K, int64_t N, int64_t strideK, int64_t strideN) {
  if (K < 1 || N < 1) return false;
  allocate(K, N);
  for (int64_t p = 0; p < panels(); ++p) {
    int64_t n0 = p * 16, width = std::min<int64_t>(16, paddedCols() - n0);
    int64_t valid = std::min<int64_t>(width, N - n0);
    float* dst = data_.get() + p * 16 * K;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < width; ++j)
        dst[k * width + j] = j < valid ? b[k * strideK + (n0 + j) * strideN] : 0.f;
  }
  return true;
}

float* PackedB::allocate(int64_t K, int64_t N) {
  K_ = K;
  N_ = N;
  size_t bytes = (size_t)K * (size_t)paddedCols() * sizeof(float);
  bytes = (bytes + 63) / 64 * 64;
  if (bytes > capacity_) {
    data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    capacity_ = bytes;
  }
  return data_.get();
}

namespace {

// A micro-kernel's view of A and C (MatrixLayout, 8-wide blocks): A(i, k) is
// a[i * lda + (k / 8) * akb + k % 8], C(i, n) is c[i * ldc + (n / 8) * ccb + n % 8].
struct TileArgs {
  int64_t lda, akb, ldc, ccb;
};

// MR rows x (8 * NV) columns of C, accumulated over all K in registers, then the epilogue.
// MR * NV accumulators + NV B vectors + 1 broadcast stay within the 16 ymm registers. The
// accumulators are named variables, not an array: GCC 12 keeps an array of __m256 on the stack
// and reloads it every iteration (half speed, measured).
#define TANDEM_ROW(r)                                                   \
  if constexpr (MR > r) {                                               \
    __m256 x = _mm256_broadcast_ss(a + r * t.lda + kk);                 \
    c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);                          \
    if constexpr (NV > 1) c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);    \
  }
#define TANDEM_STORE(r)                                                 \
  if constexpr (MR > r) {                                               \
    store(C + r * t.ldc, c##r##0, bias0);                               \
    if constexpr (NV > 1) store(C + r * t.ldc + ccb, c##r##1, bias1);   \
  }
// Blocked: A or C blocked (TileArgs' akb and ccb); else both row-major (akb = ccb = 8, known to
// the compiler: the per-tile overhead shows at K = 32, 6-8% of a 1x1 convolution's GEMM).
template <int MR, int NV, bool Blocked>
TANDEM_AVX2 void microKernel(int64_t K, const float* A, TileArgs t, const float* Bp,
                             float* C, const float* bias, bool accumulate, bool relu) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
         c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k0 = 0; k0 < K; k0 += 8) {
    const float* a = A + (k0 / 8) * (Blocked ? t.akb : 8);
    const int64_t depth = std::min<int64_t>(8, K - k0);
    for (int64_t kk = 0; kk < depth; ++kk) {
      __m256 b0 = _mm256_load_ps(Bp), b1;
      if constexpr (NV > 1) b1 = _mm256_load_ps(Bp + 8);
      Bp += 8 * NV;
      TANDEM_ROW(0) TANDEM_ROW(1) TANDEM_ROW(2) TANDEM_ROW(3) TANDEM_ROW(4) TANDEM_ROW(5)
    }
  }
  const int64_t ccb = Blocked ? t.ccb : 8;
  const __m256 zero = _mm256_setzero_ps();
  const __m256 bias0 = bias ? _mm256_loadu_ps(bias) : zero;
  const __m256 bias1 = bias && NV > 1 ? _mm256_loadu_ps(bias + 8) : zero;
  auto store = [&](float* out, __m256 y, __m256 bv) TANDEM_AVX2 {
    y = _mm256_add_ps(y, bv);
    if (accumulate) y = _mm256_add_ps(y, _mm256_loadu_ps(out));
    if (relu) y = _mm256_max_ps(y, zero);
    _mm256_storeu_ps(out, y);
  };
  TANDEM_STORE(0) TANDEM_STORE(1) TANDEM_STORE(2) TANDEM_STORE(3) TANDEM_STORE(4) TANDEM_STORE(5)
}
#undef TANDEM_ROW
#undef TANDEM_STORE

// The 5- and 6-row x 16-column kernels, which do nearly all of the work (row blocks are split
// 6,6,5,5,5,5 and so on), in inline assembly: the K loop unrolled by 4 (row-major A) or 8 (a
// blocked A: one 8-wide block of columns, after which A's pointers jump to the next channel
// block) with A's rows addressed from two base pointers (rows 0-2 and 3-5, + lda and
// + 2 * lda), so that one k step is 2 B loads, MR broadcasts and 2 * MR FMAs with nothing else.
// (Unrolling the row-major loop by 8 as well was 2% slower over seven GEMM shapes, stand-alone,
// alternated 3 times.) GCC compiles the intrinsics above to
// 27 instructions per k for 6 rows (address arithmetic and loop counting each step) and spills
// accumulators when asked to unroll. Measured on MLP's two GEMMs (32 x 784 x 512, 32 x 512 x 512),
// 1 thread, 40 alternating windows of 300 runs: the same minimum (0.43 ms) and a 10% lower
// median (0.50 against 0.56 ms): with fewer instructions per FMA the kernel loses less when the
// host's other hyperthread competes for the core. B as a memory operand of each FMA (18 loads
// per k instead of 8) was 60% slower. Accumulators ymm0-11, B ymm12-13, broadcasts ymm14-15.
#define TANDEM_FMA_ROW(acc0, acc1, addr, t)                                  \
  "vbroadcastss " addr ", %%" t "\n\t"                                     \
  "vfmadd231ps %%ymm12, %%" t ", %%" acc0 "\n\t"                           \
  "vfmadd231ps %%ymm13, %%" t ", %%" acc1 "\n\t"
#define TANDEM_LOAD_B(U)                                                   \
  "vmovaps " #U "*64(%[b]), %%ymm12\n\t"                                   \
  "vmovaps " #U "*64+32(%[b]), %%ymm13\n\t"
#define TANDEM_STEP5(U)                                                    \
  TANDEM_LOAD_B(U)                                                         \
  TANDEM_FMA_ROW("ymm0", "ymm1", #U "*4(%[a0])", "ymm14")                  \
  TANDEM_FMA_ROW("ymm2", "ymm3", #U "*4(%[a0],%[ld],1)", "ymm15")          \
  TANDEM_FMA_ROW("ymm4", "ymm5", #U "*4(%[a0],%[ld],2)", "ymm14")          \
  TANDEM_FMA_ROW("ymm6", "ymm7", #U "*4(%[a3])", "ymm15")                  \
  TANDEM_FMA_ROW("ymm8", "ymm9", #U "*4(%[a3],%[ld],1)", "ymm14")
#define TANDEM_STEP6(U)                                                    \
  TANDEM_STEP5(U)                                                          \
  TANDEM_FMA_ROW("ymm10", "ymm11", #U "*4(%[a3],%[ld],2)", "ymm15")
#define TANDEM_ZERO(r) "vxorps %%" r ", %%" r ", %%" r "\n\t"
#define TANDEM_SAVE(r, off) "vmovaps %%" r ", " #off "(%[out])\n\t"
#define TANDEM_UNROLL4(STEP) STEP(0) STEP(1) STEP(2) STEP(3)
#define TANDEM_UNROLL8(STEP) STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)
// UNROLLED: the loop body; BBYTES: its B bytes; ASTEP: its step of A's pointers.
#define TANDEM_ASM_KERNEL(STEP, UNROLLED, BBYTES, ASTEP)                                      \
  __asm__ volatile(                                                                           \
      TANDEM_ZERO("ymm0") TANDEM_ZERO("ymm1") TANDEM_ZERO("ymm2") TANDEM_ZERO("ymm3")         \
      TANDEM_ZERO("ymm4") TANDEM_ZERO("ymm5") TANDEM_ZERO("ymm6") TANDEM_ZERO("ymm7")         \
      TANDEM_ZERO("ymm8") TANDEM_ZERO("ymm9") TANDEM_ZERO("ymm10") TANDEM_ZERO("ymm11")       \
      "test %[nu], %[nu]\n\t"                                                                 \
      "jz 2f\n\t"                                                                             \
      ".p2align 4\n"                                                                          \
      "1:\n\t" UNROLLED                                                                       \
      "add $" BBYTES ", %[b]\n\t"                                                             \
      "add " ASTEP ", %[a0]\n\t"                                                              \
      "add " ASTEP ", %[a3]\n\t"                                                              \
      "dec %[nu]\n\t"                                                                         \
      "jnz 1b\n"                                                                              \
      "2:\n\t"                                                                                \
      "test %[n1], %[n1]\n\t"                                                                 \
      "jz 4f\n"                                                                               \
      "3:\n\t" STEP(0)                                                                        \
      "add $64, %[b]\n\t"                                                                     \
      "add $4, %[a0]\n\t"                                                                     \
      "add $4, %[a3]\n\t"                                                                     \
      "dec %[n1]\n\t"                                                                         \
      "jnz 3b\n"                                                                              \
      "4:\n\t" TANDEM_SAVE("ymm0", 0) TANDEM_SAVE("ymm1", 32) TANDEM_SAVE("ymm2", 64)         \
      TANDEM_SAVE("ymm3", 96) TANDEM_SAVE("ymm4", 128) TANDEM_SAVE("ymm5", 160)               \
      TANDEM_SAVE("ymm6", 192) TANDEM_SAVE("ymm7", 224) TANDEM_SAVE("ymm8", 256)              \
      TANDEM_SAVE("ymm9", 288) TANDEM_SAVE("ymm10", 320) TANDEM_SAVE("ymm11", 352)            \
      : [a0] "+r"(a0), [a3] "+r"(a3), [b] "+r"(Bp), [nu] "+r"(nu), [n1] "+r"(n1)              \
      : [ld] "r"(ldBytes), [kb] "r"(kbBytes), [out] "r"(acc)                                  \
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",        \
        "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc")

// A blocked A (akb != 8) has K % 8 == 0; a row-major one's last K % 4 steps follow the loop.
template <int MR, bool Blocked>
TANDEM_AVX2 void asmKernel16(int64_t K, const float* A, TileArgs t, const float* Bp,
                             float* C, const float* bias, bool accumulate, bool relu) {
  static_assert(MR == 5 || MR == 6);
  alignas(32) float acc[6 * 16];
  const float* a0 = A;
  const float* a3 = A + 3 * t.lda;
  int64_t ldBytes = t.lda * (int64_t)sizeof(float), kbBytes = t.akb * (int64_t)sizeof(float);
  if (!Blocked || t.akb == 8) {
    int64_t nu = K / 4, n1 = K % 4;
    if constexpr (MR == 6)
      TANDEM_ASM_KERNEL(TANDEM_STEP6, TANDEM_UNROLL4(TANDEM_STEP6), "256", "$16");
    else
      TANDEM_ASM_KERNEL(TANDEM_STEP5, TANDEM_UNROLL4(TANDEM_STEP5), "256", "$16");
  } else {
    int64_t nu = K / 8, n1 = 0;
    if constexpr (MR == 6)
      TANDEM_ASM_KERNEL(TANDEM_STEP6, TANDEM_UNROLL8(TANDEM_STEP6), "512", "%[kb]");
    else
      TANDEM_ASM_KERNEL(TANDEM_STEP5, TANDEM_UNROLL8(TANDEM_STEP5), "512", "%[kb]");
  }
  const __m256 zero = _mm256_setzero_ps();
  const __m256 bias0 = bias ? _mm256_loadu_ps(bias) : zero;
  const __m256 bias1 = bias ? _mm256_loadu_ps(bias + 8) : zero;
  for (int r = 0; r < MR; ++r) {
    float* out0 = C + r * t.ldc;
    float* out1 = out0 + (Blocked ? t.ccb : 8);
    __m256 y0 = _mm256_add_ps(_mm256_load_ps(acc + 16 * r), bias0);
    __m256 y1 = _mm256_add_ps(_mm256_load_ps(acc + 16 * r + 8), bias1);
    if (accumulate) {
      y0 = _mm256_add_ps(y0, _mm256_loadu_ps(out0));
      y1 = _mm256_add_ps(y1, _mm256_loadu_ps(out1));
    }
    if (relu) {
      y0 = _mm256_max_ps(y0, zero);
      y1 = _mm256_max_ps(y1, zero);
    }
    _mm256_storeu_ps(out0, y0);
    _mm256_storeu_ps(out1, y1);
  }
}
#undef TANDEM_FMA_ROW
#undef TANDEM_LOAD_B
#undef TANDEM_STEP5
#undef TANDEM_STEP6
#undef TANDEM_ZERO
#undef TANDEM_SAVE
#undef TANDEM_ASM_KERNEL
#undef TANDEM_UNROLL4
#undef TANDEM_UNROLL8

using MicroFn = void (*)(int64_t, const float*, TileArgs, const float*, float*,
                         const float*, bool, bool);

template <int NV, bool Blocked>
MicroFn pick(int64_t rows) {
  switch (rows) {
    case 1: return microKernel<1, NV, Blocked>;
    case 2: return microKernel<2, NV, Blocked>;
    case 3: return microKernel<3, NV, Blocked>;
    case 4: return microKernel<4, NV, Blocked>;
    case 5: return NV == 2 ? asmKernel16<5, Blocked> : microKernel<5, NV, Blocked>;
    default: return NV == 2 ? asmKernel16<6, Blocked> : microKernel<6, NV, Blocked>;
  }
}

// K is split into the fewest slices of at most kKc, of near-equal depth (784: 392 + 392, not
// 256 + 256 + 256 + 16): a panel's slice (up to 32 KiB) stays in L1/L2 while every row block of
// A streams past it, and partial sums go through C once per slice. Measured on MLP (1 thread,
// 4 alternating rounds of `tandem bench`): medians 0.46-0.52 ms against 0.48-0.55 ms with
// 256-deep slices (and 256 + 256 + 256 + 16), minima 0.437 against 0.444 ms; 400-deep was
// no better than 256.
constexpr int64_t kKc = 512;
// Bytes of A's row chunk (rows x slice depth) kept for every panel: within a 512 KiB-1 MiB L2
// beside the panel's slice and C's rows. Measured on RegNetX-400MF's 1x1 convolutions, nChw8c,
// batch 32 (AMD EPYC Zen 5 capped to AVX2, 1 thread, 2 rounds of 15 runs, medians): 32 -> 32
// channels at 112x112 10.2-10.6 -> 9.9-10.0 ms, 64 -> 64 at 56x56 7.4-7.5 -> 7.1-7.3 ms; the
// deeper ones (160, 400 channels), whose rows all fit, unchanged.
constexpr int64_t kMcBytes = 192 * 1024;

// Slice [k0, k0 + kc) of panel p against every row block of A (rows [rowBegin, rowEnd)).
// k0 is a multiple of 8 where A is blocked.
inline void panelSlice(int64_t rowBegin, int64_t rowEnd, const float* A, MatrixLayout al,
                       const PackedB& B, float* C, MatrixLayout cl, const GemmEpilogue& ep,
                       int64_t p, int64_t k0, int64_t kc, bool prefetchNext) {
  const int64_t K = B.rows(), N = B.cols();
  const bool last = k0 + kc == K;
  const bool accumulate = k0 > 0 || ep.accumulate, relu = last && ep.relu;
  const int64_t n0 = p * 16;
  const bool wide = B.paddedCols() - n0 >= 16;
  const int64_t width = wide ? 16 : 8, valid = std::min(width, N - n0);
  const float* Bp = B.panel(p) + k0 * width;
  const float* bias = last && ep.bias ? ep.bias + n0 : nullptr;
  // Row blocks of near-equal height (32 rows: 6,6,5,5,5,5, not 6,6,6,6,6,2): a short block has
  // too few accumulators to hide the FMA latency.
  const int64_t m = rowEnd - rowBegin, blocks = (m + 5) / 6;
  // Where the panel's last columns are padding (N % 8 != 0) the kernel works on a 6 x 16 tile
  // and only the valid columns go to C (and come from it first when accumulating).
  const bool padded = valid < width;
  alignas(32) float tile[6 * 16];
  float biasPad[16];
  if (padded && bias) {
    std::fill(biasPad, biasPad + 16, 0.f);
    std::copy(bias, bias + valid, biasPad);
  }
  // (Padding only occurs with a row-major C: a blocked one has N % 8 == 0.)
  const float* aSlice = A + (k0 / 8) * al.blockStride + k0 % 8;
  const bool blocked = al.blockStride != 8 || cl.blockStride != 8;
  // The next panel's slice is prefetched a share per row block while this one computes, where
  // both slices fit in 32 KiB of L1 together: otherwise the first row block of every panel
  // waits on the last-level cache or memory for weights that are read once per run. Measured
  // in-model (AMD EPYC Zen 5 capped to AVX2, 1 thread, 4-6 alternating `tandem bench` runs):
  // gpt_like at batch 1 (64 x 256 x 768 and x 1024, 256-deep slices) 4.1-4.5 -> 3.7-4.1 ms;
  // MLP at batch 32 (392- and 512-deep slices, 25-32 KiB each) 3% slower when prefetched too,
  // so it is not.
  const char* next = nullptr;
  int64_t nextLines = 0;
  if (prefetchNext && 2 * kc * width * (int64_t)sizeof(float) <= 32 * 1024) {
    const int64_t nextWidth = B.paddedCols() - n0 - 16 >= 16 ? 16 : 8;
    next = reinterpret_cast<const char*>(B.panel(p + 1) + k0 * nextWidth);
    nextLines = (kc * nextWidth * (int64_t)sizeof(float) + 63) / 64;
  }
  for (int64_t bi = 0, i = rowBegin; bi < blocks; ++bi) {
    int64_t rows = m / blocks + (bi < m % blocks ? 1 : 0);
    for (int64_t l = nextLines * bi / blocks, e = nextLines * (bi + 1) / blocks; l < e; ++l)
      _mm_prefetch(next + l * 64, _MM_HINT_T1);
    float* out = C + i * cl.rowStride + (n0 / 8) * cl.blockStride;
    TileArgs t{al.rowStride, al.blockStride, cl.rowStride, cl.blockStride};
    if (padded) {
      if (accumulate)
        for (int64_t r = 0; r < rows; ++r)
          std::copy(out + r * cl.rowStride, out + r * cl.rowStride + valid, tile + r * 16);
      out = tile;
      t.ldc = 16;
      t.ccb = 8;
    }
    MicroFn f = blocked ? (wide ? pick<2, true>(rows) : pick<1, true>(rows))
                        : (wide ? pick<2, false>(rows) : pick<1, false>(rows));
    f(kc, aSlice + i * al.rowStride, t, Bp, out, padded && bias ? biasPad : bias, accumulate,
      relu);
    if (last && ep.activationCount > 0)
      applyActivationsTile(ep.activations, ep.activationCount, out, rows, valid, t.ldc, t.ccb);
    if (padded)
      for (int64_t r = 0; r < rows; ++r)
        std::copy(tile + r * 16, tile + r * 16 + valid, C + (i + r) * cl.rowStride + n0);
    i += rows;
  }
}

void rowsPanels(int64_t rowBegin, int64_t rowEnd, const float* A, MatrixLayout al,
                const PackedB& B, float* C, MatrixLayout cl, const GemmEpilogue& ep,
                int64_t panelBegin, int64_t panelEnd) {
  // A blocked A is sliced in whole 8-column blocks.
  const int64_t unit = al.blockStride == 8 ? 1 : 8, K = B.rows() / unit;
  // One K slice of A (M x kc) stays in L1/L2 while every panel passes, and A and B are each
  // read from memory once even when A does not fit in L2 (MNIST's 32 x 9216). Measured against
  // panel-outer order (B streaming panel after panel) on MLP's 32 x 784 x 512 and 32 x 512 x 512,
  // 10 alternating runs on this noisy 2-vCPU machine: 5-10% faster on average, never slower by
  // more than the noise.
  const int64_t slices = (K * unit + kKc - 1) / kKc;
  // Rows in chunks whose A slice fits kMcBytes, each passing every panel before the next
  // starts: with many rows (a 1x1 convolution's pixels) the slice of all rows is larger than
  // L2, and every panel after the first would read it again from L3 or memory.
  const int64_t kcMax = (K / slices + (K % slices ? 1 : 0)) * unit;
  const int64_t mc = std::max<int64_t>(48, kMcBytes / (kcMax * 4) / 6 * 6);
  const int64_t m = rowEnd - rowBegin, chunks = std::max<int64_t>(1, (m + mc - 1) / mc);
  for (int64_t c = 0; c < chunks; ++c) {
    // Chunk boundaries on multiples of 6 rows (whole micro-tiles), the last taking the rest.
    const int64_t r0 = rowBegin + m * c / chunks / 6 * 6;
    const int64_t r1 = c + 1 == chunks ? rowEnd : rowBegin + m * (c + 1) / chunks / 6 * 6;
    for (int64_t s = 0, k0 = 0; s < slices; ++s) {
      const int64_t kc = (K / slices + (s < K % slices ? 1 : 0)) * unit;
      for (int64_t p = panelBegin; p < panelEnd; ++p)
        panelSlice(r0, r1, A, al, B, C, cl, ep, p, k0, kc, p + 1 < panelEnd);
      k0 += kc;
    }
  }
}

}  // namespace

void sgemm(int64_t M, const float* A, int64_t lda, const PackedB& B, float* C, int64_t ldc,
           const GemmEpilogue& ep, int64_t panelBegin, int64_t panelEnd) {
  rowsPanels(0, M, A, MatrixLayout{lda}, B, C, MatrixLayout{ldc}, ep, panelBegin, panelEnd);
}

void sgemmParallel(int64_t M, const float* A, int64_t lda, const PackedB& B, float* C,
                   int64_t ldc, const GemmEpilogue& ep, int threads) {
  sgemmParallel(M, A, MatrixLayout{lda}, B, C, MatrixLayout{ldc}, ep, threads);
}

void sgemm(int64_t M, const float* A, MatrixLayout al, const PackedB& B, float* C,
           MatrixLayout cl, const GemmEpilogue& ep, int64_t panelBegin, int64_t panelEnd) {
  rowsPanels(0, M, A, al, B, C, cl, ep, panelBegin, panelEnd);
}

void sgemmParallel(int64_t M, const float* A, MatrixLayout al, const PackedB& B, float* C,
                   MatrixLayout cl, const GemmEpilogue& ep, int threads) {
  const int64_t panels = B.panels();
  if (threads <= 1 || M == 0) {
    rowsPanels(0, M, A, al, B, C, cl, ep, 0, panels);
    return;
  }
  // Split whichever operand is larger, so that each thread keeps only its share of it: the
  // panels (every thread reads all of A, its share of B) when A has no more rows than B has
  // columns and there are enough panels, else the rows in multiples of the micro-kernel's 6
  // (every thread reads all of B). Splitting the panels of a 1x1 convolution's GEMM (3136 x 64
  // x 64, nChw8c; AMD EPYC Zen 5 capped to AVX2, 2 threads) took each thread 150-180 us for
  // half the work that one thread does in 190 us: both threads held all 800 KiB of A beside
  // their C in a 1 MiB L2. Split by rows, 102-105 us each.
  const bool byPanels = panels >= 2 * threads && M <= B.paddedCols();
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    if (byPanels) {
      int64_t b = panels * t / n, e = panels * (t + 1) / n;
      rowsPanels(0, M, A, al, B, C, cl, ep, b, e);
    } else {
      int64_t blocks = (M + 5) / 6;
      int64_t b = std::min(M, blocks * t / n * 6), e = std::min(M, blocks * (t + 1) / n * 6);
      rowsPanels(b, e, A, al, B, C, cl, ep, 0, panels);
    }
  }
}

}  // namespace avx2
}  // namespace tandem

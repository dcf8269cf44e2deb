// TANDEM_MAX_CPU_ISA: one switch that caps the instruction sets of Tandem's own CPU kernels and
// of oneDNN's, so an AVX-512 host can also run (and test) the AVX2 paths.
#pragma once

namespace tandem {

/// The most capable x86 instruction set CPU kernels may use, from the environment variable
/// TANDEM_MAX_CPU_ISA (read once per process; case-insensitive): "sse41", "avx", "avx2",
/// "avx512" (= "avx512_core"). Unset or empty: no cap (Unlimited). Any other value is ignored
/// with one warning on stderr. The cap never enables what the CPU lacks.
enum class CpuIsaCap { Sse41 = 1, Avx = 2, Avx2 = 3, Avx512 = 4, Unlimited = 5 };
CpuIsaCap cpuIsaCap();

}  // namespace tandem

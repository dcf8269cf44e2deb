// TANDEM_MAX_CPU_ISA parsing (runtime/cpu/avx2/IsaCap.h).
#include "runtime/cpu/avx2/IsaCap.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tandem {

CpuIsaCap cpuIsaCap() {
  static const CpuIsaCap cap = [] {
    const char* env = std::getenv("TANDEM_MAX_CPU_ISA");
    if (!env || !*env) return CpuIsaCap::Unlimited;
    std::string v;
    for (const char* p = env; *p; ++p) v += (char)std::tolower((unsigned char)*p);
    if (v == "sse41") return CpuIsaCap::Sse41;
    if (v == "avx") return CpuIsaCap::Avx;
    if (v == "avx2") return CpuIsaCap::Avx2;
    if (v == "avx512" || v == "avx512_core") return CpuIsaCap::Avx512;
    std::fprintf(stderr,
                 "tandem: warning: TANDEM_MAX_CPU_ISA=%s is not one of sse41, avx, avx2, avx512; "
                 "ignored\n", env);
    return CpuIsaCap::Unlimited;
  }();
  return cap;
}

}  // namespace tandem

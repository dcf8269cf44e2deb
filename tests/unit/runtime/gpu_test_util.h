// For `gpu`-labelled tests: why cuda:0 cannot be used here, and a skip that prints the reason
// (the kit's run.sh and ctest read "SKIPPED:" as a skip, never a pass).
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "runtime/Backend.h"

namespace tandem {

/// Why no CUDA backend can be created on cuda:0 (no build support, driver, device or library),
/// or "" when there is one. Asked once per process.
inline const std::string& noGpuReason() {
  static const std::string why = [] {
    std::unique_ptr<DeviceBackend> b;
    Status st = createCudaBackend(0, BackendOptions{}, &b);
    return st.isOk() ? std::string() : st.message();
  }();
  return why;
}

}  // namespace tandem

#define REQUIRE_GPU()                                                                        \
  do {                                                                                       \
    if (!::tandem::noGpuReason().empty()) {                                                  \
      std::printf("SKIPPED: no CUDA device (%s)\n", ::tandem::noGpuReason().c_str());        \
      GTEST_SKIP() << "no CUDA device (" << ::tandem::noGpuReason() << ")";                  \
    }                                                                                        \
  } while (0)

// What the fuzz targets share: the per-tensor byte limit they run under, quiet protobuf.
#pragma once
#include <google/protobuf/stubs/logging.h>

#include <cstdlib>

namespace tandem::fuzz {

/// A tensor the size of the host's memory is a legitimate refusal, not a finding, but the
/// fuzzer's 2 GiB RSS limit would report it as one: the targets lower the limit on one tensor's
/// bytes (TANDEM_MAX_TENSOR_BYTES, runtime/CheckedMath.h) to 64 MiB unless the caller set it.
inline void limitTensorBytes() { setenv("TANDEM_MAX_TENSOR_BYTES", "67108864", /*overwrite=*/0); }

/// Every target calls this once: the byte limit above, and protobuf's parse warnings (invalid
/// UTF-8 in a string field, thousands per second) dropped: a parse is accepted or refused, and
/// the target sees which.
inline void initialize() {
  limitTensorBytes();
  google::protobuf::SetLogHandler(nullptr);
}

}  // namespace tandem::fuzz

// Overflow-checked size arithmetic for shapes that come from untrusted input (models, plans,
// tensor files): element counts, byte sizes and offsets, and the limit on one tensor's bytes.
// Header-only and MLIR-free, so the compiler, the runtime and the tools share one definition.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace tandem {

/// a * b into *out; false (and *out unspecified) when the product overflows int64.
inline bool checkedMul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
/// a + b into *out; false when the sum overflows int64.
inline bool checkedAdd(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

/// Product of `dims` (1 for rank 0) into *out. False when a dim is negative or the product
/// overflows int64; a 0 dim makes the product 0 whatever the other dims are.
inline bool checkedNumElements(const std::vector<int64_t>& dims, int64_t* out) {
  int64_t n = 1;
  bool zero = false, overflow = false;
  for (int64_t d : dims) {
    if (d < 0) return false;
    if (d == 0) zero = true;
    else if (!overflow && !checkedMul(n, d, &n)) overflow = true;
  }
  if (zero) n = 0;
  else if (overflow) return false;
  *out = n;
  return true;
}

/// Bytes of a dense tensor of `dims` with `elemSize`-byte elements into *out; false on a
/// negative dim or overflow.
inline bool checkedByteSize(const std::vector<int64_t>& dims, int64_t elemSize, int64_t* out) {
  int64_t n;
  return checkedNumElements(dims, &n) && checkedMul(n, elemSize, out);
}

/// The most bytes one tensor may have (a model, plan or input file asking for more is refused
/// before anything is allocated): the environment variable TANDEM_MAX_TENSOR_BYTES when set to
/// a positive integer (raises or lowers it), else the host's physical memory (no tensor larger
/// than that can be allocated; a device tensor is bounded by its device's memory, which is
/// smaller than the host's on every machine Tandem targets). Read once per process.
inline int64_t maxTensorBytes() {
  static const int64_t limit = [] {
    if (const char* e = std::getenv("TANDEM_MAX_TENSOR_BYTES")) {
      char* end = nullptr;
      long long v = std::strtoll(e, &end, 10);
      if (end && *end == '\0' && v > 0) return (int64_t)v;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    int64_t bytes;
    if (pages <= 0 || page <= 0 || !checkedMul(pages, page, &bytes)) return INT64_MAX;
    return bytes;
  }();
  return limit;
}

/// "[2,3]" for messages (no MLIR, no runtime Tensor needed).
inline std::string dimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

/// Checks a tensor of `dims` and `elemSize`-byte elements can exist: no negative dim, its
/// element count and byte size fit int64, and the bytes are within maxTensorBytes(). Returns ""
/// or a message naming the shape ("shape [4294967297,4294967297] of f32: the element count
/// overflows 64 bits"); `dtype` is the element type's name for the message. On success *bytes
/// (may be null) receives the byte size.
inline std::string checkTensorSize(const std::vector<int64_t>& dims, int64_t elemSize,
                                   const std::string& dtype, int64_t* bytes = nullptr) {
  for (int64_t d : dims)
    if (d < 0) return "shape " + dimsText(dims) + " has a negative dim";
  int64_t n, b;
  if (!checkedNumElements(dims, &n))
    return "shape " + dimsText(dims) + " of " + dtype + ": the element count overflows 64 bits";
  if (!checkedMul(n, elemSize, &b))
    return "shape " + dimsText(dims) + " of " + dtype + ": " + std::to_string(n) +
           " elements, whose byte size overflows 64 bits";
  if (b > maxTensorBytes())
    return "shape " + dimsText(dims) + " of " + dtype + " needs " + std::to_string(b) +
           " bytes, more than the limit of " + std::to_string(maxTensorBytes()) +
           " bytes for one tensor (TANDEM_MAX_TENSOR_BYTES raises it)";
  if (bytes) *bytes = b;
  return "";
}

}  // namespace tandem

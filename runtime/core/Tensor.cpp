// Tensor storage: owned 64-byte aligned buffers or borrowed views.
#include "runtime/Tensor.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace tandem {

int64_t numElements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shapeToString(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << "]";
  return os.str();
}

Tensor Tensor::alloc(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  size_t bytes = t.bytes();
  size_t rounded = ((bytes + 63) / 64) * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  assert(p && "out of host memory");
  std::memset(p, 0, rounded);
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::view(DType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

Tensor Tensor::copyOf(const Tensor& src) {
  Tensor t = alloc(src.dtype_, src.shape_);
  if (src.bytes()) std::memcpy(t.data_, src.data_, src.bytes());
  t.device_ = src.device_;
  return t;
}

Tensor Tensor::reshaped(Shape s) const {
  assert(numElements(s) == numel() && "reshape changes element count");
  Tensor t = *this;
  t.shape_ = std::move(s);
  return t;
}

}  // namespace tandem

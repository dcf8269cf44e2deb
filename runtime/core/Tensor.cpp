// Tensor storage: owned 64-byte aligned buffers or borrowed views.
#include "runtime/Tensor.h"

#include "runtime/CheckedMath.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <cstdlib>
#include <cstring>

namespace tandem {

int64_t numElements(const Shape& s) {
  int64_t n;
  return checkedNumElements(s, &n) ? n : -1;
}

std::string shapeToString(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ',';
    r += std::to_string(s[i]);
  }
  r += ']';
  return r;
}

namespace {
// A tensor of `bytes` takes this many: rounded up to the alignment (aligned_alloc's contract;
// cannot overflow below the size limit), at least one 64-byte line.
size_t allocationBytes(size_t bytes) { return std::max<size_t>(64, (bytes + 63) / 64 * 64); }

// A tensor of `dtype` and `shape`, zeroed (with its round-up) when `zero`; `what()` names it in
// an error, built only then.
template <typename Name>
Status allocate(DType dtype, Shape shape, bool zero, const Name& what, Tensor* out) {
  int64_t bytes = 0;
  std::string err = checkTensorSize(shape, (int64_t)dtypeSize(dtype), dtypeName(dtype), &bytes);
  if (!err.empty()) return Status::error(what() + ": " + err);
  void* p = std::aligned_alloc(64, allocationBytes((size_t)bytes));
  if (!p)
    return Status::error("out of memory allocating " + std::to_string(bytes) + " bytes for " + what());
  if (zero) std::memset(p, 0, allocationBytes((size_t)bytes));
  *out = Tensor::adopt(dtype, std::move(shape), std::shared_ptr<void>(p, [](void* q) { std::free(q); }));
  return Status::ok();
}
}  // namespace

Status Tensor::tryAlloc(DType dtype, Shape shape, const std::string& what, Tensor* out) {
  return allocate(dtype, std::move(shape), /*zero=*/true, [&] { return what; }, out);
}

Status Tensor::tryAllocUninitialized(DType dtype, Shape shape, const std::string& what, Tensor* out) {
  return allocate(dtype, std::move(shape), /*zero=*/false, [&] { return what; }, out);
}

Tensor Tensor::alloc(DType dtype, Shape shape) {
  Tensor t;
  // The name goes into an error only, so it is built only then (not for every allocation).
  Status st = allocate(dtype, shape, /*zero=*/true, [&] {
    return std::string("a ") + dtypeName(dtype) + " tensor of shape " + shapeToString(shape);
  }, &t);
  if (!st.isOk()) throw std::runtime_error(st.message());
  return t;
}

Tensor Tensor::view(DType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

Tensor Tensor::adopt(DType dtype, Shape shape, std::shared_ptr<void> owner) {
  Tensor t = view(dtype, std::move(shape), owner.get());
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::copyOf(const Tensor& src) {
  Tensor t;
  Status st = allocate(src.dtype_, src.shape_, /*zero=*/false, [&] {
    return std::string("a copy of a ") + dtypeName(src.dtype_) + " tensor of shape " + shapeToString(src.shape_);
  }, &t);
  if (!st.isOk()) throw std::runtime_error(st.message());  // an impossible size, as alloc throws
  if (src.bytes()) std::memcpy(t.data_, src.data_, src.bytes());
  // The round-up past the data is zero, as alloc leaves it.
  std::memset(static_cast<char*>(t.data_) + src.bytes(), 0, allocationBytes(src.bytes()) - src.bytes());
  t.device_ = src.device_;
  return t;
}

Tensor Tensor::reshaped(Shape s) const {
  assert(numElements(s) == numel() && "reshape changes element count");
  Tensor t = *this;
  t.shape_ = std::move(s);
  return t;
}

Tensor Tensor::sliced(int64_t offset, Shape s) const {
  assert(offset >= 0 && offset + numElements(s) <= numel() && "slice outside the tensor");
  Tensor t = *this;
  t.data_ = static_cast<char*>(data_) + (size_t)offset * dtypeSize(dtype_);
  t.shape_ = std::move(s);
  return t;
}

}  // namespace tandem

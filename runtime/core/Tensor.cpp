// Tensor storage: owned 64-byte aligned buffers or borrowed views.
#include "runtime/Tensor.h"

#include "runtime/CheckedMath.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace tandem {

int64_t numElements(const Shape& s) {
  int64_t n;
  return checkedNumElements(s, &n) ? n : -1;
}

std::string shapeToString(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << "]";
  return os.str();
}

namespace {
// A tensor of `bytes` takes this many: rounded up to the alignment (aligned_alloc's contract;
// cannot overflow below the size limit), at least one 64-byte line.
size_t allocationBytes(size_t bytes) { return std::max<size_t>(64, (bytes + 63) / 64 * 64); }
}  // namespace

Status Tensor::tryAlloc(DType dtype, Shape shape, const std::string& what, Tensor* out) {
  TANDEM_RETURN_IF_ERROR(tryAllocUninitialized(dtype, std::move(shape), what, out));
  std::memset(out->raw(), 0, allocationBytes(out->bytes()));  // the round-up included
  return Status::ok();
}

Status Tensor::tryAllocUninitialized(DType dtype, Shape shape, const std::string& what, Tensor* out) {
  int64_t bytes = 0;
  std::string err = checkTensorSize(shape, (int64_t)dtypeSize(dtype), dtypeName(dtype), &bytes);
  if (!err.empty()) return Status::error(what + ": " + err);
  void* p = std::aligned_alloc(64, allocationBytes((size_t)bytes));
  if (!p)
    return Status::error("out of memory allocating " + std::to_string(bytes) + " bytes for " +
                         what);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  *out = std::move(t);
  return Status::ok();
}

Tensor Tensor::alloc(DType dtype, Shape shape) {
  std::string what = std::string("a ") + dtypeName(dtype) + " tensor of shape " +
                     shapeToString(shape);
  Tensor t;
  Status st = tryAlloc(dtype, std::move(shape), what, &t);
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
  Tensor t = alloc(src.dtype_, src.shape_);  // throws on an impossible size, as alloc does
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

Tensor Tensor::sliced(int64_t offset, Shape s) const {
  assert(offset >= 0 && offset + numElements(s) <= numel() && "slice outside the tensor");
  Tensor t = *this;
  t.data_ = static_cast<char*>(data_) + (size_t)offset * dtypeSize(dtype_);
  t.shape_ = std::move(s);
  return t;
}

}  // namespace tandem

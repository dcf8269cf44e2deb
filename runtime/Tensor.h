// Runtime tensors: dtype + static shape + a buffer that is either owned or borrowed (arena views).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/DType.h"
#include "runtime/Status.h"

namespace tandem {

using Shape = std::vector<int64_t>;

/// Number of elements of a static shape (1 for rank 0); -1 when a dim is negative or the count
/// overflows int64 (untrusted shapes: check with checkTensorSize, runtime/CheckedMath.h).
int64_t numElements(const Shape& s);
/// "[1,3,224,224]"
std::string shapeToString(const Shape& s);

/// A dense row-major tensor on a device ("cpu" for now). A Tensor either owns its bytes
/// (Tensor::alloc, Tensor::copyOf) or views memory owned elsewhere (Tensor::view, e.g. an arena
/// slot); copying a Tensor object shares the buffer.
class Tensor {
 public:
  Tensor() = default;
  /// Owning, zero-filled, 64-byte aligned. A shape whose bytes overflow or exceed
  /// maxTensorBytes(), or a failed allocation, throws std::runtime_error ("out of memory
  /// allocating N bytes for a f32 tensor of shape [...]"); the tools catch it and exit 1. Code
  /// that can return a Status uses tryAlloc instead.
  static Tensor alloc(DType dtype, Shape shape);
  /// alloc as a Status: an error "out of memory allocating N bytes for <what>" (or the shape's
  /// size error) instead of an exception; `what` names the tensor ("initializer 'w'").
  static Status tryAlloc(DType dtype, Shape shape, const std::string& what, Tensor* out);
  /// tryAlloc without zeroing the bytes: for a result its kernel writes whole (a kernel writes
  /// every element of its outputs, as arena slots are reused unzeroed), where zeroing would
  /// cost a pass over memory (a dynamic region's 15 MB Expand).
  static Status tryAllocUninitialized(DType dtype, Shape shape, const std::string& what, Tensor* out);
  /// Non-owning view of `data` (must outlive every use of the view).
  static Tensor view(DType dtype, Shape shape, void* data);
  /// Owning deep copy of `src`.
  static Tensor copyOf(const Tensor& src);
  /// A tensor over memory allocated elsewhere (e.g. pinned host memory,
  /// Executable::allocateInput): `owner` holds the bytes (at least dtype size x element
  /// count) and its deleter frees them when the last copy of the Tensor goes.
  static Tensor adopt(DType dtype, Shape shape, std::shared_ptr<void> owner);
  /// Owning tensor filled from host values (T must match dtype).
  template <typename T>
  static Tensor fromVector(Shape shape, const std::vector<T>& values) {
    Tensor t = alloc(dtypeOf<T>(), std::move(shape));
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
    return t;
  }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return (int64_t)shape_.size(); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  int64_t numel() const { return numElements(shape_); }
  /// 0 for a shape whose size overflows (numel() < 0); such a tensor can only be a view.
  size_t bytes() const {
    int64_t n = numel();
    return n < 0 ? 0 : (size_t)n * dtypeSize(dtype_);
  }
  bool defined() const { return dtype_ != DType::Undefined; }
  /// Device the bytes live on; "cpu" unless a backend says otherwise.
  const std::string& device() const { return device_; }
  void setDevice(std::string d) { device_ = std::move(d); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T> T* data() { return static_cast<T*>(data_); }
  template <typename T> const T* data() const { return static_cast<const T*>(data_); }

  /// Same bytes, another shape with the same element count (Reshape/Flatten are free).
  Tensor reshaped(Shape s) const;
  /// The elements from `offset` on (in elements), as shape `s` (within this tensor's
  /// elements): a view that shares this tensor's ownership, as reshaped() does.
  Tensor sliced(int64_t offset, Shape s) const;
  /// True when the bytes are kept alive by this Tensor and its copies (alloc, copyOf, adopt,
  /// and reshaped/sliced of those); false for a view of memory owned elsewhere.
  bool ownsData() const { return owner_ != nullptr; }

 private:
  DType dtype_ = DType::Undefined;
  Shape shape_;
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
  std::string device_ = "cpu";
};

}  // namespace tandem

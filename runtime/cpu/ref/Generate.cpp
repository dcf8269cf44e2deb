// Reference kernels of the tensor-generation and scan ops: Range-11, EyeLike-9, Size-13,
// Trilu-14, CumSum-14, HannWindow/HammingWindow/BlackmanWindow-17.
#include <algorithm>

#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

// ---- Range-11 ------------------------------------------------------------------------------

// y[i] = start + i * delta for the output's length, which the shape function computed from the
// constant operands (the plan has static shapes); a run whose operands give another length is
// refused rather than read or written out of bounds.
Status createRange(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() != 3) return opError(ctx, "expects 3 inputs (start, limit, delta)");
  for (size_t i = 1; i < 3; ++i)
    if (ctx.inputTypes[i].dtype != ctx.inputTypes[0].dtype)
      return opError(ctx, "start, limit and delta must have one dtype");
  if (ctx.outputTypes[0].shape.size() != 1) return opError(ctx, "output must be 1-D");
  const ConstOperands consts(ctx, 0);
  const OpName name(ctx);
  RunFn fn;
  dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [consts, name](const Inputs& in, const Outputs& outs) -> Status {
      const Tensor* t[3];
      for (size_t i = 0; i < 3; ++i)
        if (!(t[i] = consts.get(in, i)) || t[i]->numel() != 1)
          return opError(name, "start, limit and delta must be scalars");
      const T start = t[0]->data<T>()[0], limit = t[1]->data<T>()[0], delta = t[2]->data<T>()[0];
      if (delta == T(0)) return opError(name, "delta is 0");
      const double count = std::ceil((double(limit) - double(start)) / double(delta));
      const int64_t n = outs[0]->numel();
      if (double(n) != std::max(count, 0.0))
        return opError(name, "the operands give " + std::to_string((int64_t)std::max(count, 0.0)) +
                                 " elements but the plan has " + std::to_string(n));
      T* y = outs[0]->data<T>();
      for (int64_t i = 0; i < n; ++i) y[i] = T(start + T(i) * delta);
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- EyeLike-9 -----------------------------------------------------------------------------

Status createEyeLike(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& s = ctx.outputTypes[0].shape;
  if (s.size() != 2 || s != ctx.inputTypes[0].shape)
    return opError(ctx, "input and output must be 2-D of one shape");
  const int64_t k = ctx.attrs->getInt("k", 0);
  const int64_t rows = s[0], cols = s[1];
  RunFn fn;
  dispatchDType(ctx.outputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [rows, cols, k](const Inputs&, const Outputs& outs) -> Status {
      T* y = outs[0]->data<T>();
      std::fill(y, y + rows * cols, T(0));
      // Row i has its one at column i + k, when that column exists.
      for (int64_t i = std::max<int64_t>(0, -k); i < rows && i + k < cols; ++i)
        y[i * cols + i + k] = T(1);
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported output dtype");
  return makeKernel(out, std::move(fn));
}

// ---- Size-13 -------------------------------------------------------------------------------

Status createSize(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.outputTypes[0].dtype != DType::I64 || numElements(ctx.outputTypes[0].shape) != 1)
    return opError(ctx, "output must be an i64 scalar");
  return makeKernel(out, [](const Inputs& in, const Outputs& outs) -> Status {
    outs[0]->data<int64_t>()[0] = in[0]->numel();
    return Status::ok();
  });
}

// ---- Trilu-14 ------------------------------------------------------------------------------

// Keeps element (i, j) of every trailing matrix where j - i >= k (upper) or j - i <= k (lower),
// zeroes the rest. k (input 1, default 0) may change from run to run.
Status createTrilu(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
  const Shape& s = ctx.inputTypes[0].shape;
  if (s.size() < 2) return opError(ctx, "input must have rank >= 2");
  if (inputPresent(ctx, 1) && ctx.inputTypes[1].dtype != DType::I64)
    return opError(ctx, "k must be i64");
  const bool upper = ctx.attrs->getInt("upper", 1) != 0;
  const int64_t rows = s[s.size() - 2], cols = s.back();
  const int64_t mats = product(s, 0, s.size() - 2);
  const ConstOperands consts(ctx);
  const OpName name(ctx);
  RunFn fn;
  dispatchBySize(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      int64_t k = 0;
      if (const Tensor* kt = consts.get(in, 1)) {
        if (kt->numel() != 1) return opError(name, "k must be a scalar");
        k = kt->data<int64_t>()[0];
      }
      const T* x = in[0]->data<T>();
      T* y = outs[0]->data<T>();
      for (int64_t m = 0; m < mats; ++m)
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t base = (m * rows + i) * cols;
          for (int64_t j = 0; j < cols; ++j) {
            const bool keep = upper ? j - i >= k : j - i <= k;
            y[base + j] = keep ? x[base + j] : T(0);
          }
        }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- CumSum-14 -----------------------------------------------------------------------------

// Running sums along `axis` (input 1, read at run time), forwards or `reverse`d; `exclusive`
// leaves out the element itself (the first sum is 0).
Status createCumSum(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
  if (!inputPresent(ctx, 1) || !contains(indexTypes(), ctx.inputTypes[1].dtype))
    return opError(ctx, "axis (input 1) must be an i32 or i64 scalar");
  const bool exclusive = ctx.attrs->getInt("exclusive", 0) != 0;
  const bool reverse = ctx.attrs->getInt("reverse", 0) != 0;
  const Shape xs = ctx.inputTypes[0].shape;
  const ConstOperands consts(ctx);
  const OpName name(ctx);
  RunFn fn;
  dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      std::vector<int64_t> a;
      TANDEM_RETURN_IF_ERROR(readInts(name, consts.get(in, 1), "axis", &a));
      int64_t axis;
      if (a.size() != 1 || !normalizeAxis(a[0], (int64_t)xs.size(), &axis))
        return opError(name, "axis must be one value in [-rank, rank) for rank " +
                                 std::to_string(xs.size()));
      const int64_t outer = product(xs, 0, axis), n = xs[axis];
      const int64_t inner = product(xs, axis + 1, xs.size());
      const T* x = in[0]->data<T>();
      T* y = outs[0]->data<T>();
      // Row by row along the axis, a running sum per inner position: contiguous reads and
      // writes (walking each inner position's column took 10 ns an element at inner 2,048),
      // each element's sum in the same order as a column walk.
      std::vector<T> acc((size_t)inner);
      for (int64_t o = 0; o < outer; ++o) {
        std::fill(acc.begin(), acc.end(), T(0));
        for (int64_t s = 0; s < n; ++s) {
          const int64_t row = (o * n + (reverse ? n - 1 - s : s)) * inner;
          const T* xr = x + row;
          T* yr = y + row;
          for (int64_t i = 0; i < inner; ++i) {
            const T v = xr[i];  // read before the write: y may be x's buffer
            if (exclusive) {
              yr[i] = acc[i];
              acc[i] = T(acc[i] + v);
            } else {
              acc[i] = T(acc[i] + v);
              yr[i] = acc[i];
            }
          }
        }
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- HannWindow, HammingWindow, BlackmanWindow-17 ----------------------------------------

// w[n] = sum_k a_k cos(2 pi k n / N) for n < size, with N = size when periodic (the default)
// and size - 1 when symmetric; coefficients from the ONNX spec (Hamming: 25/46, 21/46).
Status createWindow(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.outputTypes[0].shape.size() != 1) return opError(ctx, "output must be 1-D");
  std::vector<double> a;
  if (ctx.opType == "HannWindow") a = {0.5, -0.5};
  else if (ctx.opType == "HammingWindow") a = {25.0 / 46.0, -21.0 / 46.0};
  else a = {0.42, -0.5, 0.08};
  const bool periodic = ctx.attrs->getInt("periodic", 1) != 0;
  const int64_t size = ctx.outputTypes[0].shape[0];
  RunFn fn;
  dispatchFloat(ctx.outputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [a, periodic, size](const Inputs&, const Outputs& outs) -> Status {
      const double n = double(periodic ? size : size - 1);
      const double pi = 3.14159265358979323846;
      T* y = outs[0]->data<T>();
      for (int64_t i = 0; i < size; ++i) {
        double v = 0;
        for (size_t k = 0; k < a.size(); ++k) v += a[k] * std::cos(2 * pi * double(k) * double(i) / n);
        y[i] = T(n > 0 ? v : 1.0);  // a window of one sample is 1
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "output_datatype must be f32 or f64");
  return makeKernel(out, std::move(fn));
}

AcceptsFn acceptsAnyFirst() {
  return [](const std::vector<DType>& in) { return !in.empty() && contains(allTypes(), in[0]); };
}

}  // namespace

void registerGenerateKernels(KernelRegistry& r) {
  addRef(
      r, "Range",
      [](const std::vector<DType>& in) {
        return in.size() == 3 && contains(numericTypes(), in[0]) && in[1] == in[0] && in[2] == in[0];
      },
      dtypesToText(numericTypes()), createRange);
  const std::string all = dtypesToText(allTypes());
  addRef(r, "EyeLike", acceptsAnyFirst(), all, createEyeLike);
  addRef(r, "Size", acceptsAnyFirst(), all, createSize);
  addRef(r, "Trilu", acceptsAnyFirst(), all, createTrilu);
  addRef(r, "CumSum", numericTypes(), createCumSum);
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    addRef(r, op, indexTypes(), createWindow);
}

}  // namespace ref
}  // namespace tandem

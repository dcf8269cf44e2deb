// Reference kernels that move or create data without arithmetic: Identity, Dropout (whose training
// mode also scales what it keeps), Flatten, Reshape, Squeeze, Unsqueeze, Transpose, Expand, Shape,
// Constant, ConstantOfShape, Cast, CastLike.
#include <algorithm>

#include "runtime/Half.h"
#include "runtime/cpu/avx2/HalfConvert.h"
#include "runtime/Philox.h"
#include "runtime/cpu/avx2/Dropout.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

void copyBytes(const Tensor& src, Tensor& dst) {
  if (src.raw() != dst.raw() && src.bytes()) std::memmove(dst.raw(), src.raw(), src.bytes());
}

// Identity, Flatten, Reshape, Squeeze, Unsqueeze: the output shape was computed by the compiler;
// the row-major bytes are the same, so the kernel is a copy.
Status checkCopy(const KernelContext& ctx) {
  if (ctx.inputTypes.empty() || ctx.outputTypes.empty())
    return opError(ctx, "expects an input and an output");
  const TensorType& x = ctx.inputTypes[0];
  const TensorType& y = ctx.outputTypes[0];
  if (x.dtype != y.dtype || numElements(x.shape) != numElements(y.shape))
    return opError(ctx, "output " + std::string(dtypeName(y.dtype)) + shapeToString(y.shape) +
                            " does not hold the elements of input " + dtypeName(x.dtype) +
                            shapeToString(x.shape));
  return Status::ok();
}

Status createCopy(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  TANDEM_RETURN_IF_ERROR(checkCopy(ctx));
  return makeKernel(out, [](const Inputs& in, const Outputs& outs) -> Status {
    copyBytes(*in[0], *outs[0]);
    return Status::ok();
  });
}

// Dropout-13. At inference (training_mode absent or false) or with ratio 0: a copy, and a mask
// of all true. In training mode: y = x / (1 - ratio) where the mask keeps an element, else 0,
// the mask drawn by Philox4x32-10 (runtime/Philox.h, DropoutMask) from the op's seed attribute,
// or else from the plan's seed (KernelContext::seed) and a stream named by the node, so the
// mask is the same on every device and thread count. Tandem's optional input 3, `counter` (f32
// or i64 scalar, read at run time; the training step graph feeds it the step counter), is the
// mask's Philox step word: a new counter draws an independent mask, the same counter the same
// mask, and an absent counter is counter 0 (the masks drawn before the input existed).
template <typename T>
void dropoutTraining(const DropoutMask& m, double ratio, int64_t n, int threads, const T* x, T* y,
                     bool* mask) {
  const T scale = T(1.0 / (1.0 - ratio));
  if constexpr (std::is_same_v<T, float>) {
    if (avx2::available()) return avx2::dropoutF32(m, scale, n, threads, x, y, mask);
  }
  const int64_t blocks = (n + 3) / 4;
#pragma omp parallel for num_threads(threads) if (n > 65536) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const std::array<uint32_t, 4> w = m.words((uint64_t)b);
    for (int64_t j = 0, i = 4 * b; j < 4 && i < n; ++j, ++i) {
      const bool keep = w[j] >= m.threshold;
      y[i] = keep ? x[i] * scale : T(0);
      if (mask) mask[i] = keep;
    }
  }
}

Status createDropout(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  TANDEM_RETURN_IF_ERROR(checkCopy(ctx));
  if (outputRequested(ctx, 1) && (ctx.outputTypes[1].dtype != DType::Bool ||
                                  ctx.outputTypes[1].shape != ctx.inputTypes[0].shape))
    return opError(ctx, "mask output must be bool of the input's shape");
  // The run reads training_mode as a C++ bool: any other dtype (a hostile plan's) would be
  // reinterpreted, and a byte other than 0/1 is undefined behaviour.
  if (inputPresent(ctx, 2) && ctx.inputTypes[2].dtype != DType::Bool)
    return opError(ctx, std::string("training_mode (input 2) must be bool, got ") +
                            dtypeName(ctx.inputTypes[2].dtype));
  if (inputPresent(ctx, 3) &&
      ((ctx.inputTypes[3].dtype != DType::F32 && ctx.inputTypes[3].dtype != DType::I64) ||
       numElements(ctx.inputTypes[3].shape) != 1))
    return opError(ctx, std::string("counter (input 3) must be an f32 or i64 scalar, got ") +
                            dtypeName(ctx.inputTypes[3].dtype) +
                            shapeToString(ctx.inputTypes[3].shape));
  DropoutMask base;
  if (ctx.attrs->has("seed")) {
    base.seed = (uint64_t)ctx.attrs->getInt("seed", 0);
  } else {
    base.seed = ctx.seed;
    base.stream = fnv1a32(ctx.nodeName.data(), ctx.nodeName.size());
  }
  const DType dt = ctx.inputTypes[0].dtype;
  const int threads = std::max(1, ctx.threads);
  const OpName names(ctx);
  const ConstOperands consts(ctx);
  return makeKernel(out, [names, consts, base, dt, threads](const Inputs& in,
                                                           const Outputs& outs) -> Status {
    const Tensor* training = consts.get(in, 2);
    Tensor* mask = outputAt(outs, 1);
    double r = 0;
    if (training && training->numel() > 0 && training->data<bool>()[0]) {
      const Tensor* ratio = consts.get(in, 1);
      r = ratio && ratio->numel() > 0 ? elementAsDouble(*ratio, 0) : 0.5;
      if (!(r >= 0 && r < 1))
        return opError(names, "ratio " + std::to_string(r) + " is outside [0, 1)");
    }
    if (r == 0) {
      copyBytes(*in[0], *outs[0]);
      if (mask) std::fill(mask->data<bool>(), mask->data<bool>() + mask->numel(), true);
      return Status::ok();
    }
    DropoutMask m = base;
    m.threshold = DropoutMask::thresholdFor(r);
    if (const Tensor* counter = consts.get(in, 3); counter && counter->numel() > 0) {
      // Steps are whole numbers (an f32 step counter is exact below 2^24); a counter that is
      // not one is a broken graph, not a new mask. Counters equal modulo 2^32 share a mask.
      const double c = counter->dtype() == DType::I64 ? (double)counter->data<int64_t>()[0]
                                                      : (double)counter->data<float>()[0];
      if (!(c >= 0 && c == std::floor(c) && c < 18446744073709551616.0))
        return opError(names, "counter " + std::to_string(c) +
                                  " is not a non-negative whole number");
      m.step = counter->dtype() == DType::I64 ? (uint32_t)counter->data<int64_t>()[0]
                                              : (uint32_t)(uint64_t)c;
    }
    bool* maskData = mask ? mask->data<bool>() : nullptr;
    const bool done = dispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      dropoutTraining<T>(m, r, in[0]->numel(), threads, in[0]->data<T>(), outs[0]->data<T>(),
                         maskData);
    });
    if (!done)
      return opError(names,
                     std::string("training mode needs f32 or f64 data, got ") + dtypeName(dt));
    return Status::ok();
  });
}

// y[i] = x[offset(i)] where walking y's shape `ys` in row-major order steps x by `st` per dim:
// Transpose (permuted strides) and Expand (zero strides on broadcast dims) are both this.
// y[i] = x[offset of i's multi-index under strides `st`] (Expand, Transpose). Dims of size 1
// are dropped and neighbours merged where x walks them as one (contiguous, or both broadcast),
// so the innermost run is as long as it can be: a run x reads contiguously is one memcpy, a
// broadcast run one fill. Rows of runs are split over ctx.threads.
Status makeStridedGather(const KernelContext& ctx, const Shape& ys, const std::vector<int64_t>& st,
                         std::unique_ptr<Kernel>* out) {
  Shape dims;
  std::vector<int64_t> strides;
  for (size_t d = 0; d < ys.size(); ++d) {
    if (ys[d] == 1) continue;
    if (!dims.empty() && strides.back() == st[d] * ys[d]) {
      dims.back() *= ys[d];
      strides.back() = st[d];
      continue;
    }
    dims.push_back(ys[d]);
    strides.push_back(st[d]);
  }
  if (dims.empty()) {
    dims = {1};
    strides = {0};
  }
  const int64_t run = dims.back(), runStride = strides.back();
  const Shape outer(dims.begin(), dims.end() - 1);
  const std::vector<int64_t> outerStrides(strides.begin(), strides.end() - 1);
  const int64_t rows = numElements(outer);
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchBySize(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* x = static_cast<const T*>(in[0]->raw());
      T* y = static_cast<T*>(outs[0]->raw());
      const int64_t grain = std::max<int64_t>(1, kStreamGrain / std::max<int64_t>(1, run));
      parallelRanges(threads, rows, grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          int64_t off = 0;
          for (int64_t d = (int64_t)outer.size() - 1, rem = r; d >= 0; --d) {
            off += (rem % outer[d]) * outerStrides[d];
            rem /= outer[d];
          }
          T* dst = y + r * run;
          if (runStride == 1) std::memcpy(dst, x + off, run * sizeof(T));
          else if (runStride == 0) std::fill(dst, dst + run, x[off]);
          else
            for (int64_t i = 0; i < run; ++i) dst[i] = x[off + i * runStride];
        }
      });
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- Transpose -----------------------------------------------------------------------------

Status createTranspose(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const int64_t r = (int64_t)xs.size();
  std::vector<int64_t> perm = ctx.attrs->getInts("perm");
  if (!ctx.attrs->has("perm"))
    for (int64_t d = r - 1; d >= 0; --d) perm.push_back(d);
  if ((int64_t)perm.size() != r) return opError(ctx, "perm must have one entry per input dim");
  std::vector<bool> seen(r, false);
  for (int64_t& p : perm) {
    if (!normalizeAxis(p, r, &p) || seen[p]) return opError(ctx, "perm is not a permutation");
    seen[p] = true;
  }
  Shape ys(r);
  const std::vector<int64_t> inSt = rowMajorStrides(xs);
  std::vector<int64_t> st(r);
  for (int64_t d = 0; d < r; ++d) {
    ys[d] = xs[perm[d]];
    st[d] = inSt[perm[d]];
  }
  if (ys != ctx.outputTypes[0].shape)
    return opError(ctx, "output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not " +
                            shapeToString(ys));
  return makeStridedGather(ctx, ys, st, out);
}

// ---- Expand: the output shape (broadcast of input and `shape`) is given --------------------

Status createExpand(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  if (!broadcastsTo(xs, ys))
    return opError(ctx, "input " + shapeToString(xs) + " does not broadcast to the output " +
                            shapeToString(ys));
  const std::vector<int64_t> st = broadcastStrides(xs, ys);
  return makeStridedGather(ctx, ys, st, out);
}

// ---- Shape-15: dims [start, end) of the input, both clamped into [0, rank] -----------------

Status createShape(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const int64_t r = (int64_t)xs.size();
  auto clampDim = [r](int64_t v) {
    if (v < 0) v += r;
    return std::min(std::max(v, int64_t(0)), r);
  };
  const int64_t start = clampDim(ctx.attrs->getInt("start", 0));
  const int64_t end = ctx.attrs->has("end") ? clampDim(ctx.attrs->getInt("end", r)) : r;
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(xs[d]);
  if (ctx.outputTypes[0].dtype != DType::I64 ||
      numElements(ctx.outputTypes[0].shape) != (int64_t)dims.size())
    return opError(ctx, "output must be i64 of " + std::to_string(dims.size()) + " elements");
  return makeKernel(out, [dims](const Inputs&, const Outputs& outs) -> Status {
    std::copy(dims.begin(), dims.end(), outs[0]->data<int64_t>());
    return Status::ok();
  });
}

// ---- Constant-13 ---------------------------------------------------------------------------

Status createConstant(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  Tensor value;
  const AttrMap& a = *ctx.attrs;
  if (const Tensor* t = a.getTensor("value")) {
    value = Tensor::copyOf(*t);
  } else if (a.has("value_float") && a.find("value_float")->kind == Attr::Kind::Float) {
    value = Tensor::fromVector<float>({}, {a.getFloat("value_float", 0)});
  } else if (a.has("value_floats")) {
    std::vector<float> v = a.getFloats("value_floats");
    value = Tensor::fromVector<float>({(int64_t)v.size()}, v);
  } else if (a.has("value_int") && a.find("value_int")->kind == Attr::Kind::Int) {
    value = Tensor::fromVector<int64_t>({}, {a.getInt("value_int", 0)});
  } else if (a.has("value_ints")) {
    std::vector<int64_t> v = a.getInts("value_ints");
    value = Tensor::fromVector<int64_t>({(int64_t)v.size()}, v);
  } else if (a.has("sparse_value") || a.has("value_string") || a.has("value_strings")) {
    return opError(ctx, "sparse and string constants are not supported");
  } else {
    return opError(ctx,
                   "needs one of the attributes value, value_float, value_floats, "
                   "value_int, value_ints");
  }
  const TensorType& y = ctx.outputTypes[0];
  if (y.dtype != value.dtype() || numElements(y.shape) != value.numel())
    return opError(ctx, "output " + std::string(dtypeName(y.dtype)) + shapeToString(y.shape) +
                            " does not match the value " + dtypeName(value.dtype()) +
                            shapeToString(value.shape()));
  return makeKernel(out, [value](const Inputs&, const Outputs& outs) -> Status {
    copyBytes(value, *outs[0]);
    return Status::ok();
  });
}

// ---- ConstantOfShape-9: fill with the one-element `value` (default f32 0) ------------------

Status createConstantOfShape(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  Tensor value = Tensor::fromVector<float>({1}, {0.0f});
  if (const Tensor* t = ctx.attrs->getTensor("value")) {
    if (t->numel() != 1) return opError(ctx, "value must have exactly one element");
    value = Tensor::copyOf(*t);
  }
  const TensorType& y = ctx.outputTypes[0];
  if (y.dtype != value.dtype())
    return opError(ctx, "output dtype " + std::string(dtypeName(y.dtype)) +
                            " differs from the value's " + dtypeName(value.dtype()));
  RunFn fn;
  const int threads = std::max(1, ctx.threads);
  dispatchBySize(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, value.raw(), sizeof(T));
    fn = [v, threads](const Inputs&, const Outputs& outs) -> Status {
      T* p = static_cast<T*>(outs[0]->raw());
      parallelRanges(threads, outs[0]->numel(), kStreamGrain,
                     [&](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- Cast-13 -------------------------------------------------------------------------------

/// One element converted as C would, made total: float to integer truncates toward zero, NaN
/// gives 0 and values past the int64 range saturate before wrapping into narrower types; any
/// type to bool is `v != 0` (so NaN is true).
template <typename To, typename From>
To castValue(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return To(0);
    const double t = std::trunc(double(v));
    int64_t i;
    if (t >= 9223372036854775807.0)
      i = std::numeric_limits<int64_t>::max();
    else if (t <= -9223372036854775808.0)
      i = std::numeric_limits<int64_t>::min();
    else
      i = int64_t(t);
    return To(i);
  } else {
    return To(v);
  }
}

// Casts from and to the 16-bit floats (f16, bf16): through float (exact) from them, rounded once
// to nearest-even into them (from float by bfloat16FromFloat's bit rounding, from anything else
// through double, exact for every dtype but i64/u64 beyond 2^53).
RunFn halfCast(DType from, DType dst, int threads) {
  RunFn fn;
  const bool fromBf = from == DType::BF16, toBf = dst == DType::BF16;
  // f16 <-> f32, the Casts around every f32-computed op of an f16 model: F16C where the CPU
  // has it (the same bits as the scalar conversions), threaded.
  if (avx2::f16cAvailable() && ((from == DType::F16 && dst == DType::F32) ||
                                (from == DType::F32 && dst == DType::F16))) {
    const bool widen = from == DType::F16;
    return [widen, threads](const Inputs& in, const Outputs& outs) -> Status {
      parallelRanges(threads, in[0]->numel(), kStreamGrain, [&](int64_t b, int64_t e) {
        if (widen) avx2::halfToFloatArray(in[0]->data<uint16_t>() + b, outs[0]->data<float>() + b, e - b);
        else avx2::floatToHalfArray(in[0]->data<float>() + b, outs[0]->data<uint16_t>() + b, e - b);
      });
      return Status::ok();
    };
  }
  if (from == dst) {
    fn = [](const Inputs& in, const Outputs& outs) -> Status {
      std::memcpy(outs[0]->raw(), in[0]->raw(), in[0]->bytes());
      return Status::ok();
    };
  } else if (isHalfFloat(from) && isHalfFloat(dst)) {
    fn = [fromBf, toBf](const Inputs& in, const Outputs& outs) -> Status {
      const uint16_t* x = in[0]->data<uint16_t>();
      uint16_t* y = outs[0]->data<uint16_t>();
      for (int64_t i = 0, n = in[0]->numel(); i < n; ++i)
        y[i] = narrowFromDouble(narrowToFloat(x[i], fromBf), toBf);
      return Status::ok();
    };
  } else if (isHalfFloat(from)) {
    dispatchDType(dst, [&](auto toTag) {
      using T = decltype(toTag);
      fn = [fromBf](const Inputs& in, const Outputs& outs) -> Status {
        const uint16_t* x = in[0]->data<uint16_t>();
        T* y = outs[0]->data<T>();
        for (int64_t i = 0, n = in[0]->numel(); i < n; ++i)
          y[i] = castValue<T, float>(narrowToFloat(x[i], fromBf));
        return Status::ok();
      };
    });
  } else if (from == DType::F32 && toBf) {
    fn = [](const Inputs& in, const Outputs& outs) -> Status {
      const float* x = in[0]->data<float>();
      uint16_t* y = outs[0]->data<uint16_t>();
      for (int64_t i = 0, n = in[0]->numel(); i < n; ++i) y[i] = bfloat16FromFloat(x[i]);
      return Status::ok();
    };
  } else {
    dispatchDType(from, [&](auto fromTag) {
      using F = decltype(fromTag);
      fn = [toBf](const Inputs& in, const Outputs& outs) -> Status {
        const F* x = in[0]->data<F>();
        uint16_t* y = outs[0]->data<uint16_t>();
        for (int64_t i = 0, n = in[0]->numel(); i < n; ++i) y[i] = narrowFromDouble(double(x[i]), toBf);
        return Status::ok();
      };
    });
  }
  return fn;
}

// The conversion loop of Cast and CastLike, input 0's dtype to output 0's.
Status castKernel(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
  const DType from = ctx.inputTypes[0].dtype, dst = ctx.outputTypes[0].dtype;
  RunFn fn;
  const int threads = std::max(1, ctx.threads);
  if (isHalfFloat(from) || isHalfFloat(dst)) fn = halfCast(from, dst, threads);
  dispatchDType(from, [&](auto fromTag) {
    using F = decltype(fromTag);
    dispatchDType(dst, [&](auto toTag) {
      using T = decltype(toTag);
      fn = [threads](const Inputs& in, const Outputs& outs) -> Status {
        const F* x = in[0]->data<F>();
        T* y = outs[0]->data<T>();
        parallelRanges(threads, in[0]->numel(), kStreamGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) y[i] = castValue<T, F>(x[i]);
        });
        return Status::ok();
      };
    });
  });
  if (!fn)
    return opError(ctx, std::string("cast from ") + dtypeName(from) + " to " + dtypeName(dst) +
                            " is not supported");
  return makeKernel(out, std::move(fn));
}

Status createCast(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const int64_t to = ctx.attrs->getInt("to", 0);
  const DType dst = ctx.outputTypes[0].dtype;
  if (!isKnownDType((int32_t)to) || DType(to) != dst)
    return opError(ctx, "attribute to=" + std::to_string(to) + " does not match the output dtype " +
                            dtypeName(dst));
  return castKernel(ctx, out);
}

// CastLike-15: the dtype comes from input 1 (target_type), whose values are never read.
Status createCastLike(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (!inputPresent(ctx, 1) || ctx.inputTypes[1].dtype != ctx.outputTypes[0].dtype)
    return opError(ctx, "the output dtype must be that of input 1 (target_type)");
  return castKernel(ctx, out);
}

AcceptsFn acceptsAny() {
  return [](const std::vector<DType>& in) { return !in.empty() && contains(allTypes(), in[0]); };
}

}  // namespace

void registerTensorKernels(KernelRegistry& r) {
  const std::string all = dtypesToText(allTypes());
  for (const char* op : {"Identity", "Flatten", "Reshape", "Squeeze", "Unsqueeze"})
    addRef(r, op, acceptsAny(), all, createCopy);
  addRef(r, "Dropout", acceptsAny(), all, createDropout);
  addRef(r, "Transpose", acceptsAny(), all, createTranspose);
  addRef(r, "Expand", acceptsAny(), all, createExpand);
  addRef(r, "Shape", acceptsAny(), all, createShape);
  // Cast and CastLike also convert f16 and bf16, which few other kernels read.
  std::vector<DType> castTypes = allTypes();
  castTypes.push_back(DType::F16);
  castTypes.push_back(DType::BF16);
  const AcceptsFn castAccepts = [castTypes](const std::vector<DType>& in) {
    return !in.empty() && contains(castTypes, in[0]);
  };
  addRef(r, "Cast", castAccepts, dtypesToText(castTypes), createCast);
  addRef(r, "CastLike", castAccepts, dtypesToText(castTypes), createCastLike);
  addRef(
      r, "Constant", [](const std::vector<DType>& in) { return in.empty(); }, all, createConstant);
  addRef(
      r, "ConstantOfShape",
      [](const std::vector<DType>& in) { return in.size() == 1 && in[0] == DType::I64; },
      "shape i64; value " + all, createConstantOfShape);
}

}  // namespace ref
}  // namespace tandem

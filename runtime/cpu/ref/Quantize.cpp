// Reference kernels of linear quantization: QuantizeLinear-13/-21, DequantizeLinear-13/-21 (per
// tensor, per axis or, opsets 21+, per block along the axis), DynamicQuantizeLinear-11 (u8, scale
// from the data's range).
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "runtime/cpu/ref/DynamicQuantize.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

// Where operand i's entry for element k lives: one value (per tensor) or one per index along
// `axis` (per axis), as outer * n * inner indexing gives.
// Which scale and zero point element x's element k uses: 0 (per tensor), its index along the
// axis (per axis), or (blocked, opsets 21+) the element of the scale's [.., ceil(n / block),
// ..] shape holding k's block along the axis.
struct AxisIndex {
  int64_t n = 1, inner = 1, block = 0, blocks = 1;
  bool perAxis = false;
  int64_t at(int64_t k) const {
    if (!perAxis) return 0;
    if (block == 0) return (k / inner) % n;
    const int64_t outer = k / (n * inner), a = (k / inner) % n;
    return (outer * blocks + a / block) * inner + k % inner;
  }
};

Status axisIndex(const KernelContext& ctx, AxisIndex* ix) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const int64_t scaleN = numElements(ctx.inputTypes[1].shape);
  const int64_t block = ctx.attrs->getInt("block_size", 0);
  if (block == 0 && scaleN == 1 && ctx.inputTypes[1].shape.size() <= 1) return Status::ok();
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", 1), (int64_t)xs.size(), &axis))
    return opError(ctx, "axis out of range for rank " + std::to_string(xs.size()));
  if (block > 0) {
    Shape want = xs;
    want[axis] = (xs[axis] + block - 1) / block;
    if (ctx.inputTypes[1].shape != want)
      return opError(ctx, "the scale must have shape " + shapeToString(want) + " for block_size " +
                              std::to_string(block) + " along axis " + std::to_string(axis));
    if (inputPresent(ctx, 2) && ctx.inputTypes[2].shape != want)
      return opError(ctx, "the zero point must have the scale's shape");
    ix->perAxis = true;
    ix->n = xs[axis];
    ix->inner = product(xs, axis + 1, xs.size());
    ix->block = block;
    ix->blocks = want[axis];
    return Status::ok();
  }
  if (ctx.inputTypes[1].shape.size() != 1 || scaleN != xs[axis])
    return opError(ctx, "the scale must be a scalar or have x's size along axis " + std::to_string(axis));
  if (inputPresent(ctx, 2) && numElements(ctx.inputTypes[2].shape) != scaleN)
    return opError(ctx, "the zero point must have the scale's shape");
  ix->perAxis = true;
  ix->n = xs[axis];
  ix->inner = product(xs, axis + 1, xs.size());
  return Status::ok();
}

// QuantizeLinear of f32 x over n elements sharing one scale and zero point, 16 at a time with
// SSE2 (every x86-64 CPU): the quotient x / scale in f32 (as the spec's reference divides), NaN
// to 0, clamped to +-1024 (wider than any 8-bit range), rounded half to even by cvtps2dq (the
// default rounding mode), plus the zero point, saturated by the packs. The same values as
// saturateRound, which the tail uses.
template <typename Y>
void quantizeRun(const float* x, Y* y, int64_t n, float scale, int32_t zp) {
  int64_t k = 0;
#if defined(__SSE2__)
  const __m128 s = _mm_set1_ps(scale), hiQ = _mm_set1_ps(1024.f), loQ = _mm_set1_ps(-1024.f);
  const __m128i z = _mm_set1_epi32(zp);
  for (; k + 16 <= n; k += 16) {
    __m128i q[4];
    for (int j = 0; j < 4; ++j) {
      __m128 v = _mm_div_ps(_mm_loadu_ps(x + k + 4 * j), s);
      v = _mm_and_ps(v, _mm_cmpord_ps(v, v));
      v = _mm_min_ps(_mm_max_ps(v, loQ), hiQ);
      q[j] = _mm_add_epi32(_mm_cvtps_epi32(v), z);
    }
    const __m128i lo = _mm_packs_epi32(q[0], q[1]), hi = _mm_packs_epi32(q[2], q[3]);
    const __m128i b = std::is_same_v<Y, uint8_t> ? _mm_packus_epi16(lo, hi) : _mm_packs_epi16(lo, hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + k), b);
  }
#endif
  for (; k < n; ++k) y[k] = saturateRound<Y>(double(x[k] / scale), double(zp));
}

// DequantizeLinear of an 8-bit x over n elements sharing one scale and zero point (vectorised).
template <typename X>
void dequantizeRun(const X* x, float* y, int64_t n, float scale, int32_t zp) {
  for (int64_t k = 0; k < n; ++k) y[k] = float(int32_t(x[k]) - zp) * scale;
}

// Calls f(begin, end, a) over [0, numel) in runs that share axis entry a (one run per tensor,
// or one per (outer, axis) row), split across `threads`.
template <typename F>
void forEachRun(const AxisIndex& ix, int64_t numel, int threads, F&& f) {
  if (ix.block > 0) {
    // Blocked: a run is the elements of one (outer, axis index) row that share a scale only
    // when inner == 1 (then a block's elements are consecutive); else one element at a time.
    parallelRanges(threads, numel, kStreamGrain, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) f(k, k + 1, ix.at(k));
    });
    return;
  }
  if (!ix.perAxis) {
    parallelRanges(threads, numel, kStreamGrain, [&](int64_t b, int64_t e) { f(b, e, int64_t{0}); });
    return;
  }
  const int64_t rows = numel / ix.inner;
  parallelRanges(threads, rows, std::max<int64_t>(1, kStreamGrain / ix.inner), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) f(r * ix.inner, (r + 1) * ix.inner, r % ix.n);
  });
}

Status createQuantize(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
  AxisIndex ix;
  TANDEM_RETURN_IF_ERROR(axisIndex(ctx, &ix));
  const bool hasZp = inputPresent(ctx, 2);
  const DType xt = ctx.inputTypes[0].dtype;
  const ConstOperands consts(ctx);
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  auto build = [&](auto yTag) {
    using Y = decltype(yTag);
    if (hasZp && ctx.inputTypes[2].dtype != dtypeOf<Y>())
      return;
    if (xt == DType::F32) {
      fn = [=](const Inputs& in, const Outputs& outs) -> Status {
        const float* scale = consts.get(in, 1)->data<float>();
        const Tensor* zpT = hasZp ? consts.get(in, 2) : nullptr;
        const float* x = in[0]->data<float>();
        Y* y = outs[0]->data<Y>();
        forEachRun(ix, in[0]->numel(), threads, [&](int64_t b, int64_t e, int64_t a) {
          quantizeRun(x + b, y + b, e - b, scale[a], zpT ? int32_t(zpT->data<Y>()[a]) : 0);
        });
        return Status::ok();
      };
      return;
    }
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const float* scale = consts.get(in, 1)->data<float>();
      const Tensor* zpT = hasZp ? consts.get(in, 2) : nullptr;
      Y* y = outs[0]->data<Y>();
      for (int64_t k = 0, n = in[0]->numel(); k < n; ++k) {
        const int64_t a = ix.at(k);
        // f32 x is divided in f32, as the spec's reference does: a quotient that rounds to
        // a tie in f32 must round to even from there.
        const double q = xt == DType::F32 ? double(in[0]->data<float>()[k] / scale[a])
                                          : double(in[0]->data<int32_t>()[k]) / double(scale[a]);
        const double zp = zpT ? double(zpT->data<Y>()[a]) : 0.0;
        y[k] = saturateRound<Y>(q, zp);
      }
      return Status::ok();
    };
  };
  if (ctx.outputTypes[0].dtype == DType::U8) build(uint8_t{});
  else if (ctx.outputTypes[0].dtype == DType::I8) build(int8_t{});
  if (!fn) return opError(ctx, "output must be u8 or i8, with the zero point's dtype");
  return makeKernel(out, std::move(fn));
}

Status createDequantize(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.outputTypes[0].dtype != DType::F32 || ctx.outputTypes[0].shape != ctx.inputTypes[0].shape)
    return opError(ctx, "output must be f32 of x's shape");
  AxisIndex ix;
  TANDEM_RETURN_IF_ERROR(axisIndex(ctx, &ix));
  const bool hasZp = inputPresent(ctx, 2);
  const ConstOperands consts(ctx);
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
    using X = decltype(tag);
    if constexpr (sizeof(X) == 1)
      fn = [=](const Inputs& in, const Outputs& outs) -> Status {
        const X* x = in[0]->data<X>();
        const float* scale = consts.get(in, 1)->data<float>();
        const Tensor* zpT = hasZp ? consts.get(in, 2) : nullptr;
        float* y = outs[0]->data<float>();
        forEachRun(ix, in[0]->numel(), threads, [&](int64_t b, int64_t e, int64_t a) {
          dequantizeRun(x + b, y + b, e - b, scale[a], zpT ? int32_t(zpT->data<X>()[a]) : 0);
        });
        return Status::ok();
      };
    else if constexpr (std::is_integral_v<X>)
      fn = [=](const Inputs& in, const Outputs& outs) -> Status {
        const X* x = in[0]->data<X>();
        const float* scale = consts.get(in, 1)->data<float>();
        const Tensor* zpT = hasZp ? consts.get(in, 2) : nullptr;
        float* y = outs[0]->data<float>();
        for (int64_t k = 0, n = in[0]->numel(); k < n; ++k) {
          const int64_t a = ix.at(k);
          const int64_t zp = zpT ? int64_t(zpT->data<X>()[a]) : 0;
          y[k] = float(int64_t(x[k]) - zp) * scale[a];
        }
        return Status::ok();
      };
  });
  if (!fn) return opError(ctx, "x must be u8, i8 or i32");
  return makeKernel(out, std::move(fn));
}

// DynamicQuantizeLinear-11: the range [min(0, min x), max(0, max x)] maps onto [0, 255].
Status createDynamicQuantize(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.outputTypes.size() != 3) return opError(ctx, "expects 3 outputs (y, y_scale, y_zero_point)");
  return makeKernel(out, [](const Inputs& in, const Outputs& outs) -> Status {
    const float* x = in[0]->data<float>();
    const int64_t n = in[0]->numel();
    const DynamicQuantization d = dynamicQuantization(x, n);  // DynamicQuantize.h
    dynamicQuantize(x, n, d, outs[0]->data<uint8_t>());
    outs[1]->data<float>()[0] = d.scale;
    outs[2]->data<uint8_t>()[0] = d.zeroPoint;
    return Status::ok();
  });
}

}  // namespace

void registerQuantizeKernels(KernelRegistry& r) {
  addRef(
      r, "QuantizeLinear",
      [](const std::vector<DType>& in) {
        return in.size() >= 2 && (in[0] == DType::F32 || in[0] == DType::I32) && in[1] == DType::F32;
      },
      "x f32,i32; y_scale f32; y_zero_point u8,i8", createQuantize);
  addRef(
      r, "DequantizeLinear",
      [](const std::vector<DType>& in) {
        return in.size() >= 2 && (in[0] == DType::U8 || in[0] == DType::I8 || in[0] == DType::I32) &&
               in[1] == DType::F32;
      },
      "x u8,i8,i32; x_scale f32", createDequantize);
  addRef(r, "DynamicQuantizeLinear", {DType::F32}, createDynamicQuantize);
}

}  // namespace ref
}  // namespace tandem

// Reference kernels of linear quantization: QuantizeLinear-13, DequantizeLinear-13 (per-tensor or
// per-axis scale and zero point), DynamicQuantizeLinear-11 (u8, scale from the data's range).
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

// Where operand i's entry for element k lives: one value (per tensor) or one per index along
// `axis` (per axis), as outer * n * inner indexing gives.
struct AxisIndex {
  int64_t n = 1, inner = 1;
  bool perAxis = false;
  int64_t at(int64_t k) const { return perAxis ? (k / inner) % n : 0; }
};

Status axisIndex(const KernelContext& ctx, AxisIndex* ix) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const int64_t scaleN = numElements(ctx.inputTypes[1].shape);
  if (scaleN == 1 && ctx.inputTypes[1].shape.size() <= 1) return Status::ok();
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", 1), (int64_t)xs.size(), &axis))
    return opError(ctx, "axis out of range for rank " + std::to_string(xs.size()));
  if (ctx.inputTypes[1].shape.size() != 1 || scaleN != xs[axis])
    return opError(ctx, "the scale must be a scalar or have x's size along axis " + std::to_string(axis));
  if (inputPresent(ctx, 2) && numElements(ctx.inputTypes[2].shape) != scaleN)
    return opError(ctx, "the zero point must have the scale's shape");
  ix->perAxis = true;
  ix->n = xs[axis];
  ix->inner = product(xs, axis + 1, xs.size());
  return Status::ok();
}

Status createQuantize(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
  AxisIndex ix;
  TANDEM_RETURN_IF_ERROR(axisIndex(ctx, &ix));
  const bool hasZp = inputPresent(ctx, 2);
  const DType xt = ctx.inputTypes[0].dtype;
  const ConstOperands consts(ctx);
  RunFn fn;
  auto build = [&](auto yTag) {
    using Y = decltype(yTag);
    if (hasZp && ctx.inputTypes[2].dtype != dtypeOf<Y>())
      return;
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
  RunFn fn;
  dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
    using X = decltype(tag);
    if constexpr (std::is_integral_v<X>)
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
    float lo = 0, hi = 0;
    for (int64_t k = 0; k < n; ++k) {
      lo = std::min(lo, x[k]);
      hi = std::max(hi, x[k]);
    }
    // f32 arithmetic as the spec's function body computes it.
    const float scale = (hi - lo) / 255.f;
    const uint8_t zp = scale == 0 ? 0 : saturateRound<uint8_t>(double(0.f - lo / scale));
    uint8_t* y = outs[0]->data<uint8_t>();
    for (int64_t k = 0; k < n; ++k)
      y[k] = scale == 0 ? zp : saturateRound<uint8_t>(double(x[k] / scale), double(zp));
    outs[1]->data<float>()[0] = scale;
    outs[2]->data<uint8_t>()[0] = zp;
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

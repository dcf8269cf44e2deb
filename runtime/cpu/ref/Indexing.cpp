// Reference kernels that select or rearrange elements by index: Concat-13, Split-13, Slice-13,
// Gather-13, Pad-13/18 (constant, reflect, edge, wrap), Tile-13.
#include <algorithm>

#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/CheckedMath.h"

namespace tandem {
namespace ref {
namespace {

AcceptsFn acceptsAnyData() {
  return [](const std::vector<DType>& in) { return !in.empty() && contains(allTypes(), in[0]); };
}

// ---- Concat / Split: blocks of (axis extent * inner) elements per outer index --------------

Status createConcat(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& ys = ctx.outputTypes[0].shape;
  int64_t axis;
  if (!ctx.attrs->has("axis")) return opError(ctx, "attribute axis is required");
  if (!normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)ys.size(), &axis))
    return opError(ctx, "axis out of range for rank " + std::to_string(ys.size()));
  int64_t total = 0;
  std::vector<int64_t> extents;
  for (size_t i = 0; i < ctx.inputTypes.size(); ++i) {
    const TensorType& t = ctx.inputTypes[i];
    bool fits = t.dtype == ctx.outputTypes[0].dtype && t.shape.size() == ys.size();
    for (size_t d = 0; fits && d < ys.size(); ++d) fits = (int64_t)d == axis || t.shape[d] == ys[d];
    if (!fits)
      return opError(ctx, "input " + std::to_string(i) + " " + dtypeName(t.dtype) +
                              shapeToString(t.shape) + " does not fit the output " +
                              shapeToString(ys) + " along axis " + std::to_string(axis));
    extents.push_back(t.shape[axis]);
    total += t.shape[axis];
  }
  if (total != ys[axis]) return opError(ctx, "input extents do not add up to the output's");
  const int64_t outer = product(ys, 0, axis);
  const size_t innerBytes = product(ys, axis + 1, ys.size()) * dtypeSize(ctx.outputTypes[0].dtype);
  const size_t rowBytes = (size_t)total * innerBytes;  // one outer index of the output
  const int threads = ctx.threads;
  return makeKernel(out, [=](const Inputs& in, const Outputs& outs) -> Status {
    char* y = static_cast<char*>(outs[0]->raw());
    // Over the outer indices on the plan's threads once a range holds 256 KB: one core does
    // not stream a transformer's [N, T, 3 x 256] at the memory's speed.
    parallelRanges(threads, outer, std::max<int64_t>(1, (int64_t)((kStreamGrain * 4) / std::max<size_t>(1, rowBytes))),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t o = begin; o < end; ++o) {
                       char* row = y + o * rowBytes;
                       for (size_t i = 0; i < in.size(); ++i) {
                         const size_t n = extents[i] * innerBytes;
                         if (!n) continue;
                         std::memcpy(row, static_cast<const char*>(in[i]->raw()) + o * n, n);
                         row += n;
                       }
                     }
                   });
    return Status::ok();
  });
}

Status createSplit(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)xs.size(), &axis))
    return opError(ctx, "axis out of range for rank " + std::to_string(xs.size()));
  int64_t total = 0;
  std::vector<int64_t> extents;
  for (size_t i = 0; i < ctx.outputTypes.size(); ++i) {
    const TensorType& t = ctx.outputTypes[i];
    bool fits = t.dtype == ctx.inputTypes[0].dtype && t.shape.size() == xs.size();
    for (size_t d = 0; fits && d < xs.size(); ++d) fits = (int64_t)d == axis || t.shape[d] == xs[d];
    if (!fits)
      return opError(ctx, "output " + std::to_string(i) + " " + shapeToString(t.shape) +
                              " does not fit the input " + shapeToString(xs));
    extents.push_back(t.shape[axis]);
    total += t.shape[axis];
  }
  if (total != xs[axis])
    return opError(ctx, "output extents along axis " + std::to_string(axis) + " add up to " +
                            std::to_string(total) + ", not " + std::to_string(xs[axis]));
  const int64_t outer = product(xs, 0, axis);
  const size_t innerBytes = product(xs, axis + 1, xs.size()) * dtypeSize(ctx.inputTypes[0].dtype);
  const size_t rowBytes = (size_t)total * innerBytes;  // one outer index of the input
  const int threads = ctx.threads;
  const OpName name(ctx);
  const ConstOperands consts(ctx);
  return makeKernel(out, [=](const Inputs& in, const Outputs& outs) -> Status {
    if (const Tensor* s = consts.get(in, 1)) {
      std::vector<int64_t> split;
      TANDEM_RETURN_IF_ERROR(readInts(name, s, "split", &split));
      if (split != extents)
        return opError(name, "the split input disagrees with the output shapes");
    }
    const char* x = static_cast<const char*>(in[0]->raw());
    parallelRanges(threads, outer, std::max<int64_t>(1, (int64_t)((kStreamGrain * 4) / std::max<size_t>(1, rowBytes))),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t o = begin; o < end; ++o) {
                       const char* row = x + o * rowBytes;
                       for (size_t i = 0; i < outs.size(); ++i) {
                         const size_t n = extents[i] * innerBytes;
                         if (!n) continue;
                         if (outs[i]) std::memcpy(static_cast<char*>(outs[i]->raw()) + o * n, row, n);
                         row += n;
                       }
                     }
                   });
    return Status::ok();
  });
}

// ---- Slice-13 ------------------------------------------------------------------------------

}  // namespace

Status slicePlan(const OpName& op, const Shape& xs, const Inputs& in, std::vector<int64_t>* start,
                 std::vector<int64_t>* step, Shape* count) {
  const int64_t r = (int64_t)xs.size();
  std::vector<int64_t> starts, ends, axes, steps;
  TANDEM_RETURN_IF_ERROR(readInts(op, inputAt(in, 1), "starts", &starts));
  TANDEM_RETURN_IF_ERROR(readInts(op, inputAt(in, 2), "ends", &ends));
  if (const Tensor* a = inputAt(in, 3)) {
    TANDEM_RETURN_IF_ERROR(readInts(op, a, "axes", &axes));
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back((int64_t)i);
  }
  if (const Tensor* s = inputAt(in, 4))
    TANDEM_RETURN_IF_ERROR(readInts(op, s, "steps", &steps));
  else
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return opError(op, "starts, ends, axes and steps must have the same length");
  start->assign(r, 0);
  step->assign(r, 1);
  *count = xs;
  std::vector<bool> seen(r, false);
  for (size_t j = 0; j < starts.size(); ++j) {
    int64_t ax;
    if (!normalizeAxis(axes[j], r, &ax))
      return opError(op, "axis " + std::to_string(axes[j]) + " is out of range");
    if (seen[ax]) return opError(op, "axis " + std::to_string(axes[j]) + " is repeated");
    seen[ax] = true;
    const int64_t dim = xs[ax], st = steps[j];
    if (st == 0) return opError(op, "steps must not be 0");
    int64_t s = starts[j], e = ends[j];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t n;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      n = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      n = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    (*start)[ax] = s;
    (*step)[ax] = st;
    (*count)[ax] = n;
  }
  return Status::ok();
}

namespace {

Status createSlice(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() < 3) return opError(ctx, "expects data, starts, ends");
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  const OpName name(ctx);
  // Validate constant operands now so a bad model fails at load.
  {
    Inputs known(ctx.inputTypes.size(), nullptr);
    bool allKnown = true;
    for (size_t i = 1; i < ctx.inputTypes.size(); ++i) {
      known[i] = constInputAt(ctx, i);
      if (inputPresent(ctx, i) && !known[i]) allKnown = false;
    }
    if (allKnown) {
      std::vector<int64_t> start, step;
      Shape count;
      TANDEM_RETURN_IF_ERROR(slicePlan(name, xs, known, &start, &step, &count));
      if (count != ys)
        return opError(ctx, "slice of " + shapeToString(xs) + " has shape " + shapeToString(count) +
                                ", output is " + shapeToString(ys));
    }
  }
  const std::vector<int64_t> inSt = rowMajorStrides(xs);
  const ConstOperands consts(ctx);
  RunFn fn;
  dispatchBySize(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      std::vector<int64_t> start, step;
      Shape count;
      TANDEM_RETURN_IF_ERROR(slicePlan(name, xs, consts.resolve(in), &start, &step, &count));
      if (count != ys)
        return opError(name, "slice of " + shapeToString(xs) + " has shape " +
                                 shapeToString(count) + ", output is " + shapeToString(ys));
      int64_t base = 0;
      std::vector<int64_t> st(xs.size());
      for (size_t d = 0; d < xs.size(); ++d) {
        if (count[d] == 0) return Status::ok();  // empty: start may point past the end
        base += start[d] * inSt[d];
        st[d] = step[d] * inSt[d];
      }
      const T* x = static_cast<const T*>(in[0]->raw());
      T* y = static_cast<T*>(outs[0]->raw());
      forEachStrided<1>(ys, {st.data()}, {base},
                        [&](int64_t i, const std::array<int64_t, 1>& o) { y[i] = x[o[0]]; });
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn), ShapeValues::AtRun);  // slicePlan of consts.resolve(in)
}

// ---- Gather-13 -----------------------------------------------------------------------------

Status createGather(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& is = ctx.inputTypes[1].shape;
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)xs.size(), &axis))
    return opError(ctx, "axis out of range for rank " + std::to_string(xs.size()));
  Shape ys(xs.begin(), xs.begin() + axis);
  ys.insert(ys.end(), is.begin(), is.end());
  ys.insert(ys.end(), xs.begin() + axis + 1, xs.end());
  if (ys != ctx.outputTypes[0].shape)
    return opError(ctx, "output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not " +
                            shapeToString(ys));
  const int64_t outer = product(xs, 0, axis), dim = xs[axis];
  const size_t innerBytes = product(xs, axis + 1, xs.size()) * dtypeSize(ctx.inputTypes[0].dtype);
  const OpName name(ctx);
  return makeKernel(out, [=](const Inputs& in, const Outputs& outs) -> Status {
    std::vector<int64_t> idx;
    TANDEM_RETURN_IF_ERROR(readInts(name, in[1], "indices", &idx));
    for (int64_t& i : idx) {
      if (i < -dim || i >= dim)
        return opError(name, "index " + std::to_string(i) + " is out of range for axis " +
                                 std::to_string(axis) + " of size " + std::to_string(dim));
      if (i < 0) i += dim;
    }
    const char* x = static_cast<const char*>(in[0]->raw());
    char* y = static_cast<char*>(outs[0]->raw());
    if (!innerBytes) return Status::ok();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i : idx) {
        std::memcpy(y, x + (o * dim + i) * innerBytes, innerBytes);
        y += innerBytes;
      }
    return Status::ok();
  });
}

// ---- Pad and Tile: each output coordinate maps per dim to a source coordinate or none ------

Status createPad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const std::string mode = ctx.attrs->getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return opError(ctx,
                   "attribute mode='" + mode + "' is not one of constant, reflect, edge, wrap");
  if (ctx.inputTypes.size() < 2 || !inputPresent(ctx, 1))
    return opError(ctx, "the pads input is required");
  if (inputPresent(ctx, 2) && (ctx.inputTypes[2].dtype != ctx.inputTypes[0].dtype ||
                               numElements(ctx.inputTypes[2].shape) != 1))
    return opError(ctx, "constant_value must be a one-element tensor of the data dtype");
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  const OpName name(ctx);
  const int threads = std::max(1, ctx.threads);
  const ConstOperands consts(ctx);
  RunFn fn;
  dispatchDType(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& run, const Outputs& outs) -> Status {
      const Inputs in = consts.resolve(run);
      const int64_t r = (int64_t)xs.size();
      std::vector<int64_t> pads, axes;
      TANDEM_RETURN_IF_ERROR(readInts(name, inputAt(in, 1), "pads", &pads));
      if (const Tensor* a = inputAt(in, 3)) {
        TANDEM_RETURN_IF_ERROR(readInts(name, a, "axes", &axes));
      } else {
        for (int64_t d = 0; d < r; ++d) axes.push_back(d);
      }
      if (pads.size() != 2 * axes.size())
        return opError(name, "pads has " + std::to_string(pads.size()) + " values, expected " +
                                 std::to_string(2 * axes.size()));
      std::vector<int64_t> pb(r, 0), pe(r, 0);
      const int64_t na = (int64_t)axes.size();
      for (int64_t j = 0; j < na; ++j) {
        int64_t ax;
        if (!normalizeAxis(axes[j], r, &ax)) return opError(name, "axis out of range");
        pb[ax] = pads[j];
        pe[ax] = pads[na + j];
      }
      std::vector<std::vector<int64_t>> map(r);
      for (int64_t d = 0; d < r; ++d) {
        const int64_t n = xs[d];
        int64_t padded;
        if (!checkedAdd(n, pb[d], &padded) || !checkedAdd(padded, pe[d], &padded) ||
            padded != ys[d])
          return opError(name, "padding dim " + std::to_string(d) + " of " + shapeToString(xs) +
                                   " does not give the output " + shapeToString(ys));
        if (mode != "constant" && n == 0 && ys[d] > 0)
          return opError(name, "mode '" + mode + "' cannot pad an empty dim");
        map[d].resize(ys[d]);
        for (int64_t o = 0; o < ys[d]; ++o) {
          int64_t s = o - pb[d];  // negative pads crop: s starts inside the input
          if (s < 0 || s >= n) {
            if (mode == "constant") {
              s = -1;
            } else if (mode == "edge") {
              s = s < 0 ? 0 : n - 1;
            } else if (mode == "wrap") {
              s = ((s % n) + n) % n;
            } else if (n == 1) {  // reflect of one element repeats it
              s = 0;
            } else {
              const int64_t period = 2 * (n - 1);
              s = ((s % period) + period) % period;
              if (s >= n) s = period - s;
            }
          }
          map[d][o] = s;
        }
      }
      const Tensor* cv = inputAt(in, 2);
      const T fill = cv && cv->numel() > 0 ? cv->data<T>()[0] : T(0);
      gatherByDimMaps<T>(*in[0], *outs[0], map, fill, threads);
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn), ShapeValues::AtRun);  // pads, axes: consts.resolve(run)
}

Status createTile(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  if (xs.size() != ys.size()) return opError(ctx, "output rank differs from input rank");
  const OpName name(ctx);
  const int threads = std::max(1, ctx.threads);
  const ConstOperands consts(ctx);
  RunFn fn;
  dispatchBySize(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      std::vector<int64_t> repeats;
      TANDEM_RETURN_IF_ERROR(readInts(name, consts.get(in, 1), "repeats", &repeats));
      if (repeats.size() != xs.size())
        return opError(name, "repeats must have one value per input dim");
      std::vector<std::vector<int64_t>> map(xs.size());
      for (size_t d = 0; d < xs.size(); ++d) {
        int64_t tiled;
        if (repeats[d] < 0 || !checkedMul(xs[d], repeats[d], &tiled) || tiled != ys[d])
          return opError(name,
                         "repeats do not turn " + shapeToString(xs) + " into " + shapeToString(ys));
        for (int64_t o = 0; o < ys[d]; ++o) map[d].push_back(o % xs[d]);
      }
      gatherByDimMaps<T>(*in[0], *outs[0], map, T(0), threads);
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn), ShapeValues::AtRun);  // repeats: consts.get(in, 1)
}

}  // namespace

void registerIndexingKernels(KernelRegistry& r) {
  const std::string all = dtypesToText(allTypes());
  addRef(r, "Concat", acceptsAnyData(), all, createConcat);
  addRef(r, "Split", acceptsAnyData(), all, createSplit);
  addRef(r, "Slice", acceptsAnyData(), all, createSlice);
  addRef(r, "Pad", acceptsAnyData(), all, createPad);
  addRef(r, "Tile", acceptsAnyData(), all, createTile);
  addRef(
      r, "Gather",
      [](const std::vector<DType>& in) {
        return in.size() == 2 && contains(allTypes(), in[0]) && contains(indexTypes(), in[1]);
      },
      "data " + all + "; indices i32,i64", createGather);
}

}  // namespace ref
}  // namespace tandem

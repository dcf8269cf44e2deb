// Reference kernels that gather, scatter or select elements by index or by value:
// GatherElements-13, ScatterElements-16, GatherND-13, ScatterND-16, OneHot-11, DepthToSpace-13,
// SpaceToDepth-13, ReverseSequence-10, TopK-11, and the value-sized Compress-11, NonZero-13,
// Unique-11, NonMaxSuppression-11, TensorScatter-24 (runtime/DataDependent.h: their results were sized at compile
// time from constant operands, and run() checks the values still give that size; or, in a
// dynamic region, the result type has an unknown dim and run() allocates it at the selected size).
#include <algorithm>
#include <atomic>
#include <numeric>

#include "runtime/DataDependent.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

// Index operand element k (i32 or i64) as int64.
inline int64_t indexAt(const Tensor& t, int64_t k) {
  return t.dtype() == DType::I64 ? t.data<int64_t>()[k] : t.data<int32_t>()[k];
}

// A value-sized result whose size differs from the planned one: the plan was made for other
// operand values (a constant folded at compile time cannot change, so this is a corrupt plan).
Status sizeMismatch(const OpName& op, int64_t planned, int64_t got) {
  return opError(op, "data-dependent output: the plan has " + std::to_string(planned) +
                         " entries but the operand values select " + std::to_string(got));
}

// A value-sized result of `got` entries (`shape`, `dtype`): with `planned` < 0 its type has an
// unknown dim (a dynamic region runs the op, runtime/DynamicRegion.h) and `out` is allocated
// here at that size (by `alloc`, the region's arena, when set: KernelContext::allocResult);
// otherwise the values must select the planned size.
Status sizeResult(const OpName& op, int64_t planned, int64_t got, DType dtype, const Shape& shape,
                  Tensor* out, const KernelContext::ResultAllocator& alloc) {
  if (planned >= 0) return got == planned ? Status::ok() : sizeMismatch(op, planned, got);
  Status st = alloc ? alloc(dtype, shape, "the result", out) : Tensor::tryAlloc(dtype, shape, "the result", out);
  return st.isOk() ? st : opError(op, st.message());
}

// ---- GatherElements / ScatterElements: walk the indices with data's strides, axis from the
// index value --------------------------------------------------------------------------------

struct ElementsWalk {
  Shape is;                       // indices shape
  std::vector<int64_t> dataStrides;  // data strides over the indices shape, 0 on the axis
  int64_t axisStride = 0, axisDim = 0;
};

Status elementsWalk(const KernelContext& ctx, const Shape& xs, const Shape& is, ElementsWalk* w) {
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)xs.size(), &axis) || is.size() != xs.size())
    return opError(ctx, "axis or indices rank does not fit data " + shapeToString(xs));
  for (size_t d = 0; d < xs.size(); ++d)
    if ((int64_t)d != axis && is[d] > xs[d])
      return opError(ctx, "indices " + shapeToString(is) + " exceed data " + shapeToString(xs) +
                              " in dim " + std::to_string(d));
  w->is = is;
  w->dataStrides = rowMajorStrides(xs);
  w->axisStride = w->dataStrides[axis];
  w->axisDim = xs[axis];
  w->dataStrides[axis] = 0;
  return Status::ok();
}

Status createGatherElements(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  ElementsWalk w;
  TANDEM_RETURN_IF_ERROR(elementsWalk(ctx, ctx.inputTypes[0].shape, ctx.inputTypes[1].shape, &w));
  if (ctx.outputTypes[0].shape != w.is) return opError(ctx, "output shape must be the indices'");
  const OpName name(ctx);
  RunFn fn;
  dispatchBySize(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* x = in[0]->data<T>();
      T* y = outs[0]->data<T>();
      const Tensor& ix = *in[1];
      bool bad = false;
      forEachStrided<1>(w.is, {w.dataStrides.data()}, {0}, [&](int64_t i, const std::array<int64_t, 1>& o) {
        int64_t k = indexAt(ix, i);
        if (k < 0) k += w.axisDim;
        if (k < 0 || k >= w.axisDim) {
          bad = true;
          return;
        }
        y[i] = x[o[0] + k * w.axisStride];
      });
      if (bad) return opError(name, "an index is out of range for an axis of size " + std::to_string(w.axisDim));
      return Status::ok();
    };
  });
  return makeKernel(out, std::move(fn));
}

// ScatterElements/ScatterND reductions: none, add, mul (16), max, min (18).
enum class Reduction { None, Add, Mul, Max, Min };
Status readReduction(const KernelContext& ctx, Reduction* r) {
  const std::string s = ctx.attrs->getString("reduction", "none");
  if (s == "none") *r = Reduction::None;
  else if (s == "add") *r = Reduction::Add;
  else if (s == "mul") *r = Reduction::Mul;
  else if (s == "max") *r = Reduction::Max;
  else if (s == "min") *r = Reduction::Min;
  else return opError(ctx, "attribute reduction='" + s + "' is not one of none, add, mul, max, min");
  return Status::ok();
}
/// max and min propagate a NaN of either side (numpy.maximum / numpy.minimum, which ONNX's
/// reference uses).
template <typename T>
inline void reduceInto(T& dst, T v, Reduction r) {
  switch (r) {
    case Reduction::None: dst = v; break;
    case Reduction::Add: dst = T(dst + v); break;
    case Reduction::Mul: dst = T(dst * v); break;
    case Reduction::Max:
      if (dst == dst && !(v <= dst)) dst = v;
      break;
    case Reduction::Min:
      if (dst == dst && !(v >= dst)) dst = v;
      break;
  }
}

Status createScatterElements(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  ElementsWalk w;
  TANDEM_RETURN_IF_ERROR(elementsWalk(ctx, ctx.inputTypes[0].shape, ctx.inputTypes[1].shape, &w));
  if (ctx.inputTypes[2].shape != w.is) return opError(ctx, "updates must have the indices' shape");
  Reduction red;
  TANDEM_RETURN_IF_ERROR(readReduction(ctx, &red));
  const OpName name(ctx);
  // Indices as large as the data but along the axis (torchvision's MultiScaleRoIAlign merges
  // its levels so, [n, 256, 7, 7] into [N, 256, 7, 7]): index (a, j, r) writes y[a][k][r], so
  // ranges of r (and a) are disjoint writes, split over the threads; each keeps j's order,
  // so duplicate indices resolve as in one sequential pass.
  const Shape& xs = ctx.inputTypes[0].shape;
  int64_t axis = 0;
  normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)xs.size(), &axis);
  bool aligned = true;
  for (size_t d = 0; d < xs.size(); ++d) aligned &= (int64_t)d == axis || w.is[d] == xs[d];
  const int64_t outer = product(xs, 0, axis), inner = product(xs, axis + 1, xs.size());
  const int64_t picks = w.is.empty() ? 1 : w.is[axis];
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchDType(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      T* y = outs[0]->data<T>();
      if (y != in[0]->data<T>()) {
        const T* x = in[0]->data<T>();
        parallelRanges(threads, in[0]->numel(), kStreamGrain,
                       [&](int64_t b, int64_t e) { std::memcpy(y + b, x + b, (e - b) * sizeof(T)); });
      }
      const T* u = in[2]->data<T>();
      if (aligned && !xs.empty()) {
        auto scatter = [&](auto* idx) {
          std::atomic<bool> bad{false};
          const int64_t D = w.axisDim;
          parallelRanges(threads, outer * inner, kStreamGrain / 4, [&](int64_t b, int64_t e) {
            for (int64_t q = b; q < e;) {
              const int64_t a = q / inner, r0 = q % inner, r1 = std::min(inner, r0 + (e - q));
              for (int64_t j = 0; j < picks; ++j) {
                const int64_t row = (a * picks + j) * inner;
                for (int64_t r = r0; r < r1; ++r) {
                  int64_t k = (int64_t)idx[row + r];
                  if (k < 0) k += D;
                  if (k < 0 || k >= D) {
                    bad = true;
                    continue;
                  }
                  reduceInto(y[(a * D + k) * inner + r], u[row + r], red);
                }
              }
              q += r1 - r0;
            }
          });
          return !bad;
        };
        const bool ok = in[1]->dtype() == DType::I64 ? scatter(in[1]->data<int64_t>())
                                                      : scatter(in[1]->data<int32_t>());
        if (!ok) return opError(name, "an index is out of range for an axis of size " + std::to_string(w.axisDim));
        return Status::ok();
      }
      const Tensor& ix = *in[1];
      bool bad = false;
      forEachStrided<1>(w.is, {w.dataStrides.data()}, {0}, [&](int64_t i, const std::array<int64_t, 1>& o) {
        int64_t k = indexAt(ix, i);
        if (k < 0) k += w.axisDim;
        if (k < 0 || k >= w.axisDim) {
          bad = true;
          return;
        }
        reduceInto(y[o[0] + k * w.axisStride], u[i], red);
      });
      if (bad) return opError(name, "an index is out of range for an axis of size " + std::to_string(w.axisDim));
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- GatherND / ScatterND: index tuples address slices of S contiguous elements -----------

// Element offset of the slice tuple `t` (k entries at `idx`) in batch `batch`; -1 if out of range.
inline int64_t tupleOffset(const int64_t* idx, int64_t k, const Shape& xs, size_t first,
                           const std::vector<int64_t>& st) {
  int64_t off = 0;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t n = xs[first + j];
    int64_t v = idx[j];
    if (v < 0) v += n;
    if (v < 0 || v >= n) return -1;
    off += v * st[first + j];
  }
  return off;
}

Status createGatherND(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape, is = ctx.inputTypes[1].shape;
  const int64_t b = ctx.attrs->getInt("batch_dims", 0);
  if (is.empty() || b < 0 || b + is.back() > (int64_t)xs.size())
    return opError(ctx, "indices " + shapeToString(is) + " do not fit data " + shapeToString(xs));
  const int64_t k = is.back();
  const int64_t batches = product(xs, 0, b), tuples = product(is, 0, is.size() - 1);
  const int64_t perBatch = batches ? tuples / batches : 0;
  const int64_t S = product(xs, b + k, xs.size()), batchStride = product(xs, b, xs.size());
  const std::vector<int64_t> st = rowMajorStrides(xs);
  const size_t esz = dtypeSize(ctx.inputTypes[0].dtype);
  const OpName name(ctx);
  const int threads = std::max(1, ctx.threads);
  return makeKernel(out, [=](const Inputs& in, const Outputs& outs) -> Status {
    const int64_t* idx = in[1]->data<int64_t>();
    const char* x = static_cast<const char*>(in[0]->raw());
    char* y = static_cast<char*>(outs[0]->raw());
    std::atomic<bool> bad{false};
    // Tuples over the threads (RetinaNet gathers 4M single scores from one level); one
    // element per tuple copies as a typed load, not a memcpy call.
    parallelRanges(threads, tuples, std::max<int64_t>(1, kStreamGrain / 4 / std::max<int64_t>(1, S)),
                   [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t off = tupleOffset(idx + t * k, k, xs, b, st);
        if (off < 0) {
          bad = true;
          return;
        }
        const char* src = x + ((t / perBatch) * batchStride + off) * esz;
        char* dst = y + t * S * esz;
        if (S == 1 && esz == 4) std::memcpy(dst, src, 4);
        else if (S == 1 && esz == 8) std::memcpy(dst, src, 8);
        else std::memcpy(dst, src, S * esz);
      }
    });
    if (bad) return opError(name, "an index tuple is out of range for data " + shapeToString(xs));
    return Status::ok();
  });
}

Status createScatterND(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape, is = ctx.inputTypes[1].shape;
  if (is.empty() || is.back() > (int64_t)xs.size())
    return opError(ctx, "indices " + shapeToString(is) + " do not fit data " + shapeToString(xs));
  Reduction red;
  TANDEM_RETURN_IF_ERROR(readReduction(ctx, &red));
  const int64_t k = is.back(), tuples = product(is, 0, is.size() - 1), S = product(xs, k, xs.size());
  if (numElements(ctx.inputTypes[2].shape) != tuples * S)
    return opError(ctx, "updates " + shapeToString(ctx.inputTypes[2].shape) + " do not fit");
  const std::vector<int64_t> st = rowMajorStrides(xs);
  const OpName name(ctx);
  RunFn fn;
  dispatchDType(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      T* y = outs[0]->data<T>();
      if (y != in[0]->data<T>()) std::memcpy(y, in[0]->raw(), in[0]->numel() * sizeof(T));
      const int64_t* idx = in[1]->data<int64_t>();
      const T* u = in[2]->data<T>();
      for (int64_t t = 0; t < tuples; ++t) {
        const int64_t off = tupleOffset(idx + t * k, k, xs, 0, st);
        if (off < 0) return opError(name, "an index tuple is out of range for data " + shapeToString(xs));
        for (int64_t j = 0; j < S; ++j) reduceInto(y[off + j], u[t * S + j], red);
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- OneHot ----------------------------------------------------------------------------------

Status createOneHot(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape is = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  int64_t axis;
  if (ys.size() != is.size() + 1 || !normalizeAxis(ctx.attrs->getInt("axis", -1), ys.size(), &axis))
    return opError(ctx, "output rank must be the indices' + 1 and axis in range");
  if (ctx.outputTypes[0].dtype != ctx.inputTypes[2].dtype || numElements(ctx.inputTypes[2].shape) != 2)
    return opError(ctx, "values must be [off, on] of the output dtype");
  const int64_t depth = ys[axis], outer = product(is, 0, axis), inner = product(is, axis, is.size());
  const DType idt = ctx.inputTypes[0].dtype;
  RunFn fn;
  dispatchBySize(ctx.outputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T off = in[2]->data<T>()[0], on = in[2]->data<T>()[1];
      T* y = outs[0]->data<T>();
      std::fill(y, y + outer * depth * inner, off);
      std::vector<int64_t> idx(in[0]->numel());
      dispatchNumeric(idt, [&](auto itag) {
        using I = decltype(itag);
        const I* p = in[0]->data<I>();
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = (int64_t)p[i];
      });
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t v = idx[o * inner + i];
          if (v < 0) v += depth;
          if (v >= 0 && v < depth) y[(o * depth + v) * inner + i] = on;  // out of range: all off
        }
      return Status::ok();
    };
  });
  return makeKernel(out, std::move(fn));
}

// ---- DepthToSpace / SpaceToDepth: a 6-D transpose ------------------------------------------

Status createBlocks(const KernelContext& ctx, std::unique_ptr<Kernel>* out, bool toSpace) {
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  const int64_t b = ctx.attrs->getInt("blocksize", 0);
  if (xs.size() != 4 || ys.size() != 4 || b < 1) return opError(ctx, "needs 4-D tensors and blocksize >= 1");
  const int64_t N = xs[0];
  Shape view, outView;
  std::vector<int> perm;
  if (toSpace) {
    const int64_t C = ys[1], H = xs[2], W = xs[3];
    if (ctx.attrs->getString("mode", "DCR") == "CRD") {
      view = {N, C, b, b, H, W};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      view = {N, b, b, C, H, W};
      perm = {0, 3, 4, 1, 5, 2};
    }
  } else {
    const int64_t C = xs[1], H = ys[2], W = ys[3];
    view = {N, C, H, b, W, b};
    perm = {0, 3, 5, 1, 2, 4};
  }
  const std::vector<int64_t> vst = rowMajorStrides(view);
  std::vector<int64_t> st(6);
  for (int d = 0; d < 6; ++d) {
    outView.push_back(view[perm[d]]);
    st[d] = vst[perm[d]];
  }
  if (numElements(outView) != numElements(ys)) return opError(ctx, "output shape does not fit");
  RunFn fn;
  dispatchBySize(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* x = in[0]->data<T>();
      T* y = outs[0]->data<T>();
      forEachStrided<1>(outView, {st.data()}, {0},
                        [&](int64_t i, const std::array<int64_t, 1>& o) { y[i] = x[o[0]]; });
      return Status::ok();
    };
  });
  return makeKernel(out, std::move(fn));
}

// ---- ReverseSequence ---------------------------------------------------------------------------

Status createReverseSequence(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape;
  const bool batchFirst = ctx.attrs->getInt("batch_axis", 1) == 0;
  const int64_t T = batchFirst ? xs[1] : xs[0], B = batchFirst ? xs[0] : xs[1];
  const int64_t inner = product(xs, 2, xs.size()) * dtypeSize(ctx.inputTypes[0].dtype);
  if (numElements(ctx.inputTypes[1].shape) != B) return opError(ctx, "sequence_lens must have one entry per batch");
  // Byte offset of (t, b).
  const int64_t tStride = (batchFirst ? 1 : B) * inner, bStride = (batchFirst ? T : 1) * inner;
  const OpName name(ctx);
  return makeKernel(out, [=](const Inputs& in, const Outputs& outs) -> Status {
    const char* x = static_cast<const char*>(in[0]->raw());
    char* y = static_cast<char*>(outs[0]->raw());
    const int64_t* lens = in[1]->data<int64_t>();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = lens[b];
      if (len < 0 || len > T) return opError(name, "sequence length " + std::to_string(len) + " is out of [0, " + std::to_string(T) + "]");
      for (int64_t t = 0; t < T; ++t) {
        const int64_t src = t < len ? len - 1 - t : t;
        std::memcpy(y + t * tStride + b * bStride, x + src * tStride + b * bStride, inner);
      }
    }
    return Status::ok();
  });
}

// ---- TopK ----------------------------------------------------------------------------------

Status createTopK(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", -1), xs.size(), &axis) || ys.size() != xs.size())
    return opError(ctx, "axis out of range");
  const bool largest = ctx.attrs->getInt("largest", 1) != 0;
  const int64_t n = xs[axis], k = ys[axis], outer = product(xs, 0, axis), inner = product(xs, axis + 1, xs.size());
  if (outputRequested(ctx, 1) && ctx.outputTypes[1].dtype != DType::I64) return opError(ctx, "Indices must be i64");
  const OpName name(ctx);
  const ConstOperands consts(ctx);
  RunFn fn;
  dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      std::vector<int64_t> kv;
      TANDEM_RETURN_IF_ERROR(readInts(name, consts.get(in, 1), "K", &kv));
      if (kv.size() != 1 || kv[0] != k) return sizeMismatch(name, k, kv.empty() ? -1 : kv[0]);
      const T* x = in[0]->data<T>();
      T* vals = outs[0]->data<T>();
      Tensor* io = outputAt(outs, 1);
      int64_t* idxOut = io ? io->data<int64_t>() : nullptr;
      std::vector<int64_t> order;
      std::vector<T> row;
      std::vector<std::pair<T, int64_t>> heap;
      // a before b in the output: the larger (smaller) value, then the lower index.
      auto better = [&](const std::pair<T, int64_t>& a, const std::pair<T, int64_t>& b) {
        if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
        return a.second < b.second;
      };
      // Larger (or smaller) first; equal values keep the lower index first (ONNX TopK-11).
      auto before = [&](int64_t a, int64_t b) {
        if (row[a] != row[b]) return largest ? row[a] > row[b] : row[a] < row[b];
        return a < b;
      };
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const T* src = x + o * n * inner + i;
          // k of many (a detector's 1,000 best of 8M scores): one scan against a heap of the
          // k best so far, its worst on top; most entries lose the one comparison with it. A
          // later equal value has the higher index, so it never displaces (ONNX's tie rule).
          // A NaN (no order) sends the row to the full sort below, found during the same scan.
          bool nan = false;
          if (k > 0 && k < n / 8) {
            heap.clear();
            for (int64_t j = 0; j < k; ++j) {
              heap.push_back({src[j * inner], j});
              nan |= src[j * inner] != src[j * inner];
            }
            std::make_heap(heap.begin(), heap.end(), better);
            for (int64_t j = k; j < n; ++j) {
              const T v = src[j * inner];
              nan |= v != v;
              if (largest ? v > heap.front().first : v < heap.front().first) {
                std::pop_heap(heap.begin(), heap.end(), better);
                heap.back() = {v, j};
                std::push_heap(heap.begin(), heap.end(), better);
              }
            }
          }
          if (k > 0 && k < n / 8 && !nan) {
            std::sort_heap(heap.begin(), heap.end(), better);
            const int64_t base = o * k * inner + i;
            for (int64_t j = 0; j < k; ++j) {
              vals[base + j * inner] = heap[j].first;
              if (idxOut) idxOut[base + j * inner] = heap[j].second;
            }
            continue;
          }
          row.resize(n);
          order.resize(n);
          for (int64_t j = 0; j < n; ++j) row[j] = src[j * inner];
          std::iota(order.begin(), order.end(), 0);
          std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          const int64_t base = o * k * inner + i;
          for (int64_t j = 0; j < k; ++j) {
            vals[base + j * inner] = row[order[j]];
            if (idxOut) idxOut[base + j * inner] = order[j];
          }
        }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- Compress, NonZero, Unique, NonMaxSuppression: value-sized results --------------------

Status createCompress(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  int64_t axis = -1, outer = 1, n = numElements(xs), inner = 1;
  if (ctx.attrs->has("axis")) {
    if (!normalizeAxis(ctx.attrs->getInt("axis", 0), xs.size(), &axis)) return opError(ctx, "axis out of range");
    outer = product(xs, 0, axis), n = xs[axis], inner = product(xs, axis + 1, xs.size());
  }
  const int64_t planned = axis >= 0 ? ys[axis] : ys[0];  // < 0: sized by the run
  const DType dt = ctx.inputTypes[0].dtype;
  const size_t bytes = inner * dtypeSize(dt);
  const OpName name(ctx);
  const KernelContext::ResultAllocator alloc = ctx.allocResult;
  const ConstOperands consts(ctx);
  return makeKernel(out, [=](const Inputs& in, const Outputs& outs) -> Status {
    const Tensor* cond = consts.get(in, 1);
    const int64_t got = countTrue(*cond, n);
    TANDEM_RETURN_IF_ERROR(sizeResult(name, planned, got, dt, selectedShape(xs, axis, got), outs[0], alloc));
    const uint8_t* c = static_cast<const uint8_t*>(cond->raw());
    const int64_t m = std::min(n, cond->numel());
    const char* x = static_cast<const char*>(in[0]->raw());
    char* y = static_cast<char*>(outs[0]->raw());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < m; ++j)
        if (c[j]) {
          std::memcpy(y, x + (o * n + j) * bytes, bytes);
          y += bytes;
        }
    return Status::ok();
  });
}

Status createNonZero(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  if (ys.size() != 2 || ys[0] != (int64_t)xs.size() || ctx.outputTypes[0].dtype != DType::I64)
    return opError(ctx, "output must be i64 [rank, count]");
  const int64_t planned = ys[1];
  const OpName name(ctx);
  const KernelContext::ResultAllocator alloc = ctx.allocResult;
  const int threads = std::max(1, ctx.threads);
  return makeKernel(out, [=](const Inputs& in, const Outputs& outs) -> Status {
    const size_t r = xs.size();
    const int64_t total = numElements(xs);
    // Chunks over the threads: each counts its non-zeros, then writes its indices from the
    // count of the chunks before it (row-major order, as one pass gives).
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(threads * 4, total / kStreamGrain));
    std::vector<int64_t> starts(chunks + 1, 0);
    // Set by the dispatch; its registration (allTypes) never offers the half-float types.
    Status sized = opError(name, std::string("input dtype ") + dtypeName(in[0]->dtype()) + " is not one NonZero accepts");
    dispatchDType(in[0]->dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* x = in[0]->data<T>();
      parallelRanges(threads, chunks, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          int64_t n = 0;
          for (int64_t i = total * c / chunks, e = total * (c + 1) / chunks; i < e; ++i) n += x[i] != T(0);
          starts[c + 1] = n;
        }
      });
      for (int64_t c = 0; c < chunks; ++c) starts[c + 1] += starts[c];
      const int64_t got = starts[chunks];
      sized = sizeResult(name, planned, got, DType::I64, {(int64_t)r, got}, outs[0], alloc);
      if (!sized.isOk()) return;
      int64_t* y = outs[0]->data<int64_t>();
      parallelRanges(threads, chunks, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t b = total * c / chunks, e = total * (c + 1) / chunks;
          int64_t k = starts[c];
          if (r == 1) {
            // 64 flags to a mask, then its set bits: no branch per element to mispredict
            // (a score threshold passes about half at random).
            for (int64_t i0 = b; i0 < e; i0 += 64) {
              const int64_t len = std::min<int64_t>(64, e - i0);
              uint64_t mask = 0;
              for (int64_t j = 0; j < len; ++j) mask |= uint64_t(x[i0 + j] != T(0)) << j;
              for (; mask; mask &= mask - 1) y[k++] = i0 + __builtin_ctzll(mask);
            }
            continue;
          }
          std::vector<int64_t> idx(r, 0);
          for (int64_t d = (int64_t)r - 1, rem = b; d >= 0; --d) {
            idx[d] = rem % xs[d];
            rem /= xs[d];
          }
          for (int64_t i = b; i < e; ++i) {
            if (x[i] != T(0)) {
              for (size_t d = 0; d < r; ++d) y[d * got + k] = idx[d];
              ++k;
            }
            for (int64_t d = (int64_t)r - 1; d >= 0 && ++idx[d] == xs[d]; --d) idx[d] = 0;
          }
        }
      });
    });
    return sized;
  });
}

Status createUnique(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  int64_t axis = -1, outer = 1, n = numElements(xs), inner = 1;
  if (ctx.attrs->has("axis")) {
    if (!normalizeAxis(ctx.attrs->getInt("axis", 0), xs.size(), &axis)) return opError(ctx, "axis out of range");
    outer = product(xs, 0, axis), n = xs[axis], inner = product(xs, axis + 1, xs.size());
  }
  for (size_t i = 1; i < ctx.outputTypes.size(); ++i)
    if (outputRequested(ctx, i) && ctx.outputTypes[i].dtype != DType::I64) return opError(ctx, "outputs 1-3 must be i64");
  const bool sorted = ctx.attrs->getInt("sorted", 1) != 0;
  const int64_t planned = axis >= 0 ? ys[axis] : ys[0];  // < 0: sized by the run
  const DType dt = ctx.inputTypes[0].dtype;
  const size_t bytes = inner * dtypeSize(dt);
  const OpName name(ctx);
  const KernelContext::ResultAllocator alloc = ctx.allocResult;
  return makeKernel(out, [=](const Inputs& in, const Outputs& outs) -> Status {
    UniqueResult u;
    Status st = uniqueSlices(*in[0], axis, sorted, &u);
    if (!st.isOk()) return opError(name, st.message());
    const int64_t got = u.first.size();
    TANDEM_RETURN_IF_ERROR(sizeResult(name, planned, got, dt, selectedShape(xs, axis, got), outs[0], alloc));
    if (planned < 0) {  // the index outputs are sized by the run too
      const int64_t sizes[3] = {got, (int64_t)u.inverse.size(), got};
      for (size_t i = 1; i < 4; ++i)
        if (Tensor* t = outputAt(outs, i))
          TANDEM_RETURN_IF_ERROR(sizeResult(name, planned, sizes[i - 1], DType::I64, {sizes[i - 1]}, t, alloc));
    }
    const char* x = static_cast<const char*>(in[0]->raw());
    char* y = static_cast<char*>(outs[0]->raw());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < got; ++k)
        std::memcpy(y + (o * got + k) * bytes, x + (o * n + u.first[k]) * bytes, bytes);
    const std::vector<int64_t>* parts[3] = {&u.first, &u.inverse, &u.counts};
    for (size_t i = 1; i < 4; ++i)
      if (Tensor* t = outputAt(outs, i)) std::copy(parts[i - 1]->begin(), parts[i - 1]->end(), t->data<int64_t>());
    return Status::ok();
  });
}

Status createNonMaxSuppression(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape ys = ctx.outputTypes[0].shape;
  if (ys.size() != 2 || ys[1] != 3 || ctx.outputTypes[0].dtype != DType::I64)
    return opError(ctx, "output must be i64 [selected, 3]");
  const int64_t planned = ys[0];
  const bool center = ctx.attrs->getInt("center_point_box", 0) != 0;
  const OpName name(ctx);
  const KernelContext::ResultAllocator alloc = ctx.allocResult;
  const ConstOperands consts(ctx, 0);
  return makeKernel(out, [=](const Inputs& run, const Outputs& outs) -> Status {
    const Inputs in = consts.resolve(run);
    std::vector<int64_t> maxOut;
    if (inputAt(in, 2)) TANDEM_RETURN_IF_ERROR(readInts(name, in[2], "max_output_boxes_per_class", &maxOut));
    auto scalar = [&](size_t i) { return inputAt(in, i) ? in[i]->data<float>()[0] : 0.f; };
    std::vector<int64_t> sel;
    Status st = nonMaxSuppression(*in[0], *in[1], maxOut.empty() ? 0 : maxOut[0], scalar(3),
                                  inputAt(in, 4) != nullptr, scalar(4), center, &sel);
    if (!st.isOk()) return opError(name, st.message());
    const int64_t got = (int64_t)sel.size() / 3;
    TANDEM_RETURN_IF_ERROR(sizeResult(name, planned, got, DType::I64, {got, 3}, outs[0], alloc));
    std::copy(sel.begin(), sel.end(), outs[0]->data<int64_t>());
    return Status::ok();
  });
}

AcceptsFn acceptsDataAndIndex(size_t indexPos, const std::vector<DType>& data) {
  return [indexPos, data](const std::vector<DType>& in) {
    return in.size() > indexPos && contains(data, in[0]) && contains(indexTypes(), in[indexPos]);
  };
}

}  // namespace

// ---- TensorScatter-24: a KV cache's update, bytes per row ---------------------------------

// present = past_cache with update[b, ..., s, ...] written at sequence position
// write_indices[b] + s along `axis` (linear: must fit; circular: modulo the cache length).
// Runs in place when the executor gives present past_cache's buffer (kInPlace).
Status createTensorScatter(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& ps = ctx.inputTypes[0].shape;
  const Shape& us = ctx.inputTypes[1].shape;
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", -2), (int64_t)ps.size(), &axis) || axis == 0)
    return opError(ctx, "axis must be in [1, rank) (not the batch dim)");
  if (us.size() != ps.size()) return opError(ctx, "update must have past_cache's rank");
  const bool circular = ctx.attrs->getString("mode", "linear") == "circular";
  const int64_t batch = ps[0], pre = product(ps, 1, axis), cache = ps[axis], seq = us[axis];
  const int64_t rowBytes = product(ps, axis + 1, (int64_t)ps.size()) * dtypeSize(ctx.inputTypes[0].dtype);
  const bool hasIndices = inputPresent(ctx, 2);
  OpName name(ctx);
  return makeKernel(out, [=](const Inputs& in, const Outputs& outs) -> Status {
    const char* past = static_cast<const char*>(in[0]->raw());
    const char* upd = static_cast<const char*>(in[1]->raw());
    char* y = static_cast<char*>(outs[0]->raw());
    if (y != past) std::memcpy(y, past, in[0]->bytes());
    const Tensor* idx = hasIndices ? inputAt(in, 2) : nullptr;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t start = idx ? idx->data<int64_t>()[b] : 0;
      if (start < 0 || (!circular && start + seq > cache) || (circular && cache == 0 && seq > 0))
        return opError(name, "write index " + std::to_string(start) + " of batch " +
                                 std::to_string(b) + " with " + std::to_string(seq) +
                                 " updates does not fit the cache of " + std::to_string(cache) +
                                 (circular ? "" : " (mode linear)"));
      for (int64_t o = 0; o < pre; ++o)
        for (int64_t s = 0; s < seq; ++s) {
          const int64_t pos = circular ? (start + s) % cache : start + s;
          std::memcpy(y + ((b * pre + o) * cache + pos) * rowBytes,
                      upd + ((b * pre + o) * seq + s) * rowBytes, rowBytes);
        }
    }
    return Status::ok();
  });
}

void registerSelectionKernels(KernelRegistry& r) {
  const std::string all = dtypesToText(allTypes());
  auto anyData = [](const std::vector<DType>& in) { return !in.empty() && contains(allTypes(), in[0]); };
  addRef(r, "GatherElements", acceptsDataAndIndex(1, allTypes()), "data " + all + "; indices i32,i64",
         createGatherElements);
  addRef(r, "ScatterElements", acceptsDataAndIndex(1, allTypes()), "data " + all + "; indices i32,i64",
         createScatterElements);
  addRef(r, "GatherND", acceptsDataAndIndex(1, allTypes()), "data " + all + "; indices i64", createGatherND);
  addRef(r, "ScatterND", acceptsDataAndIndex(1, allTypes()), "data " + all + "; indices i64", createScatterND);
  addRef(r, "OneHot", [](const std::vector<DType>& in) { return in.size() == 3 && contains(numericTypes(), in[0]); },
         "indices " + dtypesToText(numericTypes()) + "; values " + all, createOneHot);
  addRef(r, "DepthToSpace", anyData, all,
         [](const KernelContext& c, std::unique_ptr<Kernel>* o) { return createBlocks(c, o, true); });
  addRef(r, "SpaceToDepth", anyData, all,
         [](const KernelContext& c, std::unique_ptr<Kernel>* o) { return createBlocks(c, o, false); });
  addRef(r, "ReverseSequence", anyData, all, createReverseSequence);
  // Bytes only, so the 16-bit floats too.
  std::vector<DType> cacheTypes = allTypes();
  cacheTypes.push_back(DType::F16);
  cacheTypes.push_back(DType::BF16);
  addRef(
      r, "TensorScatter",
      [cacheTypes](const std::vector<DType>& in) {
        return in.size() >= 2 && contains(cacheTypes, in[0]) && in[1] == in[0] &&
               (in.size() < 3 || in[2] == DType::I64 || in[2] == DType::Undefined);
      },
      "past_cache and update " + dtypesToText(cacheTypes) + "; write_indices i64",
      createTensorScatter);
  addRef(r, "TopK", numericTypes(), createTopK);
  addRef(r, "Compress", anyData, all, createCompress);
  addRef(r, "NonZero", anyData, all, createNonZero);
  addRef(r, "Unique", anyData, all, createUnique);
  addRef(r, "NonMaxSuppression", {DType::F32}, createNonMaxSuppression);
}

}  // namespace ref
}  // namespace tandem

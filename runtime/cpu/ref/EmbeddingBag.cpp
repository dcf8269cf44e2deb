// EmbeddingBag (tandem domain, version 1): PyTorch's nn.EmbeddingBag as one op. torch.onnx
// writes it as a Loop over the bags (Slice the indices, Gather the rows, reduce them), which
// frontend/EmbeddingBagLoop.h recognises at import; this kernel computes what that Loop does,
// bag by bag, threaded over the bags, reading only the gathered rows; EmbeddingBagGrad, its
// gradient in the weight (--tandem-autodiff), adds each bag's dY row into the rows it read.
#include <algorithm>
#include <atomic>
#include <limits>

#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

enum class BagMode { Sum, Mean, Max };

/// A Slice bound on [0, len): negative counts from len, then clamped to [0, len].
int64_t sliceBound(int64_t v, int64_t len) {
  if (v < 0) v += len;
  return std::clamp<int64_t>(v, 0, len);
}

/// The `mode` attribute; an error for another value.
Status bagMode(const KernelContext& ctx, BagMode* mode) {
  const std::string name = ctx.attrs->getString("mode", "sum");
  *mode = name == "mean" ? BagMode::Mean : name == "max" ? BagMode::Max : BagMode::Sum;
  if (name != "sum" && name != "mean" && name != "max")
    return opError(ctx, "attribute mode must be sum, mean or max, got '" + name + "'");
  return Status::ok();
}

/// A run's indices, starts and ends (inputs 1-3) as int64.
Status readBags(const OpName& name, const Inputs& in, std::vector<int64_t>* idx,
                std::vector<int64_t>* starts, std::vector<int64_t>* ends) {
  TANDEM_RETURN_IF_ERROR(readInts(name, in[1], "indices", idx));
  TANDEM_RETURN_IF_ERROR(readInts(name, in[2], "starts", starts));
  return readInts(name, in[3], "ends", ends);
}

/// The position of the first index outside [-V, V) that a bag reads, in bag order; -1 if none.
int64_t firstBadIndex(const std::vector<int64_t>& idx, const std::vector<int64_t>& starts,
                      const std::vector<int64_t>& ends, int64_t V) {
  const int64_t L = (int64_t)idx.size();
  for (size_t m = 0; m < starts.size(); ++m)
    for (int64_t j = sliceBound(starts[m], L), e = sliceBound(ends[m], L); j < e; ++j)
      if (idx[j] < -V || idx[j] >= V) return j;
  return -1;
}

Status badIndex(const OpName& name, const std::vector<int64_t>& idx, int64_t j, int64_t V) {
  return opError(name, "indices[" + std::to_string(j) + "] = " + std::to_string(idx[j]) +
                           " is out of range for a weight of " + std::to_string(V) + " rows");
}

/// Bags [mBegin, mEnd) of Y [M, D]. Returns the position j of the first index outside
/// [-V, V) it meets (the range stops there), or -1. Sums accumulate in AccOf<T> (f64 for f32), as the reference reductions do;
/// a per-sample weight multiplies the row in T first, as the Loop's Mul did.
template <typename T>
int64_t bagRange(const T* W, int64_t V, int64_t D, const std::vector<int64_t>& idx,
                 const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                 const T* psw, BagMode mode, T* Y, int64_t mBegin, int64_t mEnd) {
  using Acc = AccOf<T>;
  const int64_t L = (int64_t)idx.size();
  std::vector<Acc> acc((size_t)D);
  for (int64_t m = mBegin; m < mEnd; ++m) {
    const int64_t s = sliceBound(starts[m], L), e = sliceBound(ends[m], L);
    T* y = Y + m * D;
    if (mode == BagMode::Max) {
      std::fill(y, y + D, -std::numeric_limits<T>::infinity());
      for (int64_t j = s; j < e; ++j) {
        int64_t r = idx[j];
        if (r < -V || r >= V) return j;
        if (r < 0) r += V;
        const T* row = W + r * D;
        const T w = psw ? psw[j] : T(1);
        for (int64_t d = 0; d < D; ++d) {
          const T v = psw ? T(row[d] * w) : row[d];
          if (!isNaN(y[d]) && (isNaN(v) || v > y[d])) y[d] = v;
        }
      }
      continue;
    }
    std::fill(acc.begin(), acc.end(), Acc(0));
    for (int64_t j = s; j < e; ++j) {
      int64_t r = idx[j];
      if (r < -V || r >= V) return j;
      if (r < 0) r += V;
      const T* row = W + r * D;
      if (psw) {
        const T w = psw[j];
        for (int64_t d = 0; d < D; ++d) acc[d] += Acc(T(row[d] * w));
      } else {
        for (int64_t d = 0; d < D; ++d) acc[d] += Acc(row[d]);
      }
    }
    // The mean of an empty bag is 0 / 0: NaN, as ReduceMean of nothing.
    const Acc count = Acc(e > s ? e - s : 0);
    for (int64_t d = 0; d < D; ++d) y[d] = T(mode == BagMode::Mean ? acc[d] / count : acc[d]);
  }
  return -1;
}

Status createEmbeddingBag(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  BagMode mode;
  TANDEM_RETURN_IF_ERROR(bagMode(ctx, &mode));
  if (ctx.inputTypes.size() < 4)
    return opError(ctx, "needs weight, indices, starts and ends");
  const Shape ws = ctx.inputTypes[0].shape;
  if (ws.size() != 2) return opError(ctx, "weight must be [V, D], got " + shapeToString(ws));
  for (size_t i = 1; i < 4; ++i)
    if (ctx.inputTypes[i].shape.size() != 1 || !contains(indexTypes(), ctx.inputTypes[i].dtype))
      return opError(ctx, "indices, starts and ends must be 1-D i32 or i64");
  const int64_t L = ctx.inputTypes[1].shape[0], M = ctx.inputTypes[2].shape[0];
  if (ctx.inputTypes[3].shape[0] != M)
    return opError(ctx, "starts and ends must have one length");
  const bool weighted = inputPresent(ctx, 4);
  if (weighted && (ctx.inputTypes[4].dtype != ctx.inputTypes[0].dtype ||
                   ctx.inputTypes[4].shape != Shape{L}))
    return opError(ctx, "per_sample_weights must be [L] of weight's dtype");
  if (ctx.outputTypes[0].shape != Shape{M, ws[1]})
    return opError(ctx, "output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not [" +
                            std::to_string(M) + ", " + std::to_string(ws[1]) + "]");
  const int64_t V = ws[0], D = ws[1];
  const OpName name(ctx);
  const int threads = std::max(1, ctx.threads);
  // Bags per thread: enough gathered elements (about 32K) to pay for a fork.
  const int64_t perBag = std::max<int64_t>(1, (M ? L / M : 0) * D);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / perBag);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      std::vector<int64_t> idx, starts, ends;
      TANDEM_RETURN_IF_ERROR(readBags(name, in, &idx, &starts, &ends));
      const T* W = in[0]->data<T>();
      const T* psw = weighted ? inputAt(in, 4)->template data<T>() : nullptr;
      T* Y = outs[0]->data<T>();
      std::atomic<bool> failed{false};
      parallelRanges(threads, M, grain, [&](int64_t begin, int64_t end) {
        if (bagRange<T>(W, V, D, idx, starts, ends, psw, mode, Y, begin, end) >= 0) failed = true;
      });
      // The first bad index in bag order, whatever the threads saw first.
      if (failed) return badIndex(name, idx, firstBadIndex(idx, starts, ends, V), V);
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "weight must be f32 or f64");
  return makeKernel(out, std::move(fn));
}

/// EmbeddingBagGrad: dW [V, D] from dY [M, D], bag by bag (one thread: bags may share rows).
/// Returns the position of the first index outside [-V, V), or -1.
template <typename T>
int64_t bagGradient(const T* W, int64_t V, int64_t D, const std::vector<int64_t>& idx,
                    const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                    const T* psw, BagMode mode, const T* dY, T* dW) {
  const int64_t L = (int64_t)idx.size(), M = (int64_t)starts.size();
  std::fill(dW, dW + V * D, T(0));
  std::vector<int64_t> rows;
  for (int64_t m = 0; m < M; ++m) {
    const int64_t s = sliceBound(starts[m], L), e = sliceBound(ends[m], L);
    rows.clear();
    for (int64_t j = s; j < e; ++j) {
      int64_t r = idx[j];
      if (r < -V || r >= V) return j;
      rows.push_back(r < 0 ? r + V : r);
    }
    const T* g = dY + m * D;
    if (mode == BagMode::Max) {
      // The row the forward kept per column: the first strictly greater value, the first NaN.
      for (int64_t d = 0; d < D; ++d) {
        T best = -std::numeric_limits<T>::infinity();
        int64_t at = -1;
        for (int64_t j = s; j < e; ++j) {
          const T w = W[rows[j - s] * D + d];
          const T v = psw ? T(w * psw[j]) : w;
          if (!isNaN(best) && (isNaN(v) || v > best)) {
            best = v;
            at = j;
          }
        }
        if (at >= 0) dW[rows[at - s] * D + d] += psw ? T(g[d] * psw[at]) : g[d];
      }
      continue;
    }
    const T scale = mode == BagMode::Mean ? T(1) / T(std::max<int64_t>(1, e - s)) : T(1);
    for (int64_t j = s; j < e; ++j) {
      const T f = psw ? T(scale * psw[j]) : scale;
      T* row = dW + rows[j - s] * D;
      for (int64_t d = 0; d < D; ++d) row[d] += f * g[d];
    }
  }
  return -1;
}

Status createEmbeddingBagGrad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  BagMode mode;
  TANDEM_RETURN_IF_ERROR(bagMode(ctx, &mode));
  if (ctx.inputTypes.size() < 5) return opError(ctx, "needs weight, indices, starts, ends and dY");
  const Shape ws = ctx.inputTypes[0].shape;
  const int64_t M = ctx.inputTypes[3].shape.empty() ? -1 : ctx.inputTypes[3].shape[0];
  if (ws.size() != 2 || ctx.inputTypes[4].shape != Shape{M, ws[1]} ||
      ctx.inputTypes[2].shape != Shape{M} || ctx.outputTypes[0].shape != ws)
    return opError(ctx, "weight must be [V, D], starts and ends [M], dY [M, D] and the result [V, D]");
  const bool weighted = inputPresent(ctx, 5);
  const int64_t V = ws[0], D = ws[1];
  const OpName name(ctx);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      std::vector<int64_t> idx, starts, ends;
      TANDEM_RETURN_IF_ERROR(readBags(name, in, &idx, &starts, &ends));
      const T* psw = weighted ? inputAt(in, 5)->template data<T>() : nullptr;
      if (weighted && inputAt(in, 5)->numel() != (int64_t)idx.size())
        return opError(name, "per_sample_weights must be [L] as indices");
      const int64_t j = bagGradient<T>(in[0]->data<T>(), V, D, idx, starts, ends, psw, mode,
                                       in[4]->data<T>(), outs[0]->data<T>());
      if (j >= 0) return badIndex(name, idx, j, V);
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "weight must be f32 or f64");
  return makeKernel(out, std::move(fn));
}

}  // namespace

void registerEmbeddingBagKernels(KernelRegistry& r) {
  addRef(
      r, "EmbeddingBag",
      [](const std::vector<DType>& in) {
        return in.size() >= 4 && contains(floatTypes(), in[0]) && contains(indexTypes(), in[1]) &&
               contains(indexTypes(), in[2]) && contains(indexTypes(), in[3]) &&
               (in.size() < 5 || in[4] == DType::Undefined || in[4] == in[0]);
      },
      "weight f32,f64; indices, starts, ends i32,i64; per_sample_weights weight's", createEmbeddingBag);
  addRef(
      r, "EmbeddingBagGrad",
      [](const std::vector<DType>& in) {
        return in.size() >= 5 && contains(floatTypes(), in[0]) && contains(indexTypes(), in[1]) &&
               contains(indexTypes(), in[2]) && contains(indexTypes(), in[3]) && in[4] == in[0] &&
               (in.size() < 6 || in[5] == DType::Undefined || in[5] == in[0]);
      },
      "weight, dY, per_sample_weights f32,f64; indices, starts, ends i32,i64", createEmbeddingBagGrad);
}

}  // namespace ref
}  // namespace tandem

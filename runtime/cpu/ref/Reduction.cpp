// Reference reduction kernels: ReduceSum-13 (axes input), ReduceMean/ReduceMax/ReduceMin/
// ReduceL1/ReduceL2/ReduceSumSquare/ReduceProd/ReduceLogSum/ReduceLogSumExp-13 (axes attribute;
// an axes input as in opset 18 is also read), ArgMax/ArgMin-13, Hardmax-13. f32 Sum, Mean, Max,
// Min, SumSquare and L2 over one contiguous block of dims fold 8 lanes at a time on AVX2 hosts
// (avx2::foldAxis; the same double sums): the strided scalar loop took 0.78 ms for PointNet's
// ReduceMax over [2, 512, 1024]'s last axis. The same over a leading and a trailing block
// around a kept one (keptMiddleBlock: per-channel sums over N and the spatial dims, which a
// training step's BatchNorm and bias gradients take): ReduceMean over [128, 16, 28, 28]'s
// axes {0, 2, 3} went from 3.5 to 0.4 ms.
#include <algorithm>

#include "runtime/cpu/avx2/Rows.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

enum class RedOp { Sum, Mean, Max, Min, L1, L2, SumSquare, Prod, LogSum, LogSumExp };

/// Which input dims are reduced, from the axes (possibly negative, maybe empty).
Status reducedDims(const OpName& ctx, const std::vector<int64_t>& axes, int64_t rank,
                   bool noopWithEmptyAxes, std::vector<bool>* reduced, bool* identity) {
  *identity = false;
  reduced->assign(rank, axes.empty());
  if (axes.empty()) {
    if (noopWithEmptyAxes) {
      reduced->assign(rank, false);
      *identity = true;
    }
    return Status::ok();
  }
  for (int64_t a : axes) {
    int64_t ax;
    if (!normalizeAxis(a, rank, &ax))
      return opError(
          ctx, "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    if ((*reduced)[ax]) return opError(ctx, "axis " + std::to_string(a) + " is repeated");
    (*reduced)[ax] = true;
  }
  return Status::ok();
}

// The f32 reductions the AVX2 fold runs (avx2::foldAxis: the same double sums, exact Max and
// Min), on a non-empty reduction where the host has AVX2.
bool foldsOnAvx2(RedOp op, int64_t count) {
  return count > 0 && avx2::available() &&
         (op == RedOp::Sum || op == RedOp::Mean || op == RedOp::Max || op == RedOp::Min ||
          op == RedOp::SumSquare || op == RedOp::L2);
}

// Whether the reduced dims of `xs` (unit dims aside) are one contiguous block: x is then
// [outer, count, inner] row-major, the block folded (ReduceMax over a point cloud's last axis,
// ReduceMean over channels in the middle). Every reduced dim being 1 counts (count 1).
bool oneReducedBlock(const Shape& xs, const std::vector<bool>& reduced, int64_t* outer, int64_t* inner) {
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < (int64_t)xs.size(); ++d)
    if (reduced[d] && xs[d] != 1) {
      if (first < 0) first = d;
      last = d;
    }
  *outer = 1;
  *inner = 1;
  if (first < 0) {
    for (int64_t v : xs) *outer *= v;
    return true;
  }
  for (int64_t d = first; d <= last; ++d)
    if (!reduced[d] && xs[d] != 1) return false;
  for (int64_t d = 0; d < first; ++d) *outer *= xs[d];
  for (int64_t d = last + 1; d < (int64_t)xs.size(); ++d) *inner *= xs[d];
  return true;
}

// Whether the reduced dims of `xs` (unit dims aside) are a leading block and a trailing block
// around one kept block: x is then [lead, kept, trail] row-major with lead and trail reduced,
// the pattern of a per-channel reduction over N and the spatial dims (BatchNorm's statistics and
// gradients, a convolution's bias gradient: axes {0, 2, 3} of NCHW). Both blocks non-empty.
bool keptMiddleBlock(const Shape& xs, const std::vector<bool>& reduced, int64_t* lead,
                     int64_t* kept, int64_t* trail) {
  // Each non-unit dim's role in order: reduced, kept, reduced; exactly three runs.
  int runs = 0;
  bool prev = false;
  *lead = *kept = *trail = 1;
  for (int64_t d = 0; d < (int64_t)xs.size(); ++d) {
    if (xs[d] == 1) continue;
    const bool r = reduced[d];
    if (runs == 0 || r != prev) ++runs;
    prev = r;
    if (runs == 1 && !r) return false;  // must start reduced
    (runs == 1 ? *lead : runs == 2 ? *kept : *trail) *= xs[d];
  }
  return runs == 3;
}

template <typename T>
Status runReduce(const OpName& ctx, RedOp op, const std::vector<int64_t>& axes, bool noop,
                 const Tensor& x, Tensor& y) {
  const Shape& xs = x.shape();
  const int64_t rank = (int64_t)xs.size();
  std::vector<bool> reduced;
  bool identity;
  TANDEM_RETURN_IF_ERROR(reducedDims(ctx, axes, rank, noop, &reduced, &identity));
  // Kept dims, row-major, give the output layout whether or not keepdims keeps the 1s.
  Shape kept(rank);
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    kept[d] = reduced[d] ? 1 : xs[d];
    if (reduced[d]) count *= xs[d];
  }
  const int64_t nOut = numElements(kept);
  if (nOut != y.numel())
    return opError(ctx, "output has " + std::to_string(y.numel()) +
                            " elements, the reduction "
                            "of " +
                            shapeToString(xs) + " gives " + std::to_string(nOut));
  const T* X = x.data<T>();
  T* Y = y.data<T>();
  if (identity) {
    std::copy(X, X + x.numel(), Y);
    return Status::ok();
  }
  if constexpr (std::is_same_v<T, float>) {
    int64_t outer, inner, lead, mid, trail;
    const bool oneBlock = oneReducedBlock(xs, reduced, &outer, &inner);
    if (foldsOnAvx2(op, count) && (oneBlock || keptMiddleBlock(xs, reduced, &lead, &mid, &trail))) {
      const avx2::Fold fold = op == RedOp::Max   ? avx2::Fold::Max
                              : op == RedOp::Min ? avx2::Fold::Min
                              : op == RedOp::Sum || op == RedOp::Mean ? avx2::Fold::Sum
                                                                      : avx2::Fold::SumSquare;
      std::vector<double> acc(nOut);
      if (oneBlock) {
        avx2::foldAxis(X, outer, count, inner, fold, acc.data());
      } else {
        // Each of the lead slices [mid, trail] folds its rows, then the slices combine (sums
        // in double, as the scalar loop; Max and Min exact, NaN sticking).
        std::vector<double> part(nOut);
        avx2::foldAxis(X, mid, trail, 1, fold, acc.data());
        for (int64_t a = 1; a < lead; ++a) {
          avx2::foldAxis(X + a * mid * trail, mid, trail, 1, fold, part.data());
          for (int64_t j = 0; j < nOut; ++j) {
            const double p = part[j];
            if (fold == avx2::Fold::Max) acc[j] = std::isnan(p) || p > acc[j] ? p : acc[j];
            else if (fold == avx2::Fold::Min) acc[j] = std::isnan(p) || p < acc[j] ? p : acc[j];
            else acc[j] += p;
          }
        }
      }
      for (int64_t j = 0; j < nOut; ++j)
        Y[j] = op == RedOp::Mean ? float(acc[j] / double(count))
               : op == RedOp::L2 ? float(std::sqrt(acc[j]))
                                 : float(acc[j]);
      return Status::ok();
    }
  }
  std::vector<int64_t> st = rowMajorStrides(kept);
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[d]) st[d] = 0;
  if (op == RedOp::L2 || op == RedOp::SumSquare) {
    std::vector<AccOf<T>> acc(nOut, AccOf<T>(0));
    forEachStrided<1>(xs, {st.data()}, {0}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      acc[o[0]] += AccOf<T>(X[i]) * AccOf<T>(X[i]);
    });
    for (int64_t j = 0; j < nOut; ++j)
      Y[j] = op == RedOp::L2 ? T(std::sqrt(double(acc[j]))) : T(acc[j]);
    return Status::ok();
  }
  if (op == RedOp::L1 || op == RedOp::Prod || op == RedOp::LogSum) {
    std::vector<AccOf<T>> acc(nOut, AccOf<T>(op == RedOp::Prod ? 1 : 0));
    forEachStrided<1>(xs, {st.data()}, {0}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      const AccOf<T> v = AccOf<T>(X[i]);
      if (op == RedOp::Prod)
        acc[o[0]] *= v;
      else
        acc[o[0]] += op == RedOp::L1 && v < 0 ? -v : v;
    });
    for (int64_t j = 0; j < nOut; ++j)
      Y[j] = op == RedOp::LogSum ? T(std::log(double(acc[j]))) : T(acc[j]);
    return Status::ok();
  }
  if (op == RedOp::LogSumExp) {
    // log(sum e^x) = m + log(sum e^(x - m)) with m the row's max, so no e^x overflows; a row
    // whose max is infinite (or that is empty) takes the plain formula (+inf, -inf or NaN).
    std::vector<double> m(nOut, -std::numeric_limits<double>::infinity()), acc(nOut, 0.0);
    forEachStrided<1>(xs, {st.data()}, {0}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      m[o[0]] = std::max(m[o[0]], double(X[i]));
    });
    for (double& v : m)
      if (!std::isfinite(v)) v = 0;
    forEachStrided<1>(xs, {st.data()}, {0}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      acc[o[0]] += std::exp(double(X[i]) - m[o[0]]);
    });
    for (int64_t j = 0; j < nOut; ++j) Y[j] = T(m[j] + std::log(acc[j]));
    return Status::ok();
  }
  if (op == RedOp::Sum || op == RedOp::Mean) {
    std::vector<AccOf<T>> acc(nOut, AccOf<T>(0));
    forEachStrided<1>(xs, {st.data()}, {0}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      acc[o[0]] += AccOf<T>(X[i]);
    });
    for (int64_t j = 0; j < nOut; ++j) {
      if (op == RedOp::Sum) {
        Y[j] = T(acc[j]);
      } else if constexpr (std::is_floating_point_v<T>) {
        Y[j] = T(double(acc[j]) / double(count));  // count 0 gives NaN, the mean of nothing
      } else {
        Y[j] = count ? T(acc[j] / count) : T(0);
      }
    }
    return Status::ok();
  }
  // Max/Min of an empty set is the identity of the fold (-inf/+inf, or the integer limits).
  const bool isMax = op == RedOp::Max;
  T init;
  if constexpr (std::is_floating_point_v<T>)
    init = isMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  else
    init = isMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  std::fill(Y, Y + nOut, init);
  forEachStrided<1>(xs, {st.data()}, {0}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    T& a = Y[o[0]];
    const T v = X[i];
    if (isNaN(a)) return;
    if (isNaN(v) || (isMax ? v > a : v < a)) a = v;
  });
  return Status::ok();
}

// Axes come from input 1 when present (ReduceSum-13, every Reduce-18), else from the `axes`
// attribute (Reduce*-13, older ReduceSum).
KernelFactory reduceFactory(RedOp op) {
  return [op](const KernelContext& ctx, std::unique_ptr<Kernel>* out) -> Status {
    const bool noop = ctx.attrs->getInt("noop_with_empty_axes", 0) != 0;
    std::vector<int64_t> attrAxes = ctx.attrs->getInts("axes");
    const bool axesInput = inputPresent(ctx, 1);
    if (axesInput && !contains(indexTypes(), ctx.inputTypes[1].dtype))
      return opError(ctx, "axes must be i64");
    // Validate axes known at load time now, so a bad model fails at load.
    std::vector<int64_t> known = attrAxes;
    if (const Tensor* c = axesInput ? constInputAt(ctx, 1) : nullptr)
      TANDEM_RETURN_IF_ERROR(readInts(ctx, c, "axes", &known));
    std::vector<bool> reduced;
    bool identity;
    TANDEM_RETURN_IF_ERROR(reducedDims(ctx, known, (int64_t)ctx.inputTypes[0].shape.size(), noop,
                                       &reduced, &identity));
    RunFn fn;
    const OpName c(ctx);
    const ConstOperands consts(ctx);
    dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      fn = [=](const Inputs& in, const Outputs& outs) -> Status {
        std::vector<int64_t> axes = attrAxes;
        if (const Tensor* a = consts.get(in, 1))
          TANDEM_RETURN_IF_ERROR(readInts(c, a, "axes", &axes));
        return runReduce<T>(c, op, axes, noop, *in[0], *outs[0]);
      };
    });
    if (!fn) return opError(ctx, "unsupported dtype");
    return makeKernel(out, std::move(fn));
  };
}

// ---- ArgMax, ArgMin ------------------------------------------------------------------------

// The index of the first (or, with select_last_index, last) max or min along `axis`. A NaN
// wins for both, as numpy's argmax and argmin return the first NaN.
Status createArgMax(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const bool isMin = ctx.opType == "ArgMin";
  const Shape& xs = ctx.inputTypes[0].shape;
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)xs.size(), &axis))
    return opError(ctx, "axis out of range for rank " + std::to_string(xs.size()));
  const bool last = ctx.attrs->getInt("select_last_index", 0) != 0;
  const int64_t outer = product(xs, 0, axis), n = xs[axis];
  const int64_t inner = product(xs, axis + 1, xs.size());
  if (n == 0 && outer * inner > 0) return opError(ctx, "cannot take the arg max/min over an empty axis");
  if (ctx.outputTypes[0].dtype != DType::I64 ||
      numElements(ctx.outputTypes[0].shape) != outer * inner)
    return opError(ctx, "output must be i64 with " + std::to_string(outer * inner) + " elements");
  RunFn fn;
  dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      int64_t* Y = outs[0]->data<int64_t>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const T* x = X + o * n * inner + i;
          int64_t best = 0;
          for (int64_t k = 1; k < n; ++k) {
            const T v = x[k * inner], b = x[best * inner];
            // NaN ranks above every number, as in numpy.argmax.
            bool take;
            if (isNaN(b))
              take = last && isNaN(v);
            else if (isNaN(v))
              take = true;
            else
              take = isMin ? (last ? v <= b : v < b) : (last ? v >= b : v > b);
            if (take) best = k;
          }
          Y[o * inner + i] = best;
        }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- Hardmax-13 ----------------------------------------------------------------------------

// 1 at the first max of each row along `axis` (default -1), 0 elsewhere; a NaN is the max.
Status createHardmax(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
  const Shape& xs = ctx.inputTypes[0].shape;
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", -1), (int64_t)xs.size(), &axis))
    return opError(ctx, "axis out of range for rank " + std::to_string(xs.size()));
  const int64_t outer = product(xs, 0, axis), n = xs[axis];
  const int64_t inner = product(xs, axis + 1, xs.size());
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      T* Y = outs[0]->data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t base = o * n * inner + i;
          int64_t best = 0;
          for (int64_t k = 1; k < n && !isNaN(X[base + best * inner]); ++k) {
            const T v = X[base + k * inner];
            if (isNaN(v) || v > X[base + best * inner]) best = k;
          }
          // Read every element before writing: Y may be X's buffer.
          for (int64_t k = 0; k < n; ++k) Y[base + k * inner] = T(k == best ? 1 : 0);
        }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

}  // namespace

void registerReductionKernels(KernelRegistry& r) {
  const auto& N = numericTypes();
  addRef(r, "ReduceSum", N, reduceFactory(RedOp::Sum));
  addRef(r, "ReduceMean", N, reduceFactory(RedOp::Mean));
  addRef(r, "ReduceMax", N, reduceFactory(RedOp::Max));
  addRef(r, "ReduceMin", N, reduceFactory(RedOp::Min));
  addRef(r, "ReduceL2", N, reduceFactory(RedOp::L2));
  addRef(r, "ReduceSumSquare", N, reduceFactory(RedOp::SumSquare));
  addRef(r, "ReduceL1", N, reduceFactory(RedOp::L1));
  addRef(r, "ReduceProd", N, reduceFactory(RedOp::Prod));
  addRef(r, "ReduceLogSum", N, reduceFactory(RedOp::LogSum));
  addRef(r, "ReduceLogSumExp", N, reduceFactory(RedOp::LogSumExp));
  addRef(r, "ArgMax", N, createArgMax);
  addRef(r, "ArgMin", N, createArgMax);
  addRef(r, "Hardmax", floatTypes(), createHardmax);
}

}  // namespace ref
}  // namespace tandem

// Reference loss kernels and their gradients: NegativeLogLikelihoodLoss-13 and
// SoftmaxCrossEntropyLoss-13 (ONNX), NegativeLogLikelihoodLossGrad and
// SoftmaxCrossEntropyLossGrad (Tandem's, for the autodiff pass; ONNX Runtime's operand order).
//
// All four see the scores as [N, C, D] with D the product of d1..dk and the class axis 1, labels
// as [N, D]. A label equal to ignore_index (when the attribute is given) contributes nothing and
// weighs 0; any other label outside [0, C) is a run-time error naming it. Each (n, d) weighs
// w = weight[label] (1 without weights), and
//   none: loss[n, d] = -w * logp[n, label, d]
//   sum:  loss = sum of those          mean: loss = sum / sum(w)   (0/0 = NaN, as ONNX's reference)
// Sums accumulate in f64 (AccOf). The log-softmax is stable: max subtracted before exp.
// SoftmaxCrossEntropyLoss and its gradient over f32 rows of C (D = 1: [N, C] scores, a language
// model's [N * T, V]) run the AVX2 row kernels where the CPU has them (runtime/cpu/avx2/Rows.h:
// the log-softmax row, exp(logp) scaled): a [2048, 1000] step took 15 + 8 ms in the scalar loops.
#include <type_traits>

#include "runtime/cpu/avx2/Rows.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

enum class Reduction { None, Sum, Mean };

struct LossSpec {
  int64_t N = 0, C = 0, D = 1;
  Reduction reduction = Reduction::Mean;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
};

// Reads the attributes and checks scores (operand s: [N, C, d...]), labels (operand l:
// [N, d...], i32/i64), optional weight (operand w: [C], scores' dtype).
Status readSpec(const KernelContext& ctx, size_t s, size_t l, size_t w, LossSpec* spec) {
  const std::string r = ctx.attrs->getString("reduction", "mean");
  if (r == "none") spec->reduction = Reduction::None;
  else if (r == "sum") spec->reduction = Reduction::Sum;
  else if (r == "mean") spec->reduction = Reduction::Mean;
  else return opError(ctx, "reduction '" + r + "' is not one of none, sum, mean");
  spec->hasIgnore = ctx.attrs->has("ignore_index");
  spec->ignoreIndex = ctx.attrs->getInt("ignore_index", 0);
  if (!inputPresent(ctx, s) || !inputPresent(ctx, l))
    return opError(ctx, "expects scores (input " + std::to_string(s) + ") and labels (input " +
                            std::to_string(l) + ")");
  const TensorType& x = ctx.inputTypes[s];
  const TensorType& y = ctx.inputTypes[l];
  if (!contains(floatTypes(), x.dtype))
    return opError(ctx, std::string("scores must be f32 or f64, got ") + dtypeName(x.dtype));
  if (!contains(indexTypes(), y.dtype))
    return opError(ctx, std::string("labels must be i32 or i64, got ") + dtypeName(y.dtype));
  if (x.shape.size() < 2)
    return opError(ctx, "scores must have rank >= 2, got " + shapeToString(x.shape));
  Shape expect = x.shape;
  expect.erase(expect.begin() + 1);
  if (y.shape != expect)
    return opError(ctx, "labels shape " + shapeToString(y.shape) + " is not " +
                            shapeToString(expect) + " (the scores' without dim 1)");
  spec->N = x.shape[0];
  spec->C = x.shape[1];
  spec->D = product(x.shape, 2, x.shape.size());
  if (inputPresent(ctx, w) &&
      (ctx.inputTypes[w].dtype != x.dtype || ctx.inputTypes[w].shape != Shape{spec->C}))
    return opError(ctx, "weight must be " + std::string(dtypeName(x.dtype)) + "[" +
                            std::to_string(spec->C) + "], got " +
                            dtypeName(ctx.inputTypes[w].dtype) +
                            shapeToString(ctx.inputTypes[w].shape));
  return Status::ok();
}

// The loss's shape: the labels' for none, a scalar otherwise.
Shape lossShape(const KernelContext& ctx, const LossSpec& spec, size_t l) {
  return spec.reduction == Reduction::None ? ctx.inputTypes[l].shape : Shape{};
}

// The weight of label `t` at (n, d): 0 when ignored, else weight[t] or 1; false (and `*bad` set)
// when t is outside [0, C) without being ignored.
template <typename T, typename L>
bool labelWeight(const LossSpec& spec, L t, const T* weight, double* w) {
  if (spec.hasIgnore && (int64_t)t == spec.ignoreIndex) {
    *w = 0;
    return true;
  }
  if (t < 0 || (int64_t)t >= spec.C) return false;
  *w = weight ? (double)weight[t] : 1.0;
  return true;
}

Status badLabel(const OpName& op, const LossSpec& spec, int64_t t, int64_t at) {
  std::string msg = "label " + std::to_string(t) + " at element " + std::to_string(at) +
                    " is outside [0, " + std::to_string(spec.C) + ")";
  if (spec.hasIgnore) msg += " and is not ignore_index " + std::to_string(spec.ignoreIndex);
  return opError(op, msg);
}

// Log-softmax over C of one n: lse[d] = max_c x + log(sum_c exp(x - max)), so logp = x - lse.
// Walks c outermost so the inner loops are contiguous over d.
template <typename T>
void logSumExp(const LossSpec& s, const T* x, double* mx, double* lse) {
  std::fill(mx, mx + s.D, -std::numeric_limits<double>::infinity());
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t d = 0; d < s.D; ++d) mx[d] = std::max(mx[d], (double)x[c * s.D + d]);
  std::fill(lse, lse + s.D, 0.0);
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t d = 0; d < s.D; ++d) lse[d] += std::exp((double)x[c * s.D + d] - mx[d]);
  for (int64_t d = 0; d < s.D; ++d) lse[d] = mx[d] + std::log(lse[d]);
}

// ---- forward ---------------------------------------------------------------------------------

// NLL (softmax = false: x holds log-probabilities) or SCE (x holds scores; logProb, when given,
// receives the log-softmax). Writes the loss by the spec's reduction.
template <typename T, typename L>
Status lossForward(const OpName& op, const LossSpec& s, bool softmax, const T* x, const L* label,
                   const T* weight, T* loss, T* logProb) {
  thread_local std::vector<double> scratch;
  if (softmax) scratch.resize(2 * s.D);
  double total = 0, totalWeight = 0;
  bool rows = false;  // the f32 row kernel, into log_prob or a row of its own
  if constexpr (std::is_same_v<T, float>) rows = softmax && s.D == 1 && avx2::available();
  thread_local std::vector<float> row;
  if (rows && !logProb) row.resize((size_t)s.C);
  for (int64_t n = 0; n < s.N; ++n) {
    const T* xn = x + n * s.C * s.D;
    double* lse = softmax ? scratch.data() + s.D : nullptr;
    // A row with a NaN or an infinite maximum takes the scalar path (ONNX's NaNs there).
    bool vec = false;
    T* lpRow = nullptr;  // the row's log-probabilities when vec
    if constexpr (std::is_same_v<T, float>) {
      lpRow = logProb ? logProb + n * s.C : row.data();
      vec = rows && avx2::softmaxRow(xn, lpRow, s.C, true);
    }
    if (softmax && !vec) {
      logSumExp(s, xn, scratch.data(), lse);
      if (logProb)
        for (int64_t c = 0; c < s.C; ++c)
          for (int64_t d = 0; d < s.D; ++d)
            logProb[(n * s.C + c) * s.D + d] = T((double)xn[c * s.D + d] - lse[d]);
    }
    for (int64_t d = 0; d < s.D; ++d) {
      const int64_t at = n * s.D + d;
      double w;
      if (!labelWeight(s, label[at], weight, &w)) return badLabel(op, s, (int64_t)label[at], at);
      double l = 0;
      if (w != 0) {
        const double lp = vec ? (double)lpRow[(int64_t)label[at]]
                              : (double)xn[(int64_t)label[at] * s.D + d] - (softmax ? lse[d] : 0.0);
        l = -w * lp;
      }
      if (s.reduction == Reduction::None) loss[at] = T(l);
      total += l;
      totalWeight += w;
    }
  }
  if (s.reduction == Reduction::Sum) loss[0] = T(total);
  if (s.reduction == Reduction::Mean) loss[0] = T(total / totalWeight);
  return Status::ok();
}

Status createLoss(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const bool softmax = ctx.opType == "SoftmaxCrossEntropyLoss";
  LossSpec spec;
  TANDEM_RETURN_IF_ERROR(readSpec(ctx, 0, 1, 2, &spec));
  if (ctx.outputTypes[0].shape != lossShape(ctx, spec, 1))
    return opError(ctx, "output 0 (loss) shape " + shapeToString(ctx.outputTypes[0].shape) +
                            " is not " + shapeToString(lossShape(ctx, spec, 1)));
  if (outputRequested(ctx, 1) && (!softmax || ctx.outputTypes[1].dtype != ctx.inputTypes[0].dtype ||
                                  ctx.outputTypes[1].shape != ctx.inputTypes[0].shape))
    return opError(ctx, softmax ? "output 1 (log_prob) must have the scores' type"
                                : "has one output");
  const OpName op(ctx);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    auto run = [=](auto labelTag) {
      using L = decltype(labelTag);
      return RunFn([=](const Inputs& in, const Outputs& outs) -> Status {
        const Tensor* w = inputAt(in, 2);
        Tensor* lp = outputAt(outs, 1);
        return lossForward<T, L>(op, spec, softmax, in[0]->data<T>(), in[1]->data<L>(),
                                 w ? w->data<T>() : nullptr, outs[0]->data<T>(),
                                 lp ? lp->data<T>() : nullptr);
      });
    };
    fn = ctx.inputTypes[1].dtype == DType::I32 ? run(int32_t{}) : run(int64_t{});
  });
  return makeKernel(out, std::move(fn));
}

// ---- gradients -------------------------------------------------------------------------------

// d x[n, c, d] = g(n, d) * w * (softmax ? exp(logp[n, c, d]) - [c == label] : -[c == label]),
// with g = dY[n, d] (none), dY (sum) or dY / sum(w) (mean); ignored labels give zeros.
template <typename T, typename L>
Status lossBackward(const OpName& op, const LossSpec& s, bool softmax, const T* dY, const T* logp,
                    const L* label, const T* weight, T* dx) {
  double scale = 1;
  if (s.reduction == Reduction::Mean) {
    double totalWeight = 0;
    for (int64_t at = 0; at < s.N * s.D; ++at) {
      double w;
      if (!labelWeight(s, label[at], weight, &w)) return badLabel(op, s, (int64_t)label[at], at);
      totalWeight += w;
    }
    scale = 1 / totalWeight;
  }
  bool rows = false;  // f32 rows of C: g * exp(logp) by the vector kernel, then the label's -g
  if constexpr (std::is_same_v<T, float>) rows = softmax && s.D == 1 && avx2::available();
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t d = 0; d < s.D; ++d) {
      const int64_t at = n * s.D + d;
      double w;
      if (!labelWeight(s, label[at], weight, &w)) return badLabel(op, s, (int64_t)label[at], at);
      // An ignored label's gradient is 0 even where mean's sum(w) is 0 (the loss is NaN there).
      const double g =
          w == 0 ? 0.0 : w * scale * (double)(s.reduction == Reduction::None ? dY[at] : dY[0]);
      const int64_t t = w != 0 ? (int64_t)label[at] : -1;
      if constexpr (std::is_same_v<T, float>) {
        if (rows && g != 0 && std::isfinite(g)) {
          float* row = dx + n * s.C;
          avx2::scaledExpRow(logp + n * s.C, row, s.C, (float)g);
          row[t] = T(g * ((double)std::exp((double)logp[n * s.C + t]) - 1.0));
          continue;
        }
      }
      for (int64_t c = 0; c < s.C; ++c) {
        const int64_t i = (n * s.C + c) * s.D + d;
        const double p = softmax ? std::exp((double)logp[i]) : 0.0;
        dx[i] = T(g == 0 ? 0.0 : g * (p - (c == t ? 1.0 : 0.0)));
      }
    }
  }
  return Status::ok();
}

Status createLossGrad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const bool softmax = ctx.opType == "SoftmaxCrossEntropyLossGrad";
  LossSpec spec;
  TANDEM_RETURN_IF_ERROR(readSpec(ctx, 1, 2, 3, &spec));
  const TensorType& dy = ctx.inputTypes[0];
  if (dy.dtype != ctx.inputTypes[1].dtype || dy.shape != lossShape(ctx, spec, 2))
    return opError(ctx, "dY must be " + std::string(dtypeName(ctx.inputTypes[1].dtype)) +
                            shapeToString(lossShape(ctx, spec, 2)) + " (the loss's type), got " +
                            dtypeName(dy.dtype) + shapeToString(dy.shape));
  if (ctx.outputTypes[0].shape != ctx.inputTypes[1].shape)
    return opError(ctx, "output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not " +
                            shapeToString(ctx.inputTypes[1].shape));
  const OpName op(ctx);
  RunFn fn;
  dispatchFloat(dy.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto run = [=](auto labelTag) {
      using L = decltype(labelTag);
      return RunFn([=](const Inputs& in, const Outputs& outs) -> Status {
        const Tensor* w = inputAt(in, 3);
        return lossBackward<T, L>(op, spec, softmax, in[0]->data<T>(), in[1]->data<T>(),
                                  in[2]->data<L>(), w ? w->data<T>() : nullptr,
                                  outs[0]->data<T>());
      });
    };
    fn = ctx.inputTypes[2].dtype == DType::I32 ? run(int32_t{}) : run(int64_t{});
  });
  return makeKernel(out, std::move(fn));
}

}  // namespace

// Scores (or dY) decide the dtype; the factories check the labels (i32/i64) and the rest.
void registerLossKernels(KernelRegistry& r) {
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"})
    addRef(r, op, floatTypes(), createLoss);
  for (const char* op : {"NegativeLogLikelihoodLossGrad", "SoftmaxCrossEntropyLossGrad"})
    addRef(r, op, floatTypes(), createLossGrad);
}

}  // namespace ref
}  // namespace tandem

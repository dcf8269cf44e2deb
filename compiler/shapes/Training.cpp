// Shape functions of the losses (ONNX NegativeLogLikelihoodLoss-13, SoftmaxCrossEntropyLoss-13),
// their gradients (Tandem's NegativeLogLikelihoodLossGrad, SoftmaxCrossEntropyLossGrad) and the
// optimizer updates of ai.onnx.preview.training-1 (Adagrad, Adam, Momentum).
#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {
namespace {

std::string checkReduction(const Ctx& c, std::string* reduction) {
  *reduction = c.attrs.getString("reduction", "mean");
  if (*reduction != "none" && *reduction != "sum" && *reduction != "mean")
    return c.fail("attribute reduction='" + *reduction + "' is not one of none, sum, mean");
  return "";
}

// Scores [N, C, d1..dk] (operand s) against labels [N, d1..dk] (operand l) and an optional
// weight [C] (operand w): the class axis is 1 and every other dim must agree.
std::string checkClassOperands(const Ctx& c, size_t s, size_t l, size_t w,
                               const std::vector<const char*>& names) {
  if (auto e = checkDTypeIn(c, s, kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, l, kIntIndexTypes, names); !e.empty()) return e;
  const auto& x = c.in[s].dims;
  const auto& y = c.in[l].dims;
  if (x.size() < 2)
    return c.fail(operandLabel(s, names[s]) + " must have rank >= 2 ([N, C, d1, ...]), got " +
                  dimsStr(x));
  bool agree = y.size() + 1 == x.size() && dimsAgree(x[0], y[0]);
  for (size_t d = 1; agree && d < y.size(); ++d) agree = dimsAgree(x[d + 1], y[d]);
  if (!agree)
    return c.fail(operandLabel(l, names[l]) + " shape " + dimsStr(y) + " must be " +
                  operandLabel(s, names[s]) + " shape " + dimsStr(x) + " without dim 1 (C)");
  if (c.has(w)) {
    if (auto e = checkSameDType(c, w, s, names); !e.empty()) return e;
    if (c.in[w].dims.size() != 1 || !dimsAgree(c.in[w].dims[0], x[1]))
      return c.fail(operandLabel(w, names[w]) + " must have shape [C] = [" +
                    (x[1] == kUnknownDim ? std::string("?") : std::to_string(x[1])) + "], got " +
                    dimsStr(c.in[w].dims));
  }
  return "";
}

}  // namespace

std::string inferLoss(const Ctx& c) {
  // NLL: input [N, C, d...], target [N, d...], weight [C] -> loss; SCE also log_prob (as scores).
  const bool sce = c.op == "SoftmaxCrossEntropyLoss";
  static const std::vector<const char*> nllNames = {"input", "target", "weight"};
  static const std::vector<const char*> sceNames = {"scores", "labels", "weights"};
  const auto& names = sce ? sceNames : nllNames;
  if (auto e = checkArity(c, 2, 3, 1, sce ? 2 : 1, names); !e.empty()) return e;
  std::string reduction;
  if (auto e = checkReduction(c, &reduction); !e.empty()) return e;
  if (auto e = checkClassOperands(c, 0, 1, 2, names); !e.empty()) return e;
  c.set(0, c.in[0].dtype, reduction == "none" ? c.in[1].dims : std::vector<int64_t>{});
  if (c.numResults == 2) c.set(1, c.in[0].dtype, c.in[0].dims);
  return "";
}

std::string inferLossGrad(const Ctx& c) {
  // dY (the loss's shape), log_prob or input [N, C, d...], label [N, d...], weight [C] ->
  // the gradient with respect to the logits (or input): [N, C, d...].
  static const std::vector<const char*> sceNames = {"dY", "log_prob", "label", "weight"};
  static const std::vector<const char*> nllNames = {"dY", "input", "target", "weight"};
  const auto& names = c.op == "SoftmaxCrossEntropyLossGrad" ? sceNames : nllNames;
  if (auto e = checkArity(c, 3, 4, 1, 1, names); !e.empty()) return e;
  std::string reduction;
  if (auto e = checkReduction(c, &reduction); !e.empty()) return e;
  if (auto e = checkClassOperands(c, 1, 2, 3, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 0, 1, names); !e.empty()) return e;
  const auto& dy = c.in[0].dims;
  const auto& label = c.in[2].dims;
  bool ok = reduction == "none" ? dy.size() == label.size() : dy.empty();
  for (size_t d = 0; ok && reduction == "none" && d < dy.size(); ++d)
    ok = dimsAgree(dy[d], label[d]);
  if (!ok)
    return c.fail("input 0 (dY) shape " + dimsStr(dy) + " is not the loss's shape " +
                  (reduction == "none" ? dimsStr(label) : std::string("[] (a scalar)")) +
                  " for reduction=" + reduction);
  c.set(0, c.in[1].dtype, c.in[1].dims);
  return "";
}

std::string inferGeluGrad(const Ctx& c) {
  // dY and X of one float type and shape (Gelu's input and its output's gradient) -> dX, X's type.
  static const std::vector<const char*> names = {"dY", "X"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 1, kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 0, 1, names); !e.empty()) return e;
  const std::string approximate = c.attrs.getString("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return c.fail("attribute approximate='" + approximate + "' is not none or tanh");
  const auto& dy = c.in[0].dims;
  const auto& x = c.in[1].dims;
  bool ok = dy.size() == x.size();
  for (size_t d = 0; ok && d < x.size(); ++d) ok = dimsAgree(dy[d], x[d]);
  if (!ok) return c.fail("input 0 (dY) shape " + dimsStr(dy) + " is not input 1 (X) shape " + dimsStr(x));
  c.set(0, c.in[1].dtype, x);
  return "";
}

std::string inferOptimizer(const Ctx& c) {
  // R (float scalar), T (i64 scalar), then N of each of X, G and the per-tensor state (Adagrad:
  // H; Momentum: V; Adam: V, H), all Xi's shape and dtype. Results: X_new and the new state,
  // grouped the same way (Adam: X_new1..N, V_new1..N, H_new1..N).
  const size_t groups = c.op == "Adam" ? 4 : 3;  // X, G, state...
  size_t n = c.in.size();
  if (n < 2 + groups || (n - 2) % groups != 0)
    return c.op + " expects 2 + " + std::to_string(groups) + "*N inputs (R, T, then N of X, G" +
           (groups == 4 ? ", V, H" : c.op == "Adagrad" ? ", H" : ", V") + "), got " +
           std::to_string(n);
  const size_t tensors = (n - 2) / groups;
  if (c.numResults != (groups - 1) * tensors)
    return c.op + " expects " + std::to_string((groups - 1) * tensors) + " results for " +
           std::to_string(tensors) + " tensor(s), got " + std::to_string(c.numResults);
  for (size_t i = 0; i < n; ++i)
    if (!c.has(i)) return c.fail(operandLabel(i, nullptr) + " is required but absent");
  static const std::vector<const char*> names = {"R", "T"};
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 1, {DType::I64}, names); !e.empty()) return e;
  for (size_t i = 0; i < 2; ++i)
    if (!c.in[i].dims.empty())
      return c.fail(operandLabel(i, names[i]) + " must be a scalar, got shape " +
                    dimsStr(c.in[i].dims));
  for (size_t t = 0; t < tensors; ++t) {
    const size_t x = 2 + t;
    if (auto e = checkDTypeIn(c, x, kFloatTypes); !e.empty()) return e;
    for (size_t g = 1; g < groups; ++g) {
      const size_t j = x + g * tensors;
      if (auto e = checkSameDType(c, j, x); !e.empty()) return e;
      bool same = c.in[j].dims.size() == c.in[x].dims.size();
      for (size_t d = 0; same && d < c.in[x].dims.size(); ++d)
        same = dimsAgree(c.in[j].dims[d], c.in[x].dims[d]);
      if (!same)
        return c.fail(operandLabel(j, nullptr) + " shape " + dimsStr(c.in[j].dims) +
                      " differs from " + operandLabel(x, nullptr) + " (X" + std::to_string(t + 1) +
                      ") shape " + dimsStr(c.in[x].dims));
    }
    for (size_t g = 0; g + 1 < groups; ++g) c.set(t + g * tensors, c.in[x].dtype, c.in[x].dims);
  }
  if (c.op == "Momentum") {
    // Momentum-1 has no defaults.
    for (const char* name : {"alpha", "beta", "mode", "norm_coefficient"})
      if (!c.attrs.has(name)) return c.fail(std::string("attribute ") + name + " is required");
    std::string mode = c.attrs.getString("mode", "standard");
    if (mode != "standard" && mode != "nesterov")
      return c.fail("attribute mode='" + mode + "' is not one of standard, nesterov");
  }
  return "";
}

}  // namespace tandem::shapes

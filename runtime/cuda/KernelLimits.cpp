// What the CUDA kernels refuse at load although the op table accepts the dtypes (attributes,
// shapes, constness): one rule, compiled into every build (no CUDA headers), read by the kernel
// registry when a CUDA kernel is created and by the placer through KernelRegistry::rejects.
#include <cctype>

#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/CudaKernelTable.h"

namespace tandem {

namespace {

std::string poolRejects(const KernelContext& ctx) {
  if (ctx.inputTypes.empty() || ctx.outputTypes.empty()) return "";
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  if (xs.size() < 3 || xs.size() > 5 || ys.size() != xs.size())
    return "the CUDA kernel pools 1-D to 3-D inputs";
  if (ctx.opType.rfind("Global", 0) == 0) return "";
  if (ctx.outputTypes.size() > 1 && ctx.outputTypes[1].present())
    return "the CUDA kernel has no MaxPool Indices output";
  size_t ns = xs.size() - 2;
  Shape inSp(xs.begin() + 2, xs.end()), outSp(ys.begin() + 2, ys.end());
  std::vector<int64_t> window, strides, dil, pb, pe;
  if (!ref::intsAttr(ctx, "kernel_shape", ns, 1, &window) ||
      !ref::intsAttr(ctx, "strides", ns, 1, &strides) ||
      !ref::intsAttr(ctx, "dilations", ns, 1, &dil))
    return "";  // malformed attributes: the shape functions have said so already
  for (int64_t d : dil)
    if (d != 1) return "the CUDA kernel has no dilated pooling";
  if (!ref::windowBeginPads(ctx, inSp, outSp, window, strides, dil, &pb, &pe)) return "";
  // cuDNN pools with the begin pads on both sides and floor rounding.
  for (size_t d = 0; d < ns; ++d)
    if (strides[d] <= 0 || (inSp[d] + 2 * pb[d] - window[d]) / strides[d] + 1 != outSp[d])
      return "cuDNN's symmetric-pad, floor-rounded pooling does not give this output "
             "(ceil_mode or asymmetric pads)";
  return "";
}

// MaxPoolGrad's generated kernel takes any window, pads, strides and dilations of 1 to 3 spatial
// dims; X and dY must be the pool's.
std::string maxPoolGradRejects(const KernelContext& ctx) {
  if (ctx.inputTypes.size() < 2) return "";
  const Shape& xs = ctx.inputTypes[0].shape;
  if (xs.size() < 3 || xs.size() > 5 || ctx.inputTypes[1].shape.size() != xs.size())
    return "the CUDA kernel pools 1-D to 3-D inputs";
  return "";
}

// The loss kernels take what the reference takes but f64 (the table's dtypes).
std::string lossRejects(const KernelContext& ctx) {
  const std::string r = ctx.attrs->getString("reduction", "mean");
  if (r != "none" && r != "sum" && r != "mean")
    return "the CUDA kernel reduces by none, sum or mean, not '" + r + "'";
  return "";
}

// TopK's outputs were sized by K at compile time; the kernel takes K from the Values' shape.
std::string topKRejects(const KernelContext& ctx, bool kConstant) {
  if (!kConstant) return "the CUDA kernel needs K (input 1) to be a constant";
  if (ctx.inputTypes.empty() || ctx.outputTypes.empty()) return "";
  const Shape& ys = ctx.outputTypes[0].shape;
  int64_t axis;
  if (!ref::normalizeAxis(ctx.attrs->getInt("axis", -1), (int64_t)ys.size(), &axis)) return "";
  if (ys[axis] > kCudaTopKMax)
    return "the CUDA kernel selects at most " + std::to_string(kCudaTopKMax) + " per row, not K = " +
           std::to_string(ys[axis]);
  return "";
}

std::string layerNormRejects(const KernelContext& ctx) {
  if (ctx.inputTypes.empty()) return "";
  const Shape& xs = ctx.inputTypes[0].shape;
  int64_t axis = ctx.attrs->getInt("axis", -1);
  if (axis < 0) axis += (int64_t)xs.size();
  if (axis < 0 || axis > (int64_t)xs.size()) return "";
  Shape norm(xs.begin() + axis, xs.end());
  for (size_t i = 1; i < 3 && i < ctx.inputTypes.size(); ++i)
    if (ctx.inputTypes[i].present() && ctx.inputTypes[i].shape != norm)
      return "the CUDA kernel needs Scale and B of the normalized shape (no broadcast)";
  return "";
}

// cuDNN's cells (runtime/cuda/Recurrent.cpp) compute ONNX's defaults: sigmoid gates and tanh
// (RNN: tanh or relu), no clip, GRU's reset applied after the recurrent product, no peepholes,
// full-length seq-major sequences; W, R, B are repacked into cuDNN's weight space at load.
std::string recurrentRejects(const KernelContext& ctx) {
  const std::string& op = ctx.opType;
  auto present = [&](size_t i) { return i < ctx.inputTypes.size() && ctx.inputTypes[i].present(); };
  auto constant = [&](size_t i) { return i < ctx.constInputs.size() && ctx.constInputs[i]; };
  if (ctx.attrs->getInt("layout", 0) != 0) return "the CUDA kernel takes layout 0 (sequence-major) only";
  if (ctx.attrs->has("clip")) return "cuDNN's cells do not clip (attribute clip given)";
  if (ctx.attrs->getInt("input_forget", 0) != 0) return "cuDNN's LSTM does not couple the input and forget gates (input_forget=1)";
  if (op == "GRU" && ctx.attrs->getInt("linear_before_reset", 0) == 0)
    return "cuDNN's GRU applies the reset gate after the recurrent product (linear_before_reset=1); "
           "this GRU has linear_before_reset=0";
  if (op == "LSTM" && present(7)) return "cuDNN's LSTM has no peepholes (input P given)";
  if (present(4)) return "the CUDA kernel runs full-length sequences only (sequence_lens given)";
  for (size_t i = 1; i < 4; ++i)
    if (present(i) && !constant(i))
      return "the CUDA kernel repacks W, R and B into cuDNN's weight space at load: input " + std::to_string(i) +
             " must be a constant";
  if (const Attr* a = ctx.attrs->find("activations"); a && a->kind == Attr::Kind::Strings) {
    const std::vector<std::string> cell = op == "LSTM" ? std::vector<std::string>{"sigmoid", "tanh", "tanh"}
                                          : op == "GRU" ? std::vector<std::string>{"sigmoid", "tanh"}
                                                        : std::vector<std::string>{"tanh"};
    std::string all, first;
    for (size_t i = 0; i < a->strings.size(); ++i) {
      std::string name = a->strings[i];
      for (char& ch : name) ch = char(std::tolower((unsigned char)ch));
      all += (i ? "," : "") + a->strings[i];
      const std::string& want = cell[i % cell.size()];
      // RNN: tanh or relu, the same in both directions (one cuDNN cell mode).
      const bool ok = op == "RNN" ? (name == "tanh" || name == "relu") && (i == 0 || name == first) : name == want;
      if (i == 0) first = name;
      if (!ok) return "cuDNN's " + op + " computes the default activations, not " + all;
    }
  }
  return "";
}

}  // namespace

std::string cudaKernelRejects(const KernelContext& ctx) {
  const std::string& op = ctx.opType;
  auto present = [&](size_t i) { return i < ctx.inputTypes.size() && ctx.inputTypes[i].present(); };
  auto constant = [&](size_t i) { return i < ctx.constInputs.size() && ctx.constInputs[i]; };
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "GlobalMaxPool")
    return poolRejects(ctx);
  if (op == "MaxPoolGrad") return maxPoolGradRejects(ctx);
  if (op == "SoftmaxCrossEntropyLoss" || op == "SoftmaxCrossEntropyLossGrad") return lossRejects(ctx);
  if ((op == "Conv" || op == "ConvTranspose") && ctx.inputTypes.size() >= 2 && !ctx.outputTypes.empty()) {
    size_t r = ctx.inputTypes[0].shape.size();
    if (r < 3 || r > 5 || ctx.inputTypes[1].shape.size() != r || ctx.outputTypes[0].shape.size() != r)
      return "the CUDA kernel takes 1-D to 3-D convolutions with X, W, Y of one rank";
    return "";
  }
  if (op == "ConvWeightGrad" && ctx.inputTypes.size() == 2 && !ctx.outputTypes.empty()) {
    // cuDNN derives dY's extent from X and the window: a shorter dY (ConvTranspose's weight
    // gradient with output_padding >= strides) has no cuDNN form.
    const Shape& x = ctx.inputTypes[0].shape;
    const Shape& y = ctx.inputTypes[1].shape;
    const size_t r = x.size(), sp = r - 2;
    if (r < 3 || r > 5 || y.size() != r || ctx.outputTypes[0].shape.size() != r)
      return "the CUDA kernel takes 1-D to 3-D convolutions";
    const std::vector<int64_t> k = ctx.attrs->getInts("kernel_shape");
    const std::vector<int64_t> s = ctx.attrs->getInts("strides", std::vector<int64_t>(sp, 1));
    const std::vector<int64_t> d = ctx.attrs->getInts("dilations", std::vector<int64_t>(sp, 1));
    const std::vector<int64_t> p = ctx.attrs->getInts("pads", std::vector<int64_t>(2 * sp, 0));
    if (k.size() != sp || s.size() != sp || d.size() != sp || p.size() != 2 * sp)
      return "the CUDA kernel needs kernel_shape, strides, dilations and pads per spatial dim";
    for (size_t i = 0; i < sp; ++i)
      if ((x[2 + i] + p[i] + p[sp + i] - ((k[i] - 1) * d[i] + 1)) / s[i] + 1 != y[2 + i])
        return "dY is shorter than the Conv output of X (cuDNN derives it)";
    return "";
  }
  if (op == "BatchNormalization" && ctx.attrs->getInt("training_mode", 0) != 0)
    return "the CUDA kernel is inference-only (training_mode=1)";
  // The CUDA Dropout draws the CPU kernel's Philox mask (runtime/cuda/Tensor.cpp); like the CPU
  // kernel it scales only floating-point data, which a training_mode operand may ask for.
  if (op == "Dropout" && present(2) && !ctx.inputTypes.empty() &&
      ctx.inputTypes[0].dtype != DType::F32 && ctx.inputTypes[0].dtype != DType::F64)
    return "the CUDA Dropout trains f32 or f64 data only (training_mode given)";
  if (op == "Dropout" && present(1) && numElements(ctx.inputTypes[1].shape) > 1)
    return "the CUDA Dropout needs a scalar ratio";
  if (op == "Pad" || op == "Slice" || op == "Clip" || op.rfind("Reduce", 0) == 0) {
    for (size_t i = 1; i < ctx.inputTypes.size(); ++i)
      if (present(i) && !constant(i))
        return "the CUDA kernel needs input " + std::to_string(i) + " to be a constant";
    return "";
  }
  if (op == "LayerNormalization") return layerNormRejects(ctx);
  if (op == "GroupNormalization" || op == "InstanceNormalization") {
    // Scale and bias per channel ([C]); X of rank >= 2 (the shape functions check the rest).
    const Shape& xs = ctx.inputTypes[0].shape;
    for (size_t i = 1; i < 3; ++i)
      if (xs.size() < 2 || ctx.inputTypes.size() <= i || numElements(ctx.inputTypes[i].shape) != xs[1])
        return "the CUDA kernel needs scale and bias of one value per channel";
  }
  if (op == "RMSNormalization") {
    // Scale of the normalized shape only (the CUDA kernel reads scale[k] per column).
    const Shape& xs = ctx.inputTypes[0].shape;
    int64_t axis = ctx.attrs->getInt("axis", -1);
    if (axis < 0) axis += (int64_t)xs.size();
    if (axis >= 0 && axis <= (int64_t)xs.size() && ctx.inputTypes.size() > 1 &&
        numElements(ctx.inputTypes[1].shape) != numElements(Shape(xs.begin() + axis, xs.end())))
      return "the CUDA kernel needs scale of the normalized shape (no broadcast)";
  }
  if (op == "CumSum" && !constant(1)) return "the CUDA kernel needs axis (input 1) to be a constant";
  if (op == "TopK") return topKRejects(ctx, constant(1));
  // NonMaxSuppression's walk reads its limits at load (the plan's output size came from them).
  if (op == "NonMaxSuppression") {
    for (size_t i = 2; i < 5; ++i)
      if (present(i) && !constant(i)) return "the CUDA kernel needs input " + std::to_string(i) + " to be a constant";
    return "";
  }
  if (op == "LSTM" || op == "GRU" || op == "RNN") return recurrentRejects(ctx);
  // Resize's tap tables are built at load from the scales (and, for tf_crop_and_resize, roi).
  if (op == "Resize") {
    if (present(2) && numElements(ctx.inputTypes[2].shape) > 0 && !constant(2))
      return "the CUDA kernel needs scales (input 2) to be a constant";
    if (ctx.attrs->getString("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize" && !constant(1))
      return "the CUDA kernel needs roi (input 1) to be a constant for tf_crop_and_resize";
  }
  return "";
}

}  // namespace tandem

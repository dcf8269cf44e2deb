// FLOP and byte counts per ONNX op type (the table documented in OpWork.h).
#include "compiler/placement/OpWork.h"

#include <algorithm>

#include "runtime/OpTable.h"

namespace tandem {

const char* opClassName(OpClass c) {
  switch (c) {
    case OpClass::Free: return "free";
    case OpClass::Gemm: return "gemm";
    case OpClass::Conv: return "conv";
    case OpClass::Memory: return "memory";
  }
  return "?";
}

namespace {

// Counts elements and bytes of operands, remembering whether any dim was unknown.
struct Counter {
  bool unknownDims = false;

  double numel(const TensorType& t) {
    if (!t.present()) return 0;
    double n = 1;
    for (int64_t d : t.shape) {
      if (d < 0) {
        unknownDims = true;
        continue;  // counted as 1
      }
      n *= (double)d;
    }
    return n;
  }
  double bytes(const TensorType& t) { return numel(t) * (double)dtypeSize(t.dtype); }
  double dim(const TensorType& t, size_t i) {
    if (i >= t.shape.size()) return 1;
    if (t.shape[i] < 0) {
      unknownDims = true;
      return 1;
    }
    return (double)t.shape[i];
  }
  // Product of dims [from, rank).
  double tailProduct(const TensorType& t, size_t from) {
    double p = 1;
    for (size_t i = from; i < t.shape.size(); ++i) p *= dim(t, i);
    return p;
  }
};

const TensorType* operand(const std::vector<TensorType>& v, size_t i) {
  return i < v.size() && v[i].present() ? &v[i] : nullptr;
}


}  // namespace

OpWork estimateOpWork(const std::string& op, const std::vector<TensorType>& in,
                      const std::vector<TensorType>& out, const AttrMap& attrs) {
  OpWork w;
  Counter c;

  // The arithmetic dtype: first floating input, else first present input, else first output.
  w.dtype = DType::Undefined;
  for (const TensorType& t : in)
    if (t.present() && isFloat(t.dtype)) {
      w.dtype = t.dtype;
      break;
    }
  for (const TensorType& t : in)
    if (w.dtype == DType::Undefined && t.present()) w.dtype = t.dtype;
  if (w.dtype == DType::Undefined && !out.empty()) w.dtype = out[0].dtype;
  if (w.dtype == DType::Undefined) w.dtype = DType::F32;

  double inBytes = 0, outBytes = 0, outElems = 0;
  for (const TensorType& t : in) inBytes += c.bytes(t);
  for (const TensorType& t : out) {
    outBytes += c.bytes(t);
    outElems += c.numel(t);
  }
  const double y = out.empty() ? 0 : c.numel(out[0]);  // elements of the first result
  w.bytes = inBytes + outBytes;

  // The op table says how an op is counted; the Formula ops are written out below.
  const OpInfo* info = findOp(op);
  const OpWorkKind kind = info ? info->work : OpWorkKind::Unknown;
  if (kind == OpWorkKind::Free) {
    w.cls = OpClass::Free;
    w.flops = 0;
    w.bytes = 0;
  } else if (kind == OpWorkKind::Reshape && op == "Dropout" && operand(in, 2)) {
    // A Dropout that may train (training_mode given) draws its Philox mask and scales what it
    // keeps (runtime/cpu/ref/Tensor.cpp, runtime/cuda/Tensor.cpp): a pass over every element
    // into a buffer of its own, not a copy that sharing the input's buffer removes.
    w.flops = y;
  } else if (kind == OpWorkKind::Reshape) {
    // The row-major bytes stay; the kernel copies them (runtime/cpu/ref/Tensor.cpp) unless the
    // result shares the input's buffer.
    w.reshape = true;
    w.flops = 0;
    w.bytes = operand(in, 0) ? 2 * c.bytes(in[0]) : 0;
  } else if (op == "Conv" || op == "ConvInteger" || op == "QLinearConv") {
    w.cls = OpClass::Conv;
    const TensorType* W = operand(in, op == "QLinearConv" ? 3 : 1);
    if (W) {
      // W: [Cout, Cin/group, k...]; every output element is a dot product of length
      // (Cin/group)·prod(k), i.e. that many FMAs.
      w.flops = 2 * y * c.dim(*W, 1) * c.tailProduct(*W, 2);
    }
    if (op == "Conv" && operand(in, 2)) w.flops += y;
    if (op == "QLinearConv") w.flops += 3 * y;  // scale, round, zero point
  } else if (op == "ConvWeightGrad") {
    w.cls = OpClass::Conv;
    const TensorType* dY = operand(in, 1);
    if (dY && !out.empty()) {
      // dW: [Cout, Cin/group, k...]; each dY element meets (Cin/group)·prod(k) taps, one FMA each.
      w.flops = 2 * c.numel(*dY) * c.dim(out[0], 1) * c.tailProduct(out[0], 2);
    }
  } else if (op == "ConvTranspose") {
    w.cls = OpClass::Conv;
    const TensorType* X = operand(in, 0);
    const TensorType* W = operand(in, 1);
    if (X && W) {
      // W: [Cin, Cout/group, k...]; every input element scatters into (Cout/group)·prod(k)
      // outputs with one FMA each.
      w.flops = 2 * c.numel(*X) * c.dim(*W, 1) * c.tailProduct(*W, 2);
    }
    if (operand(in, 2)) w.flops += y;
  } else if (op == "Gemm") {
    w.cls = OpClass::Gemm;
    const TensorType* A = operand(in, 0);
    if (A && !out.empty()) {
      double K = attrs.getInt("transA", 0) ? c.dim(*A, 0) : c.dim(*A, 1);
      w.flops = 2 * y * K;  // y = M·N
    }
    if (operand(in, 2)) w.flops += y;
  } else if (op == "MatMul") {
    w.cls = OpClass::Gemm;
    const TensorType* A = operand(in, 0);
    if (A && !A->shape.empty()) w.flops = 2 * y * c.dim(*A, A->shape.size() - 1);
  } else if (op == "Attention") {
    // Per batch, query head, query and key: Q K^T (2 D), the mask and softmax (about 6), P V
    // (2 Dv). 4-D Q [B, Hq, Sq, D] and Y [B, Hq, Sq, Dv]; 3-D Q [B, Sq, Hq D] and Y
    // [B, Sq, Hq Dv] with Hq = q_num_heads. T: K's sequence (plus past_key's).
    w.cls = OpClass::Gemm;
    const TensorType* Q = operand(in, 0);
    const TensorType* K = operand(in, 1);
    if (Q && K && !out.empty() && (Q->shape.size() == 3 || Q->shape.size() == 4) &&
        K->shape.size() == Q->shape.size()) {
      const size_t r = Q->shape.size();
      double T = c.dim(*K, r - 2);
      if (const TensorType* past = operand(in, 4)) T += c.dim(*past, 2);
      const double heads = r == 4 ? c.dim(*Q, 1) : (double)std::max<int64_t>(1, attrs.getInt("q_num_heads", 1));
      const double rows = c.dim(*Q, 0) * c.dim(*Q, r - 2) * (r == 4 ? heads : 1.0);
      w.flops = rows * T * (2 * c.dim(*Q, r - 1) + 2 * c.dim(out[0], r - 1) + 6 * (r == 4 ? 1.0 : heads));
    }
  } else if (op == "DeformConv") {
    // Conv's products, plus a bilinear sample (about 10 FLOPs) per input channel and tap of
    // each output position: W [Cout, Cin/group, k...], X [N, Cin, ...], Y [N, Cout, ...].
    w.cls = OpClass::Conv;
    const TensorType* X = operand(in, 0);
    const TensorType* W = operand(in, 1);
    if (X && W && !out.empty()) {
      const double taps = c.tailProduct(*W, 2);
      const double positions = y / std::max(1.0, c.dim(out[0], 1));
      w.flops = 2 * y * c.dim(*W, 1) * taps + 10 * positions * c.dim(*X, 1) * taps;
    }
  } else if (op == "MatMulInteger" || op == "QLinearMatMul" || op == "QLinearMatMulBias") {
    // i32 multiply-adds over K, then (QLinear*) bias, scale, round and zero point per element.
    w.cls = OpClass::Gemm;
    const TensorType* A = operand(in, 0);
    if (A && !A->shape.empty()) w.flops = 2 * y * c.dim(*A, A->shape.size() - 1);
    if (op == "QLinearMatMul") w.flops += 3 * y;
    if (op == "QLinearMatMulBias") w.flops += 4 * y;
  } else if (op == "DynamicQuantizeMatMul") {
    // A's range and quantization (4 per element of A), the products, the scaling per result.
    w.cls = OpClass::Gemm;
    const TensorType* A = operand(in, 0);
    if (A && !A->shape.empty())
      w.flops = 2 * y * c.dim(*A, A->shape.size() - 1) + 4 * c.numel(*A) + 2 * y;
  } else if (op == "DequantizeMatMul") {
    // The products, and B widened to f32 once per row block (counted once: at decoding's few
    // rows the product reads B, at many rows the products dominate).
    w.cls = OpClass::Gemm;
    const TensorType* A = operand(in, 0);
    const TensorType* B = operand(in, 1);
    if (A && !A->shape.empty()) w.flops = 2 * y * c.dim(*A, A->shape.size() - 1);
    if (B) w.flops += 2 * c.numel(*B);
  } else if (op == "Det") {
    // LU with partial pivoting: about 2/3 M^3 per matrix, y matrices.
    const TensorType* X = operand(in, 0);
    if (X && X->shape.size() >= 2) {
      const double m = c.dim(*X, X->shape.size() - 1);
      w.flops = std::max(y, 1.0) * (2.0 / 3.0) * m * m * m;
    }
  } else if (op == "RNN" || op == "GRU" || op == "LSTM") {
    // Per step, batch row and direction: gates = X_t W^T + H R^T (2 (input + H) g H), plus ~4
    // FLOPs per gate element for the biases and activations. Counted from X [seq, batch, input]
    // (or [batch, seq, input]) and R [dirs, g H, H], as the result Y may be unused.
    const TensorType* X = operand(in, 0);
    const TensorType* R = operand(in, 2);
    if (X && R && X->shape.size() == 3 && R->shape.size() == 3) {
      const double g = op == "RNN" ? 1 : op == "GRU" ? 3 : 4;
      const double h = c.dim(*R, 2), input = c.dim(*X, 2);
      const double steps = c.dim(*X, 0) * c.dim(*X, 1) * c.dim(*R, 0);  // seq * batch * dirs
      w.flops = steps * h * g * (2 * (input + h) + 4);
    }
  } else if (op == "DFT" || op == "STFT") {
    // The reference kernels' direct sums: a complex multiply-add (8 FLOPs) per output bin per
    // sample of its transform (DFT: dft_length, taken as the input's extent along axis; STFT:
    // frame_length, the window's or else about twice the bins).
    const TensorType* X = operand(in, 0);
    double n = 0;
    if (op == "DFT" && X) {
      int64_t axis = attrs.getInt("axis", 1);
      if (axis < 0) axis += (int64_t)X->shape.size();
      if (axis >= 0 && axis < (int64_t)X->shape.size()) n = c.dim(*X, axis);
    } else if (const TensorType* W = operand(in, 2)) {
      n = c.numel(*W);
    } else if (!out.empty() && out[0].shape.size() == 4) {
      n = 2 * (c.dim(out[0], 2) - 1);
    }
    w.flops = 8 * (y / 2) * n;  // y / 2 complex bins
  } else if (op == "MaxPool" || op == "AveragePool") {
    std::vector<int64_t> k = attrs.getInts("kernel_shape");
    double kp = 1;
    for (int64_t d : k) kp *= (double)std::max<int64_t>(d, 1);
    if (k.empty()) {
      w.estimated = true;
      w.note = "no kernel_shape: counted as a 1-element window";
    }
    w.flops = y * kp;
  } else if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    w.flops = operand(in, 0) ? c.numel(in[0]) : 0;
  } else if (kind == OpWorkKind::Elementwise) {
    w.flops = info->flopsPerElement * y;
  } else if (kind == OpWorkKind::Variadic) {
    size_t k = 0;
    for (const TensorType& t : in) k += t.present();
    w.flops = y * (double)std::max<size_t>(k, 2) - y;  // k-1 per element, at least 1
  } else if (kind == OpWorkKind::ReduceInput) {
    w.flops = operand(in, 0) ? c.numel(in[0]) : 0;
  } else if (op == "ReduceMean") {
    w.flops = (operand(in, 0) ? c.numel(in[0]) : 0) + y;
  } else if (op == "LayerNormalization") {
    w.flops = (operand(in, 2) ? 7 : 6) * y;
  } else if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss") {
    // Per label: pick, weight, accumulate (3); SCE adds a log-softmax over every score (max,
    // subtract, exp as 4, sum: 7, as Softmax's row counts 8 with its divide).
    const double labels = operand(in, 1) ? c.numel(in[1]) : 0;
    w.flops = 3 * labels;
    if (op == "SoftmaxCrossEntropyLoss" && operand(in, 0)) w.flops += 7 * c.numel(in[0]);
  } else if (op == "Adam" || op == "Momentum" || op == "Adagrad") {
    // One pass per tensor over X, G and the state; FLOPs per element of X: Adam regularise
    // (2), two moment updates (3 + 4), sqrt + epsilon (2), divide and step (3); Momentum
    // regularise, momentum, step (6; Nesterov's extra FMA is in the noise); Adagrad regularise,
    // accumulate, sqrt + epsilon, divide and step (9).
    const double perElement = op == "Adam" ? 14 : op == "Momentum" ? 6 : 9;
    const size_t groups = op == "Adam" ? 4 : 3;
    const size_t tensors = in.size() >= 2 ? (in.size() - 2) / groups : 0;
    for (size_t t = 0; t < tensors; ++t) w.flops += perElement * c.numel(in[2 + t]);
  } else if (kind == OpWorkKind::Data) {
    w.flops = 0;
  } else if (op == "Slice") {
    // Reads only the sliced elements (plus the small starts/ends/axes/steps operands).
    w.flops = 0;
    w.bytes = 2 * outBytes;
    for (size_t i = 1; i < in.size(); ++i) w.bytes += c.bytes(in[i]);
  } else if (op == "Gather") {
    // Reads the indices and only the gathered rows of the data, not the whole table.
    w.flops = 0;
    w.bytes = 2 * outBytes + (operand(in, 1) ? c.bytes(in[1]) : 0);
  } else if (op == "EmbeddingBag") {
    // One add (or max) per gathered element, plus the multiply by a per-sample weight: each
    // index is read once and its row [D] once (the bags' ranges usually partition the indices).
    const TensorType* W = operand(in, 0);
    const TensorType* I = operand(in, 1);
    const double gathered = W && I && W->shape.size() == 2 ? c.numel(*I) * (double)c.dim(*W, 1) : 0;
    w.flops = gathered * (operand(in, 4) ? 2 : 1);
    w.bytes = outBytes + (I ? c.bytes(*I) : 0) + gathered * (W ? dtypeSize(W->dtype) : 4);
  } else if (op == "LRN") {
    // size squares and adds per element, then a pow (4) and a divide.
    w.flops = y * (2 * (double)std::max<int64_t>(attrs.getInt("size", 1), 1) + 5);
  } else if (op == "Einsum") {
    // One multiply-add per operand per point of the loop nest (the result's labels times the
    // summed ones), i.e. per result element times the summed extent: input elements bound it.
    double maxIn = 0;
    for (const TensorType& t : in) maxIn = std::max(maxIn, c.numel(t));
    w.flops = 2 * std::max(y, maxIn) * (double)std::max<size_t>(in.size(), 1);
    w.estimated = true;
    w.note = "Einsum counted as one multiply-add per operand per element of its largest operand or result";
  } else if (op == "NonMaxSuppression") {
    // Per batch and class, each of the n boxes against those kept: n^2 IoUs of ~12 FLOPs.
    const TensorType* S = operand(in, 1);
    if (S && S->shape.size() == 3) w.flops = 12 * c.dim(*S, 0) * c.dim(*S, 1) * c.dim(*S, 2) * c.dim(*S, 2);
  } else if (op == "RoiAlign") {
    // Each output element averages sampling_ratio^2 (default: about 4) bilinear samples of 8 FLOPs.
    const int64_t r = attrs.getInt("sampling_ratio", 0);
    w.flops = y * 8 * (double)(r > 0 ? r * r : 4);
  } else if (op == "ConstantOfShape") {
    w.flops = 0;  // writes its result; reads only the small shape operand
  } else {
    w.estimated = true;
    w.note = "op type '" + op + "' has no work formula: counted as 1 FLOP per output element";
    w.flops = outElems;
  }

  if (c.unknownDims) {
    w.estimated = true;
    w.note += std::string(w.note.empty() ? "" : "; ") + "unknown dims counted as 1";
  }
  return w;
}

}  // namespace tandem

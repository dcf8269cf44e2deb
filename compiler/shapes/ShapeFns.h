// Internal to compiler/shapes: the per-op shape-function signature, shared helpers, and the
// category entry points that Registry.cpp puts in the op table.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ShapeInference.h"

namespace tandem::shapes {

/// Everything one shape function sees: the call of inferResultTypes, unpacked.
/// `out` has been resized to numResults by the dispatcher; a function fills it (or errs).
struct Ctx {
  const std::string& op;
  const std::vector<OperandInfo>& in;
  const AttrMap& attrs;
  size_t numResults;
  std::vector<ResultInfo>* out;

  /// Operand i is given and present (trailing optional operands may be missing from `in`).
  bool has(size_t i) const { return i < in.size() && in[i].present; }
  /// "<op>: <msg>" — every message names the op so it reads on its own.
  std::string fail(const std::string& msg) const { return op + ": " + msg; }
  void set(size_t i, DType t, std::vector<int64_t> dims) const {
    (*out)[i].dtype = t;
    (*out)[i].dims = std::move(dims);
  }
};

using ShapeFn = std::string (*)(const Ctx&);

// ---- Helpers (Common.cpp) ----

/// "input 1 (W)" or "input 1" when `name` is empty.
std::string operandLabel(size_t i, const char* name);
/// "[1,?,3]" with ? for kUnknownDim.
std::string dimsStr(const std::vector<int64_t>& d);
/// Checks the operand count is within [minIn, maxIn] counting given (possibly absent) slots
/// after trimming trailing absent ones, that required operands are present, and that numResults
/// is within [minOut, maxOut]. Also checks every present operand has a defined dtype and valid
/// dims (>= 0 or kUnknownDim). `names` are the ONNX operand names (size >= maxIn when given).
std::string checkArity(const Ctx& c, size_t minIn, size_t maxIn, size_t minOut, size_t maxOut,
                       const std::vector<const char*>& names = {});
/// Checks operand i has dtype equal to operand j's ("input 1 (B) has dtype i64 but input 0 (A) has f32").
std::string checkSameDType(const Ctx& c, size_t i, size_t j, const std::vector<const char*>& names = {});
/// Checks operand i's dtype is one of `allowed` (message lists them).
std::string checkDTypeIn(const Ctx& c, size_t i, const std::vector<DType>& allowed,
                         const std::vector<const char*>& names = {});
/// Two dims that must agree: equal, or either unknown (kUnknownDim).
inline bool dimsAgree(int64_t a, int64_t b) { return a == kUnknownDim || b == kUnknownDim || a == b; }
/// Normalises an axis in [-rank, rank) to [0, rank); error names `what`.
std::string normAxis(const Ctx& c, int64_t axis, int64_t rank, const std::string& what, int64_t* out);
/// Reads a 0-D/1-D integer (i64 or i32) constant tensor into `vals`. Returns "" if OK, an error
/// if the tensor is not integer. `known` is false when the operand has no value.
std::string readInts(const Ctx& c, size_t i, const char* name, bool* known, std::vector<int64_t>* vals);
/// Requires operand i to be 1-D (or 0-D if allow0D) with integer dtype; returns its length
/// (kUnknownDim when unknown).
std::string checkIntVector(const Ctx& c, size_t i, const char* name, int64_t* len, bool allow0D = false);
/// Broadcasts two known-rank shapes; `la`/`lb` label them in the error.
std::string broadcastTwo(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                         const std::string& la, const std::string& lb, std::vector<int64_t>* out);
/// Unidirectional: can `b` broadcast to `a` (result shape is a)?
std::string checkUnidirectional(const std::vector<int64_t>& target, const std::vector<int64_t>& b,
                                const std::string& lt, const std::string& lb);

/// Rejects attribute `attr` that an older opset had and opset 13+ moved to input `input`
/// ("input 1 (axes)"), so an unconverted old model fails instead of being silently misread.
std::string rejectOldAttr(const Ctx& c, const char* attr, const std::string& input);

extern const std::vector<DType> kFloatTypes;    // f16, f32, f64
extern const std::vector<DType> kNumericTypes;  // floats + ints
extern const std::vector<DType> kIntIndexTypes; // i32, i64
extern const std::vector<DType> kUnsignedTypes; // u8, u16, u32, u64

// ---- Category entry points ----
// Elementwise.cpp
std::string inferBinaryArith(const Ctx& c);   // Add Sub Mul Div
std::string inferPow(const Ctx& c);
std::string inferVariadic(const Ctx& c);      // Sum Mean Min Max
std::string inferCompare(const Ctx& c);       // Equal Less Greater LessOrEqual GreaterOrEqual
std::string inferMod(const Ctx& c);
std::string inferBitShift(const Ctx& c);
std::string inferBitwise(const Ctx& c);
std::string inferLogical(const Ctx& c);       // Not And Or Xor
std::string inferClassify(const Ctx& c);      // IsNaN IsInf
std::string inferWhere(const Ctx& c);
std::string inferUnaryFloat(const Ctx& c);    // Sqrt Exp Log Reciprocal Sigmoid Tanh Softplus Elu Selu HardSigmoid LeakyRelu
std::string inferUnaryNumeric(const Ctx& c);  // Abs Erf Shrink (any numeric), Neg Relu (signed)
std::string inferPRelu(const Ctx& c);
std::string inferClip(const Ctx& c);
std::string inferIdentity(const Ctx& c);
std::string inferCast(const Ctx& c);
std::string inferCastLike(const Ctx& c);
std::string inferDropout(const Ctx& c);
// Generate.cpp
std::string inferRange(const Ctx& c);
std::string inferEyeLike(const Ctx& c);
std::string inferSize(const Ctx& c);
std::string inferTrilu(const Ctx& c);
std::string inferCumSum(const Ctx& c);
std::string inferWindow(const Ctx& c);  // HannWindow HammingWindow BlackmanWindow
// Quantize.cpp
std::string inferQuantizeLinear(const Ctx& c);
std::string inferDequantizeLinear(const Ctx& c);
std::string inferDynamicQuantizeLinear(const Ctx& c);
std::string inferMatMulInteger(const Ctx& c);
std::string inferQLinearMatMul(const Ctx& c);
std::string inferQLinearMatMulBias(const Ctx& c);
std::string inferDynamicQuantizeMatMul(const Ctx& c);
std::string inferDequantizeMatMul(const Ctx& c);
// Math.cpp
std::string inferGemm(const Ctx& c);
std::string inferMatMul(const Ctx& c);
std::string inferAttention(const Ctx& c);
std::string inferRotaryEmbedding(const Ctx& c);
std::string inferDet(const Ctx& c);
std::string inferSoftmax(const Ctx& c);       // Softmax LogSoftmax Hardmax
// Nn.cpp
std::string inferConv(const Ctx& c);
std::string inferDeformConv(const Ctx& c);
std::string inferConvTranspose(const Ctx& c);
std::string inferConvInteger(const Ctx& c);
std::string inferQLinearConv(const Ctx& c);
std::string inferPool(const Ctx& c);          // MaxPool AveragePool MaxPoolGrad
std::string inferGlobalPool(const Ctx& c);    // GlobalAveragePool GlobalMaxPool
std::string inferBatchNorm(const Ctx& c);
std::string inferConvWeightGrad(const Ctx& c);  // ConvWeightGrad (autodiff)
std::string inferBatchNormGrad(const Ctx& c);  // BatchNormalizationGrad (autodiff)
std::string inferLayerNormGrad(const Ctx& c);  // LayerNormalizationGrad (autodiff)
std::string inferLayerNorm(const Ctx& c);
std::string inferRmsNorm(const Ctx& c);
// Image.cpp
std::string inferResize(const Ctx& c);
std::string inferGridSample(const Ctx& c);
std::string inferRoiAlign(const Ctx& c);
std::string inferMaxUnpool(const Ctx& c);
std::string inferLRN(const Ctx& c);
std::string inferInstanceNorm(const Ctx& c);
std::string inferGroupNorm(const Ctx& c);
// Indexing.cpp
std::string inferGatherElements(const Ctx& c);
std::string inferGatherND(const Ctx& c);
std::string inferScatterElements(const Ctx& c);
std::string inferScatterND(const Ctx& c);
std::string inferTensorScatter(const Ctx& c);
std::string inferEmbeddingBag(const Ctx& c);
std::string inferEmbeddingBagGrad(const Ctx& c);
std::string inferOneHot(const Ctx& c);
std::string inferDepthToSpace(const Ctx& c);
std::string inferCol2Im(const Ctx& c);
std::string inferSpaceToDepth(const Ctx& c);
std::string inferReverseSequence(const Ctx& c);
std::string inferTopK(const Ctx& c);
std::string inferEinsum(const Ctx& c);
std::string inferCompress(const Ctx& c);      // value-dependent (runtime/DataDependent.h)
std::string inferNonZero(const Ctx& c);
std::string inferUnique(const Ctx& c);
std::string inferNonMaxSuppression(const Ctx& c);
// ControlFlow.cpp: result types from the subgraphs' plans (runtime/ControlFlow.h)
std::string inferIf(const Ctx& c);
std::string inferLoop(const Ctx& c);
std::string inferDynamicRegion(const Ctx& c);
std::string inferScan(const Ctx& c);
// Recurrent.cpp
std::string inferRecurrent(const Ctx& c);  // RNN GRU LSTM
// Signal.cpp
std::string inferDFT(const Ctx& c);
std::string inferSTFT(const Ctx& c);
std::string inferMelWeightMatrix(const Ctx& c);
// Reduction.cpp
std::string inferReduce(const Ctx& c);  // ReduceMean ReduceSum ReduceMax ReduceMin ReduceL1 ReduceL2
                                        // ReduceSumSquare ReduceProd ReduceLogSum ReduceLogSumExp
std::string inferArgMax(const Ctx& c);  // ArgMax ArgMin
// Training.cpp
std::string inferLoss(const Ctx& c);          // NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss
std::string inferGeluGrad(const Ctx& c);      // GeluGrad (tandem): dY, X -> dX
std::string inferLossGrad(const Ctx& c);      // NegativeLogLikelihoodLossGrad
                                              // SoftmaxCrossEntropyLossGrad
std::string inferOptimizer(const Ctx& c);     // Adagrad Adam Momentum
// Tensor.cpp
std::string inferFlatten(const Ctx& c);
std::string inferReshape(const Ctx& c);
std::string inferTranspose(const Ctx& c);
std::string inferSqueeze(const Ctx& c);
std::string inferUnsqueeze(const Ctx& c);
std::string inferConcat(const Ctx& c);
std::string inferSplit(const Ctx& c);
std::string inferSlice(const Ctx& c);
std::string inferGather(const Ctx& c);
std::string inferShape(const Ctx& c);
std::string inferConstant(const Ctx& c);
std::string inferConstantOfShape(const Ctx& c);
std::string inferExpand(const Ctx& c);
std::string inferPad(const Ctx& c);
std::string inferTile(const Ctx& c);

}  // namespace tandem::shapes

// The op table (ONNX name → shape function) and the public inferResultTypes dispatcher.
#include <algorithm>
#include <map>

#include "compiler/shapes/ShapeFns.h"

namespace tandem {
namespace {

using shapes::ShapeFn;

const std::map<std::string, ShapeFn>& opTable() {
  using namespace shapes;
  static const std::map<std::string, ShapeFn> table = {
      {"Abs", inferUnaryNumeric},
      {"Add", inferBinaryArith},
      {"ArgMax", inferArgMax},
      {"AveragePool", inferPool},
      {"BatchNormalization", inferBatchNorm},
      {"Cast", inferCast},
      {"Clip", inferClip},
      {"Concat", inferConcat},
      {"Constant", inferConstant},
      {"ConstantOfShape", inferConstantOfShape},
      {"Conv", inferConv},
      {"ConvTranspose", inferConvTranspose},
      {"Div", inferBinaryArith},
      {"Dropout", inferDropout},
      {"Elu", inferUnaryFloat},
      {"Equal", inferCompare},
      {"Erf", inferUnaryNumeric},
      {"Exp", inferUnaryFloat},
      {"Expand", inferExpand},
      {"Flatten", inferFlatten},
      {"Gather", inferGather},
      {"Gemm", inferGemm},
      {"GlobalAveragePool", inferGlobalPool},
      {"GlobalMaxPool", inferGlobalPool},
      {"Greater", inferCompare},
      {"HardSigmoid", inferUnaryFloat},
      {"Identity", inferIdentity},
      {"LayerNormalization", inferLayerNorm},
      {"Gelu", inferUnaryFloat},
      {"LeakyRelu", inferUnaryFloat},
      {"Less", inferCompare},
      {"Log", inferUnaryFloat},
      {"LogSoftmax", inferSoftmax},
      {"MatMul", inferMatMul},
      {"Max", inferVariadic},
      {"MaxPool", inferPool},
      {"Min", inferVariadic},
      {"Mul", inferBinaryArith},
      {"Neg", inferUnaryNumeric},
      {"PRelu", inferPRelu},
      {"Pad", inferPad},
      {"Pow", inferPow},
      {"Reciprocal", inferUnaryFloat},
      {"ReduceL2", inferReduce},
      {"ReduceMax", inferReduce},
      {"ReduceMean", inferReduce},
      {"ReduceMin", inferReduce},
      {"ReduceSum", inferReduce},
      {"ReduceSumSquare", inferReduce},
      {"Relu", inferUnaryNumeric},
      {"Reshape", inferReshape},
      {"Selu", inferUnaryFloat},
      {"Shape", inferShape},
      {"Sigmoid", inferUnaryFloat},
      {"Slice", inferSlice},
      {"Softmax", inferSoftmax},
      {"Softplus", inferUnaryFloat},
      {"Split", inferSplit},
      {"Sqrt", inferUnaryFloat},
      {"Squeeze", inferSqueeze},
      {"Sub", inferBinaryArith},
      {"Sum", inferVariadic},
      {"Tanh", inferUnaryFloat},
      {"Tile", inferTile},
      {"Transpose", inferTranspose},
      {"Unsqueeze", inferUnsqueeze},
      {"Where", inferWhere},
  };
  return table;
}

}  // namespace

std::string inferResultTypes(const std::string& opType, const std::vector<OperandInfo>& operands,
                             const AttrMap& attrs, size_t numResults,
                             std::vector<ResultInfo>* results) {
  const auto& table = opTable();
  auto it = table.find(opType);
  if (it == table.end()) return "unknown op '" + opType + "' (not a tandem op)";
  results->assign(numResults, ResultInfo{});
  shapes::Ctx ctx{opType, operands, attrs, numResults, results};
  std::string err = it->second(ctx);
  if (!err.empty()) results->clear();
  return err;
}

bool isKnownOp(const std::string& opType) { return opTable().count(opType) != 0; }

const std::vector<std::string>& knownOps() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& kv : opTable()) v.push_back(kv.first);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return names;
}

}  // namespace tandem

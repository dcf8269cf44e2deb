// Models of opsets 18-25: the ops whose definition changed after opset 17 (NewerOpsets.h).
#include "frontend/NewerOpsets.h"

#include <map>
#include <vector>

#include <onnx/onnx_pb.h>

namespace tandem {
namespace {

/// Every default-domain op defined anew in opsets 18-25 (onnx/defs/operator_sets.h), with
/// those versions. Ops new after 17 are listed too: their first version is not "newer" than
/// anything Tandem has, so newerOpVersion skips a version that has no predecessor <= 17.
const std::map<std::string, std::vector<int>>& newerVersions() {
  static const std::map<std::string, std::vector<int>> table = {
      {"Acos", {22}},
      {"Acosh", {22}},
      {"AffineGrid", {20}},
      {"Asin", {22}},
      {"Asinh", {22}},
      {"Atan", {22}},
      {"Atanh", {22}},
      {"Attention", {23, 24, 25}},
      {"AveragePool", {19, 22}},
      {"Bernoulli", {22}},
      {"BitwiseAnd", {18}},
      {"BitwiseNot", {18}},
      {"BitwiseOr", {18}},
      {"BitwiseXor", {18}},
      {"Cast", {19, 21, 23, 24, 25}},
      {"CastLike", {19, 21, 23, 24, 25}},
      {"CenterCropPad", {18}},
      {"Col2Im", {18}},
      {"Constant", {19, 21, 23, 24, 25}},
      {"ConstantOfShape", {20, 21, 23, 24, 25}},
      {"Conv", {22}},
      {"ConvTranspose", {22}},
      {"Cos", {22}},
      {"Cosh", {22}},
      {"DFT", {20}},
      {"DeformConv", {19, 22}},
      {"DequantizeLinear", {19, 21, 23, 24, 25}},
      {"Det", {22}},
      {"Dropout", {22}},
      {"Elu", {22}},
      {"Equal", {19}},
      {"EyeLike", {22}},
      {"Flatten", {21, 23, 24, 25}},
      {"GRU", {22}},
      {"Gelu", {20}},
      {"GlobalAveragePool", {22}},
      {"GlobalLpPool", {22}},
      {"GlobalMaxPool", {22}},
      {"GridSample", {20, 22}},
      {"GroupNormalization", {18, 21}},
      {"HardSigmoid", {22}},
      {"HardSwish", {22}},
      {"Identity", {19, 21, 23, 24, 25}},
      {"If", {19, 21, 23, 24, 25}},
      {"ImageDecoder", {20}},
      {"InstanceNormalization", {22}},
      {"IsInf", {20}},
      {"IsNaN", {20}},
      {"LSTM", {22}},
      {"Loop", {19, 21, 23, 24, 25}},
      {"LpNormalization", {22}},
      {"LpPool", {18, 22}},
      {"MaxPool", {22}},
      {"MaxRoiPool", {22}},
      {"MaxUnpool", {22}},
      {"Mish", {18, 22}},
      {"Multinomial", {22}},
      {"NegativeLogLikelihoodLoss", {22}},
      {"OptionalGetElement", {18}},
      {"OptionalHasElement", {18}},
      {"Pad", {18, 19, 21, 23, 24, 25}},
      {"QLinearMatMul", {21}},
      {"QuantizeLinear", {19, 21, 23, 24, 25}},
      {"RMSNormalization", {23}},
      {"RNN", {22}},
      {"RandomNormal", {22}},
      {"RandomNormalLike", {22}},
      {"RandomUniform", {22}},
      {"RandomUniformLike", {22}},
      {"ReduceL1", {18}},
      {"ReduceL2", {18}},
      {"ReduceLogSum", {18}},
      {"ReduceLogSumExp", {18}},
      {"ReduceMax", {18, 20}},
      {"ReduceMean", {18}},
      {"ReduceMin", {18, 20}},
      {"ReduceProd", {18}},
      {"ReduceSumSquare", {18}},
      {"RegexFullMatch", {20}},
      {"Reshape", {19, 21, 23, 24, 25}},
      {"Resize", {18, 19}},
      {"RoiAlign", {22}},
      {"RotaryEmbedding", {23}},
      {"Round", {22}},
      {"Scan", {19, 21, 23, 24, 25}},
      {"ScatterElements", {18}},
      {"ScatterND", {18}},
      {"Selu", {22}},
      {"Shape", {19, 21, 23, 24, 25}},
      {"Sin", {22}},
      {"Sinh", {22}},
      {"Size", {19, 21, 23, 24, 25}},
      {"Softplus", {22}},
      {"Softsign", {22}},
      {"Split", {18}},
      {"SplitToSequence", {24}},
      {"Squeeze", {21, 23, 24, 25}},
      {"StringConcat", {20}},
      {"StringSplit", {20}},
      {"Swish", {24}},
      {"Tan", {22}},
      {"TensorScatter", {24}},
      {"ThresholdedRelu", {22}},
      {"TopK", {24}},
      {"Transpose", {21, 23, 24, 25}},
      {"Unsqueeze", {21, 23, 24, 25}},
  };
  return table;
}

/// Ops whose first definition is later than opset 17 (nothing older to compare with).
bool newAfter17(const std::string& op) {
  static const char* const kNew[] = {
      "AffineGrid", "Attention", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor",
      "CenterCropPad", "Col2Im", "DeformConv", "Gelu", "GroupNormalization", "ImageDecoder",
      "Mish", "RMSNormalization", "RegexFullMatch", "RotaryEmbedding", "StringConcat",
      "StringSplit", "Swish", "TensorScatter"};
  for (const char* n : kNew)
    if (op == n) return true;
  return false;
}

const onnx::AttributeProto* attr(const onnx::NodeProto& n, const char* name) {
  for (const onnx::AttributeProto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::string listText(const onnx::AttributeProto& a) {
  std::string s = "[";
  for (int i = 0; i < a.ints_size(); ++i) s += (i ? ", " : "") + std::to_string(a.ints(i));
  return s + "]";
}

/// An attribute added after opset 17 that the node must leave at its default for the opset-17
/// op to compute the same: an int equal to `want`, or (ints) all equal to `want`, or a string
/// equal to `wantText` (`wantText` non-null), or absent (`mustBeAbsent`).
struct DefaultOnly {
  const char* name;
  int64_t want = 0;
  const char* wantText = nullptr;
  bool mustBeAbsent = false;
};

struct Addition {
  const char* op;
  int version;
  std::vector<DefaultOnly> attrs;
  const char* why;  // what the non-default value would need
};

const std::vector<Addition>& additions() {
  static const std::vector<Addition> table = {
      {"AveragePool", 19, {{"dilations", 1}}, "dilated average pooling"},
      {"LpPool", 18, {{"ceil_mode", 0}, {"dilations", 1}}, "ceil_mode and dilations of LpPool-18"},
      {"QuantizeLinear", 23, {{"precision", 0}}, "QuantizeLinear-23's precision"},
      {"DequantizeLinear", 23, {{"output_dtype", 0}},
       "an output dtype other than x_scale's"},
  };
  return table;
}

/// Attributes added after opset 17 taken at any value: those that carry no meaning for
/// Tandem's dtypes (float8 and e8m0 rounding), and Resize-18's keep_aspect_ratio_policy, which
/// the importer reads from the node and writes out as sizes and scales (OnnxImporter.cpp).
const std::vector<Addition>& anyValueAdditions() {
  static const std::vector<Addition> table = {
      {"Resize", 18, {{"keep_aspect_ratio_policy"}}, ""},
      {"Cast", 19, {{"saturate"}}, ""},        {"CastLike", 19, {{"saturate"}}, ""},
      {"QuantizeLinear", 19, {{"saturate"}}, ""}, {"Cast", 24, {{"round_mode"}}, ""},
      {"CastLike", 24, {{"round_mode"}}, ""},  {"QuantizeLinear", 21, {{"output_dtype"}}, ""},
  };
  return table;
}

}  // namespace

std::vector<std::string> attributesAddedAfter17(const std::string& opType, int64_t opset) {
  std::vector<std::string> names;
  const int version = newerOpVersion(opType, opset);
  for (const auto* table : {&additions(), &anyValueAdditions()})
    for (const Addition& a : *table)
      if (opType == a.op && a.version <= version)
        for (const DefaultOnly& d : a.attrs) names.push_back(d.name);
  return names;
}

int opsetIntroducing(const std::string& opType) {
  if (!newAfter17(opType)) return 0;
  auto it = newerVersions().find(opType);
  return it == newerVersions().end() ? 0 : it->second.front();
}

int newerOpVersion(const std::string& opType, int64_t opset) {
  const auto& t = newerVersions();
  auto it = t.find(opType);
  if (it == t.end()) return 0;
  int v = 0;
  for (int version : it->second)
    if (version <= opset) v = version;
  if (v == it->second.front() && newAfter17(opType)) return 0;
  return v;
}

std::string checkNewerOpsetNode(const onnx::NodeProto& n, int64_t opset) {
  const int version = newerOpVersion(n.op_type(), opset);
  if (version == 0) return "";
  const std::string label = n.op_type() + "-" + std::to_string(version);
  for (const Addition& a : additions()) {
    if (n.op_type() != a.op || a.version > version) continue;
    for (const DefaultOnly& d : a.attrs) {
      const onnx::AttributeProto* p = attr(n, d.name);
      if (!p) continue;
      std::string value;
      if (d.mustBeAbsent) {
        value = p->ints_size() ? listText(*p) : "given";
      } else if (d.wantText) {
        if (p->s() != d.wantText) value = "'" + p->s() + "'";
      } else if (p->ints_size() > 0) {
        for (int64_t v : p->ints())
          if (v != d.want) value = listText(*p);
      } else if (p->i() != d.want) {
        value = std::to_string(p->i());
      }
      if (!value.empty())
        return label + ": attribute " + d.name + " " + value + " is not supported (" + a.why +
               "; Tandem takes " + d.name + " " +
               (d.mustBeAbsent ? std::string("absent")
                               : d.wantText ? "'" + std::string(d.wantText) + "'"
                                            : std::to_string(d.want)) +
               ")";
    }
  }
  // QuantizeLinear-21's output_dtype without a y_zero_point sets y's dtype, which Tandem takes
  // from the zero point (u8 when absent).
  if (n.op_type() == "QuantizeLinear" && version >= 21) {
    const onnx::AttributeProto* p = attr(n, "output_dtype");
    const bool hasZp = n.input_size() > 2 && !n.input(2).empty();
    if (p && p->i() != 0 && !hasZp && p->i() != onnx::TensorProto::UINT8)
      return label + ": attribute output_dtype " + std::to_string(p->i()) +
             " without a y_zero_point is not supported (give y_zero_point of that dtype)";
  }
  return "";
}

}  // namespace tandem

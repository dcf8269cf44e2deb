// The CUDA op table (see runtime/cuda/CudaKernelTable.h): compiled into every build.
#include "runtime/cuda/CudaKernelTable.h"

#include <algorithm>
#include <map>

#include "runtime/OpTable.h"

namespace tandem {

namespace {

enum class Rule {
  AllF32,     // every present input f32 (math, conv, norms, reductions)
  SameOf,     // every input of one dtype from the set (binary arithmetic, comparisons)
  FirstOf,    // data input in the set; later inputs are i32/i64 shape operands read at load
  Where,      // bool condition, then two inputs of one dtype from the set
  Dropout,    // data from the set, then ratio (f32/f64), training_mode (bool), counter (f32/i64)
  Labels,     // f32 but for i32/i64 class labels at Entry::labels; that many inputs, 1 optional more
  Resize,     // data from the set, then roi (f32/f64), scales (f32), sizes (i64), absent ones omitted
  Boxes,      // NonMaxSuppression: f32 boxes, scores; then i64 max_output_boxes_per_class, f32 thresholds
  Recurrent,  // f32 but for sequence_lens (i32/i64), which cudaKernelRejects refuses with its reason
  Rotary,     // RotaryEmbedding: f32 X, cos_cache, sin_cache, then optional i64 position_ids
};

struct Entry {
  Rule rule;
  std::vector<DType> set;
  size_t labels = 0;  // Rule::Labels: the labels' operand
};

const std::vector<DType>& f32() { static const std::vector<DType> s = {DType::F32}; return s; }
const std::vector<DType>& arith() {
  static const std::vector<DType> s = {DType::F32, DType::I32, DType::I64};
  return s;
}
const std::vector<DType>& any() {
  static const std::vector<DType> s = {DType::F32, DType::F64, DType::I32, DType::I64,
                                       DType::U8,  DType::I8,  DType::Bool};
  return s;
}

const std::map<std::string, Entry>& table() {
  static const std::map<std::string, Entry> t = [] {
    std::map<std::string, Entry> m;
    // The generated element-wise kernels' unary ops: the op table's kCudaExpr rows (f32).
    size_t n = 0;
    const OpInfo* rows = allOps(&n);
    for (size_t i = 0; i < n; ++i)
      if (rows[i].has(kUnary | kCudaExpr)) m[rows[i].name] = {Rule::AllF32, f32()};
    for (const char* op : {"Pow", "PRelu", "GeluGrad", "Softmax", "LogSoftmax", "LayerNormalization",
                           "LayerNormalizationGrad", "BatchNormalization", "MatMul", "Gemm", "Conv", "ConvTranspose",
                           "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                           "MaxPoolGrad", "ConvWeightGrad"})
      m[op] = {Rule::AllF32, f32()};
    // Scores, labels[, weight]; the gradient's dY, log_prob, labels[, weight].
    m["SoftmaxCrossEntropyLoss"] = {Rule::Labels, f32(), 1};
    m["SoftmaxCrossEntropyLossGrad"] = {Rule::Labels, f32(), 2};
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ArgMax"})
      m[op] = {Rule::FirstOf, f32()};  // axes (opset 13/18) is a constant i64 input
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Min", "Max", "Sum", "Less", "Greater"})
      m[op] = {Rule::SameOf, arith()};
    m["Equal"] = {Rule::SameOf, {DType::F32, DType::I32, DType::I64, DType::Bool}};
    m["Where"] = {Rule::Where, any()};
    for (const char* op : {"Cast", "Identity", "Flatten", "Reshape", "Squeeze",
                           "Unsqueeze", "Transpose", "Expand", "Slice", "Concat", "Split",
                           "Tile", "Pad", "Gather"})
      m[op] = {Rule::FirstOf, any()};
    m["Concat"] = {Rule::SameOf, any()};
    m["Dropout"] = {Rule::Dropout, any()};
    m["GatherElements"] = {Rule::FirstOf, any()};  // indices i32/i64
    m["CumSum"] = {Rule::FirstOf, {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::I8}};
    m["TopK"] = {Rule::FirstOf, {DType::F32, DType::F64, DType::I32, DType::I64}};  // K i64
    m["Resize"] = {Rule::Resize, {DType::F32, DType::F64}};
    m["NonMaxSuppression"] = {Rule::Boxes, f32()};
    for (const char* op : {"RNN", "GRU", "LSTM"}) m[op] = {Rule::Recurrent, f32()};
    m["RMSNormalization"] = {Rule::AllF32, f32()};
    m["GroupNormalization"] = {Rule::AllF32, f32()};
    m["InstanceNormalization"] = {Rule::AllF32, f32()};
    m["RotaryEmbedding"] = {Rule::Rotary, f32()};
    return m;
  }();
  return t;
}

bool in(const std::vector<DType>& s, DType d) { return std::find(s.begin(), s.end(), d) != s.end(); }

}  // namespace

const std::vector<std::string>& cudaKernelOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (auto& e : table()) v.push_back(e.first);
    return v;
  }();
  return ops;
}

bool cudaKernelAccepts(const std::string& opType, const std::vector<DType>& dts) {
  auto it = table().find(opType);
  if (it == table().end() || dts.empty()) return false;
  const Entry& e = it->second;
  switch (e.rule) {
    case Rule::AllF32:
      return std::all_of(dts.begin(), dts.end(), [](DType d) { return d == DType::F32; });
    case Rule::SameOf:
      return in(e.set, dts[0]) &&
             std::all_of(dts.begin(), dts.end(), [&](DType d) { return d == dts[0]; });
    case Rule::FirstOf:
      if (!in(e.set, dts[0])) return false;
      // Shape operands are integers, except Pad's constant_value (the data dtype) and Clip.
      for (size_t i = 1; i < dts.size(); ++i)
        if (dts[i] != DType::I64 && dts[i] != DType::I32 && !(opType == "Pad" && i == 2 && dts[i] == dts[0]))
          return false;
      return true;
    case Rule::Where:
      return dts.size() == 3 && dts[0] == DType::Bool && in(e.set, dts[1]) && dts[2] == dts[1];
    case Rule::Dropout: {
      // Absent operands are omitted, so the later dtypes are matched in order to the slots
      // they can fill (the earliest that fits: a list fits some slots iff it fits these).
      if (!in(e.set, dts[0])) return false;
      static const std::vector<std::vector<DType>> slots = {
          {DType::F32, DType::F64}, {DType::Bool}, {DType::F32, DType::I64}};
      size_t slot = 0;
      for (size_t i = 1; i < dts.size(); ++i, ++slot) {
        while (slot < slots.size() && !in(slots[slot], dts[i])) ++slot;
        if (slot == slots.size()) return false;
      }
      return true;
    }
    case Rule::Labels:
      if (dts.size() <= e.labels || dts.size() > e.labels + 2) return false;
      for (size_t i = 0; i < dts.size(); ++i)
        if (i == e.labels ? dts[i] != DType::I32 && dts[i] != DType::I64 : !in(e.set, dts[i])) return false;
      return true;
    case Rule::Resize:
      return in(e.set, dts[0]) && std::all_of(dts.begin() + 1, dts.end(), [](DType d) {
               return d == DType::F32 || d == DType::F64 || d == DType::I64;
             });
    case Rule::Boxes:
      if (dts.size() < 2 || dts[0] != DType::F32 || dts[1] != DType::F32) return false;
      return std::all_of(dts.begin() + 2, dts.end(), [](DType d) { return d == DType::F32 || d == DType::I64; });
    case Rule::Recurrent: {
      // Inputs X, W, R[, B][, sequence_lens][, initial_h][, initial_c][, P]: one integer at most.
      if (dts.size() < 3 || dts[0] != DType::F32 || dts[1] != DType::F32 || dts[2] != DType::F32) return false;
      size_t ints = 0;
      for (DType d : dts) {
        if (d == DType::I32 || d == DType::I64) ++ints;
        else if (d != DType::F32) return false;
      }
      return ints <= 1;
    }
    case Rule::Rotary:
      return dts.size() >= 3 && dts.size() <= 4 && dts[0] == DType::F32 && dts[1] == DType::F32 &&
             dts[2] == DType::F32 && (dts.size() == 3 || dts[3] == DType::I64);
  }
  return false;
}

std::string cudaKernelDTypesText(const std::string& opType) {
  auto it = table().find(opType);
  if (it == table().end()) return "";
  std::string s;
  for (size_t i = 0; i < it->second.set.size(); ++i)
    s += (i ? "," : "") + std::string(dtypeName(it->second.set[i]));
  switch (it->second.rule) {
    case Rule::AllF32: return s;
    case Rule::SameOf: return s + " (all the same)";
    case Rule::FirstOf: return s + " (data; i32/i64 shape operands)";
    case Rule::Where: return "bool, " + s;
    case Rule::Dropout: return s + " (data; f32/f64 ratio, bool training_mode, f32/i64 counter)";
    case Rule::Labels: return s + " (labels i32,i64)";
    case Rule::Resize: return s + " (data; f32/f64 roi and scales, i64 sizes)";
    case Rule::Boxes: return s + " (boxes, scores, thresholds; i64 max_output_boxes_per_class)";
    case Rule::Recurrent: return s + " (sequence_lens refused)";
    case Rule::Rotary: return s + " (X, cos_cache, sin_cache; i64 position_ids)";
  }
  return s;
}

}  // namespace tandem

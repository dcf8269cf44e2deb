// The shape-function table (ONNX name → shape function, from runtime/core/OpTable.def) and the
// public inferResultTypes dispatcher.
#include <algorithm>
#include <map>

#include "compiler/shapes/ShapeFns.h"
#include "runtime/CheckedMath.h"

namespace tandem {
namespace {

using shapes::ShapeFn;

// ONNX name -> shape function, from the op table's shapeFn column.
const std::map<std::string, ShapeFn>& opTable() {
  using namespace shapes;
  static const std::map<std::string, ShapeFn> table = {
#define TANDEM_OP(Name, since, shapeFn, work, flops, flags) {#Name, shapeFn},
#include "runtime/core/OpTable.def"
  };
  return table;
}

// checkTensorSize for a shape whose dims are all known (unknown dims are sized at run time);
// "" when fine or not fully known. A negative dim other than unknown is left to the shape
// function, whose message names the operand.
std::string checkKnownSize(const std::vector<int64_t>& dims, DType t) {
  for (int64_t d : dims)
    if (d < 0) return "";
  if (t == DType::Undefined) return "";
  return checkTensorSize(dims, (int64_t)dtypeSize(t), dtypeName(t));
}

}  // namespace

std::string inferResultTypes(const std::string& opType, const std::vector<OperandInfo>& operands,
                             const AttrMap& attrs, size_t numResults,
                             std::vector<ResultInfo>* results) {
  const auto& table = opTable();
  auto it = table.find(opType);
  if (it == table.end()) return "unknown op '" + opType + "' (not a tandem op)";
  // Sizes first: a shape function may then multiply an operand's known dims without overflow,
  // and a result no memory can hold is refused here, naming it, instead of at allocation.
  for (size_t i = 0; i < operands.size(); ++i)
    if (std::string e = checkKnownSize(operands[i].dims, operands[i].dtype); !e.empty())
      return "input " + std::to_string(i) + " has " + e;
  results->assign(numResults, ResultInfo{});
  shapes::Ctx ctx{opType, operands, attrs, numResults, results};
  std::string err = it->second(ctx);
  for (size_t i = 0; err.empty() && i < results->size(); ++i)
    if (std::string e = checkKnownSize((*results)[i].dims, (*results)[i].dtype); !e.empty())
      err = "result " + std::to_string(i) + " would have " + e;
  if (!err.empty()) results->clear();
  return err;
}

const std::vector<int>& shapeOperandPositions(const std::string& opType) {
  // Opset 13-18 definitions. Axes inputs count: they pick which dims a result has.
  static const std::map<std::string, std::vector<int>> table = {
      {"Reshape", {1}},                // shape
      {"Expand", {1}},                 // shape
      {"Tile", {1}},                   // repeats
      {"ConstantOfShape", {0}},        // input (the shape)
      {"Slice", {1, 2, 3, 4}},         // starts, ends, axes, steps
      {"Pad", {1, 3}},                 // pads, axes (18)
      {"Squeeze", {1}},                // axes
      {"Unsqueeze", {1}},              // axes
      {"Split", {1}},                  // split (sizes)
      {"ReduceSum", {1}},              // axes (13); the others from 18
      {"ReduceMean", {1}},
      {"ReduceMax", {1}},
      {"ReduceMin", {1}},
      {"ReduceProd", {1}},
      {"ReduceL1", {1}},
      {"ReduceL2", {1}},
      {"ReduceLogSum", {1}},
      {"ReduceLogSumExp", {1}},
      {"ReduceSumSquare", {1}},
      {"Range", {0, 1, 2}},            // start, limit, delta
      {"HannWindow", {0}},             // size (17)
      {"HammingWindow", {0}},
      {"BlackmanWindow", {0}},
      {"Resize", {1, 2, 3}},           // scales (10) / roi, scales, sizes (11+)
      {"Upsample", {1}},               // scales
      {"TopK", {1}},                   // k
      {"Loop", {0, 1}},                // M, cond: the stacked scan outputs' length
      // Ops whose result sizes are computed from their data (runtime/DataDependent.h).
      {"NonZero", {0}},                // X
      {"Compress", {1}},               // condition
      {"Unique", {0}},                 // X
      {"NonMaxSuppression", {0, 1, 2, 3, 4}},
      {"OneHot", {1}},                 // depth
      {"CenterCropPad", {1}},          // shape
      {"Col2Im", {1, 2}},              // image_shape, block_shape
      {"MaxUnpool", {2}},              // output_shape
      {"DFT", {1}},                    // dft_length
      {"MelWeightMatrix", {0, 1}},     // num_mel_bins, dft_length
      {"STFT", {1, 3}},                // frame_step, frame_length
      {"AffineGrid", {1}},             // size
      {"HannWindow", {0}},             // size
      {"HammingWindow", {0}},
      {"BlackmanWindow", {0}},
  };
  static const std::vector<int> none;
  auto it = table.find(opType);
  return it == table.end() ? none : it->second;
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

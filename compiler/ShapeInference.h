// Result-type inference for every tandem op (ONNX opset-17 semantics), free of MLIR so the
// dialect, the GraphBuilder, the importer and tests share one shape function per op.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/Attr.h"
#include "runtime/DType.h"
#include "runtime/Tensor.h"

namespace tandem {

/// kUnknownDim marks a dimension not known at compile time (a symbolic batch, say).
constexpr int64_t kUnknownDim = -1;

/// What inference knows of one operand. `present` is false for a skipped optional input.
/// `value` is non-null when the operand is a constant (needed for shape operands such as
/// Reshape's shape, Slice's starts, Expand's shape).
struct OperandInfo {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;  // rank = dims.size(); entries >= 0 or kUnknownDim
  bool present = true;
  const Tensor* value = nullptr;
};

struct ResultInfo {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
};

/// Infers the types of the `numResults` results of op `opType` (ONNX name, e.g. "Conv").
/// Returns "" on success, otherwise one sentence naming the reason, e.g.
/// "input 1 (W) has 64 input channels but X has 3" — the caller adds the op's location.
/// Dims that cannot be known (non-constant shape operand, unknown input dim) are kUnknownDim;
/// the rank must always be known (an unknown rank is an error naming the operand).
/// Ops and semantics: ONNX opset 17 for the op list in docs (isKnownOp).
std::string inferResultTypes(const std::string& opType, const std::vector<OperandInfo>& operands,
                             const AttrMap& attrs, size_t numResults,
                             std::vector<ResultInfo>* results);

/// True if `opType` is one of the tandem ops (ONNX names).
bool isKnownOp(const std::string& opType);
/// All tandem op types, sorted.
const std::vector<std::string>& knownOps();

/// The operand positions of ONNX op `opType` whose values (not only shapes) determine the
/// shapes of its results: shape operands, e.g. {1} for Reshape (shape), {1, 2, 3, 4} for Slice
/// (starts, ends, axes, steps), {0} for ConstantOfShape. From the operator definitions of
/// ONNX opsets 13-18, including ops Tandem does not import (Range, Resize, TopK, OneHot, ...),
/// so an ONNX graph can be read before import. Empty for ops with none (Gather's indices, say,
/// set the result's shape by their shape, not their values).
const std::vector<int>& shapeOperandPositions(const std::string& opType);

/// ONNX multidirectional (numpy) broadcasting of two shapes; "" on success.
std::string broadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                            std::vector<int64_t>* out);

}  // namespace tandem

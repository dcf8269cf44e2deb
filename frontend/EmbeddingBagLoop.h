// PyTorch's nn.EmbeddingBag (and F.embedding_bag) as torch.onnx writes it: a Loop over the bags
// whose body slices the indices between two offsets, gathers those weight rows and reduces
// them (torch/onnx/symbolic_opset11.py, embedding_bag). Run as a Loop, every bag costs a body
// plan's dispatch (about 6 us here for a bag of three rows); the importer instead builds one
// tandem EmbeddingBag op (compiler/TandemOps.td) from what this match returns. MLIR-free: it
// reads the ONNX protos only.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "runtime/Tensor.h"

namespace onnx {
class NodeProto;
}

namespace tandem {

/// The outer values a matched Loop reads, by name, and its reduction.
struct EmbeddingBagLoop {
  std::string tripCount;         // the Loop's M: the bag count, an i64 scalar
  std::string weight;            // [V, D], gathered along axis 0
  std::string indices;           // [L], sliced along axis 0
  std::string starts, ends;      // bag m is indices[starts[m] : ends[m]]
  std::string perSampleWeights;  // [L], "" when the body multiplies by none
  std::string mode;              // "sum", "mean" or "max" (ReduceSum, ReduceMean, ReduceMax)
};

/// `outerConstant(name)` gives the value of an outer-scope name when it is a constant, else
/// nullopt.
using OuterConstantFn = std::function<std::optional<Tensor>(const std::string&)>;

/// Whether Loop node `loop` is exactly that form, every iteration of which is independent:
/// inputs (M, cond) with cond absent or constant true, no loop-carried value, and a body whose
/// condition stays true (it passes its cond through, by Identity or Cast to bool, or returns a
/// constant true) and whose one scan output is
///   Reduce{Sum,Mean,Max}(Gather(weight, Slice(indices, s, e, [0])) [* Unsqueeze(Slice(psw,
///   s, e, [0]), [1])], axes [0], keepdims 0),  s = Unsqueeze(Gather(starts, i), [0]),
///   e = Unsqueeze(Gather(ends, i), [0]),
/// where i is the iteration number and weight, indices, starts, ends and psw are outer values
/// (shape operands constant, in the attribute or the input form of the node's opset). Other
/// body nodes are allowed only when nothing the outputs need reads them. Nothing is checked of
/// the outer values' types: the caller checks those.
std::optional<EmbeddingBagLoop> matchEmbeddingBagLoop(const onnx::NodeProto& loop,
                                                      const OuterConstantFn& outerConstant);

}  // namespace tandem

// Models of opsets 18-25 (ONNX 1.13 to 1.20): which ops changed after opset 17, and whether
// Tandem's opset-17 op still means the same. Tandem's dialect holds opset-17 ops; the importer
// takes a newer node as one of them where the change only added dtypes Tandem does not have
// (float8, int4, bfloat16 on more ops, strings), or attributes the node leaves at their
// defaults; OnnxImporter::normalise rewrites the changes it knows the opset-17 form of (axes
// inputs of the reductions, Split's num_outputs, Pad's axes, DFT's axis input, GridSample's
// mode names, GroupNormalization-18's per-group scale and bias). Sources: onnx/defs/operator_sets.h and docs/Changelog.md of ONNX.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace onnx {
class NodeProto;
}

namespace tandem {

/// The newest opset of the default domain the importer accepts.
constexpr int64_t kNewestOpset = 25;

/// The version of op `opType` in force at `opset` (18..kNewestOpset) when it is newer than its
/// opset-17 definition, else 0 (unchanged since opset 17, or an op new after 17, which the
/// op table answers for).
int newerOpVersion(const std::string& opType, int64_t opset);

/// The opset that introduced op `opType` when that is later than 17 (Attention: 23, Swish: 24),
/// else 0. A model of an earlier opset cannot use it (ONNX's checker and ONNX Runtime refuse it).
int opsetIntroducing(const std::string& opType);

/// "" when node `n` of a model of opset `opset` (> 17) means what Tandem's opset-17 op (after
/// normalise's rewrites) computes; else why not, naming the version and the attribute
/// ("AveragePool-19: attribute dilations [2, 2] is not supported (only 1s)").
std::string checkNewerOpsetNode(const onnx::NodeProto& n, int64_t opset);

/// The attributes op `opType` gained after opset 17 up to its version at `opset`, which the
/// opset-17 op does not have: once checkNewerOpsetNode has accepted their values (defaults, or
/// values that only concern dtypes Tandem lacks), the importer drops them.
std::vector<std::string> attributesAddedAfter17(const std::string& opType, int64_t opset);

}  // namespace tandem

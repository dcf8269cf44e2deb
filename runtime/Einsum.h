// Einsum-12 equations read against operand shapes: which label each operand dim carries, the
// result's labels and every label's extent. Shared by the shape function and the CPU kernel.
// MLIR-free.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

/// Labels are ints: 'a'..'z' are 0..25, 'A'..'Z' 26..51, and the dims an ellipsis stands for
/// are 52.. (right-aligned across operands, numpy broadcasting: an operand with fewer ellipsis
/// dims takes the last ones).
struct EinsumSpec {
  std::vector<int64_t> extent;                 // per label; -1 unknown; 0 for unused labels
  std::vector<bool> used;                      // per label
  std::vector<std::vector<int>> inputLabels;   // per operand, per dim (repeats: a diagonal)
  std::vector<int> outputLabels;               // per result dim
};

/// Parses `equation` ("ij,jk->ik", "...ii->...i", implicit "ij,jk": the labels used once, in
/// alphabetical order, after the ellipsis dims) for operands of the given shapes (dims >= 0 or
/// -1 for unknown). A label's extents must agree across operands, except that an extent of 1
/// broadcasts. Returns "" or one sentence: a bad character, a second ellipsis, an operand count
/// or rank that does not match its term, a result label no operand has, disagreeing extents.
std::string parseEinsum(const std::string& equation, const std::vector<std::vector<int64_t>>& shapes,
                        EinsumSpec* spec);

}  // namespace tandem

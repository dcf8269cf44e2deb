// The ops whose result shapes depend on operand values (NonZero-13, Compress-11, Unique-11,
// NonMaxSuppression-11): one implementation of each selection, read by the compiler's shape
// functions (which can size the results only when those operands are constants, since plans
// and arenas need static shapes) and by the CPU kernels (which check at run time that the
// values give the planned shape, or, given a result type with an unknown dim, size the
// result themselves: a dynamic region, runtime/DynamicRegion.h). MLIR-free.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace tandem {

/// Whether ONNX op `opType`'s result size is counted from its data: NonZero, Compress, Unique,
/// NonMaxSuppression. With computed data the compiler runs such an op, and what reads it, in a
/// dynamic region, so that data need not be a constant of the plan; there, its CPU kernel
/// sizes its results, so the data is read once.
bool sizeCountedFromData(const std::string& opType);

/// NonZero: the number of elements of `x` (any dtype but f16) that are not zero.
int64_t countNonZero(const Tensor& x);

/// Compress and Unique: the shape of `n` slices selected along `axis` of `x`, or a 1-D `n` when
/// axis < 0 (without an axis both flatten). n may be unknown (negative).
Shape selectedShape(const Shape& x, int64_t axis, int64_t n);

/// Compress: the number of true entries among the first `limit` of the bool `condition`.
int64_t countTrue(const Tensor& condition, int64_t limit);

/// Unique-11 over `x` (any dtype but f16): the unique elements of the flattened input, or
/// with `axis` >= 0 the unique slices along that (normalised) axis. `first[k]` is the slice
/// index of unique entry k's first occurrence, in output order: ascending (lexicographic over
/// the slice's elements, NaN last) when `sorted`, else by first occurrence. `inverse[i]` is the
/// unique entry of slice i, `counts[k]` how often entry k occurs.
struct UniqueResult {
  std::vector<int64_t> first, inverse, counts;
};
Status uniqueSlices(const Tensor& x, int64_t axis, bool sorted, UniqueResult* out);

/// NonMaxSuppression-11. boxes f32 [batches, n, 4] (corners y1,x1,y2,x2 in either order, or
/// center_point_box=1: xc,yc,w,h); scores f32 [batches, classes, n]. Per batch and class, boxes
/// with score > scoreThreshold (when given) are taken in descending score order (ties: lower
/// index first), each kept unless its IoU with a box already kept exceeds iouThreshold, at most
/// maxPerClass of them (0 keeps none). `selected` gets (batch, class, box) triples, flattened,
/// batch-major then class-major. Error when the shapes do not fit. Time: O(n log n + n * kept)
/// per batch and class, the IoU tests against the kept boxes in vectorisable blocks.
Status nonMaxSuppression(const Tensor& boxes, const Tensor& scores, int64_t maxPerClass,
                         float iouThreshold, bool hasScoreThreshold, float scoreThreshold,
                         bool centerPointBox, std::vector<int64_t>* selected);

}  // namespace tandem

// Constant folding of single tandem ops: Shape of a static-shaped value, Gather of static dims
// of a Shape, and any op whose
// operands are all constants, evaluated with its CPU reference kernel. Shared by
// --tandem-canonicalize (the whole graph) and the ONNX importer (shape subgraphs such as
// Shape -> Size -> Sub -> ConstantOfShape -> Concat -> Reshape, whose values a later op's
// shape function needs while the graph is being built).
#pragma once
#include <string>

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/PatternMatch.h"

namespace tandem {

/// Whether `v` is made by a tandem.constant or tandem.none: an operand folding may read (an
/// absent optional operand counts).
bool isConstantOrNone(mlir::Value v);

/// Replaces ONNX Shape-15 `op` (start/end attributes clamped as the spec says) by an i64
/// tandem.constant when its input's shape is static; `replacement` (optional) gets the new
/// value. Returns false, IR untouched, when the shape is not static.
bool foldShapeOp(mlir::RewriterBase& rewriter, mlir::Operation* op,
                 llvm::SmallVectorImpl<mlir::Value>* replacement = nullptr);

/// Replaces a Gather (axis 0) of an unfolded Shape-15 by an i64 tandem.constant when every dim
/// it selects is static: Gather(Shape(x), 1) of x: f32[?, 1] is 1, the test exporters write
/// before squeezing a dim ("if x.shape[1] == 1"). The indices must be a constant i32/i64 scalar
/// or 1-D (negative counts from the end). `replacement` (optional) gets the new value. Returns
/// false, IR untouched, otherwise (a selected dim unknown, an index out of range).
bool foldGatherOfShape(mlir::RewriterBase& rewriter, mlir::Operation* op,
                       llvm::SmallVectorImpl<mlir::Value>* replacement = nullptr);

/// Evaluates `op` (ONNX type `onnxType`), whose operands are all tandem.constant or tandem.none,
/// with its CPU reference kernel and replaces it by tandem.constant results (`replacements`,
/// optional, gets them in result order). Returns false, IR untouched, when a result type is not
/// static, the results would hold more than max(limit, elements of the inputs) elements, or no
/// CPU kernel takes the op. Returns failure, after an error at the op's location prefixed by
/// `who` ("tandem-canonicalize"), when a result's size is invalid or the kernel fails.
mlir::FailureOr<bool> foldWithCpuKernel(mlir::RewriterBase& rewriter, mlir::Operation* op,
                                        const std::string& onnxType, int64_t limit,
                                        llvm::StringRef who,
                                        llvm::SmallVectorImpl<mlir::Value>* replacements = nullptr);

}  // namespace tandem

// Building and reading tandem ops generically by ONNX op type: used by the ONNX importer, the
// GraphBuilder, passes and plan emission, so op-specific knowledge stays in ODS + shape functions.
#pragma once
#include <string>
#include <vector>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "runtime/Attr.h"
#include "runtime/Kernel.h"
#include "runtime/Tensor.h"

namespace tandem {

/// Creates the tandem op for ONNX op type `onnxType` (e.g. "Conv" -> tandem.conv) at `loc`.
/// `operands` are in ONNX positional order; a null mlir::Value is a skipped optional input
/// (trailing ones are dropped, inner ones become a tandem.none value). `attrs` use ONNX names
/// with MLIR attribute kinds: i64 IntegerAttr (INT), f32 FloatAttr (FLOAT), StringAttr
/// (STRING), ArrayAttr of i64/f32/string (INTS/FLOATS/STRINGS), DenseElementsAttr (TENSOR).
/// Result types come from inferResultTypes (compiler/ShapeInference.h); on failure an error
/// diagnostic is emitted at `loc` ("Conv: input 1 (W) ...") and failure returned.
mlir::FailureOr<mlir::Operation*> createTandemOp(mlir::OpBuilder& b, mlir::Location loc,
                                                 llvm::StringRef onnxType,
                                                 llvm::ArrayRef<mlir::Value> operands,
                                                 llvm::ArrayRef<mlir::NamedAttribute> attrs,
                                                 unsigned numResults = 1);

/// Creates a tandem.constant holding `t` (copied) at `loc`.
mlir::Value createConstant(mlir::OpBuilder& b, mlir::Location loc, const Tensor& t);

/// ONNX op type of a tandem op ("Conv" for tandem.conv), or "" for a non-tandem op.
std::string onnxOpType(mlir::Operation* op);

/// Attributes of a tandem op as the runtime sees them (ONNX names; discardable attributes such
/// as `device` and `placement_reason` left out).
AttrMap toAttrMap(mlir::Operation* op);

/// Conversions between runtime tensors and MLIR dense elements attributes (a copy each way).
mlir::DenseElementsAttr tensorToAttr(mlir::MLIRContext* ctx, const Tensor& t);
Tensor attrToTensor(mlir::DenseElementsAttr a);

/// dtype <-> MLIR element type (f32, f64, i32, i64, i1 for bool, ui8, i8).
mlir::Type dtypeToMlir(mlir::MLIRContext* ctx, DType t);
DType mlirToDType(mlir::Type t);  // Undefined when not representable
/// A value's dtype and shape as a KernelContext states them (a dynamic dim is -1); a value that
/// is not a ranked tensor (an absent operand) gives the default, not-present TensorType.
TensorType tensorTypeOf(mlir::Value v);

/// If `v` is produced by tandem.constant, its value; otherwise nullptr-like empty optional.
bool getConstantValue(mlir::Value v, Tensor* out);

}  // namespace tandem

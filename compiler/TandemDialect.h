// The tandem dialect and its ops (generated from TandemOps.td), plus the shared type inference
// every ONNX op's InferTypeOpInterface calls.
#pragma once
#include <optional>
#include <string>

#include "llvm/ADT/StringMap.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

// Generated from TandemOps.td; needs the MLIR headers above.
#include "compiler/TandemDialect.h.inc"

#define GET_OP_CLASSES
#include "compiler/TandemOps.h.inc"

namespace tandem {
class AttrMap;
}

namespace tandem::detail {

/// Converts the entries of `attributes` named in `attrNames` (the op's ONNX attributes) to an
/// AttrMap. Returns "" or "<onnxName>: attribute 'x' ..." when one has a kind ONNX lacks.
std::string toAttrMap(llvm::StringRef onnxName, mlir::DictionaryAttr attributes,
                      llvm::ArrayRef<llvm::StringRef> attrNames, AttrMap* out);

/// Infers the result types of ONNX op `onnxName` from its operand types, the values of
/// constant operands (tandem.constant) and its ONNX attributes (the entries of `attributes`
/// named in `attrNames`), via tandem::inferResultTypes. `numResults` = 0 means the op's natural
/// count (1; for Split num_outputs or the split input's length). Unknown dims (-1) become
/// ShapedType::kDynamic. On error, emits "<reason>" at `location` (when given) and fails.
mlir::LogicalResult inferOnnxOpTypes(llvm::StringRef onnxName,
                                     llvm::ArrayRef<llvm::StringRef> attrNames,
                                     mlir::MLIRContext* ctx, std::optional<mlir::Location> location,
                                     mlir::ValueRange operands, mlir::DictionaryAttr attributes,
                                     size_t numResults,
                                     llvm::SmallVectorImpl<mlir::Type>& inferred);

/// The verifier's check: infers as many results as `returnTypes` holds and requires each to be
/// shape-compatible (equal dims or one dynamic) with the same element type. On success
/// `returnTypes` is replaced by the more refined of each pair.
mlir::LogicalResult refineOnnxOpTypes(llvm::StringRef onnxName,
                                      llvm::ArrayRef<llvm::StringRef> attrNames,
                                      mlir::MLIRContext* ctx,
                                      std::optional<mlir::Location> location,
                                      mlir::ValueRange operands, mlir::DictionaryAttr attributes,
                                      llvm::SmallVectorImpl<mlir::Type>& returnTypes);

}  // namespace tandem::detail

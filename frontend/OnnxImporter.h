// ONNX → tandem dialect: one translation class, node by node (STYLE §8).
#pragma once
#include <map>
#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "runtime/Tensor.h"

namespace tandem {

struct ImportOptions {
  /// Graph inputs to import as constants with these values (by input name). The conformance
  /// runner and `tandem run` use it (specializeOnnxInputs, tools/driver/Driver.h) for integer
  /// shape operands fed as graph inputs (e.g. the `shape` input of ONNX's Reshape node tests),
  /// so plans keep static shapes.
  std::map<std::string, Tensor> constantInputs;
};

/// Imports an ONNX model file (opsets 7–25 of the default domain; opset 1–6 models are accepted
/// node by node where the op is unchanged up to opset 7 or has an exact rewrite, opset 18–25
/// ones where the op's newer definition means what its opset-17 one does, after the rewrites of
/// frontend/NewerOpsets.h, and a clear error names the node otherwise; the optimizer
/// updates Adagrad, Adam and Momentum from ai.onnx.preview.training-1). Initializers become
/// tandem.constant ops, graph inputs (minus initializers) the function's arguments, symbolic
/// dims (dim_param) are dynamic dims whose names are kept in the arg attribute
/// `tandem.dim_params`. Other opsets are normalised to opset-17 form (e.g. Squeeze-11's axes
/// attribute becomes a constant input, ReduceMean-18's constant axes input an attribute). Node locations are NameLoc(node name) or
/// "OpType_<index>" when unnamed.
/// Tensors stored as ONNX external data (`model.onnx` + `model.onnx_data`, how models over 2 GiB
/// are saved) are read from files next to `path` first (loadExternalData, frontend/OnnxTensor.h);
/// importOnnxBytes has no directory to read them from and refuses them, naming the tensor.
/// Errors (returned as null module, *error set, one line): unreadable/corrupt file, unsupported
/// opset, unknown op ("node 'x' (Foo): unsupported op type 'Foo'"), missing initializer/input,
/// cycle, shape mismatch (from the op's shape function).
mlir::OwningOpRef<mlir::ModuleOp> importOnnxFile(mlir::MLIRContext* ctx, const std::string& path,
                                                 const ImportOptions& options, std::string* error);

/// Same, from bytes already in memory; `sourceName` is used in messages.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxBytes(mlir::MLIRContext* ctx, const std::string& bytes,
                                                  const std::string& sourceName,
                                                  const ImportOptions& options, std::string* error);

/// The op a deprecated ONNX op is imported as, when it has an exact opset-17 equivalent
/// (Scatter -> ScatterElements, Upsample -> Resize); `onnxOpType` itself otherwise.
const std::string& onnxOpset17Name(const std::string& onnxOpType);

}  // namespace tandem

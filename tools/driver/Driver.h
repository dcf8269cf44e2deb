// The in-process driver shared by the CLI, the conformance runner and examples:
// ONNX file -> tandem IR -> Plan -> Executable, with MLIR diagnostics turned into one Status.
#pragma once
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compiler/Compiler.h"
#include "frontend/OnnxImporter.h"
#include "runtime/Executable.h"
#include "runtime/Status.h"
#include "tools/driver/TensorFiles.h"  // test-data I/O and comparison, for the driver's users

namespace tandem {

/// Imports `path` (ONNX) and compiles it to a Plan. Errors: one or more lines
/// "<where>: error: <reason>" (import errors name the file and node, compile errors the op
/// location). Compile notes are appended to result->notes.
Status compileOnnxFile(const std::string& path, const ImportOptions& importOptions,
                       const CompileOptions& compileOptions, CompileResult* result);

/// Compiles an already-built module (GraphBuilder output).
Status compileModuleToPlan(mlir::ModuleOp module, const CompileOptions& compileOptions,
                           CompileResult* result);

}  // namespace tandem

namespace tandem {
/// Names of an ONNX model's graph inputs that are not initializers, in order.
Status onnxGraphInputs(const std::string& path, std::vector<std::string>* names);

/// The graph inputs (not initializers) of ONNX model `path` whose values reach a shape operand
/// (shapeOperandPositions: Reshape's shape, Slice's starts, ...; not the data of the ops of
/// sizeCountedFromData, runtime/DataDependent.h) along the graph. Values flow
/// through every node except Shape and Size, whose results depend on their input's shape only:
/// token ids feeding an embedding Gather reach no shape operand even when the model takes
/// Shape of the embeddings. Errors: unreadable file, not an ONNX model.
Status onnxShapeOperandInputs(const std::string& path, std::set<std::string>* names);

/// Specialises the compile of ONNX model `path` to `given` inputs (onnxGraphInputs order; empty
/// for none), as `tandem run`, `tandem bench` and the conformance runner do. A tensor (any
/// dtype: Resize's scales are f32, Range's start/limit/delta may be) fed to an input that
/// reaches a shape operand (onnxShapeOperandInputs) becomes a constant of the plan (importOptions->constantInputs), so shapes stay static;
/// every other given input
/// stays a run-time input, binds that input's shape (compileOptions->inputShapes) and is
/// appended to `runtimeInputs`, in order. `folded` (optional) gets the constants' names.
/// Errors: unreadable model, a count of given inputs other than the model's.
Status specializeOnnxInputs(const std::string& path, const std::vector<Tensor>& given,
                            ImportOptions* importOptions, CompileOptions* compileOptions,
                            std::vector<Tensor>* runtimeInputs, std::vector<std::string>* folded);
}  // namespace tandem

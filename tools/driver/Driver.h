// The in-process driver shared by the CLI, the conformance runner and examples:
// ONNX file -> tandem IR -> Plan -> Executable, with MLIR diagnostics turned into one Status.
#pragma once
#include <memory>
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
}  // namespace tandem

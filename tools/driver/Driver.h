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

namespace tandem {

/// Imports `path` (ONNX) and compiles it to a Plan. Errors: one or more lines
/// "<where>: error: <reason>" (import errors name the file and node, compile errors the op
/// location). Compile notes are appended to result->notes.
Status compileOnnxFile(const std::string& path, const ImportOptions& importOptions,
                       const CompileOptions& compileOptions, CompileResult* result);

/// Compiles an already-built module (GraphBuilder output).
Status compileModuleToPlan(mlir::ModuleOp module, const CompileOptions& compileOptions,
                           CompileResult* result);

/// Reads input_0.pb, input_1.pb, ... (stops at the first missing index) from `dir`.
/// Errors: `dir` missing or empty of input_0.pb, unreadable/corrupt tensor files.
Status readTensorDir(const std::string& dir, const std::string& prefix,
                     std::vector<Tensor>* tensors, std::vector<std::string>* names);

/// Writes a file atomically: to "<path>.tmp.<pid>" then rename. On error nothing is left.
Status writeFileAtomic(const std::string& path, const std::string& bytes);

/// Comparison of an output with its reference, ONNX backend-test style:
/// pass iff |a-b| <= atol + rtol*|b| elementwise (NaN equal to NaN) and shapes/dtypes agree.
struct Comparison {
  bool pass = false;
  double maxAbsError = 0;
  double maxRelError = 0;
  std::string reason;  // when !pass
};
Comparison compareTensors(const Tensor& actual, const Tensor& expected, double atol, double rtol);

/// Sum of elements as double (bool and ints included): a cheap fingerprint for printing.
double checksum(const Tensor& t);

}  // namespace tandem

namespace tandem {
/// Names of an ONNX model's graph inputs that are not initializers, in order.
Status onnxGraphInputs(const std::string& path, std::vector<std::string>* names);
}  // namespace tandem

// The placement log's writers: one line per op and per copy, a summary, the estimates, as text,
// JSON (schema in compiler/PlacementLog.md) and Graphviz DOT. Plan emission
// (compiler/pipeline/EmitPlan.cpp) feeds it each constant, step and copy of the final IR in plan
// order, then calls finish().
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "compiler/Compiler.h"
#include "compiler/TandemDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace tandem {

class PlacementLogWriter {
 public:
  /// `module`: the placed module; its estimates (tandem.placement_estimates, copy estimates,
  /// devices) are read from it.
  explicit PlacementLogWriter(mlir::ModuleOp module) : module_(module) {}
  /// A constant of `bytes` bytes on `device` (counted per device in the JSON).
  void addConstant(const std::string& device, int64_t bytes);
  /// A variable (resident state, training) of `bytes` bytes on `device`: one line each, and
  /// counted per device in the summary and the JSON ("variables").
  void addVariable(const std::string& name, const std::string& device, int64_t bytes);
  /// Variable `name`'s update of `bytes` bytes: written into the variable in place, or copied
  /// into it after each run; the summary's "variables:" line totals both.
  void addVariableUpdate(const std::string& name, int64_t bytes, bool inPlace);
  /// A graph input or output crossing the run boundary (host memory <-> its device): the
  /// summary's per-run bytes in and out.
  void addRunInput(const std::string& name, int64_t bytes);
  void addRunOutput(const std::string& name, int64_t bytes);
  /// A transfer step: `bytes` moved, `location` the step's.
  void addCopy(CopyOp copy, int64_t bytes, const std::string& location);
  /// A kernel step named `name` (ONNX type `opType`) on `device`: one line, or one per member
  /// op of a tandem.fused, each saying which group it runs in.
  void addStep(mlir::Operation* op, const std::string& name, const std::string& opType,
               const std::string& device, const std::string& location);
  /// Writes result->placementLogText, placementLogJson and placementLogDot. `peak` and
  /// `unplanned`: arena bytes per device (planned peak, sum of all intermediates).
  void finish(const std::string& modelName, const std::map<std::string, int64_t>& peak,
              const std::map<std::string, int64_t>& unplanned, CompileResult* result);

 private:
  void logOp(mlir::Operation* op, const std::string& name, const std::string& opType,
             const std::string& device, const std::string& location, const std::string& group);
  static std::string placedValueName(mlir::Value v);
  double copyEstimate(const std::string& value, const std::string& to) const;
  static std::string dotNameOf(mlir::Value v);
  static std::string formatSeconds(double s);
  std::string dot() const;

  struct DotNode { std::string name, opType, device; };
  struct DotCopy { std::string value, from, to; int64_t bytes; };
  mlir::ModuleOp module_;
  std::vector<DotNode> dotNodes_;
  std::vector<DotCopy> dotCopies_;
  std::vector<std::pair<std::string, std::string>> dotEdges_;
  std::vector<std::string> logLines_;
  std::vector<nlohmann::json> ops_, copies_;
  std::set<std::string> duplicatedSeen_;  // device, name, location of duplicated ops logged
  std::map<std::string, int64_t> opsPerDevice_, kernelsAfter_, constantsPerDevice_, constantBytesPerDevice_;
  int64_t bytesMoved_ = 0;
  std::map<std::string, int64_t> variablesPerDevice_, variableBytesPerDevice_;
  int64_t updateBytesInPlace_ = 0, updateBytesCopied_ = 0;
  int64_t updatesInPlace_ = 0;
  std::vector<std::string> copiedBack_;
  std::vector<std::pair<std::string, int64_t>> runInputs_, runOutputs_;
};

}  // namespace tandem

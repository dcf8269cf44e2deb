// The compiler's public entry: run the pass pipeline on a tandem module and produce a Plan.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compiler/Plan.pb.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/Tensor.h"

namespace llvm { class raw_ostream; }

namespace tandem {

struct CompileOptions {
  /// Symbolic dims bound by name (ONNX dim_param), e.g. {"N", 32}.
  std::map<std::string, int64_t> dimBindings;
  /// Exact shapes per graph input name; wins over dimBindings.
  std::map<std::string, Shape> inputShapes;
  /// Binding for symbolic dims not named above (a note is emitted when it is used).
  int64_t defaultDim = 1;
  /// Devices the plan targets (DESIGN §2 DeviceSet), without models: {"cpu"}, {"cpu","cpu:1"}.
  std::vector<std::string> devices = {"cpu"};
  /// Target list with device models, e.g. "cpu,cuda:0=h100" (--target); wins over `devices`.
  /// Plans can target hardware that is not present.
  std::string target;
  /// Calibration profile JSON written by `tandem calibrate` (--profile); "" = built-in specs.
  std::string profilePath;
  /// Placement policy (--placement): cost (default), greedy, ort, cpu, gpu.
  std::string placementPolicy = "cost";
  /// User pins: node name -> device. Soft unless strictPlacement.
  std::vector<std::pair<std::string, std::string>> pins;
  bool strictPlacement = false;
  /// Run --tandem-fuse (fusion groups per device); off gives one kernel per op (--no-fuse).
  bool fuse = true;
  /// When non-null, the IR is printed here after every pass (--print-ir-after-all).
  llvm::raw_ostream* printIrAfterAll = nullptr;
};

struct CompileResult {
  plan::Plan plan;
  std::string placementLogText;  // one line per op + one per copy + a summary
  std::string placementLogJson;  // same content, JSON (schema in compiler/PlacementLog.md)
  std::string placementLogDot;   // Graphviz: ops coloured by device, copies as marked edges
  std::vector<std::string> notes;  // e.g. "symbolic dim 'N' bound to 1"
};

/// Runs verify → infer-shapes → canonicalize → place → insert-transfers → fuse → plan-memory →
/// emit-plan on `module` (mutated in place). On failure, errors have been emitted as MLIR
/// diagnostics on the ops' locations and failure is returned.
mlir::LogicalResult compileModule(mlir::ModuleOp module, const CompileOptions& options,
                                  CompileResult* result);

/// Registers the tandem dialect and the func dialect in `registry`-less contexts.
void loadTandemDialects(mlir::MLIRContext* ctx);

}  // namespace tandem

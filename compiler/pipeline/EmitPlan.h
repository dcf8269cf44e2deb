// Plan emission: the final, placed and memory-planned module -> plan::Plan + the placement log.
#pragma once
#include "compiler/Compiler.h"
#include "mlir/IR/BuiltinOps.h"

namespace tandem {

/// Writes result->plan, result->placementLogText and result->placementLogJson (also stored in
/// plan.placement_log_json) from `module`, which must have run --tandem-place and
/// --tandem-plan-memory. Value ids: @main's arguments first, then each op's results in op order
/// (constants included); tandem.none operands are -1. A tandem.dynamic_region's results are
/// written with -1 for the dims known only at run time (and 0 bytes). Errors (emitted on the
/// location): any other value with a dynamic dim, an op without a device or an arena offset. The log's JSON schema is in
/// compiler/PlacementLog.md.
mlir::LogicalResult emitPlan(mlir::ModuleOp module, CompileResult* result);

}  // namespace tandem

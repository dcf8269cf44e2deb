// Resident state for the training step: the step's state arguments become variables
// (tandem.variable) that stay on their device between runs, updated in place of being passed in
// and out, and each variable's readers and updates form one colocation group.
#pragma once
#include <string>

#include "mlir/IR/BuiltinOps.h"

namespace tandem::training {

/// The argument attribute buildLoss leaves on a parameter: its initializer's value (an
/// ElementsAttr), which becomes the variable's initial value.
inline constexpr const char* kInitialValueAttr = "tandem.initial_value";

/// After appendOptimizer. For @main(x, labels, state...) -> (loss, state_new...): every
/// argument after the first two whose tandem.name N has a result named `N_new` becomes a
/// variable: the argument gets tandem.variable = its initial value (kInitialValueAttr, else
/// zeros of its type), the result tandem.variable_update = N. Colocation: group G is the name of
/// the parameter the state belongs to (N for a parameter, P for a slot named `P.<slot>` of
/// parameter P, N itself otherwise, e.g. `step`); its members are every op that reads one of
/// the group's variables, the producer of each of their updates, and the ops whose node name
/// starts with `G/` (the optimizer's ops for P). Errors (on @main): a state argument with no
/// `N_new` result, a result paired twice.
mlir::LogicalResult makeStateResident(mlir::ModuleOp module);

/// Adds `group` to op's tandem.colocation groups (once).
void addToColocationGroup(mlir::Operation* op, const std::string& group);

}  // namespace tandem::training

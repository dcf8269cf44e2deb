// The plan loader's step verifier (issue 15: a plan is untrusted input): every step checked as
// the compiler checked its op, before any kernel is created or any arena allocated.
#pragma once
#include "compiler/Plan.pb.h"
#include "runtime/Status.h"

namespace tandem {

/// Verifies every step of `plan` in order; the first failure is returned as
/// "plan step N (OpType 'node name'): reason" (N counts from 0; the name is left out when the
/// step has none). Per step:
///  - ids: every input is -1 (an absent optional operand) or a value id, and an intermediate
///    input is written by an earlier step; every output is an intermediate that no other step
///    writes.
///  - ONNX ops (rows of runtime/core/OpTable.def; any other op type is refused): operand count,
///    operand dtypes, attributes and result types through the op's shape function
///    (compiler/shapes, the rules the compiler's verifier applies; MLIR-free). Constant
///    operands of up to 4096 elements count by their values (Reshape's shape, Slice's
///    starts, ...), as in the compiler. Each declared result must have the inferred dtype and
///    rank and every inferred dim; ops that keep their input's bytes (work kind Reshape:
///    Reshape, Flatten, Squeeze, ...) must also keep its element count.
///  - "Copy": one present input and one output of the same dtype and shape.
///  - "Fused": a body (Step.fused_body) whose members are ONNX ops reading the step's inputs or
///    earlier members, each verified as above with its result of the step's dtype and its
///    declared (or the step's output 0) shape, and one result member per step output of that
///    output's type.
/// Values themselves (dtype codes, dims, sizes, arena slots, constant bytes) are the loader's to
/// check (Executable::load binds them first); a value that is not sound is refused here too,
/// never read.
Status verifyPlanSteps(const plan::Plan& plan);

}  // namespace tandem

// The CUDA rules of --tandem-fuse (passes/FuseCuda.cpp): which ops placed on a cuda device run as
// one kernel of the CUDA backend (runtime/cuda/Fused.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"

namespace tandem {

/// One group the fuse pass turns into a tandem.fused: `members` in program order, the last the
/// root (where the tandem.fused goes); every member has one used result, except a
/// LayerNormalization root whose Mean/InvStdDev results are unused.
struct CudaFusionGroup {
  std::string kind;  // "gemm-epilogue", "add-layernorm" or "elementwise"
  llvm::SmallVector<mlir::Operation*> members;
};

/// The groups over the ops of `body` placed on cuda devices that are not yet in `grouped` (the
/// members found are added to it). Every group lies on one device and is convex; tandem.copy is
/// never a member. Producers kept out for a reason worth seeing get `fusion_refused`.
///   gemm-epilogue: an f32 Gemm/MatMul, then a bias Add ([N], one per group, none when Gemm has
///     a C), then Relu or tanh-Gelu: one cuBLASLt matmul with its epilogue.
///   layernorm: a same-shape Add feeding the X of a LayerNormalization (last-axis Scale/B, no
///     Mean/InvStdDev read): one block per row computing the sum and the normalisation; the sum
///     is an output too when it is read outside.
///   elementwise: chains of f32 element-wise ops of one shape (operands full-size or scalar):
///     one generated kernel, one pass over memory.
std::vector<CudaFusionGroup> formCudaFusionGroups(mlir::Block& body,
                                                  llvm::DenseSet<mlir::Operation*>& grouped);

/// Value predicates of the fusion rules, shared by the CPU (passes/Fuse.cpp, which defines them)
/// and CUDA rules.
namespace fusion {
/// A statically shaped f32 tensor.
bool isF32(mlir::Value v);
bool isConstant(mlir::Value v);  // made by tandem.constant
bool isNone(mlir::Value v);      // an absent optional operand (tandem.none)
/// Element count of a ranked tensor value (asserts a ranked tensor type).
int64_t numElementsOf(mlir::Value v);
/// Whether a Gemm/MatMul anchor may take a bias row: Gemm without C, or MatMul whose B is one
/// matrix (its batch folds into rows, so an [N] bias is one vector for the whole product, as
/// cuBLASLt's BIAS epilogue and oneDNN's matmul bias apply it).
bool anchorTakesBias(mlir::Operation* anchor);
/// The operand of the binary `op` (any type) other than `x` when it is a row of x's last axis:
/// f32, as many elements as that axis, every other dim 1 (a bias [N], [1, N], [1, 1, N]);
/// null otherwise, or when op's result is not of x's type.
mlir::Value lastAxisRowOperand(mlir::Operation* op, mlir::Value x);
/// `add` adds to `x` (the product) a bias row (lastAxisRowOperand of an Add).
bool isBiasAdd(mlir::Operation* add, mlir::Value x);
/// One op of an element-wise loop whose kernel evaluates the op table's rows with `loopFlag`
/// (kCpuLoop: the CPU loop; kCudaExpr: the generated CUDA kernel): f32 result, every operand
/// of the result's type or a scalar (so all body values share one shape and the loop needs no
/// broadcasting), Clip's bounds constant scalars (baked into the kernel), binary ops with two
/// operands.
bool loopFusible(mlir::Operation* op, uint32_t loopFlag);
}  // namespace fusion

/// True when no path leaves the set `in` (ops of one block) through non-members and comes back
/// to a member: the convexity every fusion group keeps (passes/Fuse.cpp, shared with the CUDA
/// rules).
bool fusionGroupIsConvex(const llvm::SmallPtrSetImpl<mlir::Operation*>& in);

}  // namespace tandem

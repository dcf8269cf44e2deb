// Reverse-mode gradient rules, one function per op type, built from ordinary tandem ops so the
// backward graph is placed, fused and planned like the forward one (MaxPool's uses the one
// backward op, MaxPoolGrad, where no forward composition is a single pass). The op table's kGradient
// rows (runtime/core/OpTable.def) say which ops have a rule; op_table_test checks that the table
// and findGradientRule agree. passes/Autodiff.cpp walks the graph and calls the rules.
#pragma once
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <string>
#include <vector>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

namespace tandem::autodiff {

/// Builds the ops of one rule by ONNX type at one location (the forward op's node name with
/// "/grad" appended), plus the shape bookkeeping the rules share. Shapes are static (the pass
/// checks that before any rule runs). The first failure (a shape function refusing an op, or a
/// rule's own error) is emitted as a diagnostic and sticks: later calls build nothing and return
/// a null Value, so a rule can be written straight through and checked once with failed().
class GradBuilder {
 public:
  GradBuilder(mlir::OpBuilder& b, mlir::Location loc) : b_(b), loc_(loc) {}

  /// Result 0 of a new `onnxType` op (null operands are not allowed: each is required).
  mlir::Value op(llvm::StringRef onnxType, llvm::ArrayRef<mlir::Value> operands,
                 llvm::ArrayRef<mlir::NamedAttribute> attrs = {});
  /// All `numResults` results of a new op (empty on failure).
  llvm::SmallVector<mlir::Value> opN(llvm::StringRef onnxType,
                                     llvm::ArrayRef<mlir::Value> operands,
                                     llvm::ArrayRef<mlir::NamedAttribute> attrs,
                                     unsigned numResults);

  mlir::NamedAttribute intAttr(llvm::StringRef name, int64_t v);
  mlir::NamedAttribute intsAttr(llvm::StringRef name, llvm::ArrayRef<int64_t> v);
  mlir::NamedAttribute floatAttr(llvm::StringRef name, double v);
  mlir::NamedAttribute strAttr(llvm::StringRef name, llvm::StringRef v);

  /// A 0-D constant `v` of float element type `et`.
  mlir::Value scalar(double v, mlir::Type et);
  /// A 1-D i64 constant (axes, shapes, pads, split sizes).
  mlir::Value ints(llvm::ArrayRef<int64_t> v);
  /// A constant of zeros of ranked type `t`.
  mlir::Value zeros(mlir::Type t);
  /// A constant of `values` with shape `shape` and float element type `et`.
  mlir::Value constant(llvm::ArrayRef<double> values, llvm::ArrayRef<int64_t> shape, mlir::Type et);

  // Arithmetic with ONNX broadcasting; `s` variants take a scalar in v's element type.
  mlir::Value add(mlir::Value a, mlir::Value b) { return op("Add", {a, b}); }
  mlir::Value sub(mlir::Value a, mlir::Value b) { return op("Sub", {a, b}); }
  mlir::Value mul(mlir::Value a, mlir::Value b) { return op("Mul", {a, b}); }
  mlir::Value div(mlir::Value a, mlir::Value b) { return op("Div", {a, b}); }
  mlir::Value neg(mlir::Value a) { return op("Neg", {a}); }
  mlir::Value mulS(mlir::Value a, double s);
  mlir::Value addS(mlir::Value a, double s);
  /// s - a.
  mlir::Value rsubS(double s, mlir::Value a);

  /// Reshape to `shape` (v itself when it already has it).
  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value v, llvm::ArrayRef<int64_t> perm);
  mlir::Value expand(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  /// ReduceSum over `axes` (keepdims as given).
  mlir::Value reduceSum(mlir::Value v, llvm::ArrayRef<int64_t> axes, bool keepdims);
  mlir::Value reduceMean(mlir::Value v, llvm::ArrayRef<int64_t> axes, bool keepdims);
  /// Undoes ONNX (right-aligned, numpy) broadcasting: sums `g` over the dims a value of shape
  /// `shape` was broadcast along, then reshapes to `shape`.
  mlir::Value reduceToShape(mlir::Value g, llvm::ArrayRef<int64_t> shape);

  /// Emits `message` at the location and marks the builder failed; returns failure.
  mlir::LogicalResult error(const llvm::Twine& message);
  bool failed() const { return failed_; }
  mlir::OpBuilder& builder() { return b_; }
  mlir::Location loc() const { return loc_; }

 private:
  mlir::OpBuilder& b_;
  mlir::Location loc_;
  bool failed_ = false;
};

/// Static dims of a ranked tensor value; its element type.
llvm::SmallVector<int64_t> shapeOf(mlir::Value v);
mlir::Type elementTypeOf(mlir::Value v);

/// One op's backward step. `dy[i]` is d loss / d result i, null where no gradient reaches
/// result i (at least one is non-null). `needed[i]` says whether operand i needs a gradient.
/// The rule sets dx[i] (dx has one null entry per operand) for each needed operand, with the
/// operand's type, or leaves it null where the op has no derivative in that operand (the pass
/// then reports that the operand cannot be differentiated). Failure: a diagnostic was emitted.
using GradientRule = mlir::LogicalResult (*)(GradBuilder& g, mlir::Operation* op,
                                             llvm::ArrayRef<mlir::Value> dy,
                                             llvm::ArrayRef<bool> needed,
                                             llvm::MutableArrayRef<mlir::Value> dx);

/// The rule for ONNX op type `onnxType`, or null when it has none.
GradientRule findGradientRule(llvm::StringRef onnxType);

/// Reverse-mode sweep over `forward` (ops in program order): `active` holds the values that
/// depend on what is differentiated; `grads` starts with the seeds (d y / d y) and receives, for
/// every active value reached, its gradient (contributions summed with Add). New ops are built
/// at `b`'s insertion point, which every forward value must dominate; their locations are
/// "<node>/grad". Failure (diagnostic emitted): an op with no rule ("no gradient for op 'X'
/// (node 'n')"), an operand it cannot differentiate, a dynamic shape.
mlir::LogicalResult reverseSweep(mlir::OpBuilder& b, llvm::ArrayRef<mlir::Operation*> forward,
                                 const llvm::DenseSet<mlir::Value>& active,
                                 llvm::DenseMap<mlir::Value, mlir::Value>& grads);

/// The ONNX op types that have a rule, sorted (op_table_test compares them with the table).
std::vector<std::string> gradientRuleOps();

}  // namespace tandem::autodiff

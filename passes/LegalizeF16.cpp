// --tandem-legalize-f16: run ops that have no f16 or bf16 kernel in f32, between casts, so an f16
// or bf16 model keeps its 16-bit inputs and outputs while most kernels exist only in f32; values
// stay f32 between such ops unless per-op-rounding asks for ONNX's rounding after every op
// (passes/Passes.td). (The flag keeps its f16 name; bf16 goes the same way.)
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "compiler/IrConventions.h"
#include "compiler/placement/KernelCapabilities.h"
#include "passes/Passes.h"

namespace tandem {
#define GEN_PASS_DEF_TANDEMLEGALIZEF16
#include "passes/Passes.h.inc"
}  // namespace tandem

namespace tandem {
namespace {

constexpr int64_t kOnnxFloat = 1;    // TensorProto.FLOAT
constexpr int64_t kOnnxFloat16 = 10; // TensorProto.FLOAT16
constexpr int64_t kOnnxBFloat16 = 16; // TensorProto.BFLOAT16

// Whether `t` is a tensor of f16 or bf16 (the 16-bit floats this pass widens).
bool isF16Tensor(mlir::Type t) {
  auto r = llvm::dyn_cast<mlir::RankedTensorType>(t);
  return r && (r.getElementType().isF16() || r.getElementType().isBF16());
}

// The Cast `to` code that narrows f32 back to `t`'s element type (f16 or bf16).
int64_t narrowCode(mlir::Type t) {
  return llvm::cast<mlir::RankedTensorType>(t).getElementType().isBF16() ? kOnnxBFloat16
                                                                         : kOnnxFloat16;
}

// Whether `op` reads an f16 or bf16 tensor that the CPU has no kernel for on these dtypes. The CPU is
// the reference: every DeviceSet has it, and an op it cannot run in f16 would otherwise be
// refused at placement when no other device takes it.
bool needsF32(mlir::Operation* op, const std::string& type) {
  bool anyF16 = false;
  std::vector<DType> dts;
  for (mlir::Value v : op->getOperands()) {
    auto r = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
    if (!r) continue;  // tandem.none: an absent optional input
    anyF16 |= isF16Tensor(r);
    dts.push_back(mlirToDType(r.getElementType()));
  }
  return anyF16 && !deviceKindSupports("cpu", type, dts);
}

// Ops whose f32 results are exactly f16 values when their float operands are: they move, pick
// or negate elements. After one of them the narrowing Cast rounds nothing, so a later op that
// widens the result again reads the f32 value directly (no Cast pair between, e.g., Relu and
// MaxPool); the numbers are the same.
bool isExactInF16(llvm::StringRef type) {
  static const char* kExact[] = {"Abs",     "Concat",    "Flatten", "Gather",    "Identity",
                                 "MaxPool", "Neg",       "Relu",    "Reshape",   "Slice",
                                 "Split",   "Squeeze",   "Transpose", "Unsqueeze"};
  for (const char* t : kExact)
    if (type == t) return true;
  return false;
}

mlir::FailureOr<mlir::Value> cast(mlir::OpBuilder& b, mlir::Location loc, mlir::Value v,
                                  int64_t to) {
  mlir::FailureOr<mlir::Operation*> c =
      createTandemOp(b, loc, "Cast", {v}, {b.getNamedAttr("to", b.getI64IntegerAttr(to))});
  if (mlir::failed(c)) return mlir::failure();
  return (*c)->getResult(0);
}

struct LegalizeF16Pass : public impl::TandemLegalizeF16Base<LegalizeF16Pass> {
  using TandemLegalizeF16Base::TandemLegalizeF16Base;

  void runOnOperation() override {
    mlir::func::FuncOp main = getMainFunc(getOperation());
    if (!main) return;
    mlir::OpBuilder b(&getContext());
    // f16/bf16 value -> the f32 value it was narrowed from, which widened readers use instead:
    // every widened op's result, or with per-op rounding only those of ops that round nothing
    // (isExactInF16).
    llvm::DenseMap<mlir::Value, mlir::Value> exactWide;
    // The op list is taken first: the casts this pass inserts are not visited.
    llvm::SmallVector<mlir::Operation*> ops;
    for (mlir::Operation& op : main.getBody().front()) ops.push_back(&op);
    for (mlir::Operation* op : ops) {
      if (!llvm::isa_and_present<TandemDialect>(op->getDialect()) ||
          llvm::isa<ConstantOp, NoneOp, CopyOp>(op))
        continue;
      std::string type = onnxOpType(op);
      if (!needsF32(op, type)) continue;
      // Operands: each f16 value is widened once per op (a constant's Cast folds in canonicalize).
      b.setInsertionPoint(op);
      for (mlir::OpOperand& use : op->getOpOperands()) {
        if (!isF16Tensor(use.get().getType())) continue;
        if (auto it = exactWide.find(use.get()); it != exactWide.end()) {
          use.set(it->second);
          continue;
        }
        mlir::FailureOr<mlir::Value> wide = cast(b, op->getLoc(), use.get(), kOnnxFloat);
        if (mlir::failed(wide)) return signalPassFailure();
        use.set(*wide);
      }
      // Re-inference refines the declared result types and refuses a contradiction, so the
      // f16 results are declared f32 first; inference then checks that the op computes f32.
      llvm::SmallVector<mlir::Type> before(op->getResultTypes());
      for (mlir::Value r : op->getResults())
        if (isF16Tensor(r.getType()))
          r.setType(llvm::cast<mlir::RankedTensorType>(r.getType()).clone(b.getF32Type()));
      if (mlir::failed(reinferResultTypes(op))) {
        op->emitError() << "tandem-legalize-f16: " << type
                        << " does not infer its result types on f32 operands";
        return signalPassFailure();
      }
      // Results that were f16 are f32 now (their type follows the operands): narrow them back so
      // every consumer, @main's results included, sees the f16 value it saw before.
      b.setInsertionPointAfter(op);
      for (auto [r, old] : llvm::zip(op->getResults(), before)) {
        if (!isF16Tensor(old) || isF16Tensor(r.getType())) continue;
        mlir::FailureOr<mlir::Value> narrow = cast(b, op->getLoc(), r, narrowCode(old));
        if (mlir::failed(narrow)) return signalPassFailure();
        r.replaceAllUsesExcept(*narrow, narrow->getDefiningOp());
        if (!perOpRounding || isExactInF16(type)) exactWide[*narrow] = r;
      }
    }
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createLegalizeF16Pass() { return std::make_unique<LegalizeF16Pass>(); }
std::unique_ptr<mlir::Pass> createLegalizeF16Pass(const TandemLegalizeF16Options& options) {
  return std::make_unique<LegalizeF16Pass>(options);
}

}  // namespace tandem

// --tandem-verify: is this module a tandem graph the rest of the pipeline can compile?
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "mlir/IR/Verifier.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"

namespace tandem {
#define GEN_PASS_DEF_TANDEMVERIFY
#include "passes/Passes.h.inc"
}  // namespace tandem

namespace tandem {
namespace {

// Element types of runtime tensors (DType). f16 and bf16 are, though few kernels take them: in
// the pipeline, --tandem-legalize-f16 runs the other ops in f32 between Casts.
bool isSupportedElementType(mlir::Type t) { return mlirToDType(t) != DType::Undefined; }

// "" when `t` is a type a tandem value may have; otherwise why not.
std::string checkType(mlir::Type t, bool allowNone) {
  if (llvm::isa<mlir::NoneType>(t)) return allowNone ? "" : "is a none value";
  auto ranked = llvm::dyn_cast<mlir::RankedTensorType>(t);
  if (!ranked) {
    if (llvm::isa<mlir::UnrankedTensorType>(t))
      return "has unknown rank; Tandem needs ranked tensors";
    return "is not a tensor";
  }
  if (!isSupportedElementType(ranked.getElementType())) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "has unsupported element type " << ranked.getElementType()
       << " (supported: bf16, f16, f32, f64, i1, i8, i16, i32, i64, ui8, ui16, ui32, ui64)";
    return os.str();
  }
  return "";
}

class VerifyPass : public impl::TandemVerifyBase<VerifyPass> {
 public:
  void runOnOperation() override {
    // 1. Run every op's own verifier (ODS constraints and result-type inference).
    // 2. Require func.func @main and no other top-level op.
    // 3. Inside @main: one block, only tandem ops and func.return.
    // 4. Every argument and result is a ranked tensor of a supported element type;
    //    tandem.none values feed only optional operands of ONNX ops.
    mlir::ModuleOp module = getOperation();
    if (mlir::failed(mlir::verify(module))) return signalPassFailure();

    mlir::func::FuncOp main = getMainFunc(module);
    if (!main) {
      module.emitError("tandem-verify: module has no func.func @main (the graph)");
      return signalPassFailure();
    }
    bool ok = true;
    for (mlir::Operation& op : module.getBody()->getOperations()) {
      if (&op == main.getOperation()) continue;
      op.emitError() << "tandem-verify: unexpected top-level op '" << op.getName()
                     << "'; a tandem module holds only func.func @main";
      ok = false;
    }
    if (main.isExternal() || !main.getBody().hasOneBlock()) {
      main.emitError("tandem-verify: @main must have a body of exactly one block");
      return signalPassFailure();
    }

    for (mlir::BlockArgument arg : main.getArguments()) {
      if (std::string why = checkType(arg.getType(), false); !why.empty()) {
        main.emitError() << "tandem-verify: input '" << valueName(arg) << "' " << why;
        ok = false;
      }
    }
    for (mlir::Operation& op : main.getBody().front()) {
      bool isTandem = llvm::isa_and_present<TandemDialect>(op.getDialect());
      if (!isTandem && !llvm::isa<mlir::func::ReturnOp>(op)) {
        op.emitError()
            << "tandem-verify: op '" << op.getName()
            << "' is not a tandem op; only tandem ops and func.return may appear in @main";
        ok = false;
        continue;
      }
      // Operand types were checked where the values are defined; only a none value may not
      // flow into a copy or the return.
      for (auto [i, v] : llvm::enumerate(op.getOperands())) {
        if (llvm::isa<mlir::NoneType>(v.getType()) && (!isTandem || llvm::isa<CopyOp>(op))) {
          op.emitError() << "tandem-verify: operand " << i << " is a none value";
          ok = false;
        }
      }
      if (llvm::isa<NoneOp>(op)) continue;
      for (auto [i, r] : llvm::enumerate(op.getResults())) {
        if (std::string why = checkType(r.getType(), false); !why.empty()) {
          op.emitError() << "tandem-verify: result " << i << " " << why;
          ok = false;
        }
      }
    }
    if (!ok) signalPassFailure();
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createVerifyPass() { return std::make_unique<VerifyPass>(); }

}  // namespace tandem

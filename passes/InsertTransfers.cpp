// --tandem-insert-transfers: one tandem.copy per (value, consumer device), shared by all the
// consumers on that device.
#include <map>
#include <string>

#include "compiler/TandemDialect.h"
#include "mlir/IR/Builders.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"

namespace tandem {
#define GEN_PASS_DEF_TANDEMINSERTTRANSFERS
#include "passes/Passes.h.inc"
}  // namespace tandem

namespace tandem {
namespace {

// Per result of @main that updates a variable (Variables.h): the variable's device.
std::map<unsigned, std::string> variableUpdateDevices(mlir::func::FuncOp main) {
  std::map<std::string, std::string> deviceOf;
  for (mlir::BlockArgument arg : main.getArguments())
    if (isVariableArg(arg)) deviceOf[valueName(arg)] = deviceOfValue(arg);
  std::map<unsigned, std::string> out;
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    if (auto name = main.getResultAttrOfType<mlir::StringAttr>(i, kVariableUpdateAttr))
      out[i] = deviceOf[name.str()];
  return out;
}

class InsertTransfersPass : public impl::TandemInsertTransfersBase<InsertTransfersPass> {
 public:
  void runOnOperation() override {
    // 1. Snapshot the values of @main: arguments, then each op's results in order.
    // 2. For each value, group its uses by the consumer's device; skip uses on the producer's
    //    device. func.return reads on the host (the device graph inputs arrive on): an output
    //    produced elsewhere gets its own copy back, the run-boundary D2H the placer charged.
    // 3. For each other device, in order of first use: a constant is cloned onto that device
    //    (weights are uploaded once at load, never copied per run); any other value gets one
    //    tandem.copy inserted right after the producer (after earlier copies, for arguments at
    //    the top of the body). All uses on that device are rewired to it.
    mlir::ModuleOp module = getOperation();
    mlir::func::FuncOp main = getMainFunc(module);
    if (!main) {
      module.emitError("tandem-insert-transfers: module has no func.func @main");
      return signalPassFailure();
    }
    mlir::MLIRContext* ctx = &getContext();
    mlir::Block& body = main.getBody().front();

    llvm::SmallVector<mlir::Value> values(main.getArguments().begin(), main.getArguments().end());
    for (mlir::Operation& op : body)
      if (!deviceOfOp(&op).empty()) values.append(op.result_begin(), op.result_end());

    // The host: where the graph inputs arrive (the place pass records it on each argument),
    // else the first target.
    std::string host;
    for (unsigned i = 0; i < main.getNumArguments() && host.empty(); ++i) {
      if (isVariableArg(main.getArgument(i))) continue;
      if (auto d = main.getArgAttrOfType<mlir::StringAttr>(i, kArgDeviceAttr)) host = d.str();
    }
    if (host.empty())
      if (auto devs = module->getAttrOfType<mlir::ArrayAttr>(kDevicesAttr); devs && !devs.empty())
        if (auto d = llvm::dyn_cast<mlir::StringAttr>(devs[0])) host = d.str();

    const std::map<unsigned, std::string> updateDevice = variableUpdateDevices(main);
    mlir::OpBuilder b(ctx);
    for (mlir::Value v : values) {
      std::string from = deviceOfValue(v);
      if (from.empty()) continue;
      // device -> its uses, in first-use order.
      llvm::SmallVector<std::pair<std::string, llvm::SmallVector<mlir::OpOperand*>>> byDevice;
      for (mlir::OpOperand& use : v.getUses()) {
        if (llvm::isa<CopyOp>(use.getOwner())) continue;  // already a transfer
        // A graph output goes to the host; a variable's update stays where the variable is.
        std::string to = host;
        if (!llvm::isa<mlir::func::ReturnOp>(use.getOwner())) to = deviceOfOp(use.getOwner());
        else if (auto it = updateDevice.find(use.getOperandNumber()); it != updateDevice.end()) to = it->second;
        if (to.empty() || to == from) continue;
        auto it = llvm::find_if(byDevice, [&](const auto& e) { return e.first == to; });
        if (it == byDevice.end()) {
          byDevice.push_back({to, {}});
          it = std::prev(byDevice.end());
        }
        it->second.push_back(&use);
      }
      if (byDevice.empty()) continue;
      // Deterministic order: consumers' program order, not use-list order.
      for (auto& [to, uses] : byDevice)
        llvm::sort(uses, [](mlir::OpOperand* a, mlir::OpOperand* c) {
          return a->getOwner()->isBeforeInBlock(c->getOwner());
        });
      llvm::sort(byDevice, [](const auto& a, const auto& c) {
        return a.second.front()->getOwner()->isBeforeInBlock(c.second.front()->getOwner());
      });

      mlir::Operation* producer = v.getDefiningOp();
      if (producer)
        b.setInsertionPointAfter(producer);
      else
        b.setInsertionPointToStart(&body);
      for (auto& [to, uses] : byDevice) {
        mlir::Value moved;
        if (auto c = llvm::dyn_cast_if_present<ConstantOp>(producer)) {
          mlir::Operation* clone = b.clone(*c);
          clone->setAttr(kDeviceAttr, mlir::StringAttr::get(ctx, to));
          clone->setAttr(kPlacementCandidatesAttr,
                         mlir::ArrayAttr::get(ctx, {mlir::StringAttr::get(ctx, to)}));
          clone->setAttr(kPlacementReasonAttr,
                         mlir::StringAttr::get(ctx, "copy-of-constant(" + from + ")"));
          moved = clone->getResult(0);
        } else {
          auto copy = b.create<CopyOp>(producer ? producer->getLoc() : main.getLoc(), v.getType(),
                                       v, b.getStringAttr(from), b.getStringAttr(to));
          // The copy runs on the destination's stream so the producer never waits on the link.
          copy->setAttr(kDeviceAttr, b.getStringAttr(to));
          copy->setAttr(kPlacementReasonAttr, b.getStringAttr("transfer"));
          moved = copy.getResult();
        }
        for (mlir::OpOperand* use : uses) use->set(moved);
      }
    }
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createInsertTransfersPass() {
  return std::make_unique<InsertTransfersPass>();
}

}  // namespace tandem

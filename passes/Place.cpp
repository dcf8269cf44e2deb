// --tandem-place: put every op on a device from the kernel registry's feasibility and the pins,
// and record the candidates and the reason on the op.
#include <map>

#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "passes/Passes.h"
#include "runtime/Kernel.h"

namespace tandem {
#define GEN_PASS_DEF_TANDEMPLACE
#include "passes/Passes.h.inc"
}  // namespace tandem

namespace tandem {
namespace {

std::string dtypesText(const std::vector<DType>& dts) {
  std::string s;
  for (DType d : dts) s += (s.empty() ? "" : ",") + std::string(dtypeName(d));
  return s;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

class PlacePass : public impl::TandemPlaceBase<PlacePass> {
 public:
  using TandemPlaceBase::TandemPlaceBase;

  void runOnOperation() override {
    // 1. Canonicalize the target list (default: cpu) and parse pins NODE=DEVICE.
    // 2. For each op other than constants: feasible devices = targets whose device kind has a
    //    kernel for (op type, present input dtypes) in the registry; none is an error.
    // 3. A pin (the `pins` option by node name, else an existing `device` attribute) wins when
    //    feasible: `pinned`. An infeasible pin is an error with `strict`, otherwise the op falls
    //    back to the first feasible device: `fallback(<why>)`.
    // 4. Unpinned: `only-kernel` with one feasible device; `cost` when there was a choice (the
    //    cost model arrives later: the first feasible target is taken).
    // 5. Constants and graph inputs take the device of their first consumer in op order.
    mlir::ModuleOp module = getOperation();
    mlir::func::FuncOp main = getMainFunc(module);
    if (!main) {
      module.emitError("tandem-place: module has no func.func @main");
      return signalPassFailure();
    }
    mlir::MLIRContext* ctx = &getContext();

    std::vector<std::string> targets;
    for (const std::string& d : devices.empty()
                                    ? std::vector<std::string>{"cpu"}
                                    : std::vector<std::string>(devices.begin(), devices.end())) {
      std::string c = canonicalDevice(d);
      if (c.empty()) {
        module.emitError() << "tandem-place: '" << d
                           << "' is not a device (expected cpu, cpu:N, cuda:N)";
        return signalPassFailure();
      }
      if (std::find(targets.begin(), targets.end(), c) == targets.end()) targets.push_back(c);
    }
    std::map<std::string, std::string> pinByNode;
    std::map<std::string, bool> pinUsed;
    for (const std::string& p : pins) {
      size_t eq = p.rfind('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == p.size()) {
        module.emitError() << "tandem-place: bad pin '" << p << "'; expected NODE=DEVICE";
        return signalPassFailure();
      }
      pinByNode[p.substr(0, eq)] = p.substr(eq + 1);
      pinUsed[p.substr(0, eq)] = false;
    }

    auto strAttrs = [&](const std::vector<std::string>& v) {
      llvm::SmallVector<mlir::Attribute> attrs;
      for (const std::string& s : v) attrs.push_back(mlir::StringAttr::get(ctx, s));
      return mlir::ArrayAttr::get(ctx, attrs);
    };
    auto setPlacement = [&](mlir::Operation* op, const std::string& device,
                            const std::string& reason, const std::vector<std::string>& candidates) {
      op->setAttr(kDeviceAttr, mlir::StringAttr::get(ctx, device));
      op->setAttr(kPlacementReasonAttr, mlir::StringAttr::get(ctx, reason));
      op->setAttr(kPlacementCandidatesAttr, strAttrs(candidates));
    };

    const KernelRegistry& registry = KernelRegistry::global();
    bool ok = true;
    llvm::SmallVector<ConstantOp> constants;
    for (mlir::Operation& op : main.getBody().front()) {
      if (auto c = llvm::dyn_cast<ConstantOp>(op)) {
        constants.push_back(c);
        continue;
      }
      if (!llvm::isa_and_present<TandemDialect>(op.getDialect()) || llvm::isa<NoneOp, CopyOp>(op))
        continue;
      std::string type = onnxOpType(&op);
      std::string node = nodeName(op.getLoc());
      std::string label = node.empty() ? type : "'" + node + "' (" + type + ")";

      std::vector<DType> dts;
      for (mlir::Value v : op.getOperands())
        if (auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType()))
          dts.push_back(mlirToDType(t.getElementType()));
      std::vector<std::string> feasible;
      for (const std::string& d : targets)
        if (registry.supports(type, deviceKindOf(d), dts)) feasible.push_back(d);
      if (feasible.empty()) {
        op.emitError() << "no kernel for " << type << " on (" << dtypesText(dts)
                       << ") on any of: " << joined(targets);
        ok = false;
        continue;
      }

      std::string pin;
      if (auto it = pinByNode.find(node); !node.empty() && it != pinByNode.end()) {
        pin = it->second;
        pinUsed[node] = true;
      } else {
        pin = deviceOfOp(&op);
      }
      if (pin.empty()) {
        setPlacement(&op, feasible.front(), feasible.size() == 1 ? "only-kernel" : "cost",
                     feasible);
        continue;
      }
      std::string canon = canonicalDevice(pin);
      std::string why;
      if (canon.empty())
        why = "'" + pin + "' is not a device";
      else if (std::find(targets.begin(), targets.end(), canon) == targets.end())
        why = canon + " is not a target";
      else if (std::find(feasible.begin(), feasible.end(), canon) == feasible.end())
        why = "no kernel for " + type + " on (" + dtypesText(dts) + ") on " + canon;
      if (why.empty()) {
        setPlacement(&op, canon, "pinned", feasible);
      } else if (strict) {
        op.emitError() << "op " << label << " is pinned to " << pin << " but " << why;
        ok = false;
      } else {
        setPlacement(&op, feasible.front(), "fallback(" + why + ")", feasible);
      }
    }
    if (!ok) return signalPassFailure();
    for (const auto& [node, used] : pinUsed)
      if (!used) main.emitWarning() << "tandem-place: pin '" << node << "' matches no op";

    // Values that are not computed (weights, graph inputs) go where they are first read, so the
    // first consumer never waits for a transfer.
    auto firstConsumerDevice = [&](mlir::Value v, std::string* consumer) -> std::string {
      mlir::Operation* first = nullptr;
      for (mlir::Operation* user : v.getUsers()) {
        if (deviceOfOp(user).empty()) continue;
        if (!first || user->isBeforeInBlock(first)) first = user;
      }
      if (!first) return "";
      *consumer = nodeName(first->getLoc());
      if (consumer->empty()) *consumer = onnxOpType(first);
      return deviceOfOp(first);
    };
    for (ConstantOp c : constants) {
      std::string consumer;
      std::string device = firstConsumerDevice(c.getResult(), &consumer);
      if (device.empty())
        setPlacement(c, targets.front(), "default", {targets.front()});
      else
        setPlacement(c, device, "colocated(" + consumer + ")", {device});
    }
    for (mlir::BlockArgument arg : main.getArguments()) {
      std::string consumer;
      std::string device = firstConsumerDevice(arg, &consumer);
      main.setArgAttr(arg.getArgNumber(), kArgDeviceAttr,
                      mlir::StringAttr::get(ctx, device.empty() ? targets.front() : device));
    }
    module->setAttr(kDevicesAttr, strAttrs(targets));
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createPlacePass() { return std::make_unique<PlacePass>(); }
std::unique_ptr<mlir::Pass> createPlacePass(const TandemPlaceOptions& options) {
  return std::make_unique<PlacePass>(options);
}

}  // namespace tandem

// Resident training state (Variables.h): state arguments to variables, results to their
// updates, and the colocation groups the placer keeps on one device.
#include "compiler/training/Variables.h"

#include <map>
#include <string>

#include "compiler/IrConventions.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace tandem::training {

void addToColocationGroup(mlir::Operation* op, const std::string& group) {
  mlir::Builder b(op->getContext());
  llvm::SmallVector<mlir::Attribute> groups;
  if (auto a = op->getAttrOfType<mlir::ArrayAttr>(kColocationAttr)) {
    for (mlir::Attribute g : a)
      if (llvm::cast<mlir::StringAttr>(g).getValue() == group) return;
    groups.append(a.begin(), a.end());
  }
  groups.push_back(b.getStringAttr(group));
  op->setAttr(kColocationAttr, b.getArrayAttr(groups));
}

mlir::LogicalResult makeStateResident(mlir::ModuleOp module) {
  mlir::func::FuncOp main = getMainFunc(module);
  if (!main) return module.emitError("training: module has no func.func @main");
  mlir::Builder b(module.getContext());
  std::map<std::string, unsigned> resultByName;
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    if (auto n = main.getResultAttrOfType<mlir::StringAttr>(i, kNameAttr)) resultByName[n.str()] = i;
  auto ret = llvm::cast<mlir::func::ReturnOp>(main.getBody().front().getTerminator());

  // 1. Pairs and the variables' names; a parameter is a variable marked tandem.trainable.
  std::map<std::string, bool> isParam;
  struct Pair {
    unsigned arg, result;
    std::string name;
  };
  llvm::SmallVector<Pair> pairs;
  std::map<unsigned, std::string> pairedResult;
  for (unsigned a = 2; a < main.getNumArguments(); ++a) {
    std::string name = valueName(main.getArgument(a));
    auto it = resultByName.find(name + "_new");
    if (it == resultByName.end())
      return main.emitError() << "training: state argument '" << name << "' has no result '"
                              << name << "_new' to update it";
    if (!pairedResult.emplace(it->second, name).second)
      return main.emitError() << "training: result '" << name << "_new' updates two arguments";
    pairs.push_back({a, it->second, name});
    isParam[name] = (bool)main.getArgAttr(a, "tandem.trainable");
  }

  // 2. Attributes: the initial value on the argument, the variable's name on the result.
  for (const Pair& p : pairs) {
    auto type = llvm::cast<mlir::RankedTensorType>(main.getArgument(p.arg).getType());
    mlir::Attribute init = main.getArgAttr(p.arg, kInitialValueAttr);
    if (!init) {
      mlir::Type et = type.getElementType();
      mlir::Attribute zero = llvm::isa<mlir::FloatType>(et) ? (mlir::Attribute)b.getFloatAttr(et, 0.0)
                                                            : (mlir::Attribute)b.getIntegerAttr(et, 0);
      init = mlir::DenseElementsAttr::get(type, zero);
    }
    main.removeArgAttr(p.arg, b.getStringAttr(kInitialValueAttr));
    main.setArgAttr(p.arg, kVariableAttr, init);
    main.setResultAttr(p.result, kVariableUpdateAttr, b.getStringAttr(p.name));
  }

  // 3. Groups: a slot `P.m` joins parameter P's group.
  auto groupOf = [&](const std::string& name) {
    size_t dot = name.rfind('.');
    if (dot != std::string::npos && isParam.count(name.substr(0, dot)) && isParam[name.substr(0, dot)])
      return name.substr(0, dot);
    return name;
  };
  // The optimizer's ops for parameter P are named "P/<optimizer>": the longest such prefix
  // that matches ("conv1.weight/adam" is conv1.weight's, not conv1's).
  std::map<std::string, std::string> groupByPrefix;  // "G/" -> G
  for (const Pair& p : pairs) groupByPrefix[groupOf(p.name) + "/"] = groupOf(p.name);
  llvm::DenseMap<mlir::Operation*, std::string> prefixGroup;
  main.walk([&](mlir::Operation* op) {
    if (op == main || llvm::isa<mlir::func::ReturnOp>(op)) return;
    std::string node = nodeName(op->getLoc());
    if (node.empty()) return;
    for (auto it = groupByPrefix.rbegin(); it != groupByPrefix.rend(); ++it)
      if (node.compare(0, it->first.size(), it->first) == 0) {
        prefixGroup[op] = it->second;
        addToColocationGroup(op, it->second);
        return;
      }
  });
  // Readers and the update's producer. A variable of no parameter (the step counter) keeps
  // only the readers outside every parameter's update: otherwise one counter read by every
  // update would merge all groups into one.
  for (const Pair& p : pairs) {
    const std::string g = groupOf(p.name);
    const bool shared = !isParam.count(g) || !isParam[g];
    // Its update's own computation (for `step`: step + 1), not ops that merely read it (a
    // Dropout's counter): those get a 4-byte copy where they run.
    llvm::SmallPtrSet<mlir::Operation*, 8> feedsUpdate;
    if (shared) {
      llvm::SmallVector<mlir::Operation*> work;
      if (mlir::Operation* producer = ret.getOperand(p.result).getDefiningOp()) work.push_back(producer);
      while (!work.empty() && feedsUpdate.size() < 64) {
        mlir::Operation* op = work.pop_back_val();
        if (!feedsUpdate.insert(op).second) continue;
        for (mlir::Value v : op->getOperands())
          if (mlir::Operation* d = v.getDefiningOp()) work.push_back(d);
      }
    }
    for (mlir::Operation* user : main.getArgument(p.arg).getUsers()) {
      if (llvm::isa<mlir::func::ReturnOp>(user)) continue;
      if (shared && (prefixGroup.count(user) || !feedsUpdate.count(user))) continue;
      addToColocationGroup(user, g);
    }
    if (mlir::Operation* producer = ret.getOperand(p.result).getDefiningOp()) addToColocationGroup(producer, g);
  }
  return mlir::success();
}

}  // namespace tandem::training

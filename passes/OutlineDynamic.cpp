// --tandem-outline-dynamic: the ops whose result shapes are known only at run time, and every op
// downstream of them, become one tandem.dynamic_region whose `body` is their plan
// (runtime/DynamicRegion.h runs it). Declared in Passes.td.
#include <string>
#include <vector>

#include "compiler/IrConventions.h"
#include "compiler/OpBuilding.h"
#include "compiler/Plan.pb.h"
#include "compiler/TandemDialect.h"
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"
#include "runtime/PlanFormat.h"

namespace tandem {
#define GEN_PASS_DEF_TANDEMOUTLINEDYNAMIC
#include "passes/Passes.h.inc"
}  // namespace tandem

namespace tandem {
namespace {

bool hasUnknownDim(mlir::Type t) {
  auto r = llvm::dyn_cast<mlir::RankedTensorType>(t);
  return r && !r.hasStaticShape();
}

// The region's ops as a plan: its operands are the body's inputs, in order; each op a CPU step
// with its attributes; values keep the dims inference knew (-1 where it did not).
class BodyEmitter {
 public:
  explicit BodyEmitter(plan::Plan* p) : p_(*p) {
    p_.set_version(kPlanVersion);
    p_.set_producer("tandem 0.1");
    p_.set_eager(true);
  }

  void addInput(mlir::Value v) { p_.add_inputs(addValue(v, plan::Value::INPUT)); }

  void addStep(mlir::Operation* op) {
    plan::Step* s = p_.add_steps();
    s->set_op_type(onnxOpType(op));
    s->set_name(nodeName(op->getLoc()));
    s->set_location(locationString(op->getLoc()));
    s->set_device("cpu");
    s->set_placement_reason("dynamic-region");
    AttrMap attrs = toAttrMap(op);
    for (const auto& [name, a] : attrs.all()) attrToPlan(name, a, s->add_attrs());
    for (mlir::Value v : op->getOperands()) s->add_inputs(ids_.lookup(v));
    for (mlir::Value r : op->getResults()) s->add_outputs(addValue(r, plan::Value::INTERMEDIATE));
  }

  void addConstant(ConstantOp c) {
    const int id = addValue(c.getResult(), plan::Value::CONSTANT);
    Tensor t = attrToTensor(llvm::cast<mlir::DenseElementsAttr>(c.getValue()));
    plan::TensorData* td = p_.mutable_values(id)->mutable_constant();
    td->set_dtype((int32_t)t.dtype());
    for (int64_t d : t.shape()) td->add_dims(d);
    td->set_raw(t.raw(), t.bytes());
  }
  void addNone(mlir::Value v) { ids_[v] = -1; }
  void addOutput(mlir::Value v) { p_.add_outputs(ids_.lookup(v)); }

 private:
  int addValue(mlir::Value v, plan::Value::Kind kind) {
    auto t = llvm::cast<mlir::RankedTensorType>(v.getType());
    const int id = p_.values_size();
    plan::Value* pv = p_.add_values();
    pv->set_id(id);
    pv->set_name(valueName(v));
    pv->set_dtype((int32_t)mlirToDType(t.getElementType()));
    for (int64_t d : t.getShape()) pv->add_dims(mlir::ShapedType::isDynamic(d) ? -1 : d);
    pv->set_device("cpu");
    pv->set_kind(kind);
    ids_[v] = id;
    return id;
  }

  plan::Plan& p_;
  llvm::DenseMap<mlir::Value, int> ids_;
};

class OutlineDynamicPass : public impl::TandemOutlineDynamicBase<OutlineDynamicPass> {
 public:
  void runOnOperation() override {
    mlir::func::FuncOp main = getMainFunc(getOperation());
    if (!main) return;
    mlir::Block& block = main.getBody().front();
    auto ret = llvm::cast<mlir::func::ReturnOp>(block.getTerminator());

    // The region: ops with a result of unknown dims, then every op reading one of its values.
    llvm::SetVector<mlir::Operation*> region;
    mlir::Operation* root = nullptr;
    for (mlir::Operation& op : block) {
      if (&op == ret.getOperation() || llvm::isa<ConstantOp, NoneOp>(op)) continue;
      bool in = llvm::any_of(op.getResultTypes(), hasUnknownDim) ||
                llvm::any_of(op.getOperands(), [&](mlir::Value v) {
                  return v.getDefiningOp() && region.contains(v.getDefiningOp());
                });
      if (!in) continue;
      if (!root) root = &op;
      region.insert(&op);
    }
    if (region.empty()) return;

    // Outer values read, in first-use order; graph outputs computed inside.
    llvm::SetVector<mlir::Value> inputs;
    for (mlir::Operation* op : region)
      for (mlir::Value v : op->getOperands())
        if (!llvm::isa_and_nonnull<NoneOp>(v.getDefiningOp()) &&
            !(v.getDefiningOp() && region.contains(v.getDefiningOp())))
          inputs.insert(v);
    llvm::SmallVector<unsigned> outputPositions;
    llvm::SetVector<mlir::Value> outputs;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (!v.getDefiningOp() || !region.contains(v.getDefiningOp())) continue;
      if (isVariableUpdateResult(main, (unsigned)i)) {
        v.getDefiningOp()->emitError()
            << "tandem-outline-dynamic: a variable update depends on a size known only at run "
               "time (from " << onnxOpType(root) << " '" << nodeName(root->getLoc())
            << "'); variables need static shapes";
        return signalPassFailure();
      }
      outputPositions.push_back((unsigned)i);
      outputs.insert(v);
    }

    plan::Plan body;
    writeEagerPlan(inputs.getArrayRef(), region.getArrayRef(), outputs.getArrayRef(), &body);

    mlir::OpBuilder b(ret);
    std::string rootName = nodeName(root->getLoc());
    mlir::Location loc = mlir::NameLoc::get(
        b.getStringAttr("dynamic_region(" + (rootName.empty() ? onnxOpType(root) : rootName) + ")"),
        root->getLoc());
    llvm::SmallVector<mlir::Value> operands(inputs.begin(), inputs.end());
    llvm::SmallVector<mlir::NamedAttribute> attrs = {
        b.getNamedAttr("body", b.getStringAttr(body.SerializeAsString()))};
    mlir::FailureOr<mlir::Operation*> op =
        createTandemOp(b, loc, "DynamicRegion", operands, attrs, (unsigned)outputs.size());
    if (mlir::failed(op)) return signalPassFailure();
    for (auto [k, v] : llvm::enumerate(outputs))
      for (unsigned pos : outputPositions)
        if (ret.getOperand(pos) == v) ret.setOperand(pos, (*op)->getResult((unsigned)k));
    for (mlir::Operation* dead : llvm::reverse(region)) {
      dead->dropAllUses();
      dead->erase();
    }
    updateMainResultTypes(main);
  }
};

}  // namespace

void writeEagerPlan(llvm::ArrayRef<mlir::Value> inputs, llvm::ArrayRef<mlir::Operation*> ops,
                    llvm::ArrayRef<mlir::Value> outputs, plan::Plan* out) {
  out->Clear();
  BodyEmitter emit(out);
  for (mlir::Value v : inputs) emit.addInput(v);
  for (mlir::Operation* op : ops) {
    if (auto c = llvm::dyn_cast<ConstantOp>(op)) {
      emit.addConstant(c);
      continue;
    }
    if (llvm::isa<NoneOp>(op)) {
      emit.addNone(op->getResult(0));
      continue;
    }
    for (mlir::Value v : op->getOperands())
      if (llvm::isa_and_nonnull<NoneOp>(v.getDefiningOp())) emit.addNone(v);
    emit.addStep(op);
  }
  for (mlir::Value v : outputs) emit.addOutput(v);
}

std::unique_ptr<mlir::Pass> createOutlineDynamicPass() { return std::make_unique<OutlineDynamicPass>(); }

}  // namespace tandem

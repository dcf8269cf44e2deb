// Plan emission: walks the final @main once, writing values, steps, constants and arenas, and
// feeding the placement log (compiler/PlacementLog.h) each step and copy.
#include "compiler/pipeline/EmitPlan.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "compiler/IrConventions.h"
#include "compiler/OpBuilding.h"
#include "compiler/PlacementLog.h"
#include "compiler/TandemDialect.h"
#include "runtime/CheckedMath.h"
#include "runtime/PlanFormat.h"

namespace tandem {

namespace {

std::map<std::string, int64_t> readDeviceBytes(mlir::ModuleOp module, const char* attrName) {
  std::map<std::string, int64_t> out;
  if (auto dict = module->getAttrOfType<mlir::DictionaryAttr>(attrName))
    for (mlir::NamedAttribute na : dict)
      if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(na.getValue()))
        out[na.getName().str()] = i.getInt();
  return out;
}

// Builds the plan; `log` collects what the placement log reports.
class PlanEmitter {
 public:
  PlanEmitter(mlir::ModuleOp module, CompileResult* result)
      : module_(module), plan_(result->plan), result_(result), log_(module) {}

  mlir::LogicalResult run() {
    mlir::func::FuncOp main = getMainFunc(module_);
    if (!main) return module_.emitError("emit-plan: module has no func.func @main");
    plan_.Clear();
    plan_.set_version(kPlanVersion);
    plan_.set_producer("tandem 0.1");
    if (auto name = module_->getAttrOfType<mlir::StringAttr>(kModelNameAttr))
      plan_.set_model_name(name.str());

    for (mlir::BlockArgument arg : main.getArguments()) {
      if (isVariableArg(arg)) {
        if (mlir::failed(addVariable(main, arg))) return mlir::failure();
        continue;
      }
      auto offset =
          main.getArgAttrOfType<mlir::IntegerAttr>(arg.getArgNumber(), kArgArenaOffsetAttr);
      if (!offset)
        return main.emitError() << "emit-plan: input '" << valueName(arg)
                                << "' has no arena offset; run --tandem-plan-memory first";
      std::string device = deviceOfValue(arg);
      auto id = addValue(arg, plan::Value::INPUT, device.empty() ? "cpu" : device, offset.getInt(),
                         main.getLoc());
      if (mlir::failed(id)) return mlir::failure();
      plan_.add_inputs(*id);
      log_.addRunInput(valueName(arg), plan_.values(*id).bytes());
    }

    for (mlir::Operation& op : main.getBody().front()) {
      if (auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(op)) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          int id = ids_.lookup(v);
          if (auto var = main.getResultAttrOfType<mlir::StringAttr>((unsigned)i, kVariableUpdateAttr)) {
            auto it = variables_.find(var.str());
            if (it == variables_.end())
              return main.emitError() << "emit-plan: result " << i << " updates variable '" << var.str()
                                      << "', which is not an argument";
            plan_.mutable_values(it->second)->set_update(id);
            // Planned in place: the update's step writes the variable's buffer (no arena slot).
            const bool inPlace = (bool)main.getResultAttr((unsigned)i, kVariableInPlaceAttr);
            if (inPlace && id >= 0) {
              plan_.mutable_values(id)->set_aliases_variable(it->second);
              plan_.mutable_values(id)->set_arena_offset(0);
            }
            log_.addVariableUpdate(var.str(), plan_.values(it->second).bytes(), inPlace);
            continue;
          }
          plan_.add_outputs(id);
          if (id >= 0) {
            auto name = main.getResultAttrOfType<mlir::StringAttr>((unsigned)i, kNameAttr);
            log_.addRunOutput(name ? name.str() : plan_.values(id).name(), plan_.values(id).bytes());
          }
          // The graph output's own name is the best name for the value it returns.
          auto name = main.getResultAttrOfType<mlir::StringAttr>(i, kNameAttr);
          plan::Value* pv = plan_.mutable_values(id);
          if (name && pv->kind() != plan::Value::INPUT && !outputNamed_.count(id)) {
            pv->set_name(name.str());
            outputNamed_.insert(id);
          }
        }
        continue;
      }
      if (llvm::isa<NoneOp>(op)) {
        ids_[op.getResult(0)] = -1;
        continue;
      }
      if (auto c = llvm::dyn_cast<ConstantOp>(op)) {
        if (mlir::failed(addConstant(c))) return mlir::failure();
        continue;
      }
      if (mlir::failed(addStep(&op))) return mlir::failure();
    }

    std::map<std::string, int64_t> peak = readDeviceBytes(module_, kArenaPeakAttr);
    std::map<std::string, int64_t> unplanned = readDeviceBytes(module_, kArenaUnplannedAttr);
    for (const auto& [device, bytes] : peak) {
      plan::Arena* a = plan_.add_arenas();
      a->set_device(device);
      a->set_bytes(bytes);
      a->set_unplanned_bytes(unplanned.count(device) ? unplanned[device] : 0);
    }
    log_.finish(plan_.model_name(), peak, unplanned, result_);
    plan_.set_placement_log_json(result_->placementLogJson);
    return mlir::success();
  }

 private:
  mlir::FailureOr<int> addValue(mlir::Value v, plan::Value::Kind kind, const std::string& device,
                                int64_t offset, mlir::Location loc) {
    auto type = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
    // A dynamic region's result may have dims known only at run time (-1 in the plan, 0 bytes).
    const bool runTime = isAllocatedAtRunTime(v);
    if (!type || (!type.hasStaticShape() && !runTime))
      return mlir::emitError(loc) << "emit-plan: value '" << valueName(v) << "' has type "
                                  << v.getType() << "; a plan needs static shapes";
    DType dt = mlirToDType(type.getElementType());
    int64_t bytes = 0;
    if (type.hasStaticShape())
      if (std::string e = checkTensorSize(std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
                                          (int64_t)dtypeSize(dt), dtypeName(dt), &bytes);
          !e.empty())
        return mlir::emitError(loc) << "emit-plan: value '" << valueName(v) << "': " << e;
    int id = plan_.values_size();
    plan::Value* pv = plan_.add_values();
    pv->set_id(id);
    pv->set_name(valueName(v));
    pv->set_dtype((int32_t)dt);
    for (int64_t d : type.getShape()) pv->add_dims(mlir::ShapedType::isDynamic(d) ? -1 : d);
    pv->set_device(device);
    pv->set_kind(kind);
    pv->set_arena_offset(offset);
    pv->set_bytes(bytes);
    ids_[v] = id;
    return id;
  }

  // A constant's or a variable's data as plan TensorData; returns its bytes.
  static int64_t setData(mlir::DenseElementsAttr dense, plan::TensorData* td) {
    Tensor t = attrToTensor(dense);
    td->set_dtype((int32_t)t.dtype());
    for (int64_t d : t.shape()) td->add_dims(d);
    td->set_raw(t.raw(), t.bytes());
    return (int64_t)t.bytes();
  }

  // A variable: resident on its device, its initial value in the plan, not a graph input.
  mlir::LogicalResult addVariable(mlir::func::FuncOp main, mlir::BlockArgument arg) {
    auto dense = llvm::dyn_cast_or_null<mlir::DenseElementsAttr>(main.getArgAttr(arg.getArgNumber(), kVariableAttr));
    if (!dense || dense.getType() != arg.getType())
      return main.emitError() << "emit-plan: variable '" << valueName(arg)
                              << "' needs a dense initial value of its type";
    std::string device = deviceOfValue(arg);
    auto id = addValue(arg, plan::Value::VARIABLE, device.empty() ? "cpu" : device, 0, main.getLoc());
    if (mlir::failed(id)) return mlir::failure();
    const int64_t bytes = setData(dense, plan_.mutable_values(*id)->mutable_constant());
    variables_[valueName(arg)] = *id;
    log_.addVariable(valueName(arg), plan_.values(*id).device(), bytes);
    return mlir::success();
  }

  mlir::LogicalResult addConstant(ConstantOp c) {
    auto dense = llvm::dyn_cast<mlir::DenseElementsAttr>(c.getValue());
    if (!dense) return c.emitError("emit-plan: constant is not a dense elements attribute");
    std::string device = deviceOfOp(c);
    auto id = addValue(c.getResult(), plan::Value::CONSTANT, device.empty() ? "cpu" : device, 0,
                       c.getLoc());
    if (mlir::failed(id)) return mlir::failure();
    const int64_t bytes = setData(dense, plan_.mutable_values(*id)->mutable_constant());
    log_.addConstant(plan_.values(*id).device(), bytes);
    return mlir::success();
  }

  mlir::LogicalResult addStep(mlir::Operation* op) {
    std::string device = deviceOfOp(op);
    if (device.empty())
      return op->emitError("emit-plan: op has no device; run --tandem-place first");
    auto offsets = op->getAttrOfType<mlir::ArrayAttr>(kArenaOffsetAttr);
    if (!offsets || offsets.size() != op->getNumResults())
      return op->emitError(
          "emit-plan: op has no arena_offset per result; run --tandem-plan-memory first");

    plan::Step* step = plan_.add_steps();
    step->set_op_type(onnxOpType(op));
    if (auto copy = llvm::dyn_cast<CopyOp>(op))
      // A copy keeps its producer's location for messages but needs its own name in profiles.
      step->set_name("copy:" + valueName(copy.getInput()) + "->" + copy.getTo().str());
    else
      step->set_name(nodeName(op->getLoc()));
    step->set_location(locationString(op->getLoc()));
    step->set_device(device);
    auto reason = op->getAttrOfType<mlir::StringAttr>(kPlacementReasonAttr);
    step->set_placement_reason(reason ? reason.str() : "");
    AttrMap attrs = toAttrMap(op);
    for (const auto& [name, a] : attrs.all()) attrToPlan(name, a, step->add_attrs());
    auto fused = llvm::dyn_cast<FusedOp>(op);
    if (fused) addFusedBody(fused, step);
    addLayouts(op, step);
    for (mlir::Value v : op->getOperands()) {
      auto it = ids_.find(v);
      assert(it != ids_.end() && "operand used before its definition");
      step->add_inputs(it->second);
    }
    for (auto [i, r] : llvm::enumerate(op->getResults())) {
      // Stored per result; a Copy's result lives on its destination, which is its device.
      auto off = llvm::cast<mlir::IntegerAttr>(offsets[i]).getInt();
      auto id = addValue(r, plan::Value::INTERMEDIATE, device, off, op->getLoc());
      if (mlir::failed(id)) return mlir::failure();
      step->add_outputs(*id);
    }

    std::string name = step->name().empty() ? valueName(op->getResult(0)) : step->name();
    if (auto copy = llvm::dyn_cast<CopyOp>(op)) {
      log_.addCopy(copy, plan_.values(step->outputs(0)).bytes(), step->location());
      return mlir::success();
    }
    log_.addStep(op, name, step->op_type(), device, step->location());
    return mlir::success();
  }

  // The body of a tandem.fused as Step.fused_body (compiler/Plan.proto; the runtime reads it
  // through fused::parseBody, runtime/cpu/ref/Fused.h): each member's op type, node name,
  // operands (a block argument is the step's input of its number, a tandem.none an absent
  // operand), attributes and result shape (a reduction root's differs from its loop's), and
  // per step output the member the yield returns.
  void addFusedBody(FusedOp fused, plan::Step* step) {
    mlir::Block& block = fused.getBody().front();
    plan::FusedBody* body = step->mutable_fused_body();
    llvm::DenseMap<mlir::Value, int> member;
    for (mlir::Operation& inner : block) {
      if (llvm::isa<NoneOp>(inner)) continue;
      if (auto yield = llvm::dyn_cast<YieldOp>(inner)) {
        for (mlir::Value v : yield.getValues()) {
          assert(member.count(v) && "a fused body yields its members' results");
          body->add_results(member.lookup(v));
        }
        continue;
      }
      plan::FusedBody::Member* m = body->add_members();
      m->set_op_type(onnxOpType(&inner));
      m->set_name(nodeName(inner.getLoc()));
      for (mlir::Value v : inner.getOperands()) {
        plan::FusedBody::Operand* o = m->add_inputs();
        if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(v)) o->set_step_input(arg.getArgNumber());
        else if (auto it = member.find(v); it != member.end()) o->set_member(it->second);
        else assert(llvm::isa_and_nonnull<NoneOp>(v.getDefiningOp()) && "the region is isolated");
      }
      AttrMap innerAttrs = toAttrMap(&inner);
      for (const auto& [name, a] : innerAttrs.all()) attrToPlan(name, a, m->add_attrs());
      auto type = llvm::cast<mlir::RankedTensorType>(inner.getResult(0).getType());
      plan::FusedBody::Shape* shape = m->mutable_shape();
      for (int64_t d : type.getShape()) shape->add_dims(d);
      member[inner.getResult(0)] = body->members_size() - 1;
    }
  }

  // Step attributes input_layouts / output_layouts (runtime/cpu/dnnl/DnnlCommon.h): "blocked"
  // where --tandem-fuse kept the value in oneDNN's channel-blocked layout; left out when none.
  void addLayouts(mlir::Operation* op, plan::Step* step) {
    Attr in = Attr::ofStrings({}), out = Attr::ofStrings({});
    bool any = false;
    for (mlir::Value v : op->getOperands()) {
      in.strings.push_back(resultLayout(v));
      any |= !in.strings.back().empty();
    }
    for (mlir::Value v : op->getResults()) {
      out.strings.push_back(resultLayout(v));
      any |= !out.strings.back().empty();
    }
    if (!any) return;
    attrToPlan("input_layouts", in, step->add_attrs());
    attrToPlan("output_layouts", out, step->add_attrs());
  }

  mlir::ModuleOp module_;
  plan::Plan& plan_;
  CompileResult* result_;
  llvm::DenseMap<mlir::Value, int> ids_;
  std::set<int> outputNamed_;
  std::map<std::string, int> variables_;  // name -> value id
  PlacementLogWriter log_;
};

}  // namespace

mlir::LogicalResult emitPlan(mlir::ModuleOp module, CompileResult* result) {
  return PlanEmitter(module, result).run();
}

}  // namespace tandem

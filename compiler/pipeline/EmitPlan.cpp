// Plan emission: walks the final @main once, writing values, steps, constants, arenas and the
// placement log (text like TF's log_device_placement, and JSON; schema in compiler/PlacementLog.md).
#include "compiler/pipeline/EmitPlan.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "compiler/IrConventions.h"
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "runtime/CheckedMath.h"

namespace tandem {

namespace {

void fillAttribute(const std::string& name, const Attr& a, plan::Attribute* out) {
  out->set_name(name);
  switch (a.kind) {
    case Attr::Kind::Int:
      out->set_kind(plan::Attribute::INT);
      out->set_i(a.i);
      break;
    case Attr::Kind::Float:
      out->set_kind(plan::Attribute::FLOAT);
      out->set_f(a.f);
      break;
    case Attr::Kind::String:
      out->set_kind(plan::Attribute::STRING);
      out->set_s(a.s);
      break;
    case Attr::Kind::Ints:
      out->set_kind(plan::Attribute::INTS);
      for (int64_t v : a.ints) out->add_ints(v);
      break;
    case Attr::Kind::Floats:
      out->set_kind(plan::Attribute::FLOATS);
      for (float v : a.floats) out->add_floats(v);
      break;
    case Attr::Kind::Strings:
      out->set_kind(plan::Attribute::STRINGS);
      for (const std::string& v : a.strings) out->add_strings(v);
      break;
    case Attr::Kind::Tensor: {
      out->set_kind(plan::Attribute::TENSOR);
      plan::TensorData* t = out->mutable_t();
      t->set_dtype((int32_t)a.t.dtype());
      for (int64_t d : a.t.shape()) t->add_dims(d);
      t->set_raw(a.t.raw(), a.t.bytes());
      break;
    }
  }
}

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
      : module_(module), plan_(result->plan), result_(result) {}

  mlir::LogicalResult run() {
    mlir::func::FuncOp main = getMainFunc(module_);
    if (!main) return module_.emitError("emit-plan: module has no func.func @main");
    plan_.Clear();
    plan_.set_version(1);
    plan_.set_producer("tandem 0.1");
    if (auto name = module_->getAttrOfType<mlir::StringAttr>(kModelNameAttr))
      plan_.set_model_name(name.str());

    for (mlir::BlockArgument arg : main.getArguments()) {
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
    }

    for (mlir::Operation& op : main.getBody().front()) {
      if (auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(op)) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          int id = ids_.lookup(v);
          plan_.add_outputs(id);
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
    writeLog(peak, unplanned);
    return mlir::success();
  }

 private:
  mlir::FailureOr<int> addValue(mlir::Value v, plan::Value::Kind kind, const std::string& device,
                                int64_t offset, mlir::Location loc) {
    auto type = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
    if (!type || !type.hasStaticShape())
      return mlir::emitError(loc) << "emit-plan: value '" << valueName(v) << "' has type "
                                  << v.getType() << "; a plan needs static shapes";
    DType dt = mlirToDType(type.getElementType());
    int64_t bytes = 0;
    if (std::string e = checkTensorSize(std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
                                        (int64_t)dtypeSize(dt), dtypeName(dt), &bytes);
        !e.empty())
      return mlir::emitError(loc) << "emit-plan: value '" << valueName(v) << "': " << e;
    int id = plan_.values_size();
    plan::Value* pv = plan_.add_values();
    pv->set_id(id);
    pv->set_name(valueName(v));
    pv->set_dtype((int32_t)dt);
    for (int64_t d : type.getShape()) pv->add_dims(d);
    pv->set_device(device);
    pv->set_kind(kind);
    pv->set_arena_offset(offset);
    pv->set_bytes(bytes);
    ids_[v] = id;
    return id;
  }

  mlir::LogicalResult addConstant(ConstantOp c) {
    auto dense = llvm::dyn_cast<mlir::DenseElementsAttr>(c.getValue());
    if (!dense) return c.emitError("emit-plan: constant is not a dense elements attribute");
    std::string device = deviceOfOp(c);
    auto id = addValue(c.getResult(), plan::Value::CONSTANT, device.empty() ? "cpu" : device, 0,
                       c.getLoc());
    if (mlir::failed(id)) return mlir::failure();
    Tensor t = attrToTensor(dense);
    plan::TensorData* td = plan_.mutable_values(*id)->mutable_constant();
    td->set_dtype((int32_t)t.dtype());
    for (int64_t d : t.shape()) td->add_dims(d);
    td->set_raw(t.raw(), t.bytes());
    constantsPerDevice_[plan_.values(*id).device()] += 1;
    constantBytesPerDevice_[plan_.values(*id).device()] += (int64_t)t.bytes();
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
    for (const auto& [name, a] : attrs.all()) fillAttribute(name, a, step->add_attrs());
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

    // Log entries.
    std::string name = step->name().empty() ? valueName(op->getResult(0)) : step->name();
    if (auto copy = llvm::dyn_cast<CopyOp>(op)) {
      int64_t bytes = plan_.values(step->outputs(0)).bytes();
      std::string value = placedValueName(copy.getInput());
      double seconds = copyEstimate(value, copy.getTo().str());
      logLines_.push_back("copy " + value + ": " + copy.getFrom().str() + " -> " +
                          copy.getTo().str() + ", " + std::to_string(bytes) + " bytes" +
                          (seconds >= 0 ? ", " + formatSeconds(seconds) : ""));
      copies_.push_back({{"value", value},
                         {"from", copy.getFrom().str()},
                         {"to", copy.getTo().str()},
                         {"bytes", bytes},
                         {"estimated_seconds", seconds >= 0 ? nlohmann::json(seconds) : nlohmann::json()},
                         {"location", step->location()}});
      dotCopies_.push_back({value, copy.getFrom().str(), copy.getTo().str(), bytes});
      if (std::string from = dotNameOf(copy.getInput()); !from.empty())
        dotEdges_.push_back({from, "copy " + value + " -> " + copy.getTo().str()});
      bytesMoved_ += bytes;
      return mlir::success();
    }
    kernelsAfter_[device] += 1;
    if (fused) {
      // One log line per original op, each saying which kernel it runs in.
      std::string group = name + " [" + fused.getKind().str() + "]";
      for (mlir::Operation& inner : fused.getBody().front().without_terminator())
        if (!llvm::isa<NoneOp>(inner)) {
          std::string n = nodeName(inner.getLoc());
          logOp(&inner, n.empty() ? valueName(inner.getResult(0)) : n, onnxOpType(&inner), device,
                locationString(inner.getLoc()), group);
        }
      for (mlir::Value v : op->getOperands())
        if (std::string from = dotNameOf(v); !from.empty()) dotEdges_.push_back({from, name});
      dotNodes_.push_back({name, "Fused " + fused.getKind().str(), device});
      return mlir::success();
    }
    logOp(op, name, step->op_type(), device, step->location(), "");
    dotNodes_.push_back({name, step->op_type(), device});
    for (mlir::Value v : op->getOperands())
      if (std::string from = dotNameOf(v); !from.empty()) dotEdges_.push_back({from, name});
    return mlir::success();
  }

  // The body of a tandem.fused as flat step attributes (the runtime's Fused kernel reads them;
  // runtime/cpu/ref/Fused.h documents the encoding): `ops` (ONNX types in order),
  // `op_input_counts` and `op_inputs` (per body op, its operands: k >= 0 is the step's input k,
  // -1 an absent optional input, -2 - j the result of body op j), `outputs_from` (the body op
  // each step output is), `op_ranks` and `op_dims` (each body op's result shape, the dims
  // concatenated: a reduction root's differs from its loop's), and each body op's attributes
  // prefixed "<index>.".
  void addFusedBody(FusedOp fused, plan::Step* step) {
    mlir::Block& block = fused.getBody().front();
    llvm::DenseMap<mlir::Value, int64_t> ref;
    for (mlir::BlockArgument a : block.getArguments()) ref[a] = a.getArgNumber();
    Attr ops = Attr::ofStrings({});
    Attr counts = Attr::ofInts({}), inputs = Attr::ofInts({}), from = Attr::ofInts({});
    Attr ranks = Attr::ofInts({}), dims = Attr::ofInts({});
    int64_t index = 0;
    for (mlir::Operation& inner : block) {
      if (llvm::isa<NoneOp>(inner)) {
        ref[inner.getResult(0)] = -1;
        continue;
      }
      if (auto yield = llvm::dyn_cast<YieldOp>(inner)) {
        for (mlir::Value v : yield.getValues()) from.ints.push_back(ref.lookup(v));
        continue;
      }
      ops.strings.push_back(onnxOpType(&inner));
      counts.ints.push_back(inner.getNumOperands());
      for (mlir::Value v : inner.getOperands()) inputs.ints.push_back(ref.lookup(v));
      auto type = llvm::cast<mlir::RankedTensorType>(inner.getResult(0).getType());
      ranks.ints.push_back(type.getRank());
      for (int64_t d : type.getShape()) dims.ints.push_back(d);
      AttrMap innerAttrs = toAttrMap(&inner);
      for (const auto& [name, a] : innerAttrs.all())
        fillAttribute(std::to_string(index) + "." + name, a, step->add_attrs());
      ref[inner.getResult(0)] = -2 - index;
      ++index;
    }
    fillAttribute("ops", ops, step->add_attrs());
    fillAttribute("op_input_counts", counts, step->add_attrs());
    fillAttribute("op_inputs", inputs, step->add_attrs());
    fillAttribute("outputs_from", from, step->add_attrs());
    fillAttribute("op_ranks", ranks, step->add_attrs());
    fillAttribute("op_dims", dims, step->add_attrs());
  }

  // Step attributes input_layouts / output_layouts (runtime/cpu/dnnl/DnnlCommon.h): "blocked"
  // where --tandem-fuse kept the value in oneDNN's channel-blocked layout; left out when none.
  static std::string layoutOf(mlir::Value v) {
    mlir::Operation* d = v.getDefiningOp();
    auto list = d ? d->getAttrOfType<mlir::ArrayAttr>(kResultLayoutsAttr) : nullptr;
    unsigned i = llvm::cast<mlir::OpResult>(v).getResultNumber();
    if (!list || i >= list.size()) return "";
    return llvm::cast<mlir::StringAttr>(list[i]).str();
  }
  void addLayouts(mlir::Operation* op, plan::Step* step) {
    Attr in = Attr::ofStrings({}), out = Attr::ofStrings({});
    bool any = false;
    for (mlir::Value v : op->getOperands()) {
      in.strings.push_back(llvm::isa<mlir::OpResult>(v) ? layoutOf(v) : "");
      any |= !in.strings.back().empty();
    }
    for (mlir::Value v : op->getResults()) {
      out.strings.push_back(layoutOf(v));
      any |= !out.strings.back().empty();
    }
    if (!any) return;
    fillAttribute("input_layouts", in, step->add_attrs());
    fillAttribute("output_layouts", out, step->add_attrs());
  }

  void logOp(mlir::Operation* op, const std::string& name, const std::string& opType,
             const std::string& device, const std::string& location, const std::string& group) {
    std::vector<std::string> candidates;
    if (auto cands = op->getAttrOfType<mlir::ArrayAttr>(kPlacementCandidatesAttr))
      for (mlir::Attribute a : cands)
        if (auto s = llvm::dyn_cast<mlir::StringAttr>(a)) candidates.push_back(s.str());
    // Candidates with their estimated time (cost model), e.g. "cpu 12.3us, cuda:0 5.1us".
    std::map<std::string, double> costs;
    if (auto c = op->getAttrOfType<mlir::DictionaryAttr>(kPlacementCostsAttr))
      for (const mlir::NamedAttribute& a : c)
        if (auto f = llvm::dyn_cast<mlir::FloatAttr>(a.getValue()))
          costs[a.getName().str()] = f.getValueAsDouble();
    // Where the estimate is the runtime's measurement (timing cache), not a model.
    std::map<std::string, std::string> sources;
    if (auto c = op->getAttrOfType<mlir::DictionaryAttr>(kPlacementSourcesAttr))
      for (const mlir::NamedAttribute& a : c)
        if (auto s = llvm::dyn_cast<mlir::StringAttr>(a.getValue()))
          sources[a.getName().str()] = s.str();
    std::string candText;
    for (const std::string& c : candidates) {
      candText += (candText.empty() ? "" : ", ") + c;
      if (costs.count(c)) candText += " " + formatSeconds(costs[c]);
      if (sources.count(c))
        candText += sources[c] == "measured" ? " (measured)" : " (in a measured group)";
    }
    auto reasonAttr = op->getAttrOfType<mlir::StringAttr>(kPlacementReasonAttr);
    std::string reason = reasonAttr ? reasonAttr.str() : "";
    auto refused = op->getAttrOfType<mlir::StringAttr>(kFusionRefusedAttr);
    std::string fusion = !group.empty() ? "fused in " + group
                         : refused        ? "not fused: " + refused.str()
                                          : "";
    // The fusion the placer's costs assumed (placement_fusion: the producer it fuses into and
    // the devices where it does). Said only when the fuse pass did not fuse the op after all.
    nlohmann::json assumed;
    if (auto f = op->getAttrOfType<mlir::DictionaryAttr>(kPlacementFusionAttr)) {
      auto into = f.getAs<mlir::StringAttr>("into");
      std::vector<std::string> devs;
      if (auto d = f.getAs<mlir::ArrayAttr>("devices"))
        for (mlir::Attribute a : d)
          if (auto str = llvm::dyn_cast<mlir::StringAttr>(a)) devs.push_back(str.str());
      if (into) {
        assumed = {{"into", into.str()}, {"devices", devs}};
        bool here = std::find(devs.begin(), devs.end(), device) != devs.end();
        mlir::Operation* producer =
            op->getNumOperands() ? op->getOperand(0).getDefiningOp() : nullptr;
        bool split = producer && llvm::isa<CopyOp>(producer);
        if (group.empty() && here)
          fusion += (fusion.empty() ? "" : "; ") +
                    (split ? "fusible into " + into.str() +
                                 " here, but it is on another device (the copy carries the "
                                 "fusion forfeited)"
                           : "costed as fused into " + into.str() + " but not fused");
      }
    }
    // Producer duplication (--tandem-fuse): a copy of this op runs in each reader's group, or
    // why it was materialised instead.
    auto dup = op->getAttrOfType<mlir::StringAttr>(kFusionDuplicatedAttr);
    auto notDup = op->getAttrOfType<mlir::StringAttr>(kFusionNotDuplicatedAttr);
    if (dup) fusion += (fusion.empty() ? "" : ", ") + std::string("duplicated: ") + dup.str();
    if (notDup) fusion += (fusion.empty() ? "" : "; ") + std::string("not duplicated: ") + notDup.str();
    // Devices that have a kernel for the dtypes but refuse this instance.
    nlohmann::json refusedBy;
    if (auto r = op->getAttrOfType<mlir::DictionaryAttr>(kPlacementRefusedAttr))
      for (const mlir::NamedAttribute& a : r)
        if (auto why = llvm::dyn_cast<mlir::StringAttr>(a.getValue())) {
          refusedBy[a.getName().str()] = why.str();
          candText += "; not " + a.getName().str() + ": " + why.str();
        }
    logLines_.push_back(name + " (" + opType + "): " + device + " [" + reason +
                        "] candidates: " + candText + (fusion.empty() ? "" : "; " + fusion));
    nlohmann::json entry = {{"name", name},
                            {"op_type", opType},
                            {"device", device},
                            {"reason", reason},
                            {"candidates", candidates},
                            {"estimated_seconds", costs},
                            {"location", location}};
    if (!sources.empty()) entry["estimate_sources"] = sources;
    if (!group.empty()) entry["fused_in"] = group;
    if (refused) entry["fusion_refused"] = refused.str();
    if (dup) entry["fusion_duplicated"] = dup.str();
    if (notDup) entry["fusion_not_duplicated"] = notDup.str();
    if (!assumed.is_null()) entry["placement_fusion"] = assumed;
    if (!refusedBy.is_null()) entry["refused_by"] = refusedBy;
    ops_.push_back(std::move(entry));
    // A duplicated op is logged once per copy but is one op of the graph (and one kernel
    // before fusion).
    if (!dup || duplicatedSeen_.insert(device + "\n" + name + "\n" + location).second)
      opsPerDevice_[device] += 1;
  }

  void writeLog(const std::map<std::string, int64_t>& peak,
                const std::map<std::string, int64_t>& unplanned) {
    std::ostringstream text;
    for (const std::string& line : logLines_) text << line << "\n";
    std::string opsText, peakText;
    for (const auto& [d, n] : opsPerDevice_)
      opsText += (opsText.empty() ? "" : ", ") + d + " " + std::to_string(n);
    for (const auto& [d, n] : peak)
      peakText += (peakText.empty() ? "" : ", ") + d + " " + std::to_string(n) + " bytes";
    std::string kernelsText;
    for (const auto& [d, n] : opsPerDevice_)
      kernelsText += (kernelsText.empty() ? "" : ", ") + d + " " + std::to_string(n) + " -> " +
                     std::to_string(kernelsAfter_.count(d) ? kernelsAfter_.at(d) : 0);
    std::string unplannedText;
    for (const auto& [d, n] : peak)
      unplannedText += (unplannedText.empty() ? "" : ", ") + d + " " + std::to_string(n) + " of " +
                       std::to_string(unplanned.count(d) ? unplanned.at(d) : 0) + " bytes";
    text << "summary: ops: " << (opsText.empty() ? "none" : opsText)
         << "; copies: " << copies_.size() << " (" << bytesMoved_
         << " bytes moved); arena peak: " << (peakText.empty() ? "none" : peakText) << "\n";
    text << "kernels before -> after fusion: " << (kernelsText.empty() ? "none" : kernelsText)
         << "; arena peak of all intermediates: " << (unplannedText.empty() ? "none" : unplannedText)
         << "\n";
    // Estimated time of this plan and of every baseline placement of the same graph.
    nlohmann::json estimates = nlohmann::json::object();
    if (auto e = module_->getAttrOfType<mlir::DictionaryAttr>(kPlacementEstimatesAttr)) {
      std::string line;
      for (const mlir::NamedAttribute& a : e) {
        auto d = llvm::cast<mlir::DictionaryAttr>(a.getValue());
        double total = llvm::cast<mlir::FloatAttr>(d.get("total_s")).getValueAsDouble();
        double makespan = llvm::cast<mlir::FloatAttr>(d.get("makespan_s")).getValueAsDouble();
        estimates[a.getName().str()] = {{"total_seconds", total}, {"makespan_seconds", makespan}};
        if (a.getName() != "plan")
          line += (line.empty() ? "" : ", ") + a.getName().str() + " " + formatSeconds(total);
      }
      auto policy = module_->getAttrOfType<mlir::StringAttr>(kPlacementPolicyAttr);
      if (estimates.contains("plan"))
        text << "estimated time: plan (" << (policy ? policy.str() : "cost") << ") "
             << formatSeconds(estimates["plan"]["total_seconds"].get<double>())
             << "; baselines: " << line << "\n";
    }
    result_->placementLogText = text.str();
    result_->placementLogDot = dot();

    std::vector<std::string> devices;
    if (auto list = module_->getAttrOfType<mlir::ArrayAttr>(kDevicesAttr))
      for (mlir::Attribute a : list) devices.push_back(llvm::cast<mlir::StringAttr>(a).str());
    nlohmann::json j;
    j["version"] = 1;
    j["model"] = plan_.model_name();
    j["devices"] = devices;
    j["ops"] = ops_.empty() ? nlohmann::json::array() : nlohmann::json(ops_);
    j["copies"] = copies_.empty() ? nlohmann::json::array() : nlohmann::json(copies_);
    j["constants"] = {{"count_per_device", constantsPerDevice_},
                      {"bytes_per_device", constantBytesPerDevice_}};
    j["summary"] = {{"ops_per_device", opsPerDevice_},
                    {"copies", copies_.size()},
                    {"bytes_moved", bytesMoved_},
                    {"arena_peak_bytes", peak},
                    {"arena_unplanned_bytes", unplanned},
                    {"kernels_before_fusion", opsPerDevice_},
                    {"kernels_after_fusion", kernelsAfter_},
                    {"estimates", estimates}};
    // Node names come from the model file: replace invalid UTF-8 rather than throw.
    result_->placementLogJson = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    plan_.set_placement_log_json(result_->placementLogJson);
  }

  // The name the place pass knew a value by: a tandem.fused result is the body value it yields
  // (the group itself is named after its first member).
  static std::string placedValueName(mlir::Value v) {
    if (auto f = v.getDefiningOp<FusedOp>()) {
      mlir::Operation* yield = f.getBody().front().getTerminator();
      mlir::Value inner = yield->getOperand(llvm::cast<mlir::OpResult>(v).getResultNumber());
      if (inner.getDefiningOp()) return valueName(inner);
    }
    return valueName(v);
  }

  // Seconds the place pass estimated for copying `value` to `to`, or -1 when unknown.
  double copyEstimate(const std::string& value, const std::string& to) const {
    auto e = module_->getAttrOfType<mlir::DictionaryAttr>(kCopyEstimatesAttr);
    if (!e) return -1;
    auto f = llvm::dyn_cast_or_null<mlir::FloatAttr>(e.get(value + "->" + to));
    return f ? f.getValueAsDouble() : -1;
  }

  // The DOT node a value comes from: its producing op, or the copy that brought it; "" for
  // weights and graph inputs (left out to keep the picture readable).
  static std::string dotNameOf(mlir::Value v) {
    mlir::Operation* def = v.getDefiningOp();
    if (!def || llvm::isa<ConstantOp, NoneOp>(def)) return "";
    if (auto copy = llvm::dyn_cast<CopyOp>(def))
      return "copy " + valueName(copy.getInput()) + " -> " + copy.getTo().str();
    std::string n = nodeName(def->getLoc());
    return n.empty() ? valueName(def->getResult(0)) : n;
  }

  static std::string formatSeconds(double s) {
    char buf[32];
    if (s >= 1e-3) std::snprintf(buf, sizeof buf, "%.3gms", s * 1e3);
    else if (s >= 1e-7 || s == 0) std::snprintf(buf, sizeof buf, "%.3gus", s * 1e6);
    else std::snprintf(buf, sizeof buf, "%.3gns", s * 1e9);
    return buf;
  }

  // Graphviz: one node per op, filled by device; dataflow edges; copies as bold red edges
  // labelled with the bytes moved.
  std::string dot() const {
    static const char* palette[] = {"#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#fb9a99", "#ffff99"};
    std::map<std::string, std::string> colour;
    std::ostringstream os;
    auto quote = [](const std::string& s) {
      std::string q = "\"";
      // Escape quotes only: labels carry DOT's own "\n" line breaks.
      for (char c : s) q += c == '"' ? std::string("\\\"") : std::string(1, c);
      return q + "\"";
    };
    os << "digraph placement {\n  rankdir=TB;\n  node [shape=box, style=filled];\n";
    for (const DotNode& n : dotNodes_) {
      if (!colour.count(n.device)) colour[n.device] = palette[colour.size() % 6];
      os << "  " << quote(n.name) << " [label=" << quote(n.name + "\\n" + n.opType + " @ " + n.device)
         << ", fillcolor=" << quote(colour[n.device]) << "];\n";
    }
    for (const auto& [from, to] : dotEdges_) os << "  " << quote(from) << " -> " << quote(to) << ";\n";
    for (const DotCopy& c : dotCopies_)
      os << "  " << quote("copy " + c.value + " -> " + c.to) << " [shape=cds, fillcolor=\"#e31a1c\", "
         << "fontcolor=white, label=" << quote("copy " + c.value + "\\n" + c.from + " -> " + c.to + "\\n" +
                                             std::to_string(c.bytes) + " B") << "];\n";
    os << "  subgraph cluster_legend { label=\"devices\";\n";
    for (const auto& [d, c] : colour)
      os << "    " << quote("device " + d) << " [label=" << quote(d) << ", fillcolor=" << quote(c) << "];\n";
    os << "  }\n}\n";
    return os.str();
  }

  struct DotNode { std::string name, opType, device; };
  struct DotCopy { std::string value, from, to; int64_t bytes; };
  std::vector<DotNode> dotNodes_;
  std::vector<DotCopy> dotCopies_;
  std::vector<std::pair<std::string, std::string>> dotEdges_;

  mlir::ModuleOp module_;
  plan::Plan& plan_;
  CompileResult* result_;
  llvm::DenseMap<mlir::Value, int> ids_;
  std::set<int> outputNamed_;
  std::vector<std::string> logLines_;
  std::vector<nlohmann::json> ops_, copies_;
  std::set<std::string> duplicatedSeen_;  // device, name, location of duplicated ops logged
  std::map<std::string, int64_t> opsPerDevice_, kernelsAfter_, constantsPerDevice_, constantBytesPerDevice_;
  int64_t bytesMoved_ = 0;
};

}  // namespace

mlir::LogicalResult emitPlan(mlir::ModuleOp module, CompileResult* result) {
  return PlanEmitter(module, result).run();
}

}  // namespace tandem

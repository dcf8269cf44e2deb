// The placement log's writers (compiler/PlacementLog.md): text, JSON and Graphviz DOT, fed by
// plan emission as it walks the final IR, so the log describes exactly the plan.
#include "compiler/PlacementLog.h"

#include <algorithm>
#include <sstream>

#include "compiler/IrConventions.h"
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"

namespace tandem {

void PlacementLogWriter::addConstant(const std::string& device, int64_t bytes) {
  constantsPerDevice_[device] += 1;
  constantBytesPerDevice_[device] += bytes;
}

void PlacementLogWriter::addVariable(const std::string& name, const std::string& device, int64_t bytes) {
  variablesPerDevice_[device] += 1;
  variableBytesPerDevice_[device] += bytes;
  logLines_.push_back("variable " + name + ": " + device + ", " + std::to_string(bytes) +
                      " bytes, resident (updated on " + device + " every run)");
}

void PlacementLogWriter::addVariableUpdate(const std::string& name, int64_t bytes, bool inPlace) {
  if (inPlace) {
    updateBytesInPlace_ += bytes;
    updatesInPlace_ += 1;
  } else {
    updateBytesCopied_ += bytes;
    copiedBack_.push_back(name);
  }
}

void PlacementLogWriter::addRunInput(const std::string& name, int64_t bytes) {
  runInputs_.push_back({name, bytes});
}
void PlacementLogWriter::addRunOutput(const std::string& name, int64_t bytes) {
  runOutputs_.push_back({name, bytes});
}

void PlacementLogWriter::addCopy(CopyOp copy, int64_t bytes, const std::string& location) {
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
                     {"location", location}});
  dotCopies_.push_back({value, copy.getFrom().str(), copy.getTo().str(), bytes});
  if (std::string from = dotNameOf(copy.getInput()); !from.empty())
    dotEdges_.push_back({from, "copy " + value + " -> " + copy.getTo().str()});
  bytesMoved_ += bytes;
}

void PlacementLogWriter::addStep(mlir::Operation* op, const std::string& name, const std::string& opType,
                               const std::string& device, const std::string& location) {
  kernelsAfter_[device] += 1;
  if (auto fused = llvm::dyn_cast<FusedOp>(op)) {
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
    return;
  }
  logOp(op, name, opType, device, location, "");
  dotNodes_.push_back({name, opType, device});
  for (mlir::Value v : op->getOperands())
    if (std::string from = dotNameOf(v); !from.empty()) dotEdges_.push_back({from, name});
}

void PlacementLogWriter::logOp(mlir::Operation* op, const std::string& name, const std::string& opType,
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
      // The copy sits between the fused pair: before this op (it was costed as the consumer)
      // or after it (as the producer).
      bool split = (producer && llvm::isa<CopyOp>(producer)) ||
                   llvm::any_of(op->getUsers(), [](mlir::Operation* u) { return llvm::isa<CopyOp>(u); });
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

void PlacementLogWriter::finish(const std::string& modelName, const std::map<std::string, int64_t>& peak,
                              const std::map<std::string, int64_t>& unplanned, CompileResult* result) {
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
  // What crosses per run: graph inputs in, graph outputs out, copies between devices; the
  // variables stay where they are.
  auto ioText = [](const std::vector<std::pair<std::string, int64_t>>& io) {
    std::string t;
    int64_t total = 0;
    for (const auto& [n, b] : io) {
      t += (t.empty() ? "" : ", ") + n + " " + std::to_string(b);
      total += b;
    }
    return std::to_string(total) + " bytes" + (t.empty() ? "" : " (" + t + ")");
  };
  text << "per run: in " << ioText(runInputs_) << "; out " << ioText(runOutputs_)
       << "; between devices " << bytesMoved_ << " bytes";
  if (!variablesPerDevice_.empty()) {
    std::string v;
    for (const auto& [d, n] : variablesPerDevice_)
      v += (v.empty() ? "" : ", ") + d + " " + std::to_string(n) + " (" +
           std::to_string(variableBytesPerDevice_[d]) + " bytes)";
    text << "; variables resident, not moved: " << v;
  }
  text << "\n";
  // What a step costs its variables besides the kernels: an update planned in place costs
  // nothing, one copied back costs a copy of its bytes on its device after every run.
  if (updatesInPlace_ + (int64_t)copiedBack_.size() > 0) {
    text << "variables: " << updateBytesInPlace_ << " bytes updated in place (" << updatesInPlace_
         << " of " << updatesInPlace_ + (int64_t)copiedBack_.size() << "), " << updateBytesCopied_
         << " bytes copied back per run";
    std::string names;
    for (const std::string& n : copiedBack_) names += (names.empty() ? "" : ", ") + n;
    if (!names.empty()) text << " (" << names << ")";
    text << "\n";
  }
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
  result->placementLogText = text.str();
  result->placementLogDot = dot();
  result->kernelsBeforeFusion = opsPerDevice_;
  result->kernelsAfterFusion = kernelsAfter_;

  std::vector<std::string> devices;
  if (auto list = module_->getAttrOfType<mlir::ArrayAttr>(kDevicesAttr))
    for (mlir::Attribute a : list) devices.push_back(llvm::cast<mlir::StringAttr>(a).str());
  nlohmann::json j;
  j["version"] = 1;
  j["model"] = modelName;
  j["devices"] = devices;
  // Moved, not copied: a large model has hundreds of thousands of entries.
  auto arrayOf = [](std::vector<nlohmann::json>& v) {
    nlohmann::json a = nlohmann::json::array();
    a.get_ref<nlohmann::json::array_t&>() = std::move(v);
    return a;
  };
  const size_t numCopies = copies_.size();
  j["ops"] = arrayOf(ops_);
  j["copies"] = arrayOf(copies_);
  j["constants"] = {{"count_per_device", constantsPerDevice_},
                    {"bytes_per_device", constantBytesPerDevice_}};
  nlohmann::json runIn = nlohmann::json::array(), runOut = nlohmann::json::array();
  for (const auto& [n, b] : runInputs_) runIn.push_back({{"name", n}, {"bytes", b}});
  for (const auto& [n, b] : runOutputs_) runOut.push_back({{"name", n}, {"bytes", b}});
  j["variables"] = {{"count_per_device", variablesPerDevice_},
                    {"bytes_per_device", variableBytesPerDevice_},
                    {"bytes_updated_in_place", updateBytesInPlace_},
                    {"bytes_copied_back", updateBytesCopied_},
                    {"copied_back", copiedBack_}};
  j["per_run"] = {{"inputs", runIn}, {"outputs", runOut}, {"bytes_between_devices", bytesMoved_}};
  j["summary"] = {{"ops_per_device", opsPerDevice_},
                  {"copies", numCopies},
                  {"bytes_moved", bytesMoved_},
                  {"arena_peak_bytes", peak},
                  {"arena_unplanned_bytes", unplanned},
                  {"kernels_before_fusion", opsPerDevice_},
                  {"kernels_after_fusion", kernelsAfter_},
                  {"estimates", estimates}};
  // Node names come from the model file: replace invalid UTF-8 rather than throw.
  result->placementLogJson = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The name the place pass knew a value by: a tandem.fused result is the body value it yields
// (the group itself is named after its first member).
std::string PlacementLogWriter::placedValueName(mlir::Value v) {
  if (auto f = v.getDefiningOp<FusedOp>()) {
    mlir::Operation* yield = f.getBody().front().getTerminator();
    mlir::Value inner = yield->getOperand(llvm::cast<mlir::OpResult>(v).getResultNumber());
    if (inner.getDefiningOp()) return valueName(inner);
  }
  return valueName(v);
}

// Seconds the place pass estimated for copying `value` to `to`, or -1 when unknown.
double PlacementLogWriter::copyEstimate(const std::string& value, const std::string& to) const {
  auto e = module_->getAttrOfType<mlir::DictionaryAttr>(kCopyEstimatesAttr);
  if (!e) return -1;
  auto f = llvm::dyn_cast_or_null<mlir::FloatAttr>(e.get(value + "->" + to));
  return f ? f.getValueAsDouble() : -1;
}

// The DOT node a value comes from: its producing op, or the copy that brought it; "" for
// weights and graph inputs (left out to keep the picture readable).
std::string PlacementLogWriter::dotNameOf(mlir::Value v) {
  mlir::Operation* def = v.getDefiningOp();
  if (!def || llvm::isa<ConstantOp, NoneOp>(def)) return "";
  if (auto copy = llvm::dyn_cast<CopyOp>(def))
    return "copy " + valueName(copy.getInput()) + " -> " + copy.getTo().str();
  std::string n = nodeName(def->getLoc());
  return n.empty() ? valueName(def->getResult(0)) : n;
}

std::string PlacementLogWriter::formatSeconds(double s) {
  char buf[32];
  if (s >= 1e-3) std::snprintf(buf, sizeof buf, "%.3gms", s * 1e3);
  else if (s >= 1e-7 || s == 0) std::snprintf(buf, sizeof buf, "%.3gus", s * 1e6);
  else std::snprintf(buf, sizeof buf, "%.3gns", s * 1e9);
  return buf;
}

// Graphviz: one node per op, filled by device; dataflow edges; copies as bold red edges
// labelled with the bytes moved.
std::string PlacementLogWriter::dot() const {
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

}  // namespace tandem

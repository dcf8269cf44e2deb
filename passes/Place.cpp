// --tandem-place: put every op on a device at minimum estimated time under the cost model (or a
// baseline policy), honouring pins, and record the candidates, their costs and the reason.
#include <algorithm>
#include <map>
#include <set>

#include "compiler/OpBuilding.h"
#include "compiler/placement/CostModel.h"
#include "compiler/placement/KernelCapabilities.h"
#include "compiler/placement/OpWork.h"
#include "compiler/placement/Placer.h"
#include "compiler/TandemDialect.h"
#include "compiler/IrConventions.h"
#include "passes/FuseCuda.h"
#include "passes/Passes.h"
#include "runtime/Kernel.h"
#include "runtime/OpTable.h"

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

// The placement problem of one module: the ops (with their work, feasibility and pins), the
// values (consumers, bytes, transfer times) and the fusion discounts, built from the IR.
struct Problem {
  placement::PlacementProblem graph;
  std::vector<std::string> targets;  // device names, by index
  int numDevices = 0, host = 0;
  llvm::DenseMap<mlir::Operation*, int> opIndex;
  std::vector<mlir::Operation*> ops;
  std::vector<OpWork> works;  // per op, for the fusion discount
  // Per (op, device): 1 where the op's cost is the runtime's measured time, 2 where the op
  // is fused into a measured group head (addFusionDiscounts); read by the log.
  std::vector<char> measuredOn;
  llvm::SmallVector<ConstantOp> constants;
  llvm::DenseMap<mlir::Value, int> valueIndex;
  // Per op: the producer it fuses into and the devices where it does.
  std::vector<std::pair<std::string, std::vector<std::string>>> fusibleInto;
};

uint64_t bytesOf(mlir::Value v) {
  auto r = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
  if (!r || !r.hasStaticShape()) return 0;
  return (uint64_t)r.getNumElements() * dtypeSize(mlirToDType(r.getElementType()));
}

// The text options of tandem-opt, parsed into the form the compiler hands over.
bool parseTextConfig(mlir::ModuleOp module, const std::vector<std::string>& devices,
                     const std::string& target, const std::string& profile,
                     const std::string& policy, const std::vector<std::string>& pins, bool strict,
                     PlaceConfig* cfg) {
  std::string targetList = target;
  if (targetList.empty())
    for (const std::string& d : devices) targetList += (targetList.empty() ? "" : ",") + d;
  if (targetList.empty()) targetList = "cpu";  // tandem-opt's default: the CPU alone
  DeviceSet set;
  Status st = DeviceSet::parse(targetList, &set);
  if (!st.isOk()) {
    module.emitError() << "tandem-place: " << st.message();
    return false;
  }
  cfg->devices = std::move(set);
  cfg->profilePath = profile;
  std::optional<placement::PlacementPolicy> chosen = placement::parsePolicy(policy);
  if (!chosen) {
    module.emitError() << "tandem-place: unknown placement policy '" << policy
                       << "' (expected cost, greedy, ort, cpu or gpu)";
    return false;
  }
  cfg->policy = *chosen;
  for (const std::string& p : pins) {
    size_t eq = p.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == p.size()) {
      module.emitError() << "tandem-place: bad pin '" << p << "'; expected NODE=DEVICE";
      return false;
    }
    std::string dev = canonicalDevice(p.substr(eq + 1));
    cfg->pins.push_back({p.substr(0, eq), dev.empty() ? p.substr(eq + 1) : dev});
  }
  cfg->strict = strict;
  return true;
}

class PlacePass : public impl::TandemPlaceBase<PlacePass> {
 public:
  using TandemPlaceBase::TandemPlaceBase;
  explicit PlacePass(PlaceConfig config) : config_(std::move(config)) {}

  void runOnOperation() override {
    // 1. Devices, links and costs: a CostModel for the configured devices (or the live machine).
    // 2. The problem: one PlacementOp per computing op (feasibility from the registry or the
    //    capability table, time per feasible device, pin), one PlacementValue per op result,
    //    graph input and constant (consumers, bytes, transfer time per device pair), and the
    //    fusion discounts.
    // 3. Solve with the chosen policy (placeGraph), and with every baseline for the log.
    // 4. Write device / reason / candidates / costs on each op; constants go to their first
    //    consumer's device, graph inputs arrive on the host.
    mlir::ModuleOp module = getOperation();
    mlir::func::FuncOp main = getMainFunc(module);
    if (!main) {
      module.emitError("tandem-place: module has no func.func @main");
      return signalPassFailure();
    }
    PlaceConfig cfg;
    if (config_) cfg = *config_;
    else if (!parseTextConfig(module, devices, target, profile, policy, pins, strict, &cfg))
      return signalPassFailure();
    std::unique_ptr<CostModel> model;
    Status st = buildCostModel(cfg.devices ? *cfg.devices : DeviceSet::live(), cfg.profilePath,
                               CostOptions{}, &model);
    if (!st.isOk()) {
      module.emitError() << "tandem-place: " << st.message();
      return signalPassFailure();
    }
    // Where the runtime measured a kernel on this machine (its timing cache), that time
    // replaces the roofline for the live CPU; TANDEM_TUNING=off leaves the model alone.
    if (!timingCacheOffByEnvironment()) model->loadKernelTimings("");
    Problem pr;
    if (!addOps(main, cfg, *model, &pr)) return signalPassFailure();
    addValues(main, *model, &pr);
    addFusionDiscounts(*model, &pr);
    placement::PlaceResult result;
    if (!solve(module, cfg, pr, &result)) return signalPassFailure();
    annotate(main, pr, result);
  }

 private:
  std::optional<PlaceConfig> config_;

  // The devices and one PlacementOp per computing op; false after an error (no kernel
  // anywhere).
  bool addOps(mlir::func::FuncOp main, const PlaceConfig& cfg, CostModel& model, Problem* pr) {
    mlir::MLIRContext* ctx = &getContext();
    placement::PlacementProblem& problem = pr->graph;
    const DeviceSet& set = model.devices();
    pr->numDevices = (int)set.size();
    const int numDevices = pr->numDevices;
    for (int d = 0; d < numDevices; ++d) {
      const DeviceSpec& spec = set.device(d);
      pr->targets.push_back(spec.name);
      problem.devices.push_back({spec.name, deviceKindName(spec.kind), (uint64_t)spec.memoryCapacityBytes});
    }
    pr->host = set.hostIndex();
    const std::vector<std::string>& targets = pr->targets;
    std::map<std::string, std::string> pinByNode;
    std::map<std::string, bool> pinUsed;
    for (const placement::NodePin& p : cfg.pins) {
      pinByNode[p.node] = p.device;
      pinUsed[p.node] = false;
    }
    auto growMeasured = [&] { pr->measuredOn.resize((problem.ops.size() + 1) * numDevices, 0); };
    bool ok = true;
    // The plan's weights, for the cache rule of the cost model (OpWork::planConstantBytes).
    double planConstantBytes = 0;
    for (ConstantOp c : main.getBody().front().getOps<ConstantOp>())
      planConstantBytes += (double)bytesOf(c.getResult());
    for (mlir::Operation& op : main.getBody().front()) {
      if (auto c = llvm::dyn_cast<ConstantOp>(op)) {
        pr->constants.push_back(c);
        continue;
      }
      if (!llvm::isa_and_present<TandemDialect>(op.getDialect()) || llvm::isa<NoneOp, CopyOp>(op))
        continue;
      std::string type = onnxOpType(&op);
      std::string node = nodeName(op.getLoc());
      placement::PlacementOp pop;
      pop.name = node.empty() ? type + "@" + locationString(op.getLoc()) : node;
      pop.opType = type;
      std::vector<DType> dts;
      std::vector<TensorType> ins, outs;
      for (mlir::Value v : op.getOperands()) {
        if (!llvm::isa<mlir::RankedTensorType>(v.getType())) {
          ins.push_back(TensorType{});
          continue;
        }
        ins.push_back(tensorTypeOf(v));
        dts.push_back(ins.back().dtype);
        if (v.getDefiningOp<ConstantOp>() || isVariableArg(v)) pop.memoryBytes += bytesOf(v);
      }
      for (mlir::Value r : op.getResults()) {
        outs.push_back(tensorTypeOf(r));
        pop.memoryBytes += bytesOf(r);
      }
      AttrMap attrs = toAttrMap(&op);
      OpWork work = estimateOpWork(type, ins, outs, attrs);
      for (mlir::Value v : op.getOperands())
        if (v.getDefiningOp<ConstantOp>()) work.constantBytes += (double)bytesOf(v);
      work.planConstantBytes = planConstantBytes;
      // A reshaping op whose input it reads last shares the input's buffer (plan-memory): no
      // copy, only the step's dispatch.
      if (work.reshape && op.getNumOperands() > 0 && op.getOperand(0).hasOneUse() &&
          !op.getOperand(0).getDefiningOp<ConstantOp>())
        work.bytes = 0;
      // Beyond dtypes: a backend may refuse this instance's attributes or shapes at load
      // (deviceKindRejects); such a device is not a candidate, and the log says why.
      KernelContext kctx;
      kctx.opType = type;
      kctx.nodeName = node;
      kctx.attrs = &attrs;
      kctx.inputTypes = ins;
      kctx.outputTypes = outs;
      static const Tensor kConstantMarker;
      for (mlir::Value v : op.getOperands())
        kctx.constInputs.push_back(v.getDefiningOp<ConstantOp>() ? &kConstantMarker : nullptr);
      work.measuredCpuSeconds = model.measuredCpuSeconds(kctx);
      growMeasured();
      bool anyFeasible = false;
      std::vector<std::pair<std::string, std::string>> refusals;
      for (int d = 0; d < numDevices; ++d) {
        bool feasible = deviceKindSupports(problem.devices[d].kind, type, dts);
        if (feasible) {
          std::string why = deviceKindRejects(problem.devices[d].kind, kctx);
          if (!why.empty()) {
            feasible = false;
            refusals.push_back({targets[d], why});
          }
        }
        OpCost c = feasible ? model.opCost(work, d) : OpCost{};
        pop.computeSeconds.push_back(feasible ? c.seconds : placement::kNoKernel);
        if (feasible && std::string(c.source) == "measured") pr->measuredOn[problem.ops.size() * numDevices + d] = 1;
        anyFeasible |= feasible;
      }
      if (!refusals.empty()) {
        llvm::SmallVector<mlir::NamedAttribute> r;
        for (auto& [dev, why] : refusals)
          r.push_back({mlir::StringAttr::get(ctx, dev), mlir::StringAttr::get(ctx, why)});
        op.setAttr(kPlacementRefusedAttr, mlir::DictionaryAttr::get(ctx, r));
      }
      if (!anyFeasible) {
        op.emitError() << "no kernel for " << type << " on (" << dtypesText(dts)
                       << ") on any of: " << joined(targets);
        ok = false;
        continue;
      }
      // A training metric follows the loss (its colocation group) and is free for the decision:
      // a few tiny ops must not move the loss, and the gradient with it, to another device.
      if (op.hasAttr(kMetricAttr))
        for (double& s : pop.computeSeconds)
          if (s != placement::kNoKernel) s = 0;
      // Training state: the op reads or updates a variable, or is part of its optimizer update
      // (compiler/training/Variables.h).
      if (auto groups = op.getAttrOfType<mlir::ArrayAttr>(kColocationAttr))
        for (mlir::Attribute g : groups) pop.colocation.push_back(llvm::cast<mlir::StringAttr>(g).str());
      std::string pin;
      if (auto it = pinByNode.find(node); !node.empty() && it != pinByNode.end()) {
        pin = it->second;
        pinUsed[node] = true;
      } else {
        pin = deviceOfOp(&op);
      }
      if (!pin.empty()) {
        std::string canon = canonicalDevice(pin);
        pop.pin = placement::Pin{canon.empty() ? pin : canon, cfg.strict};
      }
      pr->opIndex[&op] = (int)problem.ops.size();
      pr->ops.push_back(&op);
      pr->works.push_back(work);
      problem.ops.push_back(std::move(pop));
    }
    // compileModule refuses a pin naming no node before any pass runs; one that matches
    // nothing here named an op that canonicalize folded away (or came from tandem-opt).
    for (const auto& [node, used] : pinUsed)
      if (!used) main.emitWarning() << "tandem-place: pin '" << node << "' matches no op (folded away?)";
    return ok;
  }

  // One PlacementValue per graph input, constant and op result.
  void addValues(mlir::func::FuncOp main, const CostModel& model, Problem* pr) {
    placement::PlacementProblem& problem = pr->graph;
    const int numDevices = pr->numDevices, host = pr->host;

    // Values: op results, graph inputs (on the host), constants (uploaded once, no transfer).
    auto addValue = [&](mlir::Value v, placement::ValueSource source, int producer) {
      pr->valueIndex[v] = (int)problem.values.size();
      placement::PlacementValue pv;
      pv.name = valueName(v);
      pv.source = source;
      pv.producer = producer;
      if (source == placement::ValueSource::GraphInput) pv.inputDevice = host;
      pv.bytes = bytesOf(v);
      if (auto r = llvm::dyn_cast<mlir::RankedTensorType>(v.getType()))
        pv.elements = r.hasStaticShape() ? r.getNumElements() : -1;
      for (mlir::OpOperand& use : v.getUses()) {
        mlir::Operation* user = use.getOwner();
        if (llvm::isa<mlir::func::ReturnOp>(user)) {
          // A variable's update stays on the variable's device: it never crosses to the host.
          if (isVariableUpdateResult(main, use.getOperandNumber())) continue;
          if (std::find(pv.outputDevices.begin(), pv.outputDevices.end(), host) == pv.outputDevices.end())
            pv.outputDevices.push_back(host);
          continue;
        }
        auto it = pr->opIndex.find(user);
        if (it != pr->opIndex.end()) pv.consumers.push_back(it->second);
      }
      if (source != placement::ValueSource::Constant) {
        // Graph inputs and outputs live in the caller's ordinary (pageable) host memory: the
        // driver stages those copies through a pinned bounce buffer. Copies between steps use
        // the runtime's own pinned staging buffers.
        HostMemory m = source == placement::ValueSource::GraphInput || !pv.outputDevices.empty()
                           ? HostMemory::Pageable
                           : HostMemory::Pinned;
        // A value read by ops mid-run is a crossing (a GPU-to-host one makes the host wait for
        // the GPU and restarts its queue); one only returned crosses at the end of the run,
        // where the host waits for the GPU once (CostModel.h).
        const bool readMidRun = !pv.consumers.empty();
        pv.transferSeconds.assign(numDevices * numDevices, 0.0);
        for (int a = 0; a < numDevices; ++a)
          for (int b = 0; b < numDevices; ++b)
            if (a != b)
              pv.transferSeconds[a * numDevices + b] =
                  readMidRun ? model.crossingTime(a, b, pv.bytes, m)
                             : model.returnTime(a, b, pv.bytes, m);
      }
      problem.values.push_back(std::move(pv));
    };
    // A variable is resident where its colocation group runs, which holds the op that
    // computes its update: that op is its home. Its group's readers find it there; a reader
    // outside the group (a Dropout reading the step counter) gets a per-run copy, priced like
    // any value's. One whose update no placed op computes is priced like a weight.
    std::map<std::string, int> updaterOf;
    mlir::Operation* ret = main.getBody().front().getTerminator();
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      if (auto name = main.getResultAttrOfType<mlir::StringAttr>(i, kVariableUpdateAttr))
        if (auto it = pr->opIndex.find(ret->getOperand(i).getDefiningOp()); it != pr->opIndex.end())
          updaterOf[name.str()] = it->second;
    for (mlir::BlockArgument arg : main.getArguments()) {
      if (!isVariableArg(arg)) {
        addValue(arg, placement::ValueSource::GraphInput, placement::kNone);
        continue;
      }
      auto it = updaterOf.find(valueName(arg));
      if (it == updaterOf.end()) addValue(arg, placement::ValueSource::Constant, placement::kNone);
      else addValue(arg, placement::ValueSource::Variable, it->second);
    }
    for (ConstantOp c : pr->constants) addValue(c.getResult(), placement::ValueSource::Constant, placement::kNone);
    for (size_t i = 0; i < pr->ops.size(); ++i)
      for (mlir::Value r : pr->ops[i]->getResults()) addValue(r, placement::ValueSource::Op, (int)i);
  }

  void addFusionDiscounts(const CostModel& model, Problem* pr) {
    placement::PlacementProblem& problem = pr->graph;
    const int numDevices = pr->numDevices;
    const std::vector<mlir::Operation*>& ops = pr->ops;

    // Fusion: a fused group runs as one kernel, so all but one of its members lose their
    // dispatch/launch and the memory pass of their own (r_d: dispatch + memory time beyond the
    // arithmetic) on device d, where the fuse pass's own rules (cpuFusesIntoProducer on CPU
    // devices, cudaFusesIntoProducer on cuda) join them. Each discount belongs to one edge
    // producer -> consumer of the group (a value with one reader, so the edge is the value):
    // the op it discounts costs r_d less on d, and the value pays r_d more to cross to or from
    // d (splitting the pair forfeits the fusion). For the pair this is the energy -r_d when both
    // are on d, 0 otherwise: submodular, so the min cut stays exact.
    //  - Both ops element-wise loop members (any operand): the producer is discounted (its
    //    only reader is this consumer, so no other edge discounts it), else, when an epilogue
    //    already discounted it, the consumer. Element-wise groups are in-trees (an optimizer
    //    update, a gradient's sum of products) in which every member but the root has one
    //    reader: all but the root are discounted and the group pays one launch. (Discounting
    //    the consumer of operand 0 only, as before, made every leaf of the tree pay one: an
    //    Adam update cost 7 launches on a GPU where it runs as one kernel.)
    //  - Otherwise operand 0 only (an epilogue, a row group): the consumer is discounted.
    // Where the producer's cost on d is measured, or it is itself fused into a measured head,
    // the measurement was of the whole fused step (`tandem tune` records a group's time under
    // its head, runtime/Tuning.h stepOpTimingKey): the consumer then adds nothing, r_d = its
    // cost.
    pr->fusibleInto.assign(ops.size(), {});
    std::vector<char> discounted(ops.size() * numDevices, 0);
    // Discounts op `i` on device `d` for the edge carried by value `pv` (produced on d when
    // `producerSide`, read on d otherwise).
    auto discount = [&](size_t i, int d, double saved, placement::PlacementValue& pv,
                        bool producerSide, const std::string& partner) {
      placement::PlacementOp& pop = problem.ops[i];
      pop.computeSeconds[d] -= saved;
      for (int a = 0; a < numDevices; ++a)
        if (a != d) pv.transferSeconds[producerSide ? d * numDevices + a : a * numDevices + d] += saved;
      discounted[i * numDevices + d] = 1;
      pr->fusibleInto[i].first = partner;
      pr->fusibleInto[i].second.push_back(pr->targets[d]);
    };
    // r_d of op `i` on `d`: what fusion saves it.
    auto fusedSaving = [&](size_t i, int d) {
      OpCost c = model.opCost(pr->works[i], d);
      return std::min(problem.ops[i].computeSeconds[d], std::max(0.0, c.seconds - c.computeSec));
    };
    // The edge's value must have this one reader: a value read twice costs its own pass on a
    // device unless both readers join it. A variable's update also returned from @main is
    // still read once (it stays on its device; the fused kernel writes it as an extra output).
    mlir::func::FuncOp main = getMainFunc(getOperation());
    auto oneReader = [&](mlir::Value x) {
      int readers = 0;
      for (mlir::OpOperand& use : x.getUses())
        if (!llvm::isa<mlir::func::ReturnOp>(use.getOwner()) ||
            !isVariableUpdateResult(main, use.getOperandNumber()))
          ++readers;
      return readers == 1;
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      for (unsigned k = 0; k < ops[i]->getNumOperands(); ++k) {
        mlir::Value x = ops[i]->getOperand(k);
        auto producerIt = pr->opIndex.find(x.getDefiningOp());
        if (producerIt == pr->opIndex.end() || !oneReader(x) || !pr->valueIndex.count(x)) continue;
        mlir::Operation* producerOp = x.getDefiningOp();
        const size_t p = (size_t)producerIt->second;
        bool cpuFuses = cpuFusesIntoProducer(producerOp, ops[i]);
        bool cudaFuses = cudaFusesIntoProducer(producerOp, ops[i]);
        if (!cpuFuses && !cudaFuses) continue;
        placement::PlacementValue& pv = problem.values[pr->valueIndex[x]];
        // An epilogue member reads the anchor's result as operand 0, except an Add or Mul,
        // whose operands commute: PyTorch exports a Linear on 3-D input as Add(bias, MatMul)
        // and a residual as Add(x, block) (cpuFusesIntoProducer checks the other operand).
        const std::string ct = onnxOpType(ops[i]);
        const bool commutes = ct == "Add" || ct == "Mul";
        for (int d = 0; d < numDevices; ++d) {
          const std::string& kind = problem.devices[d].kind;
          bool fuses = kind == "cpu" ? cpuFuses : kind == "cuda" && cudaFuses;
          if (!fuses || !problem.ops[i].feasible(d) || !problem.ops[p].feasible(d)) continue;
          const bool measured = pr->measuredOn[p * numDevices + d];
          const uint32_t flag = kind == "cpu" ? kCpuLoop : kCudaExpr;
          const bool loop =
              fusion::loopFusible(producerOp, flag) && fusion::loopFusible(ops[i], flag);
          if (!loop && k != 0 && !(kind == "cpu" && commutes)) continue;
          bool consumerSide = !loop || measured || discounted[p * numDevices + d];
          if (consumerSide && discounted[i * numDevices + d]) continue;
          if (!consumerSide) {
            double saved = fusedSaving(p, d);
            if (saved > 0) discount(p, d, saved, pv, true, problem.ops[i].name);
            continue;
          }
          double saved = fusedSaving(i, d);
          if (measured) {
            saved = problem.ops[i].computeSeconds[d];
            pr->measuredOn[i * numDevices + d] = 2;
          }
          if (saved > 0) discount(i, d, saved, pv, false, problem.ops[p].name);
        }
      }
    }
  }

  // Solves with the chosen policy, then prices every baseline on the same graph for the log.
  bool solve(mlir::ModuleOp module, const PlaceConfig& cfg, const Problem& pr,
             placement::PlaceResult* out) {
    mlir::MLIRContext* ctx = &getContext();
    const placement::PlacementProblem& problem = pr.graph;
    const std::vector<mlir::Operation*>& ops = pr.ops;
    placement::PlacerOptions popts;
    popts.policy = cfg.policy;
    popts.strict = cfg.strict;
    placement::PlaceResult& result = *out;
    result = placement::placeGraph(problem, popts);
    if (!result.ok()) {
      // Report on the op the placer names ("op 'x' ..."), so the message carries its location.
      mlir::Operation* at = module;
      for (size_t i = 0; i < ops.size() && at == module.getOperation(); ++i)
        if (result.error.find("op '" + problem.ops[i].name + "'") != std::string::npos) at = ops[i];
      at->emitError() << "tandem-place: " << result.error;
      return false;
    }
    llvm::SmallVector<mlir::NamedAttribute> estimates;
    auto estimateAttr = [&](const placement::PlacementCost& c) {
      return mlir::DictionaryAttr::get(
          ctx, {mlir::NamedAttribute(mlir::StringAttr::get(ctx, "total_s"),
                                     mlir::FloatAttr::get(mlir::Float64Type::get(ctx), c.totalSeconds)),
                mlir::NamedAttribute(mlir::StringAttr::get(ctx, "makespan_s"),
                                     mlir::FloatAttr::get(mlir::Float64Type::get(ctx), c.makespanSeconds))});
    };
    estimates.push_back({mlir::StringAttr::get(ctx, "plan"), estimateAttr(result.placement.cost)});
    for (auto p : {placement::PlacementPolicy::Cost, placement::PlacementPolicy::Greedy,
                   placement::PlacementPolicy::Ort, placement::PlacementPolicy::Cpu,
                   placement::PlacementPolicy::Gpu}) {
      placement::PlacerOptions b;
      b.policy = p;
      // With one device every policy gives the same placement, so the same cost.
      placement::PlaceResult r =
          p == cfg.policy || pr.numDevices == 1 ? result : placement::placeGraph(problem, b);
      if (r.ok())
        estimates.push_back({mlir::StringAttr::get(ctx, placement::policyName(p)),
                             estimateAttr(r.placement.cost)});
    }
    module->setAttr(kPlacementEstimatesAttr, mlir::DictionaryAttr::get(ctx, estimates));
    llvm::SmallVector<mlir::NamedAttribute> copyTimes;
    for (const placement::PlacementCopy& c : result.placement.cost.copies)
      copyTimes.push_back({mlir::StringAttr::get(ctx, problem.values[c.value].name + "->" + pr.targets[c.to]),
                           mlir::FloatAttr::get(mlir::Float64Type::get(ctx), c.seconds)});
    module->setAttr(kCopyEstimatesAttr, mlir::DictionaryAttr::get(ctx, copyTimes));
    module->setAttr(kPlacementPolicyAttr, mlir::StringAttr::get(ctx, placement::policyName(cfg.policy)));
    return true;
  }

  // Records the answer on the ops, the constants and the graph inputs.
  void annotate(mlir::func::FuncOp main, const Problem& pr, const placement::PlaceResult& result) {
    mlir::MLIRContext* ctx = &getContext();
    mlir::ModuleOp module = getOperation();
    const placement::PlacementProblem& problem = pr.graph;
    const std::vector<mlir::Operation*>& ops = pr.ops;
    const std::vector<std::string>& targets = pr.targets;
    const int numDevices = pr.numDevices;
    auto strAttrs = [&](const std::vector<std::string>& v) {
      llvm::SmallVector<mlir::Attribute> attrs;
      for (const std::string& s : v) attrs.push_back(mlir::StringAttr::get(ctx, s));
      return mlir::ArrayAttr::get(ctx, attrs);
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      const placement::PlacementOp& pop = problem.ops[i];
      std::vector<std::string> candidates;
      llvm::SmallVector<mlir::NamedAttribute> costs;
      for (int d = 0; d < numDevices; ++d) {
        if (!pop.feasible(d)) continue;
        candidates.push_back(targets[d]);
        costs.push_back({mlir::StringAttr::get(ctx, targets[d]),
                         mlir::FloatAttr::get(mlir::Float64Type::get(ctx), pop.computeSeconds[d])});
      }
      mlir::Operation* op = ops[i];
      op->setAttr(kDeviceAttr, mlir::StringAttr::get(ctx, targets[result.placement.device[i]]));
      op->setAttr(kPlacementReasonAttr, mlir::StringAttr::get(ctx, result.placement.reason[i]));
      op->setAttr(kPlacementCandidatesAttr, strAttrs(candidates));
      op->setAttr(kPlacementCostsAttr, mlir::DictionaryAttr::get(ctx, costs));
      llvm::SmallVector<mlir::NamedAttribute> sources;
      for (int d = 0; d < numDevices; ++d)
        if (char m = pr.measuredOn[i * numDevices + d])
          sources.push_back({mlir::StringAttr::get(ctx, targets[d]),
                             mlir::StringAttr::get(ctx, m == 1 ? "measured" : "measured-group")});
      if (!sources.empty()) op->setAttr(kPlacementSourcesAttr, mlir::DictionaryAttr::get(ctx, sources));
      if (!pr.fusibleInto[i].second.empty())
        op->setAttr(kPlacementFusionAttr,
                    mlir::DictionaryAttr::get(
                        ctx, {mlir::NamedAttribute(mlir::StringAttr::get(ctx, "into"),
                                                   mlir::StringAttr::get(ctx, pr.fusibleInto[i].first)),
                              mlir::NamedAttribute(mlir::StringAttr::get(ctx, "devices"),
                                                   strAttrs(pr.fusibleInto[i].second))}));
    }
    // Weights go where they are first read (insert-transfers duplicates them for other devices,
    // loaded once at plan load); graph inputs arrive in host memory.
    for (ConstantOp c : pr.constants) {
      mlir::Operation* first = nullptr;
      for (mlir::Operation* user : c.getResult().getUsers())
        if (!deviceOfOp(user).empty() && (!first || user->isBeforeInBlock(first))) first = user;
      std::string device = first ? deviceOfOp(first) : targets[pr.host];
      std::string consumer = first ? nodeName(first->getLoc()) : "";
      if (first && consumer.empty()) consumer = onnxOpType(first);
      c->setAttr(kDeviceAttr, mlir::StringAttr::get(ctx, device));
      c->setAttr(kPlacementReasonAttr,
                 mlir::StringAttr::get(ctx, first ? "colocated(" + consumer + ")" : "default"));
      c->setAttr(kPlacementCandidatesAttr, strAttrs({device}));
    }
    // A variable lives where its update is computed (its colocation group; the copy back
    // after a run is then within one device), else where its first reader runs.
    auto ret = llvm::cast<mlir::func::ReturnOp>(main.getBody().front().getTerminator());
    for (mlir::BlockArgument arg : main.getArguments()) {
      std::string device = targets[pr.host];
      if (isVariableArg(arg)) {
        mlir::Operation* first = nullptr;
        for (mlir::Operation* user : arg.getUsers())
          if (!deviceOfOp(user).empty() && (!first || user->isBeforeInBlock(first))) first = user;
        if (first) device = deviceOfOp(first);
        for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
          auto var = main.getResultAttrOfType<mlir::StringAttr>(i, kVariableUpdateAttr);
          mlir::Operation* producer = ret.getOperand(i).getDefiningOp();
          if (var && var.getValue() == valueName(arg) && producer && !deviceOfOp(producer).empty())
            device = deviceOfOp(producer);
        }
      }
      main.setArgAttr(arg.getArgNumber(), kArgDeviceAttr, mlir::StringAttr::get(ctx, device));
    }
    module->setAttr(kDevicesAttr, strAttrs(targets));
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createPlacePass() { return std::make_unique<PlacePass>(); }
std::unique_ptr<mlir::Pass> createPlacePass(const TandemPlaceOptions& options) {
  return std::make_unique<PlacePass>(options);
}
std::unique_ptr<mlir::Pass> createPlacePass(PlaceConfig config) {
  return std::make_unique<PlacePass>(std::move(config));
}

}  // namespace tandem

// --tandem-plan-memory: liveness over the op order, then per-device arena offsets with TFLite's
// greedy-by-size strategy; variables' updates written in place where that is safe.
#include <algorithm>
#include <map>

#include "llvm/ADT/DenseSet.h"

#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"
#include "runtime/CheckedMath.h"
#include "runtime/OpTable.h"

namespace tandem {
#define GEN_PASS_DEF_TANDEMPLANMEMORY
#include "passes/Passes.h.inc"
}  // namespace tandem

namespace tandem {
namespace {

struct Buffer {
  mlir::Value value;
  int64_t first = 0;  // index of the producing op (-1: graph input, live from the start)
  int64_t last = 0;   // index of the last consumer (the return for graph outputs)
  int64_t size = 0;   // bytes, rounded up to the alignment
  int64_t offset = -1;
};

bool overlaps(const Buffer& a, const Buffer& b) { return a.first <= b.last && b.first <= a.last; }

// Greedy by size (Pisarchyk & Lee 2020, "Efficient Memory Management for Deep Neural Net
// Inference"; TFLite's ArenaPlanner): largest buffers first, each placed in the smallest gap
// between already-placed buffers that are live at the same time, or after the last of them.
// Returns the arena's peak bytes.
int64_t assignOffsets(std::vector<Buffer*>& buffers) {
  std::stable_sort(buffers.begin(), buffers.end(), [](const Buffer* a, const Buffer* b) {
    return a->size != b->size ? a->size > b->size : a->first < b->first;
  });
  std::vector<Buffer*> placed;  // kept sorted by offset
  int64_t peak = 0;
  for (Buffer* buf : buffers) {
    int64_t prevEnd = 0, best = -1, bestGap = INT64_MAX;
    for (Buffer* other : placed) {
      if (!overlaps(*buf, *other)) continue;
      int64_t gap = other->offset - prevEnd;
      if (gap >= buf->size && gap < bestGap) {
        best = prevEnd;
        bestGap = gap;
      }
      prevEnd = std::max(prevEnd, other->offset + other->size);
    }
    buf->offset = best >= 0 ? best : prevEnd;
    peak = std::max(peak, buf->offset + buf->size);
    auto at =
        std::upper_bound(placed.begin(), placed.end(), buf,
                         [](const Buffer* a, const Buffer* b) { return a->offset < b->offset; });
    placed.insert(at, buf);
  }
  return peak;
}

// Operands `op`'s kernel may overwrite with its result: element-wise kernels read each
// element before writing the same element (unary ops and operand 0 of binary ops, as oneDNN's
// in-place rule for binary is src0 == dst); a fused element-wise loop writes a chunk only
// after reading it, so any operand; a fused epilogue only its residual, which oneDNN's sum
// reads from the output buffer anyway. The reshaping ops (Identity, Flatten, Reshape, Squeeze,
// Unsqueeze) keep the row-major bytes, so sharing the buffer makes their copy vanish (their
// kernels skip a copy onto itself). The ops of the first and last kind are the op table's kInPlace
// rows.
llvm::SmallVector<mlir::Value> overwritableOperands(mlir::Operation* op) {
  if (auto fused = llvm::dyn_cast<FusedOp>(op)) {
    llvm::SmallVector<mlir::Value> out;
    if (fused.getKind() == "elementwise") {
      for (mlir::Value v : op->getOperands()) out.push_back(v);
      return out;
    }
    // On CUDA a gemm-epilogue's Add is a bias row that cuBLASLt's epilogue reads while it
    // writes the output: never shared (passes/FuseCuda.cpp).
    if (fused.getKind() == "gemm-epilogue" && deviceKindOf(deviceOfOp(op)) == "cuda") return out;
    // A row group (reduction, softmax, layernorm, add-layernorm) reads a row's loop operands
    // before it writes any output element of that row, so those of its loop members may be
    // overwritten; not the root's own operands (scale, bias, axes), read for every row. That
    // is the CPU row kernel's order; the CUDA Add + LayerNorm kernel rereads its inputs, so on
    // other devices nothing is shared.
    llvm::StringRef kind = fused.getKind();
    if (kind == "reduction" || kind == "softmax" || kind == "layernorm" ||
        kind == "add-layernorm") {
      if (deviceKindOf(deviceOfOp(op)) != "cpu") return out;
      mlir::Block& block = fused.getBody().front();
      mlir::Operation* root = block.getTerminator()->getPrevNode();
      for (mlir::BlockArgument arg : block.getArguments())
        if (!arg.use_empty() && llvm::all_of(arg.getUsers(), [&](mlir::Operation* u) {
              return u != root;
            }))
          out.push_back(op->getOperand(arg.getArgNumber()));
      return out;
    }
    // The epilogue's Add reads the running result and one block argument: the residual. Not
    // when the anchor reads that value too (y = conv(x) + x): a convolution must not write
    // over its own source.
    for (mlir::Operation& inner : fused.getBody().front())
      if (onnxOpType(&inner) == "Add")
        for (mlir::Value v : inner.getOperands())
          if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(v))
            if (arg.hasOneUse()) out.push_back(op->getOperand(arg.getArgNumber()));
    return out;
  }
  std::string type = onnxOpType(op);
  if (opHas(type, kInPlace) && op->getNumOperands() >= 1)
    return {op->getOperand(0)};
  return {};
}

// Whether `producer`, which computes variable `var`'s update, reads `var` only element by element
// at the index it writes (so writing the update over the variable is safe), or not at all: an
// element-wise tandem.fused reads each element of every full-size operand before it writes
// that element (CPU loop and CUDA generated kernel alike), and a plain kInPlace op reads its
// operand 0 that way. Anything else (a Gemm, a row group, `var` as a binary op's operand 1)
// may read an element after writing another, so its update keeps its own buffer.
bool readsOnlyAtWrittenIndex(mlir::Operation* producer, mlir::Value var) {
  if (llvm::none_of(producer->getOperands(), [&](mlir::Value v) { return v == var; })) return true;
  if (auto fused = llvm::dyn_cast<FusedOp>(producer)) return fused.getKind() == "elementwise";
  if (!opHas(onnxOpType(producer), kInPlace) || producer->getOperand(0) != var) return false;
  for (unsigned i = 1; i < producer->getNumOperands(); ++i)
    if (producer->getOperand(i) == var) return false;
  return true;
}

// The variables' updates that may be written straight into their variable's buffer (XLA's
// input/output aliasing, TensorFlow's AssignVariableOp on a resource variable): an update U of
// variable V produced by op P on V's device, of V's type, where (a) every other reader of V
// comes before P in the op order, so none of them sees the new value (the executor issues
// steps in this order; a reader on another stream, a Copy, gets an event P waits for, see
// Executable's planStreams), (b) P reads V only at the index it writes
// (readsOnlyAtWrittenIndex), and (c) V is not a graph output (the return reads it after P).
// U's own later readers read the new value, which is U. Marks each such update result with
// kVariableInPlaceAttr (and clears it on the others) and returns the values.
llvm::DenseSet<mlir::Value> planUpdatesInPlace(mlir::func::FuncOp main,
                                               const llvm::DenseMap<mlir::Operation*, int64_t>& index,
                                               bool enabled) {
  llvm::DenseSet<mlir::Value> inPlace;
  mlir::Block& body = main.getBody().front();
  auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
  std::map<std::string, mlir::BlockArgument> variables;
  for (mlir::BlockArgument arg : main.getArguments())
    if (isVariableArg(arg)) variables[valueName(arg)] = arg;
  mlir::UnitAttr unit = mlir::UnitAttr::get(main.getContext());
  for (unsigned i = 0; i < main.getNumResults(); ++i) {
    auto name = main.getResultAttrOfType<mlir::StringAttr>(i, kVariableUpdateAttr);
    if (!name) continue;
    main.removeResultAttr(i, mlir::StringAttr::get(main.getContext(), kVariableInPlaceAttr));
    auto it = variables.find(name.str());
    mlir::Value u = ret.getOperand(i);
    mlir::Operation* producer = u.getDefiningOp();
    if (!enabled || it == variables.end() || !producer || producer->getBlock() != &body ||
        llvm::isa<ConstantOp, NoneOp>(producer) || inPlace.contains(u))
      continue;
    mlir::BlockArgument var = it->second;
    std::string varDevice = deviceOfValue(var);
    if (varDevice.empty()) varDevice = "cpu";
    if (u.getType() != var.getType() || deviceOfOp(producer) != varDevice ||
        !readsOnlyAtWrittenIndex(producer, var))
      continue;
    const int64_t at = index.lookup(producer);
    bool safe = true;
    for (mlir::Operation* reader : var.getUsers())
      if (reader != producer &&
          (reader->getBlock() != &body || !index.count(reader) || index.lookup(reader) >= at))
        safe = false;
    if (!safe) continue;
    main.setResultAttr(i, kVariableInPlaceAttr, unit);
    inPlace.insert(u);
  }
  return inPlace;
}

class PlanMemoryPass : public impl::TandemPlanMemoryBase<PlanMemoryPass> {
 public:
  using TandemPlanMemoryBase::TandemPlanMemoryBase;

  void runOnOperation() override {
    // 1. Number @main's ops in order; the return's index is the end of the program.
    // 2. One buffer per graph input (live from -1) and per result of each placed, non-constant
    //    op (live from its op); each lives to its last consumer, graph outputs to the end.
    //    Sizes need static shapes and are rounded up to `alignment`.
    //    A variable's update that may be written over its variable (planUpdatesInPlace) gets
    //    no buffer: it lives in the variable's.
    // 3. In place: a result shares the buffer of an operand its kernel may overwrite when the
    //    op is that operand's last reader (same dtype, element count and device).
    // 4. Per device, assign offsets greedy by size; peak = the highest end.
    // 5. Record offsets on ops and arguments, and peak/unplanned bytes per device on the module.
    mlir::ModuleOp module = getOperation();
    mlir::func::FuncOp main = getMainFunc(module);
    if (!main) {
      module.emitError("tandem-plan-memory: module has no func.func @main");
      return signalPassFailure();
    }
    if (alignment <= 0 || (alignment & (alignment - 1)) != 0) {
      module.emitError() << "tandem-plan-memory: alignment " << alignment
                         << " is not a power of two";
      return signalPassFailure();
    }
    mlir::MLIRContext* ctx = &getContext();
    mlir::Block& body = main.getBody().front();

    llvm::DenseMap<mlir::Operation*, int64_t> index;
    int64_t n = 0;
    for (mlir::Operation& op : body) index[&op] = n++;

    const llvm::DenseSet<mlir::Value> updatesInPlace =
        planUpdatesInPlace(main, index, updateVariablesInPlace);
    std::vector<Buffer> buffers;
    std::vector<std::string> devices;  // parallel to buffers
    std::map<std::string, std::vector<Buffer*>> perDevice;
    bool ok = true;
    auto addBuffer = [&](mlir::Value v, int64_t first, const std::string& device,
                         mlir::Location loc) {
      if (!ok) return;  // one error is enough: the first dynamic value names the cause
      // The device keeps an arena (maybe of 0 bytes) for the runtime to bind its values to.
      // A dynamic region's results are allocated when it runs, at the size the run gives them.
      if (updatesInPlace.contains(v) || isAllocatedAtRunTime(v)) {
        perDevice[device];
        return;
      }
      auto type = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
      if (!type || !type.hasStaticShape()) {
        mlir::emitError(loc) << "tandem-plan-memory: value '" << valueName(v) << "' has type "
                             << v.getType() << "; memory planning needs static shapes (bind the "
                             << "symbolic dims)";
        ok = false;
        return;
      }
      Buffer b;
      b.value = v;
      b.first = b.last = first;
      // Checked: a shape that reached here unverified (hand-written IR) must not wrap the
      // arena arithmetic.
      DType dt = mlirToDType(type.getElementType());
      int64_t bytes = 0, padded = 0;
      std::string e = checkTensorSize(std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
                                      (int64_t)dtypeSize(dt), dtypeName(dt), &bytes);
      if (e.empty() && !checkedAdd(bytes, alignment - 1, &padded)) e = "its size overflows";
      if (!e.empty()) {
        mlir::emitError(loc) << "tandem-plan-memory: value '" << valueName(v) << "': " << e;
        ok = false;
        return;
      }
      b.size = padded / alignment * alignment;
      for (mlir::Operation* user : v.getUsers()) b.last = std::max(b.last, index.lookup(user));
      buffers.push_back(b);
      devices.push_back(device);
    };

    for (mlir::BlockArgument arg : main.getArguments()) {
      // A variable has a buffer of its own on its device, outside the arena.
      if (isVariableArg(arg)) continue;
      std::string device = deviceOfValue(arg);
      // Unplaced input (a hand-written test): it arrives where a consumer runs.
      for (mlir::Operation* user : arg.getUsers())
        if (device.empty()) device = deviceOfOp(user);
      if (device.empty()) device = "cpu";
      addBuffer(arg, -1, device, main.getLoc());
    }
    for (mlir::Operation& op : body) {
      if (llvm::isa<ConstantOp, NoneOp, mlir::func::ReturnOp>(op)) continue;
      std::string device = deviceOfOp(&op);
      if (device.empty()) {
        op.emitError("tandem-plan-memory: op has no device; run --tandem-place first");
        ok = false;
        continue;
      }
      for (mlir::Value r : op.getResults()) addBuffer(r, index[&op], device, op.getLoc());
    }
    if (!ok) return signalPassFailure();

    // In place: a result takes the buffer of an operand the op may overwrite, when this op is
    // that operand's last reader and both have the same dtype, element count, device and
    // layout between steps (a conv-epilogue writing a blocked result reorders a plain residual
    // into its output first, which must not be the residual's own bytes). The operand's buffer
    // then lives on to the result's last use.
    llvm::DenseMap<mlir::Value, size_t> bufferOf;
    for (size_t i = 0; i < buffers.size(); ++i) bufferOf[buffers[i].value] = i;
    std::vector<int64_t> ownLast(buffers.size());
    for (size_t i = 0; i < buffers.size(); ++i) ownLast[i] = buffers[i].last;
    std::vector<int64_t> aliasOf(buffers.size(), -1);  // index of the buffer shared, or -1
    auto rootOf = [&](size_t i) {
      while (aliasOf[i] >= 0) i = (size_t)aliasOf[i];
      return i;
    };
    for (mlir::Operation& op : body) {
      llvm::SmallVector<mlir::Value> candidates = overwritableOperands(&op);
      llvm::SmallPtrSet<mlir::Value, 4> taken;
      for (mlir::Value r : op.getResults()) {
        auto rt = llvm::dyn_cast<mlir::RankedTensorType>(r.getType());
        if (!rt || !bufferOf.count(r)) continue;
        size_t ri = bufferOf[r];
        for (mlir::Value v : candidates) {
          auto vt = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
          if (!vt || taken.count(v) || !bufferOf.count(v)) continue;
          size_t vi = bufferOf[v];
          if (ownLast[vi] != index[&op] || devices[vi] != devices[ri] ||
              vt.getElementType() != rt.getElementType() ||
              vt.getNumElements() != rt.getNumElements() || resultLayout(v) != resultLayout(r))
            continue;
          size_t root = rootOf(vi);
          aliasOf[ri] = (int64_t)root;
          buffers[root].last = std::max(buffers[root].last, buffers[ri].last);
          taken.insert(v);
          break;
        }
      }
    }

    std::map<std::string, int64_t> unplanned;
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (aliasOf[i] < 0) perDevice[devices[i]].push_back(&buffers[i]);
      unplanned[devices[i]] += buffers[i].size;
    }
    llvm::SmallVector<mlir::NamedAttribute> peakAttrs, unplannedAttrs;
    mlir::Builder b(ctx);
    for (auto& [device, list] : perDevice) {
      int64_t peak = assignOffsets(list);
      peakAttrs.push_back(b.getNamedAttr(device, b.getI64IntegerAttr(peak)));
      unplannedAttrs.push_back(b.getNamedAttr(device, b.getI64IntegerAttr(unplanned[device])));
    }

    llvm::DenseMap<mlir::Value, int64_t> offsetOf;
    for (size_t i = 0; i < buffers.size(); ++i)
      offsetOf[buffers[i].value] = buffers[rootOf(i)].offset;
    for (mlir::BlockArgument arg : main.getArguments())
      main.setArgAttr(arg.getArgNumber(), kArgArenaOffsetAttr, b.getI64IntegerAttr(offsetOf[arg]));
    for (mlir::Operation& op : body) {
      if (llvm::isa<ConstantOp, NoneOp, mlir::func::ReturnOp>(op)) continue;
      llvm::SmallVector<int64_t> offsets;
      for (mlir::Value r : op.getResults()) offsets.push_back(offsetOf[r]);
      op.setAttr(kArenaOffsetAttr, b.getI64ArrayAttr(offsets));
    }
    module->setAttr(kArenaPeakAttr, b.getDictionaryAttr(peakAttrs));
    module->setAttr(kArenaUnplannedAttr, b.getDictionaryAttr(unplannedAttrs));
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createPlanMemoryPass() { return std::make_unique<PlanMemoryPass>(); }
std::unique_ptr<mlir::Pass> createPlanMemoryPass(const TandemPlanMemoryOptions& options) {
  return std::make_unique<PlanMemoryPass>(options);
}

}  // namespace tandem

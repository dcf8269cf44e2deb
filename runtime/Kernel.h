// Kernels and the kernel registry: which device kinds can run which op on which dtypes, and the
// factories that create kernels (DESIGN §2). One registration function per backend file.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/Attr.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace tandem {

namespace cuda {
class DeviceContext;  // runtime/cuda/CudaCommon.h: streams, library handles, NVRTC program
}
namespace plan {
class FusedBody;  // compiler/Plan.proto: a fused step's member ops (read by fused::parseBody)
}

/// Static type of a kernel operand. An absent optional input has dtype Undefined.
struct TensorType {
  DType dtype = DType::Undefined;
  Shape shape;
  bool present() const { return dtype != DType::Undefined; }
};

/// What a factory knows when it creates a kernel, once, at plan load time. Shapes are static.
/// Semantics of every op are ONNX opset 17 (the importer normalises older and newer opsets;
/// ops new after 17, such as GroupNormalization-21, have their own version), inputs in ONNX
/// positional order.
/// Which 3x3 stride-1 convolutions may run as Winograd on the CPU (runtime/cpu/avx2/Winograd.h,
/// AVX2 hosts): Auto picks F(4x4, 3x3) or F(2x2, 3x3) by shape (F(4x4) rounds 5-7x more than a
/// plain f32 loop); Tile2x2 uses F(2x2) only (rounding at direct convolution's level); Off keeps
/// oneDNN's direct convolution.
enum class WinogradPolicy { Auto, Tile2x2, Off };

struct KernelContext {
  std::string opType;                 // ONNX op type, e.g. "Conv"
  std::string nodeName;               // for messages; may be empty
  const AttrMap* attrs = nullptr;     // never null when passed to a factory
  /// "Fused" steps: the group's body, as the plan carries it; read it through fused::parseBody
  /// (runtime/cpu/ref/Fused.h). Null for every other op. Outlives the kernel's creation.
  const plan::FusedBody* fusedBody = nullptr;
  std::vector<TensorType> inputTypes;
  std::vector<TensorType> outputTypes;
  /// Same length as inputTypes; non-null where the input is a constant (weights, shape
  /// operands) whose value is known at load: kernels reorder/prepack it here, once.
  std::vector<const Tensor*> constInputs;
  int threads = 1;                    // intra-op threads for this kernel
  /// Where a kernel that sizes its own result (sizeCountedFromData: NonZero, Compress, Unique,
  /// NonMaxSuppression, inside a dynamic region) allocates it: uninitialised, from the region's
  /// caching arena (runtime/DynamicRegion.h), as the kernel writes it whole. Null elsewhere
  /// (Tensor::tryAlloc, zeroed). Errors: size overflow or out of memory, naming `what`.
  using ResultAllocator =
      std::function<Status(DType dtype, const Shape& shape, const std::string& what, Tensor* out)>;
  ResultAllocator allocResult;
  WinogradPolicy winograd = WinogradPolicy::Auto;  // CPU convolutions (LoadOptions::winograd)
  /// Seed of the random ops that have no seed attribute (Dropout in training mode):
  /// LoadOptions::seed.
  uint64_t seed = 0;
  /// For kernels that create kernels of their own while they run (a DynamicRegion's eager ops,
  /// runtime/DynamicRegion.h): whether they may time the variants (KernelDef::variants) of a
  /// large op on its first use and keep the fastest, as the loader does for a plan's steps
  /// (false when LoadOptions::tuning is off).
  bool measureVariants = false;
  /// Which implementation to build where a kernel has several (KernelDef::variants): "" keeps
  /// the factory's built-in heuristic; a name the def listed for this context builds exactly
  /// that one (the loader measures them, runtime/Tuning.h). A named variant that turns out
  /// not to apply (e.g. oneDNN chose a layout Winograd cannot read) is an error from the
  /// factory, never a silent fallback. It overrides `winograd`: the loader applies that
  /// policy when it chooses the candidates.
  std::string variant;
  /// Set by the CUDA backend for "cuda" kernels (its streams, handles and the plan's NVRTC
  /// program); null for CPU kernels.
  cuda::DeviceContext* cuda = nullptr;
};

/// One op instance bound to static shapes. run() is called once per execution with buffers of
/// exactly the types given at creation; absent optional inputs are nullptr. run() must not
/// allocate per call where it can avoid it, and must not keep pointers between calls.
///
/// Concurrency contract (CPU kernels): run() may be called concurrently from several threads on
/// one kernel, for different outputs (each concurrent Executable::run has arenas of its own;
/// constant inputs are shared and read-only). What a kernel changes during run() is therefore
/// per thread or guarded: scratch is thread_local or the oneDNN thread workspace
/// (runtime/cpu/dnnl/DnnlCommon.h: threadWorkspace), reference kernels are closures over
/// read-only tables, and a kernel that rebinds members to the caller's buffers (oneDNN memory
/// objects, DnnlKernel) or keeps scratch tensors (the unfused composite of a Fused step) holds
/// a mutex for the call. Intra-op parallelism uses the calling thread's OpenMP pool, sized by
/// KernelContext::threads or omp_get_max_threads() (the executor sets it per run). Kernels of
/// plans whose runs the executor serialises (a GPU or several host devices: Executable.h)
/// never see concurrent calls; CUDA kernels need not be reentrant.
/// One op of a body a kernel runs itself (a DynamicRegion's eager ops, runtime/DynamicRegion.h),
/// timed in a profiled run: `start` in seconds after the kernel's run began, `seconds` its
/// duration (shape inference, kernel creation and variant timing on a new signature, the
/// kernel's run).
struct SubStepTiming {
  std::string name, opType, impl;
  double start = 0, seconds = 0;
  std::vector<TensorType> inputs, outputs;  // absent optional inputs left out
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Status run(const std::vector<const Tensor*>& inputs,
                     const std::vector<Tensor*>& outputs) = 0;
  /// run(), appending to `subSteps` the timing of each op of a body this kernel runs itself
  /// (a DynamicRegion); a kernel without a body just runs. The executor calls it in profiled
  /// runs (Executable::run with `profile`).
  virtual Status runProfiled(const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs,
                             std::vector<SubStepTiming>* subSteps) {
    (void)subSteps;
    return run(inputs, outputs);
  }
  /// Implementation actually chosen, e.g. "dnnl:jit:avx2" or "ref".
  virtual std::string implName() const = 0;
  /// Called once after every kernel of the plan was created and the backend finished loading
  /// (CUDA: the plan's NVRTC program is compiled; generated kernels look up their function).
  virtual Status prepare() { return Status::ok(); }
  /// Whether run() never reads input `input` because creation copied what the kernel needs of
  /// that constant (prepacked weights, a quantized matrix repacked). Where every step reading a
  /// constant says so, the executable drops its own copy after load (Executable.h), so the
  /// weights are held once. Default: false (the kernel may read it).
  virtual bool consumesConstant(size_t input) const {
    (void)input;
    return false;
  }
  /// Whether run() reads the values of its shape operands (shapeOperandPositions: Slice's
  /// starts and ends, Pad's pads, ...) from `inputs` on every run rather than from the
  /// KernelContext's constInputs at creation, so that one kernel serves every value of them
  /// that gives the same operand and result types. The eager executor (runtime/DynamicRegion.h)
  /// then keeps one kernel per types instead of one per values: a Loop body slicing a
  /// different range each iteration creates its Slice once. Default: false (the values may be
  /// baked in).
  virtual bool readsShapeOperandsAtRun() const { return false; }
};

using KernelFactory =
    std::function<Status(const KernelContext& ctx, std::unique_ptr<Kernel>* out)>;

/// A registry entry: one op on one device kind, for the input dtypes `accepts` approves.
struct KernelDef {
  std::string opType;      // ONNX op type
  std::string deviceKind;  // "cpu" or "cuda"
  std::string impl;        // "dnnl", "ref", ...
  int priority = 0;        // the highest-priority def whose accepts() holds is used
  /// dtypes of the present inputs in ONNX order (absent optional inputs omitted).
  std::function<bool(const std::vector<DType>& inputDTypes)> accepts;
  /// Human-readable dtype list for `tandem kernels`, e.g. "f32" or "f32,f64,i32,i64".
  std::string dtypesText;
  /// Optional finer check at load time (shapes/attributes); when it returns false the next
  /// def is tried. Null means "always".
  std::function<bool(const KernelContext&)> supportsContext;
  /// Optional (ggml's supports_op): why this def cannot run the instance `ctx` describes
  /// although it accepts its dtypes, or "" when it can. Compiled into every build (no backend
  /// headers), so the placer asks it before a plan is made and the loader before create().
  /// Reads attributes, static shapes and which inputs are constants, never constant values.
  std::function<std::string(const KernelContext&)> rejects;
  KernelFactory create;
  /// Optional: the implementations this def can build for `ctx`, by KernelContext::variant
  /// name, cheapest checks only (shape, constness, host ISA). Null or fewer than two names:
  /// nothing to choose. CPU names: Conv "dnnl" (oneDNN direct), "winograd2x2",
  /// "winograd4x4" (runtime/cpu/avx2/Winograd.h); Gemm / MatMul "dnnl", "avx2" (packed GEMM,
  /// runtime/cpu/avx2/Sgemm.h); Fused conv/gemm epilogues those of their anchor op.
  std::function<std::vector<std::string>(const KernelContext&)> variants;
};

class KernelRegistry {
 public:
  /// The process-wide registry with every built-in backend registered (first use registers).
  static KernelRegistry& global();

  void add(KernelDef def);
  /// Compile time: can `deviceKind` run `opType` on these input dtypes? (Feasibility for the
  /// placer.)
  bool supports(const std::string& opType, const std::string& deviceKind,
                const std::vector<DType>& inputDTypes) const;
  /// Compile time: why `deviceKind` cannot run this op instance (ctx: op type, attributes,
  /// static operand types, constant markers), or "" when one of its defs for these dtypes can
  /// (KernelDef::rejects). "" also when no def accepts the dtypes: that is supports()'s answer.
  std::string rejects(const std::string& deviceKind, const KernelContext& ctx) const;
  /// Run time: creates the best kernel. Error names the op and dtypes when none fits.
  Status create(const std::string& deviceKind, const KernelContext& ctx,
                std::unique_ptr<Kernel>* out) const;
  /// The variant names (KernelDef::variants) of the def create() would try first for `ctx`;
  /// empty when that def has none.
  std::vector<std::string> variants(const std::string& deviceKind, const KernelContext& ctx) const;
  const std::vector<KernelDef>& all() const { return defs_; }
  /// How the host backend reads a "blocked" entry of a step's `input_layouts` /
  /// `output_layouts` (value `i` of the inputs, or of the outputs): false where that layout
  /// would pad the value's channels, so it stays plain (oneDNN's rule: dnnlcpu::isBlocked).
  /// create() offers a step with a blocked value only to the kernels that read the layout.
  /// Unset (no oneDNN in the build): every "blocked" entry counts.
  using BlockedLayoutRule = std::function<bool(const KernelContext& ctx, bool input, size_t i)>;
  void setBlockedLayoutRule(BlockedLayoutRule rule) { blockedRule_ = std::move(rule); }

  /// A backend not built into this binary registers what its kernels accept and reject (defs
  /// without `create`), so plans can be made for hardware that is not present (DESIGN §2
  /// DeviceSet). supports() and rejects() read them for a device kind with no kernel in all().
  void addCapability(KernelDef def) { capabilities_.push_back(std::move(def)); }
  /// True when `deviceKind`'s answers come from such capabilities (its backend is not built).
  bool capabilityOnly(const std::string& deviceKind) const;

 private:
  /// The defs that answer feasibility questions for `deviceKind`.
  const std::vector<KernelDef>& answering(const std::string& deviceKind) const;
  bool hasBlockedLayout(const KernelContext& ctx) const;
  std::vector<KernelDef> defs_;
  BlockedLayoutRule blockedRule_;
  std::vector<KernelDef> capabilities_;
};

/// Helpers for `accepts`.
std::function<bool(const std::vector<DType>&)> acceptsFirstInput(std::vector<DType> dtypes);

// Registration functions, one per kernel family; KernelRegistry::global()
// (runtime/KernelRegistry.cpp) calls each once, oneDNN's before the reference kernels so that
// create() tries them first. A new kernel file registers through its family's function (e.g.
// runtime/cpu/ref/Register.cpp); a new family adds its function here and there.
void registerCpuReferenceKernels(KernelRegistry& r);  // runtime/cpu/ref/*.cpp
void registerCpuDnnlKernels(KernelRegistry& r);       // runtime/cpu/dnnl/*.cpp
void registerCudaKernels(KernelRegistry& r);          // runtime/cuda/*.cpp (capabilities only when not built)
void registerControlFlowKernels(KernelRegistry& r);   // runtime/ControlFlowKernels.cpp (If, Loop, Scan)
// runtime/DynamicRegion.cpp (DynamicRegion) is declared in runtime/DynamicRegion.h.

}  // namespace tandem

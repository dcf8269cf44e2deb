// Shared oneDNN 2.6 plumbing for the CPU kernels: engine/stream, per-thread workspace, memory
// descriptors built from ONNX shapes, and the base class every dnnl kernel derives from.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/Kernel.h"

namespace tandem {
namespace dnnlcpu {

/// Caps oneDNN at TANDEM_MAX_CPU_ISA (runtime/cpu/avx2/IsaCap.h), once per process; a no-op
/// when it is unset. cpuEngine() calls it first.
void applyCpuIsaCap();

/// The one CPU engine of the process (created on first use).
dnnl::engine& cpuEngine();
/// A CPU stream on cpuEngine(). One per calling thread: oneDNN streams are not thread-safe and
/// Executable::run may be called concurrently; with the OpenMP runtime a CPU stream is only a
/// handle, so "one per thread" costs nothing and behaves like one process-wide stream.
dnnl::stream& cpuStream();

/// A grow-only, 64-byte aligned scratch buffer owned by the calling thread, for oneDNN
/// scratchpads and blocked copies of activations. Valid until the next call on this thread;
/// kernels use it only inside one run(). Grows (allocates) only when a larger size is asked.
char* threadWorkspace(size_t bytes);

/// Lays out several scratch regions in one workspace at kernel creation; run() asks the thread
/// workspace for total() bytes and adds the offsets.
class WorkspaceLayout {
 public:
  /// Reserves `bytes` (rounded up to 64) and returns its offset.
  size_t add(size_t bytes) {
    size_t off = total_;
    total_ += (bytes + 63) / 64 * 64;
    return off;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

using dims = dnnl::memory::dims;

/// Tensor shape as oneDNN dims; rank 0 becomes {1} (oneDNN has no rank-0 memory).
dims toDims(const Shape& s);
/// Dense row-major f32 descriptor of `d`.
dnnl::memory::desc plainDesc(const dims& d);
/// f32 descriptor of logical dims `d` stored densely in the physical order `order` (outermost
/// first, e.g. {1,0,2,3} for ConvTranspose weights [C,M,k..] viewed as [M,C,k..]).
dnnl::memory::desc permutedDesc(const dims& d, const std::vector<int>& order);
/// f32 descriptor of an [N, C, spatial...] activation (rank 3-5) in the layout oneDNN's
/// convolution prefers on this CPU, asked of oneDNN once per process: nChw8c where it runs
/// jit:avx2 (AVX2 hosts, or ONEDNN_MAX_CPU_ISA=AVX2), nhwc where oneDNN 2.6 runs brgconv
/// (AVX-512 hosts), nChw16c for its AVX-512 direct kernels. Values marked "blocked" between
/// steps are stored in this layout, so consecutive convolutions and pools skip the reorders.
dnnl::memory::desc channelBlockedDesc(const dims& d);
/// The name of that layout for 4-D activations: "nChw8c", "nChw16c" or "nhwc" (logs, tests).
const char* activationLayoutName();
/// Activation layouts between steps. A step's `input_layouts` / `output_layouts` attributes
/// (STRINGS, one per input / output, set by --tandem-fuse) say "blocked" where the value's
/// arena bytes are in channelBlockedDesc layout (so consecutive oneDNN ops skip the reorders),
/// "" where they are plain row-major. The compiler marks 4-D f32 values of any channel count;
/// a value is blocked only where the host layout stores it in its plain size (nhwc always,
/// nChw8c / nChw16c when the channels are a multiple of the block), plain otherwise.
bool isBlocked(const KernelContext& ctx, bool input, size_t i);
/// The descriptor of the caller's buffer for input/output i: blocked or plain, or channels-last
/// (nwc / nhwc / ndhwc over the logical NC... dims `d`) where the layout says "channels-last":
/// only the anchor of a conv-epilogue ending in a Transpose to channels-last sees that
/// (DnnlFused.cpp), never a plan step.
dnnl::memory::desc userDesc(const KernelContext& ctx, bool input, size_t i, const dims& d);

/// True when `pd` is a generic reference implementation (used to fall back to plain layouts
/// when a blocked layout brings no optimized kernel).
bool isReferenceImpl(const dnnl::primitive_desc_base& pd);
/// f32 descriptor of `d` with format_tag::any (the primitive picks).
dnnl::memory::desc anyDesc(const dims& d);

/// The arguments of one primitive execution, built once at kernel creation: run() rebinds the
/// data handles of the same dnnl::memory objects and executes without building a map per call.
/// The memory objects must outlive this list (kernels keep both as members).
class ExecArgs {
 public:
  void add(int arg, const dnnl::memory& m) { args_.push_back({arg, m.get()}); }
  /// Executes `p` on the calling thread's stream; throws dnnl::error on failure.
  void execute(const dnnl::primitive& p) const;

 private:
  std::vector<dnnl_exec_arg_t> args_;
};

/// One value, kept in the host layout by the plan, of a kernel that computes in plain layout
/// (Concat and Split where their values' layouts differ): a plain copy in the kernel's
/// workspace and the oneDNN reorder between the two. Used under the kernel's own lock.
class PlainStaging {
 public:
  /// For an f32 value of dims `d`: an input (host layout -> plain copy) or an output (plain
  /// copy -> host layout); reserves the copy in `ws`.
  void init(const dims& d, bool input, WorkspaceLayout* ws);
  bool used() const { return used_; }
  /// The plain copy inside the workspace `ws` (its base pointer for this run).
  float* plain(char* ws) const { return reinterpret_cast<float*>(ws + offset_); }
  /// Input: reorders `user` (host layout) into plain(ws). Output: plain(ws) into `user`.
  void reorder(char* ws, const void* user) const;

 private:
  bool used_ = false, input_ = true;
  size_t offset_ = 0;
  dnnl::memory from_, to_;
  dnnl::reorder reorder_;
  ExecArgs args_;
};

/// A kernel that computes in its input's layout (plain or the host's, isBlocked) for a step
/// whose output layout differs: the result goes to the calling thread's workspace and a oneDNN
/// reorder writes the output. Without a difference, target() is the output itself and finish()
/// does nothing. Used under the kernel's own lock (the memory objects are rebound per run).
class OutputReorder {
 public:
  /// For an f32 value of dims `d` computed in `fromBlocked`'s layout, written in `toBlocked`'s.
  /// Returns whether a reorder runs (the kernels' impl names add " reorders[dst]").
  bool init(const dims& d, bool fromBlocked, bool toBlocked);
  /// Where the kernel writes its result.
  float* target(Tensor* out) const;
  /// Reorders target(out) into `out`.
  void finish(float* target, Tensor* out) const;

 private:
  size_t bytes_ = 0;  // the workspace the result takes; 0: no reorder
  dnnl::memory from_, to_;
  dnnl::reorder reorder_;
  ExecArgs args_;
};

/// Sets the data handle of `m` to a caller buffer (oneDNN takes non-const pointers even for
/// sources it only reads).
inline void bind(const dnnl::memory& m, const void* p) { m.set_data_handle(const_cast<void*>(p)); }

/// True when descriptors `a` and `b` put every element of the same dims at the same byte, e.g.
/// nChw16c with 16 channels and nhwc (a single inner block spanning its whole dim).
bool sameBytes(const dnnl::memory::desc& a, const dnnl::memory::desc& b);

/// One operand of a primitive whose chosen layout may differ from the plain row-major layout
/// tensors have between ops (activations are plain NCHW at op boundaries). Holds the user-side
/// memory bound to the caller's buffer, the primitive-side memory (the same object when no
/// reorder is needed, else a region of the thread workspace) and the reorder between them.
class Operand {
 public:
  /// `plain`: the caller's layout; `chosen`: the primitive's (no reorder where sameBytes).
  /// `isInput` selects the reorder direction (user -> primitive for inputs, primitive -> user
  /// for outputs).
  void init(const dnnl::memory::desc& plain, const dnnl::memory::desc& chosen, bool isInput,
            WorkspaceLayout* ws);
  /// The memory to hand the primitive (stable: ExecArgs may keep it).
  const dnnl::memory& inner() const { return reordered_ ? inner_ : user_; }
  bool reordered() const { return reordered_; }
  /// Binds the caller's buffer (and the workspace region when reordered).
  void bindBuffers(const void* user, char* ws) const;
  /// For inputs: reorders user -> inner (no-op when not reordered). Call after bindBuffers.
  void toInner() const;
  /// For outputs: reorders inner -> user (no-op when not reordered).
  void toUser() const;

 private:
  dnnl::memory user_, inner_;
  dnnl::reorder reorder_;
  ExecArgs reorderArgs_;
  bool reordered_ = false;
  size_t wsOffset_ = 0;
};

/// The user-managed scratchpad of one primitive, carved from the thread workspace.
class Scratchpad {
 public:
  /// Reserves pd's scratchpad in `ws` and adds DNNL_ARG_SCRATCHPAD to `args` when non-empty.
  void init(const dnnl::primitive_desc_base& pd, WorkspaceLayout* ws, ExecArgs* args);
  void bindBuffers(char* ws) const {
    if (used_) mem_.set_data_handle(ws + offset_);
  }

 private:
  dnnl::memory mem_;
  size_t offset_ = 0;
  bool used_ = false;
};

/// Primitive attributes every dnnl kernel starts from: user-managed scratchpad, so run() uses
/// the thread workspace instead of letting oneDNN allocate.
dnnl::primitive_attr baseAttr();

/// True when every present input is f32 (KernelDef::accepts for all dnnl kernels but Pow).
bool allF32(const std::vector<DType>& inputDTypes);
/// True when some present input or output has a zero-size dimension (left to the reference
/// kernels: oneDNN primitives reject zero-volume memory in several implementations).
bool hasEmptyTensor(const KernelContext& ctx);
/// True when output i is present, i.e. requested by the graph.
bool outputRequested(const KernelContext& ctx, size_t i);
/// Input i present?
bool inputPresent(const KernelContext& ctx, size_t i);

/// Numpy-style normalisation of a possibly negative axis; returns false when out of range.
bool normalizeAxis(int64_t axis, int64_t rank, int64_t* out);

/// Copies a constant tensor (f32, plain layout `from`) into owned memory of layout `to`, via a
/// oneDNN reorder: the once-at-creation weight prepacking.
dnnl::memory prepackConstant(const Tensor& t, const dnnl::memory::desc& from,
                             const dnnl::memory::desc& to);

/// Base of every oneDNN kernel: holds the implementation name and serialises concurrent run()
/// calls on one kernel instance, because the kernel's dnnl::memory objects are rebound to the
/// caller's buffers on every run.
class DnnlKernel : public Kernel {
 public:
  std::string implName() const override { return impl_; }

 protected:
  void setImpl(const dnnl::primitive_desc_base& pd) {
    impl_ = std::string("dnnl:") + pd.impl_info_str();
  }
  std::string impl_ = "dnnl";
  std::mutex mu_;
};

/// Runs `body` (which builds a kernel and may throw dnnl::error) and turns oneDNN exceptions
/// into a Status naming the op: oneDNN reports unsupported configurations by throwing.
template <typename F>
Status guardDnnl(const KernelContext& ctx, F&& body) {
  try {
    return body();
  } catch (const dnnl::error& e) {
    return Status::error(ctx.opType + " (dnnl): " + e.what());
  }
}
/// Same for run(): a failing execute is reported, not thrown.
template <typename F>
Status guardRun(const char* op, F&& body) {
  try {
    return body();
  } catch (const dnnl::error& e) {
    return Status::error(std::string(op) + " (dnnl): execution failed: " + e.what());
  }
}

/// One oneDNN eltwise application: dst = f_{a,alpha,beta}(src).
struct EltwiseStep {
  dnnl::algorithm a;
  float alpha = 0.f, beta = 0.f;
};
/// The eltwise steps of an ONNX activation (ctx: its op type, attributes, constant bounds), in
/// order; false when oneDNN has no exact form (DnnlEltwise.cpp). Used by the eltwise kernels
/// and for post-ops of fused steps.
bool eltwiseSteps(const KernelContext& ctx, std::vector<EltwiseStep>* steps);

/// Post-ops a "Fused" step appends to a Conv / Gemm / MatMul primitive (DnnlFused.cpp).
struct Epilogue {
  struct Item {
    bool sum = false;  // oneDNN sum (scale 1): adds what dst holds, i.e. the residual
    EltwiseStep eltwise;
    /// Gemm/MatMul only: when set, binary_mul by this constant f32 row, one value per output
    /// column (the last dim), broadcast over the rows (and batch); `eltwise` is then unused.
    const Tensor* scaleRow = nullptr;
  };
  std::vector<Item> items;  // in order; at most one sum
  /// Gemm/MatMul only: a constant f32 row of N values (the output's last dim) the primitive adds
  /// as its bias, before the items. Null: none.
  const Tensor* bias = nullptr;
  int sumInput = -1;  // index of the kernel input holding the residual the sum adds, or -1
  std::string text;   // "sum+eltwise_relu", for implName()
  /// Appends the items to `po`. `dstRank`: the primitive's destination rank, for the
  /// [1, ..., 1, N] descriptor of a scale row (rowDesc).
  void appendTo(dnnl::post_ops* po, int dstRank = 2) const {
    for (const Item& i : items) {
      if (i.sum) po->append_sum(1.f);
      else if (i.scaleRow) po->append_binary(dnnl::algorithm::binary_mul, rowDesc(*i.scaleRow, dstRank));
      else po->append_eltwise(1.f, i.eltwise.a, i.eltwise.alpha, i.eltwise.beta);
    }
  }
  /// A plain f32 [1, ..., 1, N] descriptor of `rank` dims for a row of N = t.numel() values.
  static dnnl::memory::desc rowDesc(const Tensor& t, int rank) {
    dims d(rank, 1);
    d.back() = t.numel();
    return plainDesc(d);
  }
};

/// The epilogue as the AVX2 kernels (runtime/cpu/avx2) apply it: an optional sum first, then at
/// most one ReLU (eltwise_relu, alpha 0). False for anything else (oneDNN then runs the step).
/// `ep` may be null (no post-ops).
bool avx2Epilogue(const Epilogue* ep, bool* sum, bool* relu);
/// The same with activations the AVX2 kernel does not apply itself allowed after it: `tail`
/// gets every eltwise item past the optional sum and a first ReLU, in order (the GEMM's caller
/// runs them as oneDNN eltwise primitives over its output). False only for a scale row or a sum
/// that is not first.
bool avx2EpilogueWithTail(const Epilogue* ep, bool* sum, bool* relu, std::vector<EltwiseStep>* tail);

/// True when oneDNN's implementation `fused` (impl_info_str) is a worse class than `unfused`:
/// classes are reference ("ref" in the name) < gemm-based ("gemm") < direct JIT (the rest).
/// Post-ops that push a convolution from jit:avx2 to gemm:jit ran 10-17x slower here.
bool implRegresses(const std::string& unfused, const std::string& fused);

/// Conv (anchor context: ONNX Conv inputs X, W, [B], and at index 3 the residual when
/// ep.sumInput == 3) and Gemm / MatMul with post-ops. When the post-ops make oneDNN choose a
/// worse implementation than the plain op (implRegresses), returns ok with *out empty and
/// *regressed = "fused <impl> vs unfused <impl>".
Status createConvEpilogue(const KernelContext& anchor, const Epilogue& ep,
                          std::unique_ptr<Kernel>* out, std::string* regressed);
Status createMatMulEpilogue(const KernelContext& anchor, const Epilogue& ep,
                            std::unique_ptr<Kernel>* out, std::string* regressed);

/// Inference BatchNormalization (ctx: X, scale, B, mean, var, each [C]; Y only), then ReLU when
/// `relu`; X and Y plain or in the host layout per the step's input/output_layouts (DnnlNorm.cpp).
Status createBatchNormKernel(const KernelContext& ctx, bool relu, std::unique_ptr<Kernel>* out);

/// GroupNormalization-21 (ctx: X [N, C, ...], scale and bias of C elements; attribute
/// num_groups dividing C) or InstanceNormalization-6 (groups = C), then SiLU y * sigmoid(y)
/// when `silu` (a "groupnorm-silu" step); X and Y plain or in the host layout per the step's
/// input/output_layouts (DnnlNorm.cpp, avx2::groupNorm). Error: shapes or attributes outside
/// that.
Status createGroupNormKernel(const KernelContext& ctx, bool silu, std::unique_ptr<Kernel>* out);

/// A "concat-batchnorm-relu" step: a Concat along the channels of f32 [N, C_i, spatial...]
/// values, the inference BatchNormalization of the result (epsilon `eps`) and its Relu, in one
/// pass that never writes the concatenation (DnnlNorm.cpp). `catInputs`: the step inputs the
/// Concat reads, in order; `params`: those of the BatchNormalization's scale, B, mean and var
/// (each [sum C_i]). With `plain` every value is read and written plain (row-major NCHW);
/// otherwise every one is in the host layout (the caller checks they all are).
Status createConcatBatchNormReluKernel(const KernelContext& step,
                                       const std::vector<int64_t>& catInputs,
                                       const std::vector<int64_t>& params, float eps, bool plain,
                                       std::unique_ptr<Kernel>* out);

/// Convolution geometry in oneDNN terms, derived from ONNX attributes and the static shapes.
struct ConvGeometry {
  int spatial = 0;
  int64_t group = 1;
  dims strides, dilations /* oneDNN: ONNX - 1 */, padL, padR;
  dims srcDims, weightsDims, dstDims, biasDims;
  dnnl::memory::desc weightsPlain;  // ONNX layout of W seen with weightsDims (f32)
};
/// The geometry of a forward Conv-11 whose ctx has inputs X, W, [B] and output Y (any dtypes:
/// only shapes and attributes are read); false with *why when oneDNN cannot express it
/// (DnnlConv.cpp; the int8 kernels of DnnlQuantized.cpp share it).
bool forwardConvGeometry(const KernelContext& ctx, ConvGeometry* g, std::string* why);

/// The same for a ConvTranspose-11 (inputs X, W [C, M/G, k...], [B]), in oneDNN's
/// deconvolution terms: weightsDims [M, C, k...] (ungrouped), padL/padR the crop of the
/// uncropped result at each side (padR negative where output_padding grows it).
bool transposedConvGeometry(const KernelContext& ctx, ConvGeometry* g, std::string* why);

/// ConvTranspose's variant "subpixel" (DnnlSubpixelDeconv.cpp): a 1-D or 2-D ungrouped,
/// undilated ConvTranspose whose kernel sizes are multiples of its strides, with constant
/// weights and bias, between plain values, run as one forward convolution over the s^2 output
/// phases plus a pixel shuffle. False with *why where it does not apply.
constexpr const char* kSubpixelDeconv = "subpixel";
bool subpixelDeconvApplies(const KernelContext& ctx, std::string* why);
Status createSubpixelDeconv(const KernelContext& ctx, std::unique_ptr<Kernel>* out);

/// KernelDef::variants of Conv ("dnnl", and "winograd2x2" / "winograd4x4" where Winograd can
/// run: runtime/cpu/avx2/Winograd.h on nChw8c activations; "winograd-dnnl" where oneDNN has a
/// Winograd of its own, AVX-512 hosts; "dnnl-plain-src" for a plain source of <= 4 channels;
/// "grouped-direct" for a grouped 2-D Conv between values in the host layout whose groups'
/// output channels fill AVX2 / AVX-512 vectors: runtime/cpu/avx2/GroupedConv.h)
/// and of Gemm / MatMul ("dnnl", and
/// "avx2" where the packed GEMM can run). `avx2Epilogue`: the step's post-ops, if any, are
/// ones the AVX2 kernels apply (avx2Epilogue()); false leaves "dnnl" only.
std::vector<std::string> convVariants(const KernelContext& ctx, bool avx2Epilogue);
std::vector<std::string> matmulVariants(const KernelContext& ctx, bool avx2Epilogue);

/// A KernelDef for impl "dnnl" on "cpu" with priority 10 (above the reference kernels).
KernelDef makeDef(std::string opType, std::function<bool(const KernelContext&)> supports,
                  KernelFactory create);

// Registration per op-category file; registerCpuDnnlKernels calls each.
void registerDnnlConvKernels(KernelRegistry& r);      // DnnlConv.cpp: Conv, ConvTranspose
void registerDnnlConvGradKernels(KernelRegistry& r);  // DnnlConvGrad.cpp: ConvWeightGrad (autodiff)
void registerDnnlMatMulKernels(KernelRegistry& r);    // DnnlMatMul.cpp: Gemm, MatMul
void registerDnnlPoolKernels(KernelRegistry& r);      // DnnlPool.cpp: Max/Avg/Global pools
void registerDnnlNormKernels(KernelRegistry& r);      // DnnlNorm.cpp: BN, GN, IN, LN, (Log)Softmax
void registerDnnlEltwiseKernels(KernelRegistry& r);   // DnnlEltwise.cpp: unary activations
void registerDnnlBinaryKernels(KernelRegistry& r);    // DnnlBinary.cpp: Add/Sub/Mul/Div/Min/Max
void registerDnnlFusedKernels(KernelRegistry& r);     // DnnlFused.cpp: Fused epilogues
void registerDnnlConcatKernels(KernelRegistry& r);    // DnnlConcat.cpp: Concat in host layout
void registerDnnlResizeKernels(KernelRegistry& r);    // DnnlResize.cpp: nearest Resize in host layout
void registerDnnlSplitKernels(KernelRegistry& r);     // DnnlSplit.cpp: channel Split in host layout
void registerDnnlTransposeKernels(KernelRegistry& r); // DnnlTranspose.cpp: Transpose (reorder)
void registerDnnlAttentionKernels(KernelRegistry& r); // DnnlAttention.cpp: Attention-23/-24/-25
void registerDnnlQuantizedKernels(KernelRegistry& r); // DnnlQuantized.cpp: QLinearConv/MatMul, *Integer
void registerDnnlRecurrentKernels(KernelRegistry& r); // DnnlRecurrent.cpp: RNN, GRU, LSTM
void registerDnnlDequantizeMatMulKernels(KernelRegistry& r);  // DnnlDequantizeMatMul.cpp

}  // namespace dnnlcpu
}  // namespace tandem

// Shared oneDNN plumbing: engine, per-thread stream and workspace, descriptors, registration.
#include "runtime/cpu/dnnl/DnnlCommon.h"

#include <cassert>
#include <cstdlib>
#include <memory>

#include "runtime/cpu/avx2/IsaCap.h"

namespace tandem {
namespace dnnlcpu {

void applyCpuIsaCap() {
  // oneDNN accepts a cap only before its first primitive or ISA query; the engine is created
  // before either, and discoverDevices() calls this before it asks for the ISA.
  static const bool applied = [] {
    CpuIsaCap cap = cpuIsaCap();
    if (cap == CpuIsaCap::Unlimited) return false;
    using isa = dnnl::cpu_isa;
    isa to = cap == CpuIsaCap::Sse41 ? isa::sse41
             : cap == CpuIsaCap::Avx ? isa::avx
             : cap == CpuIsaCap::Avx2 ? isa::avx2
                                      : isa::avx512_core;
    try {
      dnnl::set_max_cpu_isa(to);
    } catch (const dnnl::error&) {
      return false;  // oneDNN already fixed its ISA (ONEDNN_MAX_CPU_ISA or an earlier query)
    }
    return true;
  }();
  (void)applied;
}

dnnl::engine& cpuEngine() {
  static dnnl::engine* eng = [] {
    applyCpuIsaCap();
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return *eng;
}

dnnl::stream& cpuStream() {
  thread_local dnnl::stream s(cpuEngine());
  return s;
}

char* threadWorkspace(size_t bytes) {
  struct Buf {
    char* p = nullptr;
    size_t size = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf buf;
  if (bytes > buf.size) {
    std::free(buf.p);
    // Round up so that a sequence of slightly growing requests does not reallocate each time.
    size_t want = ((bytes + (1u << 20) - 1) >> 20) << 20;
    buf.p = static_cast<char*>(std::aligned_alloc(64, want));
    assert(buf.p && "out of host memory for the oneDNN workspace");
    buf.size = want;
  }
  return buf.p;
}

dims toDims(const Shape& s) {
  if (s.empty()) return {1};
  return dims(s.begin(), s.end());
}

dnnl::memory::desc plainDesc(const dims& d) {
  dims strides(d.size());
  int64_t st = 1;
  for (int i = (int)d.size() - 1; i >= 0; --i) {
    strides[i] = st;
    st *= d[i];
  }
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, strides);
}

dnnl::memory::desc permutedDesc(const dims& d, const std::vector<int>& order) {
  assert(order.size() == d.size());
  dims strides(d.size());
  int64_t st = 1;
  for (int i = (int)order.size() - 1; i >= 0; --i) {
    strides[order[i]] = st;
    st *= d[order[i]];
  }
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, strides);
}

dnnl::memory::desc anyDesc(const dims& d) {
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

void ExecArgs::execute(const dnnl::primitive& p) const {
  dnnl::error::wrap_c_api(
      dnnl_primitive_execute(p.get(), cpuStream().get(), (int)args_.size(), args_.data()),
      "could not execute a primitive");
}

bool sameBytes(const dnnl::memory::desc& a, const dnnl::memory::desc& b) {
  if (a == b) return true;
  if (a.dims() != b.dims() || a.data_type() != b.data_type()) return false;
  // Element strides per logical dim, where a single inner block spans its whole dim (its
  // elements are then adjacent: stride 1); false for any other blocking, padding or offset.
  auto strides = [](const dnnl::memory::desc& m, std::vector<int64_t>* s) {
    const dnnl_memory_desc_t& d = m.data;
    if (d.format_kind != dnnl_blocked || d.offset0 != 0) return false;
    for (int i = 0; i < d.ndims; ++i)
      if (d.padded_dims[i] != d.dims[i]) return false;
    const dnnl_blocking_desc_t& bd = d.format_desc.blocking;
    s->assign(bd.strides, bd.strides + d.ndims);
    if (bd.inner_nblks == 0) return true;
    if (bd.inner_nblks != 1 || bd.inner_blks[0] != d.dims[bd.inner_idxs[0]]) return false;
    (*s)[bd.inner_idxs[0]] = 1;
    return true;
  };
  std::vector<int64_t> sa, sb;
  if (!strides(a, &sa) || !strides(b, &sb)) return false;
  const dims d = a.dims();
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] > 1 && sa[i] != sb[i]) return false;
  return true;
}

void Operand::init(const dnnl::memory::desc& plain, const dnnl::memory::desc& chosen,
                   bool isInput, WorkspaceLayout* ws) {
  dnnl::engine& eng = cpuEngine();
  // Bytes laid out alike need no reorder: the caller's buffer is seen with the chosen desc.
  reordered_ = !sameBytes(plain, chosen);
  user_ = dnnl::memory(reordered_ ? plain : chosen, eng, DNNL_MEMORY_NONE);
  if (!reordered_) return;
  inner_ = dnnl::memory(chosen, eng, DNNL_MEMORY_NONE);
  wsOffset_ = ws->add(chosen.get_size());
  if (isInput) {
    reorder_ = dnnl::reorder(user_, inner_);
    reorderArgs_.add(DNNL_ARG_FROM, user_);
    reorderArgs_.add(DNNL_ARG_TO, inner_);
  } else {
    reorder_ = dnnl::reorder(inner_, user_);
    reorderArgs_.add(DNNL_ARG_FROM, inner_);
    reorderArgs_.add(DNNL_ARG_TO, user_);
  }
}

void Operand::bindBuffers(const void* user, char* ws) const {
  bind(user_, user);
  if (reordered_) inner_.set_data_handle(ws + wsOffset_);
}

void Operand::toInner() const {
  if (reordered_) reorderArgs_.execute(reorder_);
}

void Operand::toUser() const {
  if (reordered_) reorderArgs_.execute(reorder_);
}

void Scratchpad::init(const dnnl::primitive_desc_base& pd, WorkspaceLayout* ws,
                      ExecArgs* args) {
  dnnl::memory::desc md = pd.scratchpad_desc();
  used_ = md.get_size() > 0;
  if (!used_) return;
  mem_ = dnnl::memory(md, cpuEngine(), DNNL_MEMORY_NONE);
  offset_ = ws->add(md.get_size());
  args->add(DNNL_ARG_SCRATCHPAD, mem_);
}

namespace {

enum class ActivationLayout { Blocked8, Blocked16, ChannelsLast };

// The layout oneDNN's convolution picks for its activations on this CPU (format_tag::any on a
// ResNet-like 64-channel 3x3 layer): nChw8c from jit:avx2, nChw16c from the AVX-512 direct
// kernels, nhwc from oneDNN 2.6's brgconv on AVX-512 hosts. Asked once, not assumed from the
// ISA, so a oneDNN that prefers another layout on some host costs reorders, never correctness.
ActivationLayout probeActivationLayout() {
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  const dims src{1, 64, 28, 28}, wts{64, 64, 3, 3};
  try {
    dnnl::convolution_forward::desc cd(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        dnnl::memory::desc(src, f32, tag::any), dnnl::memory::desc(wts, f32, tag::any),
        dnnl::memory::desc(src, f32, tag::any), {1, 1}, {1, 1}, {1, 1});
    dnnl::convolution_forward::primitive_desc pd(cd, cpuEngine());
    dnnl::memory::desc chosen = pd.src_desc();
    if (chosen == dnnl::memory::desc(src, f32, tag::nhwc)) return ActivationLayout::ChannelsLast;
    if (chosen == dnnl::memory::desc(src, f32, tag::nChw16c)) return ActivationLayout::Blocked16;
  } catch (const dnnl::error&) {
  }
  return ActivationLayout::Blocked8;
}

ActivationLayout hostActivationLayout() {
  static const ActivationLayout l = probeActivationLayout();
  return l;
}

}  // namespace

dnnl::memory::desc channelBlockedDesc(const dims& d) {
  using tag = dnnl::memory::format_tag;
  assert(d.size() >= 3 && d.size() <= 5);
  const size_t r = d.size() - 3;  // 0: 1-D, 1: 2-D, 2: 3-D spatial
  static const tag blocked8[] = {tag::nCw8c, tag::nChw8c, tag::nCdhw8c};
  static const tag blocked16[] = {tag::nCw16c, tag::nChw16c, tag::nCdhw16c};
  static const tag channelsLast[] = {tag::nwc, tag::nhwc, tag::ndhwc};
  switch (hostActivationLayout()) {
    case ActivationLayout::ChannelsLast: return dnnl::memory::desc(d, dnnl::memory::data_type::f32, channelsLast[r]);
    case ActivationLayout::Blocked16: return dnnl::memory::desc(d, dnnl::memory::data_type::f32, blocked16[r]);
    case ActivationLayout::Blocked8: break;
  }
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, blocked8[r]);
}

const char* activationLayoutName() {
  switch (hostActivationLayout()) {
    case ActivationLayout::ChannelsLast: return "nhwc";
    case ActivationLayout::Blocked16: return "nChw16c";
    case ActivationLayout::Blocked8: break;
  }
  return "nChw8c";
}

bool isBlocked(const KernelContext& ctx, bool input, size_t i) {
  const Attr* a = ctx.attrs ? ctx.attrs->find(input ? "input_layouts" : "output_layouts") : nullptr;
  if (!a || a->kind != Attr::Kind::Strings || i >= a->strings.size() || a->strings[i] != "blocked")
    return false;
  // The arena holds the value's plain size. A host layout that pads the channels (nChw16c with
  // 24 channels) would not fit, so such a value stays plain; producer and consumer see the same
  // shape and the same host layout, so they agree.
  const std::vector<TensorType>& types = input ? ctx.inputTypes : ctx.outputTypes;
  if (i >= types.size() || types[i].dtype != DType::F32) return false;
  const Shape& s = types[i].shape;
  if (s.size() < 3 || s.size() > 5) return false;
  dims d = toDims(s);
  return channelBlockedDesc(d).get_size() == plainDesc(d).get_size();
}

dnnl::memory::desc userDesc(const KernelContext& ctx, bool input, size_t i, const dims& d) {
  const Attr* a = ctx.attrs ? ctx.attrs->find(input ? "input_layouts" : "output_layouts") : nullptr;
  if (a && a->kind == Attr::Kind::Strings && i < a->strings.size() &&
      a->strings[i] == "channels-last" && d.size() >= 3 && d.size() <= 5) {
    using tag = dnnl::memory::format_tag;
    static const tag channelsLast[] = {tag::nwc, tag::nhwc, tag::ndhwc};
    return dnnl::memory::desc(d, dnnl::memory::data_type::f32, channelsLast[d.size() - 3]);
  }
  return isBlocked(ctx, input, i) ? channelBlockedDesc(d) : plainDesc(d);
}

bool isReferenceImpl(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("ref") != std::string::npos;
}

bool avx2Epilogue(const Epilogue* ep, bool* sum, bool* relu) {
  *sum = *relu = false;
  if (!ep) return true;
  for (size_t i = 0; i < ep->items.size(); ++i) {
    const Epilogue::Item& it = ep->items[i];
    if (it.scaleRow) return false;
    if (it.sum) {
      if (i != 0) return false;
      *sum = true;
    } else if (it.eltwise.a == dnnl::algorithm::eltwise_relu && it.eltwise.alpha == 0.f && !*relu) {
      *relu = true;
    } else {
      return false;
    }
  }
  return true;
}

bool avx2EpilogueWithTail(const Epilogue* ep, bool* sum, bool* relu, std::vector<EltwiseStep>* tail) {
  *sum = *relu = false;
  tail->clear();
  if (!ep) return true;
  for (size_t i = 0; i < ep->items.size(); ++i) {
    const Epilogue::Item& it = ep->items[i];
    if (it.scaleRow) return false;
    if (it.sum) {
      if (i != 0) return false;
      *sum = true;
    } else if (it.eltwise.a == dnnl::algorithm::eltwise_relu && it.eltwise.alpha == 0.f &&
               !*relu && tail->empty()) {
      *relu = true;
    } else {
      tail->push_back(it.eltwise);
    }
  }
  return true;
}

bool implRegresses(const std::string& unfused, const std::string& fused) {
  auto rank = [](const std::string& impl) {
    if (impl.find("ref") != std::string::npos) return 0;
    if (impl.find("gemm") != std::string::npos) return 1;
    return 2;
  };
  return rank(fused) < rank(unfused);
}

dnnl::primitive_attr baseAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

bool allF32(const std::vector<DType>& in) {
  if (in.empty()) return false;
  for (DType t : in)
    if (t != DType::F32) return false;
  return true;
}

bool hasEmptyTensor(const KernelContext& ctx) {
  for (const TensorType& t : ctx.inputTypes)
    if (t.present() && numElements(t.shape) == 0) return true;
  for (const TensorType& t : ctx.outputTypes)
    if (t.present() && numElements(t.shape) == 0) return true;
  return false;
}

bool outputRequested(const KernelContext& ctx, size_t i) {
  return i < ctx.outputTypes.size() && ctx.outputTypes[i].present();
}

bool inputPresent(const KernelContext& ctx, size_t i) {
  return i < ctx.inputTypes.size() && ctx.inputTypes[i].present();
}

bool normalizeAxis(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

dnnl::memory prepackConstant(const Tensor& t, const dnnl::memory::desc& from,
                             const dnnl::memory::desc& to) {
  dnnl::engine& eng = cpuEngine();
  dnnl::memory src(from, eng, const_cast<void*>(t.raw()));
  dnnl::memory dst(to, eng);  // owned by the memory object, lives as long as the kernel
  dnnl::reorder(src, dst).execute(cpuStream(), src, dst);
  cpuStream().wait();
  return dst;
}

void PlainStaging::init(const dims& d, bool input, WorkspaceLayout* ws) {
  dnnl::engine& eng = cpuEngine();
  input_ = input;
  offset_ = ws->add(plainDesc(d).get_size());
  from_ = dnnl::memory(input ? channelBlockedDesc(d) : plainDesc(d), eng, DNNL_MEMORY_NONE);
  to_ = dnnl::memory(input ? plainDesc(d) : channelBlockedDesc(d), eng, DNNL_MEMORY_NONE);
  reorder_ = dnnl::reorder(from_, to_);
  args_.add(DNNL_ARG_FROM, from_);
  args_.add(DNNL_ARG_TO, to_);
  used_ = true;
}

void PlainStaging::reorder(char* ws, const void* user) const {
  if (input_) {
    bind(from_, user);
    to_.set_data_handle(plain(ws));
  } else {
    from_.set_data_handle(plain(ws));
    bind(to_, user);
  }
  args_.execute(reorder_);
}

bool OutputReorder::init(const dims& d, bool fromBlocked, bool toBlocked) {
  if (fromBlocked == toBlocked) return false;
  dnnl::engine& eng = cpuEngine();
  dnnl::memory::desc from = fromBlocked ? channelBlockedDesc(d) : plainDesc(d);
  dnnl::memory::desc to = toBlocked ? channelBlockedDesc(d) : plainDesc(d);
  from_ = dnnl::memory(from, eng, DNNL_MEMORY_NONE);
  to_ = dnnl::memory(to, eng, DNNL_MEMORY_NONE);
  reorder_ = dnnl::reorder(from_, to_);
  args_.add(DNNL_ARG_FROM, from_);
  args_.add(DNNL_ARG_TO, to_);
  bytes_ = from.get_size();
  return true;
}

float* OutputReorder::target(Tensor* out) const {
  return bytes_ ? reinterpret_cast<float*>(threadWorkspace(bytes_)) : out->data<float>();
}

void OutputReorder::finish(float* target, Tensor* out) const {
  if (!bytes_) return;
  from_.set_data_handle(target);
  bind(to_, out->raw());
  args_.execute(reorder_);
}

KernelDef makeDef(std::string opType, std::function<bool(const KernelContext&)> supports,
                  KernelFactory create) {
  KernelDef d;
  d.opType = std::move(opType);
  d.deviceKind = "cpu";
  d.impl = "dnnl";
  d.priority = 10;
  d.accepts = allF32;
  d.dtypesText = "f32";
  d.supportsContext = std::move(supports);
  d.create = std::move(create);
  return d;
}

}  // namespace dnnlcpu

void registerCpuDnnlKernels(KernelRegistry& r) {
  r.setBlockedLayoutRule(dnnlcpu::isBlocked);
  dnnlcpu::registerDnnlConvKernels(r);
  dnnlcpu::registerDnnlMatMulKernels(r);
  dnnlcpu::registerDnnlConvGradKernels(r);
  dnnlcpu::registerDnnlPoolKernels(r);
  dnnlcpu::registerDnnlNormKernels(r);
  dnnlcpu::registerDnnlEltwiseKernels(r);
  dnnlcpu::registerDnnlBinaryKernels(r);
  dnnlcpu::registerDnnlFusedKernels(r);
  dnnlcpu::registerDnnlConcatKernels(r);
  dnnlcpu::registerDnnlResizeKernels(r);
  dnnlcpu::registerDnnlSplitKernels(r);
  dnnlcpu::registerDnnlAttentionKernels(r);
  dnnlcpu::registerDnnlTransposeKernels(r);
  dnnlcpu::registerDnnlQuantizedKernels(r);
  dnnlcpu::registerDnnlRecurrentKernels(r);
  dnnlcpu::registerDnnlDequantizeMatMulKernels(r);
}

}  // namespace tandem

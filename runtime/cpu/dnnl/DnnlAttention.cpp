// oneDNN Attention-23/-24/-25 for f32: the products of all heads as two batched dnnl::matmul
// executions, S = Q K^T over [B, Hkv, G, Sq, D] x [B, Hkv, 1, D, T] (each KV head broadcast over
// its G = Hq / Hkv query heads: MHA, GQA and MQA without copies) and Y = P V, with the row pass
// of runtime/cpu/ref/Attention.h (scale, softcap, masks, softmax) between them over the
// [B, Hq, Sq, T] scores in the thread workspace ("dnnl"); or one head at a time per thread,
// the same products as [Sq, D] x [D, T] and [Sq, T] x [T, Dv] matmuls with the row pass between
// them while the head's scores are in cache ("dnnl-head"). The def's third variant is the
// reference kernel (the AVX2 GEMM per head, K^T and V packed once per KV head): the loader
// times them on the instance and keeps the fastest (KernelDef::variants "dnnl", "dnnl-head",
// "ref").
#include <algorithm>
#include <cstring>

#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"
#include "runtime/cpu/ref/Attention.h"

namespace tandem {
namespace dnnlcpu {
namespace {

class AttentionKernel : public DnnlKernel {
 public:
  /// Builds the two matmuls; an error when the plan does not parse or oneDNN offers only its
  /// reference matmul for these strides (the caller then keeps the reference kernel).
  Status init(const KernelContext& ctx, bool perHead) {
    TANDEM_RETURN_IF_ERROR(ref::planAttention(ctx, &p_));
    perHead_ = perHead;
    name_ = std::make_unique<ref::OpName>(ctx);
    const ref::AttentionPlan& p = p_;
    const int64_t G = p.Hq / p.Hkv;
    auto strided = [](const dims& d, const dims& s) {
      return dnnl::memory::desc(d, dnnl::memory::data_type::f32, s);
    };
    // K and V rows: their own strides, or (with a past cache) [B, Hkv, T, D|Dv] blocks.
    ref::HeadLayout k, v;
    ref::keyLayouts(p, &k, &v);
    dnnl::engine& eng = cpuEngine();
    if (perHead) {
      // One head's products: Q_h [Sq, D] x K_h^T [D, T] and P [Sq, T] x V_h [T, Dv], executed
      // per (b, head) task on its thread, the scores staying in that thread's cache.
      auto qMd = strided({p.Sq, p.D}, {p.q.row, 1});
      auto kMd = strided({p.D, p.T}, {1, k.row});
      auto vMd = strided({p.T, p.Dv}, {v.row, 1});
      auto yMd = strided({p.Sq, p.Dv}, {p.y.row, 1});
      dnnl::matmul::primitive_desc qkPd(dnnl::matmul::desc(qMd, kMd, plainDesc({p.Sq, p.T})), baseAttr(), eng);
      dnnl::matmul::primitive_desc pvPd(dnnl::matmul::desc(plainDesc({p.Sq, p.T}), vMd, yMd), baseAttr(), eng);
      if (isReferenceImpl(qkPd) || isReferenceImpl(pvPd))
        return Status::error(ctx.opType + " (dnnl): oneDNN has only its reference matmul for these "
                             "strides");
      qk_ = dnnl::matmul(qkPd);
      pv_ = dnnl::matmul(pvPd);
      qMd_ = qMd, kMd_ = kMd, vMd_ = vMd, yMd_ = yMd, sMd_ = plainDesc({p.Sq, p.T});
      headScratch_ = std::max(qkPd.scratchpad_desc().get_size(), pvPd.scratchpad_desc().get_size());
      qkScratchMd_ = qkPd.scratchpad_desc();
      pvScratchMd_ = pvPd.scratchpad_desc();
      impl_ = std::string("dnnl:") + qkPd.impl_info_str() + " per head";
      return Status::ok();
    }
    scoresAt_ = ws_.add(p.B * p.Hq * p.Sq * p.T * sizeof(float));
    const dims sDims = {p.B, p.Hkv, G, p.Sq, p.T};
    auto qMd = strided({p.B, p.Hkv, G, p.Sq, p.D}, {p.q.batch, G * p.q.head, p.q.head, p.q.row, 1});
    auto kMd = strided({p.B, p.Hkv, 1, p.D, p.T}, {k.batch, k.head, k.head, 1, k.row});
    auto vMd = strided({p.B, p.Hkv, 1, p.T, p.Dv}, {v.batch, v.head, v.head, v.row, 1});
    auto yMd = strided({p.B, p.Hkv, G, p.Sq, p.Dv}, {p.y.batch, G * p.y.head, p.y.head, p.y.row, 1});
    dnnl::matmul::primitive_desc qkPd(dnnl::matmul::desc(qMd, kMd, plainDesc(sDims)), baseAttr(), eng);
    dnnl::matmul::primitive_desc pvPd(dnnl::matmul::desc(plainDesc(sDims), vMd, yMd), baseAttr(), eng);
    if (isReferenceImpl(qkPd) || isReferenceImpl(pvPd))
      return Status::error(ctx.opType + " (dnnl): oneDNN has only its reference matmul for these "
                           "strides");
    qk_ = dnnl::matmul(qkPd);
    pv_ = dnnl::matmul(pvPd);
    q_ = dnnl::memory(qMd, eng, nullptr);
    k_ = dnnl::memory(kMd, eng, nullptr);
    s_ = dnnl::memory(plainDesc(sDims), eng, nullptr);
    v_ = dnnl::memory(vMd, eng, nullptr);
    y_ = dnnl::memory(yMd, eng, nullptr);
    qkArgs_.add(DNNL_ARG_SRC, q_);
    qkArgs_.add(DNNL_ARG_WEIGHTS, k_);
    qkArgs_.add(DNNL_ARG_DST, s_);
    qkScratch_.init(qkPd, &ws_, &qkArgs_);
    pvArgs_.add(DNNL_ARG_SRC, s_);
    pvArgs_.add(DNNL_ARG_WEIGHTS, v_);
    pvArgs_.add(DNNL_ARG_DST, y_);
    pvScratch_.init(pvPd, &ws_, &pvArgs_);
    impl_ = std::string("dnnl:") + qkPd.impl_info_str();
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    const ref::AttentionPlan& p = p_;
    const int64_t* nonpad = nullptr;
    TANDEM_RETURN_IF_ERROR(ref::nonpadOf(p, *name_, in, &nonpad));
    return guardRun("Attention", [&] {
      std::vector<float> keyBuf, valueBuf;
      const ref::KeysAndValues<float> kv = ref::keysAndValues<float>(p, in, out, &keyBuf, &valueBuf);
      if (perHead_) return runPerHead(in, out, kv, nonpad);
      char* ws = threadWorkspace(ws_.total());
      float* scores = reinterpret_cast<float*>(ws + scoresAt_);
      qkScratch_.bindBuffers(ws);
      pvScratch_.bindBuffers(ws);
      bind(q_, in[0]->raw());
      bind(k_, kv.keys);
      bind(s_, scores);
      bind(v_, kv.values);
      bind(y_, out[0]->raw());
      qkArgs_.execute(qk_);
      const bool fast = avx2::available();
      ref::parallelRanges(p.threads, p.B * p.Hq, 1, [&](int64_t begin, int64_t end) {
        std::vector<float> logits(p.T);
        for (int64_t task = begin; task < end; ++task) {
          float* rows = scores + task * p.Sq * p.T;
          ref::attentionRows<float>(p, task / p.Hq, task % p.Hq, rows, rows, logits.data(), in,
                                    nonpad, out, fast);
        }
      });
      pvArgs_.execute(pv_);
      return Status::ok();
    });
  }

 private:
  // Per (b, query head) on the calling thread of its range: Q_h K_h^T into the thread's scores,
  // the row pass, P V_h into Y. Memory objects per range (oneDNN's bind their handles).
  Status runPerHead(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
                    const ref::KeysAndValues<float>& kv, const int64_t* nonpad) {
    const ref::AttentionPlan& p = p_;
    const int64_t group = p.Hq / p.Hkv;
    const bool fast = avx2::available();
    const size_t scoresBytes = (p.Sq * p.T * sizeof(float) + 63) / 64 * 64;
    ref::parallelRanges(p.threads, p.B * p.Hq, 1, [&](int64_t begin, int64_t end) {
      dnnl::engine& eng = cpuEngine();
      char* ws = threadWorkspace(scoresBytes + headScratch_);
      float* scores = reinterpret_cast<float*>(ws);
      dnnl::memory q(qMd_, eng, nullptr), kt(kMd_, eng, nullptr), sc(sMd_, eng, scores),
          vv(vMd_, eng, nullptr), y(yMd_, eng, nullptr);
      ExecArgs qkArgs, pvArgs;
      qkArgs.add(DNNL_ARG_SRC, q);
      qkArgs.add(DNNL_ARG_WEIGHTS, kt);
      qkArgs.add(DNNL_ARG_DST, sc);
      pvArgs.add(DNNL_ARG_SRC, sc);
      pvArgs.add(DNNL_ARG_WEIGHTS, vv);
      pvArgs.add(DNNL_ARG_DST, y);
      dnnl::memory qkPad, pvPad;
      if (qkScratchMd_.get_size()) {
        qkPad = dnnl::memory(qkScratchMd_, eng, ws + scoresBytes);
        qkArgs.add(DNNL_ARG_SCRATCHPAD, qkPad);
      }
      if (pvScratchMd_.get_size()) {
        pvPad = dnnl::memory(pvScratchMd_, eng, ws + scoresBytes);
        pvArgs.add(DNNL_ARG_SCRATCHPAD, pvPad);
      }
      std::vector<float> logits(p.T);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / p.Hq, h = task % p.Hq, kvh = h / group;
        bind(q, in[0]->data<float>() + p.q.at(b, h, 0));
        bind(kt, kv.keys + kv.k.at(b, kvh, 0));
        bind(vv, kv.values + kv.v.at(b, kvh, 0));
        bind(y, out[0]->data<float>() + p.y.at(b, h, 0));
        qkArgs.execute(qk_);
        ref::attentionRows<float>(p, b, h, scores, scores, logits.data(), in, nonpad, out, fast);
        pvArgs.execute(pv_);
      }
    });
    return Status::ok();
  }

  ref::AttentionPlan p_;
  bool perHead_ = false;
  dnnl::memory::desc qMd_, kMd_, vMd_, yMd_, sMd_, qkScratchMd_, pvScratchMd_;
  size_t headScratch_ = 0;
  std::unique_ptr<ref::OpName> name_;
  WorkspaceLayout ws_;
  size_t scoresAt_ = 0;
  dnnl::matmul qk_, pv_;
  dnnl::memory q_, k_, s_, v_, y_;
  ExecArgs qkArgs_, pvArgs_;
  Scratchpad qkScratch_, pvScratch_;
};

Status createAttention(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.variant == "ref") return ref::createAttention(ctx, out);
  if (!ctx.variant.empty() && ctx.variant != "dnnl" && ctx.variant != "dnnl-head")
    return Status::error("Attention: unknown variant '" + ctx.variant + "'");
  auto k = std::make_unique<AttentionKernel>();
  Status st = guardDnnl(ctx, [&] { return k->init(ctx, ctx.variant == "dnnl-head"); });
  if (st) {
    *out = std::move(k);
    return st;
  }
  // The heuristic (no variant named) falls back on the reference kernel; a named dnnl variant
  // that does not apply is an error (KernelContext::variant).
  if (ctx.variant.empty()) return ref::createAttention(ctx, out);
  return st;
}

}  // namespace

void registerDnnlAttentionKernels(KernelRegistry& r) {
  KernelDef d = makeDef(
      "Attention",
      [](const KernelContext& ctx) {
        // f32 Q, K, V; a bool or f32 mask and an i64 nonpad_kv_seqlen are the row pass's.
        for (size_t i : {0, 1, 2, 4, 5})
          if (i < ctx.inputTypes.size() && ctx.inputTypes[i].present() &&
              ctx.inputTypes[i].dtype != DType::F32)
            return false;
        return !hasEmptyTensor(ctx);
      },
      createAttention);
  d.accepts = [](const std::vector<DType>& in) {
    if (in.size() < 3 || in[0] != DType::F32) return false;
    for (DType t : in)
      if (t != DType::F32 && t != DType::Bool && t != DType::I64) return false;
    return true;
  };
  d.dtypesText = "Q, K, V f32; attn_mask bool or f32; nonpad_kv_seqlen i64";
  d.variants = [](const KernelContext&) {
    return std::vector<std::string>{"dnnl", "dnnl-head", "ref"};
  };
  r.add(std::move(d));
}

}  // namespace dnnlcpu
}  // namespace tandem

// Reference CPU kernels of the attention ops ONNX added after opset 17: Attention-23/-24/-25
// (one kernel: -23 and -24 are -25 without the window attributes and, for -23,
// nonpad_kv_seqlen) and RotaryEmbedding-23. f32 and f64; f16/bf16 models reach them through
// LegalizeF16's casts. Semantics: ONNX's operator docs and its reference implementation
// (onnx/reference/ops/op_attention.py, op_rotary_embedding.py), including the errata of ONNX
// 1.23: bottom-right causal alignment and a zero row, not NaN, for a fully masked query.
//
// Attention per (batch, query head), in f32 with the AVX2 GEMM where it runs (else scalar loops
// summing in double): S = scale * Q K^T [Sq, T], then per query row softcap, the additive bias
// (attn_mask, causal, window, nonpad_kv_seqlen), softmax, and Y = P V. Query head h reads KV
// head h / (Hq / Hkv) (GQA, MQA). With past_key/past_value the keys are past then K
// (present_key/present_value, written first when requested).
#include <algorithm>

#include "runtime/cpu/ref/Attention.h"

#include "runtime/cpu/avx2/Rows.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

// 4-D [B, H, S, D]: heads are blocks of S rows. 3-D [B, S, H D]: a head is D columns of each row.
HeadLayout headLayout(const Shape& s, int64_t heads) {
  if (s.size() == 4) return {s[1] * s[2] * s[3], s[2] * s[3], s[3]};
  return {s[1] * s[2], s[2] / heads, s[2]};
}

// A [K, N] right-hand operand of the products, element (k, n) at b[k * strideK + n * strideN]:
// packed once for the AVX2 GEMM when it runs (f32), else read in place by the scalar loops.
template <typename T>
struct RightOperand {
  const T* b = nullptr;
  int64_t K = 0, N = 0, strideK = 0, strideN = 0;
  avx2::PackedB packed;
  bool isPacked = false;

  void set(const T* data, int64_t k, int64_t n, int64_t sk, int64_t sn, bool fast) {
    b = data, K = k, N = n, strideK = sk, strideN = sn;
    isPacked = false;
    if constexpr (std::is_same_v<T, float>)
      if (fast) isPacked = packed.pack(data, k, n, sk, sn);
  }
  // c[i * ldc + n] = sum_k a[i * lda + k] * B(k, n) for i < M.
  void multiply(int64_t M, const T* a, int64_t lda, T* c, int64_t ldc, std::vector<double>* acc) const {
    if constexpr (std::is_same_v<T, float>) {
      if (isPacked) {
        avx2::sgemm(M, a, lda, packed, c, ldc, avx2::GemmEpilogue{}, 0, packed.panels());
        return;
      }
    }
    for (int64_t i = 0; i < M; ++i) {
      acc->assign(N, 0.0);
      for (int64_t k = 0; k < K; ++k) {
        // No skipping of zero weights: 0 times an infinite value is NaN, as in the GEMM path.
        const double w = double(a[i * lda + k]);
        for (int64_t n = 0; n < N; ++n) (*acc)[n] += w * double(b[k * strideK + n * strideN]);
      }
      for (int64_t n = 0; n < N; ++n) c[i * ldc + n] = T((*acc)[n]);
    }
  }
};

// Softmax of x[0, n) into y (n >= 1, some x finite).
template <typename T>
void softmaxInto(const T* x, T* y, int64_t n, bool fast) {
  if constexpr (std::is_same_v<T, float>)
    if (fast && avx2::softmaxRow(x, y, n, false)) return;
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, double(x[j]));
  double s = 0;
  for (int64_t j = 0; j < n; ++j) s += std::exp(double(x[j]) - m);
  for (int64_t j = 0; j < n; ++j) y[j] = T(std::exp(double(x[j]) - m) / s);
}

}  // namespace

Status planAttention(const KernelContext& ctx, AttentionPlan* p) {
  if (ctx.inputTypes.size() < 3) return opError(ctx, "expects inputs Q, K and V");
  const Shape& qs = ctx.inputTypes[0].shape;
  const Shape& ks = ctx.inputTypes[1].shape;
  const Shape& vs = ctx.inputTypes[2].shape;
  const DType dt = ctx.inputTypes[0].dtype;
  if (ctx.inputTypes[1].dtype != dt || ctx.inputTypes[2].dtype != dt)
    return opError(ctx, "Q, K and V must have one dtype");
  const size_t r = qs.size();
  if ((r != 3 && r != 4) || ks.size() != r || vs.size() != r)
    return opError(ctx, "Q, K and V must all be 3-D or all 4-D");
  p->B = qs[0];
  if (r == 4) {
    p->Hq = qs[1], p->Hkv = ks[1], p->Sq = qs[2], p->Skv = ks[2], p->D = qs[3], p->Dv = vs[3];
  } else {
    p->Hq = ctx.attrs->getInt("q_num_heads", 0);
    p->Hkv = ctx.attrs->getInt("kv_num_heads", 0);
    if (p->Hq < 1 || p->Hkv < 1 || qs[2] % p->Hq || ks[2] % p->Hkv || vs[2] % p->Hkv)
      return opError(ctx, "3-D inputs need q_num_heads and kv_num_heads dividing their features");
    p->Sq = qs[1], p->Skv = ks[1], p->D = qs[2] / p->Hq, p->Dv = vs[2] / p->Hkv;
  }
  if (p->Hkv < 1 || p->Hq % p->Hkv) return opError(ctx, "q heads must be a multiple of kv heads");
  p->q = headLayout(qs, p->Hq);
  p->k = headLayout(ks, p->Hkv);
  p->v = headLayout(vs, p->Hkv);
  p->y = headLayout(ctx.outputTypes[0].shape, p->Hq);
  const bool hasPast = inputPresent(ctx, 4) && inputPresent(ctx, 5);
  if (inputPresent(ctx, 4) != inputPresent(ctx, 5))
    return opError(ctx, "past_key and past_value must be given together");
  p->P = hasPast ? ctx.inputTypes[4].shape[2] : 0;
  p->T = p->P + p->Skv;
  p->hasNonpad = inputPresent(ctx, 6);
  if (p->hasNonpad && hasPast) return opError(ctx, "nonpad_kv_seqlen cannot be used with a past cache");
  p->scale = ctx.attrs->has("scale") ? ctx.attrs->getFloat("scale", 1.f)
                                    : 1.0 / std::sqrt(double(std::max<int64_t>(p->D, 1)));
  p->softcap = ctx.attrs->getFloat("softcap", 0.f);
  p->causal = ctx.attrs->getInt("is_causal", 0) != 0;
  p->left = ctx.attrs->getInt("left_window_size", -1);
  p->right = ctx.attrs->getInt("right_window_size", -1);
  if (p->left < -1 || p->right < -1) return opError(ctx, "window sizes must be -1 or >= 0");
  p->mode = ctx.attrs->getInt("qk_matmul_output_mode", 0);
  if (p->mode < 0 || p->mode > 3) return opError(ctx, "qk_matmul_output_mode must be 0 to 3");
  p->hasMask = inputPresent(ctx, 3);
  if (p->hasMask) {
    const TensorType& m = ctx.inputTypes[3];
    p->boolMask = m.dtype == DType::Bool;
    if (!p->boolMask && m.dtype != dt) return opError(ctx, "attn_mask must be bool or Q's dtype");
    if (m.shape.empty() || m.shape.size() > 4) return opError(ctx, "attn_mask must have rank 1 to 4");
    // Right-aligned over [B, Hq, Sq, T']: strides of the dims it has, 0 where it has 1.
    Shape full(4 - m.shape.size(), 1);
    full.insert(full.end(), m.shape.begin(), m.shape.end());
    const int64_t want[3] = {p->B, p->Hq, p->Sq};
    for (int d = 0; d < 3; ++d)
      if (full[d] != 1 && full[d] != want[d])
        return opError(ctx, "attn_mask does not broadcast to [batch, q heads, q sequence, keys]");
    p->mLen = full[3];
    if (p->mLen > p->T) return opError(ctx, "attn_mask has more keys than K (and past_key)");
    p->mq = full[2] == 1 ? 0 : p->mLen;
    p->mh = full[1] == 1 ? 0 : full[2] * p->mLen;
    p->mb = full[0] == 1 ? 0 : full[1] * full[2] * p->mLen;
  }
  p->presentK = outputRequested(ctx, 1);
  p->presentV = outputRequested(ctx, 2);
  p->qkOut = outputRequested(ctx, 3);
  p->threads = std::max(1, ctx.threads);
  return Status::ok();
}

Status nonpadOf(const AttentionPlan& p, const OpName& op, const std::vector<const Tensor*>& in,
                const int64_t** out) {
  *out = nullptr;
  if (!p.hasNonpad) return Status::ok();
  const int64_t* nonpad = inputAt(in, 6)->data<int64_t>();
  for (int64_t b = 0; b < p.B; ++b)
    if (nonpad[b] < 0 || nonpad[b] > p.T)
      return opError(op, "nonpad_kv_seqlen[" + std::to_string(b) + "] = " +
                             std::to_string(nonpad[b]) + " is outside [0, " + std::to_string(p.T) +
                             "]");
  *out = nonpad;
  return Status::ok();
}

namespace {
// Past then the new rows of one (b, kv head) into dst [T, width].
template <typename T>
void gatherKeys(const AttentionPlan& p, const Tensor* past, const T* cur, const HeadLayout& cl,
                int64_t width, int64_t b, int64_t h, T* dst) {
  if (past && p.P)
    std::memcpy(dst, past->data<T>() + (b * p.Hkv + h) * p.P * width, p.P * width * sizeof(T));
  for (int64_t s = 0; s < p.Skv; ++s)
    std::memcpy(dst + (p.P + s) * width, cur + cl.at(b, h, s), width * sizeof(T));
}
}  // namespace

void keyLayouts(const AttentionPlan& p, HeadLayout* k, HeadLayout* v) {
  *k = p.P > 0 ? HeadLayout{p.Hkv * p.T * p.D, p.T * p.D, p.D} : p.k;
  *v = p.P > 0 ? HeadLayout{p.Hkv * p.T * p.Dv, p.T * p.Dv, p.Dv} : p.v;
}

template <typename T>
KeysAndValues<T> keysAndValues(const AttentionPlan& p, const std::vector<const Tensor*>& in,
                               const std::vector<Tensor*>& outs, std::vector<T>* keyBuf,
                               std::vector<T>* valueBuf) {
  T* keys = p.presentK ? outputAt(outs, 1)->data<T>() : nullptr;
  T* values = p.presentV ? outputAt(outs, 2)->data<T>() : nullptr;
  if (p.P > 0 && !keys) {
    keyBuf->resize(p.B * p.Hkv * p.T * p.D);
    keys = keyBuf->data();
  }
  if (p.P > 0 && !values) {
    valueBuf->resize(p.B * p.Hkv * p.T * p.Dv);
    values = valueBuf->data();
  }
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hkv; ++h) {
      if (keys)
        gatherKeys(p, inputAt(in, 4), in[1]->data<T>(), p.k, p.D, b, h,
                   keys + (b * p.Hkv + h) * p.T * p.D);
      if (values)
        gatherKeys(p, inputAt(in, 5), in[2]->data<T>(), p.v, p.Dv, b, h,
                   values + (b * p.Hkv + h) * p.T * p.Dv);
    }
  KeysAndValues<T> kv;
  kv.keys = p.P > 0 ? keys : in[1]->data<T>();
  kv.values = p.P > 0 ? values : in[2]->data<T>();
  keyLayouts(p, &kv.k, &kv.v);
  return kv;
}

template <typename T>
void attentionRows(const AttentionPlan& p, int64_t b, int64_t h, const T* scores, T* probs,
                   T* logits, const std::vector<const Tensor*>& in, const int64_t* nonpad,
                   const std::vector<Tensor*>& outs, bool fast) {
  const double negInf = -std::numeric_limits<double>::infinity();
  const Tensor* mask = p.hasMask ? inputAt(in, 3) : nullptr;
  T* qk = p.qkOut ? outputAt(outs, 3)->data<T>() : nullptr;
  const int64_t offset = p.P > 0 ? p.P : nonpad ? nonpad[b] - p.Sq : 0;
  const int64_t mrowBase = b * p.mb + h * p.mh;
  for (int64_t i = 0; i < p.Sq; ++i) {
    const T* row = scores + i * p.T;
    T* prob = probs + i * p.T;
    T* qkRow = qk ? qk + ((b * p.Hq + h) * p.Sq + i) * p.T : nullptr;
    // The keys the causal frontier, the window, nonpad_kv_seqlen and the mask's length let
    // query i see: [lo, hi); the others are -inf in the bias and 0 after the softmax.
    const int64_t pos = i + offset;
    int64_t lo = 0, hi = p.T;
    if (p.causal) hi = std::min(hi, pos + 1);
    if (p.right >= 0) hi = std::min(hi, pos + p.right + 1);
    if (p.left >= 0) lo = std::max(lo, pos - p.left);
    if (nonpad) hi = std::min(hi, nonpad[b]);
    if (p.hasMask) hi = std::min(hi, p.mLen);
    lo = std::min(lo, p.T);
    hi = std::max(hi, lo);
    auto capped = [&](int64_t j) {
      const double v = double(row[j]) * p.scale;
      return p.softcap > 0 ? p.softcap * std::tanh(v / p.softcap) : v;
    };
    if (qkRow && p.mode <= 1)
      for (int64_t j = 0; j < p.T; ++j)
        qkRow[j] = T(p.mode == 0 ? double(row[j]) * p.scale : capped(j));
    bool any = false;  // some key of [lo, hi) not masked by attn_mask
    const int64_t mrow = mrowBase + i * p.mq;
    for (int64_t j = lo; j < hi; ++j) {
      double bias = 0;
      if (p.hasMask)
        bias = p.boolMask ? (mask->data<bool>()[mrow + j] ? 0.0 : negInf)
                          : double(mask->data<T>()[mrow + j]);
      any |= bias != negInf;
      logits[j] = T(capped(j) + bias);
    }
    if (qkRow && p.mode == 2)
      for (int64_t j = 0; j < p.T; ++j) qkRow[j] = j >= lo && j < hi ? logits[j] : T(negInf);
    std::fill(prob, prob + lo, T(0));
    std::fill(prob + hi, prob + p.T, T(0));
    // A fully masked row (every key's bias -inf) is 0, not NaN.
    if (any) softmaxInto<T>(logits + lo, prob + lo, hi - lo, fast);
    else std::fill(prob + lo, prob + hi, T(0));
    if (qkRow && p.mode == 3) std::copy(prob, prob + p.T, qkRow);
  }
}

template KeysAndValues<float> keysAndValues<float>(const AttentionPlan&,
                                                  const std::vector<const Tensor*>&,
                                                  const std::vector<Tensor*>&,
                                                  std::vector<float>*, std::vector<float>*);
template KeysAndValues<double> keysAndValues<double>(const AttentionPlan&,
                                                    const std::vector<const Tensor*>&,
                                                    const std::vector<Tensor*>&,
                                                    std::vector<double>*, std::vector<double>*);
template void attentionRows<float>(const AttentionPlan&, int64_t, int64_t, const float*, float*,
                                   float*, const std::vector<const Tensor*>&, const int64_t*,
                                   const std::vector<Tensor*>&, bool);
template void attentionRows<double>(const AttentionPlan&, int64_t, int64_t, const double*,
                                    double*, double*, const std::vector<const Tensor*>&,
                                    const int64_t*, const std::vector<Tensor*>&, bool);

namespace {

// The reference products: per (b, query head), S = Q K^T then Y = P V through RightOperand
// (packed once per KV head for the AVX2 GEMM). Tasks run in (b, head) order, so a thread's
// range visits the query heads of one KV head in a row and packs its K^T and V once.
template <typename T>
Status runReference(const AttentionPlan& p, const OpName& name, const Inputs& in,
                    const Outputs& outs) {
  const int64_t* nonpad = nullptr;
  TANDEM_RETURN_IF_ERROR(nonpadOf(p, name, in, &nonpad));
  std::vector<T> keyBuf, valueBuf;
  const KeysAndValues<T> kv = keysAndValues<T>(p, in, outs, &keyBuf, &valueBuf);
  const T* Q = in[0]->data<T>();
  T* Y = outs[0]->data<T>();
  const bool fast = std::is_same_v<T, float> && avx2::available();
  const int64_t group = p.Hq / p.Hkv;
  parallelRanges(p.threads, p.B * p.Hq, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> scores(p.Sq * p.T), probs(p.Sq * p.T), logits(p.T);
    std::vector<double> acc;
    RightOperand<T> keysT, values;
    int64_t packedFor = -1;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / p.Hq, h = task % p.Hq, kvh = h / group;
      if (packedFor != b * p.Hkv + kvh) {
        packedFor = b * p.Hkv + kvh;
        // K^T: (d, t) at t * row + d; V: (t, d) at t * row + d.
        keysT.set(kv.keys + kv.k.at(b, kvh, 0), p.D, p.T, 1, kv.k.row, fast);
        values.set(kv.values + kv.v.at(b, kvh, 0), p.T, p.Dv, kv.v.row, 1, fast);
      }
      keysT.multiply(p.Sq, Q + p.q.at(b, h, 0), p.q.row, scores.data(), p.T, &acc);
      attentionRows<T>(p, b, h, scores.data(), probs.data(), logits.data(), in, nonpad, outs, fast);
      values.multiply(p.Sq, probs.data(), p.T, Y + p.y.at(b, h, 0), p.y.row, &acc);
    }
  });
  return Status::ok();
}

}  // namespace

Status createAttention(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  AttentionPlan p;
  TANDEM_RETURN_IF_ERROR(planAttention(ctx, &p));
  OpName name(ctx);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [p, name](const Inputs& in, const Outputs& outs) -> Status {
      return runReference<T>(p, name, in, outs);
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

namespace {

// ---- RotaryEmbedding-23 ------------------------------------------------------------------

// X [B, H, S, head] or [B, S, H head]; per token and head, the pairs (x1, x2) of the first
// `rot` features, halves (j, j + rot / 2) or interleaved (2j, 2j + 1), become
// (cos x1 - sin x2, sin x1 + cos x2) with cos and sin at the token's position; the features
// past `rot` are copied. Computed in X's dtype, as the reference does.
Status createRotaryEmbedding(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() < 3) return opError(ctx, "expects inputs X, cos_cache and sin_cache");
  const Shape& xs = ctx.inputTypes[0].shape;
  const bool four = xs.size() == 4;
  if (!four && xs.size() != 3) return opError(ctx, "X must be 3-D or 4-D");
  const int64_t heads = four ? xs[1] : ctx.attrs->getInt("num_heads", 0);
  if (heads < 1 || (!four && xs[2] % heads)) return opError(ctx, "num_heads must divide X's hidden size");
  const int64_t B = xs[0], S = four ? xs[2] : xs[1], head = four ? xs[3] : xs[2] / heads;
  int64_t rot = ctx.attrs->getInt("rotary_embedding_dim", 0);
  if (rot == 0) rot = head;
  if (rot < 0 || rot % 2 || rot > head) return opError(ctx, "rotary_embedding_dim must be even and <= head size");
  const int64_t half = rot / 2;
  const bool interleaved = ctx.attrs->getInt("interleaved", 0) != 0;
  const bool positions = inputPresent(ctx, 3);
  const Shape& cs = ctx.inputTypes[1].shape;
  if (cs.empty() || cs.back() != half) return opError(ctx, "cos_cache's last dim must be rotary dim / 2");
  const int64_t cacheRows = positions ? cs[0] : 0;
  OpName name(ctx);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      const T* cosC = in[1]->data<T>();
      const T* sinC = in[2]->data<T>();
      const int64_t* pos = positions ? in[3]->data<int64_t>() : nullptr;
      T* Y = outs[0]->data<T>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) {
          int64_t c = b * S + s;
          if (pos) {
            c = pos[b * S + s];
            if (c < 0 || c >= cacheRows)
              return opError(name, "position_ids[" + std::to_string(b) + ", " + std::to_string(s) +
                                       "] = " + std::to_string(c) + " is outside the caches' " +
                                       std::to_string(cacheRows) + " rows");
          }
          const T* cr = cosC + c * half;
          const T* sr = sinC + c * half;
          for (int64_t h = 0; h < heads; ++h) {
            const int64_t at = four ? ((b * heads + h) * S + s) * head : (b * S + s) * heads * head + h * head;
            const T* x = X + at;
            T* y = Y + at;
            for (int64_t j = 0; j < half; ++j) {
              const int64_t i1 = interleaved ? 2 * j : j, i2 = interleaved ? 2 * j + 1 : j + half;
              const T x1 = x[i1], x2 = x[i2];
              const T real = cr[j] * x1 - sr[j] * x2;
              const T imag = sr[j] * x1 + cr[j] * x2;
              y[i1] = real;
              y[i2] = imag;
            }
            for (int64_t j = rot; j < head; ++j) y[j] = x[j];
          }
        }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

}  // namespace

void registerAttentionKernels(KernelRegistry& r) {
  const std::string F = dtypesToText(floatTypes());
  addRef(
      r, "Attention",
      [](const std::vector<DType>& in) {
        // Q, K, V (and past_key, past_value) of one float dtype; the mask bool or that dtype;
        // nonpad_kv_seqlen i64 (present dtypes only, in order).
        if (in.size() < 3 || !contains(floatTypes(), in[0])) return false;
        for (size_t i = 1; i < in.size(); ++i)
          if (in[i] != in[0] && in[i] != DType::Bool && in[i] != DType::I64) return false;
        return true;
      },
      "Q, K, V " + F + "; attn_mask bool or Q's dtype; nonpad_kv_seqlen i64", createAttention);
  addRef(
      r, "RotaryEmbedding",
      [](const std::vector<DType>& in) {
        return in.size() >= 3 && contains(floatTypes(), in[0]) && in[1] == in[0] &&
               in[2] == in[0] && (in.size() < 4 || in[3] == DType::I64);
      },
      "X and caches " + F + "; position_ids i64", createRotaryEmbedding);
}

}  // namespace ref
}  // namespace tandem

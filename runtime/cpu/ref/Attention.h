// Internal to the CPU kernels (not a public header): the pieces of Attention-23/-24/-25 that
// the reference kernel (runtime/cpu/ref/Attention.cpp, products through the AVX2 GEMM or scalar
// loops) and the oneDNN one (runtime/cpu/dnnl/DnnlAttention.cpp, batched dnnl::matmul) share:
// the plan read from the KernelContext, the present_key/present_value copy, and the pass over
// one head's score rows (scale, softcap, bias, softmax, qk_matmul_output).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/Kernel.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {

/// Element (b, h, s, 0) of one head's rows at b * batch + h * head + s * row: 4-D
/// [B, H, S, D] has heads as blocks of S rows, 3-D [B, S, H D] a head as D columns of each row.
struct HeadLayout {
  int64_t batch = 0, head = 0, row = 0;
  int64_t at(int64_t b, int64_t h, int64_t s) const { return b * batch + h * head + s * row; }
};

/// One Attention instance, from its static shapes and attributes. T = P + Skv keys; query head
/// h reads KV head h / (Hq / Hkv).
struct AttentionPlan {
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, P = 0, T = 0, D = 0, Dv = 0;
  HeadLayout q, k, v, y;
  double scale = 1, softcap = 0;
  bool causal = false;
  int64_t left = -1, right = -1, mode = 0;
  bool hasMask = false, boolMask = false, hasNonpad = false;
  int64_t mb = 0, mh = 0, mq = 0, mLen = 0;  // mask strides over (b, h, i), its last dim
  bool presentK = false, presentV = false, qkOut = false;
  int threads = 1;
};

/// Reads and checks the plan; an error names the op and node.
Status planAttention(const KernelContext& ctx, AttentionPlan* p);
/// nonpad_kv_seqlen (input 6) or nullptr when absent; an error (naming `op`) when a value is
/// outside [0, T].
Status nonpadOf(const AttentionPlan& p, const OpName& op, const std::vector<const Tensor*>& in,
                const int64_t** out);
/// The layouts of the keys and values the products read: K's and V's own; or, with a past
/// cache, [B, Hkv, T, D|Dv] blocks of past then new rows.
void keyLayouts(const AttentionPlan& p, HeadLayout* k, HeadLayout* v);
/// Where the keys and values are, as rows of one stride each (keyLayouts).
template <typename T>
struct KeysAndValues {
  const T* keys = nullptr;
  const T* values = nullptr;
  HeadLayout k, v;
};
/// Writes the present_key / present_value outputs requested and returns the keys and values
/// the products read: with a past cache, those outputs, or copies in `keyBuf` / `valueBuf`
/// (resized here) where they are not requested.
template <typename T>
KeysAndValues<T> keysAndValues(const AttentionPlan& p, const std::vector<const Tensor*>& in,
                               const std::vector<Tensor*>& outs, std::vector<T>* keyBuf,
                               std::vector<T>* valueBuf);
/// Query head (b, h)'s Sq rows of unscaled Q K^T scores [Sq, T] into probabilities [Sq, T]
/// (may be `scores`): scale, softcap, the bias of attn_mask, causal, window and nonpad, softmax
/// (a fully masked row is 0), and output 3 (qk_matmul_output) when requested. `logits`: T
/// elements of scratch. `fast`: AVX2 softmax rows (f32, avx2::available()).
template <typename T>
void attentionRows(const AttentionPlan& p, int64_t b, int64_t h, const T* scores, T* probs,
                   T* logits, const std::vector<const Tensor*>& in, const int64_t* nonpad,
                   const std::vector<Tensor*>& outs, bool fast);
/// The reference kernel (f32, f64).
Status createAttention(const KernelContext& ctx, std::unique_ptr<Kernel>* out);

}  // namespace ref
}  // namespace tandem

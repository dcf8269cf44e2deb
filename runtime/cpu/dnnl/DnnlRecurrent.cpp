// oneDNN RNN primitives for ONNX RNN-14, GRU-14 and LSTM-14 (f32, forward inference): a whole
// sequence in one primitive, whose gate GEMMs cover every batch row and, for the input side,
// every time step at once, with the gate math fused after them (ONNX Runtime and PyTorch run
// these the same way). Covers what exporters write: layout 0, the default activations (RNN: one
// of Tanh, Relu, Sigmoid for every direction), no clip, no input_forget, constant W, R, B and P,
// sequence_lens absent or constant and equal to seq_length, forward / reverse / bidirectional,
// peepholes, GRU with linear_before_reset 0 or 1. Anything else runs on the reference kernel
// (runtime/cpu/ref/Recurrent.cpp), which implements the whole op. The same configurations also
// run on Tandem's AVX2 cell (runtime/cpu/avx2/Recurrent.h, variant "gemv", the default at batch
// <= 4, where oneDNN's primitive pays microseconds per step); the loader times both.
//
// ONNX -> oneDNN:
//   X [T, N, C] (layout 0) is src_layer tnc; initial_h / initial_c [D, N, H] are src_iter /
//   src_iter_c ldnc with L = 1 (the same bytes); Y_h / Y_c likewise are dst_iter / dst_iter_c.
//   Y [T, D, N, H] is dst_layer [T, N, D*H] (bidirectional_concat), the same bytes when D or N
//   is 1, otherwise reordered into Y.
//   W [D, G*H, C] and R [D, G*H, H] become ldigo weights {1, D, C|H, G, H}, gates reordered:
//   LSTM ONNX i, o, f, c -> oneDNN i, f, c, o; GRU z, r, h -> u, r, o (the same order).
//   B [D, 2*G*H] (Wb then Rb) becomes the bias {1, D, G', H}: Wb + Rb per gate, except for
//   linear-before-reset GRU (lbr_gru: G' = 4, the candidate's Wb_h and Rb_h apart).
//   P [D, 3H] (i, o, f) becomes weights_peephole {1, D, 3, H} (i, f, o).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/cpu/avx2/Recurrent.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {
namespace dnnlcpu {
namespace {

enum class Cell { Rnn, Gru, LbrGru, Lstm };

struct RnnSetup {
  Cell cell = Cell::Rnn;
  int64_t T = 0, N = 0, C = 0, H = 0, D = 1, G = 1;
  dnnl::rnn_direction direction = dnnl::rnn_direction::unidirectional_left2right;
  dnnl::algorithm activation = dnnl::algorithm::eltwise_tanh;  // vanilla RNN only
  bool peephole = false;
};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower((unsigned char)c));
  return s;
}

/// The activations attribute is the cell's default (repeated per direction), or for RNN one of
/// tanh / relu / sigmoid for every direction (*act). Anything else: false.
bool activationsSupported(const KernelContext& ctx, Cell cell, int64_t dirs, dnnl::algorithm* act) {
  const Attr* a = ctx.attrs->find("activations");
  if (!a) return true;
  if (a->kind != Attr::Kind::Strings) return false;
  std::vector<std::string> want;
  if (cell == Cell::Lstm) want = {"sigmoid", "tanh", "tanh"};
  else if (cell != Cell::Rnn) want = {"sigmoid", "tanh"};
  const std::vector<std::string>& got = a->strings;
  if (cell == Cell::Rnn) {
    if (got.empty() || (got.size() != 1 && got.size() != size_t(dirs))) return false;
    for (const std::string& s : got)
      if (lower(s) != lower(got[0])) return false;
    const std::string f = lower(got[0]);
    if (f == "tanh") *act = dnnl::algorithm::eltwise_tanh;
    else if (f == "relu") *act = dnnl::algorithm::eltwise_relu;
    else if (f == "sigmoid") *act = dnnl::algorithm::eltwise_logistic;
    else return false;
    return true;
  }
  if (got.size() != want.size() && got.size() != want.size() * size_t(dirs)) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (lower(got[i]) != want[i % want.size()]) return false;
  return true;
}

/// Reads the op into *s when oneDNN can run it exactly as ONNX defines it; false otherwise
/// (the reference kernel then runs it).
bool rnnSetup(const KernelContext& ctx, RnnSetup* s) {
  if (ctx.inputTypes.size() < 3 || hasEmptyTensor(ctx)) return false;
  s->cell = ctx.opType == "LSTM" ? Cell::Lstm
            : ctx.opType == "GRU" ? (ctx.attrs->getInt("linear_before_reset", 0) ? Cell::LbrGru : Cell::Gru)
                                  : Cell::Rnn;
  s->G = s->cell == Cell::Lstm ? 4 : s->cell == Cell::Rnn ? 1 : 3;
  const std::string dir = ctx.attrs->getString("direction", "forward");
  if (dir == "forward") s->direction = dnnl::rnn_direction::unidirectional_left2right;
  else if (dir == "reverse") s->direction = dnnl::rnn_direction::unidirectional_right2left;
  else if (dir == "bidirectional") s->direction = dnnl::rnn_direction::bidirectional_concat;
  else return false;
  s->D = dir == "bidirectional" ? 2 : 1;
  if (ctx.attrs->getInt("layout", 0) != 0 || ctx.attrs->getFloat("clip", 0.f) != 0.f ||
      ctx.attrs->getInt("input_forget", 0) != 0)
    return false;
  if (!activationsSupported(ctx, s->cell, s->D, &s->activation)) return false;
  const Shape& x = ctx.inputTypes[0].shape;
  const Shape& r = ctx.inputTypes[2].shape;
  if (x.size() != 3 || r.size() != 3 || ctx.inputTypes[0].dtype != DType::F32) return false;
  s->T = x[0];
  s->N = x[1];
  s->C = x[2];
  s->H = r[2];
  const int64_t GH = s->G * s->H;
  auto constOf = [&](size_t i) { return i < ctx.constInputs.size() ? ctx.constInputs[i] : nullptr; };
  auto is = [&](size_t i, const Shape& want) {
    return ctx.inputTypes[i].dtype == DType::F32 && ctx.inputTypes[i].shape == want;
  };
  // Weights must be constants of the documented shapes (prepacked once).
  if (!is(1, {s->D, GH, s->C}) || !is(2, {s->D, GH, s->H}) || !constOf(1) || !constOf(2)) return false;
  if (inputPresent(ctx, 3) && (!is(3, {s->D, 2 * GH}) || !constOf(3))) return false;
  if (inputPresent(ctx, 4)) {
    const Tensor* lens = constOf(4);
    if (!lens || numElements(ctx.inputTypes[4].shape) != s->N) return false;
    for (int64_t b = 0; b < s->N; ++b) {
      const int64_t len = lens->dtype() == DType::I64 ? lens->data<int64_t>()[b]
                          : lens->dtype() == DType::I32 ? lens->data<int32_t>()[b] : -1;
      if (len != s->T) return false;
    }
  }
  const Shape state{s->D, s->N, s->H};
  if (inputPresent(ctx, 5) && !is(5, state)) return false;
  if (s->cell == Cell::Lstm) {
    if (inputPresent(ctx, 6) && !is(6, state)) return false;
    if (inputPresent(ctx, 7)) {
      if (!is(7, {s->D, 3 * s->H}) || !constOf(7)) return false;
      s->peephole = true;
    }
  } else if (ctx.inputTypes.size() > 6) {
    return false;
  }
  for (size_t i = 0; i < ctx.outputTypes.size(); ++i) {
    if (!outputRequested(ctx, i)) continue;
    if (ctx.outputTypes[i].dtype != DType::F32) return false;
    if (ctx.outputTypes[i].shape != (i == 0 ? Shape{s->T, s->D, s->N, s->H} : state)) return false;
    if (i > 2 || (i == 2 && s->cell != Cell::Lstm)) return false;
  }
  return s->T > 0;
}

/// ONNX gate index of oneDNN gate g.
int64_t onnxGate(Cell cell, int64_t g) {
  static const int64_t lstm[4] = {0, 2, 3, 1};  // oneDNN i, f, c, o <- ONNX i, o, f, c
  return cell == Cell::Lstm ? lstm[g] : g;
}

/// ONNX W or R [D, G*H, K] as oneDNN's plain ldgoi (dims {1, D, K, G, H}), gates reordered.
std::vector<float> packGates(const RnnSetup& s, const Tensor& w, int64_t K) {
  std::vector<float> out(size_t(s.D * s.G * s.H * K));
  const float* src = w.data<float>();
  for (int64_t d = 0; d < s.D; ++d)
    for (int64_t g = 0; g < s.G; ++g) {
      const float* from = src + (d * s.G + onnxGate(s.cell, g)) * s.H * K;
      std::copy(from, from + s.H * K, out.data() + (d * s.G + g) * s.H * K);
    }
  return out;
}

/// ONNX B [D, 2*G*H] (absent: zeros) as oneDNN's bias {1, D, G', H} (ldgo).
std::vector<float> packBias(const RnnSetup& s, const Tensor* b, int64_t biasGates) {
  std::vector<float> out(size_t(s.D * biasGates * s.H), 0.f);
  if (!b) return out;
  const int64_t GH = s.G * s.H;
  for (int64_t d = 0; d < s.D; ++d) {
    const float* wb = b->data<float>() + d * 2 * GH;
    const float* rb = wb + GH;
    float* o = out.data() + d * biasGates * s.H;
    for (int64_t g = 0; g < s.G; ++g) {
      const int64_t og = onnxGate(s.cell, g);
      const bool apart = s.cell == Cell::LbrGru && g == 2;  // candidate: Wb_h here, Rb_h in gate 3
      for (int64_t k = 0; k < s.H; ++k)
        o[g * s.H + k] = wb[og * s.H + k] + (apart ? 0.f : rb[og * s.H + k]);
    }
    if (s.cell == Cell::LbrGru)
      for (int64_t k = 0; k < s.H; ++k) o[3 * s.H + k] = rb[2 * s.H + k];
  }
  return out;
}

/// ONNX P [D, 3H] (i, o, f) as oneDNN's weights_peephole {1, D, 3, H} (i, f, o).
std::vector<float> packPeephole(const RnnSetup& s, const Tensor& p) {
  std::vector<float> out(size_t(s.D * 3 * s.H));
  static const int64_t from[3] = {0, 2, 1};
  for (int64_t d = 0; d < s.D; ++d)
    for (int64_t g = 0; g < 3; ++g)
      std::copy_n(p.data<float>() + (d * 3 + from[g]) * s.H, s.H, out.data() + (d * 3 + g) * s.H);
  return out;
}

/// Copies host values laid out as `from` into owned oneDNN memory of layout `to`.
dnnl::memory packInto(std::vector<float> v, const dnnl::memory::desc& from,
                      const dnnl::memory::desc& to) {
  return prepackConstant(Tensor::view(DType::F32, Shape{int64_t(v.size())}, v.data()), from, to);
}

class RecurrentKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx, const RnnSetup& s) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    s_ = s;
    dnnl::engine& eng = cpuEngine();
    const int64_t T = s.T, N = s.N, C = s.C, H = s.H, D = s.D;
    const int64_t biasGates = s.cell == Cell::LbrGru ? 4 : s.G;
    auto md = [](const dims& d, tag t) { return dnnl::memory::desc(d, dt::f32, t); };
    const dnnl::memory::desc srcLayer = md({T, N, C}, tag::tnc);
    const dnnl::memory::desc state = md({1, D, N, H}, tag::ldnc);
    const dnnl::memory::desc wLayerAny = md({1, D, C, s.G, H}, tag::any);
    const dnnl::memory::desc wIterAny = md({1, D, H, s.G, H}, tag::any);
    const dnnl::memory::desc bias = md({1, D, biasGates, H}, tag::ldgo);
    const dnnl::memory::desc peep = md({1, D, 3, H}, tag::ldgo);
    const dnnl::memory::desc dstLayer = md({T, N, D * H}, tag::tnc);
    hasH0_ = inputPresent(ctx, 5);
    hasC0_ = s.cell == Cell::Lstm && inputPresent(ctx, 6);
    wantY_ = outputRequested(ctx, 0);
    wantYh_ = outputRequested(ctx, 1);
    wantYc_ = s.cell == Cell::Lstm && outputRequested(ctx, 2);
    // Every state is given to oneDNN (it rejects an LSTM with some of them only): an absent
    // initial state reads zeros from the workspace, an output nobody reads goes there too.
    const bool lstm = s.cell == Cell::Lstm;
    const dnnl::primitive_attr attr = baseAttr();
    const auto fwd = dnnl::prop_kind::forward_inference;
    dnnl::primitive_desc_base pd;
    dnnl::memory::desc wLayer, wIter;
    // Every cell's primitive descriptor: its chosen weight layouts, the primitive, the impl.
    auto take = [&](const auto& p, dnnl::primitive prim) {
      wLayer = p.weights_layer_desc();
      wIter = p.weights_iter_desc();
      prim_ = std::move(prim);
      pd = p;
    };
    switch (s.cell) {
      case Cell::Lstm: {
        auto d = s.peephole ? dnnl::lstm_forward::desc(fwd, s.direction, srcLayer, state, state,
                                                       wLayerAny, wIterAny, peep, bias, dstLayer,
                                                       state, state)
                            : dnnl::lstm_forward::desc(fwd, s.direction, srcLayer, state, state,
                                                       wLayerAny, wIterAny, bias, dstLayer, state,
                                                       state);
        dnnl::lstm_forward::primitive_desc p(d, attr, eng);
        take(p, dnnl::lstm_forward(p));
        break;
      }
      case Cell::Gru: {
        dnnl::gru_forward::primitive_desc p(
            {fwd, s.direction, srcLayer, state, wLayerAny, wIterAny, bias, dstLayer, state}, attr, eng);
        take(p, dnnl::gru_forward(p));
        break;
      }
      case Cell::LbrGru: {
        dnnl::lbr_gru_forward::primitive_desc p(
            {fwd, s.direction, srcLayer, state, wLayerAny, wIterAny, bias, dstLayer, state}, attr, eng);
        take(p, dnnl::lbr_gru_forward(p));
        break;
      }
      case Cell::Rnn: {
        dnnl::vanilla_rnn_forward::primitive_desc p(
            {fwd, s.activation, s.direction, srcLayer, state, wLayerAny, wIterAny, bias, dstLayer,
             state},
            attr, eng);
        take(p, dnnl::vanilla_rnn_forward(p));
        break;
      }
    }
    setImpl(pd);
    scratch_.init(pd, &ws_, &args_);
    // Constant operands, prepacked once.
    weightsLayer_ = packInto(packGates(s, *ctx.constInputs[1], C), md({1, D, C, s.G, H}, tag::ldgoi), wLayer);
    weightsIter_ = packInto(packGates(s, *ctx.constInputs[2], H), md({1, D, H, s.G, H}, tag::ldgoi), wIter);
    bias_ = packInto(packBias(s, inputPresent(ctx, 3) ? ctx.constInputs[3] : nullptr, biasGates), bias, bias);
    args_.add(DNNL_ARG_WEIGHTS_LAYER, weightsLayer_);
    args_.add(DNNL_ARG_WEIGHTS_ITER, weightsIter_);
    args_.add(DNNL_ARG_BIAS, bias_);
    if (s.peephole) {
      peephole_ = packInto(packPeephole(s, *ctx.constInputs[7]), peep, peep);
      args_.add(DNNL_ARG_WEIGHTS_PEEPHOLE, peephole_);
    }
    // Activations, bound per run.
    srcLayer_ = dnnl::memory(srcLayer, eng, DNNL_MEMORY_NONE);
    dstLayer_ = dnnl::memory(dstLayer, eng, DNNL_MEMORY_NONE);
    args_.add(DNNL_ARG_SRC_LAYER, srcLayer_);
    args_.add(DNNL_ARG_DST_LAYER, dstLayer_);
    auto addState = [&](int arg, dnnl::memory* m) {
      *m = dnnl::memory(state, eng, DNNL_MEMORY_NONE);
      args_.add(arg, *m);
    };
    addState(DNNL_ARG_SRC_ITER, &srcIter_);
    addState(DNNL_ARG_DST_ITER, &dstIter_);
    if (lstm) {
      addState(DNNL_ARG_SRC_ITER_C, &srcIterC_);
      addState(DNNL_ARG_DST_ITER_C, &dstIterC_);
    }
    // Zeros for an absent initial state (both when the LSTM has neither), then room for the
    // unread final states.
    if (!hasH0_ || (lstm && !hasC0_)) zerosOff_ = ws_.add(state.get_size());
    if (!wantYh_ || (lstm && !wantYc_)) unreadOff_ = ws_.add(state.get_size());
    stateBytes_ = state.get_size();
    // dst_layer [T, N, D, H] is Y [T, D, N, H] only when D or N is 1; otherwise it goes to the
    // workspace and a reorder writes Y. Not requested: the workspace.
    directY_ = wantY_ && (D == 1 || N == 1);
    if (!directY_) dstOff_ = ws_.add(dstLayer.get_size());
    if (wantY_ && !directY_) {
      const dims tndh{T, N, D, H};
      yFrom_ = dnnl::memory(plainDesc(tndh), eng, DNNL_MEMORY_NONE);
      yTo_ = dnnl::memory(dnnl::memory::desc(tndh, dt::f32, dims{D * N * H, H, N * H, 1}), eng,
                          DNNL_MEMORY_NONE);
      yReorder_ = dnnl::reorder(yFrom_, yTo_);
    }
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun(opName(), [&] {
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      scratch_.bindBuffers(ws);
      bind(srcLayer_, in[0]->raw());
      if (!hasH0_ || (s_.cell == Cell::Lstm && !hasC0_)) std::memset(ws + zerosOff_, 0, stateBytes_);
      bind(srcIter_, hasH0_ ? in[5]->raw() : ws + zerosOff_);
      bind(dstIter_, wantYh_ ? out[1]->raw() : ws + unreadOff_);
      if (s_.cell == Cell::Lstm) {
        bind(srcIterC_, hasC0_ ? in[6]->raw() : ws + zerosOff_);
        bind(dstIterC_, wantYc_ ? out[2]->raw() : ws + unreadOff_);
      }
      void* y = directY_ ? out[0]->raw() : ws + dstOff_;
      bind(dstLayer_, y);
      args_.execute(prim_);
      if (wantY_ && !directY_) {
        bind(yFrom_, y);
        bind(yTo_, out[0]->raw());
        yReorder_.execute(cpuStream(), yFrom_, yTo_);
      }
      return Status::ok();
    });
  }

 private:
  const char* opName() const {
    return s_.cell == Cell::Lstm ? "LSTM" : s_.cell == Cell::Rnn ? "RNN" : "GRU";
  }

  RnnSetup s_;
  dnnl::primitive prim_;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  ExecArgs args_;
  dnnl::memory weightsLayer_, weightsIter_, bias_, peephole_;
  dnnl::memory srcLayer_, dstLayer_, srcIter_, srcIterC_, dstIter_, dstIterC_;
  dnnl::memory yFrom_, yTo_;
  dnnl::reorder yReorder_;
  bool hasH0_ = false, hasC0_ = false, wantY_ = false, wantYh_ = false, wantYc_ = false;
  bool directY_ = false;
  size_t dstOff_ = 0, zerosOff_ = 0, unreadOff_ = 0, stateBytes_ = 0;
};

/// The same ops on Tandem's small-batch AVX2 cell (runtime/cpu/avx2/Recurrent.h): variant
/// "gemv", chosen by default at batch <= 4.
class GemvRecurrentKernel : public Kernel {
 public:
  bool init(const KernelContext& ctx, const RnnSetup& s) {
    using K = avx2::RecurrentCell::Kind;
    avx2::RecurrentCell::Config c;
    c.kind = s.cell == Cell::Lstm ? K::Lstm : s.cell == Cell::Gru ? K::Gru
             : s.cell == Cell::LbrGru ? K::LbrGru : K::Rnn;
    c.T = s.T, c.N = s.N, c.C = s.C, c.H = s.H, c.D = s.D;
    c.reverse = s.direction == dnnl::rnn_direction::unidirectional_right2left;
    c.rnnActivation = s.activation == dnnl::algorithm::eltwise_relu ? avx2::RecurrentCell::RnnActivation::Relu
                      : s.activation == dnnl::algorithm::eltwise_logistic
                          ? avx2::RecurrentCell::RnnActivation::Logistic
                          : avx2::RecurrentCell::RnnActivation::Tanh;
    auto data = [&](size_t i) {
      return inputPresent(ctx, i) ? ctx.constInputs[i]->data<float>() : nullptr;
    };
    threads_ = std::max(1, ctx.threads);
    lstm_ = s.cell == Cell::Lstm;
    return cell_.init(c, data(1), data(2), data(3), lstm_ && s.peephole ? data(7) : nullptr);
  }
  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    auto raw = [](Tensor* t) { return t ? t->data<float>() : nullptr; };
    const Tensor* h0 = in.size() > 5 ? in[5] : nullptr;
    const Tensor* c0 = lstm_ && in.size() > 6 ? in[6] : nullptr;
    float* ws = reinterpret_cast<float*>(threadWorkspace(size_t(cell_.workspaceFloats()) * sizeof(float)));
    cell_.run(in[0]->data<float>(), h0 ? h0->data<float>() : nullptr, c0 ? c0->data<float>() : nullptr,
              raw(out[0]), out.size() > 1 ? raw(out[1]) : nullptr,
              lstm_ && out.size() > 2 ? raw(out[2]) : nullptr, ws, threads_);
    return Status::ok();
  }
  std::string implName() const override { return "avx2:recurrent-gemv"; }

 private:
  avx2::RecurrentCell cell_;
  int threads_ = 1;
  bool lstm_ = false;
};

/// "gemv" where the AVX2 cell can run, and "dnnl".
std::vector<std::string> recurrentVariants(const KernelContext& ctx) {
  if (!avx2::available()) return {"dnnl"};
  return {"gemv", "dnnl"};
}

}  // namespace

void registerDnnlRecurrentKernels(KernelRegistry& r) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    KernelDef d = makeDef(
        op, [](const KernelContext& ctx) { RnnSetup s; return rnnSetup(ctx, &s); },
        [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
          RnnSetup s;
          if (!rnnSetup(ctx, &s))
            return Status::error(ctx.opType + " (dnnl): configuration outside the oneDNN kernel");
          // Batch <= 4: the AVX2 cell (oneDNN's primitive pays microseconds per step there).
          const std::string variant =
              !ctx.variant.empty() ? ctx.variant : avx2::available() && s.N <= 4 ? "gemv" : "dnnl";
          if (variant == "gemv") {
            auto k = std::make_unique<GemvRecurrentKernel>();
            if (!k->init(ctx, s)) return Status::error(ctx.opType + ": the AVX2 cell cannot run here");
            *out = std::move(k);
            return Status::ok();
          }
          if (variant != "dnnl") return Status::error(ctx.opType + ": unknown variant '" + variant + "'");
          return guardDnnl(ctx, [&] {
            auto k = std::make_unique<RecurrentKernel>();
            TANDEM_RETURN_IF_ERROR(k->init(ctx, s));
            *out = std::move(k);
            return Status::ok();
          });
        });
    d.variants = recurrentVariants;
    // sequence_lens (i32/i64) is the one non-f32 input; rnnSetup checks which is which.
    d.accepts = [](const std::vector<DType>& in) {
      if (in.empty() || in[0] != DType::F32) return false;
      for (DType t : in)
        if (t != DType::F32 && t != DType::I32 && t != DType::I64) return false;
      return true;
    };
    r.add(std::move(d));
  }
}

}  // namespace dnnlcpu
}  // namespace tandem

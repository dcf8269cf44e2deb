// Reference kernels of the recurrent ops RNN-14, GRU-14 and LSTM-14: forward, reverse and
// bidirectional, optional B, sequence_lens, initial states and (LSTM) peepholes, the ONNX
// activation list with activation_alpha/beta, clip, GRU's linear_before_reset, layouts 0 and 1.
// Each step is a small matrix-vector product per batch row, accumulated in f64.
#include <algorithm>
#include <cctype>

#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

// ---- activations ---------------------------------------------------------------------------

enum class ActKind { Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh,
                     HardSigmoid, Elu, Softsign, Softplus };

struct Activation {
  ActKind kind = ActKind::Tanh;
  double alpha = 0, beta = 0;
  double operator()(double x) const {
    switch (kind) {
      case ActKind::Relu: return std::max(0.0, x);
      case ActKind::Tanh: return std::tanh(x);
      case ActKind::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
      case ActKind::Affine: return alpha * x + beta;
      case ActKind::LeakyRelu: return x >= 0 ? x : alpha * x;
      case ActKind::ThresholdedRelu: return x > alpha ? x : 0.0;
      case ActKind::ScaledTanh: return alpha * std::tanh(beta * x);
      case ActKind::HardSigmoid: return std::max(0.0, std::min(1.0, alpha * x + beta));
      case ActKind::Elu: return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case ActKind::Softsign: return x / (1 + std::fabs(x));
      case ActKind::Softplus: return std::log1p(std::exp(x));
    }
    return x;
  }
};

// One activation by its ONNX name (case-insensitive), taking alpha and beta from the attribute
// lists in order when it uses them (the defaults otherwise, as ONNX Runtime does).
Status parseActivation(const OpName& op, std::string name, const std::vector<float>& alphas,
                       const std::vector<float>& betas, size_t* ai, size_t* bi, Activation* a) {
  std::string lower = name;
  for (char& ch : lower) ch = char(std::tolower((unsigned char)ch));
  struct Entry { const char* name; ActKind kind; int uses; double alpha, beta; };  // uses: 0, 1 (alpha), 2 (both)
  static const Entry table[] = {
      {"relu", ActKind::Relu, 0, 0, 0},          {"tanh", ActKind::Tanh, 0, 0, 0},
      {"sigmoid", ActKind::Sigmoid, 0, 0, 0},    {"affine", ActKind::Affine, 2, 1, 0},
      {"leakyrelu", ActKind::LeakyRelu, 1, 0.01, 0},
      {"thresholdedrelu", ActKind::ThresholdedRelu, 1, 1, 0},
      {"scaledtanh", ActKind::ScaledTanh, 2, 1, 1},
      {"hardsigmoid", ActKind::HardSigmoid, 2, 0.2, 0.5},
      {"elu", ActKind::Elu, 1, 1, 0},            {"softsign", ActKind::Softsign, 0, 0, 0},
      {"softplus", ActKind::Softplus, 0, 0, 0}};
  for (const Entry& e : table) {
    if (lower != e.name) continue;
    a->kind = e.kind;
    a->alpha = e.alpha;
    a->beta = e.beta;
    if (e.uses >= 1 && *ai < alphas.size()) a->alpha = alphas[(*ai)++];
    if (e.uses >= 2 && *bi < betas.size()) a->beta = betas[(*bi)++];
    return Status::ok();
  }
  return opError(op, "activation '" + name + "' is not an ONNX RNN activation");
}

// ---- the op --------------------------------------------------------------------------------

enum class Cell { Rnn, Gru, Lstm };

struct RecurrentSpec {
  Cell cell = Cell::Rnn;
  int64_t gates = 1, dirs = 1, seq = 0, batch = 0, input = 0, H = 0;
  bool reverseOnly = false, layout1 = false, linearBeforeReset = false;
  double clip = 0;  // 0: no clipping
  std::vector<Activation> acts;  // per direction: 1 (RNN), 2 (GRU: f, g) or 3 (LSTM: f, g, h)

  int64_t xAt(int64_t t, int64_t b) const { return (layout1 ? b * seq + t : t * batch + b) * input; }
  int64_t yAt(int64_t t, int64_t d, int64_t b) const {
    return (layout1 ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * H;
  }
  int64_t stateAt(int64_t d, int64_t b) const { return (layout1 ? b * dirs + d : d * batch + b) * H; }
};

Status readSpec(const KernelContext& ctx, RecurrentSpec* s) {
  s->cell = ctx.opType == "RNN" ? Cell::Rnn : ctx.opType == "GRU" ? Cell::Gru : Cell::Lstm;
  s->gates = s->cell == Cell::Rnn ? 1 : s->cell == Cell::Gru ? 3 : 4;
  const std::string dir = ctx.attrs->getString("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return opError(ctx, "direction '" + dir + "' is not forward, reverse or bidirectional");
  s->dirs = dir == "bidirectional" ? 2 : 1;
  s->reverseOnly = dir == "reverse";
  s->layout1 = ctx.attrs->getInt("layout", 0) != 0;
  s->linearBeforeReset = ctx.attrs->getInt("linear_before_reset", 0) != 0;
  s->clip = ctx.attrs->getFloat("clip", 0.f);
  if (ctx.attrs->getInt("input_forget", 0) != 0)
    return opError(ctx, "input_forget=1 is not supported");
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& rs = ctx.inputTypes[2].shape;
  if (xs.size() != 3 || rs.size() != 3) return opError(ctx, "X and R must be 3-D");
  s->seq = s->layout1 ? xs[1] : xs[0];
  s->batch = s->layout1 ? xs[0] : xs[1];
  s->input = xs[2];
  s->H = rs[2];
  const Shape& ws = ctx.inputTypes[1].shape;
  if (ws != Shape{s->dirs, s->gates * s->H, s->input} || rs != Shape{s->dirs, s->gates * s->H, s->H})
    return opError(ctx, "W " + shapeToString(ws) + " and R " + shapeToString(rs) +
                            " do not fit X " + shapeToString(xs) + " with " +
                            std::to_string(s->dirs) + " direction(s)");
  auto expect = [&](size_t i, const Shape& want, const char* what) -> Status {
    if (inputPresent(ctx, i) && ctx.inputTypes[i].shape != want)
      return opError(ctx, std::string(what) + " must have shape " + shapeToString(want) + ", got " +
                              shapeToString(ctx.inputTypes[i].shape));
    return Status::ok();
  };
  const Shape state = s->layout1 ? Shape{s->batch, s->dirs, s->H} : Shape{s->dirs, s->batch, s->H};
  TANDEM_RETURN_IF_ERROR(expect(3, {s->dirs, 2 * s->gates * s->H}, "B"));
  TANDEM_RETURN_IF_ERROR(expect(4, {s->batch}, "sequence_lens"));
  TANDEM_RETURN_IF_ERROR(expect(5, state, "initial_h"));
  if (inputPresent(ctx, 4) && ctx.inputTypes[4].dtype != DType::I32 &&
      ctx.inputTypes[4].dtype != DType::I64)
    return opError(ctx, "sequence_lens must be i32");
  if (s->cell == Cell::Lstm) {
    TANDEM_RETURN_IF_ERROR(expect(6, state, "initial_c"));
    TANDEM_RETURN_IF_ERROR(expect(7, {s->dirs, 3 * s->H}, "P"));
  }
  for (size_t i = 0; i < ctx.outputTypes.size(); ++i) {
    const Shape want = i == 0 ? (s->layout1 ? Shape{s->batch, s->seq, s->dirs, s->H}
                                            : Shape{s->seq, s->dirs, s->batch, s->H})
                              : state;
    if (outputRequested(ctx, i) && ctx.outputTypes[i].shape != want)
      return opError(ctx, "output " + std::to_string(i) + " must have shape " + shapeToString(want) +
                              ", got " + shapeToString(ctx.outputTypes[i].shape));
  }
  // Activations: defaults per cell, repeated for the reverse direction.
  std::vector<std::string> names;
  if (const Attr* a = ctx.attrs->find("activations"); a && a->kind == Attr::Kind::Strings)
    names = a->strings;
  const size_t perDir = s->cell == Cell::Rnn ? 1 : s->cell == Cell::Gru ? 2 : 3;
  if (names.empty()) {
    std::vector<std::string> d = s->cell == Cell::Rnn   ? std::vector<std::string>{"Tanh"}
                                 : s->cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                        : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int64_t k = 0; k < s->dirs; ++k) names.insert(names.end(), d.begin(), d.end());
  }
  if (names.size() == perDir && s->dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != perDir * s->dirs)
    return opError(ctx, "activations lists " + std::to_string(names.size()) + " functions, expected " +
                            std::to_string(perDir * s->dirs));
  const std::vector<float> alphas = ctx.attrs->getFloats("activation_alpha");
  const std::vector<float> betas = ctx.attrs->getFloats("activation_beta");
  size_t ai = 0, bi = 0;
  s->acts.resize(names.size());
  for (size_t i = 0; i < names.size(); ++i)
    TANDEM_RETURN_IF_ERROR(parseActivation(ctx, names[i], alphas, betas, &ai, &bi, &s->acts[i]));
  return Status::ok();
}

/// out[g] = sum_k M[g, k] v[k] for the rows [row0, row0 + n) of a row-major matrix with `cols`.
template <typename T>
void matVec(const T* M, int64_t row0, int64_t n, int64_t cols, const double* v, double* out) {
  for (int64_t g = 0; g < n; ++g) {
    const T* m = M + (row0 + g) * cols;
    double acc = 0;
    for (int64_t k = 0; k < cols; ++k) acc += double(m[k]) * v[k];
    out[g] += acc;
  }
}

template <typename T>
Status runRecurrent(const RecurrentSpec& s, const Inputs& in, const Outputs& outs) {
  const int64_t H = s.H, G = s.gates * H, I = s.input;
  const T* X = in[0]->data<T>();
  const T* W = in[1]->data<T>();
  const T* R = in[2]->data<T>();
  const Tensor* Bt = inputAt(in, 3);
  const Tensor* lens = inputAt(in, 4);
  const Tensor* h0 = inputAt(in, 5);
  const Tensor* c0 = s.cell == Cell::Lstm ? inputAt(in, 6) : nullptr;
  const Tensor* Pt = s.cell == Cell::Lstm ? inputAt(in, 7) : nullptr;
  Tensor* Y = outputAt(outs, 0);
  Tensor* Yh = outputAt(outs, 1);
  Tensor* Yc = s.cell == Cell::Lstm ? outputAt(outs, 2) : nullptr;
  if (Y) std::fill(Y->data<T>(), Y->data<T>() + Y->numel(), T(0));
  const auto clip = [&](double v) { return s.clip > 0 ? std::clamp(v, -s.clip, s.clip) : v; };
  std::vector<double> x(I), h(H), c(H), xw(G), hr(G), hn(H), rh(H);
  for (int64_t d = 0; d < s.dirs; ++d) {
    const bool reverse = s.reverseOnly || d == 1;
    const size_t perDir = s.acts.size() / s.dirs;
    const Activation* act = s.acts.data() + d * perDir;
    const T* Wd = W + d * G * I;
    const T* Rd = R + d * G * H;
    const T* Wb = Bt ? Bt->data<T>() + d * 2 * G : nullptr;
    const T* Rb = Bt ? Wb + G : nullptr;
    const T* P = Pt ? Pt->data<T>() + d * 3 * H : nullptr;
    for (int64_t b = 0; b < s.batch; ++b) {
      int64_t len = s.seq;
      if (lens) len = int64_t(elementAsDouble(*lens, b));
      if (len < 0 || len > s.seq)
        return Status::error("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(len) +
                             " is outside [0, " + std::to_string(s.seq) + "]");
      for (int64_t k = 0; k < H; ++k) {
        h[k] = h0 ? elementAsDouble(*h0, s.stateAt(d, b) + k) : 0.0;
        c[k] = c0 ? elementAsDouble(*c0, s.stateAt(d, b) + k) : 0.0;
      }
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        for (int64_t k = 0; k < I; ++k) x[k] = double(X[s.xAt(t, b) + k]);
        for (int64_t g = 0; g < G; ++g) {
          xw[g] = Wb ? double(Wb[g]) : 0.0;
          hr[g] = Rb ? double(Rb[g]) : 0.0;
        }
        matVec(Wd, 0, G, I, x.data(), xw.data());
        if (s.cell == Cell::Rnn) {
          matVec(Rd, 0, G, H, h.data(), hr.data());
          for (int64_t k = 0; k < H; ++k) hn[k] = act[0](clip(xw[k] + hr[k]));
        } else if (s.cell == Cell::Gru) {
          // Gates z, r, h; the candidate reads r * (H R_h^T + Rb_h) (linear before reset) or
          // (r * H) R_h^T + Rb_h.
          matVec(Rd, 0, 2 * H, H, h.data(), hr.data());
          std::vector<double> z(H), r(H);
          for (int64_t k = 0; k < H; ++k) {
            z[k] = act[0](clip(xw[k] + hr[k]));
            r[k] = act[0](clip(xw[H + k] + hr[H + k]));
          }
          if (s.linearBeforeReset) {
            matVec(Rd, 2 * H, H, H, h.data(), hr.data() + 2 * H);
            for (int64_t k = 0; k < H; ++k) rh[k] = r[k] * hr[2 * H + k];
          } else {
            std::vector<double> rhIn(H);
            for (int64_t k = 0; k < H; ++k) rhIn[k] = r[k] * h[k];
            matVec(Rd, 2 * H, H, H, rhIn.data(), hr.data() + 2 * H);
            for (int64_t k = 0; k < H; ++k) rh[k] = hr[2 * H + k];
          }
          for (int64_t k = 0; k < H; ++k) {
            const double cand = act[1](clip(xw[2 * H + k] + rh[k]));
            hn[k] = (1 - z[k]) * cand + z[k] * h[k];
          }
        } else {
          // Gates i, o, f, c; peepholes P = [Pi, Po, Pf]; o peeks at the new cell state.
          matVec(Rd, 0, G, H, h.data(), hr.data());
          for (int64_t k = 0; k < H; ++k) {
            const double pi = P ? double(P[k]) : 0.0, po = P ? double(P[H + k]) : 0.0,
                         pf = P ? double(P[2 * H + k]) : 0.0;
            const double ig = act[0](clip(xw[k] + hr[k] + pi * c[k]));
            const double fg = act[0](clip(xw[2 * H + k] + hr[2 * H + k] + pf * c[k]));
            const double cg = act[1](clip(xw[3 * H + k] + hr[3 * H + k]));
            c[k] = fg * c[k] + ig * cg;
            const double og = act[0](clip(xw[H + k] + hr[H + k] + po * c[k]));
            hn[k] = og * act[2](c[k]);
          }
        }
        h = hn;
        if (Y)
          for (int64_t k = 0; k < H; ++k) Y->data<T>()[s.yAt(t, d, b) + k] = T(h[k]);
      }
      for (int64_t k = 0; k < H; ++k) {
        if (Yh) Yh->data<T>()[s.stateAt(d, b) + k] = T(h[k]);
        if (Yc) Yc->data<T>()[s.stateAt(d, b) + k] = T(c[k]);
      }
    }
  }
  return Status::ok();
}

Status createRecurrent(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() < 3) return opError(ctx, "expects inputs X, W, R");
  for (size_t i : {1, 2, 3, 5, 6, 7})
    if (inputPresent(ctx, i) && ctx.inputTypes[i].dtype != ctx.inputTypes[0].dtype)
      return opError(ctx, "input " + std::to_string(i) + " must have X's dtype");
  RecurrentSpec s;
  TANDEM_RETURN_IF_ERROR(readSpec(ctx, &s));
  const OpName op(ctx);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [s, op](const Inputs& in, const Outputs& outs) -> Status {
      Status st = runRecurrent<T>(s, in, outs);
      return st.isOk() ? st : opError(op, st.message());
    };
  });
  if (!fn) return opError(ctx, "X must be f32 or f64");
  return makeKernel(out, std::move(fn));
}

}  // namespace

void registerRecurrentKernels(KernelRegistry& r) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) addRef(r, op, floatTypes(), createRecurrent);
}

}  // namespace ref
}  // namespace tandem

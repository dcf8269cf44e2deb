// Reference optimizer updates of ONNX ai.onnx.preview.training-1: Adagrad, Adam, Momentum
// (standard and Nesterov). Inputs R (learning rate, float scalar), T (step count, i64 scalar),
// then N tensors X, N gradients G and N of each state (Adagrad: H; Momentum: V; Adam: V, H);
// results X_new then each new state, N of each (Adam: X_new1..N, V_new1..N, H_new1..N).
//
// Each tensor is updated by one loop that reads x, g and the state at i before it writes any
// result at i, so results may alias their inputs (X_new over X, V_new over V): the optimizer of
// the training plans runs them in place on device-resident variables. The step's scalars (bias
// correction, decayed rate) are computed once per run in f64; the per-element arithmetic is in
// the tensors' dtype, as a device kernel does it.
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

enum class Kind { Adagrad, Adam, Momentum };

// The attributes, with ONNX's defaults (Momentum's are required: the factory checks).
struct OptimizerAttrs {
  Kind kind;
  double alpha = 0, beta = 0, epsilon = 0, decay = 0, norm = 0, normPost = 0;
  bool nesterov = false;
};

// The scalars of one step, computed once per run from R and T.
struct StepScalars {
  double rate = 0;      // Adagrad: R / (1 + T * decay); Adam: R with bias correction; Momentum: R
  double gradCoef = 0;  // Momentum: beta, or 1 on the first step (T == 0)
};

StepScalars stepScalars(const OptimizerAttrs& a, double r, int64_t t) {
  StepScalars s;
  switch (a.kind) {
    case Kind::Adagrad: s.rate = r / (1 + (double)t * a.decay); break;
    case Kind::Adam:
      // Bias correction of both moments folded into the rate (Kingma & Ba 2015, section 2).
      s.rate = t > 0 ? r * std::sqrt(1 - std::pow(a.beta, (double)t)) /
                           (1 - std::pow(a.alpha, (double)t))
                     : r;
      break;
    case Kind::Momentum:
      s.rate = r;
      s.gradCoef = t > 0 ? a.beta : 1.0;
      break;
  }
  return s;
}

// One tensor's update, one pass over n elements. h is Adagrad's and Adam's second state, v
// Momentum's and Adam's first.
template <typename T>
void update(const OptimizerAttrs& a, const StepScalars& s, int64_t n, int threads, const T* x,
            const T* g, const T* v, const T* h, T* xNew, T* vNew, T* hNew) {
  const T norm = T(a.norm), rate = T(s.rate), eps = T(a.epsilon);
  const T alpha = T(a.alpha), beta = T(a.beta);
  switch (a.kind) {
    case Kind::Adagrad:
#pragma omp parallel for num_threads(threads) if (n > 65536) schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const T gr = norm * x[i] + g[i];
        const T hn = h[i] + gr * gr;
        hNew[i] = hn;
        xNew[i] = x[i] - rate * gr / (std::sqrt(hn) + eps);
      }
      break;
    case Kind::Adam: {
      const T keep = T(1 - a.normPost);
#pragma omp parallel for num_threads(threads) if (n > 65536) schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const T gr = norm * x[i] + g[i];
        const T vn = alpha * v[i] + (T(1) - alpha) * gr;
        const T hn = beta * h[i] + (T(1) - beta) * (gr * gr);
        vNew[i] = vn;
        hNew[i] = hn;
        xNew[i] = keep * (x[i] - rate * (vn / (std::sqrt(hn) + eps)));
      }
      break;
    }
    case Kind::Momentum: {
      const T coef = T(s.gradCoef);
      const bool nesterov = a.nesterov;
#pragma omp parallel for num_threads(threads) if (n > 65536) schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const T gr = norm * x[i] + g[i];
        const T vn = alpha * v[i] + coef * gr;
        vNew[i] = vn;
        xNew[i] = x[i] - rate * (nesterov ? gr + alpha * vn : vn);
      }
      break;
    }
  }
}

Status readAttrs(const KernelContext& ctx, OptimizerAttrs* a) {
  const AttrMap& m = *ctx.attrs;
  if (ctx.opType == "Adagrad") {
    a->kind = Kind::Adagrad;
    a->decay = m.getFloat("decay_factor", 0.0f);
    a->epsilon = m.getFloat("epsilon", 1e-6f);
    a->norm = m.getFloat("norm_coefficient", 0.0f);
  } else if (ctx.opType == "Adam") {
    a->kind = Kind::Adam;
    a->alpha = m.getFloat("alpha", 0.9f);
    a->beta = m.getFloat("beta", 0.999f);
    a->epsilon = m.getFloat("epsilon", 1e-6f);
    a->norm = m.getFloat("norm_coefficient", 0.0f);
    a->normPost = m.getFloat("norm_coefficient_post", 0.0f);
  } else {
    a->kind = Kind::Momentum;
    for (const char* name : {"alpha", "beta", "mode", "norm_coefficient"})
      if (!m.has(name)) return opError(ctx, std::string("attribute ") + name + " is required");
    a->alpha = m.getFloat("alpha", 0.0f);
    a->beta = m.getFloat("beta", 0.0f);
    a->norm = m.getFloat("norm_coefficient", 0.0f);
    const std::string mode = m.getString("mode", "");
    if (mode != "standard" && mode != "nesterov")
      return opError(ctx, "mode '" + mode + "' is not one of standard, nesterov");
    a->nesterov = mode == "nesterov";
  }
  return Status::ok();
}

Status createOptimizer(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  OptimizerAttrs a;
  TANDEM_RETURN_IF_ERROR(readAttrs(ctx, &a));
  const size_t groups = a.kind == Kind::Adam ? 4 : 3;  // X, G, then the states
  const size_t nIn = ctx.inputTypes.size();
  if (nIn < 2 + groups || (nIn - 2) % groups != 0)
    return opError(ctx, "expects R, T and " + std::to_string(groups) +
                            " operands per tensor, got " + std::to_string(nIn) + " inputs");
  const size_t tensors = (nIn - 2) / groups;
  if (ctx.outputTypes.size() != (groups - 1) * tensors)
    return opError(ctx, "expects " + std::to_string((groups - 1) * tensors) + " outputs for " +
                            std::to_string(tensors) + " tensor(s), got " +
                            std::to_string(ctx.outputTypes.size()));
  const TensorType& R = ctx.inputTypes[0];
  const TensorType& T = ctx.inputTypes[1];
  if (!contains(floatTypes(), R.dtype) || !R.shape.empty())
    return opError(ctx, "R must be an f32 or f64 scalar");
  if (T.dtype != DType::I64 || !T.shape.empty()) return opError(ctx, "T must be an i64 scalar");
  const DType dt = ctx.inputTypes[2].dtype;
  if (!contains(floatTypes(), dt))
    return opError(ctx, std::string("X must be f32 or f64, got ") + dtypeName(dt));
  std::vector<int64_t> sizes(tensors);
  for (size_t t = 0; t < tensors; ++t) {
    const TensorType& x = ctx.inputTypes[2 + t];
    for (size_t gi = 0; gi < groups; ++gi) {
      const TensorType& o = ctx.inputTypes[2 + t + gi * tensors];
      if (!o.present() || o.dtype != dt || o.shape != x.shape)
        return opError(ctx, "input " + std::to_string(2 + t + gi * tensors) + " must be " +
                                dtypeName(dt) + shapeToString(x.shape) + " like X" +
                                std::to_string(t + 1));
    }
    for (size_t gi = 0; gi + 1 < groups; ++gi) {
      const TensorType& o = ctx.outputTypes[t + gi * tensors];
      if (!o.present() || o.dtype != dt || o.shape != x.shape)
        return opError(ctx, "output " + std::to_string(t + gi * tensors) + " must be " +
                                dtypeName(dt) + shapeToString(x.shape) + " like X" +
                                std::to_string(t + 1));
    }
    sizes[t] = numElements(x.shape);
  }
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchFloat(dt, [&](auto tag) {
    using E = decltype(tag);
    fn = [a, sizes, threads](const Inputs& in, const Outputs& outs) -> Status {
      const size_t k = sizes.size();
      const StepScalars s = stepScalars(a, elementAsDouble(*in[0], 0), in[1]->data<int64_t>()[0]);
      for (size_t t = 0; t < k; ++t) {
        const E* x = in[2 + t]->data<E>();
        const E* g = in[2 + k + t]->data<E>();
        E* xNew = outs[t]->data<E>();
        const E *v = nullptr, *h = nullptr;
        E *vNew = nullptr, *hNew = nullptr;
        if (a.kind == Kind::Adagrad) {
          h = in[2 + 2 * k + t]->data<E>();
          hNew = outs[k + t]->data<E>();
        } else {
          v = in[2 + 2 * k + t]->data<E>();
          vNew = outs[k + t]->data<E>();
          if (a.kind == Kind::Adam) {
            h = in[2 + 3 * k + t]->data<E>();
            hNew = outs[2 * k + t]->data<E>();
          }
        }
        update<E>(a, s, sizes[t], threads, x, g, v, h, xNew, vNew, hNew);
      }
      return Status::ok();
    };
  });
  return makeKernel(out, std::move(fn));
}

}  // namespace

void registerOptimizerKernels(KernelRegistry& r) {
  for (const char* op : {"Adagrad", "Adam", "Momentum"})
    addRef(r, op, floatTypes(), createOptimizer);
}

}  // namespace ref
}  // namespace tandem

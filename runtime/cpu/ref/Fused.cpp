// "Fused" steps on the CPU without oneDNN post-ops: body decoding, the unfused composite and
// the one-pass element-wise loop (runtime/cpu/ref/Fused.h).
#include "runtime/cpu/ref/Fused.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace fused {

Status parseBody(const KernelContext& ctx, Body* out) {
  const AttrMap& a = *ctx.attrs;
  out->kind = a.getString("kind", "");
  const Attr* ops = a.find("ops");
  if (!ops || ops->kind != Attr::Kind::Strings || ops->strings.empty())
    return Status::error("Fused: missing body (attribute 'ops')");
  std::vector<int64_t> counts = a.getInts("op_input_counts");
  std::vector<int64_t> refs = a.getInts("op_inputs");
  if (counts.size() != ops->strings.size())
    return Status::error("Fused: op_input_counts does not match ops");
  size_t pos = 0;
  const int64_t nIn = (int64_t)ctx.inputTypes.size();
  for (size_t j = 0; j < counts.size(); ++j) {
    BodyOp op;
    op.type = ops->strings[j];
    for (int64_t i = 0; i < counts[j]; ++i) {
      if (pos >= refs.size()) return Status::error("Fused: op_inputs too short");
      int64_t r = refs[pos++];
      bool ok = (r >= 0 && r < nIn) || r == -1 || (r <= -2 && -2 - r < (int64_t)j);
      if (!ok) return Status::error("Fused: body op " + std::to_string(j) + " has a bad operand");
      op.refs.push_back(r);
    }
    std::string prefix = std::to_string(j) + ".";
    for (const auto& [name, attr] : a.all())
      if (name.compare(0, prefix.size(), prefix) == 0) op.attrs.set(name.substr(prefix.size()), attr);
    out->ops.push_back(std::move(op));
  }
  if (pos != refs.size()) return Status::error("Fused: op_inputs too long");
  for (int64_t r : a.getInts("outputs_from")) {
    int64_t j = -2 - r;
    if (j < 0 || j >= (int64_t)out->ops.size()) return Status::error("Fused: bad outputs_from");
    out->outputsFrom.push_back(j);
  }
  if (out->outputsFrom.empty() || out->outputsFrom.size() != ctx.outputTypes.size())
    return Status::error("Fused: outputs_from does not match the step's outputs");
  for (const TensorType& t : ctx.outputTypes)
    if (t.dtype != ctx.outputTypes[0].dtype || t.shape != ctx.outputTypes[0].shape)
      return Status::error("Fused: outputs differ in type");
  return Status::ok();
}

KernelContext bodyOpContext(const KernelContext& step, const Body& body, size_t k) {
  KernelContext c;
  const BodyOp& op = body.ops[k];
  c.opType = op.type;
  c.nodeName = step.nodeName;
  c.attrs = &op.attrs;
  c.threads = step.threads;
  for (int64_t r : op.refs) {
    if (r >= 0) {
      c.inputTypes.push_back(step.inputTypes[r]);
      c.constInputs.push_back(r < (int64_t)step.constInputs.size() ? step.constInputs[r] : nullptr);
    } else if (r == -1) {
      c.inputTypes.push_back(TensorType{});
      c.constInputs.push_back(nullptr);
    } else {
      c.inputTypes.push_back(step.outputTypes[0]);
      c.constInputs.push_back(nullptr);
    }
  }
  c.outputTypes = {step.outputTypes[0]};
  return c;
}

namespace {

// ---- unfused composite ----

class UnfusedKernel : public Kernel {
 public:
  Status init(const KernelRegistry& registry, const KernelContext& ctx, const Body& body,
              const std::string& note) {
    body_ = body;
    note_ = note;
    for (size_t k = 0; k < body_.ops.size(); ++k) {
      KernelContext c = bodyOpContext(ctx, body_, k);
      std::unique_ptr<Kernel> kernel;
      TANDEM_RETURN_IF_ERROR(registry.create("cpu", c, &kernel));
      kernels_.push_back(std::move(kernel));
      temps_.push_back(Tensor::alloc(ctx.outputTypes[0].dtype, ctx.outputTypes[0].shape));
    }
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t k = 0; k < kernels_.size(); ++k) {
      std::vector<const Tensor*> args;
      for (int64_t r : body_.ops[k].refs)
        args.push_back(r >= 0 ? in[r] : r == -1 ? nullptr : &temps_[-2 - r]);
      TANDEM_RETURN_IF_ERROR(kernels_[k]->run(args, {&temps_[k]}));
    }
    for (size_t i = 0; i < out.size(); ++i) {
      const Tensor& t = temps_[body_.outputsFrom[i]];
      if (t.bytes()) std::memcpy(out[i]->raw(), t.raw(), t.bytes());
    }
    return Status::ok();
  }

  std::string implName() const override {
    std::string s = "unfused(";
    for (size_t k = 0; k < kernels_.size(); ++k) s += (k ? " + " : "") + kernels_[k]->implName();
    return s + ")" + (note_.empty() ? "" : ": " + note_);
  }

 private:
  Body body_;
  std::string note_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<Tensor> temps_;
  std::mutex mu_;
};

// ---- element-wise loop ----

enum class Code {
  Relu, LeakyRelu, Elu, Selu, Sigmoid, HardSigmoid, Tanh, Exp, Log, Sqrt, Abs, Neg, Reciprocal,
  Erf, Softplus, Clip, GeluErf, GeluTanh, Add, Sub, Mul, Div, Max, Min
};

struct Operand {
  int input = -1;     // step input index, or -1
  int reg = -1;       // body op index, or -1
  bool scalar = false;
  bool constant = false;  // a scalar known at load
  float value = 0.f;
};

struct Instr {
  Code code;
  Operand a, b;
  float p = 0.f, q = 0.f;  // alpha/beta, Clip bounds
};

bool codeFor(const BodyOp& op, Code* c) {
  static const std::pair<const char*, Code> table[] = {
      {"Relu", Code::Relu}, {"LeakyRelu", Code::LeakyRelu}, {"Elu", Code::Elu},
      {"Selu", Code::Selu}, {"Sigmoid", Code::Sigmoid}, {"HardSigmoid", Code::HardSigmoid},
      {"Tanh", Code::Tanh}, {"Exp", Code::Exp}, {"Log", Code::Log}, {"Sqrt", Code::Sqrt},
      {"Abs", Code::Abs}, {"Neg", Code::Neg}, {"Reciprocal", Code::Reciprocal},
      {"Erf", Code::Erf}, {"Softplus", Code::Softplus}, {"Clip", Code::Clip},
      {"Add", Code::Add}, {"Sub", Code::Sub}, {"Mul", Code::Mul}, {"Div", Code::Div},
      {"Max", Code::Max}, {"Min", Code::Min}};
  if (op.type == "Gelu") {
    *c = op.attrs.getString("approximate", "none") == "tanh" ? Code::GeluTanh : Code::GeluErf;
    return true;
  }
  for (const auto& [name, code] : table)
    if (op.type == name) {
      *c = code;
      return true;
    }
  return false;
}

float apply(const Instr& in, float x, float y) {
  switch (in.code) {
    case Code::Relu: return x < 0 ? 0.f : x;
    case Code::LeakyRelu: return x < 0 ? in.p * x : x;
    case Code::Elu: return x < 0 ? in.p * std::expm1(x) : x;
    case Code::Selu: return x <= 0 ? in.q * (in.p * std::exp(x) - in.p) : in.q * x;
    case Code::Sigmoid: {
      if (x >= 0) return 1.f / (1.f + std::exp(-x));
      float e = std::exp(x);
      return e / (1.f + e);
    }
    case Code::HardSigmoid: return std::max(0.f, std::min(1.f, in.p * x + in.q));
    case Code::Tanh: return std::tanh(x);
    case Code::Exp: return std::exp(x);
    case Code::Log: return std::log(x);
    case Code::Sqrt: return std::sqrt(x);
    case Code::Abs: return std::fabs(x);
    case Code::Neg: return -x;
    case Code::Reciprocal: return 1.f / x;
    case Code::Erf: return std::erf(x);
    case Code::Softplus: return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    case Code::Clip: return std::min(std::max(x, in.p), in.q);
    case Code::GeluErf: return 0.5f * x * (1.f + std::erf(x * 0.70710678118654752f));
    case Code::GeluTanh:
      return 0.5f * x * (1.f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case Code::Add: return x + y;
    case Code::Sub: return x - y;
    case Code::Mul: return x * y;
    case Code::Div: return x / y;
    case Code::Max: return (std::isnan(x) || std::isnan(y)) ? NAN : (y > x ? y : x);
    case Code::Min: return (std::isnan(x) || std::isnan(y)) ? NAN : (y < x ? y : x);
  }
  return x;
}

class LoopKernel : public Kernel {
 public:
  static constexpr int64_t kChunk = 512;  // floats per register per chunk: 2 KiB, stays in L1

  Status init(const KernelContext& ctx, const Body& body) {
    if (ctx.outputTypes[0].dtype != DType::F32)
      return Status::error("Fused elementwise: only f32");
    n_ = numElements(ctx.outputTypes[0].shape);
    threads_ = std::max(1, ctx.threads);
    outputsFrom_ = body.outputsFrom;
    for (const BodyOp& op : body.ops) {
      Instr ins;
      if (!codeFor(op, &ins.code)) return Status::error("Fused elementwise: no loop form of " + op.type);
      std::vector<Operand> ops;
      for (size_t i = 0; i < op.refs.size(); ++i) {
        int64_t r = op.refs[i];
        Operand o;
        if (r >= 0) {
          const TensorType& t = ctx.inputTypes[r];
          if (t.dtype != DType::F32) return Status::error("Fused elementwise: only f32 operands");
          int64_t n = numElements(t.shape);
          if (n != n_ && n != 1) return Status::error("Fused elementwise: operand needs broadcasting");
          o.input = (int)r;
          o.scalar = n == 1 && n_ != 1;
          const Tensor* c = r < (int64_t)ctx.constInputs.size() ? ctx.constInputs[r] : nullptr;
          if (o.scalar && c) {
            o.constant = true;
            o.value = c->data<float>()[0];
          }
        } else if (r <= -2) {
          o.reg = (int)(-2 - r);
        }
        ops.push_back(o);
      }
      if (ins.code == Code::Clip) {
        // Bounds are constant scalars (the fuse pass requires it); absent means unbounded.
        ins.p = -std::numeric_limits<float>::infinity();
        ins.q = std::numeric_limits<float>::infinity();
        for (size_t i = 1; i < ops.size() && i <= 2; ++i) {
          if (op.refs[i] == -1) continue;
          const Tensor* c = ctx.constInputs[op.refs[i]];
          if (!c) return Status::error("Fused elementwise: Clip bounds must be constants");
          (i == 1 ? ins.p : ins.q) = c->data<float>()[0];
        }
        ops.resize(1);
      } else if (ins.code == Code::LeakyRelu) {
        ins.p = op.attrs.getFloat("alpha", 0.01f);
      } else if (ins.code == Code::Elu) {
        ins.p = op.attrs.getFloat("alpha", 1.0f);
      } else if (ins.code == Code::Selu) {
        ins.p = op.attrs.getFloat("alpha", 1.67326319217681884765625f);
        ins.q = op.attrs.getFloat("gamma", 1.05070102214813232421875f);
      } else if (ins.code == Code::HardSigmoid) {
        ins.p = op.attrs.getFloat("alpha", 0.2f);
        ins.q = op.attrs.getFloat("beta", 0.5f);
      }
      bool binary = ins.code >= Code::Add;
      if (ops.size() != (binary ? 2u : 1u))
        return Status::error("Fused elementwise: " + op.type + " has the wrong operand count");
      ins.a = ops[0];
      if (binary) ins.b = ops[1];
      prog_.push_back(ins);
    }
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    const int64_t chunks = (n_ + kChunk - 1) / kChunk;
    const size_t nregs = prog_.size();
    // Non-constant scalar operands are read per run.
    std::vector<float> scalars(in.size(), 0.f);
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i] && in[i]->numel() == 1) scalars[i] = in[i]->data<float>()[0];
    const int threads = chunks >= 16 ? threads_ : 1;
#pragma omp parallel num_threads(threads)
    {
      // Per-thread scratch, grown once: run() does not allocate in the steady state.
      static thread_local std::vector<float> regs;
      if (regs.size() < nregs * kChunk) regs.resize(nregs * kChunk);
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t start = c * kChunk;
        const int64_t len = std::min(kChunk, n_ - start);
        for (size_t k = 0; k < nregs; ++k) {
          const Instr& ins = prog_[k];
          float* dst = regs.data() + k * kChunk;
          auto src = [&](const Operand& o, float* tmp) -> const float* {
            if (o.reg >= 0) return regs.data() + o.reg * kChunk;
            if (o.scalar) {
              float v = o.constant ? o.value : scalars[o.input];
              std::fill(tmp, tmp + len, v);
              return tmp;
            }
            return in[o.input]->data<float>() + start;
          };
          float ta[kChunk], tb[kChunk];
          const float* a = src(ins.a, ta);
          const float* b = ins.code >= Code::Add ? src(ins.b, tb) : a;
          switch (ins.code) {
            // The hot simple cases as their own loops so the compiler vectorises them.
            case Code::Relu: for (int64_t i = 0; i < len; ++i) dst[i] = a[i] < 0 ? 0.f : a[i]; break;
            case Code::Add: for (int64_t i = 0; i < len; ++i) dst[i] = a[i] + b[i]; break;
            case Code::Sub: for (int64_t i = 0; i < len; ++i) dst[i] = a[i] - b[i]; break;
            case Code::Mul: for (int64_t i = 0; i < len; ++i) dst[i] = a[i] * b[i]; break;
            case Code::Div: for (int64_t i = 0; i < len; ++i) dst[i] = a[i] / b[i]; break;
            default: for (int64_t i = 0; i < len; ++i) dst[i] = apply(ins, a[i], b[i]); break;
          }
        }
        // Outputs last: every read of this chunk is done, so an output may alias an input.
        for (size_t o = 0; o < out.size(); ++o)
          std::memcpy(out[o]->data<float>() + start, regs.data() + outputsFrom_[o] * kChunk,
                      sizeof(float) * len);
      }
    }
    return Status::ok();
  }

  std::string implName() const override {
    return "fused-loop(" + std::to_string(prog_.size()) + " ops)";
  }

 private:
  std::vector<Instr> prog_;
  std::vector<int64_t> outputsFrom_;
  int64_t n_ = 0;
  int threads_ = 1;
};

Status createFused(const KernelRegistry& registry, const KernelContext& ctx,
                   std::unique_ptr<Kernel>* out) {
  Body body;
  TANDEM_RETURN_IF_ERROR(parseBody(ctx, &body));
  if (body.kind == "elementwise") {
    Status st = createElementwiseLoop(ctx, body, out);
    if (st.isOk()) return st;
    return createUnfused(registry, ctx, body, "no loop form: " + st.message(), out);
  }
  return createUnfused(registry, ctx, body, "", out);
}

}  // namespace

Status createUnfused(const KernelRegistry& registry, const KernelContext& ctx, const Body& body,
                     const std::string& note, std::unique_ptr<Kernel>* out) {
  auto k = std::make_unique<UnfusedKernel>();
  TANDEM_RETURN_IF_ERROR(k->init(registry, ctx, body, note));
  *out = std::move(k);
  return Status::ok();
}

Status createElementwiseLoop(const KernelContext& ctx, const Body& body,
                             std::unique_ptr<Kernel>* out) {
  auto k = std::make_unique<LoopKernel>();
  TANDEM_RETURN_IF_ERROR(k->init(ctx, body));
  *out = std::move(k);
  return Status::ok();
}

}  // namespace fused

namespace ref {

void registerFusedKernels(KernelRegistry& r) {
  KernelDef d;
  d.opType = "Fused";
  d.deviceKind = "cpu";
  d.impl = "ref";
  d.priority = 0;
  d.accepts = [](const std::vector<DType>&) { return true; };
  d.dtypesText = "as its body";
  // Sub-kernels of an unfused group come from the registry this def lives in.
  const KernelRegistry* reg = &r;
  d.create = [reg](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
    return fused::createFused(*reg, ctx, out);
  };
  r.add(std::move(d));
}

}  // namespace ref
}  // namespace tandem

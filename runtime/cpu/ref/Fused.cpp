// "Fused" steps on the CPU without oneDNN post-ops: body decoding, the unfused composite, the
// one-pass element-wise loop and the row kernel (runtime/cpu/ref/Fused.h).
#include "runtime/cpu/ref/Fused.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "runtime/PlanFormat.h"
#include "runtime/cpu/avx2/Rows.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace fused {

Status parseBody(const KernelContext& ctx, Body* out) {
  out->kind = ctx.attrs->getString("kind", "");
  if (!ctx.fusedBody || ctx.fusedBody->members().empty())
    return Status::error("Fused: the step has no body (Step.fused_body)");
  const plan::FusedBody& body = *ctx.fusedBody;
  const int64_t nIn = (int64_t)ctx.inputTypes.size();
  for (int j = 0; j < body.members_size(); ++j) {
    const plan::FusedBody::Member& m = body.members(j);
    auto bad = [&](const std::string& what) {
      return Status::error("Fused: member " + std::to_string(j) + " (" + m.op_type() + ") " + what);
    };
    BodyOp op;
    op.type = m.op_type();
    op.name = m.name();
    for (const plan::FusedBody::Operand& o : m.inputs()) {
      switch (o.source_case()) {
        case plan::FusedBody::Operand::kStepInput:
          if (o.step_input() < 0 || o.step_input() >= nIn)
            return bad("reads step input " + std::to_string(o.step_input()) + " of " + std::to_string(nIn));
          op.refs.push_back(o.step_input());
          break;
        case plan::FusedBody::Operand::kMember:
          if (o.member() < 0 || o.member() >= j)
            return bad("reads member " + std::to_string(o.member()) + ", which is not an earlier one");
          op.refs.push_back(-2 - (int64_t)o.member());
          break;
        default:
          op.refs.push_back(-1);
          break;
      }
    }
    TANDEM_RETURN_IF_ERROR(attrsFromPlan(m.attrs(), &op.attrs).withContext("Fused: member " + std::to_string(j)));
    if (!m.has_shape()) {
      out->shapes.push_back(ctx.outputTypes.empty() ? Shape{} : ctx.outputTypes[0].shape);
    } else {
      Shape shape(m.shape().dims().begin(), m.shape().dims().end());
      for (int64_t d : shape)
        if (d < 0) return bad("has a negative dimension in " + shapeToString(shape));
      out->shapes.push_back(std::move(shape));
    }
    out->ops.push_back(std::move(op));
  }
  for (int32_t j : body.results()) {
    if (j < 0 || j >= (int32_t)out->ops.size())
      return Status::error("Fused: a result names member " + std::to_string(j) + " of " +
                           std::to_string(out->ops.size()));
    out->outputsFrom.push_back(j);
  }
  if (out->outputsFrom.empty() || out->outputsFrom.size() != ctx.outputTypes.size())
    return Status::error("Fused: the body has " + std::to_string(out->outputsFrom.size()) +
                         " results for the step's " + std::to_string(ctx.outputTypes.size()) + " outputs");
  for (size_t i = 0; i < ctx.outputTypes.size(); ++i) {
    const TensorType& t = ctx.outputTypes[i];
    if (t.dtype != ctx.outputTypes[0].dtype || t.shape != out->shapes[out->outputsFrom[i]])
      return Status::error("Fused: output " + std::to_string(i) + " differs in type from its body op");
  }
  return Status::ok();
}

KernelContext bodyOpContext(const KernelContext& step, const Body& body, size_t k) {
  KernelContext c;
  const BodyOp& op = body.ops[k];
  c.opType = op.type;
  c.nodeName = step.nodeName;
  c.attrs = &op.attrs;
  c.threads = step.threads;
  c.winograd = step.winograd;
  c.variant = step.variant;
  for (int64_t r : op.refs) {
    if (r >= 0) {
      c.inputTypes.push_back(step.inputTypes[r]);
      c.constInputs.push_back(r < (int64_t)step.constInputs.size() ? step.constInputs[r] : nullptr);
    } else if (r == -1) {
      c.inputTypes.push_back(TensorType{});
      c.constInputs.push_back(nullptr);
    } else {
      c.inputTypes.push_back(TensorType{step.outputTypes[0].dtype, body.shapes[-2 - r]});
      c.constInputs.push_back(nullptr);
    }
  }
  c.outputTypes = {TensorType{step.outputTypes[0].dtype, body.shapes[k]}};
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
      temps_.push_back(Tensor::alloc(ctx.outputTypes[0].dtype, body_.shapes[k]));
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

// Math: a unary math op of the op table, evaluated by the function made from its formula; the
// others are written out below (attributes, NaN rules). Binary codes come last (Add on).
enum class Code {
  Math, Relu, LeakyRelu, Elu, Selu, Sigmoid, HardSigmoid, Abs, Neg, Clip, GeluErf, GeluTanh,
  Add, Sub, Mul, Div, Max, Min
};

using MathFn = void (*)(const float* x, float* y, int64_t n);

// y[i] = formula(x[i]) for each TANDEM_MATH_OP row of runtime/core/OpTable.def: one loop per op
// with the formula inlined, so a chunk costs one indirect call.
struct MathOp {
  const char* name;
  MathFn fn;
};
constexpr MathOp kMathOps[] = {
#define TANDEM_MATH_OP(Name, since, shapeFn, work, flops, flags, formula) \
  {#Name, [](const float* x, float* y, int64_t n) {                       \
     using namespace std;                                                  \
     for (int64_t i = 0; i < n; ++i) {                                     \
       const float a = x[i];                                               \
       y[i] = float(formula);                                              \
     }                                                                     \
   }},
#include "runtime/core/OpTable.def"
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
  MathFn math = nullptr;   // Code::Math
  bool vector = false;     // run as `act` (vectorActivation)
  avx2::ActivationStep act;
};

// The loop form of `op`: the op table's math function, or one of the written-out codes. Ops the
// fuse pass puts in a loop are the table's kCpuLoop rows; op_table_test checks each has a form.
bool codeFor(const BodyOp& op, Instr* ins) {
  Code* c = &ins->code;
  for (const MathOp& m : kMathOps)
    if (op.type == m.name) {
      *c = Code::Math;
      ins->math = m.fn;
      return true;
    }
  static const std::pair<const char*, Code> table[] = {
      {"Relu", Code::Relu}, {"LeakyRelu", Code::LeakyRelu}, {"Elu", Code::Elu},
      {"Selu", Code::Selu}, {"Sigmoid", Code::Sigmoid}, {"HardSigmoid", Code::HardSigmoid},
      {"Abs", Code::Abs}, {"Neg", Code::Neg}, {"Clip", Code::Clip},
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
    case Code::Math: {
      float y;
      in.math(&x, &y, 1);
      return y;
    }
    case Code::Abs: return std::fabs(x);
    case Code::Neg: return -x;
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

// The AVX2 activation (runtime/cpu/avx2/Activation.h) that computes `op`, if any: Sigmoid, Tanh
// and tanh-GELU from one vector exp instead of a libm call per element (EfficientNet-B0's SiLU
// loops, 1 thread, AVX-512 host: 41 of 50 ms with the scalar exp).
bool vectorActivation(const BodyOp& op, avx2::ActivationStep* step) {
  if (op.type == "Sigmoid") step->kind = avx2::Activation::Logistic;
  else if (op.type == "Tanh") step->kind = avx2::Activation::Tanh;
  else if (op.type == "Gelu" && op.attrs.getString("approximate", "none") == "tanh")
    step->kind = avx2::Activation::GeluTanh;
  else return false;
  return true;
}

constexpr int64_t kChunk = 512;  // floats per register per chunk: 2 KiB, stays in L1

// Compiles body ops [0, count) into loop instructions over `n` elements: operands are step
// inputs of n elements or scalars (constant ones folded in), or earlier body results.
Status compileLoop(const KernelContext& ctx, const Body& body, size_t count, int64_t n,
                   std::vector<Instr>* prog) {
  for (size_t j = 0; j < count; ++j) {
    const BodyOp& op = body.ops[j];
    Instr ins;
    if (!codeFor(op, &ins)) return Status::error("Fused elementwise: no loop form of " + op.type);
    ins.vector = avx2::available() && vectorActivation(op, &ins.act);
    std::vector<Operand> ops;
    for (size_t i = 0; i < op.refs.size(); ++i) {
      int64_t r = op.refs[i];
      Operand o;
      if (r >= 0) {
        const TensorType& t = ctx.inputTypes[r];
        if (t.dtype != DType::F32) return Status::error("Fused elementwise: only f32 operands");
        int64_t m = numElements(t.shape);
        if (m != n && m != 1) return Status::error("Fused elementwise: operand needs broadcasting");
        o.input = (int)r;
        o.scalar = m == 1 && n != 1;
        const Tensor* c = r < (int64_t)ctx.constInputs.size() ? ctx.constInputs[r] : nullptr;
        if (o.scalar && c) {
          o.constant = true;
          o.value = c->data<float>()[0];
        }
      } else if (r <= -2) {
        o.reg = (int)(-2 - r);
        if (numElements(body.shapes[o.reg]) != n)
          return Status::error("Fused elementwise: body result of another size");
      }
      ops.push_back(o);
    }
    if (ins.code == Code::Clip) {
      // Bounds are constant scalars (the fuse pass requires it); absent means unbounded.
      ins.p = -std::numeric_limits<float>::infinity();
      ins.q = std::numeric_limits<float>::infinity();
      for (size_t i = 1; i < ops.size() && i <= 2; ++i) {
        if (op.refs[i] == -1) continue;
        const Tensor* c = op.refs[i] >= 0 ? ctx.constInputs[op.refs[i]] : nullptr;
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
    prog->push_back(ins);
  }
  return Status::ok();
}

// Non-constant scalar operands, read once per run.
std::vector<float> readScalars(const std::vector<const Tensor*>& in) {
  std::vector<float> scalars(in.size(), 0.f);
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] && in[i]->numel() == 1 && in[i]->dtype() == DType::F32)
      scalars[i] = in[i]->data<float>()[0];
  return scalars;
}

// Runs `prog` on elements [start, start + len) (len <= kChunk): register k (kChunk floats at
// regs + k * kChunk) gets instruction k's values.
void evalChunk(const std::vector<Instr>& prog, float* regs, const std::vector<const Tensor*>& in,
               const std::vector<float>& scalars, int64_t start, int64_t len) {
  for (size_t k = 0; k < prog.size(); ++k) {
    const Instr& ins = prog[k];
    float* dst = regs + k * kChunk;
    auto src = [&](const Operand& o, float* tmp) -> const float* {
      if (o.reg >= 0) return regs + o.reg * kChunk;
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
    if (ins.vector) {
      if (dst != a) std::memcpy(dst, a, sizeof(float) * len);
      avx2::applyActivations(&ins.act, 1, dst, len);
      continue;
    }
    const float p = ins.p, q = ins.q;
    switch (ins.code) {
      // The hot simple cases as their own loops so the compiler vectorises them.
      case Code::Math: ins.math(a, dst, len); break;
      case Code::Relu: for (int64_t i = 0; i < len; ++i) dst[i] = a[i] < 0 ? 0.f : a[i]; break;
      case Code::Add: for (int64_t i = 0; i < len; ++i) dst[i] = a[i] + b[i]; break;
      case Code::Sub: for (int64_t i = 0; i < len; ++i) dst[i] = a[i] - b[i]; break;
      case Code::Mul: for (int64_t i = 0; i < len; ++i) dst[i] = a[i] * b[i]; break;
      case Code::Div: for (int64_t i = 0; i < len; ++i) dst[i] = a[i] / b[i]; break;
      // apply()'s expressions, as loops the compiler vectorises (min/max keep their NaN rule).
      case Code::HardSigmoid:
        for (int64_t i = 0; i < len; ++i) dst[i] = std::max(0.f, std::min(1.f, p * a[i] + q));
        break;
      case Code::LeakyRelu: for (int64_t i = 0; i < len; ++i) dst[i] = a[i] < 0 ? p * a[i] : a[i]; break;
      case Code::Clip: for (int64_t i = 0; i < len; ++i) dst[i] = std::min(std::max(a[i], p), q); break;
      case Code::Abs: for (int64_t i = 0; i < len; ++i) dst[i] = std::fabs(a[i]); break;
      case Code::Neg: for (int64_t i = 0; i < len; ++i) dst[i] = -a[i]; break;
      default: for (int64_t i = 0; i < len; ++i) dst[i] = apply(ins, a[i], b[i]); break;
    }
  }
}

class LoopKernel : public Kernel {
 public:
  Status init(const KernelContext& ctx, const Body& body) {
    if (ctx.outputTypes[0].dtype != DType::F32)
      return Status::error("Fused elementwise: only f32");
    n_ = numElements(ctx.outputTypes[0].shape);
    threads_ = std::max(1, ctx.threads);
    outputsFrom_ = body.outputsFrom;
    for (const Shape& sh : body.shapes)
      if (numElements(sh) != n_) return Status::error("Fused elementwise: body ops differ in size");
    return compileLoop(ctx, body, body.ops.size(), n_, &prog_);
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    const int64_t chunks = (n_ + kChunk - 1) / kChunk;
    const size_t nregs = prog_.size();
    const std::vector<float> scalars = readScalars(in);
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
        evalChunk(prog_, regs.data(), in, scalars, start, len);
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

// ---- row kernel ----

// Reductions first (up to Min), then the roots that keep the row.
enum class RowOp { Sum, Mean, SumSquare, L2, Max, Min, Softmax, LogSoftmax, LayerNorm };

bool isRowKind(const std::string& kind) {
  return kind == "reduction" || kind == "softmax" || kind == "layernorm" ||
         kind == "add-layernorm";
}

class RowKernel : public Kernel {
 public:
  Status init(const KernelContext& ctx, const Body& body) {
    if (ctx.outputTypes[0].dtype != DType::F32) return Status::error("Fused row: only f32");
    const size_t last = body.ops.size() - 1;
    const BodyOp& root = body.ops[last];
    static const std::pair<const char*, RowOp> table[] = {
        {"ReduceSum", RowOp::Sum}, {"ReduceMean", RowOp::Mean}, {"ReduceMax", RowOp::Max},
        {"ReduceMin", RowOp::Min}, {"ReduceSumSquare", RowOp::SumSquare},
        {"ReduceL2", RowOp::L2}, {"Softmax", RowOp::Softmax},
        {"LogSoftmax", RowOp::LogSoftmax}, {"LayerNormalization", RowOp::LayerNorm}};
    bool known = false;
    for (const auto& [name, op] : table)
      if (root.type == name) {
        op_ = op;
        known = true;
      }
    if (!known) return Status::error("Fused row: no row form of " + root.type);
    if (root.refs.empty() || root.refs[0] == -1) return Status::error("Fused row: root has no X");
    const int64_t xr = root.refs[0];
    Shape xs;
    if (xr >= 0) {
      if (ctx.inputTypes[xr].dtype != DType::F32) return Status::error("Fused row: X not f32");
      xInput_ = (int)xr;
      xs = ctx.inputTypes[xr].shape;
    } else {
      xReg_ = (int)(-2 - xr);
      xs = body.shapes[xReg_];
    }
    const int64_t rank = (int64_t)xs.size();
    n_ = numElements(xs);
    if (rank == 0 || n_ == 0) return Status::error("Fused row: X is a scalar or empty");

    // The row: the trailing dims the root folds.
    int64_t firstRowDim = rank - 1;
    if (op_ == RowOp::Softmax || op_ == RowOp::LogSoftmax || op_ == RowOp::LayerNorm) {
      int64_t axis = root.attrs.getInt("axis", -1);
      if (axis != -1 && axis != rank - 1) return Status::error("Fused row: axis is not the last");
    } else {
      std::vector<int64_t> axes = root.attrs.getInts("axes");
      if (root.refs.size() > 1 && root.refs[1] >= 0) {
        const Tensor* c = root.refs[1] < (int64_t)ctx.constInputs.size()
                              ? ctx.constInputs[root.refs[1]] : nullptr;
        if (!c || c->dtype() != DType::I64) return Status::error("Fused row: axes not constant i64");
        axes.assign(c->data<int64_t>(), c->data<int64_t>() + c->numel());
      }
      if (axes.empty() && root.attrs.getInt("noop_with_empty_axes", 0))
        return Status::error("Fused row: reduction over no axes");
      std::vector<bool> reduced(rank, axes.empty());
      for (int64_t a : axes) {
        if (a < -rank || a >= rank) return Status::error("Fused row: axis out of range");
        reduced[a < 0 ? a + rank : a] = true;
      }
      firstRowDim = rank;
      while (firstRowDim > 0 && reduced[firstRowDim - 1]) --firstRowDim;
      for (int64_t d = 0; d < firstRowDim; ++d)
        if (reduced[d]) return Status::error("Fused row: reduced axes are not the last ones");
    }
    cols_ = 1;
    for (int64_t d = firstRowDim; d < rank; ++d) cols_ *= xs[d];
    rows_ = n_ / cols_;
    const bool reduces = op_ <= RowOp::Min;
    if (numElements(body.shapes[last]) != (reduces ? rows_ : n_))
      return Status::error("Fused row: root result has the wrong size");
    if (op_ == RowOp::LayerNorm) {
      epsilon_ = root.attrs.getFloat("epsilon", 1e-5f);
      auto param = [&](size_t i, int* slot) -> Status {
        if (root.refs.size() <= i || root.refs[i] == -1) return Status::ok();
        int64_t r = root.refs[i];
        if (r < 0 || ctx.inputTypes[r].dtype != DType::F32 ||
            numElements(ctx.inputTypes[r].shape) != cols_)
          return Status::error("Fused row: LayerNormalization scale/bias must be f32 [" +
                               std::to_string(cols_) + "] step inputs");
        *slot = (int)r;
        return Status::ok();
      };
      TANDEM_RETURN_IF_ERROR(param(1, &scaleInput_));
      TANDEM_RETURN_IF_ERROR(param(2, &biasInput_));
      if (scaleInput_ < 0) return Status::error("Fused row: LayerNormalization without Scale");
    }
    TANDEM_RETURN_IF_ERROR(compileLoop(ctx, body, last, n_, &prog_));
    for (size_t o = 0; o < body.outputsFrom.size(); ++o) {
      if (body.outputsFrom[o] == (int64_t)last) rootOut_ = (int)o;
      else loopOuts_.push_back({(int)o, (int)body.outputsFrom[o]});
    }
    if (rootOut_ < 0) return Status::error("Fused row: the root is not an output");
    threads_ = std::max(1, ctx.threads);
    avx2_ = avx2::available();
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    const std::vector<float> scalars = readScalars(in);
    const float* scale = scaleInput_ >= 0 ? in[scaleInput_]->data<float>() : nullptr;
    const float* bias = biasInput_ >= 0 ? in[biasInput_]->data<float>() : nullptr;
    float* Y = out[rootOut_]->data<float>();
    const size_t nregs = std::max<size_t>(prog_.size(), 1);
    const bool keepsRow = op_ > RowOp::Min;
    const int threads = rows_ >= 2 && n_ >= 16 * kChunk ? threads_ : 1;
#pragma omp parallel num_threads(threads)
    {
      // Per-thread scratch, grown once: the loop's registers and, for the normalising roots,
      // the row itself (read from memory once, then re-read from cache).
      static thread_local std::vector<float> regs, row;
      if (regs.size() < nregs * kChunk) regs.resize(nregs * kChunk);
      if (keepsRow && (int64_t)row.size() < cols_) row.resize(cols_);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; ++r) {
        const int64_t base = r * cols_;
        double sum = 0;
        float ext = op_ == RowOp::Max ? -std::numeric_limits<float>::infinity()
                                      : std::numeric_limits<float>::infinity();
        bool nan = false;
        for (int64_t c0 = 0; c0 < cols_; c0 += kChunk) {
          const int64_t len = std::min(kChunk, cols_ - c0);
          evalChunk(prog_, regs.data(), in, scalars, base + c0, len);
          const float* x = xReg_ >= 0 ? regs.data() + xReg_ * kChunk
                                      : in[xInput_]->data<float>() + base + c0;
          switch (op_) {
            case RowOp::Sum:
            case RowOp::Mean:
              for (int64_t i = 0; i < len; ++i) sum += x[i];
              break;
            case RowOp::SumSquare:
            case RowOp::L2:
              for (int64_t i = 0; i < len; ++i) sum += double(x[i]) * x[i];
              break;
            case RowOp::Max:
              for (int64_t i = 0; i < len; ++i) {
                nan |= std::isnan(x[i]);
                ext = x[i] > ext ? x[i] : ext;
              }
              break;
            case RowOp::Min:
              for (int64_t i = 0; i < len; ++i) {
                nan |= std::isnan(x[i]);
                ext = x[i] < ext ? x[i] : ext;
              }
              break;
            default:
              std::memcpy(row.data() + c0, x, sizeof(float) * len);
              break;
          }
          // The chunk is read: loop outputs (the residual sum) may overwrite it.
          for (const auto& [o, reg] : loopOuts_)
            std::memcpy(out[o]->data<float>() + base + c0, regs.data() + reg * kChunk,
                        sizeof(float) * len);
        }
        switch (op_) {
          case RowOp::Sum: Y[r] = float(sum); break;
          case RowOp::Mean: Y[r] = float(sum / double(cols_)); break;
          case RowOp::SumSquare: Y[r] = float(sum); break;
          case RowOp::L2: Y[r] = float(std::sqrt(sum)); break;
          case RowOp::Max:
          case RowOp::Min: Y[r] = nan ? std::numeric_limits<float>::quiet_NaN() : ext; break;
          case RowOp::Softmax:
          case RowOp::LogSoftmax: {
            // AVX2: vector exp, once per element (false for a NaN or a non-finite maximum).
            if (avx2_ && avx2::softmaxRow(row.data(), Y + base, cols_, op_ == RowOp::LogSoftmax))
              break;
            float mx = -std::numeric_limits<float>::infinity();
            for (int64_t c = 0; c < cols_; ++c) mx = std::max(mx, row[c]);
            double s = 0;
            for (int64_t c = 0; c < cols_; ++c) s += std::exp(double(row[c]) - mx);
            float* y = Y + base;
            if (op_ == RowOp::Softmax) {
              const double inv = 1.0 / s;
              for (int64_t c = 0; c < cols_; ++c) y[c] = float(std::exp(double(row[c]) - mx) * inv);
            } else {
              const double lse = double(mx) + std::log(s);
              for (int64_t c = 0; c < cols_; ++c) y[c] = float(double(row[c]) - lse);
            }
            break;
          }
          case RowOp::LayerNorm: {
            if (avx2_) {
              avx2::layerNormRow(row.data(), Y + base, cols_, scale, bias, epsilon_);
              break;
            }
            double mean = 0, var = 0;
            for (int64_t c = 0; c < cols_; ++c) mean += row[c];
            mean /= double(cols_);
            for (int64_t c = 0; c < cols_; ++c) var += (row[c] - mean) * (row[c] - mean);
            const double inv = 1.0 / std::sqrt(var / double(cols_) + epsilon_);
            float* y = Y + base;
            for (int64_t c = 0; c < cols_; ++c)
              y[c] = float((row[c] - mean) * inv * scale[c] + (bias ? bias[c] : 0.f));
            break;
          }
        }
      }
    }
    return Status::ok();
  }

  std::string implName() const override {
    return "fused-rows(" + std::to_string(prog_.size()) + " ops + root)";
  }

 private:
  RowOp op_ = RowOp::Sum;
  std::vector<Instr> prog_;
  int xInput_ = -1, xReg_ = -1;
  int scaleInput_ = -1, biasInput_ = -1;
  int rootOut_ = -1;
  std::vector<std::pair<int, int>> loopOuts_;  // (step output, loop register)
  int64_t n_ = 0, rows_ = 0, cols_ = 0;
  double epsilon_ = 1e-5;
  int threads_ = 1;
  bool avx2_ = false;  // the softmax and layer-norm roots take runtime/cpu/avx2/Rows.h's rows
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
  if (isRowKind(body.kind)) {
    Status st = createRowKernel(ctx, body, out);
    if (st.isOk()) return st;
    return createUnfused(registry, ctx, body, "no row form: " + st.message(), out);
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

Status createRowKernel(const KernelContext& ctx, const Body& body, std::unique_ptr<Kernel>* out) {
  auto k = std::make_unique<RowKernel>();
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

// "Fused" steps on CUDA (tandem.fused groups the fuse pass forms on cuda devices,
// passes/FuseCuda.h): gemm-epilogue as one cuBLASLt matmul with its epilogue (Math.cpp),
// elementwise as one generated kernel that reads each input and writes each output once, and
// add-layernorm (residual Add + LayerNormalization) as one block per row. Any other kind, or a body
// these kernels cannot express, is an error at load naming what is not supported.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "runtime/OpTable.h"
#include "runtime/cpu/ref/Fused.h"
#include "runtime/cuda/Generated.h"

namespace tandem {
namespace cuda {

namespace {

constexpr int kMaxFusedArgs = 64;  // outputs + inputs of one generated elementwise kernel

std::string fusedLabel(const KernelContext& ctx, const std::string& kind) {
  return opLabel(ctx) + " [" + kind + "]";
}

// ---- gemm-epilogue ----

/// Maps the step's inputs onto the anchor's (A, B, C or bias) and runs the cuBLASLt kernel.
class GemmEpilogueKernel : public Kernel {
 public:
  GemmEpilogueKernel(std::unique_ptr<Kernel> inner, std::vector<int64_t> refs, std::string text)
      : inner_(std::move(inner)), refs_(std::move(refs)), text_(std::move(text)), args_(refs_.size()) {}
  Status prepare() override { return inner_->prepare(); }
  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < refs_.size(); ++i) args_[i] = refs_[i] >= 0 ? in[refs_[i]] : nullptr;
    return inner_->run(args_, out);
  }
  std::string implName() const override { return inner_->implName() + "+" + text_; }

 private:
  std::unique_ptr<Kernel> inner_;
  std::vector<int64_t> refs_;  // per anchor input: step input index or -1
  std::string text_;           // "bias+relu"
  std::vector<const Tensor*> args_;
  std::mutex mu_;
};

Status createGemmEpilogue(const KernelRegistry& registry, const KernelContext& ctx, const fused::Body& body,
                          std::unique_ptr<Kernel>* out) {
  // 1. Op 0 is the Gemm/MatMul; then at most one bias Add (a step input of N values) and at most
  //    one activation, Relu or tanh-Gelu, last; the last op is the only output.
  // 2. The anchor is created as a plain Gemm/MatMul kernel carrying the epilogue: the bias as
  //    Gemm's C (beta 1) or MatMul's third input, the activation as attribute `activation`.
  const std::string label = fusedLabel(ctx, body.kind);
  const fused::BodyOp& a = body.ops[0];
  if (a.type != "Gemm" && a.type != "MatMul")
    return Status::error(label + ": the anchor is " + a.type + ", not Gemm or MatMul");
  if (body.outputsFrom.size() != 1 || body.outputsFrom[0] != (int64_t)body.ops.size() - 1)
    return Status::error(label + ": the last body op must be the only output");
  for (int64_t r : a.refs)
    if (r < -1) return Status::error(label + ": the anchor reads a body result");
  const int64_t N = ctx.outputTypes[0].shape.empty() ? 1 : ctx.outputTypes[0].shape.back();
  int64_t biasRef = -1;
  std::string activation, text;
  for (size_t k = 1; k < body.ops.size(); ++k) {
    const fused::BodyOp& op = body.ops[k];
    const int64_t prev = -2 - (int64_t)(k - 1);
    if (!activation.empty()) return Status::error(label + ": " + op.type + " after the activation is not a cuBLASLt epilogue");
    if (op.type == "Add" && op.refs.size() == 2 && biasRef < 0) {
      int64_t other = op.refs[0] == prev ? op.refs[1] : op.refs[1] == prev ? op.refs[0] : -1;
      if (other < 0) return Status::error(label + ": the Add does not add a step input to the product");
      const TensorType& t = ctx.inputTypes[other];
      if (t.dtype != DType::F32 || t.shape.empty() || t.shape.back() != N || numElements(t.shape) != N)
        return Status::error(label + ": the Add's operand " + shapeToString(t.shape) + " is not a bias row of " +
                             std::to_string(N) + " values (cuBLASLt's BIAS epilogue)");
      biasRef = other;
      text += std::string(text.empty() ? "" : "+") + "bias";
      continue;
    }
    if (op.refs.size() != 1 || op.refs[0] != prev)
      return Status::error(label + ": " + op.type + " is not a cuBLASLt epilogue of the product");
    if (op.type == "Relu") {
      activation = "Relu";
    } else if (op.type == "Gelu" && op.attrs.getString("approximate", "none") == "tanh") {
      activation = "Gelu";
    } else if (op.type == "Gelu") {
      return Status::error(label + ": exact Gelu is not a cuBLASLt epilogue (its GELU is the tanh approximation)");
    } else {
      return Status::error(label + ": " + op.type + " is not a cuBLASLt epilogue (bias Add, Relu, tanh Gelu)");
    }
    text += std::string(text.empty() ? "" : "+") + (activation == "Relu" ? "relu" : "gelu_tanh");
  }

  KernelContext anchor = fused::bodyOpContext(ctx, body, 0);
  anchor.cuda = ctx.cuda;
  AttrMap attrs = a.attrs;
  std::vector<int64_t> refs = a.refs;
  if (biasRef >= 0) {
    bool gemmHasC = a.type == "Gemm" && refs.size() > 2 && refs[2] >= 0;
    if (gemmHasC || (a.type == "MatMul" && refs.size() > 2))
      return Status::error(label + ": the product already has a C/bias; a second bias is not a cuBLASLt epilogue");
    anchor.inputTypes.resize(2);
    anchor.constInputs.resize(2);
    refs.resize(2);
    anchor.inputTypes.push_back(ctx.inputTypes[biasRef]);
    anchor.constInputs.push_back(biasRef < (int64_t)ctx.constInputs.size() ? ctx.constInputs[biasRef] : nullptr);
    refs.push_back(biasRef);
    if (a.type == "Gemm") attrs.set("beta", Attr::ofFloat(1.f));
  }
  if (!activation.empty()) attrs.set("activation", Attr::ofString(activation));
  anchor.attrs = &attrs;
  std::unique_ptr<Kernel> inner;
  TANDEM_RETURN_IF_ERROR(registry.create("cuda", anchor, &inner));
  *out = std::make_unique<GemmEpilogueKernel>(std::move(inner), refs, text);
  return Status::ok();
}

// ---- elementwise ----

// A float literal that reads back as exactly `v` (inf and nan spelled by their bits).
std::string floatLiteral(float v) {
  if (!std::isfinite(v)) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    char b[40];
    std::snprintf(b, sizeof b, "__int_as_float(0x%08x)", bits);
    return b;
  }
  char b[40];
  std::snprintf(b, sizeof b, "%.9gf", v);
  std::string s = b;
  if (s.find_first_of(".e") == std::string::npos) s.insert(s.size() - 1, ".0");  // "1f" is not C++
  return s;
}

// `formula` (an op table formula over `a`) with each identifier `a` replaced by `x`.
std::string substituteA(const char* formula, const std::string& x) {
  auto ident = [](char c) { return std::isalnum((unsigned char)c) || c == '_' || c == '.'; };
  std::string out;
  for (size_t i = 0; formula[i]; ++i) {
    bool alone = formula[i] == 'a' && (i == 0 || !ident(formula[i - 1])) && !ident(formula[i + 1]);
    if (alone) out += x;
    else out += formula[i];
  }
  return out;
}

// The expression of body op `op` over its operands' expressions `x`; "" when the kernel does not
// know the op. The unary math ops are the op table's formulas (runtime/core/OpTable.def), the
// others are written out here. Attributes and constant Clip bounds become literals in the source.
std::string opExpression(const KernelContext& ctx, const fused::BodyOp& op, const std::vector<std::string>& x,
                         std::string* why) {
  const std::string& t = op.type;
  auto f = [&](const char* name, float dflt) { return floatLiteral(op.attrs.getFloat(name, dflt)); };
  auto need = [&](size_t n) {
    if (x.size() < n || x[0].empty() || (n > 1 && x[1].empty())) {
      *why = t + " has an absent operand";
      return false;
    }
    return true;
  };
  if (t == "Clip") {
    if (!need(1)) return "";
    std::string e = x[0];
    for (size_t i = 1; i < op.refs.size() && i < 3; ++i) {
      int64_t r = op.refs[i];
      if (r == -1) continue;
      const Tensor* c = r >= 0 && r < (int64_t)ctx.constInputs.size() ? ctx.constInputs[r] : nullptr;
      if (!c || c->numel() != 1 || c->dtype() != DType::F32) {
        *why = "Clip's bounds must be constant f32 scalars";
        return "";
      }
      std::string b = floatLiteral(c->data<float>()[0]);
      e = i == 1 ? "(" + e + " < " + b + " ? " + b + " : " + e + ")" : "(" + e + " > " + b + " ? " + b + " : " + e + ")";
    }
    return e;
  }
  // A and B stand for the operands (names of loads or earlier results); Max and Min pass a NaN
  // operand on, as the CPU kernels do.
  static const std::vector<std::pair<std::string, std::string>> binary = {
      {"Add", "(A + B)"}, {"Sub", "(A - B)"}, {"Mul", "(A * B)"}, {"Div", "(A / B)"},
      {"Max", "(A != A ? A : B != B ? B : B > A ? B : A)"}, {"Min", "(A != A ? A : B != B ? B : B < A ? B : A)"}};
  for (auto& [name, pattern] : binary) {
    if (t != name) continue;
    if (op.refs.size() != 2 || !need(2)) return "";
    std::string e;
    for (char ch : pattern) e += ch == 'A' ? x[0] : ch == 'B' ? x[1] : std::string(1, ch);
    return e;
  }
  if (op.refs.size() != 1) {
    *why = t + " is not an op of the generated element-wise kernel with " + std::to_string(op.refs.size()) + " operands";
    return "";
  }
  if (!need(1)) return "";
  const std::string& a = x[0];
  if (t == "Relu") return "(" + a + " < 0.f ? 0.f : " + a + ")";  // NaN passes, as on the CPU
  if (t == "Sigmoid") return "(1.f / (1.f + expf(-" + a + ")))";
  if (const OpInfo* info = findOp(t); info && info->formula) return "(" + substituteA(info->formula, a) + ")";
  if (t == "Abs") return "fabsf(" + a + ")";
  if (t == "Neg") return "(-" + a + ")";
  if (t == "LeakyRelu") return "(" + a + " >= 0.f ? " + a + " : " + f("alpha", 0.01f) + " * " + a + ")";
  if (t == "Elu") return "(" + a + " >= 0.f ? " + a + " : " + f("alpha", 1.f) + " * (expf(" + a + ") - 1.f))";
  if (t == "Selu") {
    std::string al = f("alpha", 1.67326319217681884765625f), g = f("gamma", 1.05070102214813232421875f);
    return "(" + a + " > 0.f ? " + g + " * " + a + " : " + g + " * (" + al + " * expf(" + a + ") - " + al + "))";
  }
  if (t == "HardSigmoid")
    return "fmaxf(0.f, fminf(1.f, " + f("alpha", 0.2f) + " * " + a + " + " + f("beta", 0.5f) + "))";
  if (t == "Gelu") {
    if (op.attrs.getString("approximate", "none") == "tanh")
      return "(0.5f * " + a + " * (1.f + tanhf(0.7978845608028654f * (" + a + " + 0.044715f * " + a + " * " + a +
             " * " + a + "))))";
    return "(0.5f * " + a + " * (1.f + erff(" + a + " * 0.7071067811865476f)))";
  }
  *why = t + " is not an op of the generated element-wise kernel";
  return "";
}

/// One generated function for the whole body: each thread loads every input element it needs
/// once, evaluates the body in registers and stores each output once. Inputs are full-size (of
/// the output's shape) or scalars; every load of an element comes before its stores, so an
/// output may share memory with an input.
class FusedElementwiseKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init(const KernelContext& ctx, const fused::Body& body) {
    const std::string label = fusedLabel(ctx, body.kind);
    const TensorType& ot = ctx.outputTypes[0];
    if (ot.dtype != DType::F32) return Status::error(label + ": the generated kernel is f32 only");
    n_ = numElements(ot.shape);
    nIn_ = ctx.inputTypes.size();
    nOut_ = ctx.outputTypes.size();
    if (nIn_ + nOut_ > (size_t)kMaxFusedArgs)
      return Status::error(label + ": " + std::to_string(nIn_ + nOut_) + " inputs and outputs, above the kernel's " +
                           std::to_string(kMaxFusedArgs));
    // Signature, then one load per used input, one statement per body op, one store per output.
    std::string sig = "(i64 n";
    for (size_t o = 0; o < nOut_; ++o) sig += ", float* out" + std::to_string(o);
    for (size_t i = 0; i < nIn_; ++i) sig += ", const float* in" + std::to_string(i);
    sig += ")";
    std::string loads, body_;
    std::vector<bool> used(nIn_, false);
    for (size_t k = 0; k < body.ops.size(); ++k) {
      const fused::BodyOp& op = body.ops[k];
      std::vector<std::string> x;
      for (size_t j = 0; j < op.refs.size(); ++j) {
        int64_t r = op.refs[j];
        if (r == -1) { x.push_back(""); continue; }
        if (r <= -2) { x.push_back("v" + std::to_string(-2 - r)); continue; }
        const TensorType& t = ctx.inputTypes[r];
        bool clipBound = op.type == "Clip" && j > 0;
        if (!clipBound) {
          if (t.dtype != DType::F32)
            return Status::error(label + ": input " + std::to_string(r) + " is " + dtypeName(t.dtype) + ", not f32");
          if (t.shape != ot.shape && numElements(t.shape) != 1)
            return Status::error(label + ": input " + std::to_string(r) + " " + shapeToString(t.shape) +
                                 " is neither the output's shape " + shapeToString(ot.shape) + " nor a scalar");
          used[r] = true;
        }
        x.push_back("x" + std::to_string(r));
      }
      std::string why;
      std::string e = opExpression(ctx, op, x, &why);
      if (e.empty()) return Status::error(label + ": " + why);
      body_ += "    const float v" + std::to_string(k) + " = " + e + ";\n";
    }
    for (size_t i = 0; i < nIn_; ++i)
      if (used[i])
        loads += "    const float x" + std::to_string(i) + " = in" + std::to_string(i) +
                 (numElements(ctx.inputTypes[i].shape) == 1 && ctx.inputTypes[i].shape != ot.shape ? "[0]" : "[i]") + ";\n";
    std::string stores;
    for (size_t o = 0; o < nOut_; ++o)
      stores += "    out" + std::to_string(o) + "[i] = v" + std::to_string(body.outputsFrom[o]) + ";\n";
    std::string text = sig + " {\n" +
                       "  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {\n" +
                       loads + body_ + stores + "  }\n}\n";
    // The name is a hash of the text: equal bodies share one function in the plan's program.
    std::string name = "td_fused_ew_" + nvrtcCacheKey(text, {}, "", "").substr(0, 16);
    ops_ = body.ops.size();
    return use(name, "extern \"C\" __global__ void " + name + text, &fn_);
  }
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* ptrs[kMaxFusedArgs];
    void* args[kMaxFusedArgs + 1];
    args[0] = &n_;
    for (size_t o = 0; o < nOut_; ++o) ptrs[o] = outs[o]->raw();
    for (size_t i = 0; i < nIn_; ++i) ptrs[nOut_ + i] = ins[i] ? const_cast<void*>(ins[i]->raw()) : nullptr;
    for (size_t k = 0; k < nOut_ + nIn_; ++k) args[k + 1] = &ptrs[k];
    return launchGridStride(*dc_, fn(fn_), n_, args);
  }
  std::string implName() const override { return "nvrtc-fused(" + std::to_string(ops_) + " ops)"; }

 private:
  int64_t n_ = 0;
  size_t nIn_ = 0, nOut_ = 0, ops_ = 0;
  size_t fn_ = 0;
};

// ---- add-layernorm: residual Add + LayerNormalization ----

const char* kAddLayerNormName = "td_add_layernorm_f32";

// One block per row. The sum x = a + b is formed in each of the three passes (mean, variance,
// output) rather than stored and re-read, and `sum` (when the step writes it) is stored only in
// the last pass, next to `out`: every element is read before anything is written, so the
// outputs may share memory with a or b.
std::string addLayerNormSource() {
  return std::string("extern \"C\" __global__ void ") + kAddLayerNormName +
         "(i64 rows, i64 cols, float eps, float* out, float* sum, const float* a, const float* b, "
         "const float* __restrict__ scale, const float* __restrict__ bias) {\n" +
         R"(  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* ar = a + row * cols;
    const float* br = b + row * cols;
    float s = 0.f;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) s += ar[k] + br[k];
    float mu = td_block_sum(s) / (float)cols;
    float v = 0.f;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) { float d = ar[k] + br[k] - mu; v += d * d; }
    float inv = 1.f / sqrtf(td_block_sum(v) / (float)cols + eps);
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) {
      float x = ar[k] + br[k];
      if (sum) sum[row * cols + k] = x;
      out[row * cols + k] = (x - mu) * inv * scale[k] + (bias ? bias[k] : 0.f);
    }
  }
}
)";
}

class AddLayerNormKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  int64_t in[4] = {-1, -1, -1, -1};  // step inputs: a, b, scale, bias (-1 absent)
  int outY = -1, outSum = -1;       // step outputs
  Status init() { return use(kAddLayerNormName, addLayerNormSource(), &fn_); }
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    const void* p[4];
    for (int i = 0; i < 4; ++i) p[i] = in[i] >= 0 ? ins[in[i]]->raw() : nullptr;
    void* y = outs[outY]->raw();
    void* s = outSum >= 0 ? outs[outSum]->raw() : nullptr;
    void* args[] = {&rows, &cols, &eps, &y, &s, &p[0], &p[1], &p[2], &p[3]};
    return launchBlocks(*dc_, fn(fn_), rows, cols >= 256 ? 256 : 64, args);
  }
  std::string implName() const override { return "nvrtc-add-layernorm"; }

 private:
  size_t fn_ = 0;
};

Status createAddLayerNorm(const KernelContext& ctx, const fused::Body& body, std::unique_ptr<Kernel>* out) {
  const std::string label = fusedLabel(ctx, body.kind);
  if (body.ops.size() != 2 || body.ops[0].type != "Add" || body.ops[1].type != "LayerNormalization")
    return Status::error(label + ": the body is not Add then LayerNormalization");
  const fused::BodyOp& add = body.ops[0];
  const fused::BodyOp& ln = body.ops[1];
  const Shape& xs = ctx.outputTypes[0].shape;
  if (add.refs.size() != 2 || add.refs[0] < 0 || add.refs[1] < 0)
    return Status::error(label + ": the Add must read two step inputs");
  for (int64_t r : add.refs)
    if (ctx.inputTypes[r].shape != xs || ctx.inputTypes[r].dtype != DType::F32)
      return Status::error(label + ": the Add's operand " + shapeToString(ctx.inputTypes[r].shape) +
                           " is not f32 of the output's shape " + shapeToString(xs) + " (no broadcasting)");
  if (ln.refs.size() < 2 || ln.refs[0] != -2 || ln.refs[1] < 0)
    return Status::error(label + ": the LayerNormalization must normalise the sum with a step input as Scale");
  int64_t axis = ln.attrs.getInt("axis", -1);
  if (axis < 0) axis += (int64_t)xs.size();
  if (axis < 0 || axis >= (int64_t)xs.size())
    return Status::error(label + ": axis out of range for rank " + std::to_string(xs.size()));
  auto k = std::make_unique<AddLayerNormKernel>(ctx.cuda);
  k->rows = numElements(Shape(xs.begin(), xs.begin() + axis));
  k->cols = numElements(Shape(xs.begin() + axis, xs.end()));
  k->eps = ln.attrs.getFloat("epsilon", 1e-5f);
  k->in[0] = add.refs[0];
  k->in[1] = add.refs[1];
  for (size_t i = 1; i < 3; ++i) {
    int64_t r = i < ln.refs.size() ? ln.refs[i] : -1;
    if (r <= -2) return Status::error(label + ": Scale/B must be step inputs");
    if (r >= 0 && (ctx.inputTypes[r].dtype != DType::F32 || numElements(ctx.inputTypes[r].shape) != k->cols))
      return Status::error(label + ": the kernel needs " + (i == 1 ? "Scale" : "B") + " to be f32 with " +
                           std::to_string(k->cols) + " elements, got " + shapeToString(ctx.inputTypes[r].shape));
    k->in[1 + i] = r;
  }
  for (size_t o = 0; o < body.outputsFrom.size(); ++o) {
    int& slot = body.outputsFrom[o] == 1 ? k->outY : k->outSum;
    if (slot >= 0) return Status::error(label + ": a body value is output twice");
    slot = (int)o;
  }
  if (k->outY < 0) return Status::error(label + ": the normalised value is not an output");
  TANDEM_RETURN_IF_ERROR(k->init());
  *out = std::move(k);
  return Status::ok();
}

Status createFused(const KernelRegistry& registry, const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  fused::Body body;
  Status st = fused::parseBody(ctx, &body);
  if (!st.isOk()) return Status::error(opLabel(ctx) + ": " + st.message());
  if (body.kind == "gemm-epilogue") return createGemmEpilogue(registry, ctx, body, out);
  if (body.kind == "add-layernorm") return createAddLayerNorm(ctx, body, out);
  if (body.kind == "elementwise") {
    auto k = std::make_unique<FusedElementwiseKernel>(ctx.cuda);
    TANDEM_RETURN_IF_ERROR(k->init(ctx, body));
    *out = std::move(k);
    return Status::ok();
  }
  return Status::error(fusedLabel(ctx, body.kind) + ": the CUDA backend has no kernel for fusion kind '" + body.kind +
                       "' (it runs gemm-epilogue, elementwise and add-layernorm)");
}

}  // namespace

std::vector<std::pair<std::string, std::string>> fusedSources() {
  return {{kAddLayerNormName, addLayerNormSource()}};
}

void registerFusedKernels(KernelRegistry& r) {
  KernelDef d;
  d.opType = "Fused";
  d.deviceKind = "cuda";
  d.impl = "nvrtc+cublasLt";
  d.priority = 0;
  d.accepts = [](const std::vector<DType>&) { return true; };  // the body decides, at load
  d.dtypesText = "f32 (gemm-epilogue, elementwise, add-layernorm)";
  const KernelRegistry* reg = &r;  // the anchor of a gemm-epilogue comes from the same registry
  d.create = [reg](const KernelContext& ctx, std::unique_ptr<Kernel>* out) -> Status {
    if (!ctx.cuda) return Status::error("internal: a CUDA kernel was created without a CUDA device context");
    return createFused(*reg, ctx, out);
  };
  r.add(std::move(d));
}

}  // namespace cuda
}  // namespace tandem

// Elementwise and broadcast ops as NVRTC-generated kernels: unary math and activations, binary
// arithmetic and comparisons (ONNX multidirectional broadcasting), variadic Min/Max/Sum, Where,
// Clip, PRelu, Pow, Cast. One function per (op, dtypes); attributes are launch parameters.
#include <cmath>
#include <limits>
#include <map>

#include "runtime/OpTable.h"
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/CudaKernelTable.h"
#include "runtime/cuda/Generated.h"

namespace tandem {
namespace cuda {

namespace {

// Expressions over a, b, c (inputs 0..2) and g.alpha/g.beta (attributes). f32 math uses the
// single-precision functions; integer ops use plain C operators. NaN follows the CPU reference
// (numpy): Relu, Min and Max pass it on; Softplus never overflows for large inputs.
// The unary math ops are the op table's formulas (runtime/core/OpTable.def): over a float `a`
// its overloads (exp, tanh, ...) compile to the same code as expf, tanhf, ...
const std::map<std::string, std::string>& unaryExprs() {
  static const std::map<std::string, std::string> m = {
#define TANDEM_MATH_OP(Name, since, shapeFn, work, flops, flags, formula) {#Name, #formula},
#include "runtime/core/OpTable.def"
      {"Relu", "a < 0.f ? 0.f : a"},
      {"Sigmoid", "1.f / (1.f + expf(-a))"},
      {"Abs", "fabsf(a)"},
      {"Neg", "-a"},
      {"LeakyRelu", "a >= 0.f ? a : g.alpha * a"},
      {"Elu", "a >= 0.f ? a : g.alpha * (expf(a) - 1.f)"},
      {"Selu", "a > 0.f ? g.beta * a : g.beta * (g.alpha * expf(a) - g.alpha)"},
      {"HardSigmoid", "fmaxf(0.f, fminf(1.f, g.alpha * a + g.beta))"},
      {"Clip", "(a < g.alpha ? g.alpha : (a > g.beta ? g.beta : a))"},
      {"Identity", "a"},
      // ONNX Gelu-20: g.alpha = 1 selects the tanh approximation (approximate = "tanh").
      {"Gelu", "g.alpha != 0.f ? 0.5f * a * (1.f + tanhf(0.7978845608028654f * (a + 0.044715f * a * a * a)))"
               " : 0.5f * a * (1.f + erff(a * 0.7071067811865476f))"},
  };
  return m;
}

const std::map<std::string, std::string>& binaryExprs() {
  static const std::map<std::string, std::string> m = {
      {"Add", "a + b"},         {"Sub", "a - b"},          {"Mul", "a * b"},
      {"Div", "a / b"},         {"Sum", "a + b"},
      // a != a only holds for NaN (never for integers): either NaN operand is the result.
      {"Min", "(a != a ? a : b != b ? b : b < a ? b : a)"},
      {"Max", "(a != a ? a : b != b ? b : b > a ? b : a)"},
      {"Pow", "powf(a, b)"},    {"PRelu", "a >= 0.f ? a : a * b"},
      // GeluGrad (tandem): a = dY, b = X; g.alpha = 1 selects Gelu's tanh approximation.
      {"GeluGrad",
       "a * (g.alpha != 0.f"
       " ? 0.5f * (1.f + tanhf(0.7978845608028654f * b * (1.f + 0.044715f * b * b)))"
       " + 0.5f * b * (1.f - tanhf(0.7978845608028654f * b * (1.f + 0.044715f * b * b))"
       " * tanhf(0.7978845608028654f * b * (1.f + 0.044715f * b * b)))"
       " * 0.7978845608028654f * (1.f + 0.134145f * b * b)"
       " : 0.5f * (1.f + erff(b * 0.7071067811865476f)) + b * expf(-0.5f * b * b) * 0.3989422804014327f)"},
      {"Less", "a < b"},        {"Greater", "a > b"},      {"Equal", "a == b"},
  };
  return m;
}

std::string kernelName(const std::string& op, const std::vector<DType>& in, DType out) {
  std::string n = "td_ew_" + op;
  for (DType t : in) n += std::string("_") + dtypeName(t);
  return n + "_to_" + dtypeName(out);
}

// One elementwise function: out[i] = (OUT)(expr) with inputs read through broadcast strides.
// No __restrict__: the output may be an input's buffer. plan-memory lets a unary op, and a
// binary op's operand 0, write in place (then in1 aliases too for x op x), and a variadic
// op's later launches read the output as in0. Each element is read before it is written, by
// the same thread, so aliasing is correct as long as the compiler is not told it cannot happen.
std::string kernelSource(const std::string& name, const std::vector<DType>& in, DType out,
                         const std::string& expr) {
  std::string T[3];
  for (int k = 0; k < 3; ++k) T[k] = deviceTypeName(k < (int)in.size() ? in[k] : in[0]);
  std::string s = "extern \"C\" __global__ void " + name + "(TdGeo g, " + deviceTypeName(out) +
                  "* out, const " + T[0] + "* in0, const " + T[1] + "* in1, const " + T[2] + "* in2) {\n";
  s += R"(  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += (i64)gridDim.x * blockDim.x) {
    i64 o0 = i, o1 = i, o2 = i;
    if (!g.contiguous) {
      o0 = g.ibase[0]; o1 = g.ibase[1]; o2 = g.ibase[2];
      i64 r = i;
      for (int d = g.rank - 1; d >= 0; --d) {
        i64 x = r % g.dims[d];
        r /= g.dims[d];
        o0 += x * g.istr[0][d];
        o1 += x * g.istr[1][d];
        o2 += x * g.istr[2][d];
      }
    }
)";
  const char* names[3] = {"a", "b", "c"};
  for (size_t k = 0; k < in.size(); ++k)
    s += "    " + T[k] + " " + names[k] + " = in" + std::to_string(k) + "[o" + std::to_string(k) + "];\n";
  s += "    (void)o1; (void)o2;\n";
  s += "    out[i] = (" + std::string(deviceTypeName(out)) + ")(" + expr + ");\n  }\n}\n";
  return s;
}

std::string exprFor(const std::string& op, DType in0, DType out) {
  if (op == "Cast") {
    if (out == DType::Bool) return "a != 0";
    return "a";
  }
  if (op == "Where") return "a ? b : c";
  auto u = unaryExprs().find(op);
  if (u != unaryExprs().end()) return u->second;
  auto b = binaryExprs().find(op);
  if (b != binaryExprs().end()) {
    // Integer Min/Max/arith use the same C operators; Pow and PRelu are f32-only (the table).
    return b->second;
  }
  return "";
}

// One launch: which tensors are read (index into inputs, -1 = the output itself) and how.
struct Launch {
  TdGeo geo;
  int in[3] = {-1, -1, -1};
  int arity = 0;
};

class ElementwiseKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init(const KernelContext& ctx, const std::string& op, const std::vector<DType>& in, DType out) {
    std::string expr = exprFor(op, in[0], out);
    if (expr.empty()) return Status::error(opLabel(ctx) + ": no generated CUDA expression for " + op);
    std::string name = kernelName(op, in, out);
    return use(name, kernelSource(name, in, out, expr), &fn_);
  }
  std::vector<Launch> launches;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* out = outs[0]->raw();
    for (Launch& l : launches) {
      const void* p[3] = {nullptr, nullptr, nullptr};
      for (int k = 0; k < l.arity; ++k) p[k] = l.in[k] < 0 ? out : ins[l.in[k]]->raw();
      void* args[] = {&l.geo, &out, &p[0], &p[1], &p[2]};
      TANDEM_RETURN_IF_ERROR(launchGridStride(*dc_, fn(fn_), l.geo.n, args));
    }
    return Status::ok();
  }

 private:
  size_t fn_ = 0;
};

// Geometry of out = f(inputs...) with ONNX broadcasting of each input shape to `out`.
Status broadcastLaunch(const KernelContext& ctx, const Shape& out, const std::vector<Shape>& shapes,
                       const std::vector<int>& which, Launch* l) {
  std::vector<std::vector<int64_t>> strides;
  for (const Shape& s : shapes) {
    if (!ref::broadcastsTo(s, out))
      return Status::error(opLabel(ctx) + ": input shape " + shapeToString(s) +
                           " does not broadcast to the output shape " + shapeToString(out));
    strides.push_back(ref::broadcastStrides(s, out));
  }
  TANDEM_RETURN_IF_ERROR(makeGeo(ctx, out, strides, &l->geo));
  l->arity = (int)which.size();
  for (size_t k = 0; k < which.size(); ++k) l->in[k] = which[k];
  return Status::ok();
}

float floatAttr(const KernelContext& ctx, const char* name, float dflt) {
  return (float)ctx.attrs->getFloat(name, dflt);
}

Status createElementwise(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const std::string& op = ctx.opType;
  std::vector<DType> dts;
  std::vector<Shape> shapes;
  std::vector<int> present;
  for (size_t i = 0; i < ctx.inputTypes.size(); ++i)
    if (ctx.inputTypes[i].present()) {
      dts.push_back(ctx.inputTypes[i].dtype);
      shapes.push_back(ctx.inputTypes[i].shape);
      present.push_back((int)i);
    }
  const Shape& oshape = ctx.outputTypes[0].shape;
  DType odt = ctx.outputTypes[0].dtype;
  auto k = std::make_unique<ElementwiseKernel>(ctx.cuda);
  Launch l;
  if (op == "Clip") {
    // min and max are optional constant inputs (opset 11+), folded into the launch parameters.
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    for (int i : {1, 2}) {
      if (i >= (int)ctx.inputTypes.size() || !ctx.inputTypes[i].present()) continue;
      const Tensor* c = ctx.constInputs[i];
      if (!c || c->numel() != 1)
        return Status::error(opLabel(ctx) + ": the CUDA kernel needs " + (i == 1 ? "min" : "max") +
                             " to be a constant scalar");
      (i == 1 ? lo : hi) = c->data<float>()[0];
    }
    TANDEM_RETURN_IF_ERROR(k->init(ctx, op, {dts[0]}, odt));
    TANDEM_RETURN_IF_ERROR(broadcastLaunch(ctx, oshape, {shapes[0]}, {0}, &l));
    l.geo.alpha = lo;
    l.geo.beta = hi;
    k->launches.push_back(l);
  } else if (op == "Cast" || unaryExprs().count(op)) {
    TANDEM_RETURN_IF_ERROR(k->init(ctx, op, {dts[0]}, odt));
    TANDEM_RETURN_IF_ERROR(broadcastLaunch(ctx, oshape, {shapes[0]}, {0}, &l));
    if (op == "LeakyRelu") l.geo.alpha = floatAttr(ctx, "alpha", 0.01f);
    if (op == "Gelu") l.geo.alpha = ctx.attrs->getString("approximate", "none") == "tanh" ? 1.f : 0.f;
    if (op == "Elu") l.geo.alpha = floatAttr(ctx, "alpha", 1.f);
    if (op == "Selu") {
      l.geo.alpha = floatAttr(ctx, "alpha", 1.67326319217681884765625f);
      l.geo.beta = floatAttr(ctx, "gamma", 1.05070102214813232421875f);
    }
    if (op == "HardSigmoid") {
      l.geo.alpha = floatAttr(ctx, "alpha", 0.2f);
      l.geo.beta = floatAttr(ctx, "beta", 0.5f);
    }
    k->launches.push_back(l);
  } else if (op == "Where") {
    TANDEM_RETURN_IF_ERROR(k->init(ctx, op, dts, odt));
    TANDEM_RETURN_IF_ERROR(broadcastLaunch(ctx, oshape, shapes, {0, 1, 2}, &l));
    k->launches.push_back(l);
  } else if (dts.size() == 1) {  // variadic Min/Max/Sum of one input: a copy
    TANDEM_RETURN_IF_ERROR(k->init(ctx, "Identity", {dts[0]}, odt));
    TANDEM_RETURN_IF_ERROR(broadcastLaunch(ctx, oshape, {shapes[0]}, {present[0]}, &l));
    k->launches.push_back(l);
  } else {
    // Binary ops, and variadic ones as a chain: out = f(in0, in1), then out = f(out, in_k).
    TANDEM_RETURN_IF_ERROR(k->init(ctx, op, {dts[0], dts[1]}, odt));
    TANDEM_RETURN_IF_ERROR(broadcastLaunch(ctx, oshape, {shapes[0], shapes[1]}, {present[0], present[1]}, &l));
    if (op == "GeluGrad") l.geo.alpha = ctx.attrs->getString("approximate", "none") == "tanh" ? 1.f : 0.f;
    k->launches.push_back(l);
    for (size_t i = 2; i < dts.size(); ++i) {
      Launch more;
      TANDEM_RETURN_IF_ERROR(broadcastLaunch(ctx, oshape, {oshape, shapes[i]}, {-1, present[i]}, &more));
      more.geo.contiguous = 0;  // reading the output in place: same index, but keep one code path
      k->launches.push_back(more);
    }
  }
  *out = std::move(k);
  return Status::ok();
}

// The op table's kCudaExpr rows (unary and binary), and the ops only the standalone kernels take.
const std::vector<const char*>& elementwiseOps() {
  static const std::vector<const char*> ops = [] {
    std::vector<const char*> v;
    size_t n = 0;
    const OpInfo* rows = allOps(&n);
    for (size_t i = 0; i < n; ++i)
      if (rows[i].has(kCudaExpr)) v.push_back(rows[i].name);
    for (const char* op : {"Sum", "Pow", "PRelu", "GeluGrad", "Less", "Greater", "Equal", "Where", "Cast"})
      v.push_back(op);
    return v;
  }();
  return ops;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> elementwiseSources() {
  std::vector<std::pair<std::string, std::string>> r;
  const std::vector<DType> all = {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::I8, DType::Bool};
  auto add = [&](const std::string& op, std::vector<DType> in, DType out) {
    std::string n = kernelName(op, in, out);
    r.push_back({n, kernelSource(n, in, out, exprFor(op, in[0], out))});
  };
  for (auto& u : unaryExprs()) add(u.first, {DType::F32}, DType::F32);
  for (DType t : all) add("Identity", {t}, t);
  for (auto& b : binaryExprs()) {
    bool cmp = b.first == "Less" || b.first == "Greater" || b.first == "Equal";
    for (DType t : {DType::F32, DType::I32, DType::I64, DType::Bool}) {
      if (!cudaKernelAccepts(b.first, {t, t})) continue;
      add(b.first, {t, t}, cmp ? DType::Bool : t);
    }
  }
  for (DType t : all) add("Where", {DType::Bool, t, t}, t);
  for (DType from : all)
    for (DType to : all) add("Cast", {from}, to);
  return r;
}

void registerElementwiseKernels(KernelRegistry& r) {
  for (const char* op : elementwiseOps()) addCuda(r, op, "nvrtc", createElementwise);
}

}  // namespace cuda
}  // namespace tandem

// Differential tests of every op the CUDA kernel registry has against the CPU reference kernels
// (runtime/cpu/ref), ggml tests/test-backend-ops.cpp style: per op a generator of random cases
// (ranks 0-6, odd extents, broadcasting, zero-element tensors, special values), a tolerance with
// its reason, a seeded RNG; then launch grids past 65,535 blocks and one tensor of more than 2^31
// elements. The op list comes from the registry, so a newly registered CUDA op without a case
// fails CudaOpsTable.EveryRegisteredOpHasACase with its name. Needs a GPU (ctest label gpu); the
// CudaOpsTable tests (case table, CPU side, NVRTC compile of the cases) run without one.
#include "fused_attrs_util.h"
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "runtime/Backend.h"
#include "runtime/DataDependent.h"
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/CudaCommon.h"
#include "runtime/cuda/CudaKernelTable.h"
#include "gpu_test_util.h"

using namespace tandem;

namespace {

// ---- cases ----------------------------------------------------------------------------------

/// Accepted difference: |gpu - cpu| <= atol + rtol * |cpu|; NaN matches NaN, an infinity only
/// itself. {0, 0} is bit-exact up to the sign of zero.
struct Tol {
  double atol = 0, rtol = 0;
};

struct OpCase {
  std::string label;  // what this case varies, for messages
  std::string op;
  AttrMap attrs;
  std::vector<Tensor> inputs;   // an undefined Tensor is an absent optional input
  std::vector<bool> constant;   // inputs known at load (shape operands, Clip bounds)
  std::vector<TensorType> outputs;
  Tol tol;
  plan::FusedBody body;         // "Fused" cases: the group's members (fused_attrs_util.h)
};

/// Seeded generator of shapes and tensors. Extents favour the sizes that break kernels: 1
/// (broadcast), odd and prime sizes, one past a power of two.
class Gen {
 public:
  explicit Gen(uint64_t seed) : r_(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(r_); }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(r_); }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(r_); }
  template <typename T>
  T pick(const std::vector<T>& v) { return v[(size_t)uniform(0, (int64_t)v.size() - 1)]; }

  int64_t extent() { return pick<int64_t>({1, 1, 2, 3, 3, 4, 5, 7, 8, 16, 17, 31, 33, 64, 127, 1023}); }
  /// A shape of `rank` with at most `maxNumel` elements.
  Shape shape(int64_t rank, int64_t maxNumel = 1 << 14) {
    Shape s;
    for (int64_t d = 0; d < rank; ++d) s.push_back(extent());
    while (numElements(s) > maxNumel) {
      auto big = std::max_element(s.begin(), s.end());
      *big = pick<int64_t>({1, 2, 3, 5, 7});
    }
    return s;
  }
  /// A shape that broadcasts (ONNX multidirectional) to `out`: leading dims dropped, some 1s.
  Shape broadcastOf(const Shape& out) {
    size_t drop = (size_t)uniform(0, (int64_t)out.size());
    if (coin(0.5)) drop = 0;
    Shape s(out.begin() + drop, out.end());
    for (int64_t& d : s)
      if (coin(0.35)) d = 1;
    return s;
  }
  /// Uniform values in [lo, hi] (integers rounded; bool a fair coin).
  Tensor tensor(DType dt, const Shape& s, double lo = -2, double hi = 2) {
    Tensor t = Tensor::alloc(dt, s);
    const int64_t n = t.numel();
    dispatchDType(dt, [&](auto tag) {
      using T = decltype(tag);
      T* p = t.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<T, bool>) p[i] = coin();
        else if constexpr (std::is_floating_point_v<T>) p[i] = (T)real(lo, hi);
        else p[i] = (T)uniform((int64_t)std::ceil(lo), (int64_t)std::floor(hi));
      }
    });
    return t;
  }
  Tensor f32(const Shape& s, double lo = -2, double hi = 2) { return tensor(DType::F32, s, lo, hi); }

 private:
  std::mt19937_64 r_;
};

Tensor i64s(std::vector<int64_t> v) { return Tensor::fromVector<int64_t>({(int64_t)v.size()}, v); }
Tensor scalarF32(float v) { return Tensor::fromVector<float>({}, {v}); }
TensorType tt(DType d, Shape s) { return TensorType{d, std::move(s)}; }
TensorType f32t(Shape s) { return tt(DType::F32, std::move(s)); }

/// Overwrites a few elements of a float tensor with NaN, +-inf, +-0, huge and subnormal values.
void sprinkleSpecials(Gen& g, Tensor& t) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 0.f, -0.f, 1e30f, -1e30f, 1e-40f, -1e-40f, 100.f,
                            -100.f};
  if (t.dtype() != DType::F32 || t.numel() == 0) return;
  for (float v : specials) t.data<float>()[g.uniform(0, t.numel() - 1)] = v;
}

/// A broadcast binary shape pair and their output: the output of rank 0-6, each input a
/// broadcast of it (one side sometimes the full shape).
void broadcastPair(Gen& g, Shape* a, Shape* b, Shape* out) {
  *out = g.shape(g.uniform(0, 6));
  *a = g.coin(0.3) ? *out : g.broadcastOf(*out);
  *b = g.coin(0.3) ? *out : g.broadcastOf(*out);
  // The output is the broadcast of the inputs: where both lost a dim, so does the output.
  Shape o(std::max(a->size(), b->size()), 1);
  for (size_t i = 0; i < o.size(); ++i) {
    int64_t da = i + a->size() >= o.size() ? (*a)[i + a->size() - o.size()] : 1;
    int64_t db = i + b->size() >= o.size() ? (*b)[i + b->size() - o.size()] : 1;
    o[i] = da == 1 ? db : da;
  }
  *out = o;
}

std::string attrsText(const AttrMap& a) {
  std::ostringstream s;
  s << "{";
  bool first = true;
  for (auto& [name, v] : a.all()) {
    s << (first ? "" : ", ") << name << "=";
    first = false;
    switch (v.kind) {
      case Attr::Kind::Int: s << v.i; break;
      case Attr::Kind::Float: s << v.f; break;
      case Attr::Kind::String: s << "'" << v.s << "'"; break;
      case Attr::Kind::Ints: s << shapeToString(v.ints); break;
      case Attr::Kind::Floats: s << "[" << v.floats.size() << " floats]"; break;
      case Attr::Kind::Strings: {
        s << "[";
        for (size_t i = 0; i < v.strings.size(); ++i) s << (i ? "," : "") << v.strings[i];
        s << "]";
        break;
      }
      case Attr::Kind::Tensor: s << "<tensor>"; break;
    }
  }
  return s.str() + "}";
}

std::string describe(const OpCase& c) {
  std::ostringstream s;
  s << c.op << " [" << c.label << "] inputs:";
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].defined()) { s << " (absent)"; continue; }
    s << " " << dtypeName(c.inputs[i].dtype()) << shapeToString(c.inputs[i].shape());
    if (i < c.constant.size() && c.constant[i] && c.inputs[i].numel() <= 8 &&
        (c.inputs[i].dtype() == DType::I64 || c.inputs[i].dtype() == DType::I32)) {
      s << "=" << "[";
      for (int64_t k = 0; k < c.inputs[i].numel(); ++k)
        s << (k ? "," : "")
          << (c.inputs[i].dtype() == DType::I64 ? c.inputs[i].data<int64_t>()[k] : c.inputs[i].data<int32_t>()[k]);
      s << "]";
    }
  }
  s << " attrs: " << attrsText(c.attrs);
  if (c.op == "Fused") s << " body: {" << c.body.ShortDebugString() << "}";
  s << " tol: atol " << c.tol.atol << " rtol " << c.tol.rtol;
  return s.str();
}

// ---- the op table: a generator and a tolerance per op ------------------------------------------

using Generator = std::function<void(Gen&, const Tol&, std::vector<OpCase>*)>;

struct OpEntry {
  Tol tol;
  const char* why;  // why this tolerance
  Generator gen;
};

// Tolerances. CUDA's expf/logf/tanhf/erff/powf are within 1-4 ulp, glibc's within 1: a few ulp
// relative, plus an absolute term for results near zero after cancellation (Elu's exp(x) - 1,
// Gelu's x * (1 + erf)).
const Tol kExact{0, 0};
const Tol kTranscendental{2e-6, 4e-6};
const char* kWhyExact = "no rounding or one IEEE-rounded operation (+-*/, sqrt, compare, move) on both sides";
const char* kWhyTrans = "CUDA libm functions are within 1-4 ulp, glibc within 1; absolute term for cancellation";

// Float accumulation of `r` terms of magnitude <= m in another order (GPU: per-thread strided
// partial sums and a tree; CPU: sequential or double): the error of random data grows like
// sqrt(r); 4 * u * r * m bounds the worst case of any order to within a small factor.
Tol accumulation(int64_t r, double m, double rtol = 1e-6) {
  return Tol{4 * 6e-8 * (double)std::max<int64_t>(r, 1) * m + 1e-7, rtol};
}

// Unary f32 ops over [lo, hi], ranks 0-6, odd sizes, zero elements, and special values.
Generator unary(double lo, double hi, std::function<void(Gen&, AttrMap&)> attrs = nullptr, bool specials = true) {
  return [=](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
    std::vector<Shape> shapes = {{}, {1}, {3}, {17}, {1023}, {65537}, {0}, {2, 0, 3}};
    for (int64_t r = 0; r <= 6; ++r) shapes.push_back(g.shape(r));
    for (const Shape& s : shapes) {
      OpCase c{"shape " + shapeToString(s), "", {}, {g.f32(s, lo, hi)}, {}, {f32t(s)}, tol};
      if (attrs) attrs(g, c.attrs);
      out->push_back(std::move(c));
    }
    if (specials) {
      OpCase c{"NaN, inf, +-0, huge, subnormal", "", {}, {g.f32({64}, lo, hi)}, {}, {f32t({64})}, tol};
      sprinkleSpecials(g, c.inputs[0]);
      if (attrs) attrs(g, c.attrs);
      out->push_back(std::move(c));
    }
  };
}

// Binary (and variadic) ops on `dtypes` with broadcasting; `rhs` gives the second operand's range
// (Div's divisor away from 0; Pow's base positive). `outDType` is Bool for comparisons.
Generator binary(std::vector<DType> dtypes, double lo, double hi, double rlo, double rhi, bool comparison,
                 int maxInputs = 2, bool specials = true, bool excludeZeroRhs = false) {
  return [=](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
    for (DType dt : dtypes) {
      int count = dt == DType::F32 ? 10 : 5;
      for (int k = 0; k < count; ++k) {
        Shape a, b, o;
        broadcastPair(g, &a, &b, &o);
        if (k == 0) a = b = o = Shape{2, 0, 3};  // zero elements
        OpCase c{"broadcast " + shapeToString(a) + " , " + shapeToString(b), "", {}, {}, {}, {}, tol};
        c.inputs = {g.tensor(dt, a, lo, hi), g.tensor(dt, b, rlo, rhi)};
        if (excludeZeroRhs && isInteger(dt))
          for (int64_t i = 0; i < c.inputs[1].numel(); ++i)
            if (ref::elementAsDouble(c.inputs[1], i) == 0) dispatchDType(dt, [&](auto tag) {
                c.inputs[1].data<decltype(tag)>()[i] = 1;
              });
        // Variadic ops: up to `maxInputs` operands, each a broadcast of the output.
        for (int extra = (int)g.uniform(0, maxInputs - 2); extra > 0; --extra) {
          Shape e = g.broadcastOf(o);
          c.inputs.push_back(g.tensor(dt, e, rlo, rhi));
          c.label += " , " + shapeToString(e);
        }
        c.outputs = {tt(comparison ? DType::Bool : dt, o)};
        out->push_back(std::move(c));
      }
    }
    if (specials && std::find(dtypes.begin(), dtypes.end(), DType::F32) != dtypes.end()) {
      OpCase c{"NaN, inf, +-0, huge, subnormal", "", {}, {g.f32({8, 16}, lo, hi), g.f32({8, 16}, rlo, rhi)}, {},
               {tt(comparison ? DType::Bool : DType::F32, {8, 16})}, tol};
      sprinkleSpecials(g, c.inputs[0]);
      sprinkleSpecials(g, c.inputs[1]);
      out->push_back(std::move(c));
    }
  };
}

const std::vector<DType>& anyDTypes() {
  static const std::vector<DType> d = {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::I8, DType::Bool};
  return d;
}

// ONNX Slice output extent of one axis (Slice-13 clamping).
int64_t sliceCount(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return end > start ? (end - start + step - 1) / step : 0;
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  return start > end ? (start - end - step - 1) / -step : 0;
}

// Output extent of a convolution/pooling window; sets begin/end pads for auto_pad.
int64_t windowOut(int64_t in, int64_t k, int64_t s, int64_t d, const std::string& autoPad, int64_t* pb, int64_t* pe) {
  const int64_t ek = (k - 1) * d + 1;
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    int64_t o = (in + s - 1) / s;
    int64_t total = std::max<int64_t>(0, (o - 1) * s + ek - in);
    *pb = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
    *pe = total - *pb;
    return o;
  }
  if (autoPad == "VALID") *pb = *pe = 0;
  return (in + *pb + *pe - ek) / s + 1;
}

void reshapeFamily(Gen& g, const std::string& op, std::vector<OpCase>* out) {
  for (DType dt : anyDTypes()) {
    Shape s = g.shape(g.uniform(1, 5));
    Tensor x = g.tensor(dt, s, -50, 50);
    OpCase c{std::string(dtypeName(dt)) + " " + shapeToString(s), op, {}, {x}, {}, {}, kExact};
    if (op == "Identity" || op == "Dropout") {
      c.outputs = {tt(dt, s)};
    } else if (op == "Flatten") {
      int64_t axis = g.uniform(0, (int64_t)s.size());
      c.attrs.set("axis", Attr::ofInt(axis - (axis < (int64_t)s.size() && g.coin() ? (int64_t)s.size() : 0)));
      c.outputs = {tt(dt, {ref::product(s, 0, axis), ref::product(s, axis, s.size())})};
    } else if (op == "Reshape") {
      Shape to = {numElements(s)};
      if (g.coin()) to = {1, numElements(s), 1};
      c.inputs.push_back(i64s(to));
      c.constant = {false, true};
      c.outputs = {tt(dt, to)};
    } else if (op == "Squeeze") {
      Shape with = s;
      with.insert(with.begin() + g.uniform(0, (int64_t)s.size()), 1);
      c.inputs[0] = g.tensor(dt, with, -50, 50);
      std::vector<int64_t> axes;
      for (size_t d = 0; d < with.size(); ++d)
        if (with[d] == 1) { axes.push_back((int64_t)d); break; }
      Shape to = with;
      to.erase(to.begin() + axes[0]);
      c.inputs.push_back(i64s(axes));
      c.constant = {false, true};
      c.outputs = {tt(dt, to)};
    } else {  // Unsqueeze
      int64_t axis = g.uniform(0, (int64_t)s.size());
      Shape to = s;
      to.insert(to.begin() + axis, 1);
      c.inputs.push_back(i64s({axis}));
      c.constant = {false, true};
      c.outputs = {tt(dt, to)};
    }
    out->push_back(std::move(c));
  }
}

// Random Fused "elementwise" bodies: chains over full-size and scalar f32 inputs, Clip bounds
// constant, one to three outputs. Only Lipschitz-bounded ops and division by [0.5, 2], so
// rounding differences stay at a few ulp of the values.
void fusedElementwise(Gen& g, const Tol& tol, std::vector<OpCase>* out) {
  const std::vector<std::string> unaryOps = {"Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Erf", "LeakyRelu", "Elu",
                                             "Selu", "HardSigmoid", "Gelu", "Softplus", "Sin", "Cos", "Atan", "Asinh"};
  const std::vector<std::string> binaryOps = {"Add", "Sub", "Mul", "Max", "Min", "Div"};
  for (int k = 0; k < 12; ++k) {
    Shape s = k == 0 ? Shape{0, 5} : g.shape(g.uniform(0, 4));
    std::vector<Tensor> inputs = {g.f32(s)};
    if (k == 1 || k == 2) sprinkleSpecials(g, inputs[0]);  // NaN and inf through a chain
    std::vector<bool> constant = {false};
    std::vector<std::string> ops;
    std::vector<std::vector<int64_t>> refs;
    std::vector<std::tuple<int, std::string, Attr>> extra;  // member, attribute, value
    int nOps = (int)g.uniform(1, 8);
    for (int j = 0; j < nOps; ++j) {
      int64_t prev = j == 0 ? 0 : -2 - (j - 1);
      if (g.coin(0.4)) {
        std::string op = g.pick(binaryOps);
        int64_t in = (int64_t)inputs.size();
        bool scalar = g.coin(0.3);
        inputs.push_back(op == "Div" ? g.f32(scalar ? Shape{} : s, 0.5, 2) : g.f32(scalar ? Shape{1} : s));
        constant.push_back(false);
        ops.push_back(op);
        refs.push_back(g.coin() || op == "Div" || op == "Sub" ? std::vector<int64_t>{prev, in} : std::vector<int64_t>{in, prev});
      } else if (g.coin(0.15)) {
        int64_t lo = (int64_t)inputs.size();
        inputs.push_back(scalarF32((float)g.real(-1, 0)));
        inputs.push_back(scalarF32((float)g.real(0, 1)));
        constant.push_back(true);
        constant.push_back(true);
        ops.push_back("Clip");
        refs.push_back({prev, g.coin(0.8) ? lo : -1, lo + 1});
      } else {
        std::string op = g.pick(unaryOps);
        ops.push_back(op);
        refs.push_back({prev});
        if (op == "LeakyRelu" || op == "Elu") extra.push_back({j, "alpha", Attr::ofFloat((float)g.real(0.05, 1.5))});
        if (op == "Gelu" && g.coin()) extra.push_back({j, "approximate", Attr::ofString("tanh")});
        if (op == "HardSigmoid") extra.push_back({j, "beta", Attr::ofFloat((float)g.real(0.2, 0.8))});
      }
    }
    std::vector<int64_t> outputsFrom = {nOps - 1};
    if (nOps > 2 && g.coin()) outputsFrom.push_back(g.uniform(0, nOps - 2));
    FusedStep f = fusedStep("elementwise", ops, refs, outputsFrom);
    for (auto& [j, name, a] : extra) f.setMemberAttr(j, name, a);
    OpCase c{std::to_string(nOps) + " ops on " + shapeToString(s), "Fused", f.attrs, inputs, constant, {}, tol, f.body};
    for (size_t o = 0; o < outputsFrom.size(); ++o) c.outputs.push_back(f32t(s));
    std::string body;
    for (const std::string& op : ops) body += (body.empty() ? "" : ",") + op;
    c.label += ": " + body;
    out->push_back(std::move(c));
  }
}

void fusedGemmEpilogue(Gen& g, const Tol&, std::vector<OpCase>* out) {
  for (int k = 0; k < 10; ++k) {
    int64_t M = g.pick<int64_t>({1, 3, 17, 64, 129}), N = g.pick<int64_t>({1, 5, 16, 33, 128}),
            K = g.pick<int64_t>({1, 7, 16, 65, 256});
    bool matmul = g.coin();
    bool bias = g.coin(0.7), act = !bias || g.coin(0.7);
    std::string actOp = g.coin() ? "Relu" : "Gelu";
    std::vector<std::string> ops = {matmul ? "MatMul" : "Gemm"};
    std::vector<std::vector<int64_t>> refs = {{0, 1}};
    std::vector<std::tuple<int, std::string, Attr>> extra;  // member, attribute, value
    Shape as = {M, K}, bs = {K, N}, os = {M, N};
    if (matmul && g.coin()) as = {2, M, K}, os = {2, M, N};
    if (!matmul && g.coin()) { as = {K, M}; extra.push_back({0, "transA", Attr::ofInt(1)}); }
    if (!matmul && g.coin()) { bs = {N, K}; extra.push_back({0, "transB", Attr::ofInt(1)}); }
    std::vector<Tensor> inputs = {g.f32(as, -1, 1), g.f32(bs, -1, 1)};
    if (bias) {
      inputs.push_back(g.f32(g.coin() ? Shape{N} : Shape{1, N}));
      ops.push_back("Add");
      refs.push_back(g.coin() ? std::vector<int64_t>{-2, 2} : std::vector<int64_t>{2, -2});
    }
    if (act) {
      ops.push_back(actOp);
      refs.push_back({-2 - (int64_t)(ops.size() - 2)});
      if (actOp == "Gelu") extra.push_back({(int)ops.size() - 1, "approximate", Attr::ofString("tanh")});
    }
    // cuBLASLt's GELU epilogue evaluates the tanh approximation its own way: 1e-4 relative.
    Tol tol = accumulation(K, 1.0, 1e-5);
    if (act && actOp == "Gelu") tol = Tol{tol.atol + 1e-5, 1e-4};
    FusedStep f = fusedStep("gemm-epilogue", ops, refs, {(int64_t)ops.size() - 1});
    for (auto& [j, name, a] : extra) f.setMemberAttr(j, name, a);
    OpCase c{ops[0] + " " + shapeToString(as) + " x " + shapeToString(bs) + (bias ? " +bias" : "") + (act ? " +" + actOp : ""),
             "Fused", f.attrs, inputs, {false, true, true}, {f32t(os)}, tol, f.body};
    out->push_back(std::move(c));
  }
}

void fusedAddLayerNorm(Gen& g, const Tol&, std::vector<OpCase>* out) {
  for (int k = 0; k < 8; ++k) {
    Shape s = g.shape(g.uniform(1, 4));
    if (k == 0) s = {3, 1023};
    if (k == 1) s = {2, 1};
    int64_t axis = g.uniform(0, (int64_t)s.size() - 1);
    Shape norm(s.begin() + axis, s.end());
    bool b = g.coin(0.7), sum = g.coin();
    std::vector<Tensor> inputs = {g.f32(s), g.f32(s), g.f32(norm)};
    std::vector<int64_t> lnRefs = {-2, 2};
    if (b) { inputs.push_back(g.f32(norm)); lnRefs.push_back(3); }
    std::vector<int64_t> outs = {1};
    if (sum) outs.push_back(0);
    FusedStep f = fusedStep("add-layernorm", {"Add", "LayerNormalization"}, {{0, 1}, lnRefs}, outs);
    OpCase c{"add-layernorm " + shapeToString(s) + " axis " + std::to_string(axis), "Fused", f.attrs, inputs,
             {false, false, true, true}, {f32t(s)}, Tol{1e-4, 1e-4}, f.body};
    if (sum) c.outputs.push_back(f32t(s));
    setMemberAttr(&c.body, 1, "axis", Attr::ofInt(axis - (g.coin() ? (int64_t)s.size() : 0)));
    setMemberAttr(&c.body, 1, "epsilon", Attr::ofFloat(g.pick<float>({1e-5f, 1e-3f})));
    out->push_back(std::move(c));
  }
}

// MaxPoolGrad: X, dY and dX for a window of `ns` spatial dims. Integer-valued X in [lo, hi]
// makes ties within windows (the first maximum in tap order takes dY); begin/end pads differ
// (asymmetric), dilations and strides vary, windows overlap where stride < extent.
void maxPoolGradCases(Gen& g, const Tol& tol, std::vector<OpCase>* out) {
  struct Fixed {
    Shape xs;
    std::vector<int64_t> window, strides, dil, pads;
    int ceil;
    double lo, hi;  // integer-valued X when hi - lo is small: ties
  };
  const std::vector<Fixed> fixed = {
      {{2, 3, 9, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 0, 2},   // overlapping, ties, pads
      {{2, 3, 9, 10}, {3, 3}, {2, 2}, {1, 1}, {0, 1, 1, 0}, 0, 0, 0},   // every element equal
      {{1, 2, 8, 8}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0, 1},    // the Keras CNN's pool, ties
      {{2, 4, 7, 7}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 1, -2, 2},   // ceil_mode
      {{1, 3, 11, 9}, {3, 2}, {2, 1}, {2, 3}, {1, 0, 2, 1}, 0, -2, 2},  // dilated, asymmetric pads
      {{0, 3, 5, 5}, {2, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, -2, 2},   // empty batch
  };
  std::vector<Fixed> all = fixed;
  for (int k = 0; k < 10; ++k) {
    Fixed f;
    int64_t ns = g.uniform(1, 3);
    f.xs = {g.pick<int64_t>({1, 2}), g.pick<int64_t>({1, 3, 5})};
    for (int64_t d = 0; d < ns; ++d) {
      int64_t kk = g.pick<int64_t>({1, 2, 3}), dl = g.pick<int64_t>({1, 1, 2});
      f.window.push_back(kk), f.strides.push_back(g.pick<int64_t>({1, 2, 3})), f.dil.push_back(dl);
      f.xs.push_back(std::max<int64_t>(g.pick<int64_t>({3, 8, 17, 33}) / (ns == 3 ? 3 : 1), (kk - 1) * dl + 1));
    }
    for (int64_t d = 0; d < 2 * ns; ++d) f.pads.push_back(g.uniform(0, f.window[d % ns] - 1));
    f.ceil = 0;
    f.lo = -2, f.hi = g.coin() ? 2 : 2.5;  // integers (ties) or reals
    all.push_back(f);
  }
  for (const Fixed& f : all) {
    size_t ns = f.window.size();
    Shape ys = {f.xs[0], f.xs[1]};
    for (size_t d = 0; d < ns; ++d) {
      int64_t span = f.xs[2 + d] + f.pads[d] + f.pads[ns + d] - ((f.window[d] - 1) * f.dil[d] + 1);
      int64_t o = (f.ceil ? (span + f.strides[d] - 1) / f.strides[d] : span / f.strides[d]) + 1;
      // ceil_mode: a window must start inside the input or the begin padding.
      if (f.ceil && (o - 1) * f.strides[d] >= f.xs[2 + d] + f.pads[d]) --o;
      ys.push_back(o);
    }
    Tensor x = g.f32(f.xs, f.lo, f.hi);
    if (f.hi - f.lo <= 4)
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::round(x.data<float>()[i]);
    if (f.lo < 0 && f.hi == 2.5) sprinkleSpecials(g, x);
    OpCase c{shapeToString(f.xs) + " window " + shapeToString(f.window) + " strides " + shapeToString(f.strides) +
                 " dilations " + shapeToString(f.dil) + " pads " + shapeToString(f.pads) + (f.ceil ? " ceil" : ""),
             "MaxPoolGrad", {}, {x, g.f32(ys)}, {}, {f32t(f.xs)}, tol};
    c.attrs.set("kernel_shape", Attr::ofInts(f.window));
    c.attrs.set("strides", Attr::ofInts(f.strides));
    c.attrs.set("dilations", Attr::ofInts(f.dil));
    c.attrs.set("pads", Attr::ofInts(f.pads));
    if (f.ceil) c.attrs.set("ceil_mode", Attr::ofInt(1));
    out->push_back(std::move(c));
  }
}

// SoftmaxCrossEntropyLoss (grad = false) or its gradient: every reduction, i32 and i64 labels,
// with and without weights and ignore_index (-1, or a class: rows with it weigh 0), scores of
// rank 2-4, log_prob requested or not; a mean whose every label is ignored (0/0 = NaN).
void lossCases(Gen& g, const Tol& tol, bool grad, std::vector<OpCase>* out) {
  const std::vector<Shape> shapes = {{8, 10}, {1, 1}, {5, 1000}, {3, 4, 7}, {2, 5, 3, 4}, {0, 3}};
  int k = 0;
  for (const char* reduction : {"none", "sum", "mean"})
    for (const Shape& s : shapes) {
      ++k;
      const int64_t C = s[1];
      Shape ls = s;
      ls.erase(ls.begin() + 1);
      DType ldt = k % 2 ? DType::I64 : DType::I32;
      Tensor labels = g.tensor(ldt, ls, 0, (double)C - 1);
      const bool weighted = g.coin(), ignore = k % 3 != 0;
      const int64_t ignoreIndex = g.coin() ? -1 : g.uniform(0, C - 1);
      const bool allIgnored = std::string(reduction) == "mean" && s == Shape{3, 4, 7};
      for (int64_t i = 0; i < labels.numel(); ++i)
        if (ignore && (allIgnored || g.coin(0.25))) {
          if (ldt == DType::I64) labels.data<int64_t>()[i] = ignoreIndex;
          else labels.data<int32_t>()[i] = (int32_t)ignoreIndex;
        }
      Tensor weight = weighted ? g.f32({C}, 0.1, 2) : Tensor();
      const Shape lossShape = std::string(reduction) == "none" ? ls : Shape{};
      OpCase c{std::string(reduction) + " " + shapeToString(s) + " " + dtypeName(ldt) + (weighted ? " weighted" : "") +
                   (ignore ? " ignore_index " + std::to_string(ignoreIndex) : "") + (allIgnored ? " (all ignored)" : ""),
               grad ? "SoftmaxCrossEntropyLossGrad" : "SoftmaxCrossEntropyLoss", {}, {}, {}, {}, tol};
      if (grad) {
        c.inputs = {g.f32(lossShape, -2, 2), g.f32(s, -8, 0), labels};
        c.outputs = {f32t(s)};
      } else {
        c.inputs = {g.f32(s, -10, 10), labels};
        c.outputs = {f32t(lossShape)};
        if (g.coin()) c.outputs.push_back(f32t(s));
      }
      if (weighted) c.inputs.push_back(weight);
      c.attrs.set("reduction", Attr::ofString(reduction));
      if (ignore) c.attrs.set("ignore_index", Attr::ofInt(ignoreIndex));
      out->push_back(std::move(c));
    }
}

// GatherElements: any dtype, i32/i64 indices (negatives wrap), ranks 1-4, every axis; indices
// smaller than data off the axis and longer or shorter on it; an empty index tensor.
void gatherElementsCases(Gen& g, const Tol& tol, std::vector<OpCase>* out) {
  for (int k = 0; k < 14; ++k) {
    DType dt = g.pick(anyDTypes()), it = g.coin() ? DType::I64 : DType::I32;
    Shape s = g.shape(g.uniform(1, 4), 4096);
    const int64_t axis = g.uniform(0, (int64_t)s.size() - 1);
    if (s[axis] == 0) s[axis] = 3;
    Shape is = s;
    for (size_t d = 0; d < s.size(); ++d)
      is[d] = (int64_t)d == axis ? g.uniform(1, 2 * s[d] + 1) : g.uniform(std::min<int64_t>(s[d], 1), s[d]);
    if (k == 0) is[axis] = 0;
    Tensor idx = g.tensor(it, is, -s[axis], s[axis] - 1);
    OpCase c{std::string(dtypeName(dt)) + " " + shapeToString(s) + " axis " + std::to_string(axis) + " " +
                 dtypeName(it) + " indices " + shapeToString(is),
             "GatherElements", {}, {g.tensor(dt, s, -99, 99), idx}, {}, {tt(dt, is)}, tol};
    c.attrs.set("axis", Attr::ofInt(k % 3 == 0 ? axis - (int64_t)s.size() : axis));
    out->push_back(std::move(c));
  }
}

// CumSum: every dtype of the table, every axis (negative too, i32 or i64), the four
// exclusive/reverse combinations, long lines (sequential sums), many short ones, NaN/inf.
void cumSumCases(Gen& g, const Tol& tol, std::vector<OpCase>* out) {
  const std::vector<DType> dts = {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::I8};
  std::vector<Shape> shapes = {{3, 10007}, {4099, 3}, {0, 5}, {1}, {2, 3, 4, 5}};
  for (int k = 0; k < 8; ++k) shapes.push_back(g.shape(g.uniform(1, 5)));
  int n = 0;
  for (const Shape& s : shapes) {
    ++n;
    DType dt = n <= 2 ? DType::F32 : g.pick(dts);
    const int64_t r = (int64_t)s.size(), axis = s == Shape{4099, 3} ? 0 : s == Shape{3, 10007} ? 1 : g.uniform(0, r - 1);
    const int64_t given = g.coin() ? axis - r : axis;
    Tensor a = g.coin() ? Tensor::fromVector<int64_t>({}, {given}) : Tensor::fromVector<int32_t>({1}, {(int32_t)given});
    Tensor x = g.tensor(dt, s, -50, 50);
    if (n == 5) sprinkleSpecials(g, x);
    const int exclusive = n % 2, reverse = (n / 2) % 2;
    OpCase c{std::string(dtypeName(dt)) + " " + shapeToString(s) + " axis " + std::to_string(given) +
                 (exclusive ? " exclusive" : "") + (reverse ? " reverse" : ""),
             "CumSum", {}, {x, a}, {false, true}, {tt(dt, s)}, tol};
    c.attrs.set("exclusive", Attr::ofInt(exclusive));
    c.attrs.set("reverse", Attr::ofInt(reverse));
    out->push_back(std::move(c));
  }
}

// TopK: f32/f64/i32/i64, every axis (strided rows when it is not the last), K from 0 to the
// row or kCudaTopKMax, largest and smallest, sorted or not (the reference sorts anyway), many
// ties (small integer ranges: equal values by lower index), +-0, inf; Indices absent sometimes.
void topKCases(Gen& g, const Tol& tol, std::vector<OpCase>* out) {
  struct Fixed {
    Shape s;
    int64_t axis, k;
  };
  std::vector<Fixed> all = {{{2, 5000}, 1, 256}, {{7, 1}, 1, 1}, {{300, 4}, 0, 17}, {{3, 33, 5}, 1, 0}, {{0, 9}, 1, 4}};
  for (int i = 0; i < 10; ++i) {
    Shape s = g.shape(g.uniform(1, 4), 4096);
    int64_t axis = g.uniform(0, (int64_t)s.size() - 1);
    if (s[axis] == 0) s[axis] = 5;
    all.push_back({s, axis, g.uniform(0, std::min<int64_t>(s[axis], kCudaTopKMax))});
  }
  int n = 0;
  for (const Fixed& f : all) {
    ++n;
    DType dt = n <= 3 ? DType::F32 : g.pick<DType>({DType::F32, DType::F64, DType::I32, DType::I64});
    const bool ties = g.coin();
    Tensor x = g.tensor(dt, f.s, ties ? -3 : -1000, ties ? 3 : 1000);
    if (dt == DType::F32 && x.numel() > 0) {
      if (ties)
        for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::round(x.data<float>()[i]);
      const float sp[] = {0.f, -0.f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
      for (float v : sp) x.data<float>()[g.uniform(0, x.numel() - 1)] = v;
    }
    Shape ys = f.s;
    ys[f.axis] = f.k;
    const int largest = g.coin(), sorted = g.coin(0.8);
    OpCase c{std::string(dtypeName(dt)) + " " + shapeToString(f.s) + " axis " + std::to_string(f.axis) + " K " +
                 std::to_string(f.k) + (largest ? " largest" : " smallest") + (ties ? " ties" : ""),
             "TopK", {}, {x, i64s({f.k})}, {false, true}, {tt(dt, ys)}, tol};
    if (g.coin(0.8)) c.outputs.push_back(tt(DType::I64, ys));
    c.attrs.set("axis", Attr::ofInt(g.coin() ? f.axis - (int64_t)f.s.size() : f.axis));
    c.attrs.set("largest", Attr::ofInt(largest));
    c.attrs.set("sorted", Attr::ofInt(sorted));
    out->push_back(std::move(c));
  }
}

// Resize: nearest (every nearest_mode), linear and cubic (exclude_outside, cubic_coeff_a) under
// every coordinate transformation mode; up and down by scales or to sizes; NCHW images, 3-D and
// rank-2 tensors, several axes at once (two or more passes through the workspace);
// tf_crop_and_resize with an roi partly outside (extrapolation_value); f32 and f64.
void resizeCases(Gen& g, const Tol& tol, std::vector<OpCase>* out) {
  const std::vector<std::string> ctms = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                         "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  const std::vector<std::string> nearest = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int n = 0;
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const std::string& ctm : ctms) {
      if (ctm == "tf_half_pixel_for_nn" && std::string(mode) != "nearest") continue;
      ++n;
      const int layout = n % 3;  // 0: NCHW by H, W; 1: 3-D, every axis; 2: 2-D, one axis
      Shape xs = layout == 0 ? Shape{2, 3, g.pick<int64_t>({5, 8, 13}), g.pick<int64_t>({4, 7, 16})}
                 : layout == 1 ? Shape{g.pick<int64_t>({3, 6}), 5, 4} : Shape{6, g.pick<int64_t>({9, 20})};
      std::vector<float> scales(xs.size(), 1.f);
      Shape ys = xs;
      for (size_t d = 0; d < xs.size(); ++d) {
        if (layout == 0 && d < 2) continue;
        if (layout == 2 && d == 0) continue;
        scales[d] = g.pick<float>({0.5f, 0.75f, 1.5f, 2.f, 3.f});
        ys[d] = (int64_t)std::floor(xs[d] * (double)scales[d]);
      }
      const DType dt = n % 4 == 3 ? DType::F64 : DType::F32;
      Tensor x = g.tensor(dt, xs, -10, 10);
      OpCase c{std::string(mode) + " " + ctm + " " + dtypeName(dt) + " " + shapeToString(xs) + " -> " + shapeToString(ys),
               "Resize", {}, {}, {}, {tt(dt, ys)}, tol};
      Tensor roi;
      if (ctm == "tf_crop_and_resize") {
        std::vector<float> r(2 * xs.size());
        for (size_t d = 0; d < xs.size(); ++d) r[d] = (float)g.real(-0.2, 0.4), r[xs.size() + d] = (float)g.real(0.6, 1.2);
        roi = Tensor::fromVector<float>({(int64_t)r.size()}, r);
        c.attrs.set("extrapolation_value", Attr::ofFloat(-7.5f));
        c.label += " roi";
      }
      if (g.coin()) {
        c.inputs = {x, roi, Tensor::fromVector<float>({(int64_t)scales.size()}, scales)};
        c.constant = {false, true, true};
        c.label += " by scales";
      } else {
        c.inputs = {x, roi, Tensor(), i64s(ys)};
        c.constant = {false, true, false, true};
        c.label += " to sizes";
      }
      c.attrs.set("mode", Attr::ofString(mode));
      c.attrs.set("coordinate_transformation_mode", Attr::ofString(ctm));
      if (std::string(mode) == "nearest") c.attrs.set("nearest_mode", Attr::ofString(nearest[n % 4]));
      if (std::string(mode) == "cubic") {
        c.attrs.set("exclude_outside", Attr::ofInt(n % 2));
        if (n % 3 == 0) c.attrs.set("cubic_coeff_a", Attr::ofFloat(-0.5f));
      }
      out->push_back(std::move(c));
    }
  // Nothing changes: a copy.
  OpCase same{"identity [1,2,3,3]", "Resize", {}, {g.f32({1, 2, 3, 3}), Tensor(), Tensor(), i64s({1, 2, 3, 3})},
              {false, false, false, true}, {f32t({1, 2, 3, 3})}, tol};
  same.attrs.set("mode", Attr::ofString("linear"));
  out->push_back(std::move(same));
}


// NonMaxSuppression: the ONNX node tests' boxes (test_nonmaxsuppression_*: six boxes, flipped
// corners, center_point_box, two batches, two classes, identical boxes, limits 0 to 3, score
// threshold 0.4), then random crowded sets past one 64-bit mask word. The output is planned
// from the CPU selection, as the compiler does from constant operands.
void nmsCases(Gen& g, const Tol& tol, std::vector<OpCase>* out) {
  const std::vector<float> six = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f, 0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101};
  const std::vector<float> flipped = {1, 1, 0, 0, 0, 0.1f, 1, 1.1f, 0, 0.9f, 1, -0.1f, 0, 10, 1, 11, 1, 10.1f, 0, 11.1f, 1, 101, 0, 100};
  const std::vector<float> centers = {0.5f, 0.5f, 1, 1, 0.5f, 0.6f, 1, 1, 0.5f, 0.4f, 1, 1, 0.5f, 10.5f, 1, 1, 0.5f, 10.6f, 1, 1, 0.5f, 100.5f, 1, 1};
  const std::vector<float> sc = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f};
  struct Fixed {
    std::string label;
    std::vector<float> boxes;
    int64_t batches, classes, max;
    float iou, score;
    int center;
  };
  std::vector<Fixed> fixed = {{"suppress_by_IOU", six, 1, 1, 3, 0.5f, -1, 0},
                              {"flipped_coordinates", flipped, 1, 1, 3, 0.5f, -1, 0},
                              {"center_point_box_format", centers, 1, 1, 3, 0.5f, -1, 1},
                              {"suppress_by_IOU_and_scores", six, 1, 1, 3, 0.5f, 0.4f, 0},
                              {"limit_output_size", six, 1, 1, 2, 0.5f, -1, 0},
                              {"two_batches", six, 2, 1, 2, 0.5f, -1, 0},
                              {"two_classes", six, 1, 2, 2, 0.5f, -1, 0},
                              {"zero max", six, 1, 1, 0, 0.5f, -1, 0}};
  for (int k = 0; k < 4; ++k) {
    const int64_t n = g.pick<int64_t>({65, 200, 1000});
    Tensor b = g.f32({1, n, 4}, 0, 30);
    fixed.push_back({"random n " + std::to_string(n), std::vector<float>(b.data<float>(), b.data<float>() + b.numel()),
                     1, 3, g.pick<int64_t>({5, 50, 1000}), g.pick<float>({0.f, 0.3f, 0.7f}), k % 2 ? 0.2f : -1, k % 2});
    if (k % 2) {  // centre boxes: positive sizes
      for (int64_t i = 0; i < n; ++i) fixed.back().boxes[4 * i + 2] = (float)g.real(0.5, 8), fixed.back().boxes[4 * i + 3] = (float)g.real(0.5, 8);
    }
  }
  for (const Fixed& f : fixed) {
    const int64_t n = (int64_t)f.boxes.size() / 4;
    std::vector<float> boxes;
    for (int64_t b = 0; b < f.batches; ++b) boxes.insert(boxes.end(), f.boxes.begin(), f.boxes.end());
    Tensor bt = Tensor::fromVector<float>({f.batches, n, 4}, boxes);
    Tensor st = n == 6 ? Tensor::alloc(DType::F32, {f.batches, f.classes, n}) : g.f32({f.batches, f.classes, n}, 0, 1);
    if (n == 6)
      for (int64_t i = 0; i < st.numel(); ++i) st.data<float>()[i] = sc[i % 6];
    std::vector<int64_t> sel;
    if (!nonMaxSuppression(bt, st, f.max, f.iou, f.score >= 0, f.score, f.center != 0, &sel).isOk()) continue;
    OpCase c{f.label, "NonMaxSuppression", {}, {bt, st, i64s({f.max}), Tensor::fromVector<float>({1}, {f.iou})},
             {false, false, true, true}, {tt(DType::I64, {(int64_t)sel.size() / 3, 3})}, tol};
    if (f.score >= 0) {
      c.inputs.push_back(Tensor::fromVector<float>({1}, {f.score}));
      c.constant.push_back(true);
    }
    c.attrs.set("center_point_box", Attr::ofInt(f.center));
    out->push_back(std::move(c));
  }
}

// RNN, GRU (linear_before_reset=1, what cuDNN computes) and LSTM: the ONNX node tests' shapes
// (test_simple_rnn_defaults, test_rnn_seq_length, test_gru_defaults, test_gru_with_initial_bias,
// test_lstm_defaults, test_lstm_with_initial_bias: seq 1-2, batch 3, input 2-3, hidden 3-5),
// then forward, reverse and bidirectional at seq 7, batch 5, input 8, hidden 16 with B,
// initial_h (LSTM initial_c); RNN with relu. (The reference needs Y, so every case has it.) W, R, B constants, as in models.
void recurrentCases(const std::string& op, Gen& g, const Tol& tol, std::vector<OpCase>* out) {
  const int64_t G = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  struct Shape5 {
    int64_t seq, batch, input, hidden;
    std::string dir;
    bool bias, init, relu;
  };
  std::vector<Shape5> all = {{1, 3, 2, op == "GRU" ? 5 : op == "LSTM" ? 3 : 4, "forward", false, false, false},
                             {1, 3, 3, op == "GRU" ? 3 : op == "LSTM" ? 4 : 5, "forward", true, false, false},
                             {2, 3, 3, 5, "forward", true, false, false},
                             {7, 5, 8, 16, "forward", true, true, false},
                             {7, 5, 8, 16, "reverse", true, true, false},
                             {7, 5, 8, 16, "bidirectional", true, true, false},
                             {6, 2, 4, 9, "bidirectional", false, false, false},
                             {6, 2, 4, 9, "reverse", true, false, false}};
  if (op == "RNN") all.push_back({5, 4, 3, 6, "bidirectional", true, true, true});
  for (const Shape5& s : all) {
    const int64_t dirs = s.dir == "bidirectional" ? 2 : 1, H = s.hidden;
    const double r = 1.0 / std::sqrt((double)H);  // PyTorch's init range: gates stay off saturation
    OpCase c{s.dir + " seq " + std::to_string(s.seq) + " batch " + std::to_string(s.batch) + " input " +
                 std::to_string(s.input) + " hidden " + std::to_string(H) + (s.bias ? " B" : "") +
                 (s.init ? " initial" : "") + (s.relu ? " relu" : ""),
             op, {}, {g.f32({s.seq, s.batch, s.input}), g.f32({dirs, G * H, s.input}, -r, r), g.f32({dirs, G * H, H}, -r, r)},
             {false, true, true}, {}, tol};
    c.inputs.push_back(s.bias ? g.f32({dirs, 2 * G * H}, -r, r) : Tensor());
    c.constant.push_back(true);
    if (s.init) {
      c.inputs.push_back(Tensor());  // sequence_lens
      c.constant.push_back(false);
      c.inputs.push_back(g.f32({dirs, s.batch, H}, -1, 1));
      c.constant.push_back(false);
      if (op == "LSTM") {
        c.inputs.push_back(g.f32({dirs, s.batch, H}, -1, 1));
        c.constant.push_back(false);
      }
    }
    c.outputs.push_back(f32t({s.seq, dirs, s.batch, H}));
    c.outputs.push_back(f32t({dirs, s.batch, H}));
    if (op == "LSTM") c.outputs.push_back(f32t({dirs, s.batch, H}));
    c.attrs.set("hidden_size", Attr::ofInt(H));
    c.attrs.set("direction", Attr::ofString(s.dir));
    if (op == "GRU") c.attrs.set("linear_before_reset", Attr::ofInt(1));
    if (s.relu) c.attrs.set("activations", Attr::ofStrings({"Relu", "Relu"}));
    out->push_back(std::move(c));
  }
}

const std::map<std::string, OpEntry>& opTable() {
  static const std::map<std::string, OpEntry> t = [] {
    std::map<std::string, OpEntry> m;
    // -- unary math and activations (runtime/cuda/Elementwise.cpp)
    m["Relu"] = {kExact, kWhyExact, unary(-2, 2)};
    m["Abs"] = {kExact, kWhyExact, unary(-2, 2)};
    m["Neg"] = {kExact, kWhyExact, unary(-2, 2)};
    m["Sqrt"] = {kExact, "IEEE sqrt on both sides (NVRTC without fast math: -prec-sqrt=true)", unary(0, 100)};
    m["Reciprocal"] = {kExact, "one IEEE division (-prec-div=true)", unary(0.1, 10)};
    m["LeakyRelu"] = {kExact, "one multiplication", unary(-2, 2, [](Gen& g, AttrMap& a) {
                        if (g.coin()) a.set("alpha", Attr::ofFloat((float)g.real(0.01, 0.5)));
                      })};
    // Rounding ops (half-way points included by the range) and the sign are exact.
    for (const char* op : {"Ceil", "Floor", "Round", "Sign"}) m[op] = {kExact, kWhyExact, unary(-5, 5)};
    // A division or a multiply-add the two compilers may contract differently.
    m["Softsign"] = {kTranscendental, "one division; FMA contraction may differ", unary(-10, 10)};
    m["HardSwish"] = {kTranscendental, "x * clamp(x / 6 + 0.5); FMA contraction may differ", unary(-5, 5)};
    m["Sigmoid"] = {kTranscendental, kWhyTrans, unary(-12, 12)};
    m["Tanh"] = {kTranscendental, kWhyTrans, unary(-6, 6)};
    m["Exp"] = {kTranscendental, kWhyTrans, unary(-20, 20)};
    m["Log"] = {kTranscendental, kWhyTrans, unary(0.001, 1000)};
    m["Erf"] = {kTranscendental, kWhyTrans, unary(-4, 4)};
    m["Softplus"] = {kTranscendental, kWhyTrans, unary(-30, 30)};
    m["Mish"] = {kTranscendental, kWhyTrans, unary(-30, 30)};
    // The op table's trigonometric and hyperbolic ops (formulas in runtime/core/OpTable.def),
    // inside their domains (Tan away from its poles; Sinh and Cosh up to ~1.5e3).
    for (const char* op : {"Sin", "Cos", "Atan"}) m[op] = {kTranscendental, kWhyTrans, unary(-10, 10)};
    m["Tan"] = {kTranscendental, kWhyTrans, unary(-1.4, 1.4)};
    for (const char* op : {"Asin", "Acos"}) m[op] = {kTranscendental, kWhyTrans, unary(-1, 1)};
    for (const char* op : {"Sinh", "Cosh"}) m[op] = {kTranscendental, kWhyTrans, unary(-8, 8)};
    m["Asinh"] = {kTranscendental, kWhyTrans, unary(-100, 100)};
    m["Acosh"] = {kTranscendental, kWhyTrans, unary(1, 100)};
    m["Atanh"] = {kTranscendental, kWhyTrans, unary(-0.99, 0.99)};
    m["Elu"] = {kTranscendental, kWhyTrans, unary(-4, 4, [](Gen& g, AttrMap& a) {
                  if (g.coin()) a.set("alpha", Attr::ofFloat((float)g.real(0.1, 2)));
                })};
    m["Selu"] = {kTranscendental, kWhyTrans, unary(-4, 4, [](Gen& g, AttrMap& a) {
                   if (g.coin()) a.set("alpha", Attr::ofFloat((float)g.real(1, 2)));
                   if (g.coin()) a.set("gamma", Attr::ofFloat((float)g.real(1, 1.2)));
                 })};
    m["HardSigmoid"] = {Tol{1e-7, 2.4e-7}, "alpha * x + beta may be one FMA on the GPU, two roundings on the CPU",
                        unary(-6, 6, [](Gen& g, AttrMap& a) {
                          if (g.coin()) a.set("alpha", Attr::ofFloat((float)g.real(0.1, 0.5)));
                          if (g.coin()) a.set("beta", Attr::ofFloat((float)g.real(0.2, 0.8)));
                        })};
    m["Gelu"] = {kTranscendental, kWhyTrans, unary(-5, 5, [](Gen& g, AttrMap& a) {
                   if (g.coin()) a.set("approximate", Attr::ofString(g.coin() ? "tanh" : "none"));
                 })};
    m["GeluGrad"] = {kTranscendental, kWhyTrans, [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                       for (int k = 0; k < 8; ++k) {
                         Shape s = k == 0 ? Shape{0} : g.shape(g.uniform(0, 4));
                         OpCase c{"shape " + shapeToString(s), "GeluGrad", {}, {g.f32(s, -2, 2), g.f32(s, -5, 5)}, {},
                                  {f32t(s)}, tol};
                         if (k % 2) c.attrs.set("approximate", Attr::ofString("tanh"));
                         out->push_back(std::move(c));
                       }
                     }};
    m["Clip"] = {kExact, kWhyExact, [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                   for (int k = 0; k < 8; ++k) {
                     Shape s = k == 0 ? Shape{0} : g.shape(g.uniform(0, 5));
                     bool lo = g.coin(0.7), hi = k == 1 ? false : g.coin(0.7);
                     OpCase c{"shape " + shapeToString(s), "Clip", {}, {g.f32(s, -3, 3)}, {false, true, true}, {f32t(s)}, tol};
                     c.inputs.push_back(lo ? scalarF32((float)g.real(-2, 0)) : Tensor());
                     c.inputs.push_back(hi ? scalarF32((float)g.real(0, 2)) : Tensor());
                     if (k == 2) sprinkleSpecials(g, c.inputs[0]);
                     c.label += std::string(lo ? " min" : "") + (hi ? " max" : "");
                     out->push_back(std::move(c));
                   }
                 }};
    // -- binary, variadic, comparisons
    const std::vector<DType> arith = {DType::F32, DType::I32, DType::I64};
    for (const char* op : {"Add", "Sub", "Mul"}) m[op] = {kExact, kWhyExact, binary(arith, -50, 50, -50, 50, false)};
    m["Div"] = {kExact, "one IEEE division; integer division truncates on both (divisors never 0)",
                binary(arith, -50, 50, -9, 9, false, 2, true, true)};
    for (const char* op : {"Min", "Max", "Sum"})
      m[op] = {kExact, "compares, or additions in the same order (input 0 + input 1, + input 2, ...)",
               binary(arith, -50, 50, -50, 50, false, 4)};
    for (const char* op : {"Less", "Greater"}) m[op] = {kExact, kWhyExact, binary(arith, -3, 3, -3, 3, true)};
    m["Equal"] = {kExact, kWhyExact, binary({DType::F32, DType::I32, DType::I64, DType::Bool}, -3, 3, -3, 3, true)};
    m["Pow"] = {kTranscendental, kWhyTrans, binary({DType::F32}, 0.01, 4, -3, 3, false)};
    m["PRelu"] = {kExact, "one multiplication", [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                    for (int k = 0; k < 8; ++k) {
                      Shape s = g.shape(g.uniform(1, 5)), slope = g.broadcastOf(s);
                      out->push_back(OpCase{"x " + shapeToString(s) + " slope " + shapeToString(slope), "PRelu", {},
                                            {g.f32(s), g.f32(slope, 0, 1)}, {}, {f32t(s)}, tol});
                    }
                  }};
    m["Where"] = {kExact, kWhyExact, [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                    for (DType dt : anyDTypes())
                      for (int k = 0; k < 2; ++k) {
                        Shape a, b, o;
                        broadcastPair(g, &a, &b, &o);
                        Shape cs = g.broadcastOf(o);
                        out->push_back(OpCase{std::string(dtypeName(dt)) + " cond " + shapeToString(cs) + " x " +
                                                  shapeToString(a) + " y " + shapeToString(b),
                                              "Where", {}, {g.tensor(DType::Bool, cs), g.tensor(dt, a, -9, 9), g.tensor(dt, b, -9, 9)},
                                              {}, {}, tol});
                        // The output broadcasts all three.
                        Shape full = o;
                        if (cs.size() > full.size()) full.insert(full.begin(), cs.size() - full.size(), 1);
                        for (size_t i = 0; i < cs.size(); ++i)
                          if (cs[i] != 1) full[full.size() - cs.size() + i] = cs[i];
                        out->back().outputs = {tt(dt, full)};
                      }
                  }};
    m["Cast"] = {kExact, "conversions of in-range values (out-of-range float->int is undefined in C++ and CUDA)",
                 [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                   for (DType from : anyDTypes())
                     for (DType to : anyDTypes()) {
                       Shape s = g.shape(g.uniform(0, 4));
                       // Values every target holds: [0, 100] for u8, [-100, 100] otherwise.
                       double lo = to == DType::U8 && isFloat(from) ? 0 : -100;
                       OpCase c{std::string(dtypeName(from)) + "->" + dtypeName(to) + " " + shapeToString(s), "Cast", {},
                                {g.tensor(from, s, lo, 100)}, {}, {tt(to, s)}, tol};
                       c.attrs.set("to", Attr::ofInt((int)to));
                       out->push_back(std::move(c));
                     }
                 }};
    // -- data movement (Tensor.cpp, Indexing.cpp)
    for (const char* op : {"Identity", "Dropout", "Flatten", "Reshape", "Squeeze", "Unsqueeze"}) {
      std::string name = op;
      m[op] = {kExact, kWhyExact, [name](Gen& g, const Tol&, std::vector<OpCase>* out) { reshapeFamily(g, name, out); }};
    }
    m["Transpose"] = {kExact, kWhyExact, [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                        for (int64_t r = 0; r <= 6; ++r) {
                          DType dt = g.pick(anyDTypes());
                          Shape s = g.shape(r);
                          std::vector<int64_t> perm(r);
                          for (int64_t d = 0; d < r; ++d) perm[d] = d;
                          std::shuffle(perm.begin(), perm.end(), std::mt19937((unsigned)g.uniform(0, 1 << 30)));
                          Shape o(r);
                          for (int64_t d = 0; d < r; ++d) o[d] = s[perm[d]];
                          OpCase c{std::string(dtypeName(dt)) + " " + shapeToString(s) + " perm " + shapeToString(perm),
                                   "Transpose", {}, {g.tensor(dt, s, -99, 99)}, {}, {tt(dt, o)}, tol};
                          if (r > 0 || g.coin()) c.attrs.set("perm", Attr::ofInts(perm));
                          out->push_back(std::move(c));
                        }
                        Shape big = {1023, 65};  // odd sizes, no attribute: reversed dims
                        out->push_back(OpCase{"default perm " + shapeToString(big), "Transpose", {}, {g.f32(big)}, {},
                                              {f32t({65, 1023})}, tol});
                      }};
    m["Expand"] = {kExact, kWhyExact, [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                     for (int k = 0; k < 10; ++k) {
                       DType dt = g.pick(anyDTypes());
                       Shape o = k == 0 ? Shape{3, 0, 2} : g.shape(g.uniform(0, 6)), in = g.broadcastOf(o);
                       Shape target = o;
                       // The shape operand may itself have 1s where the input has the extent.
                       for (size_t d = 0; d < in.size(); ++d)
                         if (in[d] != 1 && g.coin(0.3)) target[o.size() - in.size() + d] = 1;
                       out->push_back(OpCase{std::string(dtypeName(dt)) + " " + shapeToString(in) + " to " + shapeToString(target),
                                             "Expand", {}, {g.tensor(dt, in, -99, 99), i64s(target)}, {false, true}, {tt(dt, o)}, tol});
                     }
                   }};
    m["Tile"] = {kExact, kWhyExact, [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                   for (int k = 0; k < 8; ++k) {
                     DType dt = g.pick(anyDTypes());
                     Shape s = g.shape(g.uniform(1, 5), 512);
                     std::vector<int64_t> reps;
                     Shape o;
                     for (int64_t d : s) {
                       reps.push_back(g.pick<int64_t>({1, 1, 2, 3}));
                       o.push_back(d * reps.back());
                     }
                     out->push_back(OpCase{std::string(dtypeName(dt)) + " " + shapeToString(s) + " x " + shapeToString(reps),
                                           "Tile", {}, {g.tensor(dt, s, -99, 99), i64s(reps)}, {false, true}, {tt(dt, o)}, tol});
                   }
                 }};
    m["Slice"] = {kExact, kWhyExact, [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                    const int64_t kBig = std::numeric_limits<int64_t>::max();
                    for (int k = 0; k < 12; ++k) {
                      DType dt = g.pick(anyDTypes());
                      Shape s = g.shape(g.uniform(1, 6));
                      std::vector<int64_t> starts, ends, axes, steps;
                      Shape o = s;
                      for (int64_t d = 0; d < (int64_t)s.size(); ++d) {
                        if (g.coin(0.4)) continue;
                        int64_t n = s[d];
                        int64_t step = g.pick<int64_t>({1, 1, 2, 3, -1, -2});
                        int64_t st = g.uniform(-n - 2, n + 2), en = g.coin(0.2) ? (step > 0 ? kBig : -kBig) : g.uniform(-n - 2, n + 2);
                        starts.push_back(st), ends.push_back(en), steps.push_back(step);
                        axes.push_back(g.coin() ? d : d - (int64_t)s.size());
                        o[d] = sliceCount(n, st, en, step);
                      }
                      if (axes.empty()) starts = {0}, ends = {kBig}, axes = {0}, steps = {1};
                      OpCase c{std::string(dtypeName(dt)) + " " + shapeToString(s), "Slice", {},
                               {g.tensor(dt, s, -99, 99), i64s(starts), i64s(ends), i64s(axes), i64s(steps)},
                               {false, true, true, true, true}, {tt(dt, o)}, tol};
                      out->push_back(std::move(c));
                    }
                  }};
    m["Concat"] = {kExact, kWhyExact, [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                     for (int k = 0; k < 10; ++k) {
                       DType dt = g.pick(anyDTypes());
                       Shape s = g.shape(g.uniform(1, 6), 4096);
                       int64_t axis = g.uniform(0, (int64_t)s.size() - 1);
                       OpCase c{std::string(dtypeName(dt)) + " axis " + std::to_string(axis) + " parts", "Concat", {}, {}, {}, {}, tol};
                       Shape o = s;
                       o[axis] = 0;
                       for (int p = (int)g.uniform(1, 4); p > 0; --p) {
                         Shape part = s;
                         part[axis] = g.pick<int64_t>({0, 1, 2, 5, 17});
                         o[axis] += part[axis];
                         c.inputs.push_back(g.tensor(dt, part, -99, 99));
                         c.label += " " + shapeToString(part);
                       }
                       c.attrs.set("axis", Attr::ofInt(axis - (g.coin() ? (int64_t)s.size() : 0)));
                       c.outputs = {tt(dt, o)};
                       out->push_back(std::move(c));
                     }
                   }};
    m["Split"] = {kExact, kWhyExact, [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                    for (int k = 0; k < 10; ++k) {
                      DType dt = g.pick(anyDTypes());
                      Shape s = g.shape(g.uniform(1, 6), 4096);
                      int64_t axis = g.uniform(0, (int64_t)s.size() - 1);
                      std::vector<int64_t> sizes;
                      for (int64_t left = s[axis]; left > 0;) {
                        sizes.push_back(std::min(left, g.pick<int64_t>({1, 2, 3, 7, 100})));
                        left -= sizes.back();
                      }
                      if (sizes.empty() || g.coin(0.2)) sizes.push_back(0);
                      OpCase c{std::string(dtypeName(dt)) + " " + shapeToString(s) + " axis " + std::to_string(axis) + " sizes " +
                                   shapeToString(sizes), "Split", {}, {g.tensor(dt, s, -99, 99), i64s(sizes)}, {false, true}, {}, tol};
                      for (int64_t n : sizes) {
                        Shape part = s;
                        part[axis] = n;
                        c.outputs.push_back(tt(dt, part));
                      }
                      c.attrs.set("axis", Attr::ofInt(axis));
                      out->push_back(std::move(c));
                    }
                  }};
    m["Pad"] = {kExact, kWhyExact, [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                  for (const char* mode : {"constant", "reflect", "edge", "wrap"})
                    for (int k = 0; k < 4; ++k) {
                      DType dt = g.pick(anyDTypes());
                      Shape s = g.shape(g.uniform(1, 5), 2048);
                      for (int64_t& d : s) d = std::max<int64_t>(d, 2);  // reflect needs two elements
                      std::vector<int64_t> pb, pe;
                      Shape o = s;
                      for (size_t d = 0; d < s.size(); ++d) {
                        // reflect pads up to dim-1, wrap up to dim; edge and constant any.
                        int64_t cap = std::string(mode) == "reflect" ? s[d] - 1 : std::string(mode) == "wrap" ? s[d] : 5;
                        pb.push_back(g.uniform(0, std::min<int64_t>(cap, 5)));
                        pe.push_back(g.uniform(0, std::min<int64_t>(cap, 5)));
                        o[d] += pb.back() + pe.back();
                      }
                      std::vector<int64_t> pads = pb;
                      pads.insert(pads.end(), pe.begin(), pe.end());
                      OpCase c{std::string(mode) + " " + dtypeName(dt) + " " + shapeToString(s) + " pads " + shapeToString(pads),
                               "Pad", {}, {g.tensor(dt, s, -99, 99), i64s(pads)}, {false, true, true}, {tt(dt, o)}, tol};
                      c.inputs.push_back(g.coin(0.7) ? g.tensor(dt, {}, -5, 5) : Tensor());
                      c.attrs.set("mode", Attr::ofString(mode));
                      out->push_back(std::move(c));
                    }
                }};
    m["Gather"] = {kExact, kWhyExact, [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                     for (int k = 0; k < 12; ++k) {
                       DType dt = g.pick(anyDTypes()), it = g.coin() ? DType::I64 : DType::I32;
                       Shape s = g.shape(g.uniform(1, 5), 4096);
                       int64_t axis = g.uniform(0, (int64_t)s.size() - 1);
                       Shape is = g.shape(g.uniform(0, 2), 64);
                       if (k == 0) is = {0};
                       Tensor idx = g.tensor(it, is, -s[axis], s[axis] - 1);  // negatives wrap
                       Shape o(s.begin(), s.begin() + axis);
                       o.insert(o.end(), is.begin(), is.end());
                       o.insert(o.end(), s.begin() + axis + 1, s.end());
                       OpCase c{std::string(dtypeName(dt)) + " " + shapeToString(s) + " axis " + std::to_string(axis) + " " +
                                    dtypeName(it) + " indices " + shapeToString(is),
                                "Gather", {}, {g.tensor(dt, s, -99, 99), idx}, {}, {tt(dt, o)}, tol};
                       c.attrs.set("axis", Attr::ofInt(axis));
                       out->push_back(std::move(c));
                     }
                   }};
    // -- reductions (Reduction.cpp)
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}) {
      std::string name = op;
      bool exact = name == "ReduceMax" || name == "ReduceMin";
      m[op] = {exact ? kExact : Tol{0, 1e-6},
               exact ? "max/min round nothing" : "float accumulation in another order: atol per case, 4 u r max|x| (accumulation())",
               [name, exact](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                 for (int k = 0; k < 12; ++k) {
                   Shape s = k == 0 ? Shape{65537} : k == 1 ? Shape{3, 0, 4} : k == 2 ? Shape{} : g.shape(g.uniform(1, 6));
                   std::vector<int64_t> axes;
                   for (int64_t d = 0; d < (int64_t)s.size(); ++d)
                     if (g.coin(0.4)) axes.push_back(g.coin() ? d : d - (int64_t)s.size());
                   bool keep = g.coin(0.6);
                   Shape o, red;
                   int64_t r = 1;
                   for (int64_t d = 0; d < (int64_t)s.size(); ++d) {
                     bool reduced = axes.empty() || std::count(axes.begin(), axes.end(), d) ||
                                    std::count(axes.begin(), axes.end(), d - (int64_t)s.size());
                     if (reduced) r *= s[d];
                     if (!reduced) o.push_back(s[d]);
                     else if (keep) o.push_back(1);
                   }
                   OpCase c{shapeToString(s) + " axes " + shapeToString(axes) + (keep ? " keepdims" : ""), name, {},
                            {g.f32(s)}, {}, {f32t(o)}, tol};
                   if (!exact) c.tol = accumulation(r, name == "ReduceMean" ? 2.0 / std::max<int64_t>(r, 1) : 2.0);
                   if (k == 3 && exact) sprinkleSpecials(g, c.inputs[0]);
                   c.attrs.set("keepdims", Attr::ofInt(keep));
                   if (!axes.empty()) {
                     if (name == "ReduceSum" || g.coin()) {
                       c.inputs.push_back(i64s(axes));
                       c.constant = {false, true};
                     } else {
                       c.attrs.set("axes", Attr::ofInts(axes));
                     }
                   }
                   out->push_back(std::move(c));
                 }
               }};
    }
    m["ArgMax"] = {kExact, "an index; ties (integer-valued inputs) and NaN follow numpy on both",
                   [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                     for (int k = 0; k < 10; ++k) {
                       Shape s = g.shape(g.uniform(1, 5));
                       int64_t axis = g.uniform(0, (int64_t)s.size() - 1);
                       bool keep = g.coin(), last = g.coin();
                       Tensor x = g.f32(s, 0, 3);
                       for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::floor(x.data<float>()[i]);  // ties
                       if (k < 2) sprinkleSpecials(g, x);
                       Shape o = s;
                       if (keep) o[axis] = 1;
                       else o.erase(o.begin() + axis);
                       OpCase c{shapeToString(s) + " axis " + std::to_string(axis), "ArgMax", {}, {x}, {}, {tt(DType::I64, o)}, tol};
                       c.attrs.set("axis", Attr::ofInt(axis - (g.coin() ? (int64_t)s.size() : 0)));
                       c.attrs.set("keepdims", Attr::ofInt(keep));
                       c.attrs.set("select_last_index", Attr::ofInt(last));
                       out->push_back(std::move(c));
                     }
                   }};
    // -- normalisations (Normalization.cpp)
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      std::string name = op;
      m[op] = {Tol{2e-6, 1e-5}, "expf within 2 ulp and a float sum of the row in another order",
               [name](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                 std::vector<Shape> shapes = {{1}, {1023}, {3, 1025}, {2, 0, 3}};  // rank >= 1 (ONNX)
                 for (int64_t r = 1; r <= 5; ++r) shapes.push_back(g.shape(r));
                 for (const Shape& s : shapes) {
                   int64_t axis = s.empty() ? 0 : g.uniform(0, (int64_t)s.size() - 1);
                   OpCase c{shapeToString(s) + " axis " + std::to_string(axis), name, {}, {g.f32(s, -10, 10)}, {}, {f32t(s)}, tol};
                   if (!s.empty() && (axis != (int64_t)s.size() - 1 || g.coin())) c.attrs.set("axis", Attr::ofInt(axis));
                   // log(sum) of up to n terms: LogSoftmax's absolute error grows with the row.
                   if (name == "LogSoftmax") c.tol.atol = 1e-5;
                   out->push_back(std::move(c));
                 }
               }};
    }
    m["LayerNormalization"] = {Tol{1e-4, 1e-4}, "float block sums of mean and variance vs the CPU's; 1/sqrt amplifies",
                               [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                                 std::vector<Shape> shapes = {{1023}, {3, 1}, {2, 3, 257}};
                                 for (int64_t r = 1; r <= 5; ++r) shapes.push_back(g.shape(r));
                                 for (const Shape& s : shapes) {
                                   int64_t axis = g.uniform(0, (int64_t)s.size() - 1);
                                   Shape norm(s.begin() + axis, s.end()), stat(s.begin(), s.begin() + axis);
                                   stat.resize(s.size(), 1);
                                   bool b = g.coin(0.7), stats = g.coin();
                                   OpCase c{shapeToString(s) + " axis " + std::to_string(axis), "LayerNormalization", {},
                                            {g.f32(s), g.f32(norm), b ? g.f32(norm) : Tensor()}, {false, true, true}, {f32t(s)}, tol};
                                   if (stats) c.outputs.push_back(f32t(stat)), c.outputs.push_back(f32t(stat));
                                   c.attrs.set("axis", Attr::ofInt(axis - (g.coin() ? (int64_t)s.size() : 0)));
                                   if (g.coin()) c.attrs.set("epsilon", Attr::ofFloat(1e-3f));
                                   out->push_back(std::move(c));
                                 }
                               }};
    m["LayerNormalizationGrad"] = {
        Tol{1e-3, 1e-3}, "float block and column sums (dScale, dB over every row) vs the CPU's double",
        [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
          std::vector<Shape> shapes = {{1023}, {3, 1}, {2, 3, 257}, {300, 40}};
          for (int64_t r = 1; r <= 4; ++r) shapes.push_back(g.shape(r));
          for (const Shape& s : shapes) {
            int64_t axis = g.uniform(0, (int64_t)s.size() - 1);
            Shape norm(s.begin() + axis, s.end());
            OpCase c{shapeToString(s) + " axis " + std::to_string(axis), "LayerNormalizationGrad", {},
                     {g.f32(s), g.f32(s), g.f32(norm)}, {}, {f32t(s), f32t(norm), f32t(norm)}, tol};
            c.attrs.set("axis", Attr::ofInt(axis - (g.coin() ? (int64_t)s.size() : 0)));
            if (g.coin()) c.attrs.set("epsilon", Attr::ofFloat(1e-3f));
            out->push_back(std::move(c));
          }
        }};
    m["RMSNormalization"] = {Tol{1e-4, 1e-4}, "a float block sum of squares vs the CPU's double; 1/sqrt amplifies",
                             [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                               std::vector<Shape> shapes = {{1023}, {3, 1}, {2, 3, 257}};
                               for (int64_t r = 1; r <= 4; ++r) shapes.push_back(g.shape(r));
                               for (const Shape& s : shapes) {
                                 int64_t axis = g.uniform(0, (int64_t)s.size() - 1);
                                 Shape norm(s.begin() + axis, s.end());
                                 OpCase c{shapeToString(s) + " axis " + std::to_string(axis), "RMSNormalization", {},
                                          {g.f32(s), g.f32(norm)}, {false, true}, {f32t(s)}, tol};
                                 c.attrs.set("axis", Attr::ofInt(axis - (g.coin() ? (int64_t)s.size() : 0)));
                                 if (g.coin()) c.attrs.set("epsilon", Attr::ofFloat(1e-3f));
                                 out->push_back(std::move(c));
                               }
                             }};
    for (std::string name : {"GroupNormalization", "InstanceNormalization"}) {
      m[name] = {Tol{1e-4, 1e-4}, "float block sums of mean and squared deviations vs the CPU's double; 1/sqrt amplifies",
                 [name](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                   for (int k = 0; k < 8; ++k) {
                     const int64_t G = g.pick<int64_t>({1, 2, 3, 4}), C = G * g.uniform(1, 5);
                     Shape s = {g.uniform(1, 3), name == "InstanceNormalization" ? g.uniform(1, 9) : C};
                     // InstanceNormalization needs a spatial dim; GroupNormalization takes [N, C] too.
                     for (int64_t d = 0, r = g.uniform(name == "InstanceNormalization" ? 1 : 0, 2); d < r; ++d)
                       s.push_back(g.extent());
                     for (size_t d = 2; d < s.size(); ++d)
                       if (numElements(s) > (1 << 14)) s[d] = 3;
                     OpCase c{shapeToString(s) + (name == "GroupNormalization" ? " groups " + std::to_string(G) : ""),
                              name, {}, {g.f32(s), g.f32({s[1]}), g.f32({s[1]})}, {false, true, true}, {f32t(s)}, tol};
                     if (name == "GroupNormalization") c.attrs.set("num_groups", Attr::ofInt(G));
                     if (g.coin()) c.attrs.set("epsilon", Attr::ofFloat(1e-3f));
                     out->push_back(std::move(c));
                   }
                 }};
    }
    m["RotaryEmbedding"] = {kExact, "two products and a sum per element, each rounded once (__fmul_rn, __fsub_rn)",
                            [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                              for (int k = 0; k < 8; ++k) {
                                const bool four = k % 2, interleaved = (k / 2) % 2, positions = k / 4;
                                const int64_t B = g.uniform(1, 2), S = g.uniform(1, 33), H = g.uniform(1, 5);
                                const int64_t head = 2 * g.uniform(1, 40), rot = g.coin() ? head : 2 * g.uniform(1, head / 2);
                                const int64_t maxPos = S + g.uniform(0, 7);
                                const Shape xs = four ? Shape{B, H, S, head} : Shape{B, S, H * head};
                                const Shape cs = positions ? Shape{maxPos, rot / 2} : Shape{B, S, rot / 2};
                                OpCase c{shapeToString(xs) + (interleaved ? " interleaved" : "") +
                                             (positions ? " position_ids" : ""),
                                         "RotaryEmbedding", {}, {g.f32(xs), g.f32(cs, -1, 1), g.f32(cs, -1, 1)}, {},
                                         {f32t(xs)}, tol};
                                if (positions) c.inputs.push_back(g.tensor(DType::I64, {B, S}, 0, (double)maxPos - 1));
                                c.attrs.set("interleaved", Attr::ofInt(interleaved));
                                if (rot != head) c.attrs.set("rotary_embedding_dim", Attr::ofInt(rot));
                                if (!four) c.attrs.set("num_heads", Attr::ofInt(H));
                                out->push_back(std::move(c));
                              }
                            }};
    m["BatchNormalization"] = {Tol{1e-5, 1e-5}, "(x - mean) / sqrt(var + eps) * scale + bias, cuDNN's order of operations",
                               [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                                 for (int64_t r = 2; r <= 5; ++r)
                                   for (float eps : {1e-5f, 1e-3f, 0.f}) {
                                     Shape s = g.shape(r);
                                     s[1] = g.pick<int64_t>({1, 3, 17});
                                     Shape c1 = {s[1]};
                                     OpCase c{shapeToString(s) + " epsilon " + std::to_string(eps), "BatchNormalization", {},
                                              {g.f32(s), g.f32(c1), g.f32(c1), g.f32(c1), g.f32(c1, 0.5, 2)},
                                              {false, true, true, true, true}, {f32t(s)}, tol};
                                     c.attrs.set("epsilon", Attr::ofFloat(eps));
                                     out->push_back(std::move(c));
                                   }
                               }};
    // -- products (Math.cpp: cuBLASLt FP32, no TF32)
    m["Gemm"] = {Tol{0, 1e-5}, "K products summed in another order: atol per case, accumulation(K)",
                 [](Gen& g, const Tol&, std::vector<OpCase>* out) {
                   for (int k = 0; k < 12; ++k) {
                     int64_t M = g.pick<int64_t>({1, 2, 17, 64, 129}), N = g.pick<int64_t>({1, 3, 33, 128}),
                             K = g.pick<int64_t>({1, 5, 64, 1023});
                     bool ta = g.coin(), tb = g.coin();
                     Shape as = ta ? Shape{K, M} : Shape{M, K}, bs = tb ? Shape{N, K} : Shape{K, N};
                     float alpha = g.coin() ? 1.f : (float)g.real(-2, 2), beta = g.coin() ? 1.f : (float)g.real(-2, 2);
                     std::vector<Shape> cShapes = {{N}, {1, N}, {M, 1}, {M, N}, {}, {1}};
                     int cKind = (int)g.uniform(-1, (int64_t)cShapes.size() - 1);
                     OpCase c{"M" + std::to_string(M) + " N" + std::to_string(N) + " K" + std::to_string(K), "Gemm", {},
                              {g.f32(as, -1, 1), g.f32(bs, -1, 1)}, {false, true, true}, {f32t({M, N})},
                              accumulation(K, 2.0 * std::fabs(alpha), 1e-5)};
                     if (cKind >= 0) {
                       c.inputs.push_back(g.f32(cShapes[cKind]));
                       c.label += " C" + shapeToString(cShapes[cKind]);
                     }
                     c.attrs.set("transA", Attr::ofInt(ta));
                     c.attrs.set("transB", Attr::ofInt(tb));
                     c.attrs.set("alpha", Attr::ofFloat(alpha));
                     c.attrs.set("beta", Attr::ofFloat(beta));
                     out->push_back(std::move(c));
                   }
                 }};
    m["MatMul"] = {Tol{0, 1e-5}, "K products summed in another order: atol per case, accumulation(K)",
                   [](Gen& g, const Tol&, std::vector<OpCase>* out) {
                     for (int k = 0; k < 14; ++k) {
                       int64_t M = g.pick<int64_t>({1, 3, 17, 64}), N = g.pick<int64_t>({1, 5, 33}), K = g.pick<int64_t>({1, 7, 64, 257});
                       Shape batch = g.shape(g.uniform(0, 3), 24);
                       Shape ab = g.coin(0.3) ? batch : g.broadcastOf(batch), bb = g.coin(0.3) ? batch : g.broadcastOf(batch);
                       Shape as = ab, bs = bb;
                       as.push_back(M), as.push_back(K);
                       bs.push_back(K), bs.push_back(N);
                       if (k == 0) as = {K};  // 1-D operands: promoted, then the dim dropped
                       if (k == 1) bs = {K};
                       // Output batch: the broadcast of both batches.
                       Shape ob(std::max(ab.size(), bb.size()), 1);
                       for (size_t i = 0; i < ob.size(); ++i) {
                         int64_t x = i + ab.size() >= ob.size() ? ab[i + ab.size() - ob.size()] : 1;
                         int64_t y = i + bb.size() >= ob.size() ? bb[i + bb.size() - ob.size()] : 1;
                         ob[i] = x == 1 ? y : x;
                       }
                       Shape os = ob;
                       if (k == 0) os = bb, os.push_back(N);
                       else if (k == 1) os = ab, os.push_back(M);
                       else os.push_back(M), os.push_back(N);
                       out->push_back(OpCase{shapeToString(as) + " x " + shapeToString(bs), "MatMul", {},
                                             {g.f32(as, -1, 1), g.f32(bs, -1, 1)}, {}, {f32t(os)}, accumulation(K, 1.0, 1e-5)});
                     }
                   }};
    // -- convolution and pooling (Conv.cpp, Pool.cpp: cuDNN)
    for (const char* op : {"Conv", "ConvTranspose"}) {
      std::string name = op;
      m[op] = {Tol{0, 1e-5}, "Cin/group * kernel products summed in another order: atol per case",
               [name](Gen& g, const Tol&, std::vector<OpCase>* out) {
                 bool tr = name == "ConvTranspose";
                 for (int k = 0; k < 12; ++k) {
                   int64_t ns = g.uniform(1, 3);
                   int64_t group = g.pick<int64_t>({1, 1, 2, 3});
                   int64_t cin = group * g.pick<int64_t>({1, 2, 3}), cout = group * g.pick<int64_t>({1, 2, 4});
                   Shape xs = {g.pick<int64_t>({1, 2}), cin}, ws, ys;
                   ws = tr ? Shape{cin, cout / group} : Shape{cout, cin / group};
                   std::vector<int64_t> strides, dil, pb, pe, outPad;
                   std::string autoPad = tr ? "NOTSET" : g.pick<std::string>({"NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"});
                   ys = {xs[0], cout};
                   int64_t red = cin / group;
                   for (int64_t d = 0; d < ns; ++d) {
                     int64_t kk = g.pick<int64_t>({1, 2, 3, 5}), s = g.pick<int64_t>({1, 1, 2, 3}), dl = g.pick<int64_t>({1, 1, 2});
                     int64_t in = g.pick<int64_t>({1, 5, 8, 17, 31});
                     if (ns == 3) in = std::min<int64_t>(in, 8);
                     int64_t b = g.uniform(0, kk - 1), e = tr ? b : (g.coin(0.7) ? b : g.uniform(0, kk - 1));
                     ws.push_back(kk);
                     red *= kk;
                     int64_t o;
                     if (tr) {
                       int64_t op = g.uniform(0, s - 1);
                       o = s * (in - 1) + op + (kk - 1) * dl + 1 - b - e;
                       if (o < 1) { b = e = 0; o = s * (in - 1) + op + (kk - 1) * dl + 1; }
                       outPad.push_back(op);
                     } else {
                       if (autoPad == "VALID") b = e = 0;
                       if (in + b + e < (kk - 1) * dl + 1) in = (kk - 1) * dl + 1;
                       o = windowOut(in, kk, s, dl, autoPad, &b, &e);
                     }
                     xs.push_back(in), ys.push_back(o);
                     strides.push_back(s), dil.push_back(dl), pb.push_back(b), pe.push_back(e);
                   }
                   std::vector<int64_t> pads = pb;
                   pads.insert(pads.end(), pe.begin(), pe.end());
                   bool bias = g.coin(0.6);
                   OpCase c{shapeToString(xs) + " w " + shapeToString(ws) + " -> " + shapeToString(ys), name, {},
                            {g.f32(xs, -1, 1), g.f32(ws, -1, 1)}, {false, true, true}, {f32t(ys)},
                            accumulation(red * (tr ? 2 : 1), 1.0, 1e-5)};
                   if (bias) c.inputs.push_back(g.f32({cout}));
                   c.attrs.set("strides", Attr::ofInts(strides));
                   c.attrs.set("dilations", Attr::ofInts(dil));
                   c.attrs.set("group", Attr::ofInt(group));
                   if (autoPad == "NOTSET") c.attrs.set("pads", Attr::ofInts(pads));
                   else c.attrs.set("auto_pad", Attr::ofString(autoPad));
                   if (tr) c.attrs.set("output_padding", Attr::ofInts(outPad));
                   out->push_back(std::move(c));
                 }
               }};
    }
    // ConvWeightGrad (autodiff; cuDNN's backward filter): X and dY of a Conv with explicit,
    // possibly asymmetric pads (X zero-padded first, as the Conv's kernel does).
    m["ConvWeightGrad"] = {Tol{0, 1e-5}, "N * output products per weight summed in another order: atol per case",
                           [](Gen& g, const Tol&, std::vector<OpCase>* out) {
                             for (int k = 0; k < 12; ++k) {
                               int64_t ns = g.uniform(1, 3);
                               int64_t group = g.pick<int64_t>({1, 1, 2, 3});
                               int64_t cin = group * g.pick<int64_t>({1, 2, 3}), cout = group * g.pick<int64_t>({1, 2, 4});
                               Shape xs = {g.pick<int64_t>({1, 2, 4}), cin}, ys = {xs[0], cout};
                               Shape ws = {cout, cin / group};
                               std::vector<int64_t> kernel, strides, dil, pb, pe;
                               int64_t red = xs[0];
                               for (int64_t d = 0; d < ns; ++d) {
                                 int64_t kk = g.pick<int64_t>({1, 2, 3, 5}), st = g.pick<int64_t>({1, 1, 2, 3}),
                                         dl = g.pick<int64_t>({1, 1, 2});
                                 int64_t in = g.pick<int64_t>({5, 8, 17, 31});
                                 if (ns == 3) in = std::min<int64_t>(in, 8);
                                 int64_t b = g.uniform(0, kk - 1), e = g.coin(0.7) ? b : g.uniform(0, kk - 1);
                                 if (in + b + e < (kk - 1) * dl + 1) in = (kk - 1) * dl + 1;
                                 const int64_t o = (in + b + e - ((kk - 1) * dl + 1)) / st + 1;
                                 xs.push_back(in), ys.push_back(o), ws.push_back(kk), red *= o;
                                 kernel.push_back(kk), strides.push_back(st), dil.push_back(dl), pb.push_back(b), pe.push_back(e);
                               }
                               std::vector<int64_t> pads = pb;
                               pads.insert(pads.end(), pe.begin(), pe.end());
                               OpCase c{shapeToString(xs) + ", dY " + shapeToString(ys) + " -> " + shapeToString(ws),
                                        "ConvWeightGrad", {}, {g.f32(xs, -1, 1), g.f32(ys, -1, 1)}, {}, {f32t(ws)},
                                        accumulation(red, 1.0, 1e-5)};
                               c.attrs.set("kernel_shape", Attr::ofInts(kernel));
                               c.attrs.set("strides", Attr::ofInts(strides));
                               c.attrs.set("dilations", Attr::ofInts(dil));
                               c.attrs.set("pads", Attr::ofInts(pads));
                               c.attrs.set("group", Attr::ofInt(group));
                               out->push_back(std::move(c));
                             }
                           }};
    for (const char* op : {"MaxPool", "AveragePool"}) {
      std::string name = op;
      bool isMax = name == "MaxPool";
      m[op] = {isMax ? kExact : Tol{4e-6, 1e-6},
               isMax ? "max rounds nothing" : "a sum of up to 27 values |x| <= 2 in another order (2 u 27), one division",
               [name, isMax](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                 for (int k = 0; k < 10; ++k) {
                   int64_t ns = g.uniform(1, 3);
                   Shape xs = {k == 0 ? 0 : g.pick<int64_t>({1, 2}), g.pick<int64_t>({1, 3, 5})}, ys = xs;  // k 0: empty
                   std::vector<int64_t> window, strides, pads;
                   for (int64_t d = 0; d < ns; ++d) {
                     int64_t kk = g.pick<int64_t>({1, 2, 3}), s = g.pick<int64_t>({1, 2}), p = g.uniform(0, kk - 1);
                     int64_t in = std::max<int64_t>(g.pick<int64_t>({3, 8, 17, 33}), kk);
                     if (ns == 3) in = std::min<int64_t>(in, 8);
                     window.push_back(kk), strides.push_back(s), pads.push_back(p);
                     xs.push_back(in), ys.push_back((in + 2 * p - kk) / s + 1);
                   }
                   std::vector<int64_t> all = pads;
                   all.insert(all.end(), pads.begin(), pads.end());  // cuDNN pads symmetrically
                   OpCase c{shapeToString(xs) + " window " + shapeToString(window), name, {}, {g.f32(xs)}, {}, {f32t(ys)}, tol};
                   c.attrs.set("kernel_shape", Attr::ofInts(window));
                   c.attrs.set("strides", Attr::ofInts(strides));
                   c.attrs.set("pads", Attr::ofInts(all));
                   if (!isMax) c.attrs.set("count_include_pad", Attr::ofInt(g.coin()));
                   out->push_back(std::move(c));
                 }
               }};
    }
    m["MaxPoolGrad"] = {kExact, "the reference's additions of dY in its order, and the same element per window",
                        maxPoolGradCases};
    m["SoftmaxCrossEntropyLoss"] = {Tol{1e-6, 1e-6}, "f64 on both sides (CUDA's exp/log within 1 ulp of glibc's, "
                                    "sums in another order), rounded to f32 once",
                                    [](Gen& g, const Tol& tol, std::vector<OpCase>* out) { lossCases(g, tol, false, out); }};
    m["SoftmaxCrossEntropyLossGrad"] = {Tol{1e-6, 1e-6}, "f64 on both sides (CUDA's exp within 1 ulp of glibc's), "
                                        "rounded to f32 once",
                                        [](Gen& g, const Tol& tol, std::vector<OpCase>* out) { lossCases(g, tol, true, out); }};
    m["GatherElements"] = {kExact, kWhyExact, gatherElementsCases};
    m["CumSum"] = {kExact, "the reference's sequential additions along each line, one thread per line", cumSumCases};
    m["TopK"] = {kExact, "selection moves values; the reference's order (ties by lower index)", topKCases};
    m["Resize"] = {kExact, "the reference's tap tables, products and sums in its order, each rounded (no FMA)",
                   resizeCases};
    m["NonMaxSuppression"] = {kExact, "the reference's IoU arithmetic, each operation rounded (no FMA), and its walk",
                              nmsCases};
    for (const char* op : {"RNN", "GRU", "LSTM"}) {
      std::string name = op;
      m[op] = {Tol{2e-5, 1e-4}, "cuDNN's f32 products (FMA math, no TF32) and its sigmoid/tanh against f64 "
                                "accumulation rounded once, compounded over up to 7 steps",
               [name](Gen& g, const Tol& tol, std::vector<OpCase>* out) { recurrentCases(name, g, tol, out); }};
    }
    for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
      std::string name = op;
      bool isMax = name == "GlobalMaxPool";
      m[op] = {isMax ? kExact : Tol{0, 1e-6}, isMax ? "max rounds nothing" : "a float sum of the spatial extent: atol per case",
               [name, isMax](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                 for (int64_t r = 3; r <= 5; ++r)
                   for (int k = 0; k < 3; ++k) {
                     Shape s = g.shape(r);
                     Shape o = s;
                     for (size_t d = 2; d < o.size(); ++d) o[d] = 1;
                     int64_t sp = ref::product(s, 2, s.size());
                     out->push_back(OpCase{shapeToString(s), name, {}, {g.f32(s)}, {}, {f32t(o)},
                                           isMax ? tol : accumulation(sp, 2.0 / std::max<int64_t>(sp, 1))});
                   }
               }};
    }
    // -- fusion groups the fuse pass forms on CUDA (runtime/cuda/Fused.cpp); conv-epilogue and
    //    softmax groups are not formed on CUDA and have no CUDA kernel.
    m["Fused"] = {Tol{5e-5, 2e-5},
                  "elementwise: up to 8 ops of a few ulp each (FMA contraction across ops, libm) with gains <= 2; "
                  "gemm-epilogue and add-layernorm set theirs per case",
                  [](Gen& g, const Tol& tol, std::vector<OpCase>* out) {
                    fusedElementwise(g, tol, out);
                    fusedGemmEpilogue(g, tol, out);
                    fusedAddLayerNorm(g, tol, out);
                  }};
    return m;
  }();
  return t;
}

uint64_t baseSeed() {
  const char* s = std::getenv("TANDEM_OPS_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 20250611ull;
}

// Seed of one op's cases: the base seed and the op name, so adding an op changes no other op's cases.
uint64_t seedFor(const std::string& op) {
  uint64_t h = baseSeed() ^ 1469598103934665603ull;
  for (unsigned char c : op) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::vector<OpCase> casesFor(const std::string& op) {
  const OpEntry& e = opTable().at(op);
  Gen g(seedFor(op));
  std::vector<OpCase> cases;
  e.gen(g, e.tol, &cases);
  for (OpCase& c : cases)
    if (c.op.empty()) c.op = op;
  return cases;
}

std::set<std::string> registeredCudaOps() {
  std::set<std::string> ops;
  for (const KernelDef& d : KernelRegistry::global().all())
    if (d.deviceKind == "cuda") ops.insert(d.opType);
  return ops;
}

// ---- running and comparing --------------------------------------------------------------------

/// The CPU reference kernels alone (not oneDNN, which the global registry prefers): the
/// differential tests compare against one simple implementation.
const KernelRegistry& refRegistry() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    registerCpuReferenceKernels(*reg);
    return reg;
  }();
  return *r;
}

KernelContext contextFor(const OpCase& c) {
  KernelContext ctx;
  ctx.opType = c.op;
  ctx.nodeName = c.op + "_under_test";
  ctx.attrs = &c.attrs;
  ctx.fusedBody = c.op == "Fused" ? &c.body : nullptr;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    ctx.inputTypes.push_back(c.inputs[i].defined() ? TensorType{c.inputs[i].dtype(), c.inputs[i].shape()} : TensorType{});
    bool k = i < c.constant.size() && c.constant[i] && c.inputs[i].defined();
    ctx.constInputs.push_back(k ? &c.inputs[i] : nullptr);
  }
  ctx.outputTypes = c.outputs;
  return ctx;
}

Status runOnCpu(const OpCase& c, std::vector<Tensor>* outs) {
  KernelContext ctx = contextFor(c);
  std::unique_ptr<Kernel> k;
  TANDEM_RETURN_IF_ERROR(refRegistry().create("cpu", ctx, &k));
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(t.defined() ? &t : nullptr);
  outs->clear();
  for (const TensorType& t : c.outputs) outs->push_back(t.present() ? Tensor::alloc(t.dtype, t.shape) : Tensor());
  std::vector<Tensor*> out;
  for (Tensor& t : *outs) out.push_back(t.defined() ? &t : nullptr);
  return k->run(in, out);
}

std::string indexText(const Shape& s, int64_t i) {
  Shape idx(s.size());
  for (int64_t d = (int64_t)s.size() - 1; d >= 0; --d) {
    idx[d] = s[d] ? i % s[d] : 0;
    i = s[d] ? i / s[d] : 0;
  }
  return shapeToString(idx);
}

/// "" when every element of `gpu` matches `cpu` within `tol`, else what differs and where.
std::string compare(const Tensor& gpu, const Tensor& cpu, const Tol& tol) {
  const int64_t n = cpu.numel();
  // Bit-identical buffers need no element loop (the 2^31-element tensors).
  if (cpu.bytes() == 0 || std::memcmp(gpu.raw(), cpu.raw(), cpu.bytes()) == 0) return "";
  int64_t bad = 0, first = -1, argAbs = -1, argRel = -1;
  double maxAbs = 0, maxRel = 0;
  for (int64_t i = 0; i < n; ++i) {
    double g = ref::elementAsDouble(gpu, i), r = ref::elementAsDouble(cpu, i);
    bool same;
    if (std::isnan(r) || std::isnan(g)) same = std::isnan(r) && std::isnan(g);
    else if (std::isinf(r) || std::isinf(g)) same = g == r;
    else same = std::fabs(g - r) <= tol.atol + tol.rtol * std::fabs(r);
    double abs = std::isfinite(g - r) ? std::fabs(g - r) : std::numeric_limits<double>::infinity();
    if (!same || (std::isfinite(abs) && abs > maxAbs)) {
      if (abs > maxAbs || (!same && argAbs < 0)) maxAbs = abs, argAbs = i;
      double rel = abs / std::max(std::fabs(r), 1e-30);
      if (rel > maxRel || (!same && argRel < 0)) maxRel = rel, argRel = i;
    }
    if (!same && bad++ == 0) first = i;
  }
  if (!bad) return "";
  std::ostringstream s;
  s.precision(9);
  s << bad << " of " << n << " elements differ; max abs err " << maxAbs << " at " << argAbs << ", max rel err " << maxRel
    << " at " << argRel << "; first mismatch at " << first << " (index " << indexText(cpu.shape(), first)
    << "): gpu " << ref::elementAsDouble(gpu, first) << " cpu " << ref::elementAsDouble(cpu, first);
  return s.str();
}

// Host memory the system can still give (MemAvailable), in bytes; 0 when unknown.
uint64_t hostBytesAvailable() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb;
  std::string unit;
  while (f >> key >> kb) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

/// Runs `cases` on one CUDA backend (all kernels of the batch in one plan-like load, one NVRTC
/// program) and on the CPU reference; every difference is a test failure naming the case.
/// `skipOnOom`: a device allocation failure skips the case with the reason instead of failing.
void checkCases(const std::vector<OpCase>& cases, bool skipOnOom = false) {
  std::unique_ptr<DeviceBackend> gpu;
  Status st = createCudaBackend(0, BackendOptions{}, &gpu);
  ASSERT_TRUE(st.isOk()) << st.message();
  std::vector<std::unique_ptr<Kernel>> kernels(cases.size());
  std::vector<Kernel*> created;
  for (size_t i = 0; i < cases.size(); ++i) {
    st = gpu->createKernel(contextFor(cases[i]), &kernels[i]);
    if (!st.isOk()) ADD_FAILURE() << describe(cases[i]) << "\n  the CUDA kernel was not created: " << st.message();
    else created.push_back(kernels[i].get());
  }
  st = gpu->finishLoad(created);
  ASSERT_TRUE(st.isOk()) << cases[0].op << ": finishLoad: " << st.message();
  for (size_t i = 0; i < cases.size(); ++i) {
    const OpCase& c = cases[i];
    if (!kernels[i]) continue;
    SCOPED_TRACE(describe(c));
    std::vector<Tensor> cpuOut;
    st = runOnCpu(c, &cpuOut);
    ASSERT_TRUE(st.isOk()) << "CPU reference: " << st.message();
    std::vector<void*> owned;
    auto release = [&] {
      for (void* p : owned) gpu->deallocate(p);
    };
    auto deviceBuffer = [&](size_t bytes, const char* what, void** p) -> Status {
      TANDEM_RETURN_IF_ERROR(gpu->allocate(bytes, what, p));
      owned.push_back(*p);
      return Status::ok();
    };
    std::vector<Tensor> din, dout;
    bool oom = false;
    for (const Tensor& t : c.inputs) {
      if (!t.defined()) { din.push_back(Tensor()); continue; }
      void* p = nullptr;
      st = deviceBuffer(t.bytes(), "input", &p);
      if (!st.isOk()) { oom = true; break; }
      ASSERT_TRUE(gpu->copyFromHost(p, t.raw(), t.bytes()).isOk());
      din.push_back(Tensor::view(t.dtype(), t.shape(), p));
    }
    // Outputs start as 0xff bytes (NaN, -1, true): an element the kernel never writes shows.
    for (size_t o = 0; o < c.outputs.size() && !oom; ++o) {
      const TensorType& t = c.outputs[o];
      if (!t.present()) { dout.push_back(Tensor()); continue; }
      void* p = nullptr;
      st = deviceBuffer(numElements(t.shape) * dtypeSize(t.dtype), "output", &p);
      if (!st.isOk()) { oom = true; break; }
      const size_t bytes = numElements(t.shape) * dtypeSize(t.dtype);
      std::vector<uint8_t> poison(std::min<size_t>(bytes, 64u << 20), 0xff);
      for (size_t off = 0; off < bytes; off += poison.size()) {
        ASSERT_TRUE(gpu->copyFromHost((char*)p + off, poison.data(), std::min(poison.size(), bytes - off)).isOk());
        ASSERT_TRUE(gpu->synchronize().isOk());  // the chunk is reused
      }
      dout.push_back(Tensor::view(t.dtype, t.shape, p));
    }
    if (oom) {
      release();
      if (skipOnOom) {
        std::printf("skipped %s: %s\n", c.label.c_str(), st.message().c_str());
        continue;
      }
      FAIL() << "device allocation: " << st.message();
    }
    ASSERT_TRUE(gpu->synchronize().isOk());
    std::vector<const Tensor*> gin;
    for (Tensor& t : din) gin.push_back(t.defined() ? &t : nullptr);
    std::vector<Tensor*> gout;
    for (Tensor& t : dout) gout.push_back(t.defined() ? &t : nullptr);
    st = gpu->launch(*kernels[i], gin, gout);
    ASSERT_TRUE(st.isOk()) << "launch: " << st.message();
    st = gpu->synchronize();
    ASSERT_TRUE(st.isOk()) << "after the launch: " << st.message();
    for (size_t o = 0; o < c.outputs.size(); ++o) {
      if (!c.outputs[o].present()) continue;
      Tensor host = Tensor::alloc(c.outputs[o].dtype, c.outputs[o].shape);
      ASSERT_TRUE(gpu->copyToHost(host.raw(), dout[o].raw(), host.bytes()).isOk());
      ASSERT_TRUE(gpu->synchronize().isOk());
      std::string diff = compare(host, cpuOut[o], c.tol);
      EXPECT_TRUE(diff.empty()) << describe(c) << "\n  output " << o << " " << dtypeName(c.outputs[o].dtype)
                                << shapeToString(c.outputs[o].shape) << ": " << diff << "\n  seed " << baseSeed()
                                << " (TANDEM_OPS_SEED)";
    }
    release();
  }
}

// ---- GPU-free checks of the table (ctest: unit.cuda_backend_ops_table) ---------------------

// The case table and the CUDA registry cannot drift apart: every registered op has a generator
// and every generator an op.
TEST(CudaOpsTable, EveryRegisteredOpHasACase) {
  std::set<std::string> registered = registeredCudaOps();
  ASSERT_FALSE(registered.empty()) << "no CUDA kernels registered in a build with the CUDA backend";
  for (const std::string& op : registered)
    EXPECT_TRUE(opTable().count(op)) << "the CUDA registry has " << op
                                     << " but cuda_backend_ops_gpu_test.cpp has no generator for it: add one to opTable()";
  for (auto& [op, e] : opTable()) EXPECT_TRUE(registered.count(op)) << op << " has a generator but no CUDA kernel";
  // The placer's table (CudaKernelTable) names the same ops, "Fused" aside (a body decides).
  for (const std::string& op : cudaKernelOps()) EXPECT_TRUE(registered.count(op)) << op;
}

// Every generated case is valid: the CUDA registry claims its dtypes and the CPU reference runs
// it. (Without this, a broken generator would only show on a GPU machine.)
TEST(CudaOpsTable, EveryCaseRunsOnTheCpuReference) {
  size_t total = 0;
  for (auto& [op, e] : opTable()) {
    std::vector<OpCase> cases = casesFor(op);
    EXPECT_GE(cases.size(), 4u) << op;
    for (const OpCase& c : cases) {
      std::vector<DType> dts;
      for (const Tensor& t : c.inputs)
        if (t.defined()) dts.push_back(t.dtype());
      EXPECT_TRUE(KernelRegistry::global().supports(c.op, "cuda", dts)) << describe(c);
      std::vector<Tensor> out;
      Status st = runOnCpu(c, &out);
      EXPECT_TRUE(st.isOk()) << describe(c) << ": " << st.message();
      ++total;
    }
  }
  std::printf("%zu cases over %zu ops\n", total, opTable().size());
}

// The generated kernels of every case compile together for sm_90: a syntax error in any
// generated source fails here, without a GPU. Kernels of cuDNN and cuBLASLt (which need library
// handles, so a device, at creation) are left out; so is what uploads at creation (Pad's maps).
TEST(CudaOpsTable, GeneratedKernelsOfEveryCaseCompileForSm90) {
  cuda::DeviceContext dc;
  dc.device = "cuda:0";
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::set<std::string> createdOps, notCreated;
  std::map<std::string, std::string> impl;
  for (const KernelDef& d : KernelRegistry::global().all())
    if (d.deviceKind == "cuda") impl[d.opType] = d.impl;
  for (auto& [op, e] : opTable()) {
    if (impl[op] == "cudnn" || impl[op] == "cublasLt") {
      notCreated.insert(op);
      continue;
    }
    std::vector<OpCase> cases = casesFor(op);
    for (const OpCase& c : cases) {
      if (c.attrs.getString("kind", "") == "gemm-epilogue") continue;
      KernelContext ctx = contextFor(c);
      ctx.cuda = &dc;
      std::unique_ptr<Kernel> k;
      Status st = KernelRegistry::global().create("cuda", ctx, &k);
      if (st.isOk()) {
        createdOps.insert(op);
        kernels.push_back(std::move(k));
      } else {
        // Only what uploads at creation may fail here, for want of device memory.
        EXPECT_NE(st.message().find("no CUDA device memory"), std::string::npos) << describe(c) << ": " << st.message();
        notCreated.insert(op);
      }
    }
  }
  EXPECT_GE(createdOps.size(), 45u);
  std::string ptx;
  bool hit;
  Status st = cuda::nvrtcCompile(dc.program.translationUnit(), cuda::nvrtcOptions(), "compute_90", "", &ptx, &hit);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
  std::string skipped;
  for (const std::string& op : notCreated) skipped += " " + op;
  std::printf("compiled the generated kernels of %zu ops; cases needing a device to create:%s\n", createdOps.size(),
              skipped.c_str());
}

// Lists every case (run with --gtest_also_run_disabled_tests --gtest_filter=*PrintCases).
TEST(CudaOpsTable, DISABLED_PrintCases) {
  for (auto& [op, e] : opTable())
    for (const OpCase& c : casesFor(op)) std::printf("%s\n", describe(c).c_str());
}

// A rank above the generated kernels' TD_MAX_RANK is an error at load that says so, never an
// out-of-bounds TdGeo.
TEST(CudaOpsTable, RankAboveTheKernelLimitIsALoadError) {
  cuda::DeviceContext dc;
  AttrMap attrs;
  KernelContext ctx;
  ctx.opType = "Add";
  ctx.nodeName = "add9";
  ctx.attrs = &attrs;
  Shape s(9, 2);
  ctx.inputTypes = {f32t(s), f32t(s)};
  ctx.outputTypes = {f32t(s)};
  ctx.constInputs = {nullptr, nullptr};
  ctx.cuda = &dc;
  std::unique_ptr<Kernel> k;
  Status st = KernelRegistry::global().create("cuda", ctx, &k);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("rank 9 is above the CUDA kernels' limit of 8"), std::string::npos) << st.message();
}

// ---- on the GPU ----------------------------------------------------------------------------

class CudaOp : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaOp, MatchesTheCpuReference) {
  REQUIRE_GPU();
  const std::string& op = GetParam();
  std::vector<OpCase> cases = casesFor(op);
  std::printf("%s: %zu cases (tolerance: %s)\n", op.c_str(), cases.size(), opTable().at(op).why);
  checkCases(cases);
}

std::vector<std::string> tableOps() {
  std::vector<std::string> v;
  for (auto& [op, e] : opTable()) v.push_back(op);
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllOps, CudaOp, ::testing::ValuesIn(tableOps()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// Launches whose one-thread-per-element or one-block-per-row grid would exceed 65,535 blocks
// (and, for the row kernels, the 65,535 * 16 blocks launchBlocks caps at, so their block-stride
// loops run).
TEST(CudaBackendOps, GridsOfMoreThan65535Blocks) {
  REQUIRE_GPU();
  Gen g(seedFor("grids"));
  const int64_t big = 65535LL * 256 + 17;       // one more block than 65,535 of 256 threads
  const int64_t rows = 65535LL * 16 + 33;       // past launchBlocks' cap
  std::vector<OpCase> cases;
  cases.push_back(OpCase{"Relu n=" + std::to_string(big), "Relu", {}, {g.f32({big})}, {}, {f32t({big})}, kExact});
  cases.push_back(OpCase{"Add broadcast", "Add", {}, {g.f32({4097, 4099}), g.f32({4099})}, {}, {f32t({4097, 4099})}, kExact});
  OpCase where{"Where broadcast u8", "Where", {}, {g.tensor(DType::Bool, {big}), g.tensor(DType::U8, {1}, 0, 255),
                                                   g.tensor(DType::U8, {big}, 0, 255)}, {}, {tt(DType::U8, {big})}, kExact};
  cases.push_back(where);
  OpCase tr{"Transpose", "Transpose", {}, {g.f32({4097, 4099})}, {}, {f32t({4099, 4097})}, kExact};
  cases.push_back(tr);
  OpCase rs{"ReduceSum rows", "ReduceSum", {}, {g.f32({rows, 3}), i64s({1})}, {false, true}, {f32t({rows, 1})},
            accumulation(3, 2)};
  cases.push_back(rs);
  OpCase rm{"ReduceMax 70001 rows", "ReduceMax", {}, {g.f32({70001, 5})}, {}, {f32t({70001, 1})}, kExact};
  rm.attrs.set("axes", Attr::ofInts({1}));
  cases.push_back(rm);
  OpCase sm{"Softmax rows", "Softmax", {}, {g.f32({rows, 3}, -10, 10)}, {}, {f32t({rows, 3})}, Tol{2e-6, 1e-5}};
  cases.push_back(sm);
  OpCase ln{"LayerNormalization rows", "LayerNormalization", {}, {g.f32({rows, 4}), g.f32({4}), g.f32({4})},
            {false, true, true}, {f32t({rows, 4})}, Tol{1e-4, 1e-4}};
  cases.push_back(ln);
  OpCase am{"ArgMax n", "ArgMax", {}, {g.f32({big, 2})}, {}, {tt(DType::I64, {big, 1})}, kExact};
  am.attrs.set("axis", Attr::ofInt(1));
  cases.push_back(am);
  Tensor idx = g.tensor(DType::I64, {big}, -1000, 999);
  cases.push_back(OpCase{"Gather n", "Gather", {}, {g.f32({1000}), idx}, {}, {f32t({big})}, kExact});
  FusedStep addLn = fusedStep("add-layernorm", {"Add", "LayerNormalization"}, {{0, 1}, {-2, 2, 3}}, {0});
  cases.push_back(OpCase{"Fused add-layernorm rows", "Fused", addLn.attrs,
                         {g.f32({rows, 2}), g.f32({rows, 2}), g.f32({2}), g.f32({2})}, {false, false, true, true},
                         {f32t({rows, 2})}, Tol{1e-4, 1e-4}, addLn.body});
  FusedStep mulRelu = fusedStep("elementwise", {"Mul", "Relu"}, {{0, 1}, {-2}}, {1});
  cases.push_back(OpCase{"Fused elementwise n", "Fused", mulRelu.attrs, {g.f32({big}), g.f32({1})}, {}, {f32t({big})},
                         kExact, mulRelu.body});
  checkCases(cases);
}

// One tensor of more than 2^31 elements through ops whose index math must be 64-bit: a
// contiguous unary (Relu, 8 GiB f32), a broadcast ternary (Where on bytes) and a strided copy
// (Expand on bytes). Skipped with the reason where the GPU or the host has too little memory.
TEST(CudaBackendOps, TensorsOfMoreThan2To31Elements) {
  REQUIRE_GPU();
  const int64_t n = (1LL << 31) + 33;
  // Resident at once: every case's inputs (Relu 4n, Where 2n), then Relu's CPU and GPU outputs.
  const uint64_t hostNeed = (uint64_t)n * (4 + 2 + 4 + 4) + (2ull << 30);
  uint64_t host = hostBytesAvailable();
  if (host && host < hostNeed) {
    std::printf("SKIPPED: the host has %llu bytes available, the 2^31-element tensors need %llu\n",
                (unsigned long long)host, (unsigned long long)hostNeed);
    GTEST_SKIP() << "too little host memory";
  }
  std::vector<OpCase> cases;
  {
    // Cheap deterministic fill: std::mt19937 would take most of a minute for 2^31 floats.
    Tensor x = Tensor::alloc(DType::F32, {n});
    float* p = x.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = (float)((i * 2654435761u) % 1999) - 999.f;
    cases.push_back(OpCase{"Relu f32 n=2^31+33", "Relu", {}, {x}, {}, {f32t({n})}, kExact});
  }
  {
    Tensor cond = Tensor::alloc(DType::Bool, {n}), y = Tensor::alloc(DType::U8, {n});
    for (int64_t i = 0; i < n; ++i) {
      cond.data<bool>()[i] = ((i * 40503u) >> 7) & 1;
      y.data<uint8_t>()[i] = (uint8_t)(i % 251);
    }
    cases.push_back(OpCase{"Where u8 n=2^31+33 (y broadcast)", "Where", {},
                           {cond, Tensor::fromVector<uint8_t>({1}, {7}), y}, {}, {tt(DType::U8, {n})}, kExact});
  }
  {
    const int64_t rowsOf3 = 715827894;  // 3 * 715827894 = 2^31 + 34 elements
    Tensor x = Tensor::fromVector<uint8_t>({1, 3}, {11, 22, 33});
    cases.push_back(OpCase{"Expand u8 [1,3] -> [715827894,3]", "Expand", {}, {x, i64s({rowsOf3, 3})}, {false, true},
                           {tt(DType::U8, {rowsOf3, 3})}, kExact});
  }
  checkCases(cases, /*skipOnOom=*/true);
}

}  // namespace

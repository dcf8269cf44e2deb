// Reference elementwise kernels: unary math (from the op table's formulas) and activations,
// binary arithmetic, Mod and comparisons with ONNX multidirectional broadcasting, logic and
// BitShift, Bitwise*-18, IsNaN/IsInf, variadic Min/Max/Sum/Mean, Where, PRelu, Clip (opset 17).
#include <algorithm>

#include "runtime/Half.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

// ---- broadcasting ------------------------------------------------------------------------

/// Two operands broadcast to the output shape, prepared once from the static shapes, as rows:
/// the trailing dims along which both operands' strides chain are merged into one inner run
/// that each operand reads contiguously (stride 1) or as one repeated element (stride 0);
/// the dims before it index the rows. [1,64,3,49,49] + [1,64,1,49,49] (Swin's shifted-window
/// mask) is 192 rows of 2,401 contiguous elements, the second operand's row repeated 3 times.
struct Broadcast2 {
  Shape out;
  std::vector<int64_t> outer, oa, ob;  // row dims (size-1 dims left out), operand strides
  int64_t inner = 1, ia = 0, ib = 0;   // run length; operand strides along it (0 or 1)

  Broadcast2(const Shape& a, const Shape& b, Shape o) : out(std::move(o)) {
    const std::vector<int64_t> sa = broadcastStrides(a, out), sb = broadcastStrides(b, out);
    int64_t d = (int64_t)out.size() - 1;
    if (d >= 0) {
      inner = out[d], ia = sa[d], ib = sb[d];
      for (--d; d >= 0; --d) {
        if (out[d] == 1) continue;
        if (sa[d] != ia * inner || sb[d] != ib * inner) break;
        inner *= out[d];
      }
    }
    for (int64_t k = 0; k <= d; ++k)
      if (out[k] != 1) outer.push_back(out[k]), oa.push_back(sa[k]), ob.push_back(sb[k]);
  }
};

/// y = op(a, b) over the rows of `bc`, in tasks of at most 16K elements (a long row split, short
/// rows grouped), spread over the OpenMP threads when there are 64K elements or more (each
/// element written once: any thread count gives the same bits). A task finds its first row's
/// offsets by division and steps to the next rows with an odometer: rows of a few elements
/// ([256, 1, 1, 2] + [1, 7, 7, 2], RAFT's correlation lookup) cost no division each.
template <typename TA, typename TB, typename TO, typename Op>
void applyBinary(const Broadcast2& bc, const TA* a, const TB* b, TO* y, Op op) {
  const int64_t n = numElements(bc.out);
  if (n == 0) return;
  constexpr int64_t kChunk = 16384;
  const int64_t rows = n / bc.inner, perRow = (bc.inner + kChunk - 1) / kChunk;
  const int64_t rowsPerTask = perRow > 1 ? 1 : std::max<int64_t>(1, kChunk / bc.inner);
  const int64_t tasks = perRow > 1 ? rows * perRow : (rows + rowsPerTask - 1) / rowsPerTask;
  const int64_t dims = (int64_t)bc.outer.size();
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t row0 = perRow > 1 ? t / perRow : t * rowsPerTask;
    const int64_t begin = perRow > 1 ? (t % perRow) * kChunk : 0;
    const int64_t len = std::min(kChunk, bc.inner - begin);
    const int64_t rowEnd = perRow > 1 ? row0 + 1 : std::min(rows, row0 + rowsPerTask);
    std::vector<int64_t> idx(dims);
    int64_t offA = 0, offB = 0, rem = row0;
    for (int64_t d = dims - 1; d >= 0; --d) {
      idx[d] = rem % bc.outer[d];
      rem /= bc.outer[d];
      offA += idx[d] * bc.oa[d];
      offB += idx[d] * bc.ob[d];
    }
    for (int64_t row = row0; row < rowEnd; ++row) {
      const TA* pa = a + offA + bc.ia * begin;
      const TB* pb = b + offB + bc.ib * begin;
      TO* py = y + row * bc.inner + begin;
      if (bc.ia && bc.ib) {
        for (int64_t i = 0; i < len; ++i) py[i] = op(pa[i], pb[i]);
      } else if (bc.ia) {
        const TB v = pb[0];
        for (int64_t i = 0; i < len; ++i) py[i] = op(pa[i], v);
      } else if (bc.ib) {
        const TA u = pa[0];
        for (int64_t i = 0; i < len; ++i) py[i] = op(u, pb[i]);
      } else {
        const TO v = op(pa[0], pb[0]);
        for (int64_t i = 0; i < len; ++i) py[i] = v;
      }
      for (int64_t d = dims - 1; d >= 0; --d) {  // the next row's offsets
        offA += bc.oa[d];
        offB += bc.ob[d];
        if (++idx[d] < bc.outer[d]) break;
        offA -= bc.oa[d] * bc.outer[d];
        offB -= bc.ob[d] * bc.outer[d];
        idx[d] = 0;
      }
    }
  }
}

Status checkBroadcast(const KernelContext& ctx, const Shape& in, const Shape& out, int which) {
  if (!broadcastsTo(in, out))
    return opError(ctx, "input " + std::to_string(which) + " of shape " + shapeToString(in) +
                            " does not broadcast to the output shape " + shapeToString(out));
  return Status::ok();
}

// ---- unary ---------------------------------------------------------------------------------

/// Factory for y = op(x) where op is made from the attributes; op(T) -> T for every T the
/// dispatch visits.
template <typename MakeOp>
KernelFactory unaryFactory(MakeOp makeOp) {
  return [makeOp](const KernelContext& ctx, std::unique_ptr<Kernel>* out) -> Status {
    TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
    auto op = makeOp(*ctx.attrs);
    RunFn fn;
    dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      fn = [op](const Inputs& in, const Outputs& outs) -> Status {
        const T* x = in[0]->data<T>();
        T* y = outs[0]->data<T>();
        const int64_t n = in[0]->numel();
        for (int64_t i = 0; i < n; ++i) y[i] = op(x[i]);
        return Status::ok();
      };
    });
    if (!fn) return opError(ctx, "unsupported dtype");
    return makeKernel(out, std::move(fn));
  };
}

template <typename F>
auto simple(F f) {
  return [f](const AttrMap&) { return f; };
}

// Generic lambdas used as elementwise functors; C++ math overloads pick the T precision. The
// unary math ops of the op table are made from their formulas (registerElementwiseKernels).
auto negOp = [](auto x) { return decltype(x)(-x); };
auto absOp = [](auto x) { return x < 0 ? decltype(x)(-x) : x; };
// x < 0 (not x > 0) so that NaN passes through as numpy's maximum(x, 0) does.
auto reluOp = [](auto x) { return x < 0 ? decltype(x)(0) : x; };
// Split on the sign so exp never overflows: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below.
auto sigmoidOp = [](auto x) {
  using T = decltype(x);
  if (x >= 0) return T(T(1) / (T(1) + std::exp(-x)));
  T e = std::exp(x);
  return T(e / (T(1) + e));
};

auto leakyReluMake = [](const AttrMap& a) {
  double alpha = a.getFloat("alpha", 0.01f);
  return [alpha](auto x) {
    using T = decltype(x);
    return x < 0 ? T(T(alpha) * x) : x;
  };
};
auto eluMake = [](const AttrMap& a) {
  double alpha = a.getFloat("alpha", 1.0f);
  return [alpha](auto x) {
    using T = decltype(x);
    return x < 0 ? T(T(alpha) * std::expm1(x)) : x;
  };
};
auto seluMake = [](const AttrMap& a) {
  double alpha = a.getFloat("alpha", 1.67326319217681884765625f);
  double gamma = a.getFloat("gamma", 1.05070102214813232421875f);
  return [alpha, gamma](auto x) {
    using T = decltype(x);
    return x <= 0 ? T(T(gamma) * (T(alpha) * std::exp(x) - T(alpha))) : T(T(gamma) * x);
  };
};
// ONNX Gelu-20: exact (erf) form, or the tanh approximation when approximate = "tanh".
auto geluMake = [](const AttrMap& a) {
  bool tanhForm = a.getString("approximate", "none") == "tanh";
  return [tanhForm](auto x) {
    using T = decltype(x);
    if (tanhForm)
      return T(T(0.5) * x *
               (T(1) + std::tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x))));
    return T(T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476))));
  };
};
// Gelu-20's derivative at x (the tanh approximation or the exact erf form), in T's precision.
template <typename T>
T geluDerivative(T x, bool tanhForm) {
  if (tanhForm) {
    const T k = T(0.7978845608028654), c = T(0.044715), x2 = x * x;
    const T t = std::tanh(k * x * (T(1) + c * x2));
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3) * c * x2);
  }
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.7071067811865476)));
  return cdf + x * std::exp(T(-0.5) * x * x) * T(0.3989422804014327);  // + x * phi(x)
}

// GeluGrad (tandem): dX = dY * Gelu'(X), dY and X of one shape.
Status createGeluGrad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() != 2 || ctx.inputTypes[0].shape != ctx.inputTypes[1].shape)
    return opError(ctx, "dY and X must have one shape");
  const bool tanhForm = ctx.attrs->getString("approximate", "none") == "tanh";
  RunFn fn;
  dispatchFloat(ctx.inputTypes[1].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [tanhForm](const Inputs& in, const Outputs& outs) -> Status {
      const T* dy = in[0]->data<T>();
      const T* x = in[1]->data<T>();
      T* dx = outs[0]->data<T>();
      for (int64_t i = 0, n = in[1]->numel(); i < n; ++i) dx[i] = dy[i] * geluDerivative(x[i], tanhForm);
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

auto hardSigmoidMake = [](const AttrMap& a) {
  double alpha = a.getFloat("alpha", 0.2f);
  double beta = a.getFloat("beta", 0.5f);
  return [alpha, beta](auto x) {
    using T = decltype(x);
    T v = T(alpha) * x + T(beta);
    return std::max(T(0), std::min(T(1), v));
  };
};

auto thresholdedReluMake = [](const AttrMap& a) {
  double alpha = a.getFloat("alpha", 1.0f);
  return [alpha](auto x) {
    using T = decltype(x);
    return x > T(alpha) ? x : T(0);
  };
};
// ONNX Celu-12: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); expm1 keeps small x exact.
auto celuMake = [](const AttrMap& a) {
  double alpha = a.getFloat("alpha", 1.0f);
  return [alpha](auto x) {
    using T = decltype(x);
    return x > 0 ? x : T(T(alpha) * std::expm1(x / T(alpha)));
  };
};
// ONNX Shrink-9, any numeric type: computed in double (exact for every operand of up to 32
// bits), then converted back, so unsigned inputs never wrap at -lambd.
auto shrinkMake = [](const AttrMap& a) {
  double lambd = a.getFloat("lambd", 0.5f), bias = a.getFloat("bias", 0.0f);
  return [lambd, bias](auto x) {
    using T = decltype(x);
    const double v = double(x);
    return T(v < -lambd ? v + bias : v > lambd ? v - bias : 0.0);
  };
};

// ---- Clip ----------------------------------------------------------------------------------

// Clip-13: min/max are optional scalar inputs; absent means unbounded. min > max gives max
// everywhere, which min(max(x, lo), hi) produces.
Status createClip(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
  for (size_t i = 1; i < 3; ++i) {
    if (!inputPresent(ctx, i)) continue;
    if (ctx.inputTypes[i].dtype != ctx.inputTypes[0].dtype)
      return opError(ctx, std::string(i == 1 ? "min" : "max") + " must have the dtype of input");
    if (numElements(ctx.inputTypes[i].shape) != 1)
      return opError(ctx, std::string(i == 1 ? "min" : "max") + " must be a scalar, got shape " +
                              shapeToString(ctx.inputTypes[i].shape));
  }
  // Clip-6 style attributes, for graphs that were not normalised to inputs.
  const Attr* minAttr = ctx.attrs->find("min");
  const Attr* maxAttr = ctx.attrs->find("max");
  const ConstOperands consts(ctx);
  RunFn fn;
  dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    T lo0 = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity()
                                        : std::numeric_limits<T>::lowest();
    T hi0 = std::is_floating_point_v<T> ? std::numeric_limits<T>::infinity()
                                        : std::numeric_limits<T>::max();
    if (minAttr && minAttr->kind == Attr::Kind::Float) lo0 = T(minAttr->f);
    if (maxAttr && maxAttr->kind == Attr::Kind::Float) hi0 = T(maxAttr->f);
    fn = [lo0, hi0, consts](const Inputs& in, const Outputs& outs) -> Status {
      T lo = lo0, hi = hi0;
      if (const Tensor* m = consts.get(in, 1)) lo = m->data<T>()[0];
      if (const Tensor* m = consts.get(in, 2)) hi = m->data<T>()[0];
      const T* x = in[0]->data<T>();
      T* y = outs[0]->data<T>();
      const int64_t n = in[0]->numel();
      for (int64_t i = 0; i < n; ++i) {
        T v = x[i];
        if (isNaN(v)) {
          y[i] = v;
          continue;
        }
        v = v < lo ? lo : v;
        y[i] = v > hi ? hi : v;
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- binary --------------------------------------------------------------------------------

enum class BinOp { Add, Sub, Mul, Div, Equal, Less, Greater, LessOrEqual, GreaterOrEqual, PRelu };

bool isComparison(BinOp op) {
  return op == BinOp::Equal || op == BinOp::Less || op == BinOp::Greater ||
         op == BinOp::LessOrEqual || op == BinOp::GreaterOrEqual;
}

template <typename T>
Status runBinary(BinOp op, const Broadcast2& bc, const Tensor& a, const Tensor& b, Tensor& y) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  if constexpr (std::is_same_v<T, bool>) {
    // Only Equal accepts bool (registration); arithmetic on bool is never instantiated.
    if (op != BinOp::Equal) return Status::error("bool operands are only supported by Equal");
    applyBinary(bc, pa, pb, y.data<bool>(), [](bool u, bool v) { return u == v; });
    return Status::ok();
  } else {
    switch (op) {
      case BinOp::Add:
        applyBinary(bc, pa, pb, y.data<T>(), [](T u, T v) { return T(u + v); });
        break;
      case BinOp::Sub:
        applyBinary(bc, pa, pb, y.data<T>(), [](T u, T v) { return T(u - v); });
        break;
      case BinOp::Mul:
        applyBinary(bc, pa, pb, y.data<T>(), [](T u, T v) { return T(u * v); });
        break;
      case BinOp::Div:
        if constexpr (std::is_integral_v<T>) {
          // Integer division by zero traps in C++; it is a user error here.
          for (int64_t i = 0, n = b.numel(); i < n; ++i)
            if (pb[i] == 0) return Status::error("Div: integer division by zero");
          applyBinary(bc, pa, pb, y.data<T>(), [](T u, T v) {
            // INT_MIN / -1 also traps; negation with wrap-around is the two's complement answer.
            if constexpr (std::is_signed_v<T>)
              if (v == T(-1)) return T(uint64_t(0) - uint64_t(u));
            return T(u / v);
          });
        } else {
          applyBinary(bc, pa, pb, y.data<T>(), [](T u, T v) { return T(u / v); });
        }
        break;
      case BinOp::Equal:
        applyBinary(bc, pa, pb, y.data<bool>(), [](T u, T v) { return u == v; });
        break;
      case BinOp::Less:
        applyBinary(bc, pa, pb, y.data<bool>(), [](T u, T v) { return u < v; });
        break;
      case BinOp::Greater:
        applyBinary(bc, pa, pb, y.data<bool>(), [](T u, T v) { return u > v; });
        break;
      case BinOp::LessOrEqual:
        applyBinary(bc, pa, pb, y.data<bool>(), [](T u, T v) { return u <= v; });
        break;
      case BinOp::GreaterOrEqual:
        applyBinary(bc, pa, pb, y.data<bool>(), [](T u, T v) { return u >= v; });
        break;
      case BinOp::PRelu:
        applyBinary(bc, pa, pb, y.data<T>(), [](T u, T v) { return u < 0 ? T(v * u) : u; });
        break;
    }
    return Status::ok();
  }
}

KernelFactory binaryFactory(BinOp op) {
  return [op](const KernelContext& ctx, std::unique_ptr<Kernel>* out) -> Status {
    if (ctx.inputTypes.size() != 2 || ctx.outputTypes.empty())
      return opError(ctx, "expects 2 inputs and 1 output");
    const Shape& ys = ctx.outputTypes[0].shape;
    const DType want = isComparison(op) ? DType::Bool : ctx.inputTypes[0].dtype;
    if (ctx.outputTypes[0].dtype != want)
      return opError(ctx, std::string("output must be ") + dtypeName(want));
    TANDEM_RETURN_IF_ERROR(checkBroadcast(ctx, ctx.inputTypes[0].shape, ys, 0));
    TANDEM_RETURN_IF_ERROR(checkBroadcast(ctx, ctx.inputTypes[1].shape, ys, 1));
    if (op == BinOp::PRelu && ctx.inputTypes[0].shape != ys)
      return opError(ctx, "slope must broadcast to X (unidirectional), not the reverse");
    auto bc = std::make_shared<Broadcast2>(ctx.inputTypes[0].shape, ctx.inputTypes[1].shape, ys);
    RunFn fn;
    dispatchDType(ctx.inputTypes[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      fn = [op, bc](const Inputs& in, const Outputs& outs) -> Status {
        return runBinary<T>(op, *bc, *in[0], *in[1], *outs[0]);
      };
    });
    if (!fn) return opError(ctx, "unsupported dtype");
    return makeKernel(out, std::move(fn));
  };
}

// Checks shared by the binary kernels below: two inputs broadcasting to the output.
Status prepareBinary(const KernelContext& ctx, std::shared_ptr<Broadcast2>* bc) {
  if (ctx.inputTypes.size() != 2 || !ctx.inputTypes[1].present())
    return opError(ctx, "expects 2 inputs");
  const Shape& ys = ctx.outputTypes[0].shape;
  TANDEM_RETURN_IF_ERROR(checkBroadcast(ctx, ctx.inputTypes[0].shape, ys, 0));
  TANDEM_RETURN_IF_ERROR(checkBroadcast(ctx, ctx.inputTypes[1].shape, ys, 1));
  *bc = std::make_shared<Broadcast2>(ctx.inputTypes[0].shape, ctx.inputTypes[1].shape, ys);
  return Status::ok();
}

// ---- Mod-13 --------------------------------------------------------------------------------

/// fmod = 0: Python's a % b (the result has the divisor's sign); fmod = 1: C's fmod / % (the
/// dividend's sign). Integer b == 0 is refused before the loop (it traps in C++).
template <typename T>
T modValue(T a, T b, bool cFmod) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b);
    if (!cFmod && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    if constexpr (std::is_signed_v<T>)
      if (b == T(-1)) return T(0);  // INT_MIN % -1 traps; every a % -1 is 0
    T r = T(a % b);
    if constexpr (std::is_signed_v<T>)
      if (!cFmod && r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
    return r;
  }
}

Status createMod(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  std::shared_ptr<Broadcast2> bc;
  TANDEM_RETURN_IF_ERROR(prepareBinary(ctx, &bc));
  const bool cFmod = ctx.attrs->getInt("fmod", 0) != 0;
  if (!cFmod && isFloat(ctx.inputTypes[0].dtype))
    return opError(ctx, "fmod = 0 is undefined for float operands");
  const OpName name(ctx);
  RunFn fn;
  dispatchWide(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [bc, cFmod, name](const Inputs& in, const Outputs& outs) -> Status {
      const T* b = in[1]->data<T>();
      if constexpr (std::is_integral_v<T>)
        for (int64_t i = 0, n = in[1]->numel(); i < n; ++i)
          if (b[i] == 0) return opError(name, "integer modulo by zero");
      applyBinary(*bc, in[0]->data<T>(), b, outs[0]->data<T>(),
                  [cFmod](T u, T v) { return modValue(u, v, cFmod); });
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- logic: Not, And, Or, Xor (bool) and BitShift (unsigned) -----------------------------

enum class LogicOp { And, Or, Xor };

KernelFactory logicFactory(LogicOp op) {
  return [op](const KernelContext& ctx, std::unique_ptr<Kernel>* out) -> Status {
    std::shared_ptr<Broadcast2> bc;
    TANDEM_RETURN_IF_ERROR(prepareBinary(ctx, &bc));
    return makeKernel(out, [op, bc](const Inputs& in, const Outputs& outs) -> Status {
      const bool* a = in[0]->data<bool>();
      const bool* b = in[1]->data<bool>();
      bool* y = outs[0]->data<bool>();
      switch (op) {
        case LogicOp::And: applyBinary(*bc, a, b, y, [](bool u, bool v) { return u && v; }); break;
        case LogicOp::Or: applyBinary(*bc, a, b, y, [](bool u, bool v) { return u || v; }); break;
        case LogicOp::Xor: applyBinary(*bc, a, b, y, [](bool u, bool v) { return u != v; }); break;
      }
      return Status::ok();
    });
  };
}

Status createNot(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
  return makeKernel(out, [](const Inputs& in, const Outputs& outs) -> Status {
    const bool* x = in[0]->data<bool>();
    bool* y = outs[0]->data<bool>();
    for (int64_t i = 0, n = in[0]->numel(); i < n; ++i) y[i] = !x[i];
    return Status::ok();
  });
}

// BitShift-11: a shift by the type's width or more gives 0 (C++ leaves it undefined).
Status createBitShift(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  std::shared_ptr<Broadcast2> bc;
  TANDEM_RETURN_IF_ERROR(prepareBinary(ctx, &bc));
  const std::string dir = ctx.attrs->getString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return opError(ctx, "attribute direction must be LEFT or RIGHT, got '" + dir + "'");
  const bool left = dir == "LEFT";
  RunFn fn;
  dispatchUnsigned(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [bc, left](const Inputs& in, const Outputs& outs) -> Status {
      applyBinary(*bc, in[0]->data<T>(), in[1]->data<T>(), outs[0]->data<T>(), [left](T x, T s) {
        if (s >= T(8 * sizeof(T))) return T(0);
        return left ? T(x << s) : T(x >> s);
      });
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- BitwiseAnd/Or/Xor/Not-18: the integer dtypes ----------------------------------------

const std::vector<DType>& integerTypes() {
  static const std::vector<DType> t = {DType::I8, DType::I16, DType::I32, DType::I64,
                                       DType::U8, DType::U16, DType::U32, DType::U64};
  return t;
}

/// Calls f(T{}) for the integer dtypes of integerTypes().
template <typename F>
bool dispatchInteger(DType t, F&& f) {
  switch (t) {
    case DType::I8: f(int8_t{}); return true;
    case DType::I16: f(int16_t{}); return true;
    case DType::I32: f(int32_t{}); return true;
    case DType::I64: f(int64_t{}); return true;
    case DType::U8: f(uint8_t{}); return true;
    case DType::U16: f(uint16_t{}); return true;
    case DType::U32: f(uint32_t{}); return true;
    case DType::U64: f(uint64_t{}); return true;
    default: return false;
  }
}

Status createBitwise(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  RunFn fn;
  if (ctx.opType == "BitwiseNot") {
    TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
    dispatchInteger(ctx.inputTypes[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      fn = [](const Inputs& in, const Outputs& outs) -> Status {
        const T* x = in[0]->data<T>();
        T* y = outs[0]->data<T>();
        for (int64_t i = 0, n = in[0]->numel(); i < n; ++i) y[i] = T(~x[i]);
        return Status::ok();
      };
    });
  } else {
    std::shared_ptr<Broadcast2> bc;
    TANDEM_RETURN_IF_ERROR(prepareBinary(ctx, &bc));
    const int op = ctx.opType == "BitwiseAnd" ? 0 : ctx.opType == "BitwiseOr" ? 1 : 2;
    dispatchInteger(ctx.inputTypes[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      fn = [bc, op](const Inputs& in, const Outputs& outs) -> Status {
        const T* a = in[0]->data<T>();
        const T* b = in[1]->data<T>();
        T* y = outs[0]->data<T>();
        if (op == 0) applyBinary(*bc, a, b, y, [](T u, T v) { return T(u & v); });
        else if (op == 1) applyBinary(*bc, a, b, y, [](T u, T v) { return T(u | v); });
        else applyBinary(*bc, a, b, y, [](T u, T v) { return T(u ^ v); });
        return Status::ok();
      };
    });
  }
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- IsNaN-13, IsInf-10: float in, bool out ------------------------------------------------

Status createClassify(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.outputTypes[0].dtype != DType::Bool || ctx.outputTypes[0].shape != ctx.inputTypes[0].shape)
    return opError(ctx, "output must be bool of the input's shape");
  const bool nan = ctx.opType == "IsNaN";
  const bool neg = ctx.attrs->getInt("detect_negative", 1) != 0;
  const bool pos = ctx.attrs->getInt("detect_positive", 1) != 0;
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [nan, neg, pos](const Inputs& in, const Outputs& outs) -> Status {
      const T* x = in[0]->data<T>();
      bool* y = outs[0]->data<bool>();
      const T inf = std::numeric_limits<T>::infinity();
      for (int64_t i = 0, n = in[0]->numel(); i < n; ++i)
        y[i] = nan ? std::isnan(x[i]) : (pos && x[i] == inf) || (neg && x[i] == -inf);
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- Pow: base and exponent dtypes may differ; the result has the base dtype --------------

template <typename T, typename E>
T powValue(T x, E e) {
  if constexpr (std::is_floating_point_v<T>) {
    return T(std::pow(x, T(e)));
  } else if constexpr (std::is_floating_point_v<E>) {
    return T(std::pow(double(x), double(e)));
  } else {
    // Exact integer power (wrapping like repeated multiplication); a negative exponent gives
    // the truncated reciprocal, as numpy's float power cast back does.
    if (e < 0) {
      if (x == 1) return T(1);
      if constexpr (std::is_signed_v<T>)
        if (x == T(-1)) return T((e % 2) ? -1 : 1);
      return T(0);
    }
    uint64_t base = uint64_t(int64_t(x)), result = 1;
    uint64_t k = uint64_t(e);
    while (k) {
      if (k & 1) result *= base;
      base *= base;
      k >>= 1;
    }
    return T(int64_t(result));
  }
}

Status createPow(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() != 2) return opError(ctx, "expects 2 inputs");
  const Shape& ys = ctx.outputTypes[0].shape;
  TANDEM_RETURN_IF_ERROR(checkBroadcast(ctx, ctx.inputTypes[0].shape, ys, 0));
  TANDEM_RETURN_IF_ERROR(checkBroadcast(ctx, ctx.inputTypes[1].shape, ys, 1));
  auto bc = std::make_shared<Broadcast2>(ctx.inputTypes[0].shape, ctx.inputTypes[1].shape, ys);
  RunFn fn;
  dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto baseTag) {
    using T = decltype(baseTag);
    dispatchWide(ctx.inputTypes[1].dtype, [&](auto expTag) {
      using E = decltype(expTag);
      fn = [bc](const Inputs& in, const Outputs& outs) -> Status {
        applyBinary(*bc, in[0]->data<T>(), in[1]->data<E>(), outs[0]->data<T>(),
                    [](T x, E e) { return powValue<T, E>(x, e); });
        return Status::ok();
      };
    });
  });
  if (!fn) return opError(ctx, "unsupported dtypes");
  return makeKernel(out, std::move(fn));
}

// ---- variadic Min / Max / Sum --------------------------------------------------------------

enum class FoldOp { Min, Max, Sum, Mean };

template <typename T>
T foldValue(FoldOp op, T a, T b) {
  switch (op) {
    case FoldOp::Sum:
    case FoldOp::Mean: return T(a + b);
    case FoldOp::Min:
      if (isNaN(a) || isNaN(b)) return std::numeric_limits<T>::quiet_NaN();
      return b < a ? b : a;
    case FoldOp::Max:
      if (isNaN(a) || isNaN(b)) return std::numeric_limits<T>::quiet_NaN();
      return b > a ? b : a;
  }
  return a;
}

// y = broadcast(x0), then y = op(y, broadcast(xi)) for each further input; Mean then divides
// the sum by the number of inputs.
KernelFactory foldFactory(FoldOp op) {
  return [op](const KernelContext& ctx, std::unique_ptr<Kernel>* out) -> Status {
    if (ctx.inputTypes.empty()) return opError(ctx, "expects at least one input");
    const Shape ys = ctx.outputTypes[0].shape;
    std::vector<std::shared_ptr<Broadcast2>> bcs;
    for (size_t i = 0; i < ctx.inputTypes.size(); ++i) {
      TANDEM_RETURN_IF_ERROR(checkBroadcast(ctx, ctx.inputTypes[i].shape, ys, (int)i));
      bcs.push_back(std::make_shared<Broadcast2>(ys, ctx.inputTypes[i].shape, ys));
    }
    std::vector<int64_t> s0 = broadcastStrides(ctx.inputTypes[0].shape, ys);
    RunFn fn;
    dispatchWide(ctx.inputTypes[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      fn = [op, bcs, s0, ys](const Inputs& in, const Outputs& outs) -> Status {
        T* y = outs[0]->data<T>();
        const T* x0 = in[0]->data<T>();
        forEachStrided<1>(ys, {s0.data()}, {0},
                          [&](int64_t i, const std::array<int64_t, 1>& o) { y[i] = x0[o[0]]; });
        for (size_t k = 1; k < in.size(); ++k)
          applyBinary(*bcs[k], (const T*)y, in[k]->data<T>(), y,
                      [op](T a, T b) { return foldValue(op, a, b); });
        if (op == FoldOp::Mean)
          for (int64_t i = 0, n = outs[0]->numel(); i < n; ++i) y[i] = T(y[i] / T(in.size()));
        return Status::ok();
      };
    });
    if (!fn) return opError(ctx, "unsupported dtype");
    return makeKernel(out, std::move(fn));
  };
}

// ---- Where ---------------------------------------------------------------------------------

Status createWhere(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() != 3) return opError(ctx, "expects 3 inputs");
  if (ctx.outputTypes[0].dtype != ctx.inputTypes[1].dtype)
    return opError(ctx, "output dtype differs from the dtype of X and Y");
  const Shape ys = ctx.outputTypes[0].shape;
  for (int i = 0; i < 3; ++i)
    TANDEM_RETURN_IF_ERROR(checkBroadcast(ctx, ctx.inputTypes[i].shape, ys, i));
  auto sc = broadcastStrides(ctx.inputTypes[0].shape, ys);
  auto sx = broadcastStrides(ctx.inputTypes[1].shape, ys);
  auto sy = broadcastStrides(ctx.inputTypes[2].shape, ys);
  RunFn fn;
  dispatchBySize(ctx.inputTypes[1].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [sc, sx, sy, ys](const Inputs& in, const Outputs& outs) -> Status {
      const bool* c = in[0]->data<bool>();
      const T* x = in[1]->data<T>();
      const T* yv = in[2]->data<T>();
      T* r = outs[0]->data<T>();
      forEachStridedRun<3>(
          ys, {sc.data(), sx.data(), sy.data()}, {0, 0, 0},
          [&](int64_t i, const std::array<int64_t, 3>& o, int64_t n, const std::array<int64_t, 3>& st) {
            T* out = r + i;
            if (st[0] == 0) {
              // One condition for the run (a mask broadcast over the inner dims): a copy or a fill.
              const T* src = c[o[0]] ? x + o[1] : yv + o[2];
              const int64_t s = c[o[0]] ? st[1] : st[2];
              if (s == 1) std::copy(src, src + n, out);
              else if (s == 0) std::fill(out, out + n, *src);
              else for (int64_t k = 0; k < n; ++k) out[k] = src[k * s];
            } else if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
              const bool* cc = c + o[0];
              const T *xx = x + o[1], *yy = yv + o[2];
              for (int64_t k = 0; k < n; ++k) out[k] = cc[k] ? xx[k] : yy[k];
            } else {
              for (int64_t k = 0; k < n; ++k)
                out[k] = c[o[0] + k * st[0]] ? x[o[1] + k * st[1]] : yv[o[2] + k * st[2]];
            }
          });
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- f16 and bf16 through f32 ----------------------------------------------------------------

// Runs `inner`'s f32 kernel on f16 or bf16 operands: they widen exactly, and the f32 result is
// rounded once to nearest-even. That is exact for Max, Min and Mod, whose f32 results are inputs
// or remainders smaller than the divisor (fmod is exact in any precision).
KernelFactory viaF32(KernelFactory inner) {
  return [inner](const KernelContext& ctx, std::unique_ptr<Kernel>* out) -> Status {
    const DType narrow = ctx.inputTypes[0].dtype;
    if (!isHalfFloat(narrow)) return inner(ctx, out);
    const bool bf = narrow == DType::BF16;
    KernelContext wide = ctx;
    for (TensorType& t : wide.inputTypes)
      if (t.dtype == narrow) t.dtype = DType::F32;
    for (TensorType& t : wide.outputTypes)
      if (t.dtype == narrow) t.dtype = DType::F32;
    std::vector<Tensor> consts(ctx.constInputs.size());
    for (size_t i = 0; i < ctx.constInputs.size(); ++i)
      if (const Tensor* c = ctx.constInputs[i]) {
        consts[i] = Tensor::alloc(DType::F32, c->shape());
        for (int64_t k = 0; k < c->numel(); ++k)
          consts[i].data<float>()[k] = narrowToFloat(c->data<uint16_t>()[k], bf);
        wide.constInputs[i] = &consts[i];
      }
    std::unique_ptr<Kernel> k;
    TANDEM_RETURN_IF_ERROR(inner(wide, &k));
    std::shared_ptr<Kernel> f32Kernel(std::move(k));
    const Shape outShape = ctx.outputTypes[0].shape;
    return makeKernel(out, [f32Kernel, outShape, bf](const Inputs& in, const Outputs& outs) -> Status {
      std::vector<Tensor> widened(in.size());
      Inputs args(in.size(), nullptr);
      for (size_t i = 0; i < in.size(); ++i) {
        if (!in[i]) continue;
        widened[i] = Tensor::alloc(DType::F32, in[i]->shape());
        const uint16_t* h = in[i]->data<uint16_t>();
        for (int64_t k = 0, n = in[i]->numel(); k < n; ++k)
          widened[i].data<float>()[k] = narrowToFloat(h[k], bf);
        args[i] = &widened[i];
      }
      Tensor y = Tensor::alloc(DType::F32, outShape);
      TANDEM_RETURN_IF_ERROR(f32Kernel->run(args, {&y}));
      uint16_t* o = outs[0]->data<uint16_t>();
      for (int64_t k = 0, n = y.numel(); k < n; ++k) o[k] = narrowFromDouble(y.data<float>()[k], bf);
      return Status::ok();
    });
  };
}

}  // namespace

void registerElementwiseKernels(KernelRegistry& r) {
  const auto& F = floatTypes();
  // The op table's unary math ops (f32, f64): y = formula(x), with `a` of the tensor's dtype so
  // the std overloads compute in its precision.
#define TANDEM_MATH_OP(Name, since, shapeFn, work, flops, flags, formula) \
  addRef(r, #Name, F, unaryFactory(simple([](auto a) {                   \
           using namespace std;                                           \
           return decltype(a)(formula);                                   \
         })));
#include "runtime/core/OpTable.def"
  addRef(r, "Sigmoid", F, unaryFactory(simple(sigmoidOp)));
  addRef(r, "LeakyRelu", F, unaryFactory(leakyReluMake));
  addRef(r, "Elu", F, unaryFactory(eluMake));
  addRef(r, "Selu", F, unaryFactory(seluMake));
  addRef(r, "HardSigmoid", F, unaryFactory(hardSigmoidMake));
  addRef(r, "Gelu", F, unaryFactory(geluMake));
  addRef(r, "GeluGrad", F, createGeluGrad);
  addRef(r, "Neg", signedTypes(), unaryFactory(simple(negOp)));
  addRef(r, "Abs", numericTypes(), unaryFactory(simple(absOp)));
  addRef(r, "Relu", signedTypes(), unaryFactory(simple(reluOp)));
  addRef(r, "Clip", numericTypes(), createClip);
  addRef(r, "ThresholdedRelu", F, unaryFactory(thresholdedReluMake));
  addRef(r, "Celu", F, unaryFactory(celuMake));
  addRef(r, "Shrink", numericTypes(), unaryFactory(shrinkMake));
  addRef(r, "IsNaN", F, createClassify);
  addRef(r, "IsInf", F, createClassify);

  const auto& N = numericTypes();
  addRef(r, "Add", acceptsAllSame(N), dtypesToText(N), binaryFactory(BinOp::Add));
  addRef(r, "Sub", acceptsAllSame(N), dtypesToText(N), binaryFactory(BinOp::Sub));
  addRef(r, "Mul", acceptsAllSame(N), dtypesToText(N), binaryFactory(BinOp::Mul));
  addRef(r, "Div", acceptsAllSame(N), dtypesToText(N), binaryFactory(BinOp::Div));
  addRef(r, "PRelu", acceptsAllSame(signedTypes()), dtypesToText(signedTypes()),
         binaryFactory(BinOp::PRelu));
  addRef(r, "Equal", acceptsAllSame(allTypes()), dtypesToText(allTypes()),
         binaryFactory(BinOp::Equal));
  addRef(r, "Less", acceptsAllSame(N), dtypesToText(N), binaryFactory(BinOp::Less));
  addRef(r, "Greater", acceptsAllSame(N), dtypesToText(N), binaryFactory(BinOp::Greater));
  addRef(r, "LessOrEqual", acceptsAllSame(N), dtypesToText(N), binaryFactory(BinOp::LessOrEqual));
  addRef(r, "GreaterOrEqual", acceptsAllSame(N), dtypesToText(N),
         binaryFactory(BinOp::GreaterOrEqual));
  // Mod, Min and Max also take f16 and bf16, through f32 (viaF32).
  std::vector<DType> wide = wideNumericTypes();
  wide.push_back(DType::F16);
  wide.push_back(DType::BF16);
  addRef(r, "Mod", acceptsAllSame(wide), dtypesToText(wide), viaF32(createMod));
  const std::vector<DType> B = {DType::Bool};
  addRef(r, "Not", B, createNot);
  addRef(r, "And", acceptsAllSame(B), "bool", logicFactory(LogicOp::And));
  addRef(r, "Or", acceptsAllSame(B), "bool", logicFactory(LogicOp::Or));
  addRef(r, "Xor", acceptsAllSame(B), "bool", logicFactory(LogicOp::Xor));
  addRef(r, "BitShift", acceptsAllSame(unsignedTypes()), dtypesToText(unsignedTypes()),
         createBitShift);
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"})
    addRef(r, op, acceptsAllSame(integerTypes()), dtypesToText(integerTypes()), createBitwise);
  addRef(r, "Min", acceptsAllSame(wide), dtypesToText(wide), viaF32(foldFactory(FoldOp::Min)));
  addRef(r, "Max", acceptsAllSame(wide), dtypesToText(wide), viaF32(foldFactory(FoldOp::Max)));
  addRef(r, "Sum", acceptsAllSame(N), dtypesToText(N), foldFactory(FoldOp::Sum));
  addRef(r, "Mean", acceptsAllSame(F), dtypesToText(F), foldFactory(FoldOp::Mean));

  const std::vector<DType> powBase = {DType::F32, DType::F64, DType::I32, DType::I64};
  addRef(
      r, "Pow",
      [powBase](const std::vector<DType>& in) {
        return in.size() == 2 && contains(powBase, in[0]) && contains(wideNumericTypes(), in[1]);
      },
      "base f32,f64,i32,i64; exponent " + dtypesToText(wideNumericTypes()), createPow);
  addRef(
      r, "Where",
      [](const std::vector<DType>& in) {
        return in.size() == 3 && in[0] == DType::Bool && in[1] == in[2] &&
               contains(allTypes(), in[1]);
      },
      "cond bool; values " + dtypesToText(allTypes()), createWhere);
}

}  // namespace ref
}  // namespace tandem

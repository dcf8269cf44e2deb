// Reference kernels of the quantized products: MatMulInteger-10, QLinearMatMul-10 (numpy matmul
// of u8/i8 operands), Tandem's QLinearMatMulBias (QLinearMatMul plus an i32 bias per column),
// Tandem's DynamicQuantizeMatMul (ONNX Runtime's contrib op: A quantized at run time, Y f32),
// ConvInteger-10 and QLinearConv-10 (N-D, groups, strides, dilations, pads).
// Products accumulate exactly in i32 after subtracting the zero points; the QLinear* ops then
// requantize: acc * a_scale * b_scale / y_scale rounded half to even, plus y_zero_point, saturated.
#include <algorithm>

#include "runtime/cpu/ref/DynamicQuantize.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

/// Element k of a u8/i8 (or i32) tensor as an integer; 0 for an absent tensor.
int32_t intAt(const Tensor* t, int64_t k) {
  if (!t) return 0;
  switch (t->dtype()) {
    case DType::U8: return t->data<uint8_t>()[k];
    case DType::I8: return t->data<int8_t>()[k];
    case DType::I32: return t->data<int32_t>()[k];
    default: return 0;
  }
}

/// A scalar-or-vector operand: its values and whether there is one per index (else one for all).
struct PerIndex {
  std::vector<double> v;
  double at(int64_t i) const { return v.empty() ? 0.0 : v.size() == 1 ? v[0] : v[i]; }
};

/// Reads operand `t` (absent: empty) and checks it has 1 or `n` elements.
Status readPerIndex(const OpName& op, const Tensor* t, int64_t n, const char* what, PerIndex* p) {
  p->v.clear();
  if (!t) return Status::ok();
  if (t->numel() != 1 && t->numel() != n)
    return opError(op, std::string(what) + " must have 1" +
                           (n == 1 ? std::string(" element") : " or " + std::to_string(n) + " elements") +
                           ", got " + shapeToString(t->shape()));
  for (int64_t i = 0; i < t->numel(); ++i)
    p->v.push_back(t->dtype() == DType::F32 ? double(t->data<float>()[i]) : double(intAt(t, i)));
  return Status::ok();
}

/// saturate(round(r) + zp) into y[k] (saturateRound: half to even, then the zero point).
void storeRequantized(double r, double zp, DType t, void* y, int64_t k) {
  if (t == DType::U8)
    static_cast<uint8_t*>(y)[k] = saturateRound<uint8_t>(r, zp);
  else
    static_cast<int8_t*>(y)[k] = saturateRound<int8_t>(r, zp);
}

/// f32 multiplier s_a * s_b / s_y, computed in f32 as the ONNX reference does.
double multiplier(double sa, double sb, double sy) { return double(float(float(sa) * float(sb)) / float(sy)); }

// ---- MatMulInteger, QLinearMatMul ----------------------------------------------------------

/// numpy.matmul geometry: per output batch the element offsets of A's and B's matrices.
struct MatGeometry {
  int64_t M = 0, K = 0, N = 0;
  std::vector<int64_t> aOff, bOff;
};

Status matGeometry(const KernelContext& ctx, size_t ia, size_t ib, MatGeometry* g) {
  Shape as = ctx.inputTypes[ia].shape, bs = ctx.inputTypes[ib].shape;
  if (as.empty() || bs.empty()) return opError(ctx, "A and B must have rank >= 1");
  const bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec) as.insert(as.begin(), 1);
  if (bVec) bs.push_back(1);
  g->M = as[as.size() - 2];
  g->K = as.back();
  g->N = bs.back();
  if (bs[bs.size() - 2] != g->K)
    return opError(ctx, "inner dimensions differ: " + shapeToString(ctx.inputTypes[ia].shape) +
                            " x " + shapeToString(ctx.inputTypes[ib].shape));
  Shape ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch(std::max(ba.size(), bb.size()), 1);
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t da = i + ba.size() >= batch.size() ? ba[i + ba.size() - batch.size()] : 1;
    const int64_t db = i + bb.size() >= batch.size() ? bb[i + bb.size() - batch.size()] : 1;
    if (da != db && da != 1 && db != 1) return opError(ctx, "batch dimensions do not broadcast");
    batch[i] = da == 1 ? db : da;
  }
  Shape ys = batch;
  if (!aVec) ys.push_back(g->M);
  if (!bVec) ys.push_back(g->N);
  if (ctx.outputTypes[0].shape != ys)
    return opError(ctx, "output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not " +
                            shapeToString(ys));
  std::vector<int64_t> sa = broadcastStrides(ba, batch), sb = broadcastStrides(bb, batch);
  forEachStrided<2>(batch, {sa.data(), sb.data()}, {0, 0},
                    [&](int64_t, const std::array<int64_t, 2>& o) {
                      g->aOff.push_back(o[0] * g->M * g->K);
                      g->bOff.push_back(o[1] * g->K * g->N);
                    });
  return Status::ok();
}

/// acc(b, m, n) = sum_k (A - azp[m]) (B - bzp[n]) in i32, then store(r, n, acc) per element.
template <typename Store>
void integerMatMul(const MatGeometry& g, const Tensor& A, const Tensor& B, const PerIndex& azp,
                   const PerIndex& bzp, Store&& store) {
  std::vector<int32_t> acc(g.N);
  for (size_t b = 0; b < g.aOff.size(); ++b)
    for (int64_t m = 0; m < g.M; ++m) {
      std::fill(acc.begin(), acc.end(), 0);
      const int32_t za = int32_t(azp.at(m));
      for (int64_t k = 0; k < g.K; ++k) {
        const int32_t a = intAt(&A, g.aOff[b] + m * g.K + k) - za;
        for (int64_t n = 0; n < g.N; ++n)
          acc[n] += a * (intAt(&B, g.bOff[b] + k * g.N + n) - int32_t(bzp.at(n)));
      }
      const int64_t row = int64_t(b) * g.M + m;
      for (int64_t n = 0; n < g.N; ++n) store(row * g.N + n, m, n, acc[n]);
    }
}

Status createMatMulInteger(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.outputTypes[0].dtype != DType::I32) return opError(ctx, "Y must be i32");
  auto g = std::make_shared<MatGeometry>();
  TANDEM_RETURN_IF_ERROR(matGeometry(ctx, 0, 1, g.get()));
  const OpName op(ctx);
  const ConstOperands consts(ctx, 2);
  return makeKernel(out, [g, op, consts](const Inputs& in, const Outputs& outs) -> Status {
    PerIndex azp, bzp;
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 2), g->M, "a_zero_point (per row of A)", &azp));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 3), g->N, "b_zero_point (per column of B)", &bzp));
    int32_t* y = outs[0]->data<int32_t>();
    integerMatMul(*g, *in[0], *in[1], azp, bzp,
                  [&](int64_t k, int64_t, int64_t, int32_t acc) { y[k] = acc; });
    return Status::ok();
  });
}

/// QLinearMatMul, and (9 inputs) Tandem's QLinearMatMulBias: B[n] (i32) joins each accumulator
/// of column n before the requantization, as QLinearConv's B does.
Status createQLinearMatMul(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const size_t arity = ctx.opType == "QLinearMatMulBias" ? 9 : 8;
  if (ctx.inputTypes.size() != arity) return opError(ctx, "expects " + std::to_string(arity) + " inputs");
  if (arity == 9 && ctx.inputTypes[8].dtype != DType::I32) return opError(ctx, "B must be i32");
  const DType yt = ctx.outputTypes[0].dtype;
  if ((yt != DType::U8 && yt != DType::I8) || yt != ctx.inputTypes[7].dtype)
    return opError(ctx, "y must be u8 or i8, with y_zero_point's dtype");
  auto g = std::make_shared<MatGeometry>();
  TANDEM_RETURN_IF_ERROR(matGeometry(ctx, 0, 3, g.get()));
  const OpName op(ctx);
  const ConstOperands consts(ctx);
  return makeKernel(out, [g, op, consts, yt](const Inputs& in, const Outputs& outs) -> Status {
    PerIndex as, azp, bs, bzp, ys, yzp;
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 1), g->M, "a_scale (per row of a)", &as));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 2), g->M, "a_zero_point (per row of a)", &azp));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 4), g->N, "b_scale (per column of b)", &bs));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 5), g->N, "b_zero_point (per column of b)", &bzp));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 6), 1, "y_scale", &ys));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 7), 1, "y_zero_point", &yzp));
    const Tensor* B = in.size() > 8 ? consts.get(in, 8) : nullptr;
    if (B && B->numel() != g->N)
      return opError(op, "B must have " + std::to_string(g->N) + " elements (one per column of b), got " +
                             shapeToString(B->shape()));
    void* y = outs[0]->raw();
    integerMatMul(*g, *in[0], *in[3], azp, bzp, [&](int64_t k, int64_t m, int64_t n, int32_t acc) {
      // in i32 (wrapping, as an accumulator starting at B would)
      if (B) acc = int32_t(uint32_t(acc) + uint32_t(B->data<int32_t>()[n]));
      storeRequantized(double(acc) * multiplier(as.at(m), bs.at(n), ys.at(0)), yzp.at(0), yt, y, k);
    });
    return Status::ok();
  });
}

/// Tandem's DynamicQuantizeMatMul (ONNX Runtime's contrib op): A quantized by DynamicQuantizeLinear
/// over all of A, the i32 product with B - b_zero_point, then float(acc) * float(a_scale *
/// b_scale[n]) (+ bias[n]): the f32 arithmetic of the Cast and Muls it replaces, step for step.
Status createDynamicQuantizeMatMul(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() < 3 || ctx.inputTypes.size() > 5) return opError(ctx, "expects 3 to 5 inputs");
  if (ctx.outputTypes[0].dtype != DType::F32) return opError(ctx, "Y must be f32");
  auto g = std::make_shared<MatGeometry>();
  TANDEM_RETURN_IF_ERROR(matGeometry(ctx, 0, 1, g.get()));
  const OpName op(ctx);
  const ConstOperands consts(ctx, 2);
  return makeKernel(out, [g, op, consts](const Inputs& in, const Outputs& outs) -> Status {
    PerIndex bs, bzp, bias;
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 2), g->N, "b_scale (per column of B)", &bs));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 3), g->N, "b_zero_point (per column of B)", &bzp));
    const Tensor* b = in.size() > 4 ? consts.get(in, 4) : nullptr;
    if (b && b->numel() != g->N)
      return opError(op, "bias must have " + std::to_string(g->N) + " elements, got " + shapeToString(b->shape()));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, b, g->N, "bias", &bias));
    const Tensor& A = *in[0];
    Tensor q = Tensor::alloc(DType::U8, A.shape());
    const DynamicQuantization d = dynamicQuantization(A.data<float>(), A.numel());
    dynamicQuantize(A.data<float>(), A.numel(), d, q.data<uint8_t>());
    PerIndex azp;
    azp.v = {double(d.zeroPoint)};
    float* y = outs[0]->data<float>();
    integerMatMul(*g, q, *in[1], azp, bzp, [&](int64_t k, int64_t, int64_t n, int32_t acc) {
      y[k] = float(acc) * float(d.scale * float(bs.at(n)));
      if (!bias.v.empty()) y[k] += float(bias.at(n));
    });
    return Status::ok();
  });
}

// ---- ConvInteger, QLinearConv --------------------------------------------------------------

struct ConvPlan {
  int64_t N = 0, C = 0, M = 0, group = 1, Pin = 0, Pout = 0, K = 0;
  WindowTable table;
};

/// X is operand xi, W operand wi; Y is output 0. Conv-11's geometry and window table.
Status convPlan(const KernelContext& ctx, size_t xi, size_t wi, ConvPlan* p) {
  const Shape& xs = ctx.inputTypes[xi].shape;
  const Shape& ws = ctx.inputTypes[wi].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  if (xs.size() < 3 || ws.size() != xs.size() || ys.size() != xs.size())
    return opError(ctx, "x, w and y must be images of one rank >= 3, got " + shapeToString(xs) +
                            ", " + shapeToString(ws) + ", " + shapeToString(ys));
  const size_t ns = xs.size() - 2;
  p->group = ctx.attrs->getInt("group", 1);
  p->N = xs[0];
  p->C = xs[1];
  p->M = ws[0];
  if (p->group < 1 || p->C % p->group || p->M % p->group || ws[1] * p->group != p->C ||
      ys[0] != p->N || ys[1] != p->M)
    return opError(ctx, "w " + shapeToString(ws) + " does not fit x " + shapeToString(xs) +
                            " and y " + shapeToString(ys) + " with group " + std::to_string(p->group));
  const Shape inS(xs.begin() + 2, xs.end()), outS(ys.begin() + 2, ys.end());
  const std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  std::vector<int64_t> strides, dilations, pb, pe;
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "strides", ns, 1, &strides));
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "dilations", ns, 1, &dilations));
  for (size_t i = 0; i < ns; ++i)
    if (strides[i] < 1 || dilations[i] < 1) return opError(ctx, "strides and dilations must be >= 1");
  TANDEM_RETURN_IF_ERROR(windowBeginPads(ctx, inS, outS, kernel, strides, dilations, &pb, &pe));
  TANDEM_RETURN_IF_ERROR(windowTable(ctx, outS, inS, kernel, strides, dilations, pb, &p->table));
  p->Pin = numElements(inS);
  p->Pout = numElements(outS);
  p->K = numElements(kernel);
  return Status::ok();
}

/// acc(n, m, p) = B[m] + sum (x - xzp) (w - wzp[m]) over the window; padding reads x_zero_point
/// (contributes 0), as ONNX pads the shifted input with zeros.
template <typename Store>
void integerConv(const ConvPlan& p, const Tensor& X, const Tensor& W, int32_t xzp,
                 const PerIndex& wzp, const Tensor* B, Store&& store) {
  const int64_t Cg = p.C / p.group, Mg = p.M / p.group;
  std::vector<int32_t> acc(p.Pout);
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t m = 0; m < p.M; ++m) {
      const int64_t grp = m / Mg;
      std::fill(acc.begin(), acc.end(), B ? intAt(B, m) : 0);
      const int32_t zw = int32_t(wzp.at(m));
      for (int64_t c = 0; c < Cg; ++c) {
        const int64_t xBase = (n * p.C + grp * Cg + c) * p.Pin;
        for (int64_t kk = 0; kk < p.K; ++kk) {
          const int32_t wv = intAt(&W, (m * Cg + c) * p.K + kk) - zw;
          const int32_t* t = p.table.data() + kk * p.Pout;
          for (int64_t q = 0; q < p.Pout; ++q)
            if (t[q] >= 0) acc[q] += wv * (intAt(&X, xBase + t[q]) - xzp);
        }
      }
      for (int64_t q = 0; q < p.Pout; ++q) store((n * p.M + m) * p.Pout + q, m, acc[q]);
    }
}

Status createConvInteger(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.outputTypes[0].dtype != DType::I32) return opError(ctx, "y must be i32");
  auto p = std::make_shared<ConvPlan>();
  TANDEM_RETURN_IF_ERROR(convPlan(ctx, 0, 1, p.get()));
  const OpName op(ctx);
  const ConstOperands consts(ctx, 2);
  return makeKernel(out, [p, op, consts](const Inputs& in, const Outputs& outs) -> Status {
    PerIndex xzp, wzp;
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 2), 1, "x_zero_point", &xzp));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 3), p->M, "w_zero_point (per output channel)", &wzp));
    int32_t* y = outs[0]->data<int32_t>();
    integerConv(*p, *in[0], *in[1], int32_t(xzp.at(0)), wzp, nullptr,
                [&](int64_t k, int64_t, int32_t acc) { y[k] = acc; });
    return Status::ok();
  });
}

Status createQLinearConv(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() < 8) return opError(ctx, "expects 8 or 9 inputs");
  const DType yt = ctx.outputTypes[0].dtype;
  if ((yt != DType::U8 && yt != DType::I8) || yt != ctx.inputTypes[7].dtype)
    return opError(ctx, "y must be u8 or i8, with y_zero_point's dtype");
  if (inputPresent(ctx, 8) && ctx.inputTypes[8].dtype != DType::I32) return opError(ctx, "B must be i32");
  auto p = std::make_shared<ConvPlan>();
  TANDEM_RETURN_IF_ERROR(convPlan(ctx, 0, 3, p.get()));
  const OpName op(ctx);
  const ConstOperands consts(ctx);
  return makeKernel(out, [p, op, consts, yt](const Inputs& in, const Outputs& outs) -> Status {
    PerIndex xs, xzp, ws, wzp, ys, yzp, b;
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 1), 1, "x_scale", &xs));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 2), 1, "x_zero_point", &xzp));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 4), p->M, "w_scale (per output channel)", &ws));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 5), p->M, "w_zero_point (per output channel)", &wzp));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 6), 1, "y_scale", &ys));
    TANDEM_RETURN_IF_ERROR(readPerIndex(op, consts.get(in, 7), 1, "y_zero_point", &yzp));
    const Tensor* B = consts.get(in, 8);
    if (B && B->numel() != p->M)
      return opError(op, "B must have one value per output channel (" + std::to_string(p->M) + ")");
    void* y = outs[0]->raw();
    integerConv(*p, *in[0], *in[3], int32_t(xzp.at(0)), wzp, B, [&](int64_t k, int64_t m, int32_t acc) {
      storeRequantized(double(acc) * multiplier(xs.at(0), ws.at(m), ys.at(0)), yzp.at(0), yt, y, k);
    });
    return Status::ok();
  });
}

bool quantized(DType t) { return t == DType::U8 || t == DType::I8; }

}  // namespace

void registerQuantizedMathKernels(KernelRegistry& r) {
  auto twoQuantized = [](size_t ia, size_t ib) {
    return [ia, ib](const std::vector<DType>& in) {
      return in.size() > std::max(ia, ib) && quantized(in[ia]) && quantized(in[ib]);
    };
  };
  addRef(r, "MatMulInteger", twoQuantized(0, 1), "A, B u8,i8", createMatMulInteger);
  addRef(r, "ConvInteger", twoQuantized(0, 1), "x, w u8,i8", createConvInteger);
  addRef(r, "QLinearMatMul", twoQuantized(0, 3), "a, b u8,i8; scales f32", createQLinearMatMul);
  addRef(r, "QLinearMatMulBias", twoQuantized(0, 3), "a, b u8,i8; scales f32; B i32",
         createQLinearMatMul);
  addRef(
      r, "DynamicQuantizeMatMul",
      [](const std::vector<DType>& in) {
        return in.size() >= 2 && in[0] == DType::F32 && quantized(in[1]);
      },
      "A f32; B u8,i8", createDynamicQuantizeMatMul);
  addRef(r, "QLinearConv", twoQuantized(0, 3), "x, w u8,i8; scales f32; B i32", createQLinearConv);
}

}  // namespace ref
}  // namespace tandem

// The reference kernel of Tandem's DequantizeMatMul and the operand checks (DequantizeMatMul.h).
#include "runtime/cpu/ref/DequantizeMatMul.h"

#include <algorithm>

#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {

Status dequantizeMatMulShape(const KernelContext& ctx, DequantizeMatMulShape* s) {
  if (ctx.inputTypes.size() < 3 || ctx.inputTypes.size() > 5)
    return opError(ctx, "expects 3 to 5 inputs (A, B, b_scale[, b_zero_point[, bias]])");
  const Shape& a = ctx.inputTypes[0].shape;
  const Shape& b = ctx.inputTypes[1].shape;
  if (ctx.inputTypes[0].dtype != DType::F32 || ctx.outputTypes[0].dtype != DType::F32)
    return opError(ctx, "A and Y must be f32");
  if (b.size() != 2 || a.size() < 2 || a.back() != b[0])
    return opError(ctx, "A [..., M, K] and B [K, N] do not match: " + shapeToString(a) + ", " +
                            shapeToString(b));
  s->K = b[0];
  s->N = b[1];
  s->rows = product(a, 0, a.size() - 1);
  Shape y = a;
  y.back() = s->N;
  if (ctx.outputTypes[0].shape != y)
    return opError(ctx, "Y must have shape " + shapeToString(y) + ", got " +
                            shapeToString(ctx.outputTypes[0].shape));
  s->blockSize = ctx.attrs->getInt("block_size", 0);
  if (s->blockSize < 0) return opError(ctx, "block_size must be >= 0");
  const int64_t blocks = s->blockSize > 0 ? (s->K + s->blockSize - 1) / s->blockSize : 1;
  s->scaleCount = numElements(ctx.inputTypes[2].shape);
  if (ctx.inputTypes[2].dtype != DType::F32 ||
      (s->scaleCount != blocks * s->N && !(s->blockSize == 0 && s->scaleCount == 1)))
    return opError(ctx, "b_scale must be f32 with " +
                            (s->blockSize > 0 ? std::to_string(blocks * s->N) + " values (blocks x N)"
                                              : "1 or " + std::to_string(s->N) + " values") +
                            ", got " + shapeToString(ctx.inputTypes[2].shape));
  s->hasZeroPoint = ctx.inputTypes.size() > 3 && ctx.inputTypes[3].present();
  if (s->hasZeroPoint && (ctx.inputTypes[3].dtype != ctx.inputTypes[1].dtype ||
                          numElements(ctx.inputTypes[3].shape) != s->scaleCount))
    return opError(ctx, "b_zero_point must have B's dtype and b_scale's shape");
  s->hasBias = ctx.inputTypes.size() > 4 && ctx.inputTypes[4].present();
  if (s->hasBias && (ctx.inputTypes[4].dtype != DType::F32 || numElements(ctx.inputTypes[4].shape) != s->N))
    return opError(ctx, "bias must be f32 [" + std::to_string(s->N) + "]");
  return Status::ok();
}

bool dequantizeMatMulConstants(const KernelContext& ctx) {
  for (size_t i = 1; i < ctx.inputTypes.size(); ++i)
    if (ctx.inputTypes[i].present() && (i >= ctx.constInputs.size() || !ctx.constInputs[i]))
      return false;
  return true;
}

namespace {

/// Which scale and zero point element B[k, n] uses.
int64_t paramIndex(const DequantizeMatMulShape& s, int64_t k, int64_t n) {
  if (s.scaleCount == 1) return 0;
  return s.blockSize > 0 ? (k / s.blockSize) * s.N + n : n;
}

template <typename Q>
void dequantizeB(const DequantizeMatMulShape& s, const Q* q, const float* scale, const Q* zp,
                 float* w) {
  for (int64_t k = 0; k < s.K; ++k)
    for (int64_t n = 0; n < s.N; ++n) {
      const int64_t i = paramIndex(s, k, n);
      w[k * s.N + n] = float(int32_t(q[k * s.N + n]) - (zp ? int32_t(zp[i]) : 0)) * scale[i];
    }
}

}  // namespace

Status createDequantizeMatMulRef(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  DequantizeMatMulShape s;
  TANDEM_RETURN_IF_ERROR(dequantizeMatMulShape(ctx, &s));
  const ConstOperands consts(ctx, 1);
  return makeKernel(out, [s, consts](const Inputs& in, const Outputs& outs) -> Status {
    const Tensor* B = consts.get(in, 1);
    const Tensor* zp = s.hasZeroPoint ? consts.get(in, 3) : nullptr;
    const Tensor* bias = s.hasBias ? consts.get(in, 4) : nullptr;
    const float* scale = consts.get(in, 2)->data<float>();
    std::vector<float> w(s.K * s.N);
    if (B->dtype() == DType::U8)
      dequantizeB(s, B->data<uint8_t>(), scale, zp ? zp->data<uint8_t>() : nullptr, w.data());
    else
      dequantizeB(s, B->data<int8_t>(), scale, zp ? zp->data<int8_t>() : nullptr, w.data());
    const float* a = in[0]->data<float>();
    float* y = outs[0]->data<float>();
    std::vector<double> acc(s.N);
    for (int64_t r = 0; r < s.rows; ++r) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = 0; k < s.K; ++k) {
        const double av = a[r * s.K + k];
        const float* wk = w.data() + k * s.N;
        for (int64_t n = 0; n < s.N; ++n) acc[n] += av * wk[n];
      }
      for (int64_t n = 0; n < s.N; ++n)
        y[r * s.N + n] = float(acc[n]) + (bias ? bias->data<float>()[n] : 0.f);
    }
    return Status::ok();
  });
}

void registerDequantizeMatMulKernels(KernelRegistry& r) {
  addRef(
      r, "DequantizeMatMul",
      [](const std::vector<DType>& in) {
        return in.size() >= 3 && in[0] == DType::F32 && (in[1] == DType::U8 || in[1] == DType::I8) &&
               in[2] == DType::F32;
      },
      "A f32; B u8,i8; b_scale f32", createDequantizeMatMulRef);
}

}  // namespace ref
}  // namespace tandem

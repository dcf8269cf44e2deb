// Reference matrix kernels: Gemm (ONNX Gemm-13), MatMul (numpy matmul semantics, MatMul-13) and
// Det-11 (batched determinants).
#include <algorithm>

#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

/// One output row of a matrix product: acc[n] = sum_k A(m,k) * B[k*N + n], B row-major KxN.
/// Accumulates in AccOf<T> (f64 for f32) so the reference stays close to the exact product.
template <typename T>
void productRow(int64_t N, int64_t K, const T* aRow, int64_t sak, const T* B, AccOf<T>* acc) {
  std::fill(acc, acc + N, AccOf<T>(0));
  for (int64_t k = 0; k < K; ++k) {
    const AccOf<T> a = aRow[k * sak];
    const T* b = B + k * N;
    for (int64_t n = 0; n < N; ++n) acc[n] += a * AccOf<T>(b[n]);
  }
}

// ---- Gemm: Y = alpha * A' * B' + beta * C, C unidirectionally broadcast to (M, N) ----------

Status createGemm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() < 2) return opError(ctx, "expects inputs A, B and optional C");
  const Shape& as = ctx.inputTypes[0].shape;
  const Shape& bs = ctx.inputTypes[1].shape;
  if (as.size() != 2 || bs.size() != 2)
    return opError(ctx,
                   "A and B must be 2-D, got " + shapeToString(as) + " and " + shapeToString(bs));
  const bool transA = ctx.attrs->getInt("transA", 0) != 0;
  const bool transB = ctx.attrs->getInt("transB", 0) != 0;
  const double alpha = ctx.attrs->getFloat("alpha", 1.0f);
  const double beta = ctx.attrs->getFloat("beta", 1.0f);
  const int64_t M = transA ? as[1] : as[0], K = transA ? as[0] : as[1];
  const int64_t KB = transB ? bs[1] : bs[0], N = transB ? bs[0] : bs[1];
  if (K != KB)
    return opError(ctx, "inner dimensions differ: A' is " + std::to_string(M) + "x" +
                            std::to_string(K) + ", B' is " + std::to_string(KB) + "x" +
                            std::to_string(N));
  const Shape ys = {M, N};
  if (ctx.outputTypes[0].shape != ys)
    return opError(ctx, "output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not " +
                            shapeToString(ys));
  const bool hasC = inputPresent(ctx, 2);
  std::vector<int64_t> cs = {0, 0};
  if (hasC) {
    if (!broadcastsTo(ctx.inputTypes[2].shape, ys))
      return opError(ctx, "C of shape " + shapeToString(ctx.inputTypes[2].shape) +
                              " does not broadcast to " + shapeToString(ys));
    cs = broadcastStrides(ctx.inputTypes[2].shape, ys);
  }
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* A = in[0]->data<T>();
      const T* B = in[1]->data<T>();
      const Tensor* Ct = inputAt(in, 2);
      const T* C = Ct ? Ct->data<T>() : nullptr;
      T* Y = outs[0]->data<T>();
      // Row m of A' starts at A + m*sam and steps by sak along k.
      const int64_t sam = transA ? 1 : K, sak = transA ? M : 1;
      std::vector<T> bt;
      if (transB) {
        bt.resize(K * N);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < K; ++k) bt[k * N + n] = B[n * K + k];
        B = bt.data();
      }
#pragma omp parallel num_threads(threads) if (M * N * K > 32768)
      {
        std::vector<AccOf<T>> acc(N);
#pragma omp for schedule(static)
        for (int64_t m = 0; m < M; ++m) {
          productRow<T>(N, K, A + m * sam, sak, B, acc.data());
          for (int64_t n = 0; n < N; ++n) {
            double v = alpha * double(acc[n]);
            if (C) v += beta * double(C[m * cs[0] + n * cs[1]]);
            Y[m * N + n] = T(v);
          }
        }
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- MatMul: numpy semantics (1-D operands promoted then squeezed, batch dims broadcast) -----

Status createMatMul(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() != 2) return opError(ctx, "expects 2 inputs");
  Shape as = ctx.inputTypes[0].shape, bs = ctx.inputTypes[1].shape;
  if (as.empty() || bs.empty()) return opError(ctx, "operands must have rank >= 1");
  const bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec) as.insert(as.begin(), 1);
  if (bVec) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back();
  const int64_t KB = bs[bs.size() - 2], N = bs.back();
  if (K != KB)
    return opError(ctx, "inner dimensions differ: " + shapeToString(ctx.inputTypes[0].shape) +
                            " x " + shapeToString(ctx.inputTypes[1].shape));
  Shape ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch(std::max(ba.size(), bb.size()), 1);
  for (size_t i = 0; i < batch.size(); ++i) {
    int64_t da = i + ba.size() >= batch.size() ? ba[i + ba.size() - batch.size()] : 1;
    int64_t db = i + bb.size() >= batch.size() ? bb[i + bb.size() - batch.size()] : 1;
    if (da != db && da != 1 && db != 1)
      return opError(
          ctx, "batch dimensions do not broadcast: " + shapeToString(ctx.inputTypes[0].shape) +
                   " x " + shapeToString(ctx.inputTypes[1].shape));
    batch[i] = da == 1 ? db : da;
  }
  Shape ys = batch;
  if (!aVec) ys.push_back(M);
  if (!bVec) ys.push_back(N);
  if (ctx.outputTypes[0].shape != ys)
    return opError(ctx, "output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not " +
                            shapeToString(ys));
  // Element offsets of each batch's A and B matrices, in output batch order.
  std::vector<int64_t> sa = broadcastStrides(ba, batch), sb = broadcastStrides(bb, batch);
  std::vector<int64_t> aOff, bOff;
  const int64_t nb = numElements(batch);
  aOff.reserve(nb);
  bOff.reserve(nb);
  forEachStrided<2>(batch, {sa.data(), sb.data()}, {0, 0},
                    [&](int64_t, const std::array<int64_t, 2>& o) {
                      aOff.push_back(o[0] * M * K);
                      bOff.push_back(o[1] * K * N);
                    });
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchNumeric(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* A = in[0]->data<T>();
      const T* B = in[1]->data<T>();
      T* Y = outs[0]->data<T>();
      const int64_t rows = nb * M;
#pragma omp parallel num_threads(threads) if (rows * N * K > 32768)
      {
        std::vector<AccOf<T>> acc(N);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t b = r / M, m = r % M;
          productRow<T>(N, K, A + aOff[b] + m * K, 1, B + bOff[b], acc.data());
          T* y = Y + r * N;
          for (int64_t n = 0; n < N; ++n) y[n] = T(acc[n]);
        }
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- Det -------------------------------------------------------------------------------------

// Determinant of each M x M matrix of X [*, M, M] by LU factorisation with partial pivoting, in
// f64 whatever the dtype (a pivot-free or f32 elimination loses digits on ill-conditioned input).
Status createDet(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  if (xs.size() < 2 || xs[xs.size() - 1] != xs[xs.size() - 2])
    return opError(ctx, "X must be [*, M, M], got " + shapeToString(xs));
  const Shape ys(xs.begin(), xs.end() - 2);
  if (ctx.outputTypes[0].shape != ys)
    return opError(ctx, "output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not " +
                            shapeToString(ys));
  const int64_t M = xs.back(), count = numElements(ys);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      T* Y = outs[0]->data<T>();
      std::vector<double> a(M * M);
      for (int64_t b = 0; b < count; ++b) {
        for (int64_t i = 0; i < M * M; ++i) a[i] = double(X[b * M * M + i]);
        double det = 1;
        for (int64_t k = 0; k < M && det != 0; ++k) {
          int64_t p = k;
          for (int64_t i = k + 1; i < M; ++i)
            if (std::fabs(a[i * M + k]) > std::fabs(a[p * M + k])) p = i;
          if (a[p * M + k] == 0) {
            det = 0;
            break;
          }
          if (p != k) {
            for (int64_t j = 0; j < M; ++j) std::swap(a[k * M + j], a[p * M + j]);
            det = -det;
          }
          det *= a[k * M + k];
          for (int64_t i = k + 1; i < M; ++i) {
            const double f = a[i * M + k] / a[k * M + k];
            for (int64_t j = k + 1; j < M; ++j) a[i * M + j] -= f * a[k * M + j];
          }
        }
        Y[b] = T(det);
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "X must be f32 or f64");
  return makeKernel(out, std::move(fn));
}

}  // namespace

void registerMathKernels(KernelRegistry& r) {
  const std::vector<DType> types = {DType::F32, DType::F64, DType::I32, DType::I64};
  addRef(r, "Gemm", acceptsAllSame(types), dtypesToText(types), createGemm);
  addRef(r, "MatMul", acceptsAllSame(types), dtypesToText(types), createMatMul);
  addRef(r, "Det", floatTypes(), createDet);
}

}  // namespace ref
}  // namespace tandem

// Normalisations: Softmax-13/LogSoftmax-13, LayerNormalization-17 and Tandem's
// LayerNormalizationGrad (autodiff: a block per row, then a block per 32 columns), RMSNormalization-23,
// InstanceNormalization-6 and GroupNormalization-21 as generated kernels (one block per row or
// group, block-wide reductions), RotaryEmbedding-23 (one thread
// per rotated pair), BatchNormalization (inference) through cuDNN for 4-D
// inputs with epsilon >= CUDNN_BN_MIN_EPSILON and fewer than 2^31 elements (cuDNN's int sizes),
// otherwise a generated per-channel kernel (64-bit indices).
#include <climits>

#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/Generated.h"

namespace tandem {
namespace cuda {

namespace {

std::string softmaxName(bool log) { return log ? "td_logsoftmax_f32" : "td_softmax_f32"; }

// Row r of the [outer, axis, inner] view starts at (r / inner) * axisLen * inner + r % inner and
// steps by inner.
std::string softmaxSource(bool log) {
  return "extern \"C\" __global__ void " + softmaxName(log) +
         "(i64 rows, i64 axisLen, i64 inner, float* __restrict__ out, const float* __restrict__ in) {\n" +
         R"(  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    i64 base = (row / inner) * axisLen * inner + row % inner;
    float m = -__int_as_float(0x7f800000);
    for (i64 k = threadIdx.x; k < axisLen; k += blockDim.x) m = fmaxf(m, in[base + k * inner]);
    m = td_block_max(m);
    float s = 0.f;
    for (i64 k = threadIdx.x; k < axisLen; k += blockDim.x) s += expf(in[base + k * inner] - m);
    s = td_block_sum(s);
    for (i64 k = threadIdx.x; k < axisLen; k += blockDim.x) {
      float x = in[base + k * inner] - m;
      out[base + k * inner] = )" + std::string(log ? "x - logf(s)" : "expf(x) / s") + R"(;
    }
  }
}
)";
}

class SoftmaxKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init(bool log) { return use(softmaxName(log), softmaxSource(log), &fn_); }
  int64_t rows = 0, axisLen = 0, inner = 0;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* o = outs[0]->raw();
    const void* i = ins[0]->raw();
    void* args[] = {&rows, &axisLen, &inner, &o, &i};
    return launchBlocks(*dc_, fn(fn_), rows, axisLen >= 256 ? 256 : 64, args);
  }

 private:
  size_t fn_ = 0;
};

Status createSoftmax(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  auto k = std::make_unique<SoftmaxKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init(ctx.opType == "LogSoftmax"));
  if (xs.empty()) {
    k->rows = 1, k->axisLen = 1, k->inner = 1;
  } else {
    int64_t axis;
    if (!ref::normalizeAxis(ctx.attrs->getInt("axis", -1), (int64_t)xs.size(), &axis))
      return Status::error(opLabel(ctx) + ": axis out of range for rank " + std::to_string(xs.size()));
    k->axisLen = xs[axis];
    k->inner = ref::product(xs, axis + 1, xs.size());
    k->rows = ref::product(xs, 0, axis) * k->inner;
  }
  if (ctx.outputTypes[0].shape != xs) return Status::error(opLabel(ctx) + ": output shape differs from the input");
  *out = std::move(k);
  return Status::ok();
}

const char* kLayerNormName = "td_layernorm_f32";

std::string layerNormSource() {
  return std::string("extern \"C\" __global__ void ") + kLayerNormName +
         "(i64 rows, i64 cols, float eps, float* __restrict__ out, const float* __restrict__ x, "
         "const float* __restrict__ scale, const float* __restrict__ bias, float* __restrict__ mean, "
         "float* __restrict__ invstd) {\n" +
         R"(  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float s = 0.f;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) s += xr[k];
    float mu = td_block_sum(s) / (float)cols;
    float v = 0.f;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) { float d = xr[k] - mu; v += d * d; }
    float inv = 1.f / sqrtf(td_block_sum(v) / (float)cols + eps);
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x)
      out[row * cols + k] = (xr[k] - mu) * inv * scale[k] + (bias ? bias[k] : 0.f);
    if (threadIdx.x == 0) {
      if (mean) mean[row] = mu;
      if (invstd) invstd[row] = inv;
    }
  }
}
)";
}

class LayerNormKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init() { return use(kLayerNormName, layerNormSource(), &fn_); }
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* o = outs[0]->raw();
    const void* x = ins[0]->raw();
    const void* s = ins[1]->raw();
    const void* b = ins.size() > 2 && ins[2] ? ins[2]->raw() : nullptr;
    void* mean = outs.size() > 1 && outs[1] ? outs[1]->raw() : nullptr;
    void* inv = outs.size() > 2 && outs[2] ? outs[2]->raw() : nullptr;
    void* args[] = {&rows, &cols, &eps, &o, &x, &s, &b, &mean, &inv};
    return launchBlocks(*dc_, fn(fn_), rows, cols >= 256 ? 256 : 64, args);
  }

 private:
  size_t fn_ = 0;
};

// The [rows, cols] view of X for a normalisation over the dims from attribute axis (default
// -1) on: LayerNormalization and RMSNormalization.
Status normalizedRows(const KernelContext& ctx, int64_t* rows, int64_t* cols) {
  const Shape& xs = ctx.inputTypes[0].shape;
  int64_t axis;
  if (!ref::normalizeAxis(ctx.attrs->getInt("axis", -1), (int64_t)xs.size(), &axis))
    return Status::error(opLabel(ctx) + ": axis out of range for rank " + std::to_string(xs.size()));
  *rows = ref::product(xs, 0, axis);
  *cols = ref::product(xs, axis, xs.size());
  return Status::ok();
}

Status createLayerNorm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  auto k = std::make_unique<LayerNormKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init());
  TANDEM_RETURN_IF_ERROR(normalizedRows(ctx, &k->rows, &k->cols));
  k->eps = ctx.attrs->getFloat("epsilon", 1e-5f);
  // The CUDA kernel takes Scale and B with one value per normalised element (the usual case);
  // other broadcasts of them are an error here (the CPU kernel has them).
  for (size_t i = 1; i < 3 && i < ctx.inputTypes.size(); ++i)
    if (ctx.inputTypes[i].present() && numElements(ctx.inputTypes[i].shape) != k->cols)
      return Status::error(opLabel(ctx) + ": the CUDA kernel needs " + (i == 1 ? "Scale" : "B") + " to have " +
                           std::to_string(k->cols) + " elements, got " + shapeToString(ctx.inputTypes[i].shape));
  for (size_t i = 1; i < 3 && i < ctx.outputTypes.size(); ++i)
    if (ctx.outputTypes[i].present() &&
        (ctx.outputTypes[i].dtype != DType::F32 || numElements(ctx.outputTypes[i].shape) != k->rows))
      return Status::error(opLabel(ctx) + ": Mean/InvStdDev outputs must be f32 with " + std::to_string(k->rows) + " elements");
  *out = std::move(k);
  return Status::ok();
}

// LayerNormalizationGrad (TandemOps.td), f32: td_layernorm_grad_f32, one block per row, writes
// dX and the row's mean and rstd into the workspace (2 floats a row); td_layernorm_grad_cols_f32,
// one block of 256 threads (8 rows of 32 columns) per 32 columns, sums dScale and dB over the rows
// from them (a fixed order: the same bits every run, no atomics).
const char* kLayerNormGradName = "td_layernorm_grad_f32";
const char* kLayerNormGradColsName = "td_layernorm_grad_cols_f32";

std::string layerNormGradSource() {
  return std::string("extern \"C\" __global__ void ") + kLayerNormGradName +
         "(i64 rows, i64 cols, float eps, float* __restrict__ dx, float* __restrict__ stats, "
         "const float* __restrict__ x, const float* __restrict__ dy, const float* __restrict__ scale) {\n" +
         R"(  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    const float* gr = dy + row * cols;
    float s = 0.f;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) s += xr[k];
    float mu = td_block_sum(s) / (float)cols;
    float v = 0.f;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) { float d = xr[k] - mu; v += d * d; }
    float inv = 1.f / sqrtf(td_block_sum(v) / (float)cols + eps);
    float a = 0.f, b = 0.f;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) {
      float g = gr[k] * scale[k];
      a += g;
      b += g * (xr[k] - mu) * inv;
    }
    a = td_block_sum(a) / (float)cols;
    b = td_block_sum(b) / (float)cols;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x)
      dx[row * cols + k] = inv * (gr[k] * scale[k] - a - (xr[k] - mu) * inv * b);
    if (threadIdx.x == 0) {
      stats[2 * row] = mu;
      stats[2 * row + 1] = inv;
    }
  }
}
)";
}

std::string layerNormGradColsSource() {
  return std::string("extern \"C\" __global__ void ") + kLayerNormGradColsName +
         "(i64 rows, i64 cols, float* __restrict__ dscale, float* __restrict__ dbias, "
         "const float* __restrict__ stats, const float* __restrict__ x, const float* __restrict__ dy) {\n" +
         R"(  __shared__ float sh[2][8][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  for (i64 tile = blockIdx.x; tile < (cols + 31) / 32; tile += gridDim.x) {
    const i64 c = tile * 32 + tx;
    float ps = 0.f, pb = 0.f;
    if (c < cols)
      for (i64 r = ty; r < rows; r += 8) {
        const float d = dy[r * cols + c];
        ps += d * (x[r * cols + c] - stats[2 * r]) * stats[2 * r + 1];
        pb += d;
      }
    sh[0][ty][tx] = ps;
    sh[1][ty][tx] = pb;
    __syncthreads();
    if (ty == 0 && c < cols) {
      float s = 0.f, b = 0.f;
      for (int k = 0; k < 8; ++k) { s += sh[0][k][tx]; b += sh[1][k][tx]; }
      dscale[c] = s;
      dbias[c] = b;
    }
    __syncthreads();
  }
}
)";
}

class LayerNormGradKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init() {
    TANDEM_RETURN_IF_ERROR(use(kLayerNormGradName, layerNormGradSource(), &rowsFn_));
    return use(kLayerNormGradColsName, layerNormGradColsSource(), &colsFn_);
  }
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* dx = outs[0]->raw();
    void* ds = outs[1]->raw();
    void* db = outs[2]->raw();
    void* stats = dc_->workspace;
    const void* x = ins[0]->raw();
    const void* dy = ins[1]->raw();
    const void* s = ins[2]->raw();
    void* rowArgs[] = {&rows, &cols, &eps, &dx, &stats, &x, &dy, &s};
    TANDEM_RETURN_IF_ERROR(launchBlocks(*dc_, fn(rowsFn_), rows, cols >= 256 ? 256 : 64, rowArgs));
    void* colArgs[] = {&rows, &cols, &ds, &db, &stats, &x, &dy};
    return launchBlocks(*dc_, fn(colsFn_), (cols + 31) / 32, 256, colArgs);
  }

 private:
  size_t rowsFn_ = 0, colsFn_ = 0;
};

Status createLayerNormGrad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() != 3 || ctx.outputTypes.size() != 3)
    return Status::error(opLabel(ctx) + ": expects X, dY, Scale and dX, dScale, dB");
  auto k = std::make_unique<LayerNormGradKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init());
  TANDEM_RETURN_IF_ERROR(normalizedRows(ctx, &k->rows, &k->cols));
  k->eps = ctx.attrs->getFloat("epsilon", 1e-5f);
  if (ctx.inputTypes[1].shape != ctx.inputTypes[0].shape || numElements(ctx.inputTypes[2].shape) != k->cols)
    return Status::error(opLabel(ctx) + ": needs dY of X's shape and Scale of " + std::to_string(k->cols) +
                         " elements, got " + shapeToString(ctx.inputTypes[2].shape));
  for (size_t i = 0; i < 3; ++i)
    if (ctx.inputTypes[i].dtype != DType::F32 || ctx.outputTypes[i].dtype != DType::F32)
      return Status::error(opLabel(ctx) + ": the CUDA kernel is f32 only");
  ctx.cuda->reserveWorkspace((size_t)(2 * k->rows) * sizeof(float));
  *out = std::move(k);
  return Status::ok();
}

// RMSNormalization-23: one block per row of the dims from axis on, y = x / sqrt(mean(x^2) +
// epsilon) * scale (scale of the normalized shape; a broadcast one stays on the CPU).
const char* kRmsNormName = "td_rmsnorm_f32";

std::string rmsNormSource() {
  return std::string("extern \"C\" __global__ void ") + kRmsNormName +
         "(i64 rows, i64 cols, float eps, float* __restrict__ out, const float* __restrict__ x, "
         "const float* __restrict__ scale) {\n" +
         R"(  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float v = 0.f;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) v += xr[k] * xr[k];
    float inv = 1.f / sqrtf(td_block_sum(v) / (float)cols + eps);
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) out[row * cols + k] = xr[k] * inv * scale[k];
  }
}
)";
}

class RmsNormKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init() { return use(kRmsNormName, rmsNormSource(), &fn_); }
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* o = outs[0]->raw();
    const void* x = ins[0]->raw();
    const void* s = ins[1]->raw();
    void* args[] = {&rows, &cols, &eps, &o, &x, &s};
    return launchBlocks(*dc_, fn(fn_), rows, cols >= 256 ? 256 : 64, args);
  }

 private:
  size_t fn_ = 0;
};

Status createRmsNorm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  auto k = std::make_unique<RmsNormKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init());
  TANDEM_RETURN_IF_ERROR(normalizedRows(ctx, &k->rows, &k->cols));
  k->eps = ctx.attrs->getFloat("epsilon", 1e-5f);
  if (numElements(ctx.inputTypes[1].shape) != k->cols)
    return Status::error(opLabel(ctx) + ": the CUDA kernel needs scale to have " + std::to_string(k->cols) +
                         " elements, got " + shapeToString(ctx.inputTypes[1].shape));
  *out = std::move(k);
  return Status::ok();
}

// RotaryEmbedding-23: one thread per rotated pair (b, s, h, j) and per copied feature past the
// rotary dims; the products and the sum rounded one at a time (no FMA contraction), as the CPU
// kernel computes them. X [B, H, S, head] (four) or [B, S, H head]; cos/sin rows at position_ids
// (positions) or at b * S + s.
const char* kRotaryName = "td_rotary_f32";

std::string rotarySource() {
  return std::string("extern \"C\" __global__ void ") + kRotaryName +
         "(i64 B, i64 S, i64 H, i64 head, i64 half, int four, int interleaved, i64 cacheRows, "
         "float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ cosc, "
         "const float* __restrict__ sinc, const long long* __restrict__ pos) {\n" +
         R"(  const i64 rot = 2 * half, rest = head - rot, per = half + rest, n = B * S * H * per;
  for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (i64)gridDim.x * blockDim.x) {
    i64 j = t % per, r = t / per;
    i64 h = r % H, s = (r / H) % S, b = r / (H * S);
    i64 at = four ? ((b * H + h) * S + s) * head : (b * S + s) * H * head + h * head;
    if (j >= half) {
      i64 k = rot + (j - half);
      y[at + k] = x[at + k];
      continue;
    }
    i64 c = pos ? pos[b * S + s] : b * S + s;
    if (c < 0) c = 0;
    if (c >= cacheRows) c = cacheRows - 1;
    float cv = cosc[c * half + j], sv = sinc[c * half + j];
    i64 i1 = interleaved ? 2 * j : j, i2 = interleaved ? 2 * j + 1 : j + half;
    float x1 = x[at + i1], x2 = x[at + i2];
    y[at + i1] = __fsub_rn(__fmul_rn(cv, x1), __fmul_rn(sv, x2));
    y[at + i2] = __fadd_rn(__fmul_rn(sv, x1), __fmul_rn(cv, x2));
  }
}
)";
}

class RotaryKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init() { return use(kRotaryName, rotarySource(), &fn_); }
  int64_t B = 0, S = 0, H = 0, head = 0, half = 0, cacheRows = 0;
  int four = 1, interleaved = 0;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* y = outs[0]->raw();
    const void* x = ins[0]->raw();
    const void* c = ins[1]->raw();
    const void* s = ins[2]->raw();
    const void* p = ins.size() > 3 && ins[3] ? ins[3]->raw() : nullptr;
    void* args[] = {&B, &S, &H, &head, &half, &four, &interleaved, &cacheRows, &y, &x, &c, &s, &p};
    return launchGridStride(*dc_, fn(fn_), B * S * H * (head - half), args);
  }

 private:
  size_t fn_ = 0;
};

// Position ids outside the caches are clamped on the device (the CPU kernel reports them; a
// kernel cannot fail at run time).
Status createRotary(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  auto k = std::make_unique<RotaryKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init());
  k->four = xs.size() == 4;
  if (!k->four && xs.size() != 3) return Status::error(opLabel(ctx) + ": X must be 3-D or 4-D");
  k->H = k->four ? xs[1] : ctx.attrs->getInt("num_heads", 0);
  if (k->H < 1 || (!k->four && xs[2] % k->H))
    return Status::error(opLabel(ctx) + ": num_heads must divide X's hidden size");
  k->B = xs[0];
  k->S = k->four ? xs[2] : xs[1];
  k->head = k->four ? xs[3] : xs[2] / k->H;
  int64_t rot = ctx.attrs->getInt("rotary_embedding_dim", 0);
  if (rot == 0) rot = k->head;
  if (rot < 0 || rot % 2 || rot > k->head)
    return Status::error(opLabel(ctx) + ": rotary_embedding_dim must be even and <= head size");
  k->half = rot / 2;
  k->interleaved = ctx.attrs->getInt("interleaved", 0) != 0;
  const bool positions = ctx.inputTypes.size() > 3 && ctx.inputTypes[3].present();
  const Shape& cs = ctx.inputTypes[1].shape;
  if (cs.empty() || cs.back() != k->half)
    return Status::error(opLabel(ctx) + ": cos_cache's last dim must be rotary dim / 2");
  k->cacheRows = positions ? cs[0] : k->B * k->S;
  *out = std::move(k);
  return Status::ok();
}

// InstanceNormalization-6 and GroupNormalization-21: one block per (n, group) of
// Cg = C / groups channels (InstanceNormalization: one channel a group), the mean and then the
// squared deviations from it as block sums (two passes, no cancellation), then the channel's
// scale and bias.
const char* kGroupNormName = "td_groupnorm_f32";

std::string groupNormSource() {
  return std::string("extern \"C\" __global__ void ") + kGroupNormName +
         "(i64 rows, i64 groups, i64 cg, i64 spatial, float eps, float* __restrict__ y, "
         "const float* __restrict__ x, const float* __restrict__ scale, const float* __restrict__ bias) {\n" +
         R"(  const i64 cols = cg * spatial;
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float s = 0.f;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) s += xr[k];
    float mu = td_block_sum(s) / (float)cols;
    float v = 0.f;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) { float d = xr[k] - mu; v += d * d; }
    float inv = 1.f / sqrtf(td_block_sum(v) / (float)cols + eps);
    const i64 c0 = (row % groups) * cg;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) {
      i64 c = c0 + k / spatial;
      y[row * cols + k] = (xr[k] - mu) * inv * scale[c] + bias[c];
    }
  }
}
)";
}

class GroupNormKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init() { return use(kGroupNormName, groupNormSource(), &fn_); }
  int64_t rows = 0, groups = 1, cg = 1, spatial = 1;
  float eps = 1e-5f;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* y = outs[0]->raw();
    const void* x = ins[0]->raw();
    const void* s = ins[1]->raw();
    const void* b = ins[2]->raw();
    void* args[] = {&rows, &groups, &cg, &spatial, &eps, &y, &x, &s, &b};
    return launchBlocks(*dc_, fn(fn_), rows, cg * spatial >= 256 ? 256 : 64, args);
  }

 private:
  size_t fn_ = 0;
};

Status createGroupNorm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const bool instance = ctx.opType == "InstanceNormalization";
  if (xs.size() < 2 || ctx.inputTypes.size() < 3)
    return Status::error(opLabel(ctx) + ": needs X [N, C, ...], scale and bias");
  const int64_t C = xs[1], G = instance ? C : ctx.attrs->getInt("num_groups", 0);
  if (G < 1 || C % G || numElements(ctx.inputTypes[1].shape) != C || numElements(ctx.inputTypes[2].shape) != C)
    return Status::error(opLabel(ctx) + ": needs scale and bias of [C] and a group count dividing C");
  auto k = std::make_unique<GroupNormKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init());
  k->groups = G;
  k->cg = C / G;
  k->spatial = ref::product(xs, 2, xs.size());
  k->rows = xs[0] * G;
  k->eps = ctx.attrs->getFloat("epsilon", 1e-5f);
  *out = std::move(k);
  return Status::ok();
}

const char* kBatchNormName = "td_batchnorm_f32";

std::string batchNormSource() {
  return std::string("extern \"C\" __global__ void ") + kBatchNormName +
         "(i64 n, i64 C, i64 inner, float eps, float* __restrict__ y, const float* __restrict__ x, "
         "const float* __restrict__ scale, const float* __restrict__ bias, const float* __restrict__ mean, "
         "const float* __restrict__ var) {\n" +
         R"(  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    i64 c = (i / inner) % C;
    y[i] = (x[i] - mean[c]) / sqrtf(var[c] + eps) * scale[c] + bias[c];
  }
}
)";
}

class BatchNormKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  ~BatchNormKernel() override {
    if (xDesc_) cudnnDestroyTensorDescriptor(xDesc_);
    if (pDesc_) cudnnDestroyTensorDescriptor(pDesc_);
  }
  Status init(const KernelContext& ctx) {
    const Shape& xs = ctx.inputTypes[0].shape;
    n_ = numElements(xs);
    C_ = xs[1];
    inner_ = ref::product(xs, 2, xs.size());
    eps_ = ctx.attrs->getFloat("epsilon", 1e-5f);
    if (xs.size() == 4 && eps_ >= CUDNN_BN_MIN_EPSILON && n_ > 0 && n_ <= INT_MAX) {
      TANDEM_CUDA_RETURN(cudnnCreateTensorDescriptor(&xDesc_));
      TANDEM_CUDA_RETURN(cudnnCreateTensorDescriptor(&pDesc_));
      TANDEM_CUDA_RETURN(cudnnSetTensor4dDescriptor(xDesc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)xs[0],
                                                    (int)xs[1], (int)xs[2], (int)xs[3]));
      TANDEM_CUDA_RETURN(cudnnDeriveBNTensorDescriptor(pDesc_, xDesc_, CUDNN_BATCHNORM_SPATIAL));
      return Status::ok();
    }
    return use(kBatchNormName, batchNormSource(), &fn_);
  }
  std::string implName() const override { return xDesc_ ? "cudnn" : "nvrtc"; }
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    if (xDesc_) {
      const float one = 1.f, zero = 0.f;
      return check(cudnnBatchNormalizationForwardInference(
                       dc_->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xDesc_, ins[0]->raw(), xDesc_,
                       outs[0]->raw(), pDesc_, ins[1]->raw(), ins[2]->raw(), ins[3]->raw(), ins[4]->raw(), eps_),
                   "cudnnBatchNormalizationForwardInference");
    }
    void* y = outs[0]->raw();
    const void* p[5];
    for (int i = 0; i < 5; ++i) p[i] = ins[i]->raw();
    float eps = (float)eps_;
    void* args[] = {&n_, &C_, &inner_, &eps, &y, &p[0], &p[1], &p[2], &p[3], &p[4]};
    return launchGridStride(*dc_, fn(fn_), n_, args);
  }

 private:
  int64_t n_ = 0, C_ = 0, inner_ = 0;
  double eps_ = 1e-5;
  cudnnTensorDescriptor_t xDesc_ = nullptr, pDesc_ = nullptr;
  size_t fn_ = 0;
};

Status createBatchNorm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  if (xs.size() < 2) return Status::error(opLabel(ctx) + ": X must have rank >= 2, got " + shapeToString(xs));
  if (ctx.inputTypes.size() < 5) return Status::error(opLabel(ctx) + ": expects X, scale, B, mean, var");
  for (size_t i = 1; i < 5; ++i)
    if (ctx.inputTypes[i].shape != Shape{xs[1]})
      return Status::error(opLabel(ctx) + ": input " + std::to_string(i) + " must have shape [" +
                           std::to_string(xs[1]) + "], got " + shapeToString(ctx.inputTypes[i].shape));
  if (ctx.outputTypes[0].shape != xs) return Status::error(opLabel(ctx) + ": output shape differs from X");
  auto k = std::make_unique<BatchNormKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init(ctx));
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> normSources() {
  return {{softmaxName(false), softmaxSource(false)},
          {softmaxName(true), softmaxSource(true)},
          {kLayerNormName, layerNormSource()},
          {kLayerNormGradName, layerNormGradSource()},
          {kLayerNormGradColsName, layerNormGradColsSource()},
          {kBatchNormName, batchNormSource()},
          {kRmsNormName, rmsNormSource()},
          {kRotaryName, rotarySource()},
          {kGroupNormName, groupNormSource()}};
}

void registerNormKernels(KernelRegistry& r) {
  addCuda(r, "Softmax", "nvrtc", createSoftmax);
  addCuda(r, "LogSoftmax", "nvrtc", createSoftmax);
  addCuda(r, "LayerNormalization", "nvrtc", createLayerNorm);
  addCuda(r, "LayerNormalizationGrad", "nvrtc", createLayerNormGrad);
  addCuda(r, "BatchNormalization", "cudnn", createBatchNorm);
  addCuda(r, "RMSNormalization", "nvrtc", createRmsNorm);
  addCuda(r, "RotaryEmbedding", "nvrtc", createRotary);
  addCuda(r, "GroupNormalization", "nvrtc", createGroupNorm);
  addCuda(r, "InstanceNormalization", "nvrtc", createGroupNorm);
}

}  // namespace cuda
}  // namespace tandem

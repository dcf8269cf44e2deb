// The NVRTC kernels of TopK, CumSum, GatherElements, Resize, NonMaxSuppression and
// RotaryEmbedding compiled as host C++ (through
// emulation/cuda_host_shim.h) and run as one thread per block, against the CPU reference kernels
// bit for bit on random cases. Without a GPU this checks what the kernels compute (index maths,
// the selection order, the sums' order and roundings); the block-wide parts (warp shuffles,
// barriers) run only in gpu.cuda_backend_ops_gpu_test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "runtime/DataDependent.h"
#include "runtime/Kernel.h"
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/CudaKernelTable.h"
#include "runtime/cuda/Generated.h"
#include "runtime/cuda/HostPasses.h"

namespace emu {
#include "emulation/cuda_host_shim.h"
#include "cuda_kernels.inc"  // written at build time by emulation/cuda_dump_sources.cpp
}  // namespace emu

using namespace tandem;

namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 r(7);
  return r;
}
int64_t uniform(int64_t a, int64_t b) { return std::uniform_int_distribution<int64_t>(a, b)(rng()); }
double real(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng()); }

Tensor randomTensor(DType dt, const Shape& s, double lo, double hi) {
  Tensor t = Tensor::alloc(dt, s);
  dispatchDType(dt, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_floating_point_v<T>) t.data<T>()[i] = (T)real(lo, hi);
      else t.data<T>()[i] = (T)uniform((int64_t)lo, (int64_t)hi);
    }
  });
  return t;
}

Shape randomShape(int rank, int64_t maxExtent) {
  Shape s;
  for (int d = 0; d < rank; ++d) s.push_back(uniform(1, maxExtent));
  return s;
}

struct Case {
  std::string op;
  AttrMap attrs;
  std::vector<Tensor> in;
  std::vector<bool> constant;
  std::vector<TensorType> out;

  KernelContext ctx() const {
    KernelContext c;
    c.opType = c.nodeName = op;
    c.attrs = &attrs;
    for (size_t i = 0; i < in.size(); ++i) {
      c.inputTypes.push_back(in[i].defined() ? TensorType{in[i].dtype(), in[i].shape()} : TensorType{});
      c.constInputs.push_back(i < constant.size() && constant[i] && in[i].defined() ? &in[i] : nullptr);
    }
    c.outputTypes = out;
    return c;
  }

  std::vector<Tensor> runReference() const {
    static KernelRegistry* reg = [] {
      auto* r = new KernelRegistry();
      registerCpuReferenceKernels(*r);
      return r;
    }();
    std::unique_ptr<Kernel> k;
    Status st = reg->create("cpu", ctx(), &k);
    EXPECT_TRUE(st.isOk()) << st.message();
    std::vector<const Tensor*> i;
    for (const Tensor& t : in) i.push_back(t.defined() ? &t : nullptr);
    std::vector<Tensor> o;
    for (const TensorType& t : out) o.push_back(Tensor::alloc(t.dtype, t.shape));
    std::vector<Tensor*> op;
    for (Tensor& t : o) op.push_back(&t);
    if (k) {
      st = k->run(i, op);
      EXPECT_TRUE(st.isOk()) << st.message();
    }
    return o;
  }
};

bool sameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.numel() * dtypeSize(a.dtype())) == 0;
}

using i64p = long long*;  // the prelude's i64

}  // namespace

// Rows along every axis, K from 0 to the row, largest and smallest, ties (small integer ranges,
// +-0): values and indices in the reference's order.
TEST(CudaEmulation, TopKSelectsInTheReferenceOrder) {
  for (int k = 0; k < 200; ++k) {
    const DType dt = (DType[]){DType::F32, DType::F64, DType::I32, DType::I64}[k % 4];
    const Shape s = randomShape((int)uniform(1, 3), 9);
    const int64_t axis = uniform(0, (int64_t)s.size() - 1), K = uniform(0, s[axis]);
    const bool ties = k % 2;
    Tensor x = randomTensor(dt, s, ties ? -2 : -100, ties ? 2 : 100);
    if (dt == DType::F32 && ties) x.data<float>()[0] = -0.f, x.data<float>()[x.numel() - 1] = 0.f;
    Shape ys = s;
    ys[axis] = K;
    Case c{"TopK", {}, {x, Tensor::fromVector<int64_t>({1}, {K})}, {false, true}, {{dt, ys}, {DType::I64, ys}}};
    const int largest = (int)uniform(0, 1);
    c.attrs.set("axis", Attr::ofInt(axis));
    c.attrs.set("largest", Attr::ofInt(largest));
    std::vector<Tensor> ref = c.runReference();
    Tensor v = Tensor::alloc(dt, ys), ix = Tensor::alloc(DType::I64, ys);
    const int64_t n = s[axis], inner = ref::product(s, axis + 1, s.size()), rows = ref::product(s, 0, axis) * inner;
    emu::gridDim.x = (unsigned)rows;
    for (int64_t b = 0; b < rows; ++b) {  // one row per emulated block
      emu::blockIdx.x = (unsigned)b;
      const i64p io = (i64p)ix.raw();
      switch (dt) {
        case DType::F32: emu::td_topk_float(rows, n, inner, K, largest, v.data<float>(), io, x.data<float>()); break;
        case DType::F64: emu::td_topk_double(rows, n, inner, K, largest, v.data<double>(), io, x.data<double>()); break;
        case DType::I32: emu::td_topk_i32(rows, n, inner, K, largest, v.data<int32_t>(), io, x.data<int32_t>()); break;
        default: emu::td_topk_i64(rows, n, inner, K, largest, (i64p)v.raw(), io, (const long long*)x.raw()); break;
      }
    }
    emu::blockIdx.x = 0, emu::gridDim.x = 1;
    const std::string what = std::string(dtypeName(dt)) + shapeToString(s) + " axis " + std::to_string(axis) + " K " +
                             std::to_string(K) + (largest ? " largest" : " smallest");
    EXPECT_TRUE(sameBits(v, ref[0])) << "values of " << what;
    EXPECT_TRUE(sameBits(ix, ref[1])) << "indices of " << what;
  }
}

// Every dtype of the table, every axis, exclusive and reverse: the same sums, rounded alike.
TEST(CudaEmulation, CumSumAddsInTheReferenceOrder) {
  for (int k = 0; k < 200; ++k) {
    const DType dt = (DType[]){DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::I8}[k % 6];
    const Shape s = randomShape((int)uniform(1, 4), 7);
    const int64_t axis = uniform(0, (int64_t)s.size() - 1);
    const int ex = (int)uniform(0, 1), rev = (int)uniform(0, 1);
    Tensor x = randomTensor(dt, s, -100, 100);
    Case c{"CumSum", {}, {x, Tensor::fromVector<int64_t>({}, {axis})}, {false, true}, {{dt, s}}};
    c.attrs.set("exclusive", Attr::ofInt(ex));
    c.attrs.set("reverse", Attr::ofInt(rev));
    std::vector<Tensor> ref = c.runReference();
    Tensor y = Tensor::alloc(dt, s);
    const int64_t n = s[axis], inner = ref::product(s, axis + 1, s.size()), lines = ref::product(s, 0, axis) * inner;
    switch (dt) {
      case DType::F32: emu::td_cumsum_float(lines, n, inner, ex, rev, y.data<float>(), x.data<float>()); break;
      case DType::F64: emu::td_cumsum_double(lines, n, inner, ex, rev, y.data<double>(), x.data<double>()); break;
      case DType::I32: emu::td_cumsum_i32(lines, n, inner, ex, rev, y.data<int32_t>(), x.data<int32_t>()); break;
      case DType::I64: emu::td_cumsum_i64(lines, n, inner, ex, rev, (i64p)y.raw(), (const long long*)x.raw()); break;
      case DType::U8: emu::td_cumsum_u8(lines, n, inner, ex, rev, y.data<uint8_t>(), x.data<uint8_t>()); break;
      default: emu::td_cumsum_i8(lines, n, inner, ex, rev, (signed char*)y.raw(), (const signed char*)x.raw()); break;
    }
    EXPECT_TRUE(sameBits(y, ref[0])) << dtypeName(dt) << shapeToString(s) << " axis " << axis
                                     << (ex ? " exclusive" : "") << (rev ? " reverse" : "");
  }
}

// Indices shorter or longer than data on the axis, smaller off it, negative ones.
TEST(CudaEmulation, GatherElementsReadsTheReferenceElements) {
  for (int k = 0; k < 200; ++k) {
    const Shape s = randomShape((int)uniform(1, 4), 6);
    const int64_t axis = uniform(0, (int64_t)s.size() - 1);
    Shape is = s;
    for (size_t d = 0; d < s.size(); ++d) is[d] = (int64_t)d == axis ? uniform(1, 8) : uniform(1, s[d]);
    const DType it = k % 2 ? DType::I32 : DType::I64;
    Tensor x = randomTensor(DType::F32, s, -9, 9), idx = randomTensor(it, is, -s[axis], s[axis] - 1);
    Case c{"GatherElements", {}, {x, idx}, {}, {{DType::F32, is}}};
    c.attrs.set("axis", Attr::ofInt(axis));
    std::vector<Tensor> ref = c.runReference();
    // The geometry createGatherElements builds (runtime/cuda/Selection.cpp).
    std::vector<int64_t> st = cuda::denseStrides(s);
    const int64_t axisStride = st[axis];
    st[axis] = 0;
    cuda::TdGeo g;
    ASSERT_TRUE(cuda::makeGeo(c.ctx(), is, {st}, &g).isOk());
    g.aux[0] = axisStride, g.aux[1] = s[axis];
    emu::TdGeo eg;
    static_assert(sizeof(eg) == sizeof(g), "TdGeo layouts");
    std::memcpy(&eg, &g, sizeof g);
    Tensor y = Tensor::alloc(DType::F32, is);
    if (it == DType::I32)
      emu::td_gather_elements_u32_i32(eg, (unsigned*)y.raw(), (const unsigned*)x.raw(), idx.data<int32_t>());
    else
      emu::td_gather_elements_u32_i64(eg, (unsigned*)y.raw(), (const unsigned*)x.raw(), (const long long*)idx.raw());
    EXPECT_TRUE(sameBits(y, ref[0])) << shapeToString(s) << " axis " << axis << " indices " << shapeToString(is);
  }
}

namespace {

// The passes of ResizeKernel::run (runtime/cuda/Image.cpp) over host buffers.
template <typename T>
Tensor emulateResize(const Case& c) {
  const DType dt = c.in[0].dtype();
  std::vector<ref::ResizeAxis> axes;
  std::vector<size_t> dims;
  EXPECT_TRUE(ref::resizePlan(c.ctx(), &axes, &dims).isOk());
  Shape cur = c.in[0].shape();
  std::vector<T> a(c.in[0].data<T>(), c.in[0].data<T>() + c.in[0].numel()), b;
  const float e = c.attrs.getFloat("extrapolation_value", 0.f);
  const T extrap = (T)e;
  for (size_t p = 0; p < axes.size(); ++p) {
    const ref::ResizeAxis& ax = axes[p];
    const size_t d = dims[p];
    const int64_t outer = ref::product(cur, 0, d), inner = ref::product(cur, d + 1, cur.size());
    std::vector<T> w(ax.w.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = (T)ax.w[i];
    b.assign(outer * ax.out * inner, T(0));
    const long long* idx = (const long long*)ax.idx.data();
    if constexpr (std::is_same_v<T, float>)
      emu::td_resize_float(outer, ax.in, ax.out, inner, ax.taps, b.data(), a.data(), idx, w.data(), ax.outside.data(), extrap);
    else
      emu::td_resize_double(outer, ax.in, ax.out, inner, ax.taps, b.data(), a.data(), idx, w.data(), ax.outside.data(), extrap);
    cur[d] = ax.out;
    a.swap(b);
  }
  Tensor y = Tensor::alloc(dt, cur);
  if (!a.empty()) std::memcpy(y.raw(), a.data(), a.size() * sizeof(T));
  return y;
}

}  // namespace

// Every mode, coordinate transformation (half_pixel_symmetric of Resize-19 too) and
// nearest_mode, up and down, by scales or to sizes, tf_crop_and_resize with an roi reaching
// outside, cubic with exclude_outside, Resize-18's antialias; f32 and f64.
TEST(CudaEmulation, ResizeSamplesLikeTheReference) {
  const char* ctms[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                        "tf_crop_and_resize", "half_pixel_symmetric"};
  const char* nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const char* modes[] = {"nearest", "linear", "cubic"};
  for (int k = 0; k < 240; ++k) {
    const DType dt = k % 3 == 0 ? DType::F64 : DType::F32;
    const Shape s = {uniform(1, 2), uniform(1, 3), uniform(1, 9), uniform(1, 9)};
    Shape ys = s;
    std::vector<float> scales(4, 1.f);
    for (int d = 2; d < 4; ++d) {
      scales[d] = (float[]){0.5f, 0.75f, 1.f, 1.5f, 2.f, 3.f}[uniform(0, 5)];
      ys[d] = (int64_t)std::floor(s[d] * (double)scales[d]);
    }
    const std::string mode = modes[k % 3], ctm = ctms[uniform(0, 6)];
    Tensor roi;
    if (ctm == "tf_crop_and_resize")
      roi = Tensor::fromVector<float>({8}, {0, 0, (float)real(-0.3, 0.4), (float)real(-0.3, 0.4), 1, 1,
                                            (float)real(0.6, 1.3), (float)real(0.6, 1.3)});
    Case c{"Resize", {}, {}, {}, {{dt, ys}}};
    Tensor x = randomTensor(dt, s, -10, 10);
    if (k % 2) {
      c.in = {x, roi, Tensor::fromVector<float>({4}, scales)};
      c.constant = {false, true, true};
    } else {
      c.in = {x, roi, Tensor(), Tensor::fromVector<int64_t>({4}, {ys[0], ys[1], ys[2], ys[3]})};
      c.constant = {false, true, false, true};
    }
    c.attrs.set("mode", Attr::ofString(mode));
    c.attrs.set("coordinate_transformation_mode", Attr::ofString(ctm));
    c.attrs.set("nearest_mode", Attr::ofString(nearest[uniform(0, 3)]));
    c.attrs.set("extrapolation_value", Attr::ofFloat(-3.25f));
    c.attrs.set("exclude_outside", Attr::ofInt(uniform(0, 1)));
    c.attrs.set("antialias", Attr::ofInt(uniform(0, 1)));  // Resize-18: wider taps downsampling
    std::vector<Tensor> ref = c.runReference();
    Tensor y = dt == DType::F64 ? emulateResize<double>(c) : emulateResize<float>(c);
    EXPECT_TRUE(sameBits(y, ref[0])) << mode << " " << ctm << " " << dtypeName(dt) << " " << shapeToString(s)
                                     << " -> " << shapeToString(ys);
  }
}

// NonMaxSuppression: td_nms_mask's bits walked by cuda::nmsSelect (the CUDA kernel's two halves)
// against the CPU kernel on random boxes: crowded (many overlaps, duplicates, IoU exactly at
// the threshold), flipped corners, zero-area and NaN boxes, both box encodings, tied scores,
// score thresholds, several batches and classes, and n past one 64-bit mask word.
TEST(CudaEmulation, NonMaxSuppressionSelectsTheReferenceBoxes) {
  int64_t total = 0;
  for (int k = 0; k < 300; ++k) {
    const int64_t B = uniform(1, 3), C = uniform(1, 3), N = k % 10 == 0 ? uniform(60, 140) : uniform(0, 20);
    const int center = k % 2;
    Tensor boxes = randomTensor(DType::F32, {B, N, 4}, 0, 10);
    float* bx = boxes.data<float>();
    for (int64_t i = 0; i < B * N; ++i) {
      float* p = bx + 4 * i;
      if (center) p[2] = (float)real(0, 6), p[3] = (float)real(0, 6);       // width, height >= 0
      if (uniform(0, 9) == 0 && i > 0) std::memcpy(p, p - 4, 16);            // a duplicate: IoU 1
      if (uniform(0, 19) == 0) p[2] = p[0];                                 // zero area
      if (uniform(0, 49) == 0) p[uniform(0, 3)] = std::nanf("");
      if (k % 3 == 0)
        for (int j = 0; j < 4; ++j) p[j] = std::round(p[j]);                // exact IoU ties
    }
    Tensor scores = randomTensor(DType::F32, {B, C, N}, 0, 1);
    if (k % 4 == 1)
      for (int64_t i = 0; i < scores.numel(); ++i) scores.data<float>()[i] = std::round(scores.data<float>()[i] * 4) / 4;
    const int64_t maxPerClass = (int64_t[]){0, 1, 3, 1000}[uniform(0, 3)];
    const float iou = (float[]){0.f, 0.25f, 0.5f, 0.7f, 1.f}[uniform(0, 4)];
    const bool hasScore = uniform(0, 1) == 1;
    const float scoreThr = hasScore ? (float)real(0, 0.6) : 0.f;
    std::vector<int64_t> want;
    ASSERT_TRUE(nonMaxSuppression(boxes, scores, maxPerClass, iou, hasScore, scoreThr, center, &want).isOk());
    const int64_t sel = (int64_t)want.size() / 3;
    Case c{"NonMaxSuppression", {}, {boxes, scores, Tensor::fromVector<int64_t>({1}, {maxPerClass}),
                                     Tensor::fromVector<float>({1}, {iou})},
           {false, false, true, true}, {{DType::I64, {sel, 3}}}};
    if (hasScore) {
      c.in.push_back(Tensor::fromVector<float>({1}, {scoreThr}));
      c.constant.push_back(true);
    }
    c.attrs.set("center_point_box", Attr::ofInt(center));
    std::vector<Tensor> ref = c.runReference();
    const int64_t words = cuda::nmsMaskWords(N);
    std::vector<unsigned long long> mask(B * N * words, ~0ull);
    emu::td_nms_mask(B, N, words, center, iou, bx, mask.data());
    std::vector<int64_t> got;
    cuda::nmsSelect(scores.data<float>(), reinterpret_cast<const uint64_t*>(mask.data()), B, C, N, maxPerClass,
                    hasScore, scoreThr, &got);
    ASSERT_EQ(ref.size(), 1u);
    std::vector<int64_t> refSel(ref[0].data<int64_t>(), ref[0].data<int64_t>() + ref[0].numel());
    EXPECT_EQ(got, refSel) << "case " << k << ": B " << B << " C " << C << " N " << N << " center " << center
                           << " max " << maxPerClass << " iou " << iou << (hasScore ? " score > " : " no score threshold ")
                           << scoreThr;
    total += sel;
  }
  EXPECT_GT(total, 1000);  // the cases select something
}

// RotaryEmbedding's kernel, one thread per pair walked by the grid-stride loop: 4-D and 3-D X,
// halves and interleaved, partial rotary dims, with and without position_ids; bit for bit.
TEST(CudaEmulation, RotaryEmbeddingLikeTheReference) {
  for (int k = 0; k < 60; ++k) {
    const bool four = k % 2, interleaved = (k / 2) % 2, positions = (k / 4) % 2;
    const int64_t B = uniform(1, 2), S = uniform(1, 5), H = uniform(1, 3), head = 2 * uniform(1, 6);
    const int64_t rot = k % 3 ? head : 2 * uniform(1, head / 2), half = rot / 2, maxPos = uniform(S, 12);
    const Shape xs = four ? Shape{B, H, S, head} : Shape{B, S, H * head};
    Case c{"RotaryEmbedding", {}, {randomTensor(DType::F32, xs, -2, 2)}, {}, {{DType::F32, xs}}};
    const Shape cs = positions ? Shape{maxPos, half} : Shape{B, S, half};
    c.in.push_back(randomTensor(DType::F32, cs, -1, 1));
    c.in.push_back(randomTensor(DType::F32, cs, -1, 1));
    if (positions) c.in.push_back(randomTensor(DType::I64, {B, S}, 0, (double)maxPos - 1));
    c.attrs.set("interleaved", Attr::ofInt(interleaved));
    if (rot != head) c.attrs.set("rotary_embedding_dim", Attr::ofInt(rot));
    if (!four) c.attrs.set("num_heads", Attr::ofInt(H));
    std::vector<Tensor> ref = c.runReference();
    Tensor y = Tensor::alloc(DType::F32, xs);
    emu::gridDim = {1};
    emu::blockDim = {1};
    emu::td_rotary_f32(B, S, H, head, half, four, interleaved, positions ? maxPos : B * S, y.data<float>(),
                       c.in[0].data<float>(), c.in[1].data<float>(), c.in[2].data<float>(),
                       positions ? (const long long*)c.in[3].data<int64_t>() : nullptr);
    EXPECT_TRUE(sameBits(y, ref[0])) << shapeToString(xs) << " rot " << rot << " interleaved " << interleaved
                                     << " positions " << positions;
  }
}

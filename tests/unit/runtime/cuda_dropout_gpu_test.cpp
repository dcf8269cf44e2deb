// The CUDA training-mode Dropout (runtime/cuda/Tensor.cpp) against the CPU reference kernel
// (runtime/cpu/ref/Tensor.cpp) on the same inputs: outputs and masks bit for bit, for f32 and
// f64 data, ratios 0 to 0.9, training_mode true and false, counters f32 and i64 rewritten in
// device memory between runs of one loaded kernel (as a training step's counter is), ratio
// and training_mode as plan constants or run-time values, the seed attribute or the plan's.
// Needs a GPU (ctest label gpu); without one every test prints the reason and skips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "runtime/Backend.h"
#include "runtime/Philox.h"
#include "runtime/cpu/ref/RefCommon.h"
#include "gpu_test_util.h"

using namespace tandem;

namespace {

Tensor scalar(DType dt, double v) {
  Tensor t = Tensor::alloc(dt, {});
  if (dt == DType::F32) t.data<float>()[0] = (float)v;
  else if (dt == DType::F64) t.data<double>()[0] = v;
  else if (dt == DType::I64) t.data<int64_t>()[0] = (int64_t)v;
  else t.data<bool>()[0] = v != 0;
  return t;
}

Tensor randomData(DType dt, Shape s, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(-4, 4);
  Tensor t = Tensor::alloc(dt, s);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::F32) t.data<float>()[i] = (float)d(g);
    else t.data<double>()[i] = d(g);
  }
  return t;
}

/// One Dropout instance: x, ratio, training_mode, counter (an undefined Tensor is absent), both
/// outputs; which operands are plan constants; the attributes and the plan's seed.
struct DropCase {
  std::string name;
  Tensor x, ratio, training, counter;
  bool constRatio = true, constTraining = true;
  bool withMask = true;
  AttrMap attrs;
  uint64_t planSeed = 0;
};

/// Loads the case's Dropout once on each side, then for each counter value writes it into the
/// counter operand (host tensor and device buffer) and runs both kernels: y and mask must be the
/// same bytes. Returns how many elements each mask dropped at each counter (to check the masks
/// differ between counters).
std::vector<int64_t> runBoth(DropCase& c, const std::vector<double>& counters) {
  std::vector<int64_t> dropped;
  std::vector<Tensor*> ins = {&c.x, &c.ratio, &c.training, &c.counter};
  std::vector<bool> isConst = {false, c.constRatio, c.constTraining, false};
  KernelContext ctx;
  ctx.opType = "Dropout";
  ctx.nodeName = c.name;
  ctx.attrs = &c.attrs;
  ctx.seed = c.planSeed;
  for (size_t i = 0; i < ins.size(); ++i) {
    const Tensor& t = *ins[i];
    ctx.inputTypes.push_back(t.defined() ? TensorType{t.dtype(), t.shape()} : TensorType{});
    ctx.constInputs.push_back(t.defined() && isConst[i] ? &t : nullptr);
  }
  const Shape& s = c.x.shape();
  ctx.outputTypes = {{c.x.dtype(), s}, c.withMask ? TensorType{DType::Bool, s} : TensorType{}};

  std::unique_ptr<Kernel> cpuK;
  Status st = KernelRegistry::global().create("cpu", ctx, &cpuK);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!st.isOk()) return dropped;
  std::unique_ptr<DeviceBackend> gpu;
  EXPECT_TRUE(createCudaBackend(0, BackendOptions{}, &gpu).isOk());
  EXPECT_EQ(KernelRegistry::global().rejects("cuda", ctx), "") << c.name;
  std::unique_ptr<Kernel> k;
  st = gpu->createKernel(ctx, &k);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!st.isOk()) return dropped;
  EXPECT_TRUE(gpu->finishLoad({k.get()}).isOk());

  std::vector<void*> owned;
  auto deviceCopy = [&](const Tensor& t) {
    void* p = nullptr;
    EXPECT_TRUE(gpu->allocate(std::max<size_t>(t.bytes(), 1), c.name, &p).isOk());
    owned.push_back(p);
    EXPECT_TRUE(gpu->copyFromHost(p, t.raw(), t.bytes()).isOk());
    return Tensor::view(t.dtype(), t.shape(), p);
  };
  std::vector<Tensor> din;
  for (Tensor* t : ins) din.push_back(t->defined() ? deviceCopy(*t) : Tensor());
  Tensor yHost = Tensor::alloc(c.x.dtype(), s), maskHost = Tensor::alloc(DType::Bool, s);
  Tensor dy = deviceCopy(yHost), dmask = deviceCopy(maskHost);
  std::vector<const Tensor*> gin, cin;
  for (size_t i = 0; i < ins.size(); ++i) {
    gin.push_back(din[i].defined() ? &din[i] : nullptr);
    cin.push_back(ins[i]->defined() ? ins[i] : nullptr);
  }
  std::vector<Tensor*> gout = {&dy, c.withMask ? &dmask : nullptr};
  Tensor cy = Tensor::alloc(c.x.dtype(), s), cmask = Tensor::alloc(DType::Bool, s);
  std::vector<Tensor*> cout = {&cy, c.withMask ? &cmask : nullptr};

  for (double counter : counters) {
    SCOPED_TRACE(c.name + " counter " + std::to_string(counter));
    if (c.counter.defined()) {
      c.counter = scalar(c.counter.dtype(), counter);
      EXPECT_TRUE(gpu->copyFromHost(din[3].raw(), c.counter.raw(), c.counter.bytes()).isOk());
      cin[3] = &c.counter;
    }
    EXPECT_TRUE(gpu->synchronize().isOk());
    st = cpuK->run(cin, cout);
    EXPECT_TRUE(st.isOk()) << st.message();
    st = gpu->launch(*k, gin, gout);
    EXPECT_TRUE(st.isOk()) << st.message();
    EXPECT_TRUE(gpu->synchronize().isOk());
    EXPECT_TRUE(gpu->copyToHost(yHost.raw(), dy.raw(), yHost.bytes()).isOk());
    if (c.withMask) {
      EXPECT_TRUE(gpu->copyToHost(maskHost.raw(), dmask.raw(), maskHost.bytes()).isOk());
    }
    EXPECT_TRUE(gpu->synchronize().isOk());
    const size_t es = dtypeSize(c.x.dtype());
    int64_t badY = 0, badMask = 0, drops = 0;
    for (int64_t i = 0; i < cy.numel(); ++i) {
      if (std::memcmp((const char*)yHost.raw() + i * es, (const char*)cy.raw() + i * es, es) != 0 &&
          badY++ < 3)
        ADD_FAILURE() << "y[" << i << "]: gpu " << ref::elementAsDouble(yHost, i) << " cpu "
                      << ref::elementAsDouble(cy, i);
      if (c.withMask) {
        if (maskHost.data<bool>()[i] != cmask.data<bool>()[i] && badMask++ < 3)
          ADD_FAILURE() << "mask[" << i << "]: gpu " << maskHost.data<bool>()[i];
        drops += !cmask.data<bool>()[i];
      }
    }
    EXPECT_EQ(badY, 0) << badY << " of " << cy.numel() << " outputs differ";
    EXPECT_EQ(badMask, 0) << badMask << " of " << cy.numel() << " mask elements differ";
    dropped.push_back(drops);
  }
  k.reset();
  for (void* p : owned) gpu->deallocate(p);
  return dropped;
}

// Training mode: every ratio, both data types, sizes that end mid Philox block and span many
// grid-stride rounds; the f32 step counter as the training graph feeds it, rewritten between
// runs of the one loaded kernel.
TEST(CudaDropout, TrainingMatchesTheCpuBitForBit) {
  REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t n : {int64_t{1}, int64_t{1001}, int64_t{(1 << 20) + 3}})
      for (double ratio : {0.0, 0.1, 0.5, 0.9}) {
        DropCase c;
        c.name = std::string("drop_") + dtypeName(dt) + "_" + std::to_string(n) + "_" + std::to_string(ratio);
        c.x = randomData(dt, {n}, (uint32_t)n);
        c.ratio = scalar(DType::F32, ratio);
        c.training = scalar(DType::Bool, 1);
        c.counter = scalar(DType::F32, 0);
        c.planSeed = 1234;
        std::vector<int64_t> dropped = runBoth(c, {0, 1, 2, 12345, 16777216});
        ASSERT_EQ(dropped.size(), 5u);
        if (ratio == 0) {
          for (int64_t d : dropped) EXPECT_EQ(d, 0);
        } else if (n > 1000) {
          // A new counter, a new mask (of about ratio * n drops).
          EXPECT_NEAR((double)dropped[1] / n, ratio, 0.05);
          EXPECT_FALSE(dropped[0] == dropped[1] && dropped[1] == dropped[2] && dropped[2] == dropped[3]);
        }
      }
}

// The operands' other forms: an i64 counter (past 2^32, which wraps like the CPU's), an f64 ratio
// and run-time (device-computed) ratio and training_mode, no counter, no mask output, the seed
// attribute, and training_mode false.
TEST(CudaDropout, OperandFormsMatchTheCpu) {
  REQUIRE_GPU();
  const Shape s = {3, 7, 65};
  {
    DropCase c;
    c.name = "i64_counter";
    c.x = randomData(DType::F32, s, 1);
    c.ratio = scalar(DType::F64, 0.3);
    c.training = scalar(DType::Bool, 1);
    c.counter = scalar(DType::I64, 0);
    c.planSeed = 99;
    runBoth(c, {0, 5, 4294967296.0 + 5, 1e12});
  }
  {
    DropCase c;
    c.name = "runtime_ratio_and_mode";
    c.x = randomData(DType::F64, s, 2);
    c.ratio = scalar(DType::F32, 0.25);
    c.training = scalar(DType::Bool, 1);
    c.counter = scalar(DType::F32, 0);
    c.constRatio = c.constTraining = false;
    runBoth(c, {0, 3, 77});
  }
  {
    DropCase c;
    c.name = "no_counter_no_mask_seed_attribute";
    c.x = randomData(DType::F32, s, 3);
    c.ratio = scalar(DType::F32, 0.6);
    c.training = scalar(DType::Bool, 1);
    c.withMask = false;
    c.attrs.set("seed", Attr::ofInt(-7));
    runBoth(c, {0});
  }
  {
    DropCase c;
    c.name = "default_ratio";
    c.x = randomData(DType::F32, s, 4);
    c.training = scalar(DType::Bool, 1);
    c.counter = scalar(DType::F32, 0);
    runBoth(c, {0, 8});
  }
  for (bool constant : {true, false}) {
    DropCase c;
    c.name = std::string("training_false_") + (constant ? "const" : "runtime");
    c.x = randomData(DType::F32, s, 5);
    c.ratio = scalar(DType::F32, 0.5);
    c.training = scalar(DType::Bool, 0);
    c.counter = scalar(DType::F32, 0);
    c.constTraining = c.constRatio = constant;
    std::vector<int64_t> dropped = runBoth(c, {0, 9});
    for (int64_t d : dropped) EXPECT_EQ(d, 0);
  }
  {
    DropCase c;  // inference Dropout with a mask output: a copy and an all-true mask
    c.name = "inference_mask";
    c.x = randomData(DType::F32, s, 6);
    std::vector<int64_t> dropped = runBoth(c, {0});
    ASSERT_EQ(dropped.size(), 1u);
    EXPECT_EQ(dropped[0], 0);
  }
}

// Where the CPU kernel returns an error at run time (a device-computed ratio of 1, a counter
// of 2.5), the CUDA kernel cannot fail: every output is NaN and the mask all false.
TEST(CudaDropout, RunTimeOperandsOutOfRangeGiveNaN) {
  REQUIRE_GPU();
  std::unique_ptr<DeviceBackend> gpu;
  ASSERT_TRUE(createCudaBackend(0, BackendOptions{}, &gpu).isOk());
  for (int which = 0; which < 2; ++which) {
    SCOPED_TRACE(which == 0 ? "ratio 1" : "counter 2.5");
    Tensor x = randomData(DType::F32, {37}, 7);
    Tensor ratio = scalar(DType::F32, which == 0 ? 1.0 : 0.5), on = scalar(DType::Bool, 1);
    Tensor counter = scalar(DType::F32, which == 0 ? 0 : 2.5);
    AttrMap attrs;
    KernelContext ctx;
    ctx.opType = "Dropout";
    ctx.nodeName = "bad";
    ctx.attrs = &attrs;
    ctx.inputTypes = {{DType::F32, {37}}, {DType::F32, {}}, {DType::Bool, {}}, {DType::F32, {}}};
    ctx.constInputs.assign(4, nullptr);
    ctx.outputTypes = {{DType::F32, {37}}, {DType::Bool, {37}}};
    std::unique_ptr<Kernel> k;
    Status st = gpu->createKernel(ctx, &k);
    ASSERT_TRUE(st.isOk()) << st.message();
    ASSERT_TRUE(gpu->finishLoad({k.get()}).isOk());
    std::vector<void*> p(6);
    const Tensor* hostIn[] = {&x, &ratio, &on, &counter};
    std::vector<Tensor> d;
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(gpu->allocate(hostIn[i]->bytes(), "in", &p[i]).isOk());
      ASSERT_TRUE(gpu->copyFromHost(p[i], hostIn[i]->raw(), hostIn[i]->bytes()).isOk());
      d.push_back(Tensor::view(hostIn[i]->dtype(), hostIn[i]->shape(), p[i]));
    }
    ASSERT_TRUE(gpu->allocate(37 * 4, "y", &p[4]).isOk());
    ASSERT_TRUE(gpu->allocate(37, "mask", &p[5]).isOk());
    Tensor y = Tensor::view(DType::F32, {37}, p[4]), mask = Tensor::view(DType::Bool, {37}, p[5]);
    ASSERT_TRUE(gpu->synchronize().isOk());
    ASSERT_TRUE(gpu->launch(*k, {&d[0], &d[1], &d[2], &d[3]}, {&y, &mask}).isOk());
    Tensor yh = Tensor::alloc(DType::F32, {37}), mh = Tensor::alloc(DType::Bool, {37});
    ASSERT_TRUE(gpu->copyToHost(yh.raw(), p[4], yh.bytes()).isOk());
    ASSERT_TRUE(gpu->copyToHost(mh.raw(), p[5], mh.bytes()).isOk());
    ASSERT_TRUE(gpu->synchronize().isOk());
    for (int64_t i = 0; i < 37; ++i) {
      EXPECT_TRUE(std::isnan(yh.data<float>()[i])) << i;
      EXPECT_FALSE(mh.data<bool>()[i]) << i;
    }
    k.reset();
    for (void* q : p) gpu->deallocate(q);
  }
}

}  // namespace

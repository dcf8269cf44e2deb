// CostModel without a profile: roofline op times and link transfer times, hand-computed.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/placement/CostModel.h"

using namespace tandem;

namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s)}; }

// A CPU with round figures so the expected times are easy to check by hand.
DeviceSpec roundCpu() {
  DeviceSpec c = liveCpuSpec("cpu");
  c.peakF32FlopsPerSec = 100e9;
  c.peakF64FlopsPerSec = 50e9;
  c.memoryBandwidthBytesPerSec = 20e9;
  c.dispatchOverheadSec = 1e-6;
  c.lastLevelCacheBytes = 0;  // every byte from DRAM (the cache rule has its own test)
  c.cacheBandwidthBytesPerSec = 0;
  return c;
}

CostModel h100Model(CostOptions o = {}) {
  DeviceSpec gpu;
  EXPECT_TRUE(builtinGpuSpec("h100", "cuda:0", &gpu).isOk());
  DeviceSet set;
  EXPECT_TRUE(DeviceSet::fromSpecs({roundCpu(), gpu}, &set).isOk());
  return CostModel(set, o);
}

OpWork gemm4096() {
  return estimateOpWork("Gemm", {f32({4096, 4096}), f32({4096, 4096})}, {f32({4096, 4096})}, {});
}

}  // namespace

TEST(CostModelOps, BigF32GemmOnH100IsComputeBoundAtTheFp32Peak) {
  CostModel m = h100Model();
  OpCost c = m.opCost(gemm4096(), 1);
  // 2*4096^3 / 67e12; memory 3*4096^2*4 / 3.35e12 = 60 us and the 3 us enqueue are hidden
  // (the launch overlaps the stream's earlier work).
  EXPECT_DOUBLE_EQ(c.seconds, 137438953472.0 / 67e12);
  EXPECT_NEAR(c.seconds, 2.0513e-3, 1e-7);
  EXPECT_DOUBLE_EQ(c.overheadSec, 3e-6);
  EXPECT_DOUBLE_EQ(c.memorySec, 201326592.0 / 3.35e12);
  EXPECT_TRUE(c.computeBound());
  EXPECT_EQ(c.precision, Precision::F32);
  EXPECT_STREQ(c.source, "roofline");
}

TEST(CostModelOps, Tf32IsUsedOnlyWhenAllowed) {
  CostOptions o;
  o.allowTf32 = true;
  CostModel m = h100Model(o);
  OpCost c = m.opCost(gemm4096(), 1);
  EXPECT_EQ(c.precision, Precision::TF32);
  EXPECT_DOUBLE_EQ(c.seconds, 137438953472.0 / 494.5e12);
  // The CPU has no TF32: same op there stays at its F32 rate.
  EXPECT_EQ(m.precisionFor(gemm4096(), 0), Precision::F32);
  EXPECT_DOUBLE_EQ(m.opTime(gemm4096(), 0), 137438953472.0 / 100e9 + 1e-6);
}

TEST(CostModelOps, SmallElementwiseIsMemoryPlusOverhead) {
  CostModel m = h100Model();
  OpWork relu = estimateOpWork("Relu", {f32({1, 64, 56, 56})}, {f32({1, 64, 56, 56})}, {});
  // 1,605,632 bytes: GPU max(3 us enqueue, 1605632/3.35e12 = 0.48 us); CPU 1 us +
  // 1605632/20e9 = 81.3 us.
  OpCost g = m.opCost(relu, 1);
  EXPECT_DOUBLE_EQ(g.seconds, 3e-6);
  EXPECT_FALSE(g.computeBound());
  EXPECT_DOUBLE_EQ(m.opTime(relu, 0), 1e-6 + 1605632.0 / 20e9);
  // A batch-1 FC layer: the enqueue dominates on the GPU, so the CPU is not far behind.
  OpWork fc = estimateOpWork("Gemm", {f32({1, 512}), f32({512, 10})}, {f32({1, 10})}, {});
  EXPECT_DOUBLE_EQ(m.opTime(fc, 1), 3e-6);
  EXPECT_DOUBLE_EQ(m.opTime(fc, 0), 1e-6 + (512.0 + 5120 + 10) * 4 / 20e9);
}

TEST(CostModelOps, PrecisionFollowsTheDType) {
  CostModel m = h100Model();
  TensorType d1024{DType::F64, {1024, 1024}};
  OpWork d = estimateOpWork("Gemm", {d1024, d1024}, {d1024}, {});
  EXPECT_EQ(m.precisionFor(d, 1), Precision::F64);
  EXPECT_DOUBLE_EQ(m.opCost(d, 1).computeSec, 2.0 * 1024 * 1024 * 1024 / 34e12);
  TensorType h1024{DType::F16, {1024, 1024}};
  OpWork h = estimateOpWork("MatMul", {h1024, h1024}, {h1024}, {});
  EXPECT_EQ(m.precisionFor(h, 1), Precision::F16);
  EXPECT_DOUBLE_EQ(m.opCost(h, 1).computeSec, 2.0 * 1024 * 1024 * 1024 / 989.5e12);
}

TEST(CostModelOps, FreeOpsCostNothingAnywhere) {
  CostModel m = h100Model();
  OpWork r = estimateOpWork("Shape", {f32({1, 512, 1, 1})}, {TensorType{DType::I64, {4}}}, {});
  for (size_t d = 0; d < 2; ++d) {
    OpCost c = m.opCost(r, d);
    EXPECT_DOUBLE_EQ(c.seconds, 0);
    EXPECT_STREQ(c.source, "free");
  }
}

// Flatten/Reshape: a copy (dispatch + bytes) where it cannot share its input's buffer; in place
// (bytes 0, set by the placer) the CPU step still costs its dispatch, a GPU nothing.
TEST(CostModelOps, ReshapeCostsItsCopyOrADispatch) {
  CostModel m = h100Model();  // device 0: cpu, 1: cuda:0
  const DeviceSpec& cpu = m.devices().device(0);
  const DeviceSpec& gpu = m.devices().device(1);
  OpWork r = estimateOpWork("Flatten", {f32({32, 64, 12, 12})}, {f32({32, 9216})}, {});
  const double bytes = 2.0 * 32 * 9216 * 4;
  OpCost c = m.opCost(r, 0);
  EXPECT_DOUBLE_EQ(c.seconds, cpu.dispatchOverheadSec + bytes / cpu.memoryBandwidthBytesPerSec);
  OpCost g = m.opCost(r, 1);
  EXPECT_DOUBLE_EQ(g.seconds, std::max(gpu.enqueueSec, bytes / gpu.memoryBandwidthBytesPerSec));
  r.bytes = 0;  // in place
  EXPECT_DOUBLE_EQ(m.opCost(r, 0).seconds, cpu.dispatchOverheadSec);
  EXPECT_GT(cpu.dispatchOverheadSec, 0);
  EXPECT_DOUBLE_EQ(m.opCost(r, 1).seconds, 0);
  EXPECT_STREQ(m.opCost(r, 1).source, "free");
}

TEST(CostModelTransfers, PcieGen5PinnedAndPageable) {
  DeviceSet set;
  ASSERT_TRUE(DeviceSet::parse("cpu,cuda:0=h100,cuda:1=h100", &set).isOk());
  CostModel m(set);
  // 1 MB host -> H100 over PCIe Gen5: 5 us + 1e6 / 55e9 = 23.18 us pinned; pageable at half rate.
  EXPECT_DOUBLE_EQ(m.transferTime(0, 1, 1e6), 5e-6 + 1e6 / 55e9);
  EXPECT_NEAR(m.transferTime(0, 1, 1e6), 23.18e-6, 0.01e-6);
  EXPECT_DOUBLE_EQ(m.transferTime(0, 1, 1e6, HostMemory::Pageable), 5e-6 + 1e6 / 27.5e9);
  EXPECT_DOUBLE_EQ(m.transferTime(1, 0, 1e6, HostMemory::Pinned), 5e-6 + 1e6 / 55e9);
  // GPU to GPU over NVLink 4: 3 us + 1e6 / 391.5e9; host memory does not matter.
  EXPECT_DOUBLE_EQ(m.transferTime(1, 2, 1e6, HostMemory::Pageable), 3e-6 + 1e6 / (0.87 * 450e9));
  EXPECT_DOUBLE_EQ(m.transferTime(2, 2, 1e9), 0);
  EXPECT_DOUBLE_EQ(m.transferTime("CPU:0", "gpu:1", 0, HostMemory::Pinned), 5e-6);
  EXPECT_TRUE(std::isinf(m.transferTime("cpu", "cuda:7", 1, HostMemory::Pinned)));
}

// A value made on a GPU and read by a host op mid-run makes the host wait for the GPU: the
// crossing is the D2H copy plus the GPU's sync latency (5 us) and one launch (5 us) that can
// no longer overlap earlier work. Host-to-GPU and GPU-to-GPU crossings are copies only.
TEST(CostModelTransfers, AGpuToHostCrossingAddsTheHostWait) {
  DeviceSet set;
  ASSERT_TRUE(DeviceSet::parse("cpu,cuda:0=h100,cuda:1=h100", &set).isOk());
  EXPECT_DOUBLE_EQ(set.device(1).syncLatencySec, 5e-6);
  EXPECT_DOUBLE_EQ(set.device(0).syncLatencySec, 0);
  CostModel m(set);
  EXPECT_DOUBLE_EQ(m.crossingTime(1, 0, 65536, HostMemory::Pinned),
                   5e-6 + 65536 / 55e9 + 5e-6 + 5e-6);
  EXPECT_NEAR(m.crossingTime(1, 0, 65536, HostMemory::Pinned), 16.19e-6, 0.01e-6);
  EXPECT_DOUBLE_EQ(m.crossingTime(0, 1, 65536, HostMemory::Pinned),
                   m.transferTime(0, 1, 65536, HostMemory::Pinned));
  EXPECT_DOUBLE_EQ(m.crossingTime(1, 2, 65536, HostMemory::Pinned),
                   m.transferTime(1, 2, 65536, HostMemory::Pinned));
  EXPECT_DOUBLE_EQ(m.crossingTime(1, 1, 65536, HostMemory::Pinned), 0);
}

// Kernels on one stream overlap their launches with earlier work: N tiny kernels cost N
// enqueues (3 us each), not N launches (5 us) and not 0; a calibrated dispatch overhead keeps
// the additive form. A value only returned from a GPU costs the copy plus the host's one wait
// at the run's end (5 us), no relaunch; from a CPU, the copy only.
TEST(CostModelTransfers, GpuLaunchesOverlapAndAReturnWaitsOnce) {
  DeviceSet set;
  ASSERT_TRUE(DeviceSet::parse("cpu,cuda:0=h100", &set).isOk());
  EXPECT_DOUBLE_EQ(set.device(1).enqueueSec, 3e-6);
  EXPECT_DOUBLE_EQ(set.device(0).enqueueSec, 0);
  CostModel m(set);
  OpWork tiny = estimateOpWork("Add", {f32({1}), f32({1})}, {f32({1})}, {});
  double chain = 0;
  for (int i = 0; i < 5; ++i) chain += m.opTime(tiny, 1);
  EXPECT_DOUBLE_EQ(chain, 5 * 3e-6);
  EXPECT_DOUBLE_EQ(m.returnTime(1, 0, 4, HostMemory::Pageable),
                   m.transferTime(1, 0, 4, HostMemory::Pageable) + 5e-6);
  EXPECT_DOUBLE_EQ(m.returnTime(0, 1, 4, HostMemory::Pageable),
                   m.transferTime(0, 1, 4, HostMemory::Pageable));
  EXPECT_DOUBLE_EQ(m.returnTime(1, 1, 4, HostMemory::Pageable), 0);
  ASSERT_TRUE(m.loadProfileText(
                   R"({"schema": "tandem-calibration/1", "devices": {"cuda:0": {"dispatch_overhead_s": 4e-6}}})",
                   "p.json")
                  .isOk());
  EXPECT_DOUBLE_EQ(m.opTime(tiny, 1), 4e-6 + 12.0 / 3.35e12);
}

TEST(CostModelTransfers, DefaultHostMemoryComesFromTheOptions) {
  DeviceSet set;
  ASSERT_TRUE(DeviceSet::parse("cpu,cuda:0=a100", &set).isOk());
  CostOptions o;
  o.hostMemory = HostMemory::Pageable;
  CostModel m(set, o);
  // A100 over PCIe Gen4: 25 GB/s pinned, 12.5 GB/s pageable.
  EXPECT_DOUBLE_EQ(m.transferTime(0, 1, 25e6), 5e-6 + 2e-3);
}

// The last-level cache rule: weights that fit in the LLC together with the rest of the plan's
// weights and the op's other bytes are read at cache bandwidth (they stay there between steps
// and runs); when the plan's weights do not fit they stream from DRAM; activations keep the
// DRAM figure (or the measured curve's). mlp's first Gemm at batch 1: 1.6 MB of weights.
TEST(CostModelOps, WeightsThatStayInTheLastLevelCacheAreReadFromIt) {
  DeviceSpec cpu = roundCpu();
  cpu.lastLevelCacheBytes = 32 << 20;
  cpu.cacheBandwidthBytesPerSec = 100e9;
  cpu.peakF32FlopsPerSec = 1e15;  // memory-bound whatever the rates
  DeviceSet set;
  ASSERT_TRUE(DeviceSet::fromSpecs({cpu}, &set).isOk());
  CostModel m(set);
  OpWork w = estimateOpWork("Gemm", {f32({1, 784}), f32({784, 512}), f32({512})}, {f32({1, 512})}, {});
  const double weights = (784.0 * 512 + 512) * 4, others = (784.0 + 512) * 4;
  ASSERT_DOUBLE_EQ(w.bytes, weights + others);
  w.constantBytes = weights;
  w.planConstantBytes = 2.2e6;  // the whole model: fits
  EXPECT_DOUBLE_EQ(m.opCost(w, 0).memorySec, others / 20e9 + weights / 100e9);
  w.planConstantBytes = 100e6;  // weights evict each other: this op's come from DRAM
  EXPECT_DOUBLE_EQ(m.opCost(w, 0).memorySec, (others + weights) / 20e9);
  // An op without weights: DRAM, as before.
  OpWork add = estimateOpWork("Add", {f32({1024}), f32({1024})}, {f32({1024})}, {});
  EXPECT_DOUBLE_EQ(m.opCost(add, 0).memorySec, add.bytes / 20e9);
  // Unknown cache size: DRAM for everything, as before.
  DeviceSet plain;
  ASSERT_TRUE(DeviceSet::fromSpecs({roundCpu()}, &plain).isOk());
  w.planConstantBytes = 2.2e6;
  EXPECT_DOUBLE_EQ(CostModel(plain).opCost(w, 0).memorySec, (weights + others) / 20e9);
  // With a measured elementwise curve, the curve gives the rate at the op's footprint (cached
  // weights included) and its largest size (DRAM) the rate of weights that do not stay cached.
  ASSERT_TRUE(m.loadProfileText(R"({"schema": "tandem-calibration/1", "devices": {"cpu": {
      "elementwise": [{"bytes": 1e6, "bytes_per_s": 150e9}, {"bytes": 1e8, "bytes_per_s": 30e9}]}}})",
                                "p").isOk());
  const double rate = 150e9 + (30e9 - 150e9) * std::log(w.bytes / 1e6) / std::log(100.0);
  EXPECT_NEAR(m.opCost(w, 0).memorySec, w.bytes / rate, 1e-12);
  w.planConstantBytes = 100e6;
  EXPECT_NEAR(m.opCost(w, 0).memorySec, others / rate + weights / 30e9, 1e-12);
}

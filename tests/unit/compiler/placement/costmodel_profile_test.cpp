// Calibration profiles: hand-written profiles override the roofline; bad ones name file and path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "compiler/placement/CostModel.h"

using namespace tandem;

namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s)}; }

DeviceSet cpuAndH100() {
  DeviceSpec cpu = liveCpuSpec("cpu");
  cpu.peakF32FlopsPerSec = 100e9;
  cpu.memoryBandwidthBytesPerSec = 20e9;
  cpu.dispatchOverheadSec = 1e-6;
  cpu.lastLevelCacheBytes = 0;  // uncalibrated bytes from DRAM (costmodel_time_test has the cache rule)
  DeviceSpec gpu;
  EXPECT_TRUE(builtinGpuSpec("h100", "cuda:0", &gpu).isOk());
  DeviceSet set;
  EXPECT_TRUE(DeviceSet::fromSpecs({cpu, gpu}, &set).isOk());
  return set;
}

const char* kProfile = R"({
  "schema": "tandem-calibration/1",
  "host": "hand-written for the test",
  "devices": {
    "CPU:0": {
      "threads": 0,
      "dispatch_overhead_s": 2e-6,
      "gemm": [{"size": 1024, "flops_per_s": 5e10}, {"size": 64, "flops_per_s": 1e10}],
      "conv": [{"flops": 1e6, "flops_per_s": 1e10}, {"flops": 1e9, "flops_per_s": 4e10}],
      "elementwise": [{"bytes": 4096, "bytes_per_s": 5e9}, {"bytes": 4194304, "bytes_per_s": 2e10}]
    },
    "cuda:7": {"dispatch_overhead_s": 1e-5}
  },
  "links": [
    {"from": "cpu", "to": "cuda:0", "latency_s": 1e-5, "bytes_per_s": 2e10},
    {"from": "cpu", "to": "cuda:3", "latency_s": 1e-5, "bytes_per_s": 2e10}
  ]
})";

std::string writeTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

std::string loadError(const std::string& text) {
  CostModel m(cpuAndH100());
  Status st = m.loadProfileText(text, "p.json");
  EXPECT_FALSE(st.isOk());
  EXPECT_EQ(m.calibration(0), nullptr) << "a bad profile must apply nothing";
  return st.message();
}

}  // namespace

TEST(MeasuredCurve, InterpolatesInLogXAndClamps) {
  MeasuredCurve c;
  c.points = {{64, 1e10}, {1024, 5e10}};
  EXPECT_DOUBLE_EQ(c.at(64), 1e10);
  EXPECT_DOUBLE_EQ(c.at(256), 3e10);   // ln 256 is halfway between ln 64 and ln 1024
  EXPECT_DOUBLE_EQ(c.at(128), 2e10);   // a quarter of the way
  EXPECT_DOUBLE_EQ(c.at(8), 1e10);     // clamped below
  EXPECT_DOUBLE_EQ(c.at(1e6), 5e10);   // clamped above
  MeasuredCurve one;
  one.points = {{100, 7}};
  EXPECT_DOUBLE_EQ(one.at(1), 7);
  EXPECT_DOUBLE_EQ(one.at(1e9), 7);
}

TEST(Profile, HandWrittenFileOverridesTheRoofline) {
  std::string path = writeTemp("hand_profile.json", kProfile);
  CostModel m(cpuAndH100());
  Status st = m.loadProfile(path);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_NE(m.calibration(0), nullptr);
  EXPECT_EQ(m.calibration(1), nullptr);

  // GEMM 256^3: s = cbrt(flops/2) = 256 -> 3e10 FLOP/s measured (not the 100e9 peak); bytes
  // 786,432 at the measured elementwise bandwidth; overhead 2 us measured (not 1 us).
  OpWork g = estimateOpWork("Gemm", {f32({256, 256}), f32({256, 256})}, {f32({256, 256})}, {});
  OpCost c = m.opCost(g, 0);
  EXPECT_STREQ(c.source, "calibrated");
  EXPECT_DOUBLE_EQ(c.overheadSec, 2e-6);
  EXPECT_NEAR(c.computeSec, 33554432.0 / 3e10, 1e-12);
  double t = std::log(786432.0 / 4096) / std::log(1024.0);
  EXPECT_NEAR(c.memorySec, 786432.0 / (5e9 + t * 15e9), 1e-12);
  EXPECT_NEAR(c.seconds, 2e-6 + 33554432.0 / 3e10, 1e-12);

  // ResNet-18's first conv, 236,027,904 FLOPs, between the 1e6 and 1e9 points.
  OpWork conv = estimateOpWork("Conv", {f32({1, 3, 224, 224}), f32({64, 3, 7, 7})},
                               {f32({1, 64, 112, 112})}, {});
  double u = (std::log(236027904.0) - std::log(1e6)) / (std::log(1e9) - std::log(1e6));
  EXPECT_NEAR(m.opCost(conv, 0).computeSec, 236027904.0 / (1e10 + u * 3e10), 1e-12);

  // A large Add uses the last elementwise point, 20 GB/s (the spec also says 20 GB/s, so check
  // a small one instead: 12 KB moved at the interpolated rate, not 20e9).
  OpWork add = estimateOpWork("Add", {f32({1024}), f32({1024})}, {f32({1024})}, {});
  double v = std::log(12288.0 / 4096) / std::log(1024.0);
  EXPECT_NEAR(m.opCost(add, 0).memorySec, 12288.0 / (5e9 + v * 15e9), 1e-15);
  EXPECT_GT(m.opCost(add, 0).memorySec, 12288.0 / 20e9 * 1.5);

  // The GPU has no entry: still the roofline, overlapped with the 3 us enqueue of a stream
  // (CostModel.h: an op on an uncalibrated GPU costs max(enqueue, compute, memory)).
  OpCost gg = m.opCost(g, 1);
  EXPECT_STREQ(gg.source, "roofline");
  EXPECT_DOUBLE_EQ(gg.seconds, std::max(3e-6, std::max(33554432.0 / 67e12, 786432.0 / 3.35e12)));

  // The link override: 10 us + 1e6 / 2e10; pageable keeps the built-in half ratio.
  EXPECT_DOUBLE_EQ(m.transferTime(0, 1, 1e6, HostMemory::Pinned), 1e-5 + 5e-5);
  EXPECT_DOUBLE_EQ(m.transferTime(0, 1, 1e6, HostMemory::Pageable), 1e-5 + 1e-4);
  // The reverse direction was not measured.
  EXPECT_DOUBLE_EQ(m.transferTime(1, 0, 1e6, HostMemory::Pinned), 5e-6 + 1e6 / 55e9);

  // Entries for devices outside the set are reported, not applied.
  ASSERT_EQ(m.profileNotes().size(), 2u);
  EXPECT_NE(m.profileNotes()[0].find("'cuda:7'"), std::string::npos) << m.profileNotes()[0];
  EXPECT_NE(m.profileNotes()[1].find("cuda:3"), std::string::npos) << m.profileNotes()[1];
  std::remove(path.c_str());
}

TEST(Profile, Tf32OpsDoNotUseTheF32Tables) {
  DeviceSpec gpu;
  ASSERT_TRUE(builtinGpuSpec("h100", "cuda:0", &gpu).isOk());
  DeviceSet set;
  ASSERT_TRUE(DeviceSet::fromSpecs({liveCpuSpec("cpu"), gpu}, &set).isOk());
  CostOptions o;
  o.allowTf32 = true;
  CostModel m(set, o);
  ASSERT_TRUE(m.loadProfileText(R"({"schema": "tandem-calibration/1", "devices": {"cuda:0":
      {"gemm": [{"size": 64, "flops_per_s": 1e12}]}}})", "gpu.json").isOk());
  OpWork g =
      estimateOpWork("Gemm", {f32({4096, 4096}), f32({4096, 4096})}, {f32({4096, 4096})}, {});
  EXPECT_DOUBLE_EQ(m.opCost(g, 1).computeSec, 137438953472.0 / 494.5e12);
}

TEST(Profile, LaterProfilesReplaceEarlierOnes) {
  CostModel m(cpuAndH100());
  ASSERT_TRUE(m.loadProfileText(kProfile, "a.json").isOk());
  ASSERT_TRUE(m.loadProfileText(R"({"schema": "tandem-calibration/1", "devices": {"cpu":
      {"dispatch_overhead_s": 0}}})", "b.json").isOk());
  const DeviceCalibration* c = m.calibration(0);
  ASSERT_NE(c, nullptr);
  EXPECT_DOUBLE_EQ(c->dispatchOverheadSec, 0);
  EXPECT_TRUE(c->gemm.empty());
  OpWork relu = estimateOpWork("Relu", {f32({1000})}, {f32({1000})}, {});
  EXPECT_DOUBLE_EQ(m.opCost(relu, 0).seconds, 8000.0 / 20e9);  // no overhead, spec bandwidth
}

TEST(ProfileErrors, NameTheFileAndTheJsonPath) {
  std::string m = loadError(R"({"schema": "tandem-calibration/1", "devices": {"cpu": {"gemm":
      [{"size": 64, "flops_per_s": 1e10}, {"size": 128, "flops_per_s": -3}]}}})");
  EXPECT_NE(m.find("p.json: /devices/cpu/gemm/1/flops_per_s: expected a positive number"),
            std::string::npos) << m;

  m = loadError(R"({"schema": "tandem-calibration/1", "devices": {"cpu": {"conv":
      [{"flops_per_s": 1}]}}})");
  EXPECT_NE(m.find("/devices/cpu/conv/0/flops: missing"), std::string::npos) << m;

  m = loadError(R"({"schema": "tandem-calibration/1", "devices": {"cpu": {"elementwise":
      [{"bytes": 64, "bytes_per_s": 1e9}, {"bytes": 64, "bytes_per_s": 2e9}]}}})");
  EXPECT_NE(m.find("/devices/cpu/elementwise: two points at bytes = 64"), std::string::npos) << m;

  m = loadError(R"({"schema": "tandem-calibration/1", "devices": {"cpu": {"gemm": {}}}})");
  EXPECT_NE(m.find("/devices/cpu/gemm: expected a non-empty array"), std::string::npos) << m;

  m = loadError(R"({"schema": "tandem-calibration/1", "devices": {"cpu":
      {"dispatch_overhead_s": "1us"}}})");
  EXPECT_NE(m.find("/devices/cpu/dispatch_overhead_s: expected a non-negative number"),
            std::string::npos) << m;

  m = loadError(R"({"schema": "tandem-calibration/1", "devices": {},
      "links": [{"from": "cpu", "to": "cuda:0", "bytes_per_s": 1e9}]})");
  EXPECT_NE(m.find("/links/0/latency_s"), std::string::npos) << m;

  m = loadError(R"({"schema": "tandem-calibration/1", "devices": {},
      "links": [{"from": "cpu", "to": "CPU:0", "latency_s": 0, "bytes_per_s": 1e9}]})");
  EXPECT_NE(m.find("/links/0: a link needs two different devices"), std::string::npos) << m;

  m = loadError(R"({"schema": "tandem-calibration/2", "devices": {}})");
  EXPECT_NE(m.find("p.json: /schema: expected \"tandem-calibration/1\""), std::string::npos) << m;

  m = loadError(R"({"schema": "tandem-calibration/1"})");
  EXPECT_NE(m.find("/devices: missing"), std::string::npos) << m;

  m = loadError(R"([1, 2])");
  EXPECT_NE(m.find("p.json: /: expected an object"), std::string::npos) << m;

  m = loadError(R"({"schema": "tandem-calibration/1", "devices": {"cpu": {"gemm": [)");
  EXPECT_NE(m.find("p.json: not JSON"), std::string::npos) << m;
}

TEST(ProfileErrors, UnreadableFile) {
  CostModel m(cpuAndH100());
  std::string path = ::testing::TempDir() + "no_such_dir/profile.json";
  Status st = m.loadProfile(path);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find(path + ": cannot read"), std::string::npos) << st.message();
}

TEST(BuildCostModel, TargetListAndProfileTogether) {
  std::string path = writeTemp("build_profile.json", R"({"schema": "tandem-calibration/1",
      "devices": {"cpu": {"dispatch_overhead_s": 3e-6}}})");
  std::unique_ptr<CostModel> m;
  ASSERT_TRUE(buildCostModel("cpu,cuda:0=h100", path, {}, &m).isOk());
  ASSERT_EQ(m->devices().size(), 2u);
  EXPECT_DOUBLE_EQ(m->calibration(0)->dispatchOverheadSec, 3e-6);
  ASSERT_TRUE(buildCostModel("", "", {}, &m).isOk());
  EXPECT_EQ(m->devices().toString(), DeviceSet::live().toString());  // "cpu" without a GPU
  Status st = buildCostModel("cpu,cuda:0=k80", "", {}, &m);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("'cuda:0=k80'"), std::string::npos) << st.message();
  st = buildCostModel("cpu", path + ".missing", {}, &m);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find(".missing: cannot read"), std::string::npos) << st.message();
  std::remove(path.c_str());
}

// `tandem calibrate` core: a short calibration writes a profile the cost model loads and uses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compiler/placement/CostModel.h"
#include "tools/tandem/Calibrate.h"

using namespace tandem;

namespace {
TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s)}; }
}  // namespace

TEST(Calibrate, WritesAProfileThatTheCostModelApplies) {
  std::string path = ::testing::TempDir() + "calibrate_test_profile.json";
  std::remove(path.c_str());
  cli::CalibrateOptions o;
  o.output = path;
  o.seconds = 1.0;
  o.threads = 1;
  ASSERT_EQ(cli::runCalibrate(o), 0);
  EXPECT_NE(access(path.c_str(), R_OK), -1);
  EXPECT_EQ(access((path + ".tmp." + std::to_string((long)getpid())).c_str(), F_OK), -1)
      << "the temporary must be renamed away";

  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  EXPECT_EQ(j["schema"], "tandem-calibration/1");
  const auto& cpu = j["devices"]["cpu"];
  EXPECT_EQ(cpu["threads"], 1);
  EXPECT_EQ(cpu["gemm"].size(), 6u);
  EXPECT_EQ(cpu["conv"].size(), 7u);
  EXPECT_EQ(cpu["elementwise"].size(), 8u);  // 4 KB .. 64 MB in steps of 4
  // The 5x5 MNIST conv: 2 * 8*28*28 * 1*25 + bias 8*28*28, as OpWork counts it.
  EXPECT_DOUBLE_EQ(cpu["conv"][0]["flops"].get<double>(), 313600.0 + 6272.0);

  DeviceSet live = DeviceSet::live();
  CostModel m(live);
  Status st = m.loadProfile(path);
  ASSERT_TRUE(st.isOk()) << st.message();
  const DeviceCalibration* c = m.calibration(0);
  ASSERT_NE(c, nullptr);
  EXPECT_GT(c->dispatchOverheadSec, 0);
  EXPECT_LT(c->dispatchOverheadSec, 1e-3);
  const DeviceSpec& spec = live.device(0);
  // Sanity bounds that catch unit errors: oneDNN does better than 100 MFLOP/s on any x86
  // core, and one thread stays below the whole machine's roofline (x2 for turbo above the
  // frequency /proc/cpuinfo reports).
  for (const auto& p : c->gemm.points) {
    EXPECT_GT(p.second, 1e8) << "gemm " << p.first;
    EXPECT_LT(p.second, spec.peakF32FlopsPerSec * 2) << "gemm " << p.first;
  }
  for (const auto& p : c->elementwise.points) EXPECT_GT(p.second, 1e8) << "add " << p.first;

  // The 512^3 GEMM's estimate is the measured rate at 512, not the roofline.
  OpWork g = estimateOpWork("Gemm", {f32({512, 512}), f32({512, 512})}, {f32({512, 512})}, {});
  OpCost cost = m.opCost(g, 0);
  EXPECT_STREQ(cost.source, "calibrated");
  double rate512 = 0;
  for (const auto& p : c->gemm.points)
    if (p.first == 512) rate512 = p.second;
  ASSERT_GT(rate512, 0);
  EXPECT_NEAR(cost.computeSec, 2.0 * 512 * 512 * 512 / rate512, 1e-12);

  // The host-memcpy link applies to a two-CPU target set.
  DeviceSet two;
  ASSERT_TRUE(DeviceSet::parse("cpu,cpu:1", &two).isOk());
  CostModel m2(two);
  ASSERT_TRUE(m2.loadProfile(path).isOk());
  double memcpyRate = j["links"][0]["bytes_per_s"].get<double>();
  EXPECT_DOUBLE_EQ(m2.transferTime(0, 1, 1e6),
                   j["links"][0]["latency_s"].get<double>() + 1e6 / memcpyRate);
  std::remove(path.c_str());
}

TEST(Calibrate, BadOptionsAndUnwritableOutput) {
  cli::CalibrateOptions o;
  o.output = "";
  EXPECT_EQ(cli::runCalibrate(o), 2);
  o.output = ::testing::TempDir() + "x.json";
  o.seconds = 0;
  EXPECT_EQ(cli::runCalibrate(o), 2);
  o.seconds = 0.2;
  o.threads = 1;
  o.output = ::testing::TempDir() + "no_such_dir/profile.json";
  EXPECT_EQ(cli::runCalibrate(o), 1);
  EXPECT_EQ(access(o.output.c_str(), F_OK), -1);
}

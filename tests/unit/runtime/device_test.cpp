// Device names and CPU discovery.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <thread>
#include <vector>

#include "runtime/Device.h"

using namespace tandem;

TEST(DeviceName, AcceptsTheAliasesOfDesignSection2) {
  EXPECT_EQ(canonicalDeviceName("cpu"), "cpu");
  EXPECT_EQ(canonicalDeviceName("CPU:0"), "cpu");
  EXPECT_EQ(canonicalDeviceName("/cpu:0"), "cpu");
  EXPECT_EQ(canonicalDeviceName("cpu:1"), "cpu:1");
  EXPECT_EQ(canonicalDeviceName("/device:GPU:1"), "cuda:1");
  EXPECT_EQ(canonicalDeviceName("gpu:01"), "cuda:1");
  EXPECT_EQ(canonicalDeviceName("GPU"), "cuda:0");
  EXPECT_EQ(canonicalDeviceName("cuda:0"), "cuda:0");
  EXPECT_EQ(canonicalDeviceName("tpu:0"), "");
  EXPECT_EQ(canonicalDeviceName("cuda:x"), "");
  EXPECT_EQ(canonicalDeviceName("cuda:"), "");
}

TEST(Discovery, FindsTheCpuWithCoresAndIsa) {
  std::vector<DeviceInfo> devs = discoverDevices();
  ASSERT_FALSE(devs.empty());
  EXPECT_EQ(devs[0].name, "cpu");
  std::map<std::string, std::string> props(devs[0].properties.begin(), devs[0].properties.end());
  EXPECT_EQ(std::stoi(props.at("cores")), availableCores());
  EXPECT_GE(availableCores(), 1);
  EXPECT_FALSE(props.at("isa").empty());
  EXPECT_GT(std::stoll(props.at("memory_bytes")), 0);
}

TEST(DefaultThreads, AreTheIdleCoresAndHonourOmpNumThreads) {
  const int cores = availableCores();
  unsetenv("OMP_NUM_THREADS");
  int idle = defaultThreads();
  EXPECT_GE(idle, 1);
  EXPECT_LE(idle, cores);

  setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(defaultThreads(), 3);
  setenv("OMP_NUM_THREADS", "junk", 1);
  EXPECT_LE(defaultThreads(), cores);
  unsetenv("OMP_NUM_THREADS");

  if (cores < 2) GTEST_SKIP() << "SKIPPED: one core: nothing to share";
  // Keep every core busy with spinning threads: the default drops to one thread and says why.
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < 2 * cores; ++i)
    spinners.emplace_back([&] {
      volatile unsigned long x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::string why;
  int busy = defaultThreads(&why, 20);
  stop = true;
  for (std::thread& t : spinners) t.join();
  EXPECT_EQ(busy, 1);
  EXPECT_NE(why.find("busy with other processes: running with 1 thread"), std::string::npos)
      << why;
}

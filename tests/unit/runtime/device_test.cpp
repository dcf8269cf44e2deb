// Device names and CPU discovery.
#include <gtest/gtest.h>

#include <map>

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

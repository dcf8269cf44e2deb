// The CUDA math libraries stay out of a CPU-only process: running a plan on the CPU (and, where
// there is no GPU, device discovery and a refused cuda:0) maps none of libcublasLt, libnvrtc or
// libcudnn. Built with and without the CUDA backend; its own process, so nothing else loads them.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "runtime/Backend.h"
#include "runtime/Device.h"
#include "runtime/Executable.h"
#include "runtime/PlanFormat.h"
#include "plan_test_util.h"

using namespace tandem;

namespace {

std::string selfMaps() {
  std::ifstream in("/proc/self/maps");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The CUDA math libraries mapped into this process, by file stem.
std::vector<std::string> mappedCudaLibraries() {
  std::string maps = selfMaps();
  std::vector<std::string> found;
  for (const char* stem : {"/libcublasLt.so", "/libcublas.so", "/libnvrtc.so", "/libcudnn"})
    if (maps.find(stem) != std::string::npos) found.push_back(stem);
  return found;
}

// y = Relu(x): f32[4], x at 0, y at 64.
plan::Plan reluPlan() {
  plan::Plan p;
  p.set_version(kPlanVersion);
  addValue(p, "x", plan::Value::INPUT, {4}, 0);
  addValue(p, "y", plan::Value::INTERMEDIATE, {4}, 64);
  plan::Step* relu = p.add_steps();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->set_device("cpu");
  relu->add_inputs(0);
  relu->add_outputs(1);
  p.add_inputs(0);
  p.add_outputs(1);
  plan::Arena* a = p.add_arenas();
  a->set_device("cpu");
  a->set_bytes(128);
  return p;
}

TEST(LazyCudaLibraries, ACpuRunMapsNone) {
  // The maps are read right: oneDNN, which every runtime process links, is there.
  ASSERT_NE(selfMaps().find("/libdnnl.so"), std::string::npos);
  EXPECT_EQ(mappedCudaLibraries(), std::vector<std::string>{}) << "mapped at process start";

  std::unique_ptr<Executable> exe;
  Status st = Executable::load(reluPlan(), LoadOptions{1}, &exe);
  ASSERT_TRUE(st.isOk()) << st.message();
  std::vector<Tensor> out;
  st = exe->run({Tensor::fromVector<float>({4}, {-1.f, 2.f, -3.f, 4.f})}, &out);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 0.f);
  EXPECT_FLOAT_EQ(out[0].data<float>()[3], 4.f);
  EXPECT_EQ(mappedCudaLibraries(), std::vector<std::string>{}) << "mapped by a CPU plan";
}

TEST(LazyCudaLibraries, DiscoveryWithoutAGpuMapsNone) {
  // Where a GPU is live, discovery opens cuDNN and NVRTC for their versions, by design.
  std::unique_ptr<DeviceBackend> gpu;
  Status why = createCudaBackend(0, BackendOptions{}, &gpu);
  if (why.isOk()) GTEST_SKIP() << "a CUDA device is present";
  std::vector<DeviceInfo> devices = discoverDevices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].name, "cpu");
  EXPECT_FALSE(discoveryNotes().empty());
  EXPECT_EQ(mappedCudaLibraries(), std::vector<std::string>{}) << "mapped by discovery (" << why.message() << ")";
}

}  // namespace

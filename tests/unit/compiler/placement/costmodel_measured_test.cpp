// CostModel with the runtime's kernel timing cache: a CPU op the runtime measured on this
// machine costs its measured time (plus dispatch) on the live CPU, the roofline elsewhere.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compiler/placement/CostModel.h"
#include "runtime/Device.h"

using namespace tandem;
namespace fs = std::filesystem;

namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s)}; }

struct GemmOp {
  AttrMap attrs;
  Tensor marker;  // constInputs only need a non-null pointer
  KernelContext ctx;
  GemmOp(int64_t m) {
    attrs.set("transB", Attr::ofInt(1));
    ctx.opType = "Gemm";
    ctx.attrs = &attrs;
    ctx.inputTypes = {f32({m, 256}), f32({128, 256}), f32({128})};
    ctx.constInputs = {nullptr, &marker, &marker};
    ctx.outputTypes = {f32({m, 128})};
  }
};

std::string writeCache(const std::string& opKey, double seconds) {
  fs::path p = fs::temp_directory_path() / ("tandem_costmodel_measured_" + std::to_string(::getpid()) + ".json");
  nlohmann::json j = {{"format", "tandem-kernel-timings"},
                      {"version", 1},
                      {"entries", nlohmann::json::object()},
                      {"ops", {{opKey, {{"seconds", seconds}, {"variant", "dnnl"}}}}}};
  std::ofstream(p) << j.dump();
  return p.string();
}

}  // namespace

TEST(CostModelMeasured, TheRuntimesTimeReplacesTheRooflineOnTheLiveCpuOnly) {
  GemmOp op(32);
  KernelContext keyed = op.ctx;
  keyed.threads = 1;  // one of the thread counts the model tries
  const TimingHost host{cpuModelName(), cpuEffectiveIsa()};
  const std::string path = writeCache(kernelOpTimingKey(host, keyed), 2.5e-3);

  DeviceSet live;
  ASSERT_TRUE(DeviceSet::fromSpecs({liveCpuSpec("cpu")}, &live).isOk());
  CostModel m(live);
  OpWork w = estimateOpWork("Gemm", op.ctx.inputTypes, op.ctx.outputTypes, op.attrs);
  const OpCost roofline = m.opCost(w, 0);
  EXPECT_EQ(m.measuredCpuSeconds(op.ctx), -1) << "nothing loaded yet";

  m.loadKernelTimings(path);
  EXPECT_TRUE(m.profileNotes().empty());
  w.measuredCpuSeconds = m.measuredCpuSeconds(op.ctx);
  EXPECT_DOUBLE_EQ(w.measuredCpuSeconds, 2.5e-3);
  OpCost c = m.opCost(w, 0);
  EXPECT_STREQ(c.source, "measured");
  EXPECT_DOUBLE_EQ(c.seconds, 2.5e-3) << "the runtime timed the launch, dispatch included";
  EXPECT_DOUBLE_EQ(c.overheadSec, 0);
  EXPECT_NE(c.seconds, roofline.seconds);

  // Another shape, or the same op with run-time weights, is another kernel: not measured.
  EXPECT_EQ(m.measuredCpuSeconds(GemmOp(64).ctx), -1);
  GemmOp notConst(32);
  notConst.ctx.constInputs = {nullptr, nullptr, nullptr};
  EXPECT_EQ(m.measuredCpuSeconds(notConst.ctx), -1);

  // A modelled CPU (--target cpu=xeon-8480) is not this machine: roofline.
  DeviceSpec xeon;
  ASSERT_TRUE(builtinCpuSpec("xeon-8480", "cpu", &xeon).isOk());
  DeviceSet modelled;
  ASSERT_TRUE(DeviceSet::fromSpecs({xeon}, &modelled).isOk());
  CostModel x(modelled);
  x.loadKernelTimings(path);
  EXPECT_STREQ(x.opCost(w, 0).source, "roofline");

  // A corrupt cache is a note, and nothing is measured.
  std::ofstream(path) << "{";
  CostModel bad(live);
  bad.loadKernelTimings(path);
  EXPECT_EQ(bad.profileNotes().size(), 1u);
  EXPECT_EQ(bad.measuredCpuSeconds(op.ctx), -1);
  fs::remove(path);
}

// `tandem tune` records every CPU step, not only those with kernel variants: a measured time
// replaces the model for every op kind, a metadata op (Flatten) and a memory-bound one
// (MaxPool) included.
TEST(CostModelMeasured, EveryOpKindTakesItsMeasuredTime) {
  DeviceSet live;
  ASSERT_TRUE(DeviceSet::fromSpecs({liveCpuSpec("cpu")}, &live).isOk());
  CostModel m(live);
  AttrMap flatAttrs, poolAttrs;
  flatAttrs.set("axis", Attr::ofInt(1));
  poolAttrs.set("kernel_shape", Attr::ofInts({2, 2}));
  poolAttrs.set("strides", Attr::ofInts({2, 2}));
  struct Case {
    const char* op;
    const AttrMap* attrs;
    std::vector<TensorType> in, out;
    double seconds;
  };
  for (const Case& k : {Case{"Flatten", &flatAttrs, {f32({8, 64, 4, 4})}, {f32({8, 1024})}, 7e-7},
                        Case{"MaxPool", &poolAttrs, {f32({8, 64, 8, 8})}, {f32({8, 64, 4, 4})}, 4e-5}}) {
    OpWork w = estimateOpWork(k.op, k.in, k.out, *k.attrs);
    w.measuredCpuSeconds = k.seconds;
    OpCost c = m.opCost(w, 0);
    EXPECT_STREQ(c.source, "measured") << k.op;
    EXPECT_DOUBLE_EQ(c.seconds, k.seconds) << k.op;
    w.measuredCpuSeconds = -1;
    EXPECT_STRNE(m.opCost(w, 0).source, "measured") << k.op;
  }
}

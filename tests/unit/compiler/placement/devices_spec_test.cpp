// DeviceSpec, DeviceSet and Link: built-in datasheet figures, the live CPU, target lists, links.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdlib>

#include <fstream>

#include "compiler/placement/DeviceSpec.h"
#include "runtime/Device.h"

using namespace tandem;

namespace {

DeviceSet parseOk(const std::string& list) {
  DeviceSet s;
  Status st = DeviceSet::parse(list, &s);
  EXPECT_TRUE(st.isOk()) << list << ": " << st.message();
  return s;
}

std::string parseError(const std::string& list) {
  DeviceSet s;
  Status st = DeviceSet::parse(list, &s);
  EXPECT_FALSE(st.isOk()) << list << " parsed";
  return st.message();
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

TEST(BuiltinSpecs, H100SxmHasItsDatasheetFigures) {
  DeviceSpec s;
  ASSERT_TRUE(builtinGpuSpec("h100", "cuda:0", &s).isOk());
  EXPECT_EQ(s.name, "cuda:0");
  EXPECT_EQ(s.kind, DeviceKind::Cuda);
  EXPECT_EQ(s.model, "h100-sxm");
  EXPECT_DOUBLE_EQ(s.peakF32FlopsPerSec, 67e12);
  EXPECT_DOUBLE_EQ(s.peakTf32FlopsPerSec, 494.5e12);   // 989 TF "with sparsity" / 2
  EXPECT_DOUBLE_EQ(s.peakBf16FlopsPerSec, 989.5e12);   // 1,979 TF "with sparsity" / 2
  EXPECT_DOUBLE_EQ(s.peakF64FlopsPerSec, 34e12);
  EXPECT_DOUBLE_EQ(s.memoryBandwidthBytesPerSec, 3.35e12);
  EXPECT_EQ(s.memoryCapacityBytes, (int64_t)(80 * kGiB));
  EXPECT_DOUBLE_EQ(s.dispatchOverheadSec, 5e-6);
  EXPECT_EQ(s.hostLinkName, "pcie-gen5-x16");
  EXPECT_DOUBLE_EQ(s.h2dPinnedBytesPerSec, 55e9);
  EXPECT_EQ(s.peerLinkName, "nvlink4");
  EXPECT_DOUBLE_EQ(s.peerBytesPerSec, 0.87 * 450e9);
}

TEST(BuiltinSpecs, EveryModelDiffersWhereTheDatasheetsDo) {
  DeviceSpec a100, a100p, h100p, h200;
  ASSERT_TRUE(builtinGpuSpec("A100", "cuda:0", &a100).isOk());  // case-insensitive alias
  ASSERT_TRUE(builtinGpuSpec("a100-pcie", "cuda:0", &a100p).isOk());
  ASSERT_TRUE(builtinGpuSpec("h100-pcie", "cuda:0", &h100p).isOk());
  ASSERT_TRUE(builtinGpuSpec("h200", "cuda:0", &h200).isOk());

  EXPECT_EQ(a100.model, "a100-sxm");
  EXPECT_DOUBLE_EQ(a100.peakF32FlopsPerSec, 19.5e12);
  EXPECT_DOUBLE_EQ(a100.peakTf32FlopsPerSec, 156e12);
  EXPECT_DOUBLE_EQ(a100.peakBf16FlopsPerSec, 312e12);
  EXPECT_DOUBLE_EQ(a100.memoryBandwidthBytesPerSec, 2039e9);
  EXPECT_EQ(a100.hostLinkName, "pcie-gen4-x16");
  EXPECT_DOUBLE_EQ(a100.h2dPinnedBytesPerSec, 25e9);
  EXPECT_EQ(a100.peerLinkName, "nvlink3");

  EXPECT_DOUBLE_EQ(a100p.memoryBandwidthBytesPerSec, 1935e9);
  EXPECT_TRUE(a100p.peerLinkName.empty());

  EXPECT_DOUBLE_EQ(h100p.peakF32FlopsPerSec, 51e12);
  EXPECT_DOUBLE_EQ(h100p.peakTf32FlopsPerSec, 378e12);
  EXPECT_DOUBLE_EQ(h100p.memoryBandwidthBytesPerSec, 2.0e12);
  EXPECT_EQ(h100p.hostLinkName, "pcie-gen5-x16");  // Gen5, unlike the A100 PCIe
  EXPECT_TRUE(h100p.peerLinkName.empty());

  EXPECT_EQ(h200.model, "h200-sxm");
  EXPECT_DOUBLE_EQ(h200.memoryBandwidthBytesPerSec, 4.8e12);
  EXPECT_EQ(h200.memoryCapacityBytes, (int64_t)(141 * kGiB));
  EXPECT_DOUBLE_EQ(h200.peakF32FlopsPerSec, 67e12);
}

TEST(BuiltinSpecs, PeakFlopsFallsBackToF32WithoutTensorRates) {
  DeviceSpec h;
  ASSERT_TRUE(builtinGpuSpec("h100", "cuda:0", &h).isOk());
  EXPECT_DOUBLE_EQ(h.peakFlops(Precision::TF32), 494.5e12);
  EXPECT_DOUBLE_EQ(h.peakFlops(Precision::F16), 989.5e12);
  DeviceSpec cpu = liveCpuSpec("cpu");
  EXPECT_DOUBLE_EQ(cpu.peakFlops(Precision::TF32), cpu.peakF32FlopsPerSec);
  EXPECT_DOUBLE_EQ(cpu.peakFlops(Precision::BF16), cpu.peakF32FlopsPerSec);
  EXPECT_DOUBLE_EQ(cpu.peakFlops(Precision::F64), cpu.peakF32FlopsPerSec / 2);
}

TEST(BuiltinSpecs, UnknownModelListsTheKnownOnes) {
  DeviceSpec s;
  Status st = builtinGpuSpec("v100", "cuda:0", &s);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("'v100'"), std::string::npos) << st.message();
  for (const std::string& m : knownGpuModels())
    EXPECT_NE(st.message().find(m), std::string::npos) << m << " missing in: " << st.message();
}

// The last-level cache comes from sysfs: the largest data/unified cache level of cpu0.
TEST(LiveCpu, LastLevelCacheFromSysfs) {
  DeviceSpec c = liveCpuSpec("cpu");
  std::ifstream level("/sys/devices/system/cpu/cpu0/cache/index0/level");
  if (!level) {
    EXPECT_EQ(c.lastLevelCacheBytes, 0);
    EXPECT_EQ(c.cacheBandwidthBytesPerSec, 0);
    return;
  }
  int64_t largest = 0;
  for (int i = 0; i < 16; ++i) {
    std::string d = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream t(d + "type"), s(d + "size");
    std::string type, size;
    if (!(t >> type) || !(s >> size) || type == "Instruction") continue;
    ASSERT_EQ(size.back(), 'K') << "sysfs sizes here are in KiB: " << size;
    largest = std::max<int64_t>(largest, std::stoll(size) * 1024);
  }
  EXPECT_EQ(c.lastLevelCacheBytes, largest);
  EXPECT_GE(c.lastLevelCacheBytes, 1 << 20) << "an L2 or L3 of at least 1 MiB";
  EXPECT_DOUBLE_EQ(c.cacheBandwidthBytesPerSec, 32.0 * c.frequencyHz * c.cores);
  EXPECT_GT(c.cacheBandwidthBytesPerSec, c.memoryBandwidthBytesPerSec);
}

// OMP_NUM_THREADS fixes the runtime's thread count, so the live CPU is priced for that many.
TEST(LiveCpu, OmpNumThreadsCapsTheCores) {
  ::setenv("OMP_NUM_THREADS", "1", 1);
  DeviceSpec one = liveCpuSpec("cpu");
  ::unsetenv("OMP_NUM_THREADS");
  DeviceSpec all = liveCpuSpec("cpu");
  EXPECT_EQ(one.cores, 1);
  EXPECT_EQ(all.cores, availableCores());
  EXPECT_DOUBLE_EQ(one.peakF32FlopsPerSec, all.peakF32FlopsPerSec / all.cores);
}

TEST(LiveCpu, PeakIsCoresTimesLanesTimesFmaTimesFrequency) {
  DeviceSpec c = liveCpuSpec("cpu");
  EXPECT_EQ(c.kind, DeviceKind::Cpu);
  EXPECT_EQ(c.cores, availableCores());
  EXPECT_GT(c.frequencyHz, 0);
#if defined(__x86_64__)
  int lanes = __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("avx2") ? 8 : 4;
  int perLane = __builtin_cpu_supports("fma") ? 4 : 2;
  EXPECT_EQ(c.simdF32Lanes, lanes);
  EXPECT_DOUBLE_EQ(c.peakF32FlopsPerSec, (double)c.cores * lanes * perLane * c.frequencyHz);
#endif
  EXPECT_DOUBLE_EQ(c.memoryBandwidthBytesPerSec, 10e9 * c.cores);
  EXPECT_DOUBLE_EQ(c.dispatchOverheadSec, 1e-6);
  EXPECT_GT(c.memoryCapacityBytes, 0);
  bool saysUncalibrated = false;
  for (const std::string& n : c.notes)
    saysUncalibrated |= n.find("uncalibrated") != std::string::npos;
  EXPECT_TRUE(saysUncalibrated);
}

TEST(DeviceSetParse, TwoH100sGetPcieToTheHostAndNvlinkBetweenThem) {
  DeviceSet s = parseOk("cpu,cuda:0=h100,cuda:1=h100");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.device(0).name, "cpu");
  EXPECT_EQ(s.device(1).name, "cuda:0");
  EXPECT_EQ(s.device(2).model, "h100-sxm");
  EXPECT_EQ(s.hostIndex(), 0);
  EXPECT_EQ(s.toString(), "cpu,cuda:0=h100-sxm,cuda:1=h100-sxm");
  EXPECT_EQ(s.links().size(), 6u);

  const Link* h2d = s.link("cpu", "cuda:0");
  ASSERT_NE(h2d, nullptr);
  EXPECT_EQ(h2d->kind, Link::Kind::HostToDevice);
  EXPECT_EQ(h2d->medium, "pcie-gen5-x16");
  EXPECT_DOUBLE_EQ(h2d->latencySec, 5e-6);
  EXPECT_DOUBLE_EQ(h2d->bytesPerSec(HostMemory::Pinned), 55e9);
  EXPECT_DOUBLE_EQ(h2d->bytesPerSec(HostMemory::Pageable), 27.5e9);
  const Link* d2h = s.link("cuda:1", "cpu");
  ASSERT_NE(d2h, nullptr);
  EXPECT_EQ(d2h->kind, Link::Kind::DeviceToHost);
  EXPECT_STREQ(linkKindName(d2h->kind), "d2h");
  const Link* p2p = s.link("cuda:0", "cuda:1");
  ASSERT_NE(p2p, nullptr);
  EXPECT_EQ(p2p->kind, Link::Kind::PeerToPeer);
  EXPECT_EQ(p2p->medium, "nvlink4");
  EXPECT_DOUBLE_EQ(p2p->latencySec, 3e-6);
  EXPECT_DOUBLE_EQ(p2p->bytesPerSec(HostMemory::Pageable), 0.87 * 450e9);
  EXPECT_EQ(s.link(1, 1), nullptr);
}

TEST(DeviceSetParse, GpusWithoutACommonNvlinkGoThroughTheHost) {
  DeviceSet pcie = parseOk("cpu,cuda:0=h100-pcie,cuda:1=h100-pcie");
  const Link* l = pcie.link("cuda:0", "cuda:1");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->medium, "pcie-via-host");
  EXPECT_DOUBLE_EQ(l->latencySec, 10e-6);  // D2H + H2D latencies
  EXPECT_DOUBLE_EQ(l->pinnedBytesPerSec, 55e9);

  DeviceSet mixed = parseOk("cpu,cuda:0=a100,cuda:1=h100");  // NVLink 3 vs NVLink 4
  const Link* m = mixed.link("cuda:1", "cuda:0");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->medium, "pcie-via-host");
  EXPECT_DOUBLE_EQ(m->pinnedBytesPerSec, 25e9);  // the A100's Gen4 leg limits the pipeline

  DeviceSet a100s = parseOk("cpu,cuda:0=a100,cuda:1=a100-sxm4");
  EXPECT_EQ(a100s.link("cuda:0", "cuda:1")->medium, "nvlink3");
  EXPECT_DOUBLE_EQ(a100s.link("cuda:0", "cuda:1")->pinnedBytesPerSec, 0.87 * 300e9);
}

TEST(DeviceSetParse, AcceptsDeviceAndModelAliases) {
  DeviceSet s = parseOk(" CPU:0 , gpu:1=H100 ,/device:GPU:0=h200");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.device(0).name, "cpu");
  EXPECT_EQ(s.device(1).name, "cuda:1");
  EXPECT_EQ(s.device(1).model, "h100-sxm");
  EXPECT_EQ(s.device(2).name, "cuda:0");
  EXPECT_EQ(s.device(2).model, "h200-sxm");
  EXPECT_EQ(s.indexOf("gpu:1"), 1);
  EXPECT_EQ(s.indexOf("/cpu:0"), 0);
  EXPECT_EQ(s.indexOf("cuda:5"), -1);
  EXPECT_EQ(s.find("GPU:0")->model, "h200-sxm");
}

TEST(DeviceSetParse, TwoCpuDevicesSplitTheMachine) {
  DeviceSet s = parseOk("cpu,cpu:1");
  ASSERT_EQ(s.size(), 2u);
  DeviceSpec whole = liveCpuSpec("cpu");
  int half = std::max(1, availableCores() / 2);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(s.device(i).kind, DeviceKind::Cpu);
    EXPECT_EQ(s.device(i).cores, half);
    EXPECT_DOUBLE_EQ(s.device(i).peakF32FlopsPerSec,
                     whole.peakF32FlopsPerSec / whole.cores * half);
    EXPECT_EQ(s.device(i).memoryCapacityBytes, whole.memoryCapacityBytes / 2);
  }
  const Link* l = s.link("cpu:1", "cpu");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, Link::Kind::HostToHost);
  EXPECT_EQ(l->medium, "host-memcpy");
  EXPECT_DOUBLE_EQ(l->pinnedBytesPerSec, 10e9 * half / 2);  // a copy reads and writes
  EXPECT_DOUBLE_EQ(l->latencySec, 1e-6);
}

TEST(DeviceSetParse, BadEntriesAreNamedInTheMessage) {
  std::string m = parseError("cpu,cuda:0=v100");
  EXPECT_NE(m.find("target entry 'cuda:0=v100'"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown GPU model 'v100'"), std::string::npos) << m;
  EXPECT_NE(m.find("h100-sxm"), std::string::npos) << m;
  EXPECT_NE(m.find("a100-pcie"), std::string::npos) << m;

  m = parseError("cpu,tpu:0");
  EXPECT_NE(m.find("'tpu:0' is not a device"), std::string::npos) << m;
  m = parseError("cpu,cuda:0");
  EXPECT_NE(m.find("'cuda:0': a CUDA device needs a model"), std::string::npos) << m;
  m = parseError("cuda:0=h100");
  EXPECT_NE(m.find("has no CPU device"), std::string::npos) << m;
  m = parseError("cpu,CPU:0");
  EXPECT_NE(m.find("repeats device 'cpu'"), std::string::npos) << m;
  m = parseError("cpu,,cuda:0=h100");
  EXPECT_NE(m.find("entry 2 is empty"), std::string::npos) << m;
  m = parseError("cpu,");
  EXPECT_NE(m.find("entry 2 is empty"), std::string::npos) << m;
  m = parseError("cpu=h100");
  EXPECT_NE(m.find("target entry 'cpu=h100': unknown CPU model 'h100' (known: live (this "
                   "machine), xeon-8480, epyc-9654)"),
            std::string::npos)
      << m;
  m = parseError("cpu,cuda:0=xeon-8480");
  EXPECT_NE(m.find("unknown GPU model 'xeon-8480'"), std::string::npos) << m;
  m = parseError("cpu,cuda:0=");
  EXPECT_NE(m.find("missing model"), std::string::npos) << m;
  m = parseError("");
  EXPECT_NE(m.find("empty target list"), std::string::npos) << m;
}

TEST(DeviceSetParse, BuiltinCpuModelsAreSocketsFromVendorFigures) {
  DeviceSet s;
  ASSERT_TRUE(DeviceSet::parse("cpu=Xeon-8480,cpu:1=xeon-8480+,cuda:0=h100", &s));
  ASSERT_EQ(s.size(), 3u);
  const DeviceSpec& x = s.device(0);
  EXPECT_EQ(x.model, "xeon-8480");
  EXPECT_FALSE(x.isGpu());
  // 56 cores x 16 lanes x 2 FMA units x 2 FLOPs x 2.0 GHz; two sockets are not split.
  EXPECT_DOUBLE_EQ(x.peakF32FlopsPerSec, 56.0 * 16 * 4 * 2.0e9);
  EXPECT_DOUBLE_EQ(s.device(1).peakF32FlopsPerSec, x.peakF32FlopsPerSec);
  EXPECT_DOUBLE_EQ(x.memoryBandwidthBytesPerSec, 0.8 * 307.2e9);
  EXPECT_DOUBLE_EQ(x.dispatchOverheadSec, 3e-6);
  EXPECT_EQ(s.toString(), "cpu=xeon-8480,cpu:1=xeon-8480,cuda:0=h100-sxm");
  // Host-to-host link between the sockets: memcpy at half the DRAM bandwidth.
  EXPECT_DOUBLE_EQ(s.link(0, 1)->pinnedBytesPerSec, 0.8 * 307.2e9 / 2);
  // The H2D link of the GPU does not depend on which CPU is the host.
  EXPECT_DOUBLE_EQ(s.link(0, 2)->pinnedBytesPerSec, 55e9);

  DeviceSet e;
  ASSERT_TRUE(DeviceSet::parse("cpu=epyc-9654", &e));
  EXPECT_DOUBLE_EQ(e.device(0).peakF32FlopsPerSec, 96.0 * 8 * 4 * 2.4e9);

  // "=live" is this machine, the same as no model.
  DeviceSet live, plain;
  ASSERT_TRUE(DeviceSet::parse("cpu=live", &live));
  ASSERT_TRUE(DeviceSet::parse("cpu", &plain));
  EXPECT_EQ(live.device(0).peakF32FlopsPerSec, plain.device(0).peakF32FlopsPerSec);
  EXPECT_EQ(live.toString(), "cpu");
}

TEST(DeviceSetLive, IsTheCpuAndTheDiscoveredGpus) {
  DeviceSet s = DeviceSet::live();
  size_t gpus = 0;
  for (const DeviceInfo& d : discoverDevices()) gpus += d.kind == "cuda";
  ASSERT_EQ(s.size(), 1u + gpus);
  EXPECT_EQ(s.device(0).name, "cpu");
  EXPECT_EQ(s.device(0).cores, availableCores());
  EXPECT_EQ(s.hostIndex(), 0);
  for (size_t i = 1; i < s.size(); ++i) {
    EXPECT_EQ(s.device(i).name, "cuda:" + std::to_string(i - 1));
    EXPECT_EQ(s.device(i).kind, DeviceKind::Cuda);
    EXPECT_NE(s.link("cpu", s.device(i).name), nullptr);
  }
  EXPECT_EQ(s.links().empty(), gpus == 0);
}

TEST(DeviceSetFromSpecs, RejectsBadSpecs) {
  DeviceSpec cpu = liveCpuSpec("cpu");
  DeviceSet s;
  EXPECT_FALSE(DeviceSet::fromSpecs({}, &s).isOk());
  EXPECT_FALSE(DeviceSet::fromSpecs({cpu, cpu}, &s).isOk());
  DeviceSpec bad = cpu;
  bad.name = "CPU:0";  // not canonical
  EXPECT_FALSE(DeviceSet::fromSpecs({bad}, &s).isOk());
  bad = cpu;
  bad.memoryBandwidthBytesPerSec = 0;
  Status st = DeviceSet::fromSpecs({bad}, &s);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("'cpu'"), std::string::npos) << st.message();
}

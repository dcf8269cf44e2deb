// NVRTC compile-only tests (no GPU needed): every generated kernel the CUDA backend can emit
// compiles for sm_90 in one program; kernels created from real op contexts compile too; the PTX
// cache key covers source, options, architecture and NVRTC version; a cache hit is used.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "runtime/Kernel.h"
#include "runtime/cuda/CudaCommon.h"
#include "runtime/cuda/Generated.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/tandem_nvrtc_XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "";
}

TEST(Nvrtc, EveryGeneratedKernelCompilesForSm90InOneProgram) {
  GeneratedProgram prog;
  auto all = allGeneratedSources();
  ASSERT_GT(all.size(), 100u);  // every op x dtype instantiation
  for (auto& s : all) ASSERT_TRUE(prog.add(s.first, s.second).isOk()) << s.first;
  std::string ptx;
  bool hit = true;
  Status st = compileToPtx(prog.translationUnit(), nvrtcOptions(), "compute_90", "", &ptx, &hit);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_FALSE(hit);
  // Each kernel is an entry point of the module under its own (extern "C") name.
  for (auto& s : all) EXPECT_NE(ptx.find(".entry " + s.first + "("), std::string::npos) << s.first;
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
}

TEST(Nvrtc, CompileErrorsCarryTheLog) {
  std::string ptx;
  bool hit;
  Status st = compileToPtx(generatedPrelude() + "extern \"C\" __global__ void bad() { undefined_thing(); }",
                           nvrtcOptions(), "compute_90", "", &ptx, &hit);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("undefined_thing"), std::string::npos) << st.message();
}

TEST(Nvrtc, SameNameWithAnotherSourceIsRejected) {
  GeneratedProgram prog;
  EXPECT_TRUE(prog.add("k", "a").isOk());
  EXPECT_TRUE(prog.add("k", "a").isOk());
  EXPECT_FALSE(prog.add("k", "b").isOk());
}

TEST(Nvrtc, CacheKeyCoversSourceOptionsArchAndVersion) {
  std::string base = nvrtcCacheKey("src", {"-a"}, "compute_90", "13.0");
  EXPECT_EQ(base.size(), 32u);
  EXPECT_EQ(base, nvrtcCacheKey("src", {"-a"}, "compute_90", "13.0"));
  std::set<std::string> keys = {base,
                                nvrtcCacheKey("src2", {"-a"}, "compute_90", "13.0"),
                                nvrtcCacheKey("src", {"-b"}, "compute_90", "13.0"),
                                nvrtcCacheKey("src", {"-a", "-c"}, "compute_90", "13.0"),
                                nvrtcCacheKey("src", {"-a"}, "compute_80", "13.0"),
                                nvrtcCacheKey("src", {"-a"}, "compute_90", "13.1"),
                                nvrtcCacheKey("sr", {"c-a"}, "compute_90", "13.0")};
  EXPECT_EQ(keys.size(), 7u);
}

TEST(Nvrtc, CacheHitIsUsedAndMissIsStored) {
  std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  std::string src = generatedPrelude() + copyKernelSource(DType::F32);
  std::string ptx1, ptx2;
  bool hit = true;
  ASSERT_TRUE(compileToPtx(src, nvrtcOptions(), "compute_90", dir, &ptx1, &hit).isOk());
  EXPECT_FALSE(hit);
  ASSERT_TRUE(compileToPtx(src, nvrtcOptions(), "compute_90", dir, &ptx2, &hit).isOk());
  EXPECT_TRUE(hit);
  EXPECT_EQ(ptx1, ptx2);
  // The file under the key is what a hit returns: replace it and the replacement comes back.
  std::string file = dir + "/" + nvrtcCacheKey(src, nvrtcOptions(), "compute_90", nvrtcVersionText()) + ".ptx";
  { std::ofstream(file) << "// marker"; }
  ASSERT_TRUE(compileToPtx(src, nvrtcOptions(), "compute_90", dir, &ptx2, &hit).isOk());
  EXPECT_TRUE(hit);
  EXPECT_EQ(ptx2, "// marker");
  // Another architecture is another key: a miss.
  ASSERT_TRUE(compileToPtx(src, nvrtcOptions(), "compute_80", dir, &ptx2, &hit).isOk());
  EXPECT_FALSE(hit);
  EXPECT_NE(ptx2.find(".target sm_80"), std::string::npos);
  std::system(("rm -rf " + dir).c_str());
}

TEST(Nvrtc, CacheDirFollowsTheEnvironment) {
  setenv("TANDEM_NVRTC_CACHE", "/x/y", 1);
  EXPECT_EQ(nvrtcCacheDir(), "/x/y");
  unsetenv("TANDEM_NVRTC_CACHE");
  setenv("XDG_CACHE_HOME", "/c", 1);
  EXPECT_EQ(nvrtcCacheDir(), "/c/tandem/nvrtc");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/h", 1);
  EXPECT_EQ(nvrtcCacheDir(), "/h/.cache/tandem/nvrtc");
}

TEST(Nvrtc, PtxArchIsCappedAtWhatNvrtcSupports) {
  EXPECT_EQ(ptxArchFor(9, 0), "compute_90");
  EXPECT_EQ(ptxArchFor(8, 6), "compute_86");
  // A future device gets the newest architecture this NVRTC knows (PTX is forward compatible).
  std::string future = ptxArchFor(99, 0);
  EXPECT_EQ(future.rfind("compute_", 0), 0u);
  EXPECT_LT(std::stoi(future.substr(8)), 990);
}

// Kernel factories run without a GPU up to the point they need device memory: the sources they
// add for real op contexts compile together.
TEST(Nvrtc, KernelsCreatedFromOpContextsCompileTogether) {
  DeviceContext dc;
  dc.device = "cuda:0";
  struct Case {
    std::string op;
    std::vector<TensorType> in, out;
    AttrMap attrs;
  };
  TensorType f23{DType::F32, {2, 3}}, f3{DType::F32, {3}}, i23{DType::I64, {2, 3}}, b23{DType::Bool, {2, 3}};
  std::vector<Case> cases = {
      {"Add", {f23, f3}, {f23}, {}},
      {"Add", {i23, i23}, {i23}, {}},
      {"Less", {f23, f3}, {b23}, {}},
      {"Where", {b23, f23, f23}, {f23}, {}},
      {"Sum", {f23, f23, f3}, {f23}, {}},
      {"Cast", {f23}, {i23}, {}},
      {"LeakyRelu", {f23}, {f23}, {}},
      {"Transpose", {f23}, {{DType::F32, {3, 2}}}, {}},
      {"Concat", {f23, f23}, {{DType::F32, {4, 3}}}, {}},
      {"ReduceSum", {f23}, {{DType::F32, {2, 1}}}, {}},
      {"ArgMax", {f23}, {{DType::I64, {1, 3}}}, {}},
      {"Softmax", {f23}, {f23}, {}},
      {"LayerNormalization", {f23, f3, f3}, {f23}, {}},
      {"Gather", {f23, {DType::I32, {4}}}, {{DType::F32, {4, 3}}}, {}},
  };
  cases[9].attrs.set("axes", Attr::ofInts({1}));
  std::vector<std::unique_ptr<Kernel>> kernels;
  for (Case& c : cases) {
    KernelContext ctx;
    ctx.opType = c.op;
    ctx.attrs = &c.attrs;
    ctx.inputTypes = c.in;
    ctx.outputTypes = c.out;
    ctx.constInputs.assign(c.in.size(), nullptr);
    ctx.cuda = &dc;
    std::unique_ptr<Kernel> k;
    Status st = KernelRegistry::global().create("cuda", ctx, &k);
    ASSERT_TRUE(st.isOk()) << c.op << ": " << st.message();
    EXPECT_EQ(k->implName(), "nvrtc") << c.op;
    kernels.push_back(std::move(k));
  }
  std::string ptx;
  bool hit;
  Status st = compileToPtx(dc.program.translationUnit(), nvrtcOptions(), "compute_90", "", &ptx, &hit);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_NE(ptx.find(".entry td_ew_Add_f32_f32_to_f32("), std::string::npos);
  EXPECT_NE(ptx.find(".entry td_ew_Less_f32_f32_to_bool("), std::string::npos);
  EXPECT_NE(ptx.find(".entry td_ReduceSum_f32("), std::string::npos);
}

TEST(Nvrtc, KernelsThatNeedDeviceMemorySayWhy) {
  DeviceContext dc;
  AttrMap attrs;
  KernelContext ctx;
  ctx.opType = "Pad";
  ctx.nodeName = "pad1";
  ctx.attrs = &attrs;
  Tensor pads = Tensor::fromVector<int64_t>({4}, {0, 1, 0, 1});
  ctx.inputTypes = {{DType::F32, {2, 3}}, {DType::I64, {4}}};
  ctx.outputTypes = {{DType::F32, {2, 5}}};
  ctx.constInputs = {nullptr, &pads};
  ctx.cuda = &dc;
  std::unique_ptr<Kernel> k;
  Status st = KernelRegistry::global().create("cuda", ctx, &k);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("op 'pad1' (Pad) index maps"), std::string::npos) << st.message();
}

}  // namespace

// NVRTC compile-only tests (no GPU needed): every generated kernel the CUDA backend can emit
// compiles for sm_90 in one program; kernels created from real op contexts compile too; a device
// gets a CUBIN for its real architecture (PTX only past NVRTC's newest); the cache key and file
// cover source, options, architecture, kind and NVRTC version; a cache hit is used; kernels
// whose output may alias an input do not promise otherwise (__restrict__).
#include "fused_attrs_util.h"
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include "runtime/Kernel.h"
#include "runtime/OpTable.h"
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
  Status st = nvrtcCompile(prog.translationUnit(), nvrtcOptions(), "compute_90", "", &ptx, &hit);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_FALSE(hit);
  // Each kernel is an entry point of the module under its own (extern "C") name.
  for (auto& s : all) EXPECT_NE(ptx.find(".entry " + s.first + "("), std::string::npos) << s.first;
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
}

TEST(Nvrtc, CompileErrorsCarryTheLog) {
  std::string ptx;
  bool hit;
  Status st = nvrtcCompile(generatedPrelude() + "extern \"C\" __global__ void bad() { undefined_thing(); }",
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
  ASSERT_TRUE(nvrtcCompile(src, nvrtcOptions(), "compute_90", dir, &ptx1, &hit).isOk());
  EXPECT_FALSE(hit);
  ASSERT_TRUE(nvrtcCompile(src, nvrtcOptions(), "compute_90", dir, &ptx2, &hit).isOk());
  EXPECT_TRUE(hit);
  EXPECT_EQ(ptx1, ptx2);
  // The file under the key is what a hit returns: replace it and the replacement comes back.
  std::string file = nvrtcCacheFile(dir, src, nvrtcOptions(), "compute_90");
  EXPECT_NE(file.find("/compute_90-"), std::string::npos) << file;
  EXPECT_EQ(file.substr(file.size() - 4), ".ptx");
  { std::ofstream(file) << "// marker"; }
  ASSERT_TRUE(nvrtcCompile(src, nvrtcOptions(), "compute_90", dir, &ptx2, &hit).isOk());
  EXPECT_TRUE(hit);
  EXPECT_EQ(ptx2, "// marker");
  // Another architecture is another key: a miss.
  ASSERT_TRUE(nvrtcCompile(src, nvrtcOptions(), "compute_80", dir, &ptx2, &hit).isOk());
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

// A device gets a CUBIN for the newest real architecture NVRTC has at or below its own, when
// that one is binary compatible (same major); past NVRTC's newest major, PTX for the driver's JIT.
TEST(Nvrtc, TargetIsACubinForTheDevicesArchitecture) {
  std::vector<int> archs = {75, 80, 86, 87, 89, 90, 100, 103, 120};
  auto target = [&](int major, int minor) {
    NvrtcTarget t = nvrtcTargetFor(major, minor, archs);
    return t.arch + (t.cubin ? ":cubin" : ":ptx");
  };
  EXPECT_EQ(target(9, 0), "sm_90:cubin");
  EXPECT_EQ(target(8, 0), "sm_80:cubin");
  EXPECT_EQ(target(8, 9), "sm_89:cubin");
  EXPECT_EQ(target(8, 8), "sm_87:cubin");   // 8.8 runs 8.7 code
  EXPECT_EQ(target(10, 3), "sm_103:cubin");
  EXPECT_EQ(target(12, 1), "sm_120:cubin");
  EXPECT_EQ(target(13, 0), "compute_120:ptx");  // a device newer than this NVRTC
  EXPECT_EQ(nvrtcTargetFor(9, 0, {80, 86}).arch, "compute_86");
  EXPECT_EQ(nvrtcTargetFor(9, 0, {}).arch, "sm_90");  // no list: the device's own
  // This NVRTC (CUDA 13) has sm_90: an H100 gets a CUBIN.
  NvrtcTarget h100 = nvrtcTargetFor(9, 0);
  EXPECT_EQ(h100.arch, "sm_90");
  EXPECT_TRUE(h100.cubin);
}

// What the backend loads on a cc 9.0 device: an ELF image (no PTX JIT in the driver), cached under
// a file name that carries the architecture and the kind.
TEST(Nvrtc, CubinForCc90IsAnElfAndCachedPerArchitecture) {
  std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  std::string src = generatedPrelude() + copyKernelSource(DType::F32);
  NvrtcTarget t = nvrtcTargetFor(9, 0);
  ASSERT_TRUE(t.cubin);
  std::string cubin, again, ptx;
  bool hit = true;
  Status st = nvrtcCompile(src, nvrtcOptions(), t.arch, dir, &cubin, &hit);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_FALSE(hit);
  ASSERT_GT(cubin.size(), 4u);
  EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF", 4));
  EXPECT_NE(cubin.find(copyKernelName(DType::F32)), std::string::npos);  // the symbol is in it
  ASSERT_TRUE(nvrtcCompile(src, nvrtcOptions(), t.arch, dir, &again, &hit).isOk());
  EXPECT_TRUE(hit);
  EXPECT_EQ(again, cubin);
  std::string f90 = nvrtcCacheFile(dir, src, nvrtcOptions(), "sm_90");
  std::string f80 = nvrtcCacheFile(dir, src, nvrtcOptions(), "sm_80");
  std::string fPtx = nvrtcCacheFile(dir, src, nvrtcOptions(), "compute_90");
  EXPECT_NE(f90, f80);
  EXPECT_NE(f90, fPtx);
  EXPECT_NE(f90.find("/sm_90-"), std::string::npos) << f90;
  EXPECT_EQ(f90.substr(f90.size() - 6), ".cubin");
  EXPECT_TRUE(std::ifstream(f90).good());
  EXPECT_FALSE(std::ifstream(f80).good());
  // sm_80 is another file and another image (a miss), also an ELF.
  ASSERT_TRUE(nvrtcCompile(src, nvrtcOptions(), "sm_80", dir, &again, &hit).isOk());
  EXPECT_FALSE(hit);
  EXPECT_EQ(again.substr(0, 4), std::string("\x7f" "ELF", 4));
  EXPECT_NE(again, cubin);
  EXPECT_TRUE(std::ifstream(f80).good());
  // The PTX fallback for the same device is text, not an ELF.
  ASSERT_TRUE(nvrtcCompile(src, nvrtcOptions(), ptxArchFor(9, 0), dir, &ptx, &hit).isOk());
  EXPECT_FALSE(hit);
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
  std::system(("rm -rf " + dir).c_str());
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
      {"RMSNormalization", {f23, f3}, {f23}, {}},
      {"InstanceNormalization", {{DType::F32, {2, 3, 4}}, f3, f3}, {{DType::F32, {2, 3, 4}}}, {}},
      {"RotaryEmbedding", {{DType::F32, {1, 2, 3, 4}}, {DType::F32, {5, 2}}, {DType::F32, {5, 2}}, {DType::I64, {1, 3}}},
       {{DType::F32, {1, 2, 3, 4}}}, {}},
      {"Gather", {f23, {DType::I32, {4}}}, {{DType::F32, {4, 3}}}, {}},
      {"Dropout", {f23, {DType::F32, {}}, {DType::Bool, {}}, {DType::F32, {}}}, {f23, b23}, {}},
      {"Dropout", {{DType::F64, {2, 3}}, {DType::F64, {}}, {DType::Bool, {}}, {DType::I64, {}}},
       {{DType::F64, {2, 3}}}, {}},
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
  Status st = nvrtcCompile(dc.program.translationUnit(), nvrtcOptions(), "compute_90", "", &ptx, &hit);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_NE(ptx.find(".entry td_ew_Add_f32_f32_to_f32("), std::string::npos);
  EXPECT_NE(ptx.find(".entry td_ew_Less_f32_f32_to_bool("), std::string::npos);
  EXPECT_NE(ptx.find(".entry td_ReduceSum_f32("), std::string::npos);
  EXPECT_NE(ptx.find(".entry td_dropout_float("), std::string::npos);
  EXPECT_NE(ptx.find(".entry td_dropout_double("), std::string::npos);
  EXPECT_NE(ptx.find(".entry td_rmsnorm_f32("), std::string::npos);
  EXPECT_NE(ptx.find(".entry td_rotary_f32("), std::string::npos);
  EXPECT_NE(ptx.find(".entry td_groupnorm_f32("), std::string::npos);
}

// The CUDA Dropout (runtime/cuda/Tensor.cpp): a training_mode operand makes it the generated
// Philox kernel, none a device copy; operands known at load are checked there with the CPU
// kernel's messages (at run time the kernel cannot fail).
TEST(Nvrtc, DropoutKernelsAndTheirLoadChecks) {
  DeviceContext dc;
  dc.device = "cuda:0";
  AttrMap attrs;
  Tensor on = Tensor::alloc(DType::Bool, {});
  on.data<bool>()[0] = true;
  Tensor ratioOne = Tensor::fromVector<float>({}, {1.f}), half = Tensor::fromVector<float>({}, {0.5f});
  Tensor badCounter = Tensor::fromVector<float>({}, {2.5f});
  auto create = [&](std::vector<TensorType> in, std::vector<TensorType> out, std::vector<const Tensor*> consts,
                    std::unique_ptr<Kernel>* k) {
    KernelContext ctx;
    ctx.opType = "Dropout";
    ctx.nodeName = "drop1";
    ctx.attrs = &attrs;
    ctx.inputTypes = std::move(in);
    ctx.outputTypes = std::move(out);
    consts.resize(ctx.inputTypes.size(), nullptr);
    ctx.constInputs = std::move(consts);
    ctx.cuda = &dc;
    return KernelRegistry::global().create("cuda", ctx, k);
  };
  TensorType x{DType::F32, {5}}, mask{DType::Bool, {5}}, scalar{DType::F32, {}}, flag{DType::Bool, {}};
  std::unique_ptr<Kernel> k;
  ASSERT_TRUE(create({x}, {x, mask}, {}, &k).isOk());
  EXPECT_EQ(k->implName(), "cuda-memcpy");  // inference: a copy and an all-true mask
  ASSERT_TRUE(create({x, scalar, flag}, {x, mask}, {}, &k).isOk());
  EXPECT_EQ(k->implName(), "nvrtc");
  EXPECT_NE(dc.program.translationUnit().find("td_dropout_float("), std::string::npos);
  Status st = create({x, scalar, flag}, {x}, {nullptr, &ratioOne, &on}, &k);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("ratio 1.000000 is outside [0, 1)"), std::string::npos) << st.message();
  st = create({x, scalar, flag, scalar}, {x}, {nullptr, &half, &on, &badCounter}, &k);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("counter 2.500000 is not a non-negative whole number"), std::string::npos)
      << st.message();
  // A run-time ratio or counter is the kernel's to read: nothing to check at load.
  EXPECT_TRUE(create({x, scalar, flag, scalar}, {x}, {nullptr, nullptr, &on, &badCounter}, &k).isOk());
  st = create({x, scalar, flag}, {x, {DType::F32, {5}}}, {}, &k);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("mask output must be bool"), std::string::npos) << st.message();
  st = create({{DType::I64, {5}}, scalar, flag}, {{DType::I64, {5}}}, {}, &k);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("f32 or f64"), std::string::npos) << st.message();
}


Status createFusedOn(DeviceContext& dc, const FusedStep& step, std::vector<TensorType> in, std::vector<TensorType> out,
                     std::vector<const Tensor*> constants, std::unique_ptr<Kernel>* k) {
  KernelContext ctx;
  ctx.opType = "Fused";
  ctx.nodeName = "g1";
  step.bind(&ctx);
  ctx.inputTypes = std::move(in);
  ctx.outputTypes = std::move(out);
  constants.resize(ctx.inputTypes.size(), nullptr);
  ctx.constInputs = std::move(constants);
  ctx.cuda = &dc;
  return KernelRegistry::global().create("cuda", ctx, k);
}

// The kernels the CUDA backend generates for fusion groups (runtime/cuda/Fused.cpp) compile in
// the plan's one program: an element-wise body with every op kind the generator knows, two of
// them sharing nothing but the prelude, and the residual Add + LayerNormalization.
TEST(Nvrtc, FusedGroupKernelsCompileToPtx) {
  DeviceContext dc;
  dc.device = "cuda:0";
  TensorType x{DType::F32, {4, 300}}, scalar{DType::F32, {}}, row{DType::F32, {300}};
  Tensor lo = Tensor::fromVector<float>({}, {-1.f});
  FusedStep chain = fusedStep("elementwise", {"Mul", "Sigmoid", "Add", "Clip", "Gelu", "Gelu", "Max"},
                              {{0, 1}, {-2}, {-3, 2}, {-4, 3, -1}, {-5}, {-6}, {-7, -3}}, {6, 1});
  chain.setMemberAttr(5, "approximate", Attr::ofString("tanh"));
  FusedStep more = fusedStep("elementwise", {"LeakyRelu", "Elu", "Selu", "HardSigmoid", "Tanh", "Exp", "Log", "Sqrt",
                                             "Abs", "Neg", "Reciprocal", "Erf", "Softplus", "Relu", "Sub", "Div", "Min"},
                             {{0}, {-2}, {-3}, {-4}, {-5}, {-6}, {-7}, {-8}, {-9}, {-10}, {-11}, {-12}, {-13}, {-14},
                              {-15, 0}, {-16, 0}, {-17, 0}},
                             {16});
  FusedStep ln = fusedStep("add-layernorm", {"Add", "LayerNormalization"}, {{0, 1}, {-2, 2, 3}}, {0, 1});
  std::unique_ptr<Kernel> k1, k2, k3;
  Status st = createFusedOn(dc, chain, {x, scalar, x, scalar}, {x, x}, {nullptr, nullptr, nullptr, &lo}, &k1);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(k1->implName(), "nvrtc-fused(7 ops)");
  st = createFusedOn(dc, more, {x}, {x}, {}, &k2);
  ASSERT_TRUE(st.isOk()) << st.message();
  st = createFusedOn(dc, ln, {x, x, row, row}, {x, x}, {}, &k3);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(k3->implName(), "nvrtc-add-layernorm");
  std::string tu = dc.program.translationUnit();
  // The constant Clip bound is baked in; the scalar input is read at [0], full-size ones at [i].
  EXPECT_NE(tu.find("< -1.0f ? -1.0f :"), std::string::npos) << tu;
  EXPECT_NE(tu.find("x1 = in1[0]"), std::string::npos) << tu;
  EXPECT_NE(tu.find("x2 = in2[i]"), std::string::npos) << tu;
  EXPECT_EQ(tu.find("x3 = in3"), std::string::npos) << tu;  // the bound is no load
  // Max passes a NaN operand on, as the CPU kernel does (the GPU differential test checks values).
  EXPECT_NE(tu.find("v6 = (v5 != v5 ? v5 : v1 != v1 ? v1 : v1 > v5 ? v1 : v5)"), std::string::npos) << tu;
  std::string ptx;
  bool hit;
  st = nvrtcCompile(tu, nvrtcOptions(), "compute_90", "", &ptx, &hit);
  ASSERT_TRUE(st.isOk()) << st.message();
  size_t entries = 0;
  for (size_t p = ptx.find(".entry td_fused_ew_"); p != std::string::npos; p = ptx.find(".entry td_fused_ew_", p + 1)) ++entries;
  EXPECT_EQ(entries, 2u);
  EXPECT_NE(ptx.find(".entry td_add_layernorm_f32("), std::string::npos);
}

// The op table's unary math ops (runtime/core/OpTable.def) get their CUDA code from the one
// formula: each has a standalone kernel among the generated sources, a fused chain of all of
// them spells each formula over its operand, and both compile with NVRTC.
TEST(Nvrtc, OpTableMathOpsCompileAloneAndFused) {
  std::vector<std::string> math;
  size_t n = 0;
  const OpInfo* rows = allOps(&n);
  for (size_t i = 0; i < n; ++i)
    if (rows[i].formula) math.push_back(rows[i].name);
  for (const char* op : {"Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"})
    EXPECT_NE(std::find(math.begin(), math.end(), op), math.end()) << op;

  GeneratedProgram alone;
  std::map<std::string, std::string> sources;
  for (auto& s : elementwiseSources()) sources[s.first] = s.second;
  for (const std::string& op : math) {
    auto it = sources.find("td_ew_" + op + "_f32_to_f32");
    ASSERT_NE(it, sources.end()) << op;
    EXPECT_NE(it->second.find("out[i] = (float)(" + std::string(findOp(op)->formula) + ");"), std::string::npos)
        << it->second;
    ASSERT_TRUE(alone.add(it->first, it->second).isOk()) << op;
  }
  std::string ptx;
  bool hit;
  Status st = nvrtcCompile(alone.translationUnit(), nvrtcOptions(), "compute_90", "", &ptx, &hit);
  ASSERT_TRUE(st.isOk()) << st.message();
  for (const std::string& op : math)
    EXPECT_NE(ptx.find(".entry td_ew_" + op + "_f32_to_f32("), std::string::npos) << op;

  // One chain: op k reads op k-1's result (op 0 the step input); every result is an output.
  DeviceContext dc;
  dc.device = "cuda:0";
  TensorType x{DType::F32, {4, 300}};
  std::vector<std::vector<int64_t>> operands;
  std::vector<int64_t> outputs;
  for (size_t k = 0; k < math.size(); ++k) {
    operands.push_back({k == 0 ? 0 : -2 - (int64_t)(k - 1)});
    outputs.push_back((int64_t)k);
  }
  std::unique_ptr<Kernel> k;
  st = createFusedOn(dc, fusedStep("elementwise", math, operands, outputs), {x},
                     std::vector<TensorType>(math.size(), x), {}, &k);
  ASSERT_TRUE(st.isOk()) << st.message();
  std::string tu = dc.program.translationUnit();
  ASSERT_EQ(math[0], "Exp");  // the table's first formula row
  EXPECT_NE(tu.find("v0 = (exp(x0));"), std::string::npos) << tu;
  EXPECT_NE(tu.find("= (sin(v"), std::string::npos) << tu;
  EXPECT_NE(tu.find("= (atanh(v"), std::string::npos) << tu;
  EXPECT_NE(tu.find("= (1.f / v"), std::string::npos) << tu;  // Reciprocal: "a" of "1.f" is no operand
  st = nvrtcCompile(tu, nvrtcOptions(), "compute_90", "", &ptx, &hit);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_NE(ptx.find(".entry td_fused_ew_"), std::string::npos);
}

// What the CUDA backend cannot run as one kernel is an error at load that says what, never a
// silently different computation.
TEST(Nvrtc, FusedGroupsTheBackendCannotRunAreLoadErrors) {
  DeviceContext dc;
  TensorType x{DType::F32, {4, 8}}, w{DType::F32, {2, 4, 1, 1}}, bcast{DType::F32, {8}};
  struct Case {
    FusedStep step;
    std::vector<TensorType> in;
    std::string expect;
  };
  std::vector<Case> cases = {
      {fusedStep("conv-epilogue", {"Conv", "Relu"}, {{0, 1}, {-2}}, {1}), {x, w},
       "no kernel for fusion kind 'conv-epilogue'"},
      {fusedStep("elementwise", {"Pow", "Relu"}, {{0, 0}, {-2}}, {1}), {x}, "Pow is not an op of the generated"},
      {fusedStep("elementwise", {"Add", "Relu"}, {{0, 1}, {-2}}, {1}), {x, bcast}, "neither the output's shape"},
      {fusedStep("gemm-epilogue", {"Gemm", "Gelu"}, {{0, 1}, {-2}}, {1}), {x, {DType::F32, {8, 8}}},
       "exact Gelu"},
      {fusedStep("gemm-epilogue", {"Gemm", "Sigmoid"}, {{0, 1}, {-2}}, {1}), {x, {DType::F32, {8, 8}}},
       "Sigmoid is not a cuBLASLt epilogue"},
      {fusedStep("add-layernorm", {"Add", "LayerNormalization"}, {{0, 1}, {-2, 1}}, {1}), {x, bcast},
       "no broadcasting"},
  };
  for (Case& c : cases) {
    std::unique_ptr<Kernel> k;
    Status st = createFusedOn(dc, c.step, c.in, {x}, {}, &k);
    ASSERT_FALSE(st.isOk()) << c.expect;
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("'g1'"), std::string::npos) << st.message();
  }
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

// plan-memory lets an element-wise op write over its input (unary ops, a binary op's operand 0,
// any operand of a fused element-wise group), and a variadic op's later launches read the output
// as in0: none of those kernels may tell the compiler their pointers do not alias.
TEST(Nvrtc, KernelsWhoseOutputMayAliasAnInputHaveNoRestrict) {
  auto signature = [](const std::string& src) { return src.substr(0, src.find(')')); };
  size_t checked = 0;
  for (auto& s : elementwiseSources()) {
    ASSERT_EQ(s.first.rfind("td_ew_", 0), 0u) << s.first;
    std::string sig = signature(s.second);
    EXPECT_NE(sig.find("* out"), std::string::npos) << sig;
    EXPECT_EQ(sig.find("__restrict__"), std::string::npos) << sig;
    ++checked;
  }
  EXPECT_GT(checked, 50u);
  DeviceContext dc;
  TensorType x{DType::F32, {4, 8}};
  FusedStep chain = fusedStep("elementwise", {"Mul", "Relu"}, {{0, 1}, {-2}}, {1});
  std::unique_ptr<Kernel> k;
  Status st = createFusedOn(dc, chain, {x, x}, {x}, {}, &k);
  ASSERT_TRUE(st.isOk()) << st.message();
  std::string tu = dc.program.translationUnit();
  size_t at = tu.find("td_fused_ew_");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(signature(tu.substr(at)).find("__restrict__"), std::string::npos) << signature(tu.substr(at));
}

}  // namespace

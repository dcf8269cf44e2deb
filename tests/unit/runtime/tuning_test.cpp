// Kernel choice by measurement at plan load (runtime/Tuning.h): the timing cache forces a
// variant, measure mode writes the cache and a second load reads it without measuring, a
// corrupt cache is ignored with a note, off keeps the built-in choice. Every test names its
// mode and cache file, so TANDEM_TUNING / TANDEM_TUNING_CACHE (tests/CMakeLists.txt) do not
// apply.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <omp.h>

#include "runtime/Device.h"
#include "runtime/Executable.h"
#include "runtime/PlanFormat.h"
#include "runtime/TimingCache.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"
#include "fused_attrs_util.h"
#include "plan_test_util.h"

using namespace tandem;
namespace fs = std::filesystem;

namespace {

constexpr int64_t K = 64, N = 48;

std::vector<float> weights(int64_t k = K, int64_t n = N) {
  std::vector<float> w(k * n);
  for (int64_t i = 0; i < k * n; ++i) w[i] = (float)((i * 37 % 101) - 50) / 50.f;
  return w;
}

// y = x @ w: x f32[M, k] input, w f32[k, n] constant (Gemm, so the AVX2 packed GEMM is a
// candidate next to oneDNN). The heuristic takes AVX2 for M >= 4 and oneDNN below. The arena
// is `arenaBytes` where that is more than x and y need.
plan::Plan gemmPlan(int64_t M, int64_t k = K, int64_t n = N, int64_t arenaBytes = 0) {
  plan::Plan p;
  p.set_version(kPlanVersion);
  addValue(p, "x", plan::Value::INPUT, {M, k}, 0);
  plan::Value* w = addValue(p, "w", plan::Value::CONSTANT, {k, n});
  w->mutable_constant()->set_dtype((int)DType::F32);
  w->mutable_constant()->add_dims(k);
  w->mutable_constant()->add_dims(n);
  std::vector<float> wv = weights(k, n);
  w->mutable_constant()->set_raw(std::string((const char*)wv.data(), wv.size() * 4));
  int64_t yOff = (M * k * 4 + 63) / 64 * 64;
  addValue(p, "y", plan::Value::INTERMEDIATE, {M, n}, yOff);
  plan::Step* s = p.add_steps();
  s->set_op_type("Gemm");
  s->set_name("fc");
  s->set_device("cpu");
  s->add_inputs(0);
  s->add_inputs(1);
  s->add_outputs(2);
  p.add_inputs(0);
  p.add_outputs(2);
  plan::Arena* a = p.add_arenas();
  a->set_device("cpu");
  a->set_bytes(std::max(yOff + M * n * 4, arenaBytes));
  return p;
}

// y = Conv(x, w), x f32[1, 16, 8, 8] input, w f32[16, 16, 3, 3] constant, pads 1.
plan::Plan convPlan() {
  plan::Plan p;
  p.set_version(kPlanVersion);
  addValue(p, "x", plan::Value::INPUT, {1, 16, 8, 8}, 0);
  plan::Value* w = addValue(p, "w", plan::Value::CONSTANT, {16, 16, 3, 3});
  w->mutable_constant()->set_dtype((int)DType::F32);
  for (int64_t d : {16, 16, 3, 3}) w->mutable_constant()->add_dims(d);
  std::vector<float> wv(16 * 16 * 9);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = (float)((i * 37 % 101) - 50) / 500.f;
  w->mutable_constant()->set_raw(std::string((const char*)wv.data(), wv.size() * 4));
  addValue(p, "y", plan::Value::INTERMEDIATE, {1, 16, 8, 8}, 4096);
  plan::Step* s = p.add_steps();
  s->set_op_type("Conv");
  s->set_name("conv");
  s->set_device("cpu");
  s->add_inputs(0);
  s->add_inputs(1);
  s->add_outputs(2);
  plan::Attribute* pads = s->add_attrs();
  pads->set_name("pads");
  pads->set_kind(plan::Attribute::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  p.add_inputs(0);
  p.add_outputs(2);
  plan::Arena* a = p.add_arenas();
  a->set_device("cpu");
  a->set_bytes(8192);
  return p;
}

class Tuning : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tandem_tuning_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    cache_ = (dir_ / "sub" / "kernel-timings.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `p` loaded on `threads` with tuning `mode` and this test's cache file.
  std::unique_ptr<Executable> loadPlan(const plan::Plan& p, int threads, TuningMode mode) {
    LoadOptions lo;
    lo.threads = threads;
    lo.tuning = mode;
    lo.tuningCache = cache_;
    std::unique_ptr<Executable> exe;
    Status st = Executable::load(p, lo, &exe);
    EXPECT_TRUE(st.isOk()) << st.message();
    return exe;
  }
  std::unique_ptr<Executable> load(int64_t M, TuningMode mode) { return loadPlan(gemmPlan(M), 1, mode); }

  // The step's cache key, as a measuring load computes it.
  std::string keyOf(int64_t M) {
    auto exe = load(M, TuningMode::Measure);
    EXPECT_EQ(exe->tuning().size(), 1u);
    return exe->tuning().empty() ? "" : exe->tuning()[0].key;
  }

  void writeCache(const std::string& key, double dnnl, double avx2) {
    nlohmann::json j = {{"format", "tandem-kernel-timings"},
                        {"version", 1},
                        {"entries", {{key, {{"seconds", {{"dnnl", dnnl}, {"avx2", avx2}}}}}}}};
    fs::create_directories(fs::path(cache_).parent_path());
    std::ofstream(cache_) << j.dump();
  }

  fs::path dir_;
  std::string cache_;
};

bool startsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// y is x [M, K] @ weights() [K, N] (the gemm plan's result).
void expectXTimesW(const Tensor& x, const Tensor& y) {
  const int64_t M = x.shape()[0];
  std::vector<float> w = weights();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double want = 0;
      for (int64_t k = 0; k < K; ++k) want += (double)x.data<float>()[i * K + k] * w[k * N + j];
      ASSERT_NEAR(y.data<float>()[i * N + j], want, 1e-3) << i << "," << j;
    }
}

}  // namespace

TEST_F(Tuning, FakeCacheForcesTheVariant) {
  if (!avx2::available()) GTEST_SKIP() << "no AVX2: oneDNN is the only Gemm variant";
  const std::string key = keyOf(8);
  ASSERT_FALSE(key.empty());
  writeCache(key, /*dnnl=*/1e-3, /*avx2=*/1e-6);
  auto a = load(8, TuningMode::Cached);
  EXPECT_TRUE(startsWith(a->stepImpls()[0], "avx2:sgemm_packed")) << a->stepImpls()[0];
  ASSERT_EQ(a->tuning().size(), 1u);
  EXPECT_EQ(a->tuning()[0].choice, "avx2");
  EXPECT_EQ(a->tuning()[0].source, StepTuning::Source::Cache);
  writeCache(key, /*dnnl=*/1e-6, /*avx2=*/1e-3);
  auto d = load(8, TuningMode::Cached);
  EXPECT_TRUE(startsWith(d->stepImpls()[0], "dnnl:")) << d->stepImpls()[0];
  EXPECT_EQ(d->tuning()[0].choice, "dnnl");
}

TEST_F(Tuning, MeasureWritesTheCacheAndASecondLoadReadsIt) {
  if (!avx2::available()) GTEST_SKIP() << "no AVX2: oneDNN is the only Gemm variant";
  auto first = load(8, TuningMode::Measure);
  ASSERT_EQ(first->tuning().size(), 1u);
  const StepTuning& t = first->tuning()[0];
  EXPECT_EQ(t.source, StepTuning::Source::Measured);
  EXPECT_EQ(t.candidates, (std::vector<std::string>{"dnnl", "avx2"}));
  ASSERT_EQ(t.timings.seconds.size(), 2u);
  for (auto& [v, s] : t.timings.seconds) EXPECT_GT(s, 0) << v;
  EXPECT_EQ(t.choice, t.timings.fastest(t.candidates));
  EXPECT_TRUE(startsWith(first->stepImpls()[0], t.choice == "avx2" ? "avx2:" : "dnnl:"));

  // The file holds what was measured.
  TimingCache file;
  std::string note;
  file.load(cache_, &note);
  EXPECT_EQ(note, "");
  const KernelTimings* e = file.find(t.key);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->seconds, t.timings.seconds);
  // And, for the placer, the chosen variant's time under the op's key (an unfused step: the
  // same op the compiler sees).
  AttrMap none;
  Tensor marker;
  KernelContext op;
  op.opType = "Gemm";
  op.attrs = &none;
  op.inputTypes = {{DType::F32, {8, K}}, {DType::F32, {K, N}}};
  op.constInputs = {nullptr, &marker};
  op.outputTypes = {{DType::F32, {8, N}}};
  op.threads = 1;
  const OpTiming* ot = file.findOp(kernelOpTimingKey(TimingHost{cpuModelName(), cpuEffectiveIsa()}, op));
  ASSERT_NE(ot, nullptr);
  EXPECT_EQ(ot->variant, t.choice);
  EXPECT_EQ(ot->seconds, t.timings.seconds.at(t.choice));
  auto written = fs::last_write_time(cache_);

  // Measuring used the arena as scratch: a run still computes x @ w.
  Tensor x = Tensor::alloc(DType::F32, {8, K});
  for (int64_t i = 0; i < 8 * K; ++i) x.data<float>()[i] = (float)(i % 7) - 3.f;
  std::vector<Tensor> out;
  ASSERT_TRUE(first->run({x}, &out).isOk());
  expectXTimesW(x, out[0]);

  // Second load, same mode: read from the cache, nothing measured, file not rewritten.
  auto second = load(8, TuningMode::Measure);
  ASSERT_EQ(second->tuning().size(), 1u);
  EXPECT_EQ(second->tuning()[0].source, StepTuning::Source::Cache);
  EXPECT_EQ(second->tuning()[0].choice, t.choice);
  EXPECT_EQ(second->stepImpls(), first->stepImpls());
  EXPECT_EQ(fs::last_write_time(cache_), written);
  // Another shape is another key: measured and added, the first entry kept.
  auto other = load(16, TuningMode::Measure);
  EXPECT_EQ(other->tuning()[0].source, StepTuning::Source::Measured);
  file.load(cache_, &note);
  EXPECT_EQ(file.size(), 2u);
}

TEST_F(Tuning, OffKeepsTheBuiltInChoiceAndCachedMissDoesNotMeasure) {
  if (!avx2::available()) GTEST_SKIP() << "no AVX2: oneDNN is the only Gemm variant";
  // Cached mode on a missing file: the heuristic (oneDNN for M = 1), nothing written.
  auto miss = load(1, TuningMode::Cached);
  ASSERT_EQ(miss->tuning().size(), 1u);
  EXPECT_EQ(miss->tuning()[0].source, StepTuning::Source::Heuristic);
  EXPECT_TRUE(miss->tuning()[0].timings.seconds.empty());
  EXPECT_TRUE(startsWith(miss->stepImpls()[0], "dnnl:")) << miss->stepImpls()[0];
  EXPECT_FALSE(fs::exists(cache_));
  // A cache that prefers AVX2 at M = 1: cached mode follows it, off ignores it.
  const std::string key = keyOf(1);
  writeCache(key, /*dnnl=*/1e-3, /*avx2=*/1e-6);
  auto cached = load(1, TuningMode::Cached);
  EXPECT_TRUE(startsWith(cached->stepImpls()[0], "avx2:")) << cached->stepImpls()[0];
  auto off = load(1, TuningMode::Off);
  EXPECT_TRUE(startsWith(off->stepImpls()[0], "dnnl:")) << off->stepImpls()[0];
  EXPECT_TRUE(off->tuning().empty());
  EXPECT_EQ(off->tuningMode(), TuningMode::Off);
  // Off at M = 8 is today's heuristic: the packed GEMM.
  auto off8 = load(8, TuningMode::Off);
  EXPECT_TRUE(startsWith(off8->stepImpls()[0], "avx2:sgemm_packed")) << off8->stepImpls()[0];
}

TEST_F(Tuning, CorruptOrForeignCacheIsIgnoredWithANoteAndReplaced) {
  if (!avx2::available()) GTEST_SKIP() << "no AVX2: oneDNN is the only Gemm variant";
  for (const char* bad : {"{\"entries\": [1, 2", "{\"format\": \"something-else\", \"entries\": {}}",
                          "\x01\x02 binary"}) {
    SCOPED_TRACE(bad);
    fs::create_directories(fs::path(cache_).parent_path());
    std::ofstream(cache_) << bad;
    auto exe = load(8, TuningMode::Measure);
    bool noted = false;
    for (const std::string& n : exe->notes())
      noted |= n.find("kernel timing cache") != std::string::npos &&
               n.find("ignored") != std::string::npos;
    EXPECT_TRUE(noted);
    ASSERT_EQ(exe->tuning().size(), 1u);
    EXPECT_EQ(exe->tuning()[0].source, StepTuning::Source::Measured);
    TimingCache file;
    std::string note;
    file.load(cache_, &note);
    EXPECT_EQ(note, "") << "the file was replaced by a valid one";
    EXPECT_NE(file.find(exe->tuning()[0].key), nullptr);
  }
  // A cached mode load of a corrupt file: a note, the heuristic, and the file left alone.
  std::ofstream(cache_) << "not json";
  auto exe = load(8, TuningMode::Cached);
  EXPECT_EQ(exe->tuning()[0].source, StepTuning::Source::Heuristic);
  std::ifstream in(cache_);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_EQ(s.str(), "not json");
}

TEST_F(Tuning, WinogradPolicyRestrictsTheCandidates) {
  if (!avx2::available() || std::string(dnnlcpu::activationLayoutName()) != "nChw8c")
    GTEST_SKIP() << "Winograd needs nChw8c activations (AVX2 host or TANDEM_MAX_CPU_ISA=avx2)";
  auto loadConv = [&](WinogradPolicy w, TuningMode mode) {
    LoadOptions lo;
    lo.threads = 1;
    lo.tuning = mode;
    lo.tuningCache = cache_;
    lo.winograd = w;
    std::unique_ptr<Executable> exe;
    Status st = Executable::load(convPlan(), lo, &exe);
    EXPECT_TRUE(st.isOk()) << st.message();
    return exe;
  };
  auto measured = loadConv(WinogradPolicy::Auto, TuningMode::Measure);
  ASSERT_EQ(measured->tuning().size(), 1u);
  const std::string key = measured->tuning()[0].key;
  EXPECT_EQ(measured->tuning()[0].candidates,
            (std::vector<std::string>{"dnnl", "winograd2x2", "winograd4x4"}));
  nlohmann::json j = {{"format", "tandem-kernel-timings"},
                      {"version", 1},
                      {"entries",
                       {{key, {{"seconds", {{"dnnl", 3e-3}, {"winograd2x2", 2e-3}, {"winograd4x4", 1e-3}}}}}}}};
  std::ofstream(cache_) << j.dump();
  EXPECT_TRUE(startsWith(loadConv(WinogradPolicy::Auto, TuningMode::Cached)->stepImpls()[0],
                         "avx2:winograd_4x4_3x3"));
  auto two = loadConv(WinogradPolicy::Tile2x2, TuningMode::Cached);
  EXPECT_TRUE(startsWith(two->stepImpls()[0], "avx2:winograd_2x2_3x3")) << two->stepImpls()[0];
  EXPECT_EQ(two->tuning()[0].candidates, (std::vector<std::string>{"dnnl", "winograd2x2"}));
  auto off = loadConv(WinogradPolicy::Off, TuningMode::Cached);
  EXPECT_TRUE(startsWith(off->stepImpls()[0], "dnnl:")) << off->stepImpls()[0];
  EXPECT_TRUE(off->tuning().empty()) << "oneDNN alone: nothing to choose";
}

// oneDNN's own Winograd ("winograd-dnnl", AVX-512 hosts: oneDNN 2.6 has none for AVX2) rounds
// like F(4x4): --winograd 2x2 and off take it out of the candidates whatever the cache says.
TEST_F(Tuning, WinogradPolicyRemovesOneDnnsWinograd) {
  if (dnnl::get_effective_cpu_isa() < dnnl::cpu_isa::avx512_core ||
      dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::all)
    GTEST_SKIP() << "oneDNN 2.6 has a Winograd convolution for AVX-512 only";
  auto loadConv = [&](WinogradPolicy w, TuningMode mode) {
    LoadOptions lo;
    lo.threads = 1;
    lo.tuning = mode;
    lo.tuningCache = cache_;
    lo.winograd = w;
    std::unique_ptr<Executable> exe;
    Status st = Executable::load(convPlan(), lo, &exe);
    EXPECT_TRUE(st.isOk()) << st.message();
    return exe;
  };
  auto measured = loadConv(WinogradPolicy::Auto, TuningMode::Measure);
  ASSERT_EQ(measured->tuning().size(), 1u);
  const std::string key = measured->tuning()[0].key;
  EXPECT_EQ(measured->tuning()[0].candidates, (std::vector<std::string>{"dnnl", "winograd-dnnl"}));
  nlohmann::json j = {{"format", "tandem-kernel-timings"},
                      {"version", 1},
                      {"entries", {{key, {{"seconds", {{"dnnl", 3e-3}, {"winograd-dnnl", 1e-3}}}}}}}};
  std::ofstream(cache_) << j.dump();
  const std::string wino = loadConv(WinogradPolicy::Auto, TuningMode::Cached)->stepImpls()[0];
  EXPECT_NE(wino.find("wino"), std::string::npos) << wino;
  for (WinogradPolicy w : {WinogradPolicy::Tile2x2, WinogradPolicy::Off}) {
    auto exe = loadConv(w, TuningMode::Cached);
    EXPECT_EQ(exe->stepImpls()[0].find("wino"), std::string::npos) << exe->stepImpls()[0];
    EXPECT_TRUE(exe->tuning().empty()) << "oneDNN's direct convolution alone: nothing to choose";
  }
}

TEST(TimingKey, DependsOnShapesConstantsThreadsAndHost) {
  AttrMap attrs;
  attrs.set("transB", Attr::ofInt(1));
  Tensor w = Tensor::alloc(DType::F32, {4, 8});
  KernelContext c;
  c.opType = "Gemm";
  c.attrs = &attrs;
  c.inputTypes = {{DType::F32, {2, 8}}, {DType::F32, {4, 8}}};
  c.constInputs = {nullptr, &w};
  c.outputTypes = {{DType::F32, {2, 4}}};
  c.threads = 1;
  TimingHost h{"CPU X", "avx2"};
  const std::string id = kernelSourcesId();
  ASSERT_EQ(id.size(), 16u) << id;
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  const std::string k = kernelTimingKey(h, c);
  EXPECT_EQ(k, "cpu=CPU X|isa=avx2|kernels=" + id +
                   "|threads=1|op=Gemm|attrs={transB:1}|in=f32[2,8],f32[4,8]c|out=f32[2,4]");
  // Times taken by a build whose kernels differ are not this build's.
  EXPECT_NE(kernelTimingKey(TimingHost{"CPU X", "avx2", "0000000000000000"}, c), k);
  KernelContext t = c;
  t.threads = 2;
  EXPECT_NE(kernelTimingKey(h, t), k);
  KernelContext nc = c;
  nc.constInputs = {nullptr, nullptr};
  EXPECT_NE(kernelTimingKey(h, nc), k);
  EXPECT_NE(kernelTimingKey(TimingHost{"CPU X", "avx512_core"}, c), k);
  c.nodeName = "another name";
  EXPECT_EQ(kernelTimingKey(h, c), k) << "steps of the same shape share an entry";
}

namespace {

// y = Relu(x) then z = Fused elementwise {Neg(y), Relu(.)} (x, y, z f32[4, 8]): one step with
// no kernel variants and one fused group, for Executable::recordStepTimes.
plan::Plan reluThenFusedPlan() {
  plan::Plan p;
  p.set_version(kPlanVersion);
  addValue(p, "x", plan::Value::INPUT, {4, 8}, 0);
  addValue(p, "y", plan::Value::INTERMEDIATE, {4, 8}, 128);
  addValue(p, "z", plan::Value::INTERMEDIATE, {4, 8}, 256);
  plan::Step* r = p.add_steps();
  r->set_op_type("Relu");
  r->set_name("relu");
  r->set_device("cpu");
  r->add_inputs(0);
  r->add_outputs(1);
  plan::Step* f = addFusedStep(p, "neg_relu", "elementwise", {1}, {2});
  addMember(f->mutable_fused_body(), "Neg", {0});    // Neg reads step input 0
  addMember(f->mutable_fused_body(), "Relu", {-2});  // Relu reads member 0
  f->mutable_fused_body()->add_results(1);
  p.add_inputs(0);
  p.add_outputs(2);
  plan::Arena* a = p.add_arenas();
  a->set_device("cpu");
  a->set_bytes(384);
  return p;
}

KernelContext unaryOp(const char* type, const AttrMap* none) {
  KernelContext op;
  op.opType = type;
  op.attrs = none;
  op.inputTypes = {{DType::F32, {4, 8}}};
  op.constInputs = {nullptr};
  op.outputTypes = {{DType::F32, {4, 8}}};
  op.threads = 1;
  return op;
}

}  // namespace

// `tandem tune` times every CPU step of a plan in place: a step without kernel variants is
// recorded under its op's key, a fused group under its head's (the first body op), each with
// the time given; the group's other members get no entry of their own.
TEST_F(Tuning, RecordStepTimesKeepsEveryStepUnderThePlacersKey) {
  LoadOptions lo;
  lo.threads = 1;
  lo.tuning = TuningMode::Off;
  lo.tuningCache = cache_;
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(reluThenFusedPlan(), lo, &exe).isOk());
  int recorded = -1;
  EXPECT_FALSE(exe->recordStepTimes({1e-3}, &recorded).isOk()) << "one time per step";
  ASSERT_TRUE(exe->recordStepTimes({2e-6, 3e-6}, &recorded).isOk());
  EXPECT_EQ(recorded, 2);

  TimingCache file;
  std::string note;
  file.load(cache_, &note);
  EXPECT_EQ(note, "");
  const TimingHost host{cpuModelName(), cpuEffectiveIsa()};
  AttrMap none;
  const OpTiming* relu = file.findOp(kernelOpTimingKey(host, unaryOp("Relu", &none)));
  const OpTiming* neg = file.findOp(kernelOpTimingKey(host, unaryOp("Neg", &none)));
  ASSERT_NE(relu, nullptr);
  ASSERT_NE(neg, nullptr);
  EXPECT_EQ(relu->seconds, 2e-6) << "the unfused Relu step, not the group's member";
  EXPECT_EQ(relu->variant, exe->stepImpls()[0]);
  EXPECT_EQ(neg->seconds, 3e-6) << "the group's time under its head";
  EXPECT_EQ(neg->variant, exe->stepImpls()[1]);
}

// A time taken in a whole-plan run is kept when a later load finds the variant in the cache.
TEST_F(Tuning, APlanTimeIsNotReplacedByACacheHit) {
  if (!avx2::available()) GTEST_SKIP() << "no AVX2: oneDNN is the only Gemm variant";
  auto first = load(8, TuningMode::Measure);
  ASSERT_TRUE(first->recordStepTimes({0.5}, nullptr).isOk());
  auto second = load(8, TuningMode::Measure);
  ASSERT_EQ(second->tuning()[0].source, StepTuning::Source::Cache);
  TimingCache file;
  std::string note;
  file.load(cache_, &note);
  AttrMap none;
  Tensor marker;
  KernelContext op;
  op.opType = "Gemm";
  op.attrs = &none;
  op.inputTypes = {{DType::F32, {8, K}}, {DType::F32, {K, N}}};
  op.constInputs = {nullptr, &marker};
  op.outputTypes = {{DType::F32, {8, N}}};
  op.threads = 1;
  const OpTiming* ot = file.findOp(kernelOpTimingKey(TimingHost{cpuModelName(), cpuEffectiveIsa()}, op));
  ASSERT_NE(ot, nullptr);
  EXPECT_EQ(ot->seconds, 0.5);
}

// With more than one thread, a small step is also timed on one ("@1t" candidates, "default"
// for the factory's own choice where the def has no variants); a step over 1 MiB is not. The
// one-thread kernel is named so and computes the same; the plan's thread count is back after
// it runs.
TEST_F(Tuning, SmallStepsAreAlsoTimedOnOneThread) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one hardware thread";
  if (!avx2::available()) GTEST_SKIP() << "no AVX2: oneDNN is the only Gemm variant";
  auto small = loadPlan(gemmPlan(8), 2, TuningMode::Measure);
  ASSERT_EQ(small->tuning().size(), 1u);
  EXPECT_EQ(small->tuning()[0].candidates,
            (std::vector<std::string>{"dnnl", "avx2", "dnnl@1t", "avx2@1t"}));
  EXPECT_EQ(small->tuning()[0].timings.seconds.size(), 4u);
  // 4096 x 64 inputs alone are 1 MiB: two threads only.
  auto large = loadPlan(gemmPlan(4096), 2, TuningMode::Measure);
  ASSERT_EQ(large->tuning().size(), 1u);
  EXPECT_EQ(large->tuning()[0].candidates, (std::vector<std::string>{"dnnl", "avx2"}));
  // One thread asked for: nothing to add.
  auto single = loadPlan(gemmPlan(8), 1, TuningMode::Measure);
  EXPECT_EQ(single->tuning()[0].candidates, (std::vector<std::string>{"dnnl", "avx2"}));
  // A step without variants: the default kernel on two threads or one.
  auto relu = loadPlan(reluThenFusedPlan(), 2, TuningMode::Measure);
  ASSERT_GE(relu->tuning().size(), 1u);
  EXPECT_EQ(relu->tuning()[0].candidates, (std::vector<std::string>{"default", "default@1t"}));

  // A cache that makes the one-thread AVX2 kernel the fastest: it is built, named so, and
  // computes x @ w; a cache preferring two threads builds the plain kernel.
  const std::string key = small->tuning()[0].key;
  auto force = [&](const char* fastest) {
    nlohmann::json secs = {{"dnnl", 1e-3}, {"avx2", 1e-3}, {"dnnl@1t", 1e-3}, {"avx2@1t", 1e-3}};
    secs[fastest] = 1e-6;
    nlohmann::json j = {{"format", "tandem-kernel-timings"},
                        {"version", 1},
                        {"entries", {{key, {{"seconds", secs}}}}}};
    std::ofstream(cache_) << j.dump();
    return loadPlan(gemmPlan(8), 2, TuningMode::Cached);
  };
  auto one = force("avx2@1t");
  EXPECT_EQ(one->tuning()[0].choice, "avx2@1t");
  const std::string impl = one->stepImpls()[0];
  EXPECT_TRUE(startsWith(impl, "avx2:sgemm_packed")) << impl;
  EXPECT_NE(impl.find(" @1 thread"), std::string::npos) << impl;
  Tensor x = Tensor::alloc(DType::F32, {8, K});
  for (int64_t i = 0; i < 8 * K; ++i) x.data<float>()[i] = (float)(i % 5) - 2.f;
  std::vector<Tensor> out;
  ASSERT_TRUE(one->run({x}, &out).isOk());
  expectXTimesW(x, out[0]);
  EXPECT_EQ(omp_get_max_threads(), 2) << "the plan's thread count is restored after the step";
  auto two = force("dnnl");
  EXPECT_EQ(two->tuning()[0].choice, "dnnl");
  EXPECT_EQ(two->stepImpls()[0].find("@1 thread"), std::string::npos) << two->stepImpls()[0];
}

// A step is timed with its weights cold (the caches displaced before each run) where the plan
// is larger than a core's L2 cache and the step holds at least 64 KiB of weights: in the plan,
// the other steps displace them between two of its runs. Otherwise they stay hot.
TEST_F(Tuning, LargePlansTimeStepsWithTheirWeightsCold) {
  if (!avx2::available()) GTEST_SKIP() << "no AVX2: oneDNN is the only Gemm variant";
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const int64_t big = std::max<int64_t>(l2 > 0 ? l2 : 0, int64_t(1) << 20) * 4;  // > L2
  auto measured = [&](const plan::Plan& p) {
    fs::remove_all(dir_);
    auto exe = loadPlan(p, 1, TuningMode::Measure);
    EXPECT_EQ(exe->tuning().size(), 1u);
    EXPECT_EQ(exe->tuning()[0].source, StepTuning::Source::Measured);
    return exe;
  };
  // 256 x 128 weights are 128 KiB.
  EXPECT_TRUE(measured(gemmPlan(8, 256, 128, big))->tuning()[0].weightsCold);
  EXPECT_FALSE(measured(gemmPlan(8, 256, 128))->tuning()[0].weightsCold) << "plan within L2";
  EXPECT_FALSE(measured(gemmPlan(8, K, N, big))->tuning()[0].weightsCold) << "12 KiB of weights";
  // Still the fastest candidate of what was measured, and a run computes x @ w.
  auto exe = measured(gemmPlan(8, K, N, big));
  const StepTuning& t = exe->tuning()[0];
  EXPECT_EQ(t.choice, t.timings.fastest(t.candidates));
  Tensor x = Tensor::alloc(DType::F32, {8, K});
  for (int64_t i = 0; i < 8 * K; ++i) x.data<float>()[i] = (float)(i % 3) - 1.f;
  std::vector<Tensor> out;
  ASSERT_TRUE(exe->run({x}, &out).isOk());
  expectXTimesW(x, out[0]);
  // A cache hit measures nothing.
  auto again = loadPlan(gemmPlan(8, K, N, big), 1, TuningMode::Measure);
  ASSERT_EQ(again->tuning().size(), 1u);
  EXPECT_EQ(again->tuning()[0].source, StepTuning::Source::Cache);
  EXPECT_FALSE(again->tuning()[0].weightsCold);
}

// Measuring fills a step's non-constant inputs with scratch values; a variable read by a
// measured step (here Gemm's weights, a variable updated by a copy, not in place) takes its
// initial value again before the first run.
TEST_F(Tuning, AVariableReadByAMeasuredStepKeepsItsValue) {
  // Variable weights: no packed-GEMM variant, so two threads make the choice (dnnl on two or
  // on one).
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one hardware thread";
  plan::Plan p = gemmPlan(8);
  // w becomes a variable whose update is a copy of itself (an Identity step, not in place).
  p.mutable_values(1)->set_kind(plan::Value::VARIABLE);
  const int64_t wOff = (p.arenas(0).bytes() + 63) / 64 * 64;
  addValue(p, "w_next", plan::Value::INTERMEDIATE, {K, N}, wOff);
  p.mutable_values(1)->set_update(3);
  plan::Step* copy = p.add_steps();
  copy->set_op_type("Identity");
  copy->set_name("keep_w");
  copy->set_device("cpu");
  copy->add_inputs(1);
  copy->add_outputs(3);
  p.mutable_arenas(0)->set_bytes(wOff + K * N * 4);
  auto exe = loadPlan(p, 2, TuningMode::Measure);
  ASSERT_TRUE(exe);
  ASSERT_GE(exe->tuning().size(), 1u);
  ASSERT_EQ(exe->tuning()[0].source, StepTuning::Source::Measured);
  Tensor x = Tensor::alloc(DType::F32, {8, K});
  for (int64_t i = 0; i < 8 * K; ++i) x.data<float>()[i] = (float)(i % 3) - 1.f;
  std::vector<Tensor> out;
  ASSERT_TRUE(exe->run({x}, &out).isOk());
  expectXTimesW(x, out[0]);
}

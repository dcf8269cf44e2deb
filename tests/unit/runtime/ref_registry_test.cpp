// Tests that registerCpuReferenceKernels covers every op in scope with a well-formed KernelDef,
// and that dtype feasibility answers follow the ONNX type constraints.
#include <map>

#include "runtime/OpTable.h"
#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

// Every op of the op table (runtime/core/OpTable.def), and the fusion-group step.
const std::vector<std::string> kOpsInScope = [] {
  std::vector<std::string> v = {"Fused"};
  size_t n = 0;
  const OpInfo* rows = allOps(&n);
  // If, Loop and Scan run nested plans (runtime/ControlFlowKernels.cpp), DynamicRegion an eager
  // body (runtime/DynamicRegion.cpp), not a reference kernel.
  for (size_t i = 0; i < n; ++i)
    if (std::string(rows[i].name) != "If" && std::string(rows[i].name) != "Loop" &&
        std::string(rows[i].name) != "Scan" && std::string(rows[i].name) != "DynamicRegion")
      v.push_back(rows[i].name);
  return v;
}();

TEST(RefRegistry, EveryOpInScopeHasOneWellFormedDef) {
  KernelRegistry r;
  registerCpuReferenceKernels(r);
  std::map<std::string, int> count;
  for (const KernelDef& d : r.all()) {
    count[d.opType]++;
    EXPECT_EQ(d.deviceKind, "cpu") << d.opType;
    EXPECT_EQ(d.impl, "ref") << d.opType;
    EXPECT_EQ(d.priority, 0) << d.opType;
    EXPECT_TRUE(bool(d.accepts)) << d.opType;
    EXPECT_TRUE(bool(d.create)) << d.opType;
    EXPECT_FALSE(d.dtypesText.empty()) << d.opType;
  }
  for (const std::string& op : kOpsInScope) EXPECT_EQ(count[op], 1) << op;
  EXPECT_EQ(count.size(), kOpsInScope.size());
}

TEST(RefRegistry, FeasibilityByDtype) {
  KernelRegistry& r = registry();
  EXPECT_TRUE(r.supports("Conv", "cpu", {DType::F64, DType::F64}));
  EXPECT_FALSE(r.supports("Conv", "cpu", {DType::I32, DType::I32}));
  EXPECT_TRUE(r.supports("MatMul", "cpu", {DType::I64, DType::I64}));
  EXPECT_TRUE(r.supports("Gather", "cpu", {DType::Bool, DType::I32}));
  EXPECT_FALSE(r.supports("Gather", "cpu", {DType::F32, DType::F32}));
  EXPECT_TRUE(r.supports("Cast", "cpu", {DType::U8}));
  EXPECT_TRUE(r.supports("Constant", "cpu", {}));
  EXPECT_TRUE(r.supports("ConstantOfShape", "cpu", {DType::I64}));
  EXPECT_TRUE(r.supports("Reshape", "cpu", {DType::Bool, DType::I64}));
  EXPECT_TRUE(r.supports("MaxPool", "cpu", {DType::U8}));
  EXPECT_FALSE(r.supports("AveragePool", "cpu", {DType::U8}));
  EXPECT_FALSE(r.supports("Softmax", "cpu", {DType::F16}));
  EXPECT_TRUE(r.supports("Relu", "cpu", {DType::F32}));
  EXPECT_FALSE(r.supports("Relu", "cuda", {DType::F32}));
}

TEST(RefRegistry, KernelsReportRefImpl) {
  OpCall c{"Relu", {}, {f32({1}, {1})}, {{DType::F32, {1}}}};
  std::unique_ptr<Kernel> k;
  ASSERT_TRUE(c.create(&k).isOk());
  EXPECT_EQ(k->implName(), "ref");
}

TEST(RefRegistry, UnsupportedDtypeNamesOpAndDtypes) {
  OpCall c{"Sqrt", {}, {i32({1}, {4})}, {{DType::I32, {1}}}};
  std::string e = errorOf(c);
  EXPECT_NE(e.find("Sqrt"), std::string::npos) << e;
  EXPECT_NE(e.find("i32"), std::string::npos) << e;
}

TEST(RefRegistry, MismatchedOutputTypesAreRejectedAtCreation) {
  // An i64 result in an f32 buffer would overrun it; creation refuses instead.
  OpCall dt{"Add", {}, {i64({2}, {1, 2}), i64({2}, {3, 4})}, {{DType::F32, {2}}}};
  EXPECT_NE(errorOf(dt).find("output dtype f32 differs from the input dtype i64"),
            std::string::npos)
      << errorOf(dt);
  OpCall cmp{"Less", {}, {f32({1}, {1}), f32({1}, {2})}, {{DType::F32, {1}}}};
  EXPECT_NE(errorOf(cmp).find("output must be bool"), std::string::npos);
  OpCall shape{"Exp", {}, {f32({3}, {1, 2, 3})}, {{DType::F32, {2}}}};
  EXPECT_NE(errorOf(shape).find("differs from the input shape"), std::string::npos);
  OpCall none{"Exp", {}, {f32({1}, {1})}, {}};
  EXPECT_NE(errorOf(none).find("output 0 is required"), std::string::npos);
}

TEST(RefRegistry, KernelRunsAgainWithNewData) {
  // Kernels keep no per-run state: the same kernel runs twice with different data.
  OpCall c{"Add", {}, {f32({2}, {1, 2}), f32({2}, {3, 4})}, {{DType::F32, {2}}}};
  std::unique_ptr<Kernel> k;
  ASSERT_TRUE(c.create(&k).isOk());
  Tensor a = f32({2}, {1, 2}), b = f32({2}, {3, 4}), y = Tensor::alloc(DType::F32, {2});
  ASSERT_TRUE(k->run({&a, &b}, {&y}).isOk());
  expectValues<float>(y, {2}, {4, 6});
  a.data<float>()[0] = 10;
  ASSERT_TRUE(k->run({&a, &b}, {&y}).isOk());
  expectValues<float>(y, {2}, {13, 6});
}

}  // namespace
}  // namespace tandem

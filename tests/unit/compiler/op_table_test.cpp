// The op table (runtime/core/OpTable.def) against what else declares ops: the tandem dialect's
// registered ops and their ONNX versions in TandemOps.td, the shape registry, the CPU loop kernel
// (every kCpuLoop op has a loop form that agrees with the op's own kernel), and its own flag rules.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "compiler/Compiler.h"
#include "compiler/ShapeInference.h"
#include "compiler/TandemDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "runtime/Kernel.h"
#include "runtime/OpTable.h"
#include "runtime/cpu/ref/Fused.h"

namespace tandem {
namespace {

std::vector<const OpInfo*> rows() {
  size_t n = 0;
  const OpInfo* r = allOps(&n);
  std::vector<const OpInfo*> v;
  for (size_t i = 0; i < n; ++i) v.push_back(&r[i]);
  return v;
}

// Dialect ops that are no ONNX op and so no table row: a transfer and a fusion group (the
// runtime's "Fused" step). tandem.none and tandem.yield have no ONNX name at all.
const std::set<std::string> kOdsOnly = {"Copy", "Fused"};

TEST(OpTable, ListsTheOpsOfTheDialect) {
  mlir::MLIRContext ctx;
  loadTandemDialects(&ctx);
  auto* dialect = ctx.getLoadedDialect<TandemDialect>();
  ASSERT_NE(dialect, nullptr);
  std::set<std::string> ods;
  for (mlir::RegisteredOperationName op : ctx.getRegisteredOperations()) {
    if (&op.getDialect() != dialect) continue;
    std::string onnx = dialect->onnxNameForOp(op.getStringRef()).str();
    if (!onnx.empty() && !kOdsOnly.count(onnx)) ods.insert(onnx);
  }
  std::set<std::string> table;
  for (const OpInfo* r : rows()) EXPECT_TRUE(table.insert(r->name).second) << "twice: " << r->name;
  for (const std::string& op : ods) EXPECT_TRUE(table.count(op)) << op << " is in TandemOps.td only";
  for (const std::string& op : table) EXPECT_TRUE(ods.count(op)) << op << " is in OpTable.def only";
  EXPECT_GE(table.size(), 78u);
}

// The versions TandemOps.td states (Tandem_OnnxOp<"sin", "Sin", "7", ...>; Constant in its
// summary) are the table's.
TEST(OpTable, SinceVersionsAreTheDialects) {
  std::ifstream f(std::string(TANDEM_SOURCE_DIR) + "/compiler/TandemOps.td");
  ASSERT_TRUE(f) << "cannot read TandemOps.td";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string td = ss.str();
  // Ops of other domains (Tandem_DomainOp) name their domain before the version.
  std::regex onnxOp(
      R"re(Tandem_(?:Onnx|Domain)Op<"[a-z_0-9]+",\s*"([A-Za-z0-9]+)",\s*(?:"[a-z.]+",\s*)?"([0-9]+)")re");
  std::map<std::string, int> versions;
  for (std::sregex_iterator it(td.begin(), td.end(), onnxOp), end; it != end; ++it)
    versions[(*it)[1]] = std::stoi((*it)[2]);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(td, m, std::regex(R"(ONNX Constant-([0-9]+))")));
  versions["Constant"] = std::stoi(m[1]);
  EXPECT_EQ(versions.size(), rows().size());
  for (const OpInfo* r : rows()) {
    auto it = versions.find(r->name);
    ASSERT_NE(it, versions.end()) << r->name;
    EXPECT_EQ(r->since, it->second) << r->name;
  }
}

TEST(OpTable, ShapeRegistryKnowsExactlyTheTable) {
  EXPECT_EQ(knownOps().size(), rows().size());
  for (const OpInfo* r : rows()) EXPECT_TRUE(isKnownOp(r->name)) << r->name;
}

TEST(OpTable, LookupIsByExactName) {
  ASSERT_NE(findOp("Sin"), nullptr);
  EXPECT_STREQ(findOp("Sin")->name, "Sin");
  EXPECT_EQ(findOp("Sin")->since, 7);
  EXPECT_STREQ(findOp("Sin")->formula, "sin(a)");
  EXPECT_EQ(findOp("sin"), nullptr);
  EXPECT_EQ(findOp("ImageDecoder"), nullptr);
  EXPECT_EQ(findOp(""), nullptr);
  EXPECT_TRUE(opHas("Relu", kUnary | kCheap | kDnnlPostOp));
  EXPECT_FALSE(opHas("Log", kDnnlPostOp));  // oneDNN's log is not accurate enough (DnnlEltwise.cpp)
  EXPECT_FALSE(opHas("Nope", 0));
  for (const OpInfo* r : rows()) EXPECT_EQ(findOp(r->name), r) << r->name;
}

// The rules the readers rely on.
TEST(OpTable, FlagsAreConsistent) {
  for (const OpInfo* r : rows()) {
    const std::string n = r->name;
    EXPECT_FALSE(r->has(kUnary | kBinary)) << n;
    // The loops take only element-wise ops; a CUDA group falls back to the CPU loop.
    if (r->flags & (kCpuLoop | kCudaExpr)) {
      EXPECT_TRUE(r->flags & (kUnary | kBinary)) << n;
    }
    if (r->has(kCudaExpr)) {
      EXPECT_TRUE(r->has(kCpuLoop)) << n;
    }
    // Duplication recomputes an op inside a loop; post-ops are unary.
    if (r->has(kCheap)) {
      EXPECT_TRUE(r->has(kCpuLoop)) << n;
    }
    if (r->has(kDnnlPostOp)) {
      EXPECT_TRUE(r->has(kUnary)) << n;
    }
    if (r->has(kDnnlPostOp)) {
      EXPECT_TRUE(r->has(kDnnlEltwise)) << n;
    }
    if (r->has(kReductionRoot)) {
      EXPECT_FALSE(r->flags & (kCpuLoop | kInPlace)) << n;
    }
    // Every loop op may run in place: its kernels read an element before writing it.
    if (r->has(kCpuLoop)) {
      EXPECT_TRUE(r->has(kInPlace)) << n;
    }
    if (r->formula) {
      EXPECT_TRUE(r->has(kUnary | kCpuLoop | kCudaExpr)) << n;
      EXPECT_EQ(r->work, OpWorkKind::Elementwise) << n;
    }
  }
}

// Inputs inside every loop op's domain (Acosh: x >= 1; Asin, Acos, Atanh: |x| < 1; Log, Sqrt: x > 0).
std::vector<float> inputsFor(const std::string& op, int operand) {
  if (op == "Acosh") return {1.f, 1.5f, 3.f, 10.f};
  if (op == "Log" || op == "Sqrt") return {0.1f, 0.5f, 0.9f, 2.f};
  if (operand == 1) return {0.25f, -2.f, 0.75f, 3.f};
  return {0.1f, 0.5f, 0.9f, -0.3f};
}

// A body of one kCpuLoop op runs in the CPU element-wise loop (runtime/cpu/ref/Fused.cpp) and
// gives what the op's own CPU kernel gives: the fuse pass groups exactly these ops.
TEST(OpTable, EveryCpuLoopOpRunsInTheLoopAsItsKernelDoes) {
  for (const OpInfo* r : rows()) {
    if (!r->has(kCpuLoop)) continue;
    const std::string op = r->name;
    const int arity = r->has(kBinary) ? 2 : 1;
    TensorType t{DType::F32, {4}};
    std::vector<Tensor> in;
    for (int i = 0; i < arity; ++i) in.push_back(Tensor::fromVector<float>({4}, inputsFor(op, i)));
    std::vector<const Tensor*> args;
    for (const Tensor& x : in) args.push_back(&x);

    AttrMap none;
    KernelContext own;
    own.opType = op;
    own.attrs = &none;
    own.inputTypes.assign(arity, t);
    own.outputTypes = {t};
    own.constInputs.assign(arity, nullptr);
    std::unique_ptr<Kernel> kernel;
    Status st = KernelRegistry::global().create("cpu", own, &kernel);
    ASSERT_TRUE(st.isOk()) << op << ": " << st.message();
    Tensor want = Tensor::alloc(DType::F32, {4});
    ASSERT_TRUE(kernel->run(args, {&want}).isOk()) << op;

    fused::Body body;
    body.kind = "elementwise";
    fused::BodyOp b;
    b.type = op;
    for (int i = 0; i < arity; ++i) b.refs.push_back(i);
    body.ops = {b};
    body.shapes = {{4}};
    body.outputsFrom = {0};
    KernelContext step = own;
    step.opType = "Fused";
    std::unique_ptr<Kernel> loop;
    st = fused::createElementwiseLoop(step, body, &loop);
    ASSERT_TRUE(st.isOk()) << op << ": " << st.message();
    Tensor got = Tensor::alloc(DType::F32, {4});
    ASSERT_TRUE(loop->run(args, {&got}).isOk()) << op;
    for (int i = 0; i < 4; ++i) {
      float w = want.data<float>()[i], g = got.data<float>()[i];
      EXPECT_FALSE(std::isnan(w)) << op << " [" << i << "]: input outside the op's domain";
      EXPECT_NEAR(g, w, 2e-6f * std::max(1.f, std::fabs(w))) << op << " [" << i << "]";
    }
  }
}

}  // namespace
}  // namespace tandem

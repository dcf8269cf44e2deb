// The typed fused-step body at the compiler/runtime boundary: what emit-plan writes in
// Step.fused_body decodes (fused::parseBody) to the members, operands, attributes and shapes of
// the tandem.fused ops it came from, the plan runs, and plans of another version are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include "compiler/Compiler.h"
#include "compiler/IrConventions.h"
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "runtime/Executable.h"
#include "runtime/PlanFormat.h"
#include "runtime/cpu/ref/Fused.h"

namespace tandem {
namespace {

// c = Clip(LeakyRelu(x + y, alpha 0.3), max 2) with the sum s also an output: one element-wise
// group with an absent operand (Clip's min) and two results; m = ReduceMean(|y|) over the last
// axis: a row group whose root's shape differs from its loop's.
constexpr const char* kModel = R"mlir(
module attributes {tandem.model_name = "fused_body"} {
  func.func @main(%x: tensor<4x8xf32> {tandem.name = "x"}, %y: tensor<4x8xf32> {tandem.name = "y"})
      -> (tensor<4x8xf32> {tandem.name = "c"}, tensor<4x8xf32> {tandem.name = "s"},
          tensor<4x1xf32> {tandem.name = "m"}) {
    %n = tandem.none
    %hi = tandem.constant dense<2.0> : tensor<f32> loc("hi")
    %0 = tandem.add %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("add1")
    %1 = tandem.leaky_relu %0 {alpha = 3.000000e-01 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("lrelu1")
    %2 = tandem.clip %1, %n, %hi : (tensor<4x8xf32>, none, tensor<f32>) -> tensor<4x8xf32> loc("clip1")
    %3 = tandem.abs %y : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("abs1")
    %4 = tandem.reduce_mean %3 {axes = [-1]} : (tensor<4x8xf32>) -> tensor<4x1xf32> loc("mean1")
    return %2, %0, %4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>
  }
}
)mlir";

// An attribute as text, to compare the IR's with the decoded plan's.
std::string attrText(const Attr& a) {
  std::ostringstream s;
  s << (int)a.kind << ":";
  switch (a.kind) {
    case Attr::Kind::Int: s << a.i; break;
    case Attr::Kind::Float: s << a.f; break;
    case Attr::Kind::String: s << a.s; break;
    case Attr::Kind::Ints: for (int64_t v : a.ints) s << v << ","; break;
    case Attr::Kind::Floats: for (float v : a.floats) s << v << ","; break;
    case Attr::Kind::Strings: for (const std::string& v : a.strings) s << v << ","; break;
    case Attr::Kind::Tensor: s << dtypeName(a.t.dtype()) << shapeToString(a.t.shape()) << a.t.bytes(); break;
    case Attr::Kind::Graph: s << a.s.size(); break;
  }
  return s.str();
}
std::map<std::string, std::string> attrsText(const AttrMap& m) {
  std::map<std::string, std::string> out;
  for (const auto& [name, a] : m.all()) out[name] = attrText(a);
  return out;
}

// A fused step's kernel context as the executor builds it: operand types from the plan's values.
KernelContext stepContext(const plan::Plan& p, const plan::Step& s, const AttrMap* attrs) {
  KernelContext ctx;
  ctx.opType = s.op_type();
  ctx.nodeName = s.name();
  ctx.attrs = attrs;
  ctx.fusedBody = &s.fused_body();
  auto type = [&](int id) {
    const plan::Value& v = p.values(id);
    return TensorType{(DType)v.dtype(), Shape(v.dims().begin(), v.dims().end())};
  };
  for (int id : s.inputs()) {
    ctx.inputTypes.push_back(id < 0 ? TensorType{} : type(id));
    ctx.constInputs.push_back(nullptr);
  }
  for (int id : s.outputs()) ctx.outputTypes.push_back(type(id));
  return ctx;
}

class PlanFusedBody : public ::testing::Test {
 protected:
  PlanFusedBody() { loadTandemDialects(&ctx_); }

  void SetUp() override {
    mlir::ScopedDiagnosticHandler handler(&ctx_, [&](mlir::Diagnostic& d) {
      errors_ += d.str() + "\n";
      return mlir::success();
    });
    module_ = mlir::parseSourceString<mlir::ModuleOp>(kModel, &ctx_);
    ASSERT_TRUE(module_) << errors_;
    CompileOptions options;
    ASSERT_TRUE(setTargetDevices(&options, "cpu").isOk());
    ASSERT_TRUE(mlir::succeeded(compileModule(*module_, options, &result_))) << errors_;
  }

  // The fused ops of the compiled module, in order, and the plan's Fused steps, in order.
  std::vector<FusedOp> fusedOps() {
    std::vector<FusedOp> ops;
    getMainFunc(*module_).walk([&](FusedOp f) { ops.push_back(f); });
    return ops;
  }
  std::vector<const plan::Step*> fusedSteps() const {
    std::vector<const plan::Step*> steps;
    for (const plan::Step& s : result_.plan.steps())
      if (s.op_type() == "Fused") steps.push_back(&s);
    return steps;
  }

  mlir::MLIRContext ctx_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  CompileResult result_;
  std::string errors_;
};

TEST_F(PlanFusedBody, DecodesToTheMembersOfTheIr) {
  const plan::Plan& p = result_.plan;
  EXPECT_EQ(p.version(), 3);
  std::vector<FusedOp> ops = fusedOps();
  std::vector<const plan::Step*> steps = fusedSteps();
  ASSERT_EQ(ops.size(), 2u) << "the element-wise group and the row group";
  ASSERT_EQ(steps.size(), ops.size());
  for (const plan::Step& s : p.steps())
    for (const plan::Attribute& a : s.attrs())
      EXPECT_EQ(a.name().find('.'), std::string::npos) << "no flat body attribute: " << a.name();

  for (size_t g = 0; g < ops.size(); ++g) {
    SCOPED_TRACE("group " + std::to_string(g));
    AttrMap stepAttrs;
    ASSERT_TRUE(attrsFromPlan(steps[g]->attrs(), &stepAttrs).isOk());
    KernelContext ctx = stepContext(p, *steps[g], &stepAttrs);
    fused::Body body;
    Status st = fused::parseBody(ctx, &body);
    ASSERT_TRUE(st.isOk()) << st.message();
    EXPECT_EQ(body.kind, ops[g].getKind().str());

    // The IR's members with their operands in the kernels' notation (k: block argument k,
    // -1: tandem.none, -2 - j: member j) and results.
    mlir::Block& block = ops[g].getBody().front();
    llvm::DenseMap<mlir::Value, int64_t> ref;
    for (mlir::BlockArgument a : block.getArguments()) ref[a] = a.getArgNumber();
    size_t j = 0;
    for (mlir::Operation& inner : block) {
      if (llvm::isa<NoneOp>(inner)) {
        ref[inner.getResult(0)] = -1;
        continue;
      }
      if (auto yield = llvm::dyn_cast<YieldOp>(inner)) {
        ASSERT_EQ(body.outputsFrom.size(), yield.getValues().size());
        for (auto [i, v] : llvm::enumerate(yield.getValues())) EXPECT_EQ(-2 - body.outputsFrom[i], ref.lookup(v));
        continue;
      }
      ASSERT_LT(j, body.ops.size());
      const fused::BodyOp& m = body.ops[j];
      EXPECT_EQ(m.type, onnxOpType(&inner));
      EXPECT_EQ(m.name, nodeName(inner.getLoc()));
      std::vector<int64_t> refs;
      for (mlir::Value v : inner.getOperands()) refs.push_back(ref.lookup(v));
      EXPECT_EQ(m.refs, refs) << m.type;
      EXPECT_EQ(attrsText(m.attrs), attrsText(toAttrMap(&inner))) << m.type;
      auto type = llvm::cast<mlir::RankedTensorType>(inner.getResult(0).getType());
      EXPECT_EQ(body.shapes[j], Shape(type.getShape().begin(), type.getShape().end())) << m.type;
      ref[inner.getResult(0)] = -2 - (int64_t)j;
      ++j;
    }
    EXPECT_EQ(j, body.ops.size());
  }

  // What the comparison above rests on, spelled out for the element-wise group.
  AttrMap attrs0;
  ASSERT_TRUE(attrsFromPlan(steps[0]->attrs(), &attrs0).isOk());
  fused::Body ew;
  ASSERT_TRUE(fused::parseBody(stepContext(p, *steps[0], &attrs0), &ew).isOk());
  EXPECT_EQ(ew.kind, "elementwise");
  ASSERT_EQ(ew.ops.size(), 3u);
  EXPECT_EQ(ew.ops[0].type, "Add");
  EXPECT_EQ(ew.ops[0].name, "add1");
  EXPECT_EQ(ew.ops[1].type, "LeakyRelu");
  EXPECT_FLOAT_EQ(ew.ops[1].attrs.getFloat("alpha", 0), 0.3f);
  EXPECT_EQ(ew.ops[1].refs, (std::vector<int64_t>{-2}));
  EXPECT_EQ(ew.ops[2].type, "Clip");
  ASSERT_EQ(ew.ops[2].refs.size(), 3u);
  EXPECT_EQ(ew.ops[2].refs[0], -3);
  EXPECT_EQ(ew.ops[2].refs[1], -1) << "the absent min";
  EXPECT_GE(ew.ops[2].refs[2], 0) << "the max, a step input";
  EXPECT_EQ(ew.outputsFrom, (std::vector<int64_t>{0, 2})) << "the sum and the clip, in the fuse pass's order";
}

TEST_F(PlanFusedBody, PlanRunsAndOtherVersionsAreRefused) {
  std::unique_ptr<Executable> exe;
  Status st = Executable::load(result_.plan, LoadOptions{1}, &exe);
  ASSERT_TRUE(st.isOk()) << st.message();
  Tensor x = Tensor::alloc(DType::F32, {4, 8}), y = Tensor::alloc(DType::F32, {4, 8});
  for (int i = 0; i < 32; ++i) {
    x.data<float>()[i] = 0.25f * (float)(i - 12);
    y.data<float>()[i] = 0.5f * (float)((i * 7) % 9) - 2.f;
  }
  std::vector<Tensor> out;
  st = exe->run({x, y}, &out);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_EQ(out.size(), 3u);
  for (int i = 0; i < 32; ++i) {
    float s = x.data<float>()[i] + y.data<float>()[i];
    EXPECT_FLOAT_EQ(out[1].data<float>()[i], s) << i;
    EXPECT_FLOAT_EQ(out[0].data<float>()[i], std::min(s >= 0 ? s : 0.3f * s, 2.f)) << i;
  }
  for (int r = 0; r < 4; ++r) {
    double sum = 0;
    for (int c = 0; c < 8; ++c) sum += std::fabs(y.data<float>()[r * 8 + c]);
    EXPECT_NEAR(out[2].data<float>()[r], sum / 8, 1e-6) << r;
  }

  plan::Plan old = result_.plan;
  old.set_version(1);
  st = Executable::load(old, LoadOptions{1}, &exe);
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.message(), "plan version 1 was written by an older tandem; recompile the model");
  old.set_version(2);  // before Value.aliases_variable
  st = Executable::load(old, LoadOptions{1}, &exe);
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.message(), "plan version 2 was written by an older tandem; recompile the model");
  old.set_version(4);
  st = Executable::load(old, LoadOptions{1}, &exe);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("plan version 4 was written by a newer tandem"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tandem

// Generic op building (createTandemOp), attribute reading (toAttrMap) and the tensor <-> attribute
// conversions the importer, the GraphBuilder and plan emission rely on.
#include <gtest/gtest.h>

#include "compiler/Compiler.h"
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"

namespace tandem {
namespace {

class OpBuildingTest : public ::testing::Test {
 protected:
  OpBuildingTest() : b_(&ctx_) {
    loadTandemDialects(&ctx_);
    module_ = mlir::ModuleOp::create(b_.getUnknownLoc());
    auto f32 = b_.getF32Type();
    auto fnType = b_.getFunctionType({mlir::RankedTensorType::get({1, 3, 5, 5}, f32)}, {});
    main_ = mlir::func::FuncOp::create(b_.getUnknownLoc(), "main", fnType);
    module_->push_back(main_);
    b_.setInsertionPointToStart(main_.addEntryBlock());
    handler_ = std::make_unique<mlir::ScopedDiagnosticHandler>(&ctx_, [&](mlir::Diagnostic& d) {
      errors_ += d.str() + "\n";
      return mlir::success();
    });
  }

  mlir::Value x() { return main_.getArgument(0); }
  size_t opCount() { return main_.getBody().front().getOperations().size(); }

  mlir::MLIRContext ctx_;
  mlir::OpBuilder b_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp main_;
  std::unique_ptr<mlir::ScopedDiagnosticHandler> handler_;
  std::string errors_;
};

TEST_F(OpBuildingTest, ConvResultTypeIsInferred) {
  Tensor w = Tensor::alloc(DType::F32, {2, 3, 3, 3});
  mlir::Value wv = createConstant(b_, b_.getUnknownLoc(), w);
  auto loc = mlir::NameLoc::get(b_.getStringAttr("conv1"));
  auto op = createTandemOp(b_, loc, "Conv", {x(), wv},
                           {b_.getNamedAttr("strides", b_.getI64ArrayAttr({2, 2})),
                            b_.getNamedAttr("pads", b_.getI64ArrayAttr({1, 1, 1, 1}))});
  ASSERT_TRUE(mlir::succeeded(op)) << errors_;
  EXPECT_EQ((*op)->getName().getStringRef(), "tandem.conv");
  EXPECT_EQ(onnxOpType(*op), "Conv");
  auto type = llvm::cast<mlir::RankedTensorType>((*op)->getResult(0).getType());
  // (5 + 2 - 3) / 2 + 1 = 3
  EXPECT_EQ(std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
            (std::vector<int64_t>{1, 2, 3, 3}));
  AttrMap attrs = toAttrMap(*op);
  EXPECT_EQ(attrs.getInts("strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_FALSE(attrs.has("group"));
  // Discardable attributes are not ONNX attributes.
  (*op)->setAttr("device", b_.getStringAttr("cpu"));
  EXPECT_FALSE(toAttrMap(*op).has("device"));
}

TEST_F(OpBuildingTest, SkippedOptionalInputs) {
  Tensor maxv = Tensor::fromVector<float>({}, {6.0f});
  mlir::Value m = createConstant(b_, b_.getUnknownLoc(), maxv);
  // Clip(x, <no min>, max): the inner hole becomes a tandem.none operand.
  auto clip = createTandemOp(b_, b_.getUnknownLoc(), "Clip", {x(), mlir::Value(), m}, {});
  ASSERT_TRUE(mlir::succeeded(clip)) << errors_;
  ASSERT_EQ((*clip)->getNumOperands(), 3u);
  EXPECT_TRUE(llvm::isa<NoneOp>((*clip)->getOperand(1).getDefiningOp()));
  // Clip(x, <no min>, <no max>): trailing holes are dropped.
  auto clip2 =
      createTandemOp(b_, b_.getUnknownLoc(), "Clip", {x(), mlir::Value(), mlir::Value()}, {});
  ASSERT_TRUE(mlir::succeeded(clip2)) << errors_;
  EXPECT_EQ((*clip2)->getNumOperands(), 1u);
}

TEST_F(OpBuildingTest, SplitHasTheRequestedNumberOfResults) {
  auto split = createTandemOp(b_, b_.getUnknownLoc(), "Split", {x()},
                              {b_.getNamedAttr("axis", b_.getI64IntegerAttr(3))}, 5);
  ASSERT_TRUE(mlir::succeeded(split)) << errors_;
  ASSERT_EQ((*split)->getNumResults(), 5u);
  auto t = llvm::cast<mlir::RankedTensorType>((*split)->getResult(4).getType());
  EXPECT_EQ(t.getDimSize(3), 1);
}

TEST_F(OpBuildingTest, ErrorsAreReportedAndLeaveNoOps) {
  size_t before = opCount();
  auto loc = mlir::NameLoc::get(b_.getStringAttr("n1"));
  EXPECT_TRUE(mlir::failed(createTandemOp(b_, loc, "FooBar", {x()}, {})));
  EXPECT_NE(errors_.find("unsupported op type FooBar"), std::string::npos) << errors_;

  errors_.clear();
  EXPECT_TRUE(mlir::failed(
      createTandemOp(b_, loc, "Relu", {x()}, {b_.getNamedAttr("alpha", b_.getF32FloatAttr(1))})));
  EXPECT_NE(errors_.find("Relu: attribute 'alpha' is not an attribute of ONNX Relu"),
            std::string::npos)
      << errors_;

  // A shape error from the shape function, and the inner tandem.none made for it is removed.
  errors_.clear();
  Tensor w = Tensor::alloc(DType::F32, {2, 4, 3, 3});  // 4 input channels, X has 3
  mlir::Value wv = createConstant(b_, b_.getUnknownLoc(), w);
  before = opCount();
  EXPECT_TRUE(mlir::failed(createTandemOp(b_, loc, "Conv", {x(), wv}, {})));
  EXPECT_NE(errors_.find("Conv:"), std::string::npos) << errors_;
  EXPECT_TRUE(mlir::failed(createTandemOp(b_, loc, "Clip", {x(), mlir::Value(), wv}, {})));
  EXPECT_EQ(opCount(), before);

  // Attribute kinds are checked by the ODS verifier (axis must be i64).
  errors_.clear();
  EXPECT_TRUE(mlir::failed(createTandemOp(b_, loc, "Softmax", {x()},
                                          {b_.getNamedAttr("axis", b_.getI32IntegerAttr(1))})));
  EXPECT_NE(errors_.find("axis"), std::string::npos) << errors_;
  EXPECT_EQ(opCount(), before);
}

TEST_F(OpBuildingTest, TensorAttrRoundTrip) {
  Tensor f = Tensor::fromVector<float>({2, 2}, {1.5f, -2.0f, 0.0f, 7.25f});
  Tensor back = attrToTensor(tensorToAttr(&ctx_, f));
  ASSERT_EQ(back.dtype(), DType::F32);
  EXPECT_EQ(back.shape(), (Shape{2, 2}));
  EXPECT_EQ(back.data<float>()[3], 7.25f);

  // Bools are one byte each in the runtime and bits in MLIR.
  Tensor bits = Tensor::alloc(DType::Bool, {9});
  for (int i = 0; i < 9; ++i) bits.data<uint8_t>()[i] = (i % 3 == 0);
  auto battr = tensorToAttr(&ctx_, bits);
  EXPECT_TRUE(battr.getElementType().isInteger(1));
  Tensor bback = attrToTensor(battr);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(bback.data<uint8_t>()[i], i % 3 == 0 ? 1 : 0) << i;

  Tensor u8 = Tensor::fromVector<uint8_t>({3}, {0, 200, 255});
  Tensor u8back = attrToTensor(tensorToAttr(&ctx_, u8));
  EXPECT_EQ(u8back.dtype(), DType::U8);
  EXPECT_EQ(u8back.data<uint8_t>()[1], 200);

  // A splat attribute expands to every element.
  auto splat = mlir::DenseElementsAttr::get(
      mlir::RankedTensorType::get({2, 3}, mlir::IntegerType::get(&ctx_, 64)), llvm::APInt(64, 9));
  Tensor s = attrToTensor(splat);
  EXPECT_EQ(s.numel(), 6);
  EXPECT_EQ(s.data<int64_t>()[5], 9);

  Tensor empty = Tensor::alloc(DType::I32, {0, 4});
  Tensor eback = attrToTensor(tensorToAttr(&ctx_, empty));
  EXPECT_EQ(eback.shape(), (Shape{0, 4}));

  mlir::Value c = createConstant(b_, b_.getUnknownLoc(), f);
  Tensor got;
  ASSERT_TRUE(getConstantValue(c, &got));
  EXPECT_EQ(got.data<float>()[0], 1.5f);
  EXPECT_FALSE(getConstantValue(x(), &got));
}

TEST_F(OpBuildingTest, DTypeMapping) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool,
                  DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::U64})
    EXPECT_EQ(mlirToDType(dtypeToMlir(&ctx_, t)), t) << dtypeName(t);
  EXPECT_EQ(mlirToDType(mlir::IntegerType::get(&ctx_, 16)), DType::I16);
  EXPECT_EQ(mlirToDType(mlir::IntegerType::get(&ctx_, 16, mlir::IntegerType::Unsigned)), DType::U16);
  EXPECT_EQ(mlirToDType(mlir::IntegerType::get(&ctx_, 4)), DType::Undefined);
  EXPECT_EQ(mlirToDType(mlir::BFloat16Type::get(&ctx_)), DType::BF16);
  EXPECT_EQ(mlirToDType(mlir::Float8E4M3FNType::get(&ctx_)), DType::Undefined);
}

}  // namespace
}  // namespace tandem

// GraphBuilder: every op method builds its ONNX op with the right operands, attributes and
// inferred result type (the values that would change if a method passed the wrong thing).
#include <gtest/gtest.h>

#include <string>

#include "compiler/OpBuilding.h"
#include "frontend/GraphBuilder.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

namespace tandem {
namespace {

using Dims = std::vector<int64_t>;

class GraphBuilderOps : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_TRUE(g.ok()) << g.error(); }
  Value f32(const std::string& name, std::vector<Dim> dims) {
    return g.input(name, DType::F32, dims);
  }
  static mlir::Operation* opOf(Value v) { return v.raw().getDefiningOp(); }
  static std::string type(Value v) { return onnxOpType(opOf(v)); }
  static int64_t intAttr(Value v, const char* name) {
    auto a = opOf(v)->getAttrOfType<mlir::IntegerAttr>(name);
    return a ? a.getInt() : -999;
  }
  static bool hasAttr(Value v, const char* name) { return opOf(v)->hasAttr(name); }

  GraphBuilder g;
};

TEST_F(GraphBuilderOps, Elementwise) {
  Value a = f32("a", {2, 3}), b = f32("b", {3}), i = g.input("i", DType::I64, {2, 1});
  EXPECT_EQ(g.add(a, b).shape(), (Dims{2, 3}));
  EXPECT_EQ(type(g.sub(a, b)), "Sub");
  EXPECT_EQ(type(g.mul(a, b)), "Mul");
  EXPECT_EQ(type(g.div(a, b)), "Div");
  Value p = g.pow(a, i);  // Pow-15: exponent of another dtype, result keeps the base's
  EXPECT_EQ(p.dtype(), DType::F32);
  EXPECT_EQ(p.shape(), (Dims{2, 3}));
  Value m = g.max({a, b, a});
  EXPECT_EQ(opOf(m)->getNumOperands(), 3u);
  EXPECT_EQ(type(g.min({a, b})), "Min");
  EXPECT_EQ(type(g.sum({a})), "Sum");
  Value eq = g.equal(a, b);
  EXPECT_EQ(eq.dtype(), DType::Bool);
  EXPECT_EQ(g.less(a, b).dtype(), DType::Bool);
  EXPECT_EQ(g.greater(a, b).dtype(), DType::Bool);
  Value w = g.where(eq, a, g.scalar(0.0f));
  EXPECT_EQ(w.shape(), (Dims{2, 3}));
  EXPECT_EQ(type(w), "Where");
}

TEST_F(GraphBuilderOps, UnaryAndActivations) {
  Value x = f32("x", {Dim("N"), 4});
  for (auto [v, t] : std::vector<std::pair<Value, const char*>>{
           {g.sqrt(x), "Sqrt"}, {g.exp(x), "Exp"}, {g.log(x), "Log"}, {g.neg(x), "Neg"},
           {g.abs(x), "Abs"}, {g.reciprocal(x), "Reciprocal"}, {g.erf(x), "Erf"},
           {g.relu(x), "Relu"}, {g.sigmoid(x), "Sigmoid"}, {g.tanh(x), "Tanh"},
           {g.softplus(x), "Softplus"}, {g.identity(x), "Identity"}}) {
    EXPECT_EQ(type(v), t);
    EXPECT_EQ(v.shape(), (Dims{-1, 4})) << t;
  }
  Value lr = g.leakyRelu(x, 0.2f);
  EXPECT_FLOAT_EQ(opOf(lr)->getAttrOfType<mlir::FloatAttr>("alpha").getValueAsDouble(), 0.2f);
  Value hs = g.hardSigmoid(x);
  EXPECT_FLOAT_EQ(opOf(hs)->getAttrOfType<mlir::FloatAttr>("beta").getValueAsDouble(), 0.5f);
  EXPECT_EQ(type(g.elu(x)), "Elu");
  EXPECT_EQ(type(g.selu(x)), "Selu");
  EXPECT_EQ(g.prelu(x, g.constant({0.1f, 0.2f, 0.3f, 0.4f}, {4})).shape(), (Dims{-1, 4}));
  EXPECT_EQ(intAttr(g.softmax(x, 0), "axis"), 0);
  EXPECT_EQ(intAttr(g.logSoftmax(x), "axis"), -1);
  Value c = g.cast(x, DType::I32);
  EXPECT_EQ(c.dtype(), DType::I32);
  EXPECT_EQ(intAttr(c, "to"), 6);  // ONNX TensorProto INT32
}

TEST_F(GraphBuilderOps, ClipBoundsAreOptionalInputs) {
  Value x = f32("x", {4});
  Value onlyMax = g.clip(x, std::nullopt, g.scalar(6.0f));
  ASSERT_EQ(opOf(onlyMax)->getNumOperands(), 3u);
  EXPECT_EQ(opOf(onlyMax)->getOperand(1).getDefiningOp()->getName().getStringRef(), "tandem.none");
  Value none = g.clip(x);
  EXPECT_EQ(opOf(none)->getNumOperands(), 1u);
  Value both = g.clip(x, 0.0f, 6.0f);
  Tensor hi;
  ASSERT_TRUE(getConstantValue(opOf(both)->getOperand(2), &hi));
  EXPECT_EQ(hi.data<float>()[0], 6.0f);
}

TEST_F(GraphBuilderOps, ConvPoolNorm) {
  Value x = f32("x", {1, 4, 9, 9});
  ConvOptions co;
  co.strides = {2, 2};
  co.pads = {1, 1, 1, 1};
  co.group = 2;
  Value c = g.conv(x, g.constant(Tensor::alloc(DType::F32, {6, 2, 3, 3})), std::nullopt, co);
  EXPECT_EQ(c.shape(), (Dims{1, 6, 5, 5}));
  EXPECT_EQ(intAttr(c, "group"), 2);

  ConvTransposeOptions to;
  to.strides = {2, 2};
  Value ct = g.convTranspose(x, g.constant(Tensor::alloc(DType::F32, {4, 3, 3, 3})), std::nullopt, to);
  EXPECT_EQ(ct.shape(), (Dims{1, 3, 19, 19}));  // (9-1)*2 + 3

  PoolOptions po;
  po.kernelShape = {2, 2};
  po.strides = {2, 2};
  po.ceilMode = true;
  EXPECT_EQ(g.maxPool(x, po).shape(), (Dims{1, 4, 5, 5}));  // ceil((9-2)/2)+1
  po.ceilMode = false;
  po.countIncludePad = true;
  po.pads = {1, 1, 1, 1};
  Value ap = g.averagePool(x, po);
  EXPECT_EQ(ap.shape(), (Dims{1, 4, 5, 5}));  // floor((9+2-2)/2)+1
  EXPECT_EQ(intAttr(ap, "count_include_pad"), 1);
  EXPECT_EQ(g.globalAveragePool(x).shape(), (Dims{1, 4, 1, 1}));
  EXPECT_EQ(type(g.globalMaxPool(x)), "GlobalMaxPool");

  Value v4 = g.constant({1, 1, 1, 1}, {4});
  Value bn = g.batchNormalization(x, v4, v4, v4, v4, 1e-3f);
  EXPECT_EQ(bn.shape(), (Dims{1, 4, 9, 9}));
  EXPECT_FLOAT_EQ(opOf(bn)->getAttrOfType<mlir::FloatAttr>("epsilon").getValueAsDouble(), 1e-3f);
  Value ln = g.layerNormalization(x, g.constant(Tensor::alloc(DType::F32, {9})));
  EXPECT_EQ(ln.shape(), (Dims{1, 4, 9, 9}));
}

TEST_F(GraphBuilderOps, MatrixProducts) {
  Value a = f32("a", {Dim("N"), 5});
  GemmOptions go;
  go.transB = true;
  go.alpha = 2.0f;
  Value y = g.gemm(a, g.constant(Tensor::alloc(DType::F32, {7, 5})), g.scalar(1.0f), go);
  EXPECT_EQ(y.shape(), (Dims{-1, 7}));
  EXPECT_EQ(intAttr(y, "transB"), 1);
  EXPECT_FALSE(hasAttr(y, "transA"));
  Value mm = g.matMul(f32("b", {3, 1, 4, 5}), f32("c", {2, 5, 6}));
  EXPECT_EQ(mm.shape(), (Dims{3, 2, 4, 6}));
  EXPECT_EQ(g.matMul(f32("v", {5}), f32("m", {5, 2})).shape(), (Dims{2}));
}

TEST_F(GraphBuilderOps, ShapeManipulation) {
  Value x = f32("x", {2, 3, 4});
  EXPECT_EQ(g.flatten(x, 2).shape(), (Dims{6, 4}));
  EXPECT_EQ(g.reshape(x, {4, -1}).shape(), (Dims{4, 6}));
  EXPECT_EQ(g.reshape(x, {0, 12}).shape(), (Dims{2, 12}));
  EXPECT_EQ(g.transpose(x).shape(), (Dims{4, 3, 2}));
  EXPECT_EQ(g.transpose(x, {1, 0, 2}).shape(), (Dims{3, 2, 4}));
  Value u = g.unsqueeze(x, {0, -1});
  EXPECT_EQ(u.shape(), (Dims{1, 2, 3, 4, 1}));
  EXPECT_EQ(g.squeeze(u).shape(), (Dims{2, 3, 4}));
  EXPECT_EQ(g.squeeze(u, {0}).shape(), (Dims{2, 3, 4, 1}));
  EXPECT_EQ(g.concat({x, x}, -1).shape(), (Dims{2, 3, 8}));
  std::vector<Value> parts = g.split(x, 2, {1, 3});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].shape(), (Dims{2, 3, 3}));
  std::vector<Value> halves = g.splitEqual(x, 0, 2);
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_EQ(halves[0].shape(), (Dims{1, 3, 4}));
  EXPECT_EQ(g.slice(x, {1}, {INT64_MAX}, {2}).shape(), (Dims{2, 3, 3}));
  EXPECT_EQ(g.slice(x, {-1}, {-4}, {1}, {-1}).shape(), (Dims{2, 3, 4}));
  Value idx = g.input("idx", DType::I64, {5});
  EXPECT_EQ(g.gather(x, idx, 1).shape(), (Dims{2, 5, 4}));
  Value s = g.shapeOf(x, 1);
  EXPECT_EQ(s.dtype(), DType::I64);
  EXPECT_EQ(s.shape(), (Dims{2}));
  Value cos = g.constantOfShape({2, 2}, Tensor::fromVector<int32_t>({1}, {7}));
  EXPECT_EQ(cos.dtype(), DType::I32);
  EXPECT_EQ(cos.shape(), (Dims{2, 2}));
  EXPECT_EQ(g.expand(f32("e", {3, 1}), {2, 3, 5}).shape(), (Dims{2, 3, 5}));
  Value p = g.pad(x, {0, 1, 2, 0, 1, 2}, "edge");
  EXPECT_EQ(p.shape(), (Dims{2, 5, 8}));
  EXPECT_EQ(opOf(g.pad(x, {0, 0, 1, 0, 0, 1}, "constant", 2.5))->getNumOperands(), 3u);
  EXPECT_EQ(g.tile(x, {1, 2, 3}).shape(), (Dims{2, 6, 12}));
}

TEST_F(GraphBuilderOps, Reductions) {
  Value x = f32("x", {2, 3, 4});
  EXPECT_EQ(g.reduceMean(x, {1}).shape(), (Dims{2, 1, 4}));
  EXPECT_EQ(g.reduceMax(x, {-1}, false).shape(), (Dims{2, 3}));
  EXPECT_EQ(g.reduceMin(x).shape(), (Dims{1, 1, 1}));
  Value rs = g.reduceSum(x, {0, 2}, false);
  EXPECT_EQ(rs.shape(), (Dims{3}));
  EXPECT_EQ(opOf(rs)->getNumOperands(), 2u);  // ReduceSum-13: axes is an input
  Value am = g.argMax(x, 1, false, true);
  EXPECT_EQ(am.dtype(), DType::I64);
  EXPECT_EQ(am.shape(), (Dims{2, 4}));
  EXPECT_EQ(intAttr(am, "select_last_index"), 1);
}

TEST_F(GraphBuilderOps, GenericOp) {
  Value x = f32("x", {2, 3});
  AttrMap a;
  a.set("perm", Attr::ofInts({1, 0}));
  std::vector<Value> t = g.op("Transpose", {x}, a);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].shape(), (Dims{3, 2}));
  std::vector<Value> d = g.op("Dropout", {x}, {}, 2);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].dtype(), DType::Bool);
}

TEST(GraphBuilderOpsErrors, UnknownGenericOpAndBadOptions) {
  GraphBuilder g;
  Value x = g.input("x", DType::F32, {2, 3});
  g.op("FooBar", {x});
  EXPECT_NE(g.error().find("FooBar: unsupported op type 'FooBar'"), std::string::npos) << g.error();

  GraphBuilder h;
  Value y = h.input("y", DType::F32, {1, 1, 4, 4});
  PoolOptions po;
  po.kernelShape = {2, 2};
  po.dilations = {2, 2};
  h.averagePool(y, po);
  EXPECT_NE(h.error().find("AveragePool: dilations are not an attribute of AveragePool-11"),
            std::string::npos) << h.error();

  GraphBuilder k;
  k.dropout(k.input("z", DType::F32, {2}), 1.5f);
  EXPECT_NE(k.error().find("Dropout: ratio 1.500000 is outside [0, 1)"), std::string::npos)
      << k.error();
}

}  // namespace
}  // namespace tandem

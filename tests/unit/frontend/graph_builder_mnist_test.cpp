// GraphBuilder: the Keras MNIST CNN (types, module signature, run), call-site errors, pins.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "compiler/Compiler.h"
#include "compiler/IrConventions.h"
#include "compiler/OpBuilding.h"
#include "frontend/GraphBuilder.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "runtime/Executable.h"

namespace tandem {
namespace {

using Dims = std::vector<int64_t>;

Tensor filled(Shape s, float start, float step) {
  Tensor t = Tensor::alloc(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + step * (float)(i % 17);
  return t;
}

std::string str(mlir::Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return os.str();
}

TEST(GraphBuilderMnist, ResultTypesFollowTheLayers) {
  GraphBuilder g;
  Value x = g.input("input", DType::F32, {Dim("N"), 1, 28, 28});
  EXPECT_EQ(x.shape(), (Dims{-1, 1, 28, 28}));
  Value c1 = g.relu(g.conv(x, g.constant(filled({32, 1, 3, 3}, -0.1f, 0.01f)),
                           g.constant(filled({32}, 0, 0))));
  EXPECT_EQ(c1.shape(), (Dims{-1, 32, 26, 26}));
  Value c2 = g.relu(g.conv(c1, g.constant(filled({64, 32, 3, 3}, -0.1f, 0.01f)),
                           g.constant(filled({64}, 0, 0))));
  EXPECT_EQ(c2.shape(), (Dims{-1, 64, 24, 24}));
  PoolOptions pool;
  pool.kernelShape = {2, 2};
  pool.strides = {2, 2};
  Value p = g.dropout(g.maxPool(c2, pool), 0.25f);
  EXPECT_EQ(p.shape(), (Dims{-1, 64, 12, 12}));
  Value f = g.flatten(p);
  EXPECT_EQ(f.shape(), (Dims{-1, 9216}));
  Value d1 = g.dropout(g.relu(g.dense(f, g.constant(filled({9216, 128}, -0.01f, 0.001f)),
                                      g.constant(filled({128}, 0, 0)))));
  EXPECT_EQ(d1.shape(), (Dims{-1, 128}));
  Value y = g.softmax(g.dense(d1, g.constant(filled({128, 10}, -0.1f, 0.01f)),
                              g.constant(filled({10}, 0, 0))));
  EXPECT_EQ(y.shape(), (Dims{-1, 10}));
  EXPECT_EQ(y.dtype(), DType::F32);
  g.output(y, "probabilities");
  ASSERT_TRUE(g.ok()) << g.error();

  std::string err;
  auto module = g.finish(&err);
  ASSERT_TRUE(module) << err;
  auto main = module->lookupSymbol<mlir::func::FuncOp>("main");
  ASSERT_TRUE(main);
  EXPECT_EQ(str(main.getFunctionType()), "(tensor<?x1x28x28xf32>) -> tensor<?x10xf32>");
  EXPECT_EQ(main.getArgAttrOfType<mlir::StringAttr>(0, "tandem.name").str(), "input");
  auto params = main.getArgAttrOfType<mlir::ArrayAttr>(0, "tandem.dim_params");
  ASSERT_TRUE(params);
  EXPECT_EQ(llvm::cast<mlir::StringAttr>(params[0]).str(), "N");
  EXPECT_EQ(llvm::cast<mlir::StringAttr>(params[1]).str(), "");
  EXPECT_EQ(main.getResultAttrOfType<mlir::StringAttr>(0, "tandem.name").str(), "probabilities");
  int convs = 0, gemms = 0;
  main.walk([&](mlir::Operation* op) {
    convs += onnxOpType(op) == "Conv";
    gemms += onnxOpType(op) == "Gemm";
  });
  EXPECT_EQ(convs, 2);
  EXPECT_EQ(gemms, 2);
}

TEST(GraphBuilderMnist, OpLocationIsTheCallSite) {
  GraphBuilder g;
  Value x = g.input("x", DType::F32, {2, 3});
  int line = __LINE__ + 1;
  Value r = g.relu(x);
  auto loc = llvm::dyn_cast<mlir::FileLineColLoc>(r.raw().getDefiningOp()->getLoc());
  ASSERT_TRUE(loc);
  EXPECT_EQ(loc.getFilename().str(), "graph_builder_mnist_test.cpp");
  EXPECT_EQ((int)loc.getLine(), line);
}

// A named constant carries its name as a NameLoc (training names the parameter by it) around
// the call site; names are unique among named constants and inputs.
TEST(GraphBuilderMnist, NamedConstantIsNamedAndUnique) {
  GraphBuilder g;
  Value x = g.input("x", DType::F32, {2, 3});
  int line = __LINE__ + 1;
  Value w = g.namedConstant("fc.weight", filled({3, 4}, 0, 0.1f));
  ASSERT_TRUE(w.valid()) << g.error();
  mlir::Location loc = w.raw().getDefiningOp()->getLoc();
  EXPECT_EQ(nodeName(loc), "fc.weight");
  auto file = llvm::dyn_cast<mlir::FileLineColLoc>(llvm::cast<mlir::NameLoc>(loc).getChildLoc());
  ASSERT_TRUE(file);
  EXPECT_EQ((int)file.getLine(), line);
  EXPECT_EQ(w.shape(), (Dims{3, 4}));
  EXPECT_EQ(g.dense(x, w).shape(), (Dims{2, 4}));
  EXPECT_TRUE(g.ok()) << g.error();
  EXPECT_FALSE(g.namedConstant("fc.weight", filled({4}, 0, 0)).valid());
  EXPECT_NE(g.error().find("constant 'fc.weight': a constant of that name already exists"),
            std::string::npos) << g.error();
  {
    GraphBuilder h;
    h.input("x", DType::F32, {2});
    EXPECT_FALSE(h.namedConstant("x", filled({2}, 0, 0)).valid());
    EXPECT_NE(h.error().find("constant 'x': an input of that name already exists"),
              std::string::npos) << h.error();
  }
  {
    GraphBuilder h;
    h.namedConstant("w", filled({2}, 0, 0));
    h.input("w", DType::F32, {2});
    EXPECT_NE(h.error().find("input 'w': a named constant of that name already exists"),
              std::string::npos) << h.error();
  }
  {
    GraphBuilder h;
    EXPECT_FALSE(h.namedConstant("", filled({2}, 0, 0)).valid());
    EXPECT_NE(h.error().find("constant: the name must not be empty"), std::string::npos);
  }
}

TEST(GraphBuilderMnist, ShapeErrorNamesTheCallSite) {
  GraphBuilder g;
  Value x = g.input("x", DType::F32, {Dim("N"), 1, 28, 28});
  // A 3-channel filter on a 1-channel image.
  Value w = g.constant(filled({8, 3, 3, 3}, 0, 0.1f));
  int line = __LINE__ + 1;
  Value c = g.conv(x, w);
  EXPECT_FALSE(c.valid());
  EXPECT_FALSE(g.ok());
  std::string prefix = "graph_builder_mnist_test.cpp:" + std::to_string(line) + ": Conv: ";
  EXPECT_EQ(g.error().rfind(prefix, 0), 0u) << g.error();
  EXPECT_NE(g.error().find("channel"), std::string::npos) << g.error();

  // Later calls are no-ops that keep the first error; finish() reports it.
  Value r = g.relu(c);
  EXPECT_FALSE(r.valid());
  g.output(r, "y");
  EXPECT_EQ(g.error().rfind(prefix, 0), 0u);
  std::string err;
  EXPECT_FALSE(g.finish(&err));
  EXPECT_EQ(err, g.error());
}

TEST(GraphBuilderMnist, DenseWithWrongWidth) {
  GraphBuilder g;
  Value x = g.input("x", DType::F32, {4, 9216});
  int line = __LINE__ + 1;
  Value y = g.dense(x, g.constant(filled({9000, 10}, 0, 0)));
  EXPECT_FALSE(y.valid());
  std::string prefix = "graph_builder_mnist_test.cpp:" + std::to_string(line) + ": Gemm: ";
  EXPECT_EQ(g.error().rfind(prefix, 0), 0u) << g.error();
}

TEST(GraphBuilderMnist, MisuseErrors) {
  {
    GraphBuilder g;
    Value r = g.relu(Value());
    EXPECT_FALSE(r.valid());
    EXPECT_NE(g.error().find("Relu: input 0 is an invalid Value"), std::string::npos) << g.error();
  }
  {
    GraphBuilder a, b;
    Value x = a.input("x", DType::F32, {2});
    b.relu(x);
    EXPECT_NE(b.error().find("Relu: input 0 was built by another GraphBuilder"), std::string::npos)
        << b.error();
  }
  {
    GraphBuilder g;
    g.input("x", DType::F32, {2});
    g.input("x", DType::F32, {2});
    EXPECT_NE(g.error().find("input 'x': a graph input of that name already exists"),
              std::string::npos) << g.error();
  }
  {
    GraphBuilder g;
    g.input("x", DType::F32, {2});
    std::string err;
    EXPECT_FALSE(g.finish(&err));
    EXPECT_EQ(err, "GraphBuilder: the graph has no outputs (call output())");
  }
  {
    GraphBuilder g;
    Value x = g.input("x", DType::F32, {2});
    g.output(x, "y");
    std::string err;
    ASSERT_TRUE(g.finish(&err));
    g.relu(x);
    EXPECT_NE(g.error().find("Relu: the builder is finished"), std::string::npos) << g.error();
  }
  {
    GraphBuilder g;
    Value x = g.input("x", DType::F32, {2});
    g.constant({1, 2, 3}, {2});
    EXPECT_NE(g.error().find("constant: 3 values for shape [2] (2 elements)"), std::string::npos)
        << g.error();
    (void)x;
  }
}

TEST(GraphBuilderMnist, DeviceScopePinsOpsInside) {
  GraphBuilder g;
  Value x = g.input("x", DType::F32, {2, 3});
  Value a = g.relu(x);
  Value b, c, d;
  {
    DeviceScope gpu(g, "cuda:0");
    b = g.relu(a);
    {
      DeviceScope cpu(g, "cpu");
      c = g.neg(b);
    }
    d = g.reshape(c, {3, 2});
  }
  Value e = g.abs(d);
  auto device = [](Value v) {
    auto s = v.raw().getDefiningOp()->getAttrOfType<mlir::StringAttr>("device");
    return s ? s.str() : std::string("<none>");
  };
  EXPECT_EQ(device(a), "<none>");
  EXPECT_EQ(device(b), "cuda:0");
  EXPECT_EQ(device(c), "cpu");
  EXPECT_EQ(device(d), "cuda:0");
  EXPECT_EQ(device(e), "<none>");
  // The shape operand the builder made for reshape is not pinned.
  auto shapeOp = d.raw().getDefiningOp()->getOperand(1).getDefiningOp();
  EXPECT_FALSE(shapeOp->hasAttr("device"));
}

// The builder's module compiles and runs: a Dense + ReLU + Softmax with known weights.
TEST(GraphBuilderMnist, CompilesAndRuns) {
  GraphBuilder g;
  Value x = g.input("x", DType::F32, {Dim("N"), 3});
  Value w = g.constant({1, 0, -1, 2, 0.5f, 0}, {3, 2});
  Value b = g.constant({0.5f, -1}, {2});
  Value h = g.relu(g.dense(x, w, b));
  g.output(h, "h");
  g.output(g.softmax(h), "p");
  std::string err;
  auto module = g.finish(&err);
  ASSERT_TRUE(module) << err;

  CompileOptions opts;
  opts.dimBindings["N"] = 2;
  CompileResult compiled;
  std::string diag;
  mlir::ScopedDiagnosticHandler handler(g.context(), [&](mlir::Diagnostic& d) {
    diag += d.str() + "\n";
    return mlir::success();
  });
  ASSERT_TRUE(mlir::succeeded(compileModule(*module, opts, &compiled))) << diag;
  std::unique_ptr<Executable> exe;
  Status st = Executable::load(compiled.plan, LoadOptions{}, &exe);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_EQ(exe->inputNames(), std::vector<std::string>{"x"});
  ASSERT_EQ(exe->outputNames(), (std::vector<std::string>{"h", "p"}));

  std::vector<Tensor> outs;
  st = exe->run({Tensor::fromVector<float>({2, 3}, {1, 2, 3, -1, 0, 1})}, &outs);
  ASSERT_TRUE(st.isOk()) << st.message();
  // Row 0: [1,2,3]·W = [1 - 2 + 1.5, 0 + 4 + 0] = [0.5, 4] + b = [1, 3] → relu [1, 3].
  // Row 1: [-1,0,1]·W = [-1 + 0.5, 0] = [-0.5, 0] + b = [0, -1] → relu [0, 0].
  const float* h0 = outs[0].data<float>();
  EXPECT_FLOAT_EQ(h0[0], 1.0f);
  EXPECT_FLOAT_EQ(h0[1], 3.0f);
  EXPECT_FLOAT_EQ(h0[2], 0.0f);
  EXPECT_FLOAT_EQ(h0[3], 0.0f);
  const float* p = outs[1].data<float>();
  EXPECT_NEAR(p[0], 1.0 / (1.0 + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(p[2], 0.5, 1e-6);
}

}  // namespace
}  // namespace tandem

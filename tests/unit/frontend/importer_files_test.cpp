// ONNX importer on real files: ONNX backend-test models (current and legacy opsets, PyTorch
// exports) and the shared PyTorch models, checked op by op and type by type.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <map>
#include <string>

#include "compiler/Compiler.h"
#include "compiler/OpBuilding.h"
#include "frontend/OnnxImporter.h"
#include "frontend/OnnxTensor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/MLIRContext.h"
#include "runtime/Executable.h"

namespace tandem {
namespace {

const std::string kData = "/usr/share/libonnx-testdata/data/";
const std::string kShared = std::string(TANDEM_SOURCE_DIR) + "/../shared/models/";

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

class ImporterFiles : public ::testing::Test {
 protected:
  void SetUp() override { loadTandemDialects(&ctx); }

  /// Imports `path`; fails the test (with the importer's message) when it does not import.
  bool load(const std::string& path, const ImportOptions& opts = {}) {
    error.clear();
    module = importOnnxFile(&ctx, path, opts, &error);
    if (!module) ADD_FAILURE() << "import of " << path << " failed: " << error;
    return (bool)module;
  }
  mlir::func::FuncOp main() { return module->lookupSymbol<mlir::func::FuncOp>("main"); }

  /// ONNX op type → count (tandem.constant counts as "Constant").
  std::map<std::string, int> opCounts() {
    std::map<std::string, int> counts;
    main().walk([&](mlir::Operation* op) {
      if (llvm::isa<mlir::func::FuncOp, mlir::func::ReturnOp>(op)) return;
      std::string t = onnxOpType(op);
      counts[t.empty() ? op->getName().getStringRef().str() : t]++;
    });
    return counts;
  }
  /// The only op of ONNX type `type`.
  mlir::Operation* only(const std::string& type) {
    mlir::Operation* found = nullptr;
    int n = 0;
    main().walk([&](mlir::Operation* op) {
      if (onnxOpType(op) == type) {
        found = op;
        ++n;
      }
    });
    EXPECT_EQ(n, 1) << "ops of type " << type;
    return found;
  }
  std::string argName(unsigned i) {
    auto a = main().getArgAttrOfType<mlir::StringAttr>(i, "tandem.name");
    return a ? a.str() : "<none>";
  }
  std::vector<std::string> dimParams(unsigned i) {
    std::vector<std::string> out;
    auto a = main().getArgAttrOfType<mlir::ArrayAttr>(i, "tandem.dim_params");
    if (a)
      for (mlir::Attribute e : a) out.push_back(llvm::cast<mlir::StringAttr>(e).str());
    return out;
  }
  std::string resultName(unsigned i) {
    auto a = main().getResultAttrOfType<mlir::StringAttr>(i, "tandem.name");
    return a ? a.str() : "<none>";
  }
  /// Constant operand `i` of `op` as int64 values (empty + failure when not a constant).
  std::vector<int64_t> constInts(mlir::Operation* op, unsigned i) {
    Tensor t;
    std::vector<int64_t> v;
    if (i >= op->getNumOperands() || !getConstantValue(op->getOperand(i), &t)) {
      ADD_FAILURE() << "operand " << i << " of " << onnxOpType(op) << " is not a constant";
      return v;
    }
    EXPECT_EQ(t.dtype(), DType::I64);
    for (int64_t k = 0; k < t.numel(); ++k) v.push_back(t.data<int64_t>()[k]);
    return v;
  }
  float constScalar(mlir::Operation* op, unsigned i) {
    Tensor t;
    if (!getConstantValue(op->getOperand(i), &t) || t.dtype() != DType::F32 || t.numel() != 1) {
      ADD_FAILURE() << "operand " << i << " is not an f32 scalar constant";
      return NAN;
    }
    return t.data<float>()[0];
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string error;
};

std::string str(mlir::Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return os.str();
}

std::string str(mlir::Attribute a) {
  std::string s;
  llvm::raw_string_ostream os(s);
  a.print(os);
  return os.str();
}

#define REQUIRE_FILE(p)                                                   \
  do {                                                                    \
    if (!exists(p)) GTEST_SKIP() << "test data not installed: " << (p);   \
  } while (0)

// ---- Current opsets ----

TEST_F(ImporterFiles, AddHasTwoArgumentsAndOneOp) {
  std::string p = kData + "node/test_add/model.onnx";
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  EXPECT_EQ(opCounts(), (std::map<std::string, int>{{"Add", 1}}));
  auto f = main();
  ASSERT_EQ(f.getNumArguments(), 2u);
  EXPECT_EQ(str(f.getArgument(0).getType()), "tensor<3x4x5xf32>");
  EXPECT_EQ(argName(0), "x");
  EXPECT_EQ(argName(1), "y");
  EXPECT_EQ(dimParams(0), (std::vector<std::string>{"", "", ""}));
  ASSERT_EQ(f.getNumResults(), 1u);
  EXPECT_EQ(str(f.getResultTypes()[0]), "tensor<3x4x5xf32>");
  EXPECT_EQ(resultName(0), "sum");
  // Unnamed nodes are located as OpType_<index> inside the file.
  auto loc = llvm::dyn_cast<mlir::NameLoc>(only("Add")->getLoc());
  ASSERT_TRUE(loc);
  EXPECT_EQ(loc.getName().str(), "Add_0");
}

TEST_F(ImporterFiles, ConvKeepsStridesAndPads) {
  std::string p = kData + "node/test_conv_with_strides_padding/model.onnx";
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  mlir::Operation* conv = only("Conv");
  ASSERT_TRUE(conv);
  EXPECT_EQ(str(conv->getResult(0).getType()), "tensor<1x1x4x3xf32>");
  EXPECT_EQ(str(conv->getAttr("strides")), "[2, 2]");
  EXPECT_EQ(str(conv->getAttr("pads")), "[1, 1, 1, 1]");
  EXPECT_EQ(str(conv->getAttr("kernel_shape")), "[3, 3]");
  EXPECT_EQ(main().getNumArguments(), 2u);  // W is a graph input in this test
}

TEST_F(ImporterFiles, SqueezeAxesInputMustBeConstantOrFed) {
  std::string p = kData + "node/test_squeeze/model.onnx";
  REQUIRE_FILE(p);
  std::string err;
  auto m = importOnnxFile(&ctx, p, {}, &err);
  EXPECT_FALSE(m);
  EXPECT_EQ(err, p + ": node 'Squeeze_0' (Squeeze): input 1 (axes) must be constant");

  ImportOptions opts;
  opts.constantInputs["axes"] = Tensor::fromVector<int64_t>({1}, {0});
  ASSERT_TRUE(load(p, opts));
  EXPECT_EQ(main().getNumArguments(), 1u);  // only x; axes became a constant
  EXPECT_EQ(argName(0), "x");
  mlir::Operation* sq = only("Squeeze");
  EXPECT_EQ(constInts(sq, 1), (std::vector<int64_t>{0}));
  EXPECT_EQ(str(main().getResultTypes()[0]), "tensor<3x4x5xf32>");
}

TEST_F(ImporterFiles, FedConstantMustMatchDeclaredType) {
  std::string p = kData + "node/test_squeeze/model.onnx";
  REQUIRE_FILE(p);
  ImportOptions opts;
  opts.constantInputs["axes"] = Tensor::fromVector<int32_t>({1}, {0});
  std::string err;
  EXPECT_FALSE(importOnnxFile(&ctx, p, opts, &err));
  EXPECT_EQ(err, p + ": constant input 'axes' is i32[1] but the model declares i64 of rank 1");
  opts.constantInputs.clear();
  opts.constantInputs["nope"] = Tensor::fromVector<int64_t>({1}, {0});
  EXPECT_FALSE(importOnnxFile(&ctx, p, opts, &err));
  EXPECT_EQ(err, p + ": constant input 'nope' is not a graph input of the model");
}

TEST_F(ImporterFiles, Unsqueeze11AxesAttributeBecomesInput) {
  std::string p = kData + "node/test_unsqueeze_axis_3/model.onnx";  // opset 11
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  mlir::Operation* u = only("Unsqueeze");
  EXPECT_FALSE(u->hasAttr("axes"));
  EXPECT_EQ(constInts(u, 1), (std::vector<int64_t>{3}));
  EXPECT_EQ(str(u->getResult(0).getType()), "tensor<3x4x5x1xf32>");
}

TEST_F(ImporterFiles, Dropout11RatioAttributeIsDropped) {
  std::string p = kData + "node/test_dropout_default_old/model.onnx";  // opset 11
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  mlir::Operation* d = only("Dropout");
  EXPECT_FALSE(d->hasAttr("ratio"));
  EXPECT_EQ(d->getNumOperands(), 1u);
  EXPECT_EQ(str(d->getResult(0).getType()), "tensor<3xf32>");
}

// ---- Opsets before 7 (PyTorch 0.3 exports): ops unchanged up to opset 7, or rewritten ----

TEST_F(ImporterFiles, Opset6SliceAndSqueezeAttributesBecomeInputs) {
  std::string p = kData + "pytorch-operator/test_operator_index/model.onnx";
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  EXPECT_EQ(opCounts(), (std::map<std::string, int>{{"Slice", 1}, {"Squeeze", 1}, {"Constant", 4}}));
  mlir::Operation* s = only("Slice");
  EXPECT_EQ(constInts(s, 1), (std::vector<int64_t>{0}));  // starts
  EXPECT_EQ(constInts(s, 2), (std::vector<int64_t>{1}));  // ends
  EXPECT_EQ(constInts(s, 3), (std::vector<int64_t>{0}));  // axes
  EXPECT_TRUE(s->getAttrDictionary().empty());
  EXPECT_EQ(constInts(only("Squeeze"), 1), (std::vector<int64_t>{0}));
  EXPECT_EQ(str(main().getResultTypes()[0]), "tensor<1xf32>");
}

TEST_F(ImporterFiles, Opset6PadAttributesBecomeInputs) {
  std::string p = kData + "pytorch-operator/test_operator_pad/model.onnx";
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  mlir::Operation* pad = only("Pad");
  EXPECT_EQ(constInts(pad, 1), (std::vector<int64_t>{0, 0, 0, 2, 0, 0, 1, 3}));
  EXPECT_EQ(pad->getNumOperands(), 2u);  // no value attribute: no constant_value input
  EXPECT_EQ(str(pad->getAttr("mode")), "\"reflect\"");
  EXPECT_EQ(str(pad->getResult(0).getType()), "tensor<1x1x3x9xf32>");
}

TEST_F(ImporterFiles, Opset6ClipBoundsBecomeInputs) {
  std::string p = kData + "pytorch-operator/test_operator_clip/model.onnx";
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  mlir::Operation* clip = only("Clip");
  ASSERT_EQ(clip->getNumOperands(), 3u);
  EXPECT_EQ(constScalar(clip, 1), -0.5f);
  EXPECT_EQ(constScalar(clip, 2), 0.5f);
  EXPECT_FALSE(clip->hasAttr("min"));
}

TEST_F(ImporterFiles, Opset6ReduceSumAxesBecomeInput) {
  std::string p = kData + "pytorch-operator/test_operator_reduced_sum/model.onnx";
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  mlir::Operation* r = only("ReduceSum");
  EXPECT_EQ(constInts(r, 1), (std::vector<int64_t>{2}));
  EXPECT_EQ(str(r->getResult(0).getType()), "tensor<1x2x4xf32>");
}

TEST_F(ImporterFiles, Opset6SplitSizesBecomeInput) {
  std::string p = kData + "pytorch-operator/test_operator_chunk/model.onnx";
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  mlir::Operation* s = only("Split");
  EXPECT_EQ(constInts(s, 1), (std::vector<int64_t>{2, 1}));
  ASSERT_EQ(s->getNumResults(), 2u);
  EXPECT_EQ(str(s->getResult(0).getType()), "tensor<2xf32>");
  EXPECT_EQ(str(s->getResult(1).getType()), "tensor<1xf32>");
  EXPECT_EQ(resultName(1), "2");
}

TEST_F(ImporterFiles, Opset6LegacyBroadcastAdd) {
  std::string p = kData + "pytorch-operator/test_operator_add_broadcast/model.onnx";
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  mlir::Operation* add = only("Add");
  EXPECT_FALSE(add->hasAttr("broadcast"));
  EXPECT_FALSE(add->hasAttr("axis"));
  EXPECT_EQ(str(add->getResult(0).getType()), "tensor<2x3xf64>");
}

TEST_F(ImporterFiles, Opset6PerChannelPReluSlopeGetsTrailingDims) {
  std::string p = kData + "pytorch-converted/test_PReLU_2d_multiparam/model.onnx";
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  mlir::Operation* pr = only("PRelu");
  EXPECT_EQ(str(pr->getOperand(1).getType()), "tensor<3x1x1xf32>");
  EXPECT_EQ(str(pr->getResult(0).getType()), "tensor<2x3x4x5xf32>");
}

TEST_F(ImporterFiles, Opset6BatchNormDropsIsTest) {
  std::string p = kData + "pytorch-converted/test_BatchNorm2d_eval/model.onnx";
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  mlir::Operation* bn = only("BatchNormalization");
  EXPECT_FALSE(bn->hasAttr("is_test"));
  EXPECT_EQ(main().getNumArguments(), 1u);  // scale/bias/mean/var are initializers
  EXPECT_EQ(str(bn->getResult(0).getType()), "tensor<2x3x6x6xf32>");
}

TEST_F(ImporterFiles, Opset6UnchangedOpsAreAccepted) {
  for (const char* t : {"node/test_elu", "node/test_selu_default", "node/test_softplus",
                        "node/test_globalaveragepool", "node/test_hardsigmoid"}) {
    std::string p = kData + t + "/model.onnx";
    if (!exists(p)) continue;
    EXPECT_TRUE(load(p)) << t;
  }
}

TEST_F(ImporterFiles, Opset6SoftmaxOnTheLastAxisStaysOneOp) {
  std::string p = kData + "pytorch-converted/test_log_softmax_dim3/model.onnx";
  REQUIRE_FILE(p);
  ASSERT_TRUE(load(p));
  EXPECT_EQ(opCounts(), (std::map<std::string, int>{{"LogSoftmax", 1}}));
  EXPECT_EQ(str(only("LogSoftmax")->getAttr("axis")), "3 : i64");
}

// ---- The shared PyTorch models (opset 13, dynamic batch N) ----

TEST_F(ImporterFiles, MnistCnn) {
  std::string p = kShared + "mnist_cnn/model.onnx";
  if (!exists(p)) GTEST_SKIP() << "shared models not present: " << p;
  ASSERT_TRUE(load(p));
  EXPECT_EQ(opCounts(), (std::map<std::string, int>{{"Conv", 2},
                                                    {"Relu", 3},
                                                    {"MaxPool", 1},
                                                    {"Flatten", 1},
                                                    {"Gemm", 2},
                                                    {"Softmax", 1},
                                                    {"Constant", 8}}));
  ASSERT_EQ(main().getNumArguments(), 1u);
  EXPECT_EQ(str(main().getArgument(0).getType()), "tensor<?x1x28x28xf32>");
  EXPECT_EQ(argName(0), "input");
  EXPECT_EQ(dimParams(0), (std::vector<std::string>{"N", "", "", ""}));
  EXPECT_EQ(str(main().getResultTypes()[0]), "tensor<?x10xf32>");
  EXPECT_EQ(resultName(0), "output");
  EXPECT_EQ(str(only("Flatten")->getResult(0).getType()), "tensor<?x9216xf32>");
  auto loc = llvm::dyn_cast<mlir::NameLoc>(only("MaxPool")->getLoc());
  ASSERT_TRUE(loc);
  EXPECT_EQ(loc.getName().str(), "/net/net.4/MaxPool");
}

TEST_F(ImporterFiles, MnistCnnKeepBatchNorm) {
  std::string p = kShared + "mnist_cnn_bn_keepbn/model.onnx";
  if (!exists(p)) GTEST_SKIP() << "shared models not present: " << p;
  ASSERT_TRUE(load(p));
  EXPECT_EQ(opCounts()["BatchNormalization"], 2);
  EXPECT_EQ(opCounts()["Conv"], 2);
}

TEST_F(ImporterFiles, Resnet18) {
  std::string p = kShared + "resnet18/model.onnx";
  if (!exists(p)) GTEST_SKIP() << "shared models not present: " << p;
  ASSERT_TRUE(load(p));
  auto counts = opCounts();
  EXPECT_EQ(counts["Conv"], 20);
  EXPECT_EQ(counts["Add"], 8);
  EXPECT_EQ(counts["GlobalAveragePool"], 1);
  EXPECT_EQ(counts["Gemm"], 1);
  EXPECT_EQ(str(main().getResultTypes()[0]), "tensor<?x1000xf32>");
}

// The importer's IR goes through the whole pipeline and the runtime and reproduces PyTorch's
// outputs for the shared test data (batch 1 and 32).
TEST_F(ImporterFiles, MnistCnnRunsLikePyTorch) {
  std::string dir = kShared + "mnist_cnn/";
  if (!exists(dir + "model.onnx")) GTEST_SKIP() << "shared models not present: " << dir;
  for (const char* set : {"test_data_set_0", "test_data_set_1"}) {
    Tensor input, expected;
    ASSERT_TRUE(readTensorFile(dir + set + "/input_0.pb", &input).isOk());
    ASSERT_TRUE(readTensorFile(dir + set + "/output_0.pb", &expected).isOk());
    ASSERT_TRUE(load(dir + "model.onnx"));
    CompileOptions copts;
    copts.dimBindings["N"] = input.dim(0);
    CompileResult compiled;
    std::string diag;
    mlir::ScopedDiagnosticHandler h(&ctx, [&](mlir::Diagnostic& d) {
      diag += d.str() + "\n";
      return mlir::success();
    });
    ASSERT_TRUE(mlir::succeeded(compileModule(*module, copts, &compiled))) << diag;
    std::unique_ptr<Executable> exe;
    Status st = Executable::load(compiled.plan, LoadOptions{}, &exe);
    ASSERT_TRUE(st.isOk()) << st.message();
    std::vector<Tensor> outs;
    st = exe->run({input}, &outs);
    ASSERT_TRUE(st.isOk()) << st.message();
    ASSERT_EQ(outs.size(), 1u);
    ASSERT_EQ(outs[0].shape(), expected.shape());
    double maxErr = 0;
    for (int64_t i = 0; i < expected.numel(); ++i)
      maxErr = std::max(maxErr, (double)std::fabs(outs[0].data<float>()[i] - expected.data<float>()[i]));
    EXPECT_LT(maxErr, 1e-5) << set;
  }
}

// Older-opset models whose import rewrites nodes (attributes to inputs, legacy broadcast, per-
// channel PRelu slopes, dropped attributes) compute what the reference outputs say.
TEST_F(ImporterFiles, RewrittenLegacyModelsMatchTheirReferenceOutputs) {
  const char* dirs[] = {
      "pytorch-operator/test_operator_index",     "pytorch-operator/test_operator_pad",
      "pytorch-operator/test_operator_clip",      "pytorch-operator/test_operator_reduced_sum",
      "pytorch-operator/test_operator_chunk",     "pytorch-operator/test_operator_add_broadcast",
      "pytorch-converted/test_PReLU_2d_multiparam", "pytorch-converted/test_BatchNorm2d_eval",
      "pytorch-converted/test_Softmax",           "node/test_unsqueeze_axis_3",
      "node/test_dropout_default_old",            "node/test_elu"};
  int checked = 0;
  for (const char* d : dirs) {
    SCOPED_TRACE(d);
    std::string dir = kData + d + "/";
    if (!exists(dir + "model.onnx")) continue;
    ASSERT_TRUE(load(dir + "model.onnx"));
    CompileResult compiled;
    std::string diag;
    mlir::ScopedDiagnosticHandler h(&ctx, [&](mlir::Diagnostic& dg) {
      diag += dg.str() + "\n";
      return mlir::success();
    });
    ASSERT_TRUE(mlir::succeeded(compileModule(*module, CompileOptions{}, &compiled))) << diag;
    std::unique_ptr<Executable> exe;
    Status st = Executable::load(compiled.plan, LoadOptions{}, &exe);
    ASSERT_TRUE(st.isOk()) << st.message();
    std::vector<Tensor> inputs, expected;
    for (size_t i = 0; i < exe->inputNames().size(); ++i) {
      Tensor t;
      ASSERT_TRUE(readTensorFile(dir + "test_data_set_0/input_" + std::to_string(i) + ".pb", &t).isOk());
      inputs.push_back(t);
    }
    for (size_t i = 0; i < exe->outputNames().size(); ++i) {
      Tensor t;
      ASSERT_TRUE(readTensorFile(dir + "test_data_set_0/output_" + std::to_string(i) + ".pb", &t).isOk());
      expected.push_back(t);
    }
    std::vector<Tensor> outs;
    st = exe->run(inputs, &outs);
    ASSERT_TRUE(st.isOk()) << st.message();
    ASSERT_EQ(outs.size(), expected.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      ASSERT_EQ(outs[k].shape(), expected[k].shape()) << "output " << k;
      ASSERT_EQ(outs[k].dtype(), expected[k].dtype()) << "output " << k;
      double maxErr = 0;
      for (int64_t i = 0; i < expected[k].numel(); ++i) {
        double a = outs[k].dtype() == DType::F64 ? outs[k].data<double>()[i] : outs[k].data<float>()[i];
        double b = expected[k].dtype() == DType::F64 ? expected[k].data<double>()[i]
                                                     : expected[k].data<float>()[i];
        maxErr = std::max(maxErr, std::fabs(a - b));
      }
      EXPECT_LT(maxErr, 1e-5) << "output " << k;
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "ONNX test data not installed under " << kData;
}

}  // namespace
}  // namespace tandem

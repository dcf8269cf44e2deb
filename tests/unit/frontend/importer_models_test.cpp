// ONNX importer on models built in memory: every error message, opset normalisations, graph
// structure (sorting, skipped inputs, outputs that are inputs), and TensorProto conversion.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <limits>
#include <map>
#include <string>

#include "compiler/Compiler.h"
#include "compiler/OpBuilding.h"
#include "frontend/NewerOpsets.h"
#include "frontend/OnnxImporter.h"
#include "frontend/OnnxTensor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "runtime/Executable.h"
#include "runtime/Half.h"
#include "runtime/Trace.h"
#include "runtime/Tuning.h"
#include "tests/unit/onnx_model_builder.h"

namespace tandem {
namespace {

using namespace testing_onnx;  // Model, intAttr, ... (tests/unit/onnx_model_builder.h)

class ImporterModels : public ::testing::Test {
 protected:
  void SetUp() override { loadTandemDialects(&ctx); }

  /// Imports; returns the error ("" on success).
  std::string import(const Model& model, const ImportOptions& opts = {}) {
    std::string err;
    module = importOnnxBytes(&ctx, model.bytes(), "m.onnx", opts, &err);
    return module ? "" : err;
  }
  mlir::func::FuncOp main() { return module->lookupSymbol<mlir::func::FuncOp>("main"); }
  std::vector<std::string> opSequence() {
    std::vector<std::string> seq;
    main().walk([&](mlir::Operation* op) {
      if (llvm::isa<mlir::func::FuncOp, mlir::func::ReturnOp>(op)) return;
      std::string t = onnxOpType(op);
      seq.push_back(t.empty() ? op->getName().getStringRef().str() : t);
    });
    return seq;
  }
  mlir::Operation* first(const std::string& type) {
    mlir::Operation* found = nullptr;
    main().walk([&](mlir::Operation* op) {
      if (!found && onnxOpType(op) == type) found = op;
    });
    return found;
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

std::string str(mlir::Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return os.str();
}

Model addRelu(int64_t opset = 13) {
  Model m(opset);
  m.input("x", {2, 3}).floatInit("b", {2, 3}, {1, 2, 3, 4, 5, 6});
  m.node("Add", {"x", "b"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"y"}, "relu");
  m.output("y");
  return m;
}

// An ONNX function body's shape arithmetic (Shape -> Size -> Sub -> Unsqueeze -> ConstantOfShape)
// folds while the graph is built, so the Reshape reading it gets a static result type.
TEST_F(ImporterModels, ShapeSubgraphsFoldWhileBuilding) {
  Model m(13);
  m.input("x", {2, 3});
  for (auto [name, v] : {std::pair<const char*, int64_t>{"one", 1}, {"zero", 0}}) {
    auto* t = m.g()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_int64_data(v);
    if (std::string(name) == "zero") t->add_dims(1);
  }
  m.node("Shape", {"x"}, {"s"});
  m.node("Size", {"s"}, {"rank"});
  m.node("Sub", {"rank", "one"}, {"k"});
  m.node("Unsqueeze", {"k", "zero"}, {"k1"});
  onnx::NodeProto* cos = m.node("ConstantOfShape", {"k1"}, {"shape"});
  auto* a = cos->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_int64_data(6);
  m.node("Reshape", {"x", "shape"}, {"y"});
  m.output("y");
  ASSERT_EQ(import(m), "");
  // Only constants (the folded values and their now unread operands, which canonicalize's DCE
  // erases) and the Reshape remain.
  std::vector<std::string> seq = opSequence();
  EXPECT_EQ(std::count(seq.begin(), seq.end(), "Constant"), (long)seq.size() - 1);
  EXPECT_EQ(seq.back(), "Reshape");
  EXPECT_EQ(str(first("Reshape")->getResult(0).getType()), "tensor<6xf32>");
}

// ---- Errors: one line each, "<source>: [node 'name' (Op): ]reason" ----

TEST_F(ImporterModels, TruncatedProtobuf) {
  Model m = addRelu();
  std::vector<float> big(1000, 1.0f);
  m.floatInit("big", {1000}, big);
  std::string b = m.bytes();
  std::string err;
  EXPECT_FALSE(importOnnxBytes(&ctx, b.substr(0, b.size() / 2), "model.onnx", {}, &err));
  EXPECT_EQ(err, "model.onnx: not a valid ONNX model (protobuf parse failed)");
}

TEST_F(ImporterModels, CorruptBytes) {
  std::string err;
  EXPECT_FALSE(importOnnxBytes(&ctx, std::string("\x0f\x12\x99garbage", 10), "c.onnx", {}, &err));
  EXPECT_EQ(err, "c.onnx: not a valid ONNX model (protobuf parse failed)");
}

TEST_F(ImporterModels, MissingFile) {
  std::string err;
  EXPECT_FALSE(importOnnxFile(&ctx, "/nonexistent/x.onnx", {}, &err));
  EXPECT_EQ(err, "/nonexistent/x.onnx: cannot open ONNX model file (No such file or directory)");
}

TEST_F(ImporterModels, NoGraph) {
  Model m;
  m.m.clear_graph();
  EXPECT_EQ(import(m), "m.onnx: not a valid ONNX model (no graph)");
}

TEST_F(ImporterModels, UnknownOp) {
  Model m;
  m.input("x", {2});
  m.node("FooBar", {"x"}, {"y"}, "foo");
  m.output("y");
  EXPECT_EQ(import(m), "m.onnx: node 'foo' (FooBar): unsupported op type 'FooBar'");
}

TEST_F(ImporterModels, UnnamedNodesAreLabelledByTypeAndIndex) {
  Model m;
  m.input("x", {2});
  m.node("Relu", {"x"}, {"r"});
  m.node("FooBar", {"r"}, {"y"});
  m.output("y");
  EXPECT_EQ(import(m), "m.onnx: node 'FooBar_1' (FooBar): unsupported op type 'FooBar'");
}

TEST_F(ImporterModels, ForeignDomain) {
  Model m;
  m.input("x", {2});
  m.node("Relu", {"x"}, {"y"}, "r")->set_domain("ai.example");
  m.output("y");
  EXPECT_EQ(import(m), "m.onnx: node 'r' (Relu): op domain 'ai.example' is not supported "
                       "(only the default ONNX domain, ai.onnx.preview.training and "
                       "com.microsoft's MatMulNBits are)");
}

// Of ONNX Runtime's contrib ops only MatMulNBits is taken, and only where the model imports
// com.microsoft-1 (its conversion is checked end to end: tests/e2e/small_models.sh matmul_nbits).
TEST_F(ImporterModels, MicrosoftDomainOnlyMatMulNBits) {
  Model m;
  m.input("x", {2});
  m.node("FusedMatMul", {"x", "x"}, {"y"}, "f")->set_domain("com.microsoft");
  m.output("y");
  EXPECT_EQ(import(m), "m.onnx: node 'f' (FusedMatMul): unsupported op type 'FusedMatMul' of "
                       "domain com.microsoft (of ONNX Runtime's contrib ops only MatMulNBits is "
                       "supported)");
  Model n;
  n.input("x", {2, 4});
  n.node("MatMulNBits", {"x", "x", "x"}, {"y"}, "q")->set_domain("com.microsoft");
  n.output("y");
  EXPECT_EQ(import(n), "m.onnx: node 'q' (MatMulNBits): MatMulNBits needs the model to import "
                       "version 1 of domain com.microsoft (opset_import)");
  auto* o = n.m.add_opset_import();
  o->set_domain("com.microsoft");
  o->set_version(1);
  EXPECT_EQ(import(n), "m.onnx: node 'q' (MatMulNBits): MatMulNBits needs attributes K, N and "
                       "block_size >= 1");
}

// MatMulNBits' g_idx, bits and dtypes: x [2, 8] x W [2, 8] in 4-bit blocks of 4 (B 2 x 2 x 2
// bytes, scales 2 x 2); each g_idx refused names what is wrong.
TEST_F(ImporterModels, MatMulNBitsGroupsBitsAndDtypes) {
  auto model = [](std::vector<int32_t> gIdx, int64_t bits, int32_t scaleType) {
    Model m;
    auto* o = m.m.add_opset_import();
    o->set_domain("com.microsoft");
    o->set_version(1);
    m.input("x", {2, 8});
    auto* b = m.g()->add_initializer();
    b->set_name("B");
    b->set_data_type(onnx::TensorProto::UINT8);
    for (int64_t d : {2, 2, 2}) b->add_dims(d);
    b->set_raw_data(std::string(8, '\x21'));
    auto* sc = m.g()->add_initializer();
    sc->set_name("s");
    sc->set_data_type(scaleType);
    sc->add_dims(4);
    if (scaleType == onnx::TensorProto::FLOAT)
      for (int i = 0; i < 4; ++i) sc->add_float_data(0.5f);
    else
      for (int i = 0; i < 4; ++i) sc->add_int32_data(0x3800);  // f16 0.5
    std::vector<std::string> ins = {"x", "B", "s"};
    if (!gIdx.empty()) {
      auto* g = m.g()->add_initializer();
      g->set_name("g");
      g->set_data_type(onnx::TensorProto::INT32);
      g->add_dims((int64_t)gIdx.size());
      for (int32_t v : gIdx) g->add_int32_data(v);
      ins = {"x", "B", "s", "", "g"};
    }
    auto* n = m.node("MatMulNBits", ins, {"y"}, "q");
    n->set_domain("com.microsoft");
    intAttr(n, "K", 8);
    intAttr(n, "N", 2);
    intAttr(n, "bits", bits);
    intAttr(n, "block_size", bits == 4 ? 4 : 8);
    m.output("y");
    return m;
  };
  const int32_t f32 = onnx::TensorProto::FLOAT;
  auto ops = [&] {
    std::vector<std::string> seq;
    for (const std::string& t : opSequence())
      if (t != "Constant") seq.push_back(t);
    return seq;
  };
  // Act-order: rows sorted by group, A's columns through a Gather (numbers: e2e
  // matmul_nbits_more).
  ASSERT_EQ(import(model({1, 0, 0, 1, 1, 0, 1, 0}, 4, f32)), "");
  EXPECT_EQ(ops(), (std::vector<std::string>{"Gather", "DequantizeMatMul"}));
  // g_idx of the blocks as they are: nothing to sort.
  ASSERT_EQ(import(model({0, 0, 0, 0, 1, 1, 1, 1}, 4, f32)), "");
  EXPECT_EQ(ops(), (std::vector<std::string>{"DequantizeMatMul"}));
  EXPECT_NE(import(model({0, 0, 0, 1, 1, 1, 1, 1}, 4, f32))
                .find("g_idx puts 3 rows in group 0 where a block holds 4 (groups of other sizes "
                      "are not supported)"),
            std::string::npos);
  EXPECT_NE(import(model({0, 0, 0, 0, 1, 1, 1, 2}, 4, f32)).find("g_idx[7] = 2 is not a block index (0 to 1)"),
            std::string::npos);
  EXPECT_NE(import(model({0, 0, 1, 1}, 4, f32)).find("g_idx must be a constant int32 of K = 8 values"),
            std::string::npos);
  EXPECT_NE(import(model({}, 3, f32)).find("bits=3 is not supported (supported: 2, 4, 8)"), std::string::npos);
  // f16 scales go with f16 A only.
  EXPECT_NE(import(model({}, 4, onnx::TensorProto::FLOAT16))
                .find("scales must be a constant f32 (A's dtype) of N x blocks = 4 values"),
            std::string::npos);
}

// test_adam's form: the model imports only ai.onnx.preview.training-1, no default domain.
Model previewTrainingAdagrad(int64_t version = 1) {
  Model m;
  m.m.mutable_opset_import(0)->set_domain("ai.onnx.preview.training");
  m.m.mutable_opset_import(0)->set_version(version);
  m.input("R", {}).input("T", {}, onnx::TensorProto::INT64).input("X", {2}).input("G", {2});
  m.input("H", {2});
  onnx::NodeProto* n = m.node("Adagrad", {"R", "T", "X", "G", "H"}, {"X_new", "H_new"}, "ada");
  n->set_domain("ai.onnx.preview.training");
  floatAttr(n, "epsilon", 1e-5f);
  m.output("X_new").output("H_new");
  return m;
}

TEST_F(ImporterModels, PreviewTrainingDomainOptimizer) {
  ASSERT_EQ(import(previewTrainingAdagrad()), "");
  EXPECT_EQ(opSequence(), (std::vector<std::string>{"Adagrad"}));
  EXPECT_EQ(first("Adagrad")->getNumResults(), 2u);
  EXPECT_EQ(str(first("Adagrad")->getResult(1).getType()), "tensor<2xf32>");
}

TEST_F(ImporterModels, PreviewTrainingDomainOtherVersion) {
  EXPECT_EQ(import(previewTrainingAdagrad(2)),
            "m.onnx: node 'ada' (Adagrad): domain ai.onnx.preview.training version 2 is not "
            "supported (supported: 1)");
}

TEST_F(ImporterModels, PreviewTrainingDomainNotImported) {
  Model m = previewTrainingAdagrad();
  m.m.mutable_opset_import(0)->set_domain("");
  m.m.mutable_opset_import(0)->set_version(13);
  EXPECT_EQ(import(m), "m.onnx: node 'ada' (Adagrad): the model imports no opset of domain "
                       "ai.onnx.preview.training (opset_import)");
}

TEST_F(ImporterModels, PreviewTrainingOpInTheDefaultDomain) {
  Model m = previewTrainingAdagrad();
  m.m.mutable_opset_import(0)->set_domain("");
  m.m.mutable_opset_import(0)->set_version(13);
  m.g()->mutable_node(0)->clear_domain();
  EXPECT_EQ(import(m), "m.onnx: node 'ada' (Adagrad): unsupported op type 'Adagrad' (it is an op "
                       "of domain ai.onnx.preview.training)");
}

TEST_F(ImporterModels, DefaultOpInThePreviewTrainingDomain) {
  Model m = previewTrainingAdagrad();
  m.node("Relu", {"X"}, {"y"}, "r")->set_domain("ai.onnx.preview.training");
  EXPECT_EQ(import(m), "m.onnx: node 'r' (Relu): unsupported op type 'Relu' of domain "
                       "ai.onnx.preview.training (supported: Adagrad, Adam, Gradient, Momentum)");
}

// The backward ops autodiff builds are Tandem's own: no ONNX model may name them.
TEST_F(ImporterModels, TandemDomainOpIsNotImported) {
  Model m;
  m.input("dy", {}).input("lp", {2, 3}).input("y", {2}, onnx::TensorProto::INT64);
  m.node("SoftmaxCrossEntropyLossGrad", {"dy", "lp", "y"}, {"dx"}, "g");
  m.output("dx");
  EXPECT_EQ(import(m), "m.onnx: node 'g' (SoftmaxCrossEntropyLossGrad): unsupported op type "
                       "'SoftmaxCrossEntropyLossGrad'");
}

TEST_F(ImporterModels, UnusedForeignDomainImportIsFine) {
  Model m = addRelu();
  auto* o = m.m.add_opset_import();
  o->set_domain("ai.onnx.ml");
  o->set_version(3);
  EXPECT_EQ(import(m), "");
}

TEST_F(ImporterModels, OpsetsUpTo25) {
  for (int64_t opset : {18, 21, 25}) EXPECT_EQ(import(addRelu(opset)), "") << opset;
  EXPECT_EQ(import(addRelu(26)), "m.onnx: unsupported opset 26 (supported: 7–25)");
}

onnx::NodeProto newerNode(const std::string& op) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name("n");
  n.add_input("x");
  n.add_output("y");
  return n;
}
void setInt(onnx::NodeProto* n, const char* name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// The op versions of opsets 18-25 (onnx/defs/operator_sets.h) and what the importer takes.
TEST(NewerOpsets, VersionsInForce) {
  EXPECT_EQ(newerOpVersion("ReduceMean", 18), 18);
  EXPECT_EQ(newerOpVersion("ReduceMax", 19), 18);
  EXPECT_EQ(newerOpVersion("ReduceMax", 20), 20);
  EXPECT_EQ(newerOpVersion("Cast", 22), 21);
  EXPECT_EQ(newerOpVersion("Cast", 25), 25);
  EXPECT_EQ(newerOpVersion("Relu", 25), 0);  // unchanged since opset 14
  EXPECT_EQ(newerOpVersion("Gelu", 20), 0);  // new at 20: nothing older to differ from
  EXPECT_EQ(newerOpVersion("DFT", 19), 0);
  EXPECT_EQ(newerOpVersion("DFT", 20), 20);
}

TEST(NewerOpsets, NewAttributesOnlyAtTheirDefaults) {
  onnx::NodeProto resize = newerNode("Resize");
  EXPECT_EQ(checkNewerOpsetNode(resize, 18), "");
  setInt(&resize, "antialias", 1);  // computed (runtime/cpu/ref/Image.cpp)
  EXPECT_EQ(checkNewerOpsetNode(resize, 19), "");
  onnx::AttributeProto* policy = resize.add_attribute();
  policy->set_name("keep_aspect_ratio_policy");
  policy->set_type(onnx::AttributeProto::STRING);
  policy->set_s("stretch");
  EXPECT_EQ(checkNewerOpsetNode(resize, 19), "");
  policy->set_s("not_larger");  // computed at import (ImporterModels.ResizeAspectRatioPolicy)
  EXPECT_EQ(checkNewerOpsetNode(resize, 19), "");
  EXPECT_EQ(attributesAddedAfter17("Resize", 19),
            std::vector<std::string>{"keep_aspect_ratio_policy"});
  // The same attribute at an opset before it existed is not looked at (the op rejects it).
  onnx::NodeProto q = newerNode("QuantizeLinear");
  setInt(&q, "precision", 1);
  EXPECT_EQ(checkNewerOpsetNode(q, 21), "");
  EXPECT_NE(checkNewerOpsetNode(q, 23).find("QuantizeLinear-23: attribute precision 1"),
            std::string::npos);
  // block_size (21) is computed (blocked scales: runtime/cpu/ref/Quantize.cpp).
  onnx::NodeProto blockedQ = newerNode("QuantizeLinear");
  setInt(&blockedQ, "block_size", 32);
  EXPECT_EQ(checkNewerOpsetNode(blockedQ, 21), "");
  onnx::NodeProto out = newerNode("QuantizeLinear");
  setInt(&out, "output_dtype", onnx::TensorProto::INT8);
  EXPECT_NE(checkNewerOpsetNode(out, 21).find("output_dtype 3 without a y_zero_point"),
            std::string::npos);
  out.add_input("scale");
  out.add_input("zp");
  EXPECT_EQ(checkNewerOpsetNode(out, 21), "");
  onnx::NodeProto cast = newerNode("Cast");
  setInt(&cast, "saturate", 0);  // float8 only: any value
  EXPECT_EQ(checkNewerOpsetNode(cast, 19), "");
  EXPECT_EQ(attributesAddedAfter17("Cast", 19), std::vector<std::string>{"saturate"});
  EXPECT_EQ(attributesAddedAfter17("Cast", 17), std::vector<std::string>{});
}

// Resize-18's keep_aspect_ratio_policy: one scale over the axes, the output rounded from it.
// x [1,1,5,6], sizes [3,3] on axes [2,3]: not_larger takes min(3/5, 3/6) = 0.5 and gives
// round(0.5 * [5, 6]) = [3, 3] (floor would give 2 rows); not_smaller takes 0.6: [3, 4].
TEST_F(ImporterModels, ResizeAspectRatioPolicy) {
  auto model = [](const std::string& policy, std::vector<int64_t> dims, bool scalesToo) {
    Model m(19);
    m.input("x", dims);
    auto* t = m.g()->add_initializer();
    t->set_name("sz");
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(2);
    t->add_int64_data(3);
    t->add_int64_data(3);
    m.floatInit("sc", {2}, {0.5f, 0.5f});
    auto* n = m.node("Resize", {"x", "", scalesToo ? "sc" : "", "sz"}, {"y"}, "resize");
    stringAttr(n, "mode", "linear");
    intsAttr(n, "axes", {2, 3});
    stringAttr(n, "keep_aspect_ratio_policy", policy);
    m.output("y");
    return m;
  };
  ASSERT_EQ(import(model("not_larger", {1, 1, 5, 6}, false)), "");
  mlir::Operation* r = first("Resize");
  ASSERT_TRUE(r);
  EXPECT_EQ(str(r->getResult(0).getType()), "tensor<1x1x3x3xf32>");
  // The coordinates map by the common scale, carried as f64 scales beside the sizes.
  EXPECT_EQ(str(r->getOperand(2).getType()), "tensor<4xf64>");
  ASSERT_EQ(import(model("not_smaller", {1, 1, 5, 6}, false)), "");
  EXPECT_EQ(str(first("Resize")->getResult(0).getType()), "tensor<1x1x3x4xf32>");
  ASSERT_EQ(import(model("stretch", {1, 1, 5, 6}, false)), "");
  EXPECT_EQ(str(first("Resize")->getResult(0).getType()), "tensor<1x1x3x3xf32>");
  EXPECT_NE(import(model("fit", {1, 1, 5, 6}, false))
                .find("keep_aspect_ratio_policy 'fit' is not one of stretch, not_larger, not_smaller"),
            std::string::npos);
  EXPECT_NE(import(model("not_larger", {1, 1, -1, 6}, false))
                .find("keep_aspect_ratio_policy 'not_larger' needs X's dims on the axes to be known"),
            std::string::npos);
  EXPECT_NE(import(model("not_larger", {1, 1, 5, 6}, true))
                .find("exactly one of input 2 (scales) and input 3 (sizes) may be given"),
            std::string::npos);
}

TEST_F(ImporterModels, AiOnnxDomainNameIsTheDefault) {
  Model m = addRelu();
  m.m.mutable_opset_import(0)->set_domain("ai.onnx");
  EXPECT_EQ(import(m), "");
}

TEST_F(ImporterModels, Opset6OpNotYetDefined) {
  Model m(6);
  m.input("x", {2});
  m.node("Erf", {"x"}, {"y"}, "e");
  m.output("y");
  EXPECT_EQ(import(m), "m.onnx: node 'e' (Erf): Erf is not defined in opset 6");
}

TEST_F(ImporterModels, MissingInitializer) {
  Model m;
  m.input("x", {2, 3});
  m.node("Add", {"x", "weight"}, {"y"}, "add");
  m.output("y");
  EXPECT_EQ(import(m), "m.onnx: node 'add' (Add): input 'weight' is not produced by any node, "
                       "graph input or initializer (missing initializer?)");
}

TEST_F(ImporterModels, Cycle) {
  Model m;
  m.input("x", {2, 3});
  m.node("Relu", {"x"}, {"r"}, "first");
  m.node("Add", {"r", "c"}, {"a"}, "n1");
  m.node("Relu", {"a"}, {"c"}, "n2");
  m.output("a");
  EXPECT_EQ(import(m), "m.onnx: node 'n1' (Add): graph has a cycle (n1 -> n2 -> n1)");
}

TEST_F(ImporterModels, ShapeMismatchNamesNodeAndShapes) {
  Model m;
  m.input("x", {2, 3}).input("y", {4, 5});
  m.node("Add", {"x", "y"}, {"z"}, "add");
  m.output("z");
  std::string err = import(m);
  EXPECT_EQ(err.rfind("m.onnx: node 'add' (Add): ", 0), 0u) << err;
  EXPECT_NE(err.find("[2,3]"), std::string::npos) << err;
  EXPECT_NE(err.find("[4,5]"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos);
}

TEST_F(ImporterModels, DuplicateProducer) {
  Model m;
  m.input("x", {2});
  m.node("Relu", {"x"}, {"y"}, "a");
  m.node("Neg", {"x"}, {"y"}, "b");
  m.output("y");
  EXPECT_EQ(import(m), "m.onnx: node 'b' (Neg): output 'y' is also produced by node 'a' (Relu) "
                       "(a value must have one producer)");
}

TEST_F(ImporterModels, GraphOutputNotProduced) {
  Model m;
  m.input("x", {2});
  m.node("Relu", {"x"}, {"y"}, "a");
  m.output("nope");
  EXPECT_EQ(import(m), "m.onnx: graph output 'nope' is not produced by any node, graph input or "
                       "initializer");
}

TEST_F(ImporterModels, InputWithoutShape) {
  Model m;
  auto* v = m.g()->add_input();
  v->set_name("x");
  v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  m.node("Relu", {"x"}, {"y"}, "a");
  m.output("y");
  EXPECT_EQ(import(m), "m.onnx: graph input 'x' has no shape (unknown rank is not supported; give "
                       "the model a shape)");
}

TEST_F(ImporterModels, UnsupportedInputDType) {
  Model m;
  m.input("x", {2}, onnx::TensorProto::COMPLEX64);
  m.node("Relu", {"x"}, {"y"}, "a");
  m.output("y");
  EXPECT_EQ(import(m), "m.onnx: graph input 'x' has element type COMPLEX64, which is not supported");
}

TEST_F(ImporterModels, ExternalDataInitializer) {
  Model m;
  m.input("x", {2});
  auto* t = m.g()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(2);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = t->add_external_data();
  e->set_key("location");
  e->set_value("weights.bin");
  m.node("Add", {"x", "w"}, {"y"}, "a");
  m.output("y");
  // From bytes there is no directory to read weights.bin from (a file: external_data_test).
  EXPECT_EQ(import(m), "m.onnx: tensor 'w': uses external data (data_location=EXTERNAL), which is "
                       "read only when the model is compiled from its file (its location is "
                       "relative to the model's directory)");
}

TEST_F(ImporterModels, UnsupportedAttributeKind) {
  Model m;
  m.input("x", {2});
  auto* n = m.node("Relu", {"x"}, {"y"}, "a");
  auto* a = n->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("sub");
  m.output("y");
  EXPECT_EQ(import(m), "m.onnx: node 'a' (Relu): attribute 'body' of type GRAPH is not supported");
}

TEST_F(ImporterModels, StrayAttributeIsAnError) {
  Model m;
  m.input("x", {2});
  intAttr(m.node("Relu", {"x"}, {"y"}, "a"), "bogus", 1);
  m.output("y");
  std::string err = import(m);
  EXPECT_EQ(err.rfind("m.onnx: node 'a' (Relu): ", 0), 0u) << err;
  EXPECT_NE(err.find("bogus"), std::string::npos) << err;
}

TEST_F(ImporterModels, BatchNormSpatialZeroIsRejected) {
  Model m(7);
  m.input("x", {1, 2, 2, 2});
  for (const char* n : {"s", "b", "mu", "var"}) m.floatInit(n, {2}, {1, 1});
  intAttr(m.node("BatchNormalization", {"x", "s", "b", "mu", "var"}, {"y"}, "bn"), "spatial", 0);
  m.output("y");
  EXPECT_EQ(import(m), "m.onnx: node 'bn' (BatchNormalization): spatial=0 (per-activation "
                       "statistics) is not supported");
}

// ---- Structure ----

TEST_F(ImporterModels, NodesOutOfOrderAreSorted) {
  Model m;
  m.input("x", {2});
  m.node("Neg", {"r"}, {"y"}, "second");
  m.node("Relu", {"x"}, {"r"}, "first");
  m.output("y");
  ASSERT_EQ(import(m), "");
  EXPECT_EQ(opSequence(), (std::vector<std::string>{"Relu", "Neg"}));
}

TEST_F(ImporterModels, OutputsMayBeInputsOrInitializers) {
  Model m;
  m.input("x", {2}).floatInit("w", {2}, {7, 8});
  m.node("Relu", {"x"}, {"y"}, "r");
  m.output("y").output("x").output("w");
  ASSERT_EQ(import(m), "");
  auto f = main();
  ASSERT_EQ(f.getNumResults(), 3u);
  auto ret = llvm::cast<mlir::func::ReturnOp>(f.getBody().front().getTerminator());
  EXPECT_EQ(ret.getOperand(1), f.getArgument(0));
  Tensor w;
  ASSERT_TRUE(getConstantValue(ret.getOperand(2), &w));
  EXPECT_EQ(w.data<float>()[1], 8.0f);
  EXPECT_EQ(f.getResultAttrOfType<mlir::StringAttr>(2, "tandem.name").str(), "w");
}

TEST_F(ImporterModels, InitializerListedAsInputIsAConstant) {
  Model m;
  m.input("x", {2}).input("w", {2}).floatInit("w", {2}, {1, 2});
  m.node("Add", {"x", "w"}, {"y"}, "a");
  m.output("y");
  ASSERT_EQ(import(m), "");
  EXPECT_EQ(main().getNumArguments(), 1u);
  Tensor w;
  EXPECT_TRUE(getConstantValue(first("Add")->getOperand(1), &w));
}

TEST_F(ImporterModels, SymbolicAndUnknownDims) {
  Model m;
  m.input("x", {-1, -1, 3}, onnx::TensorProto::FLOAT, {"batch", "", ""});
  m.node("Relu", {"x"}, {"y"}, "r");
  m.output("y");
  ASSERT_EQ(import(m), "");
  EXPECT_EQ(str(main().getArgument(0).getType()), "tensor<?x?x3xf32>");
  auto params = main().getArgAttrOfType<mlir::ArrayAttr>(0, "tandem.dim_params");
  ASSERT_TRUE(params);
  ASSERT_EQ(params.size(), 3u);
  EXPECT_EQ(llvm::cast<mlir::StringAttr>(params[0]).str(), "batch");
  EXPECT_EQ(llvm::cast<mlir::StringAttr>(params[1]).str(), "");  // neither value nor param
}

// Clip-6's min/max attributes become constants of x's dtype, f16 included (rounded to the
// nearest half, not left unset).
TEST_F(ImporterModels, Clip6BoundsOfAnF16Input) {
  Model m(6);
  m.input("x", {4}, onnx::TensorProto::FLOAT16);
  onnx::NodeProto* n = m.node("Clip", {"x"}, {"y"}, "c");
  floatAttr(n, "min", -0.5f);
  floatAttr(n, "max", 2.5f);
  m.output("y");
  ASSERT_EQ(import(m), "");
  mlir::Operation* clip = first("Clip");
  ASSERT_EQ(clip->getNumOperands(), 3u);
  for (auto [i, want] : {std::pair<unsigned, float>{1, -0.5f}, {2, 2.5f}}) {
    Tensor t;
    ASSERT_TRUE(getConstantValue(clip->getOperand(i), &t)) << i;
    ASSERT_EQ(t.dtype(), DType::F16);
    EXPECT_EQ(halfToFloat(t.data<uint16_t>()[0]), want) << i;
  }
}

TEST_F(ImporterModels, SkippedOptionalInputBecomesNone) {
  Model m;
  m.input("x", {4}).floatInit("hi", {}, {6});
  m.node("Clip", {"x", "", "hi"}, {"y"}, "c");
  m.output("y");
  ASSERT_EQ(import(m), "");
  mlir::Operation* clip = first("Clip");
  ASSERT_EQ(clip->getNumOperands(), 3u);
  EXPECT_EQ(clip->getOperand(1).getDefiningOp()->getName().getStringRef(), "tandem.none");
}

TEST_F(ImporterModels, DropoutMaskOutput) {
  Model m;
  m.input("x", {4});
  m.node("Dropout", {"x"}, {"y", "mask"}, "d");
  m.output("y").output("mask");
  ASSERT_EQ(import(m), "");
  EXPECT_EQ(str(main().getResultTypes()[1]), "tensor<4xi1>");
}

TEST_F(ImporterModels, Dropout7MaskHasTheInputDType) {
  Model m(7);
  m.input("x", {4});
  floatAttr(m.node("Dropout", {"x"}, {"y", "mask"}, "d"), "ratio", 0.3f);
  m.output("y").output("mask");
  ASSERT_EQ(import(m), "");
  EXPECT_EQ(str(main().getResultTypes()[1]), "tensor<4xf32>");
  EXPECT_EQ(opSequence(), (std::vector<std::string>{"Dropout", "Cast"}));
  EXPECT_FALSE(first("Dropout")->hasAttr("ratio"));
}

TEST_F(ImporterModels, ConstantNodeForms) {
  Model m(13);
  auto* c1 = m.node("Constant", {}, {"a"}, "c1");
  intsAttr(c1, "value_ints", {3, 4});
  auto* c2 = m.node("Constant", {}, {"b"}, "c2");
  floatAttr(c2, "value_float", 2.5f);
  auto* c3 = m.node("Constant", {}, {"t"}, "c3");
  auto* a = c3->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT32);
  a->mutable_t()->add_dims(2);
  a->mutable_t()->add_int32_data(-1);
  a->mutable_t()->add_int32_data(9);
  m.output("a").output("b").output("t");
  ASSERT_EQ(import(m), "");
  auto ret = llvm::cast<mlir::func::ReturnOp>(main().getBody().front().getTerminator());
  Tensor ta, tb, tt;
  ASSERT_TRUE(getConstantValue(ret.getOperand(0), &ta));
  ASSERT_TRUE(getConstantValue(ret.getOperand(1), &tb));
  ASSERT_TRUE(getConstantValue(ret.getOperand(2), &tt));
  EXPECT_EQ(ta.dtype(), DType::I64);
  EXPECT_EQ(ta.shape(), Shape({2}));
  EXPECT_EQ(ta.data<int64_t>()[1], 4);
  EXPECT_EQ(tb.dtype(), DType::F32);
  EXPECT_EQ(tb.rank(), 0);
  EXPECT_EQ(tb.data<float>()[0], 2.5f);
  EXPECT_EQ(tt.dtype(), DType::I32);
  EXPECT_EQ(tt.data<int32_t>()[0], -1);
}

// ---- Older opsets ----

TEST_F(ImporterModels, Softmax11NotOnLastAxisIsFlattenSoftmaxReshape) {
  Model m(11);
  m.input("x", {2, 3, 4});
  m.node("Softmax", {"x"}, {"y"}, "sm");  // axis defaults to 1 before opset 13
  m.output("y");
  ASSERT_EQ(import(m), "");
  EXPECT_EQ(opSequence(), (std::vector<std::string>{"Flatten", "Softmax", "Constant", "Reshape"}));
  mlir::Operation* flat = first("Flatten");
  EXPECT_EQ(llvm::cast<mlir::IntegerAttr>(flat->getAttr("axis")).getInt(), 1);
  EXPECT_EQ(str(flat->getResult(0).getType()), "tensor<2x12xf32>");
  EXPECT_EQ(llvm::cast<mlir::IntegerAttr>(first("Softmax")->getAttr("axis")).getInt(), -1);
  EXPECT_EQ(str(main().getResultTypes()[0]), "tensor<2x3x4xf32>");
}

// Softmax-11 normalises each row of the input coerced to 2-D at `axis`, not along one axis.
TEST_F(ImporterModels, Softmax11CoercionComputesTheOldSemantics) {
  Model m(11);
  m.input("x", {2, 2, 2});
  m.node("Softmax", {"x"}, {"y"}, "sm");  // axis 1: rows are x[i, :, :] flattened
  m.output("y");
  ASSERT_EQ(import(m), "");
  CompileResult compiled;
  ASSERT_TRUE(mlir::succeeded(compileModule(*module, CompileOptions{}, &compiled)));
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(compiled.plan, LoadOptions{}, &exe).isOk());
  std::vector<Tensor> outs;
  Status st = exe->run({Tensor::fromVector<float>({2, 2, 2}, {0, 0, 0, 0, 1, 2, 3, 4})}, &outs);
  ASSERT_TRUE(st.isOk()) << st.message();
  const float* y = outs[0].data<float>();
  // Row 0 is four zeros: 0.25 each. Row 1 is softmax([1,2,3,4]).
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], 0.25, 1e-6);
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0);
  EXPECT_NEAR(y[4], std::exp(1.0) / z, 1e-6);
  EXPECT_NEAR(y[7], std::exp(4.0) / z, 1e-6);
}

// A value-dependent size (NonZero on a computed mask) makes everything after it one DynamicRegion
// step: one Executable then runs inputs whose outputs have different sizes, an empty one
// included, and the same size again (its kernels are kept per operand signature).
TEST_F(ImporterModels, DynamicRegionRunsEveryOutputSize) {
  Model m(13);
  m.input("x", {6}).floatInit("zero", {}, {0});
  m.node("Greater", {"x", "zero"}, {"mask"}, "gt");
  m.node("NonZero", {"mask"}, {"nz"}, "positives");
  m.node("Transpose", {"nz"}, {"idx"}, "tr");
  m.node("GatherND", {"x", "idx"}, {"vals"}, "pick");
  m.node("Mul", {"vals", "vals"}, {"y"}, "square");
  m.node("Relu", {"x"}, {"r"}, "relu");  // static: stays in the plan's schedule
  m.output("y").output("r");
  ASSERT_EQ(import(m), "");
  CompileResult compiled;
  ASSERT_TRUE(mlir::succeeded(compileModule(*module, CompileOptions{}, &compiled)));
  int regions = 0;
  for (const auto& s : compiled.plan.steps()) {
    if (s.op_type() != "DynamicRegion") continue;
    ++regions;
    EXPECT_EQ(s.device(), "cpu");
  }
  EXPECT_EQ(regions, 1);
  EXPECT_TRUE(std::any_of(compiled.notes.begin(), compiled.notes.end(), [](const std::string& n) {
    return n.find("4 ops (from NonZero 'positives' on)") != std::string::npos;
  }));
  std::unique_ptr<Executable> exe;
  Status st = Executable::load(compiled.plan, LoadOptions{}, &exe);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(exe->outputTypes()[0].shape, (Shape{-1}));  // known only at run time
  const std::vector<std::vector<float>> xs = {
      {1, -2, 3, -4, 5, 0}, {-1, -1, -1, -1, -1, -1}, {0.5f, 2, 2, 2, -3, 4}, {1, -2, 3, -4, 5, 0}};
  for (const auto& x : xs) {
    std::vector<Tensor> outs;
    st = exe->run({Tensor::fromVector<float>({6}, x)}, &outs);
    ASSERT_TRUE(st.isOk()) << st.message();
    std::vector<float> want;
    for (float v : x)
      if (v > 0) want.push_back(v * v);
    ASSERT_EQ(outs[0].shape(), (Shape{(int64_t)want.size()}));
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(outs[0].data<float>()[i], want[i]) << i;
    for (int i = 0; i < 6; ++i) EXPECT_EQ(outs[1].data<float>()[i], std::max(x[i], 0.f));
  }
  // A profiled run reports the region's eager ops as its sub-steps, in order, within its span,
  // with their run-time shapes; the trace nests them under the region's event.
  std::vector<Tensor> outs;
  RunStats stats;
  st = exe->run({Tensor::fromVector<float>({6}, xs[0])}, &outs, &stats, /*profile=*/true);
  ASSERT_TRUE(st.isOk()) << st.message();
  const StepTiming* region = nullptr;
  for (const StepTiming& s : stats.steps) {
    if (s.opType == "DynamicRegion") region = &s;
    else EXPECT_TRUE(s.subSteps.empty()) << s.name;
  }
  ASSERT_TRUE(region);
  std::vector<std::string> types;
  double last = 0;
  for (const SubStepTiming& sub : region->subSteps) {
    types.push_back(sub.opType);
    EXPECT_GE(sub.start, last);
    EXPECT_LE(sub.start + sub.seconds, region->seconds + 1e-6);
    last = sub.start + sub.seconds;
    EXPECT_FALSE(sub.impl.empty()) << sub.name;
  }
  EXPECT_EQ(types, (std::vector<std::string>{"NonZero", "Transpose", "GatherND", "Mul"}));
  // [1, n] -> [n, 1] keeps the element order: the Transpose is a view of NonZero's result.
  EXPECT_EQ(region->subSteps[1].impl, "view");
  EXPECT_NE(region->subSteps[2].impl, "view");
  ASSERT_EQ(region->subSteps[0].outputs.size(), 1u);
  EXPECT_EQ(region->subSteps[0].outputs[0].shape, (Shape{1, 3}));  // three positives
  EXPECT_EQ(region->subSteps[0].name, "positives");
  Trace trace;
  trace.addRun(stats, "run");
  const std::string json = trace.json();
  size_t regionOps = 0;
  for (size_t at = json.find("\"region-op\""); at != std::string::npos;
       at = json.find("\"region-op\"", at + 1))
    ++regionOps;
  EXPECT_EQ(regionOps, 4u);
}

// RoiAlign-10 (every torchvision detector exported below opset 16) samples without the
// half-pixel shift: one 2x2 RoI at the origin of a 4x4 ramp, one bin, one sample at the bin's
// centre (1, 1) reads x[1][1] = 5; RoiAlign-16's default half_pixel shifts the RoI by -0.5 and
// reads the mean of x[0..1][0..1] = 2.5.
TEST_F(ImporterModels, RoiAlign10SamplesWithoutTheHalfPixelShift) {
  for (int64_t opset : {13, 16}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    Model m(opset);
    m.input("x", {1, 1, 4, 4}).input("rois", {1, 4}).input("batch", {1}, onnx::TensorProto::INT64);
    onnx::NodeProto* n = m.node("RoiAlign", {"x", "rois", "batch"}, {"y"}, "roi");
    intAttr(n, "output_height", 1);
    intAttr(n, "output_width", 1);
    intAttr(n, "sampling_ratio", 1);
    m.output("y");
    ASSERT_EQ(import(m), "");
    auto mode = first("RoiAlign")->getAttrOfType<mlir::StringAttr>("coordinate_transformation_mode");
    if (opset < 16) {
      ASSERT_TRUE(mode);
      EXPECT_EQ(mode.str(), "output_half_pixel");
    } else {
      EXPECT_FALSE(mode);  // the default, half_pixel
    }
    CompileResult compiled;
    ASSERT_TRUE(mlir::succeeded(compileModule(*module, CompileOptions{}, &compiled)));
    std::unique_ptr<Executable> exe;
    ASSERT_TRUE(Executable::load(compiled.plan, LoadOptions{}, &exe).isOk());
    std::vector<float> ramp(16);
    for (int i = 0; i < 16; ++i) ramp[i] = (float)i;
    std::vector<Tensor> outs;
    Status st = exe->run({Tensor::fromVector<float>({1, 1, 4, 4}, ramp),
                          Tensor::fromVector<float>({1, 4}, {0, 0, 2, 2}),
                          Tensor::fromVector<int64_t>({1}, {0})},
                         &outs);
    ASSERT_TRUE(st.isOk()) << st.message();
    EXPECT_FLOAT_EQ(outs[0].data<float>()[0], opset < 16 ? 5.f : 2.5f);
  }
}

// Gather(Shape(x), k) folds to a constant where dim k of x is static, while x's other dims are
// not: exporters test "x.shape[1] == 1" before squeezing, and an If on that test must see a
// constant condition to pick its branch's rank. The unknown dim 0 stays a run-time Gather.
TEST_F(ImporterModels, GatherOfShapeFoldsStaticDims) {
  Model m(13);
  m.input("x", {-1, 1}, onnx::TensorProto::FLOAT, {"N", ""});
  m.node("Shape", {"x"}, {"s"}, "shape");
  intAttr(m.node("Constant", {}, {"one"}, "c1"), "value_int", 1);
  intAttr(m.node("Constant", {}, {"zero"}, "c0"), "value_int", 0);
  m.node("Gather", {"s", "one"}, {"d1"}, "dim1");
  m.node("Gather", {"s", "zero"}, {"d0"}, "dim0");
  m.output("d1").output("d0");
  ASSERT_EQ(import(m), "");
  auto ret = llvm::cast<mlir::func::ReturnOp>(main().getBody().front().getTerminator());
  Tensor d1;
  ASSERT_TRUE(getConstantValue(ret.getOperand(0), &d1));
  ASSERT_EQ(d1.dtype(), DType::I64);
  EXPECT_EQ(d1.shape(), Shape{});
  EXPECT_EQ(d1.data<int64_t>()[0], 1);
  mlir::Operation* d0 = ret.getOperand(1).getDefiningOp();
  ASSERT_TRUE(d0);
  EXPECT_EQ(onnxOpType(d0), "Gather");
}

// A large op in a dynamic region (a MatMul of the rows NonZero selects, ~160 MFLOP) with
// kernel variants to choose from: with tuning its variants are timed on the first run and the
// fastest kept, without tuning the built-in choice runs; either way every run's result is the
// product, computed by the kernel that is kept (the timing runs write the same outputs).
TEST_F(ImporterModels, DynamicRegionKeepsTheFastestVariantOfALargeOp) {
  const int64_t rows = 320, k = 512, n = 512;
  std::vector<float> w(k * n);
  for (int64_t i = 0; i < k * n; ++i) w[i] = (float)((i * 7919) % 13) / 13.f - 0.5f;
  Model m(13);
  m.input("x", {rows, k}).floatInit("w", {k, n}, w).floatInit("zero", {}, {0});
  m.input("keep", {rows});
  m.node("Greater", {"keep", "zero"}, {"mask"}, "gt");
  m.node("NonZero", {"mask"}, {"nz"}, "selected");
  intsAttr(m.node("Constant", {}, {"axis0"}, "axis0"), "value_ints", {0});
  m.node("Squeeze", {"nz", "axis0"}, {"idx"}, "sq");
  m.node("Gather", {"x", "idx"}, {"picked"}, "pick");
  m.node("MatMul", {"picked", "w"}, {"y"}, "project");
  m.output("y");
  ASSERT_EQ(import(m), "");
  CompileResult compiled;
  ASSERT_TRUE(mlir::succeeded(compileModule(*module, CompileOptions{}, &compiled)));
  std::vector<float> x(rows * k), keep(rows);
  for (int64_t i = 0; i < rows * k; ++i) x[i] = (float)((i * 104729) % 17) / 17.f - 0.5f;
  for (int64_t r = 0; r < rows; ++r) keep[r] = r % 5 == 0 ? -1.f : 1.f;  // 256 rows kept
  std::vector<int64_t> kept;
  for (int64_t r = 0; r < rows; ++r)
    if (keep[r] > 0) kept.push_back(r);
  for (TuningMode mode : {TuningMode::Measure, TuningMode::Off}) {
    SCOPED_TRACE(tuningModeName(mode));
    LoadOptions lo;
    lo.tuning = mode;
    lo.threads = 1;
    std::unique_ptr<Executable> exe;
    Status st = Executable::load(compiled.plan, lo, &exe);
    ASSERT_TRUE(st.isOk()) << st.message();
    for (int run = 0; run < 2; ++run) {
      std::vector<Tensor> outs;
      RunStats stats;
      st = exe->run({Tensor::fromVector<float>({rows, k}, x), Tensor::fromVector<float>({rows}, keep)},
                    &outs, &stats, /*profile=*/true);
      ASSERT_TRUE(st.isOk()) << st.message();
      ASSERT_EQ(outs[0].shape(), (Shape{(int64_t)kept.size(), n}));
      for (size_t i = 0; i < kept.size(); i += 37)
        for (int64_t j = 0; j < n; j += 29) {
          double want = 0;
          for (int64_t q = 0; q < k; ++q) want += (double)x[kept[i] * k + q] * w[q * n + j];
          EXPECT_NEAR(outs[0].data<float>()[i * n + j], want, 1e-3) << i << "," << j;
        }
      std::string impl;
      for (const StepTiming& s : stats.steps)
        for (const SubStepTiming& sub : s.subSteps)
          if (sub.opType == "MatMul") impl = sub.impl;
      EXPECT_FALSE(impl.empty());
    }
  }
}

TEST_F(ImporterModels, Softmax11DynamicShapeUsesShapeOp) {
  Model m(11);
  m.input("x", {-1, 3, 4}, onnx::TensorProto::FLOAT, {"N"});
  m.node("LogSoftmax", {"x"}, {"y"}, "sm");
  m.output("y");
  ASSERT_EQ(import(m), "");
  EXPECT_EQ(opSequence(), (std::vector<std::string>{"Flatten", "LogSoftmax", "Shape", "Reshape"}));
}

TEST_F(ImporterModels, Softmax13KeepsAxis) {
  Model m(13);
  m.input("x", {2, 3, 4});
  intAttr(m.node("Softmax", {"x"}, {"y"}, "sm"), "axis", 1);
  m.output("y");
  ASSERT_EQ(import(m), "");
  EXPECT_EQ(opSequence(), (std::vector<std::string>{"Softmax"}));
}

TEST_F(ImporterModels, Opset6BroadcastWithAxisUnsqueezesB) {
  Model m(6);
  m.input("a", {2, 3, 4}).input("b", {2});
  auto* n = m.node("Mul", {"a", "b"}, {"y"}, "mul");
  intAttr(n, "broadcast", 1);
  intAttr(n, "axis", 0);
  m.output("y");
  ASSERT_EQ(import(m), "");
  mlir::Operation* mul = first("Mul");
  EXPECT_EQ(str(mul->getOperand(1).getType()), "tensor<2x1x1xf32>");
  EXPECT_EQ(str(mul->getResult(0).getType()), "tensor<2x3x4xf32>");
}

TEST_F(ImporterModels, Opset7PadValueBecomesInput) {
  Model m(7);
  m.input("x", {2, 2});
  auto* p = m.node("Pad", {"x"}, {"y"}, "pad");
  intsAttr(p, "pads", {1, 0, 0, 1});
  floatAttr(p, "value", 1.5f);
  m.output("y");
  ASSERT_EQ(import(m), "");
  mlir::Operation* pad = first("Pad");
  ASSERT_EQ(pad->getNumOperands(), 3u);
  Tensor v;
  ASSERT_TRUE(getConstantValue(pad->getOperand(2), &v));
  EXPECT_EQ(v.dtype(), DType::F32);
  EXPECT_EQ(v.data<float>()[0], 1.5f);
  EXPECT_EQ(str(pad->getResult(0).getType()), "tensor<3x3xf32>");
}

// ---- TensorProto conversion (frontend/OnnxTensor.h) ----

// ---- nn.EmbeddingBag: torch.onnx's Loop over the bags becomes one EmbeddingBag op ----------

/// Knobs of the Loop bagLoopModel writes; the defaults are torch.onnx's form (opset 13).
struct BagLoop {
  std::string reduce = "ReduceSum";
  bool weighted = false;       // Mul by Unsqueeze(Slice(psw, s, e, [0]), [1]) (psw first)
  int64_t keepdims = 0;        // 1 is not torch's: each scan element [1, D], kept a Loop
  bool castCondition = true;   // cond_out = Cast(outer true) as torch writes it, else Identity(cond_in)
  bool reluWeight = false;     // gathers from Relu(weight) computed in the body: kept a Loop
  bool iterPlusOne = false;    // bag m reads ends[m + 1]: kept a Loop
};

/// ids i64 [7], starts i64 [4], ends i64 [5] (one longer: the trip count 4 is a constant), psw
/// f32 [7]; weight [5, 2] initializer; output "bags" [4, 2] (or [4, 1, 2]).
Model bagLoopModel(const BagLoop& o) {
  Model m(13);
  m.input("ids", {7}, onnx::TensorProto::INT64)
      .input("starts", {4}, onnx::TensorProto::INT64)
      .input("ends", {5}, onnx::TensorProto::INT64);
  if (o.weighted) m.input("psw", {7});
  m.floatInit("weight", {5, 2}, {1, -2, 3, 4, -5, 6, 7, 8, 9, -10});
  auto constant = [](onnx::GraphProto* g, const std::string& name, int32_t type,
                     std::vector<int64_t> dims, int64_t v) {
    onnx::NodeProto* c = g->add_node();
    c->set_op_type("Constant");
    c->add_output(name);
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(type);
    for (int64_t d : dims) a->mutable_t()->add_dims(d);
    if (type == onnx::TensorProto::BOOL) a->mutable_t()->add_int32_data((int32_t)v);
    else a->mutable_t()->add_int64_data(v);
  };
  constant(m.g(), "M", onnx::TensorProto::INT64, {}, 4);
  constant(m.g(), "yes", onnx::TensorProto::BOOL, {}, 1);
  constant(m.g(), "axis0", onnx::TensorProto::INT64, {1}, 0);
  onnx::NodeProto* loop = m.node("Loop", {"M", "yes"}, {"bags"}, "bag");
  auto* attr = loop->add_attribute();
  attr->set_name("body");
  attr->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* b = attr->mutable_g();
  b->set_name("body");
  auto in = [&](const std::string& name, int32_t type) {
    auto* v = b->add_input();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    v->mutable_type()->mutable_tensor_type()->mutable_shape();
  };
  in("i", onnx::TensorProto::INT64);
  in("cond", onnx::TensorProto::BOOL);
  auto node = [&](const std::string& op, std::vector<std::string> ins, const std::string& out) {
    onnx::NodeProto* n = b->add_node();
    n->set_op_type(op);
    for (auto& x : ins) n->add_input(x);
    n->add_output(out);
    return n;
  };
  constant(b, "zero", onnx::TensorProto::INT64, {1}, 0);
  constant(b, "one", onnx::TensorProto::INT64, {1}, 1);
  std::string endAt = "i";
  if (o.iterPlusOne) {
    constant(b, "one_scalar", onnx::TensorProto::INT64, {}, 1);
    node("Add", {"i", "one_scalar"}, "i1");
    endAt = "i1";
  }
  intAttr(node("Gather", {"starts", "i"}, "s0"), "axis", 0);
  intAttr(node("Gather", {"ends", endAt}, "e0"), "axis", 0);
  node("Unsqueeze", {"s0", "zero"}, "s");
  node("Unsqueeze", {"e0", "zero"}, "e");
  node("Slice", {"ids", "s", "e", "axis0"}, "rows_ids");
  std::string table = "weight";
  if (o.reluWeight) {
    node("Relu", {"weight"}, "relu_weight");
    table = "relu_weight";
  }
  intAttr(node("Gather", {table, "rows_ids"}, "rows"), "axis", 0);
  std::string x = "rows";
  if (o.weighted) {
    node("Slice", {"psw", "s", "e", "axis0"}, "w0");
    node("Unsqueeze", {"w0", "one"}, "w1");
    node("Mul", {"w1", "rows"}, "scaled");
    x = "scaled";
  }
  onnx::NodeProto* red = o.reduce == "ReduceSum" ? node("ReduceSum", {x, "zero"}, "bag_value")
                                                 : node(o.reduce, {x}, "bag_value");
  if (o.reduce != "ReduceSum") intsAttr(red, "axes", {0});
  intAttr(red, "keepdims", o.keepdims);
  if (o.castCondition) intAttr(node("Cast", {"yes"}, "cond_out"), "to", onnx::TensorProto::BOOL);
  else node("Identity", {"cond"}, "cond_out");
  b->add_output()->set_name("cond_out");
  b->add_output()->set_name("bag_value");
  m.output("bags");
  return m;
}

/// Runs the imported model on the bags [0, 2), [2, 2) (empty), [2, 5), [5, 7) of ids
/// {4, 0, 1, -1, 3, 2, 2} (ends one longer than the trip count, as torch's offsets are).
std::vector<float> runBags(mlir::ModuleOp module, bool weighted) {
  CompileResult compiled;
  EXPECT_TRUE(mlir::succeeded(compileModule(module, CompileOptions{}, &compiled)));
  std::unique_ptr<Executable> exe;
  Status st = Executable::load(compiled.plan, LoadOptions{}, &exe);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!exe) return {};
  std::vector<Tensor> ins = {Tensor::fromVector<int64_t>({7}, {4, 0, 1, -1, 3, 2, 2}),
                             Tensor::fromVector<int64_t>({4}, {0, 2, 2, 5}),
                             Tensor::fromVector<int64_t>({5}, {2, 2, 5, 7, 99})};
  if (weighted) ins.push_back(Tensor::fromVector<float>({7}, {0.5f, 2, -1, 3, 1, 0.25f, 4}));
  std::vector<Tensor> outs;
  st = exe->run(ins, &outs);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (outs.empty()) return {};
  return std::vector<float>(outs[0].data<float>(), outs[0].data<float>() + outs[0].numel());
}

TEST_F(ImporterModels, EmbeddingBagLoopBecomesOneOp) {
  // weight rows: 0 (1, -2), 1 (3, 4), 2 (-5, 6), 3 (7, 8), 4 (9, -10).
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Case {
    BagLoop o;
    std::vector<float> want;
  };
  const std::vector<Case> cases = {
      // Bag 0: rows 4, 0; bag 1 empty; bag 2: rows 1, 4 (-1), 3; bag 3: rows 2, 2.
      {{}, {10, -12, 0, 0, 19, 2, -10, 12}},
      {{"ReduceMean"}, {5, -6, nan, nan, 19.f / 3, 2.f / 3, -5, 6}},
      {{"ReduceMax"}, {9, -2, -inf, -inf, 9, 8, -5, 6}},
      // Weights 0.5, 2 | - | -1, 3, 1 | 0.25, 4.
      {{"ReduceSum", true}, {6.5f, -9, 0, 0, 31, -26, -21.25f, 25.5f}},
      {{"ReduceSum", false, 0, false}, {10, -12, 0, 0, 19, 2, -10, 12}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.o.reduce + (c.o.weighted ? " weighted" : "") + (c.o.castCondition ? "" : " identity"));
    ASSERT_EQ(import(bagLoopModel(c.o)), "");
    std::vector<std::string> seq = opSequence();
    EXPECT_EQ(std::count(seq.begin(), seq.end(), "Loop"), 0);
    mlir::Operation* bag = first("EmbeddingBag");
    ASSERT_NE(bag, nullptr);
    const std::string mode = c.o.reduce == "ReduceSum" ? "sum" : c.o.reduce == "ReduceMean" ? "mean" : "max";
    EXPECT_EQ(llvm::cast<mlir::StringAttr>(bag->getAttr("mode")).getValue(), mode);
    EXPECT_EQ(str(bag->getResult(0).getType()), "tensor<4x2xf32>");
    std::vector<float> got = runBags(*module, c.o.weighted);
    ASSERT_EQ(got.size(), c.want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      if (std::isnan(c.want[k])) EXPECT_TRUE(std::isnan(got[k])) << k;
      else EXPECT_FLOAT_EQ(got[k], c.want[k]) << k;
    }
  }
}

// Loops of another form stay Loops, and compute what the rewritten op does where they agree.
TEST_F(ImporterModels, OtherBagLoopsStayLoops) {
  BagLoop keep;
  keep.keepdims = 1;
  BagLoop relu;
  relu.reluWeight = true;
  BagLoop shifted;
  shifted.iterPlusOne = true;
  for (const BagLoop& o : {keep, relu, shifted}) {
    ASSERT_EQ(import(bagLoopModel(o)), "");
    std::vector<std::string> seq = opSequence();
    EXPECT_EQ(std::count(seq.begin(), seq.end(), "Loop"), 1);
    EXPECT_EQ(first("EmbeddingBag"), nullptr);
  }
  ASSERT_EQ(import(bagLoopModel(keep)), "");
  EXPECT_EQ(runBags(*module, false), (std::vector<float>{10, -12, 0, 0, 19, 2, -10, 12}));
}


TEST(OnnxTensor, TypedFieldsAndRawData) {
  onnx::TensorProto p;
  p.set_name("b");
  p.set_data_type(onnx::TensorProto::BOOL);
  p.add_dims(3);
  p.add_int32_data(1);
  p.add_int32_data(0);
  p.add_int32_data(5);
  Tensor t;
  ASSERT_TRUE(tensorFromProto(p, &t).isOk());
  EXPECT_EQ(t.dtype(), DType::Bool);
  EXPECT_EQ(t.data<uint8_t>()[2], 1);  // any non-zero is true, stored as 1

  onnx::TensorProto d;
  d.set_data_type(onnx::TensorProto::DOUBLE);
  d.add_dims(2);
  double vals[2] = {0.5, -3.0};
  d.set_raw_data(std::string(reinterpret_cast<const char*>(vals), sizeof vals));
  ASSERT_TRUE(tensorFromProto(d, &t).isOk());
  EXPECT_EQ(t.dtype(), DType::F64);
  EXPECT_EQ(t.data<double>()[1], -3.0);
}

// INT4 (22) and UINT4 (21): two values a byte, low nibble first, widened to I8 / U8.
TEST(OnnxTensor, FourBitTensorsAreWidened) {
  onnx::TensorProto p;
  p.set_name("w4");
  p.set_data_type(22);
  p.add_dims(3);
  p.set_raw_data(std::string("\x8F\x07", 2));  // -1, -8 | 7, (pad)
  Tensor t;
  ASSERT_TRUE(tensorFromProto(p, &t).isOk());
  ASSERT_EQ(t.dtype(), DType::I8);
  EXPECT_EQ(t.data<int8_t>()[0], -1);
  EXPECT_EQ(t.data<int8_t>()[1], -8);
  EXPECT_EQ(t.data<int8_t>()[2], 7);
  onnx::TensorProto u;
  u.set_data_type(21);
  u.add_dims(2);
  u.add_int32_data(0xF3);  // one byte an entry: 3, 15
  ASSERT_TRUE(tensorFromProto(u, &t).isOk());
  ASSERT_EQ(t.dtype(), DType::U8);
  EXPECT_EQ(t.data<uint8_t>()[0], 3);
  EXPECT_EQ(t.data<uint8_t>()[1], 15);
  p.set_raw_data(std::string("\x8F", 1));  // 3 values need 2 bytes
  Status st = tensorFromProto(p, &t);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("tensor 'w4': raw_data has 1 bytes but INT4 shape [3] needs 2"),
            std::string::npos)
      << st.message();
}

TEST(OnnxTensor, SizeMismatchNamesTheTensor) {
  onnx::TensorProto p;
  p.set_name("w");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(2);
  p.add_dims(2);
  p.add_float_data(1);
  Tensor t;
  Status st = tensorFromProto(p, &t);
  EXPECT_EQ(st.message(), "tensor 'w': has 1 elements in its typed data field but its shape "
                          "[2,2] needs 4");
  p.clear_float_data();
  p.set_raw_data(std::string(12, '\0'));
  st = tensorFromProto(p, &t);
  EXPECT_EQ(st.message(), "tensor 'w': raw_data has 12 bytes but f32 shape [2,2] needs 16");
  p.set_data_type(onnx::TensorProto::STRING);
  st = tensorFromProto(p, &t);
  EXPECT_EQ(st.message().rfind("tensor 'w': data type STRING (8) is not supported", 0), 0u);
}

TEST(OnnxTensor, FileRoundTrip) {
  std::string path = ::testing::TempDir() + "/tandem_roundtrip.pb";
  Tensor src = Tensor::fromVector<int64_t>({2, 2}, {1, -2, 3, 1LL << 40});
  ASSERT_TRUE(writeTensorFile(path, src, "ids").isOk());
  Tensor back;
  std::string name;
  ASSERT_TRUE(readTensorFile(path, &back, &name).isOk());
  EXPECT_EQ(name, "ids");
  EXPECT_EQ(back.dtype(), DType::I64);
  EXPECT_EQ(back.shape(), Shape({2, 2}));
  EXPECT_EQ(back.data<int64_t>()[3], 1LL << 40);
  std::remove(path.c_str());

  Status st = readTensorFile("/nonexistent/input_0.pb", &back);
  EXPECT_EQ(st.message(), "/nonexistent/input_0.pb: cannot open file (No such file or directory)");
}

TEST(OnnxTensor, BackendTestDataFile) {
  // A real input of the ONNX backend tests: test_add's x is f32[3,4,5] in raw_data.
  std::string p = "/usr/share/libonnx-testdata/data/node/test_add/test_data_set_0/input_0.pb";
  FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) GTEST_SKIP() << "test data not installed: " << p;
  std::fclose(f);
  Tensor t;
  std::string name;
  ASSERT_TRUE(readTensorFile(p, &t, &name).isOk());
  EXPECT_EQ(name, "x");
  EXPECT_EQ(t.shape(), Shape({3, 4, 5}));
  EXPECT_EQ(t.dtype(), DType::F32);
}

}  // namespace
}  // namespace tandem

// ONNX external data (frontend/OnnxTensor.h loadExternalData): models whose tensors live in
// files next to model.onnx, as models over 2 GiB are saved. Built in a temporary directory:
// the importer reads the ranges, the plan computes with them, and every malformed reference
// is an error that names the tensor and the file.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/Compiler.h"
#include "frontend/OnnxImporter.h"
#include "frontend/OnnxTensor.h"
#include "mlir/IR/MLIRContext.h"
#include "runtime/Executable.h"
#include "tests/unit/onnx_model_builder.h"
#include "tools/driver/Driver.h"

namespace tandem {
namespace {

using namespace testing_onnx;
namespace fs = std::filesystem;

// y = MatMul(x [1, 4], W [4, 3]) + b [3] + c, with W and b in "weights.bin" (W at offset 64,
// b after it, 16 bytes of padding first as exporters align), and c a Constant node whose
// value, a [3] tensor, is in a file of its own in a subdirectory.
const std::vector<float> kW = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
const std::vector<float> kB = {0.5f, -1, 2};
const std::vector<float> kC = {100, 200, 300};

void external(onnx::TensorProto* t, const std::string& location, int64_t offset, int64_t length) {
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  if (offset >= 0) add("offset", std::to_string(offset));
  if (length >= 0) add("length", std::to_string(length));
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
  ASSERT_TRUE(f.good()) << path;
}

std::string floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

class ExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = ::testing::TempDir() + "/tandem_external_" + std::to_string(getpid()) + "_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir);
    fs::create_directories(dir + "/consts");
    writeBytes(dir + "/weights.bin", std::string(64, '\0') + floats(kW) + floats(kB));
    writeBytes(dir + "/consts/c.bin", floats(kC));
  }
  void TearDown() override { fs::remove_all(dir); }

  Model model() {
    Model m;
    m.input("x", {1, 4});
    auto* w = m.g()->add_initializer();
    w->set_name("W");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(4);
    w->add_dims(3);
    external(w, "weights.bin", 64, 48);
    auto* b = m.g()->add_initializer();
    b->set_name("b");
    b->set_data_type(onnx::TensorProto::FLOAT);
    b->add_dims(3);
    external(b, "weights.bin", 112, 12);
    auto* c = m.node("Constant", {}, {"c"}, "c");
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_dims(3);
    external(a->mutable_t(), "consts/c.bin", -1, -1);  // no offset, no length: the whole file
    m.node("MatMul", {"x", "W"}, {"xw"}, "matmul");
    m.node("Add", {"xw", "b"}, {"xwb"}, "bias");
    m.node("Add", {"xwb", "c"}, {"y"}, "add_c");
    m.output("y");
    return m;
  }

  std::string write(const Model& m) {
    std::string p = dir + "/model.onnx";
    writeBytes(p, m.bytes());
    return p;
  }

  // The compile error for `m` written to dir/model.onnx ("" when it compiles).
  std::string compileError(const Model& m) {
    CompileResult r;
    Status st = compileOnnxFile(write(m), {}, CompileOptions{}, &r);
    return st.isOk() ? "" : st.message();
  }

  std::string dir;
};

TEST_F(ExternalData, ModelRunsOnTheTensorsReadFromItsFiles) {
  CompileResult r;
  Status st = compileOnnxFile(write(model()), {}, CompileOptions{}, &r);
  ASSERT_TRUE(st.isOk()) << st.message();
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(std::move(r.plan), LoadOptions{}, &exe).isOk());
  std::vector<Tensor> outs;
  const std::vector<float> x = {1, -1, 2, 0.5f};
  st = exe->run({Tensor::fromVector<float>({1, 4}, x)}, &outs);
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int j = 0; j < 3; ++j) {
    float want = kB[j] + kC[j];
    for (int k = 0; k < 4; ++k) want += x[k] * kW[k * 3 + j];
    EXPECT_FLOAT_EQ(outs[0].data<float>()[j], want) << j;
  }
}

TEST_F(ExternalData, LoaderFillsRawDataAndClearsTheReference) {
  Model m = model();
  ASSERT_TRUE(loadExternalData(&m.m, dir + "/model.onnx").isOk());
  const onnx::TensorProto& w = m.m.graph().initializer(0);
  EXPECT_EQ(w.data_location(), onnx::TensorProto::DEFAULT);
  EXPECT_EQ(w.external_data_size(), 0);
  EXPECT_EQ(w.raw_data(), floats(kW));
  EXPECT_EQ(m.m.graph().initializer(1).raw_data(), floats(kB));
  EXPECT_EQ(m.m.graph().node(0).attribute(0).t().raw_data(), floats(kC));
  Tensor t;
  ASSERT_TRUE(tensorFromProto(w, &t).isOk());
  EXPECT_EQ(t.shape(), (Shape{4, 3}));
}

TEST_F(ExternalData, FollowsSymbolicLinksInTheModelDirectory) {
  // Hugging Face's cache links snapshots/<rev>/model.onnx_data to ../../blobs/<hash>.
  fs::create_directories(dir + "/blobs");
  fs::rename(dir + "/weights.bin", dir + "/blobs/0123abcd");
  fs::create_symlink("blobs/0123abcd", dir + "/weights.bin");
  EXPECT_EQ(compileError(model()), "");
}

TEST_F(ExternalData, ErrorsNameTheTensorAndTheFile) {
  auto locationOf = [](Model& m, int init) {
    return m.g()->mutable_initializer(init)->mutable_external_data(0);
  };
  const std::string p = dir + "/model.onnx";
  {
    Model m = model();
    locationOf(m, 0)->set_value("missing.bin");
    EXPECT_EQ(compileError(m), p + ": tensor 'W': cannot open its external data file '" + dir +
                                   "/missing.bin' (No such file or directory)");
  }
  for (const char* bad : {"/etc/passwd", "../weights.bin", "consts/../../x", ".."}) {
    Model m = model();
    locationOf(m, 0)->set_value(bad);
    EXPECT_EQ(compileError(m), p + ": tensor 'W': external data location '" + bad +
                                   "' must be a path inside the model's directory (relative, no '..')");
  }
  {
    Model m = model();
    locationOf(m, 0)->set_value("consts");
    EXPECT_EQ(compileError(m), p + ": tensor 'W': external data '" + dir + "/consts' is not a regular file");
  }
  {
    Model m = model();
    m.g()->mutable_initializer(1)->mutable_external_data(1)->set_value("120");  // b's offset
    EXPECT_EQ(compileError(m), p + ": tensor 'b': external data range [120, 132) is past the end of '" +
                                   dir + "/weights.bin' (124 bytes)");
  }
  {
    Model m = model();
    m.g()->mutable_initializer(0)->mutable_external_data(2)->set_value("44");  // W's length
    EXPECT_EQ(compileError(m), p + ": tensor 'W': external data in '" + dir +
                                   "/weights.bin' has 44 bytes, but its dims and dtype need 48");
  }
  {
    Model m = model();
    m.g()->mutable_initializer(0)->mutable_external_data(1)->set_value("-8");
    EXPECT_EQ(compileError(m), p + ": tensor 'W': external data offset '-8' is not a byte count");
  }
  {
    Model m = model();
    m.g()->mutable_initializer(0)->clear_external_data();
    EXPECT_EQ(compileError(m), p + ": tensor 'W': external data without a location");
  }
  {
    // No length: to the end of the file, which holds b after W here: too many bytes for W.
    Model m = model();
    m.g()->mutable_initializer(0)->mutable_external_data()->RemoveLast();
    EXPECT_EQ(compileError(m), p + ": tensor 'W': external data in '" + dir +
                                   "/weights.bin' has 60 bytes, but its dims and dtype need 48");
  }
}

TEST_F(ExternalData, BytesWithoutAFileAreRefused) {
  // importOnnxBytes has no directory: the tensor's reference is an error, not zeros.
  mlir::MLIRContext ctx;
  loadTandemDialects(&ctx);
  std::string err;
  EXPECT_FALSE(importOnnxBytes(&ctx, model().bytes(), "m.onnx", {}, &err));
  EXPECT_NE(err.find("node 'c' (Constant): attribute 'value': tensor <unnamed>: uses external data "
                     "(data_location=EXTERNAL), which is read only when the model is compiled "
                     "from its file"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace tandem

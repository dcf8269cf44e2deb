// Driver tests: output comparison (the PASS/FAIL of `tandem run --expect`), atomic writes,
// test-data directories, which given inputs a plan folds (shape operands) and which it keeps,
// per-step medians of profiled runs (`--step-times`).
#include <gtest/gtest.h>
#include <unistd.h>

#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <set>

#include "tools/driver/Driver.h"
#include "tools/driver/RunReport.h"

using namespace tandem;

TEST(Compare, ToleranceIsAtolPlusRtolTimesExpected) {
  Tensor want = Tensor::fromVector<float>({3}, {1.f, 100.f, 0.f});
  Comparison c = compareTensors(Tensor::fromVector<float>({3}, {1.00005f, 100.09f, 0.00009f}), want, 1e-4, 1e-3);
  EXPECT_TRUE(c.pass) << c.reason;
  EXPECT_NEAR(c.maxAbsError, 0.09, 1e-4);
  c = compareTensors(Tensor::fromVector<float>({3}, {1.f, 100.2f, 0.f}), want, 1e-4, 1e-3);
  EXPECT_FALSE(c.pass);
  EXPECT_NE(c.reason.find("max abs error"), std::string::npos);
}

TEST(Compare, ShapeDtypeAndNaN) {
  Tensor a = Tensor::fromVector<float>({2}, {NAN, 1.f});
  EXPECT_TRUE(compareTensors(a, Tensor::fromVector<float>({2}, {NAN, 1.f}), 0, 0).pass);
  EXPECT_FALSE(compareTensors(a, Tensor::fromVector<float>({2}, {0.f, 1.f}), 1, 1).pass);
  Comparison c = compareTensors(a, Tensor::fromVector<float>({1, 2}, {NAN, 1.f}), 1, 1);
  EXPECT_EQ(c.reason, "shape [2] != expected [1,2]");
  c = compareTensors(Tensor::fromVector<int64_t>({1}, {1}), Tensor::fromVector<float>({1}, {1}), 1, 1);
  EXPECT_EQ(c.reason, "dtype i64 != expected f32");
}

// Each step at its own median run: step 0's median is run 2's sample, step 1's run 0's; a
// step's sub-steps come from the run its time does, so they add up to it.
TEST(MedianSteps, EachStepFromItsMedianRun) {
  auto run = [](double a, double b, double sub) {
    RunStats r;
    r.steps.resize(2);
    r.steps[0].name = "conv";
    r.steps[0].seconds = a;
    r.steps[1].name = "region";
    r.steps[1].seconds = b;
    r.steps[1].subSteps.resize(1);
    r.steps[1].subSteps[0].seconds = sub;
    return r;
  };
  std::vector<RunStats> runs = {run(5, 2, 2), run(1, 9, 9), run(3, 1, 1)};
  std::vector<StepTiming> m = medianSteps(runs);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].name, "conv");
  EXPECT_EQ(m[0].seconds, 3);
  EXPECT_EQ(m[1].seconds, 2);
  ASSERT_EQ(m[1].subSteps.size(), 1u);
  EXPECT_EQ(m[1].subSteps[0].seconds, 2);
  // An even count takes the upper middle sample (as quantile(v, 0.5)); one run is itself.
  runs.push_back(run(4, 3, 3));
  EXPECT_EQ(medianSteps(runs)[0].seconds, 4);
  EXPECT_EQ(medianSteps(runs)[1].seconds, 3);
  EXPECT_EQ(medianSteps({run(7, 8, 8)})[1].seconds, 8);
  EXPECT_TRUE(medianSteps({}).empty());
}

TEST(Checksum, SumsEveryDtype) {
  EXPECT_DOUBLE_EQ(checksum(Tensor::fromVector<int64_t>({3}, {1, 2, 3})), 6.0);
  EXPECT_DOUBLE_EQ(checksum(Tensor::fromVector<bool>({3}, {true, false, true})), 2.0);
}

TEST(WriteFileAtomic, WritesOrLeavesNothing) {
  std::string dir = testing::TempDir() + "/tandem_driver_test_" + std::to_string(getpid());
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  ASSERT_TRUE(writeFileAtomic(dir + "/a.bin", "hello").isOk());
  std::ifstream in(dir + "/a.bin");
  std::string s;
  in >> s;
  EXPECT_EQ(s, "hello");
  Status st = writeFileAtomic(dir + "/missing/b.bin", "x");
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("missing/b.bin: cannot write"), std::string::npos) << st.message();
  EXPECT_NE(system(("ls " + dir + "/missing 2>/dev/null").c_str()), 0);
}

TEST(ReadTensorDir, ErrorsNameTheDirectory) {
  std::vector<Tensor> t;
  Status st = readTensorDir("/no/such/dir", "input", &t, nullptr);
  EXPECT_EQ(st.message(), "/no/such/dir: no such directory");
  st = readTensorDir("/", "input", &t, nullptr);
  EXPECT_EQ(st.message(), "/: no input_0.pb in this directory");
}

namespace {

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

const std::string kNode = "/usr/share/libonnx-testdata/data/node/";

void addInput(onnx::GraphProto* g, const std::string& name, int elemType, std::vector<int64_t> dims) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elemType);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}
void addNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> ins,
             std::vector<std::string> outs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
}

}  // namespace

// The ONNX backend node tests that feed an operand as a graph input: shape operands are the
// inputs a plan may fold, data operands (Gather's indices, X) are not.
TEST(ShapeOperandInputs, BackendNodeTests) {
  if (!exists(kNode + "test_slice/model.onnx")) GTEST_SKIP() << "libonnx-testdata not installed";
  const std::map<std::string, std::set<std::string>> want = {
      {"test_reshape_reordered_all_dims", {"shape"}},
      {"test_slice", {"starts", "ends", "axes", "steps"}},
      {"test_expand_dim_changed", {"new_shape"}},
      {"test_tile", {"y"}},
      {"test_constantofshape_int_zeros", {"x"}},
      {"test_squeeze", {"axes"}},
      {"test_reduce_sum_keepdims_example", {"axes"}},
      {"test_gather_0", {}},
      {"test_relu", {}},
  };
  for (const auto& [test, names] : want) {
    std::set<std::string> got;
    ASSERT_TRUE(onnxShapeOperandInputs(kNode + test + "/model.onnx", &got).isOk()) << test;
    EXPECT_EQ(got, names) << test;
  }
}

// A value flows through any op (Cast, Concat) to the shape operand it reaches, but not through
// Shape: ids only index an embedding whose Shape feeds a Reshape.
TEST(ShapeOperandInputs, FlowsThroughOpsButNotThroughShape) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  addInput(g, "ids", onnx::TensorProto::INT64, {2});
  addInput(g, "n", onnx::TensorProto::INT32, {1});
  addInput(g, "x", onnx::TensorProto::FLOAT, {2, 3});
  auto* emb = g->add_initializer();
  emb->set_name("emb");
  emb->set_data_type(onnx::TensorProto::FLOAT);
  emb->add_dims(5);
  emb->add_dims(4);
  for (int i = 0; i < 20; ++i) emb->add_float_data((float)i);
  auto* minus1 = g->add_initializer();
  minus1->set_name("minus1");
  minus1->set_data_type(onnx::TensorProto::INT64);
  minus1->add_dims(1);
  minus1->add_int64_data(-1);
  addNode(g, "Gather", {"emb", "ids"}, {"e"});
  addNode(g, "Shape", {"e"}, {"es"});
  addNode(g, "Reshape", {"e", "es"}, {"r"});
  addNode(g, "Cast", {"n"}, {"n64"});
  addNode(g, "Concat", {"n64", "minus1"}, {"shape"});
  g->mutable_node(4)->add_attribute()->set_name("axis");
  g->mutable_node(4)->mutable_attribute(0)->set_type(onnx::AttributeProto::INT);
  g->mutable_node(4)->mutable_attribute(0)->set_i(0);
  g->mutable_node(3)->add_attribute()->set_name("to");
  g->mutable_node(3)->mutable_attribute(0)->set_type(onnx::AttributeProto::INT);
  g->mutable_node(3)->mutable_attribute(0)->set_i(onnx::TensorProto::INT64);
  addNode(g, "Reshape", {"x", "shape"}, {"y"});
  g->add_output()->set_name("r");
  g->add_output()->set_name("y");
  std::string path = testing::TempDir() + "/tandem_shape_inputs_" + std::to_string(getpid()) + ".onnx";
  {
    std::ofstream f(path, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&f));
  }
  std::set<std::string> got;
  ASSERT_TRUE(onnxShapeOperandInputs(path, &got).isOk());
  EXPECT_EQ(got, (std::set<std::string>{"n"}));

  // Given all three: n (integer, reaches Reshape's shape) is folded; ids (integer, data) and x
  // stay run-time inputs in order and bind their shapes.
  std::vector<Tensor> given = {Tensor::fromVector<int64_t>({2}, {4, 1}),
                               Tensor::fromVector<int32_t>({1}, {3}),
                               Tensor::fromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6})};
  ImportOptions io;
  CompileOptions co;
  std::vector<Tensor> runtime;
  std::vector<std::string> folded;
  ASSERT_TRUE(specializeOnnxInputs(path, given, &io, &co, &runtime, &folded).isOk());
  EXPECT_EQ(folded, (std::vector<std::string>{"n"}));
  ASSERT_EQ(io.constantInputs.size(), 1u);
  EXPECT_EQ(io.constantInputs.count("n"), 1u);
  ASSERT_EQ(runtime.size(), 2u);
  EXPECT_EQ(runtime[0].dtype(), DType::I64);
  EXPECT_EQ(runtime[1].dtype(), DType::F32);
  EXPECT_EQ(co.inputShapes.count("ids"), 1u);
  EXPECT_EQ(co.inputShapes.count("x"), 1u);
  EXPECT_EQ(co.inputShapes.count("n"), 0u);

  given.pop_back();
  Status st = specializeOnnxInputs(path, given, &io, &co, &runtime, &folded);
  EXPECT_EQ(st.message(), path + ": the model has 3 graph inputs but 2 input files were given");
  ::unlink(path.c_str());
}

// gpt_like's token ids feed the embedding Gather: at batch 1 the plan keeps them as its one
// run-time input (folded, the whole model became a constant and ran in 0.002 ms), and the
// output still matches PyTorch's.
TEST(ShapeOperandInputs, GptLikeKeepsTokenIdsAsRunTimeInput) {
  std::string dir = std::string(TANDEM_SOURCE_DIR) + "/../shared/models/gpt_like";
  if (!exists(dir + "/model.onnx")) GTEST_SKIP() << dir << " not found";
  std::vector<Tensor> given, expected, runtime;
  ASSERT_TRUE(readTensorDir(dir + "/test_data_set_0", "input", &given, nullptr).isOk());
  ASSERT_TRUE(readTensorDir(dir + "/test_data_set_0", "output", &expected, nullptr).isOk());
  ASSERT_EQ(given.size(), 1u);
  ASSERT_EQ(given[0].dtype(), DType::I64);
  ImportOptions io;
  CompileOptions co;
  std::vector<std::string> folded;
  ASSERT_TRUE(specializeOnnxInputs(dir + "/model.onnx", given, &io, &co, &runtime, &folded).isOk());
  EXPECT_TRUE(folded.empty());
  ASSERT_EQ(runtime.size(), 1u);
  CompileResult compiled;
  Status st = compileOnnxFile(dir + "/model.onnx", io, co, &compiled);
  ASSERT_TRUE(st.isOk()) << st.message();
  std::unique_ptr<Executable> exe;
  LoadOptions lo;
  lo.threads = 1;
  ASSERT_TRUE(Executable::load(compiled.plan, lo, &exe).isOk());
  ASSERT_EQ(exe->inputNames(), (std::vector<std::string>{"input"}));
  EXPECT_EQ(exe->inputTypes()[0].dtype, DType::I64);
  EXPECT_EQ(exe->inputTypes()[0].shape, (Shape{1, 64}));
  std::vector<Tensor> outputs;
  ASSERT_TRUE(exe->run(runtime, &outputs).isOk());
  ASSERT_EQ(outputs.size(), 1u);
  Comparison c = compareTensors(outputs[0], expected[0], 1e-4, 1e-3);
  EXPECT_TRUE(c.pass) << c.reason;
}

// Writes the ONNX models of the must-fail tests (one defect each) plus good_add.onnx,
// good_maxpool.onnx and good_chain.onnx, valid models the run-time error tests compile.
// usage: make_error_models OUT_DIR
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

std::string g_dir;

bool writeBytes(const std::string& name, const std::string& bytes) {
  std::string path = g_dir + "/" + name;
  std::ofstream o(path, std::ios::binary | std::ios::trunc);
  o.write(bytes.data(), (std::streamsize)bytes.size());
  if (!o) {
    std::fprintf(stderr, "make_error_models: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

bool writeModel(const std::string& name, const onnx::ModelProto& m) {
  std::string bytes;
  if (!m.SerializeToString(&bytes)) return false;
  return writeBytes(name, bytes);
}

void addTensorValue(onnx::ValueInfoProto* v, const std::string& name,
                    const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::NodeProto* addNode(onnx::GraphProto* g, const std::string& name, const std::string& op,
                         const std::vector<std::string>& ins, const std::vector<std::string>& outs) {
  onnx::NodeProto* n = g->add_node();
  n->set_name(name);
  n->set_op_type(op);
  for (const auto& i : ins) n->add_input(i);
  for (const auto& o : outs) n->add_output(o);
  return n;
}

void addInitializer(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                    float start) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + 0.25f * (float)i;
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

onnx::ModelProto newModel(int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("tandem make_error_models");
  onnx::OperatorSetIdProto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

// y = Relu(x + b), x: f32[2,3] (graph input), b: f32[2,3] initializer.
onnx::ModelProto goodAdd(int64_t opset) {
  onnx::ModelProto m = newModel(opset);
  onnx::GraphProto* g = m.mutable_graph();
  addTensorValue(g->add_input(), "x", {2, 3});
  addInitializer(g, "b", {2, 3}, -0.5f);
  addNode(g, "add", "Add", {"x", "b"}, {"s"});
  addNode(g, "relu", "Relu", {"s"}, {"y"});
  addTensorValue(g->add_output(), "y", {2, 3});
  return m;
}


// An i64 initializer [n] holding `values` (shape operands: ConstantOfShape, Expand, Tile, ...).
void addInt64Init(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims((int64_t)values.size());
  for (int64_t v : values) t->add_int64_data(v);
}

// A float initializer whose dims claim far more than its few bytes of raw_data hold.
void addLyingInitializer(onnx::GraphProto* g, const std::string& name,
                         const std::vector<int64_t>& dims, size_t rawBytes) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(rawBytes, '\0'));
}

// y = Add(x, W) with x: f32[2,3] and W the initializer `w` (made by the caller), so the importer
// must convert W.
onnx::ModelProto addReading(const std::string& w) {
  onnx::ModelProto m = newModel(13);
  onnx::GraphProto* g = m.mutable_graph();
  addTensorValue(g->add_input(), "x", {2, 3});
  addNode(g, "add", "Add", {"x", w}, {"y"});
  addTensorValue(g->add_output(), "y", {2, 3});
  return m;
}

// x: f32[2,3] -> one `op` node named `name` reading x and the given i64 initializers -> y.
onnx::ModelProto oneShapeOp(const std::string& op, const std::string& name,
                            const std::vector<std::pair<std::string, std::vector<int64_t>>>& inits,
                            bool readsX = true) {
  onnx::ModelProto m = newModel(13);
  onnx::GraphProto* g = m.mutable_graph();
  addTensorValue(g->add_input(), "x", {2, 3});
  std::vector<std::string> ins;
  if (readsX) ins.push_back("x");
  for (const auto& [n, v] : inits) {
    addInt64Init(g, n, v);
    ins.push_back(n);
  }
  addNode(g, name, op, ins, {"y"});
  onnx::ValueInfoProto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_error_models OUT_DIR\n");
    return 2;
  }
  g_dir = argv[1];
  bool ok = true;

  ok &= writeModel("good_add.onnx", goodAdd(13));
  ok &= writeModel("opset26.onnx", goodAdd(26));
  // Opset 19: AveragePool's dilations, added after opset 17, at a value Tandem does not take.
  {
    onnx::ModelProto m = newModel(19);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {1, 1, 6, 6});
    onnx::NodeProto* n = addNode(g, "pool", "AveragePool", {"x"}, {"y"});
    for (const char* name : {"kernel_shape", "dilations"}) {
      onnx::AttributeProto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INTS);
      a->add_ints(2);
      a->add_ints(2);
    }
    addTensorValue(g->add_output(), "y", {1, 1, 4, 4});
    ok &= writeModel("avgpool19_dilated.onnx", m);
  }
  // Opset 18: ReduceMean's axes input computed at run time (a graph input).
  {
    onnx::ModelProto m = newModel(18);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {2, 3});
    onnx::ValueInfoProto* axes = g->add_input();
    axes->set_name("axes");
    auto* tt = axes->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::INT64);
    tt->mutable_shape()->add_dim()->set_dim_value(1);
    addNode(g, "mean", "ReduceMean", {"x", "axes"}, {"y"});
    onnx::ValueInfoProto* y = g->add_output();
    y->set_name("y");
    y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    ok &= writeModel("reduce18_runtime_axes.onnx", m);
  }

  // Opset 23: Attention on 3-D Q, K, V without q_num_heads and kv_num_heads (the heads cannot
  // be told from the shapes).
  {
    onnx::ModelProto m = newModel(23);
    onnx::GraphProto* g = m.mutable_graph();
    for (const char* name : {"q", "k", "v"}) addTensorValue(g->add_input(), name, {1, 4, 16});
    addNode(g, "att", "Attention", {"q", "k", "v"}, {"y"});
    addTensorValue(g->add_output(), "y", {1, 4, 16});
    ok &= writeModel("attention3d_no_heads.onnx", m);
  }
  // Opset 23: Swish, which opset 24 introduced.
  {
    onnx::ModelProto m = newModel(23);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {2, 3});
    addNode(g, "swish", "Swish", {"x"}, {"y"});
    addTensorValue(g->add_output(), "y", {2, 3});
    ok &= writeModel("swish_opset23.onnx", m);
  }
  // Opset 21: an INT4 initializer that is not dequantized (Add's operand).
  {
    onnx::ModelProto m = newModel(21);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {2});
    onnx::TensorProto* w = g->add_initializer();
    w->set_name("w4");
    w->set_data_type(22);
    w->add_dims(2);
    w->set_raw_data(std::string("\x21", 1));
    addNode(g, "add", "Add", {"x", "w4"}, {"y"});
    addTensorValue(g->add_output(), "y", {2});
    ok &= writeModel("int4_not_dequantized.onnx", m);
  }
  // Opset 18: CenterCropPad whose shape is a graph input (known only at run time).
  {
    onnx::ModelProto m = newModel(18);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {2, 6});
    onnx::ValueInfoProto* shape = g->add_input();
    shape->set_name("shape");
    auto* tt = shape->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::INT64);
    tt->mutable_shape()->add_dim()->set_dim_value(2);
    addNode(g, "crop", "CenterCropPad", {"x", "shape"}, {"y"});
    onnx::ValueInfoProto* y = g->add_output();
    y->set_name("y");
    y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    ok &= writeModel("centercroppad_runtime_shape.onnx", m);
  }

  // A valid model whose bytes stop halfway through a 4 KB initializer: protobuf must see a
  // length-delimited field run past the end, whatever the exact cut.
  {
    onnx::ModelProto m = goodAdd(13);
    addInitializer(m.mutable_graph(), "big", {1024}, 0.0f);
    std::string bytes;
    m.SerializeToString(&bytes);
    std::string cut = bytes.substr(0, bytes.size() / 2);
    onnx::ModelProto check;
    if (check.ParseFromString(cut)) {
      std::fprintf(stderr, "make_error_models: truncated model still parses\n");
      return 1;
    }
    ok &= writeBytes("truncated.onnx", cut);
  }

  // Random bytes from a fixed seed; the first byte is a tag with wire type 7, which protobuf
  // rejects, so the file can never parse by chance.
  {
    std::mt19937 rng(1234);
    std::string bytes(512, '\0');
    for (char& c : bytes) c = (char)(rng() & 0xff);
    bytes[0] = 0x0f;
    onnx::ModelProto check;
    if (check.ParseFromString(bytes)) {
      std::fprintf(stderr, "make_error_models: corrupt model parses\n");
      return 1;
    }
    ok &= writeBytes("corrupt.onnx", bytes);
  }

  {
    onnx::ModelProto m = newModel(13);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {2, 3});
    addNode(g, "foo", "FooBar", {"x"}, {"y"});
    addTensorValue(g->add_output(), "y", {2, 3});
    ok &= writeModel("unknown_op.onnx", m);
  }

  {
    onnx::ModelProto m = newModel(13);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {2, 3});
    addNode(g, "add", "Add", {"x", "weight"}, {"y"});
    addTensorValue(g->add_output(), "y", {2, 3});
    ok &= writeModel("missing_initializer.onnx", m);
  }

  // n1 reads n2's output and n2 reads n1's: no order can satisfy both.
  {
    onnx::ModelProto m = newModel(13);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {2, 3});
    addNode(g, "n1", "Add", {"x", "b"}, {"a"});
    addNode(g, "n2", "Relu", {"a"}, {"b"});
    addTensorValue(g->add_output(), "a", {2, 3});
    ok &= writeModel("cycle.onnx", m);
  }

  {
    onnx::ModelProto m = newModel(13);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {2, 3});
    addTensorValue(g->add_input(), "y", {4, 5});
    addNode(g, "add", "Add", {"x", "y"}, {"z"});
    addTensorValue(g->add_output(), "z", {2, 3});
    ok &= writeModel("shape_mismatch.onnx", m);
  }

  // ---- Sizes from untrusted shapes (issue 15): each must be refused, naming the node or tensor,
  // before anything is allocated. ----
  const int64_t kMax = INT64_MAX, k2p32 = int64_t(1) << 32, k2p61 = int64_t(1) << 61,
                k2p62 = int64_t(1) << 62;
  {
    // 8 bytes of raw_data behind dims [4294967297, 784] (13 TB): the length check comes first.
    onnx::ModelProto m = addReading("huge_w");
    addLyingInitializer(m.mutable_graph(), "huge_w", {4294967297LL, 784}, 8);
    ok &= writeModel("init_huge_dims.onnx", m);
  }
  {
    onnx::ModelProto m = addReading("ovf_w");
    addLyingInitializer(m.mutable_graph(), "ovf_w", {k2p62, 4}, 8);
    ok &= writeModel("init_overflow_dims.onnx", m);
  }
  {
    onnx::ModelProto m = addReading("short_w");
    addLyingInitializer(m.mutable_graph(), "short_w", {2, 3}, 4);
    ok &= writeModel("init_raw_short.onnx", m);
  }
  {
    onnx::ModelProto m = addReading("typed_w");
    onnx::TensorProto* t = m.mutable_graph()->add_initializer();
    t->set_name("typed_w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(k2p32);
    t->add_dims(k2p32);
    t->add_float_data(1.0f);
    ok &= writeModel("init_typed_overflow.onnx", m);
  }
  {
    // A Constant node whose value attribute claims [2^40, 2^20] floats.
    onnx::ModelProto m = addReading("c");
    onnx::NodeProto* n = addNode(m.mutable_graph(), "big_const", "Constant", {}, {"c"});
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_dims(int64_t(1) << 40);
    a->mutable_t()->add_dims(int64_t(1) << 20);
    a->mutable_t()->set_raw_data(std::string(16, '\0'));
    ok &= writeModel("constant_attr_huge.onnx", m);
  }
  ok &= writeModel("cos_int64max.onnx", oneShapeOp("ConstantOfShape", "cos_max", {{"shape", {kMax}}}, false));
  ok &= writeModel("cos_overflow.onnx",
                   oneShapeOp("ConstantOfShape", "cos_ovf", {{"shape", {k2p32, k2p32}}}, false));
  ok &= writeModel("cos_huge.onnx",
                   oneShapeOp("ConstantOfShape", "cos_huge", {{"shape", {int64_t(1) << 40, 1024}}}, false));
  ok &= writeModel("expand_overflow.onnx",
                   oneShapeOp("Expand", "expand_ovf", {{"shape", {k2p32, k2p32, 1, 3}}}));
  ok &= writeModel("tile_overflow.onnx", oneShapeOp("Tile", "tile_ovf", {{"repeats", {k2p61, 1}}}));
  ok &= writeModel("tile_dim_overflow.onnx", oneShapeOp("Tile", "tile_dim", {{"repeats", {k2p62, 1}}}));
  ok &= writeModel("reshape_overflow.onnx",
                   oneShapeOp("Reshape", "reshape_ovf", {{"shape", {k2p32, k2p32}}}));
  ok &= writeModel("reshape_infer_overflow.onnx",
                   oneShapeOp("Reshape", "reshape_inf", {{"shape", {-1, k2p32, k2p32}}}));
  {
    onnx::ModelProto m = oneShapeOp("Split", "split_ovf", {{"split", {kMax, 10}}});
    m.mutable_graph()->mutable_node(0)->add_output("y2");
    ok &= writeModel("split_overflow.onnx", m);
  }
  ok &= writeModel("pad_overflow.onnx", oneShapeOp("Pad", "pad_ovf", {{"pads", {kMax, 0, 1, 0}}}));
  ok &= writeModel("pad_huge.onnx", oneShapeOp("Pad", "pad_huge", {{"pads", {k2p62, 0, 0, 0}}}));
  {
    // Each input fits ([2^31, 1] and [1, 2^31] f32, 8 GiB); their broadcast sum has 2^62 elements.
    onnx::ModelProto m = newModel(13);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "a", {int64_t(1) << 31, 1});
    addTensorValue(g->add_input(), "b", {1, int64_t(1) << 31});
    addNode(g, "add_huge", "Add", {"a", "b"}, {"y"});
    addTensorValue(g->add_output(), "y", {int64_t(1) << 31, int64_t(1) << 31});
    ok &= writeModel("add_result_huge.onnx", m);
  }
  {
    onnx::ModelProto m = newModel(13);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {k2p62, 4});
    addNode(g, "relu_big_input", "Relu", {"x"}, {"y"});
    addTensorValue(g->add_output(), "y", {k2p62, 4});
    ok &= writeModel("graph_input_overflow.onnx", m);
  }
  {
    // x: f32[1,1,8,8] -> MaxPool 2x2 (its plan is then given a 2^40 kernel by make_error_plans).
    onnx::ModelProto m = newModel(13);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {1, 1, 8, 8});
    onnx::NodeProto* n = addNode(g, "pool", "MaxPool", {"x"}, {"y"});
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("kernel_shape");
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(2);
    a->add_ints(2);
    addTensorValue(g->add_output(), "y", {1, 1, 7, 7});
    ok &= writeModel("good_maxpool.onnx", m);
  }
  {
    // x: f32[1,1,6,6] -> Conv (w: 2x1x3x3) -> [1,2,4,4] -> Reshape [2,16] -> MatMul (m: 16x3)
    // -> [2,3] -> Transpose -> y [3,2]: one step per op, for make_error_plans to corrupt.
    onnx::ModelProto m = newModel(13);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "x", {1, 1, 6, 6});
    addInitializer(g, "w", {2, 1, 3, 3}, -1.f);
    addInt64Init(g, "shape", {2, 16});
    addInitializer(g, "m", {16, 3}, -2.f);
    addNode(g, "conv", "Conv", {"x", "w"}, {"c"});
    addNode(g, "reshape", "Reshape", {"c", "shape"}, {"r"});
    addNode(g, "matmul", "MatMul", {"r", "m"}, {"p"});
    onnx::NodeProto* t = addNode(g, "transpose", "Transpose", {"p"}, {"y"});
    onnx::AttributeProto* perm = t->add_attribute();
    perm->set_name("perm");
    perm->set_type(onnx::AttributeProto::INTS);
    perm->add_ints(1);
    perm->add_ints(0);
    addTensorValue(g->add_output(), "y", {3, 2});
    ok &= writeModel("good_chain.onnx", m);
  }

  // Control flow with a malformed body: Scan 'bad_scan' has a state variable and a scan output
  // (2 outputs) but its body returns only the state.
  {
    onnx::ModelProto m = newModel(16);
    onnx::GraphProto* g = m.mutable_graph();
    addTensorValue(g->add_input(), "init", {2});
    addTensorValue(g->add_input(), "xs", {3, 2});
    onnx::NodeProto* scan = addNode(g, "bad_scan", "Scan", {"init", "xs"}, {"final", "all"});
    onnx::AttributeProto* n = scan->add_attribute();
    n->set_name("num_scan_inputs");
    n->set_type(onnx::AttributeProto::INT);
    n->set_i(1);
    onnx::AttributeProto* body = scan->add_attribute();
    body->set_name("body");
    body->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* b = body->mutable_g();
    b->set_name("scan_body");
    addTensorValue(b->add_input(), "sum_in", {2});
    addTensorValue(b->add_input(), "next", {2});
    addNode(b, "acc", "Add", {"sum_in", "next"}, {"sum_out"});
    addTensorValue(b->add_output(), "sum_out", {2});
    addTensorValue(g->add_output(), "final", {2});
    addTensorValue(g->add_output(), "all", {3, 2});
    ok &= writeModel("bad_scan_body.onnx", m);
  }

  return ok ? 0 : 1;
}

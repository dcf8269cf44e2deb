// Writes the ONNX models of the must-fail tests (one defect each) plus good_add.onnx, a valid
// model the run-time error tests compile. usage: make_error_models OUT_DIR
#include <onnx/onnx_pb.h>

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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_error_models OUT_DIR\n");
    return 2;
  }
  g_dir = argv[1];
  bool ok = true;

  ok &= writeModel("good_add.onnx", goodAdd(13));
  ok &= writeModel("opset18.onnx", goodAdd(18));

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

  return ok ? 0 : 1;
}

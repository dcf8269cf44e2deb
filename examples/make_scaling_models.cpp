// Writes large synthetic ONNX models for compile-time scaling measurements (not a test):
// scripts/bench/compile-scaling.sh compiles them with `tandem compile` and prints the times.
//
//   make_scaling_models OUT_DIR KIND N [SEED]
//
// KIND chain: y = Relu(Relu(...Relu(x))), N Relu ops on f32[1,16] (one element-wise group).
// KIND dag:   N element-wise ops on f32[1,16], each reading one or two earlier values picked at
//             random (fixed SEED, most from the last 8 so chains form, some from anywhere so groups
//             have outside readers and convexity matters); Relu, Neg, Add, Mul, Sub. The last
//             value and every 1000th are graph outputs.
// The file is OUT_DIR/KIND_N.onnx.
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

namespace {

void tensorValue(onnx::ValueInfoProto* v, const std::string& name) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(1);
  tt->mutable_shape()->add_dim()->set_dim_value(16);
}

std::string valueName(int64_t i) { return i < 0 ? "x" : "v" + std::to_string(i); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: make_scaling_models OUT_DIR chain|dag N [SEED]\n");
    return 2;
  }
  std::string dir = argv[1], kind = argv[2];
  int64_t n = std::atoll(argv[3]);
  unsigned seed = argc > 4 ? (unsigned)std::atoi(argv[4]) : 1;
  if ((kind != "chain" && kind != "dag") || n < 1) {
    std::fprintf(stderr, "make_scaling_models: KIND is chain or dag, N >= 1\n");
    return 2;
  }
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("tandem make_scaling_models");
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name(kind);
  tensorValue(g->add_input(), "x");
  std::mt19937_64 rng(seed);
  const char* unary[] = {"Relu", "Neg"};
  const char* binary[] = {"Add", "Mul", "Sub"};
  for (int64_t i = 0; i < n; ++i) {
    onnx::NodeProto* node = g->add_node();
    node->set_name("n" + std::to_string(i));
    if (kind == "chain") {
      node->set_op_type("Relu");
      node->add_input(valueName(i - 1));
    } else {
      auto pick = [&]() -> int64_t {
        if (i == 0) return -1;
        bool near = rng() % 8 != 0;
        int64_t back = near ? 1 + (int64_t)(rng() % 8) : 1 + (int64_t)(rng() % (uint64_t)i);
        return std::max<int64_t>(-1, i - back);
      };
      if (rng() % 2) {
        node->set_op_type(unary[rng() % 2]);
        node->add_input(valueName(pick()));
      } else {
        node->set_op_type(binary[rng() % 3]);
        node->add_input(valueName(pick()));
        node->add_input(valueName(pick()));
      }
    }
    node->add_output(valueName(i));
    if (i == n - 1 || (kind == "dag" && i % 1000 == 999)) tensorValue(g->add_output(), valueName(i));
  }
  std::string path = dir + "/" + kind + "_" + std::to_string(n) + ".onnx";
  std::string bytes;
  if (!m.SerializeToString(&bytes)) {
    std::fprintf(stderr, "make_scaling_models: serialization failed (model over 2 GiB?)\n");
    return 1;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), (std::streamsize)bytes.size());
  if (!out) {
    std::fprintf(stderr, "make_scaling_models: cannot write %s\n", path.c_str());
    return 1;
  }
  std::printf("%s\n", path.c_str());
  return 0;
}

// upgrade_opset IN.onnx OUT.onnx OPSET: rewrites a model of opset <= 17 as opsets 18-25 spell it,
// for e2e.newer_opsets (real models through the importer's opset-18+ path; Debian's onnx has
// no converter past 17). What changed for the ops of such models: Reduce*-18 (but ReduceSum)
// take axes as input 1 instead of an attribute; RoiAlign-16 made half_pixel the default
// coordinate transformation (older models get output_half_pixel written out). Subgraphs too.
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

namespace {

int g_count = 0;

void upgrade(onnx::GraphProto* g, int64_t oldOpset) {
  static const std::set<std::string> reductions = {
      "ReduceMean", "ReduceMax",    "ReduceMin",       "ReduceProd",     "ReduceL1",
      "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  for (onnx::NodeProto& n : *g->mutable_node()) {
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.has_g()) upgrade(a.mutable_g(), oldOpset);
      for (onnx::GraphProto& sub : *a.mutable_graphs()) upgrade(&sub, oldOpset);
    }
    if (n.op_type() == "RoiAlign" && oldOpset < 16) {
      bool has = false;
      for (const auto& a : n.attribute()) has |= a.name() == "coordinate_transformation_mode";
      if (!has) {
        onnx::AttributeProto* a = n.add_attribute();
        a->set_name("coordinate_transformation_mode");
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s("output_half_pixel");
      }
    }
    if (!reductions.count(n.op_type())) continue;
    for (int i = 0; i < n.attribute_size(); ++i) {
      if (n.attribute(i).name() != "axes") continue;
      const std::string name = "upgrade_axes_" + std::to_string(g_count++);
      onnx::TensorProto* t = g->add_initializer();
      t->set_name(name);
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_dims(n.attribute(i).ints_size());
      for (int64_t v : n.attribute(i).ints()) t->add_int64_data(v);
      n.mutable_attribute()->DeleteSubrange(i, 1);
      n.add_input(name);
      break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: upgrade_opset IN.onnx OUT.onnx OPSET\n");
    return 2;
  }
  onnx::ModelProto m;
  std::ifstream in(argv[1], std::ios::binary);
  if (!m.ParseFromIstream(&in)) {
    std::fprintf(stderr, "upgrade_opset: cannot read %s\n", argv[1]);
    return 1;
  }
  int64_t oldOpset = 0;
  for (auto& o : *m.mutable_opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      oldOpset = o.version();
      o.set_version(std::atoll(argv[3]));
    }
  if (oldOpset > 17) {
    std::fprintf(stderr, "upgrade_opset: %s is already opset %lld\n", argv[1], (long long)oldOpset);
    return 1;
  }
  upgrade(m.mutable_graph(), oldOpset);
  std::ofstream out(argv[2], std::ios::binary);
  if (!m.SerializeToOstream(&out)) {
    std::fprintf(stderr, "upgrade_opset: cannot write %s\n", argv[2]);
    return 1;
  }
  std::printf("%s: opset %lld -> %s, %d reduction axes moved to inputs\n", argv[2],
              (long long)oldOpset, argv[3], g_count);
  return 0;
}

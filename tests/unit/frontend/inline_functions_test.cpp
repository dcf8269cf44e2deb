// Tests of frontend/InlineFunctions.h on hand-written protos: calls replaced by renamed bodies
// (nested calls, an omitted output, two unnamed calls, attribute references given and not
// given, calls inside an If's branch, a body's If reading the body's values), and the errors
// (recursion, another default-domain opset, too many inputs). e2e.small_models runs a model with
// functions (local_functions) against numpy.
#include <gtest/gtest.h>
#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include "frontend/InlineFunctions.h"

namespace tandem {
namespace {

onnx::NodeProto* addNode(google::protobuf::RepeatedPtrField<onnx::NodeProto>* nodes,
                         const std::string& op, std::vector<std::string> ins,
                         std::vector<std::string> outs, const std::string& domain = "",
                         const std::string& name = "") {
  onnx::NodeProto* n = nodes->Add();
  n->set_op_type(op);
  n->set_domain(domain);
  n->set_name(name);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

onnx::ModelProto modelWithOpset(int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  onnx::OperatorSetIdProto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  o = m.add_opset_import();
  o->set_domain("f");
  o->set_version(1);
  return m;
}

// Act(X; alpha) = LeakyRelu(X, alpha = @alpha); Pair(X) = (Act(Neg(X)), X) with alpha 0.5.
onnx::ModelProto twoFunctions() {
  onnx::ModelProto m = modelWithOpset(18);
  onnx::FunctionProto* act = m.add_functions();
  act->set_domain("f");
  act->set_name("Act");
  act->add_input("X");
  act->add_output("Y");
  act->add_attribute("alpha");
  act->add_opset_import()->set_version(18);
  onnx::NodeProto* lr = addNode(act->mutable_node(), "LeakyRelu", {"X"}, {"Y"});
  onnx::AttributeProto* ref = lr->add_attribute();
  ref->set_name("alpha");
  ref->set_ref_attr_name("alpha");
  ref->set_type(onnx::AttributeProto::FLOAT);
  onnx::FunctionProto* pair = m.add_functions();
  pair->set_domain("f");
  pair->set_name("Pair");
  pair->add_input("X");
  pair->add_output("A");
  pair->add_output("B");
  addNode(pair->mutable_node(), "Neg", {"X"}, {"n"});
  onnx::NodeProto* call = addNode(pair->mutable_node(), "Act", {"n"}, {"A"}, "f");
  onnx::AttributeProto* half = call->add_attribute();
  half->set_name("alpha");
  half->set_type(onnx::AttributeProto::FLOAT);
  half->set_f(0.5f);
  addNode(pair->mutable_node(), "Identity", {"X"}, {"B"});
  return m;
}

const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

TEST(InlineFunctions, NestedCallsRenamedAndAttributesBound) {
  onnx::ModelProto m = twoFunctions();
  onnx::GraphProto* g = m.mutable_graph();
  addNode(g->mutable_node(), "Pair", {"x"}, {"a"}, "f");  // output B left out, no node name
  addNode(g->mutable_node(), "Pair", {"a"}, {"b", "c"}, "f");
  addNode(g->mutable_node(), "Act", {"x"}, {"d"}, "f", "act");  // alpha not given
  std::string error;
  ASSERT_TRUE(inlineLocalFunctions(&m, &error)) << error;
  EXPECT_EQ(m.functions_size(), 0);
  // Per Pair: Neg, LeakyRelu, Identity; then the one LeakyRelu of Act.
  ASSERT_EQ(g->node_size(), 7);
  EXPECT_EQ(g->node(0).op_type(), "Neg");
  EXPECT_EQ(g->node(0).input(0), "x");
  EXPECT_EQ(g->node(1).op_type(), "LeakyRelu");
  EXPECT_EQ(g->node(1).input(0), g->node(0).output(0));
  EXPECT_EQ(g->node(1).output(0), "a");
  ASSERT_NE(attr(g->node(1), "alpha"), nullptr);
  EXPECT_FLOAT_EQ(attr(g->node(1), "alpha")->f(), 0.5f);
  EXPECT_TRUE(attr(g->node(1), "alpha")->ref_attr_name().empty());
  // The left-out output B got a name of its own; the second call's is "c".
  EXPECT_EQ(g->node(2).op_type(), "Identity");
  EXPECT_NE(g->node(2).output(0), "");
  EXPECT_EQ(g->node(5).output(0), "c");
  // The two unnamed calls' internals do not collide.
  EXPECT_NE(g->node(0).output(0), g->node(3).output(0));
  EXPECT_NE(g->node(0).name(), g->node(3).name());
  EXPECT_EQ(g->node(3).input(0), "a");
  // Act called without alpha: the attribute is dropped (LeakyRelu's default).
  EXPECT_EQ(g->node(6).op_type(), "LeakyRelu");
  EXPECT_EQ(attr(g->node(6), "alpha"), nullptr);
  EXPECT_EQ(g->node(6).name(), "act/LeakyRelu");
}

TEST(InlineFunctions, CallsInsideSubgraphsAndBodySubgraphs) {
  onnx::ModelProto m = twoFunctions();
  // A function whose If branch reads the body's value t.
  onnx::FunctionProto* branchy = m.add_functions();
  branchy->set_domain("f");
  branchy->set_name("Branchy");
  branchy->add_input("C");
  branchy->add_input("X");
  branchy->add_output("Y");
  addNode(branchy->mutable_node(), "Abs", {"X"}, {"t"});
  onnx::NodeProto* iff = addNode(branchy->mutable_node(), "If", {"C"}, {"Y"});
  for (const char* branch : {"then_branch", "else_branch"}) {
    onnx::AttributeProto* a = iff->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    addNode(a->mutable_g()->mutable_node(), "Identity", {"t"}, {"out"});
    a->mutable_g()->add_output()->set_name("out");
  }
  onnx::GraphProto* g = m.mutable_graph();
  addNode(g->mutable_node(), "Branchy", {"c", "x"}, {"y"}, "f", "br");
  // An If of the main graph whose branch calls Act.
  onnx::NodeProto* outer = addNode(g->mutable_node(), "If", {"c"}, {"z"});
  onnx::AttributeProto* then = outer->add_attribute();
  then->set_name("then_branch");
  then->set_type(onnx::AttributeProto::GRAPH);
  addNode(then->mutable_g()->mutable_node(), "Act", {"x"}, {"o"}, "f");
  then->mutable_g()->add_output()->set_name("o");
  std::string error;
  ASSERT_TRUE(inlineLocalFunctions(&m, &error)) << error;
  ASSERT_EQ(g->node_size(), 3);
  EXPECT_EQ(g->node(0).op_type(), "Abs");
  const std::string t = g->node(0).output(0);
  EXPECT_EQ(t, "br/t");
  const onnx::GraphProto& inner = attr(g->node(1), "then_branch")->g();
  EXPECT_EQ(inner.node(0).input(0), t);  // the branch reads the renamed t
  EXPECT_EQ(inner.output(0).name(), "out");  // its own value keeps its name
  const onnx::GraphProto& called = attr(g->node(2), "then_branch")->g();
  ASSERT_EQ(called.node_size(), 1);
  EXPECT_EQ(called.node(0).op_type(), "LeakyRelu");
  EXPECT_EQ(called.node(0).output(0), "o");
}

// IR 9's attribute defaults (FunctionProto.attribute_proto, field 11) and IR 10's overloads
// (FunctionProto field 13, NodeProto field 8), fields Debian's onnx 1.12 keeps as unknown ones.
TEST(InlineFunctions, AttributeDefaultsAndOverloads) {
  onnx::ModelProto m = twoFunctions();
  onnx::FunctionProto* act = m.mutable_functions(0);  // Act(X; alpha)
  onnx::AttributeProto dflt;
  dflt.set_name("alpha");
  dflt.set_type(onnx::AttributeProto::FLOAT);
  dflt.set_f(0.25f);
  act->GetReflection()->MutableUnknownFields(act)->AddLengthDelimited(11, dflt.SerializeAsString());
  // An overload "neg" of Act: Neg(X).
  onnx::FunctionProto* neg = m.add_functions();
  neg->set_domain("f");
  neg->set_name("Act");
  neg->add_input("X");
  neg->add_output("Y");
  addNode(neg->mutable_node(), "Neg", {"X"}, {"Y"});
  neg->GetReflection()->MutableUnknownFields(neg)->AddLengthDelimited(13, "neg");
  onnx::GraphProto* g = m.mutable_graph();
  addNode(g->mutable_node(), "Act", {"x"}, {"a"}, "f");  // alpha from the default
  onnx::NodeProto* call = addNode(g->mutable_node(), "Act", {"x"}, {"b"}, "f");
  call->GetReflection()->MutableUnknownFields(call)->AddLengthDelimited(8, "neg");
  std::string error;
  ASSERT_TRUE(inlineLocalFunctions(&m, &error)) << error;
  ASSERT_EQ(g->node_size(), 2);
  ASSERT_NE(attr(g->node(0), "alpha"), nullptr);
  EXPECT_FLOAT_EQ(attr(g->node(0), "alpha")->f(), 0.25f);
  EXPECT_EQ(g->node(1).op_type(), "Neg");
  EXPECT_EQ(g->node(1).output(0), "b");
}

TEST(InlineFunctions, Errors) {
  {
    onnx::ModelProto m = modelWithOpset(18);
    onnx::FunctionProto* f = m.add_functions();
    f->set_domain("f");
    f->set_name("Loop1");
    f->add_input("X");
    f->add_output("Y");
    addNode(f->mutable_node(), "Loop2", {"X"}, {"Y"}, "f");
    onnx::FunctionProto* f2 = m.add_functions();
    f2->set_domain("f");
    f2->set_name("Loop2");
    f2->add_input("X");
    f2->add_output("Y");
    addNode(f2->mutable_node(), "Loop1", {"X"}, {"Y"}, "f");
    addNode(m.mutable_graph()->mutable_node(), "Loop1", {"x"}, {"y"}, "f");
    std::string error;
    EXPECT_FALSE(inlineLocalFunctions(&m, &error));
    EXPECT_EQ(error, "function 'Loop1' of domain 'f' calls itself (directly or through others)");
    EXPECT_EQ(m.functions_size(), 2);  // left as it was
    EXPECT_EQ(m.graph().node(0).op_type(), "Loop1");
  }
  {
    onnx::ModelProto m = twoFunctions();
    m.mutable_functions(0)->mutable_opset_import(0)->set_version(13);
    addNode(m.mutable_graph()->mutable_node(), "Act", {"x"}, {"y"}, "f");
    std::string error;
    EXPECT_FALSE(inlineLocalFunctions(&m, &error));
    EXPECT_EQ(error, "function 'Act' of domain 'f' imports opset 13 of the default domain but the "
                     "model imports 18 (its ops would mean another version)");
  }
  {
    onnx::ModelProto m = twoFunctions();
    addNode(m.mutable_graph()->mutable_node(), "Act", {"x", "extra"}, {"y"}, "f", "a");
    std::string error;
    EXPECT_FALSE(inlineLocalFunctions(&m, &error));
    EXPECT_EQ(error, "node 'a' calls function 'Act' of domain 'f' with 2 inputs and 1 outputs; it "
                     "declares 1 and 1");
  }
}

}  // namespace
}  // namespace tandem

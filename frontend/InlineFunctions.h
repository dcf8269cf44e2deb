// Model-local functions (ModelProto.functions, ONNX IR 8+): exporters such as PyTorch's
// dynamo-based one and onnxscript write a module or a composite op as a FunctionProto of a
// custom domain and call it by (domain, name) like an op. Tandem compiles plain graphs, so the
// importer first replaces every call by the function's body (ONNX's inliner does the same,
// onnx/inliner/inliner.h, which Debian's onnx 1.12 does not have). No MLIR here.
#pragma once
#include <string>

namespace onnx {
class ModelProto;
}

namespace tandem {

/// Replaces, in the main graph and in every subgraph (If, Loop, Scan bodies), each node that
/// calls one of `model`'s functions by that function's body, recursively (a body may call
/// other functions), then clears model->functions. Per call: the body's formal inputs and
/// outputs become the call's values (an input the call leaves out is absent; an output it
/// leaves out gets a name of its own), every other value and node name gets the prefix
/// "<call node name>/" (made unique), and an attribute that refers to one of the function's
/// (ref_attr_name) takes the call's value of it, else the function's default
/// (attribute_proto, IR 9), else is dropped (the op's own default). Calls match functions by
/// domain, name and overload (IR 10). Those newer fields are read from the protobuf's unknown
/// fields, which Debian's onnx 1.12 schema keeps.
/// Errors (the model is left as it was): a recursive call chain, a call with more inputs or
/// outputs than the function declares, and a function that imports another version of the
/// default domain than the model (its ops would mean something else); each names the
/// function.
bool inlineLocalFunctions(onnx::ModelProto* model, std::string* error);

}  // namespace tandem

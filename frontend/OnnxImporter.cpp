// ONNX ModelProto → tandem dialect: one translation class, node by node (like Toy's MLIRGen).
#include "frontend/OnnxImporter.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "compiler/Compiler.h"
#include "compiler/ConstantFold.h"
#include "compiler/IrConventions.h"
#include "compiler/OpBuilding.h"
#include "compiler/ShapeInference.h"
#include "compiler/TandemDialect.h"
#include "compiler/autodiff/GradientRules.h"
#include "frontend/EmbeddingBagLoop.h"
#include "frontend/InlineFunctions.h"
#include "frontend/NewerOpsets.h"
#include "frontend/OnnxTensor.h"
#include "passes/Passes.h"
#include "runtime/FileIO.h"
#include "runtime/Half.h"
#include "runtime/OpTable.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

namespace tandem {
namespace {

constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = kNewestOpset;  // 18-25 node by node: NewerOpsets.h
// Subgraphs inside subgraphs inside ...: each level is compiled while its parent is imported.
constexpr int kMaxControlFlowDepth = 8;

bool isDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// The optimizer updates (Adam, Adagrad, Momentum) live in this domain, at version 1 only.
constexpr const char* kPreviewTrainingDomain = "ai.onnx.preview.training";
// ONNX Runtime's contrib ops: only MatMulNBits (its 2-8-bit weight-only MatMul) is taken.
constexpr const char* kMicrosoftDomain = "com.microsoft";

const char* attrTypeName(onnx::AttributeProto::AttributeType t) {
  switch (t) {
    case onnx::AttributeProto::FLOAT: return "FLOAT";
    case onnx::AttributeProto::INT: return "INT";
    case onnx::AttributeProto::STRING: return "STRING";
    case onnx::AttributeProto::TENSOR: return "TENSOR";
    case onnx::AttributeProto::GRAPH: return "GRAPH";
    case onnx::AttributeProto::SPARSE_TENSOR: return "SPARSE_TENSOR";
    case onnx::AttributeProto::TYPE_PROTO: return "TYPE_PROTO";
    case onnx::AttributeProto::FLOATS: return "FLOATS";
    case onnx::AttributeProto::INTS: return "INTS";
    case onnx::AttributeProto::STRINGS: return "STRINGS";
    case onnx::AttributeProto::TENSORS: return "TENSORS";
    case onnx::AttributeProto::GRAPHS: return "GRAPHS";
    case onnx::AttributeProto::SPARSE_TENSORS: return "SPARSE_TENSORS";
    case onnx::AttributeProto::TYPE_PROTOS: return "TYPE_PROTOS";
    default: return "UNDEFINED";
  }
}

// Resize-18's keep_aspect_ratio_policy as the node gives it ("stretch" when absent).
std::string resizeAspectPolicy(const onnx::NodeProto& n) {
  for (const onnx::AttributeProto& a : n.attribute())
    if (a.name() == "keep_aspect_ratio_policy") return a.s();
  return "stretch";
}

// Models older than IR version 0.0.2 may leave AttributeProto.type unset; the filled field says.
onnx::AttributeProto::AttributeType attrType(const onnx::AttributeProto& a) {
  if (a.type() != onnx::AttributeProto::UNDEFINED) return a.type();
  if (a.has_f()) return onnx::AttributeProto::FLOAT;
  if (a.has_i()) return onnx::AttributeProto::INT;
  if (a.has_s()) return onnx::AttributeProto::STRING;
  if (a.has_t()) return onnx::AttributeProto::TENSOR;
  if (a.has_g()) return onnx::AttributeProto::GRAPH;
  if (a.floats_size()) return onnx::AttributeProto::FLOATS;
  if (a.ints_size()) return onnx::AttributeProto::INTS;
  if (a.strings_size()) return onnx::AttributeProto::STRINGS;
  return onnx::AttributeProto::UNDEFINED;
}

std::string oneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// A 0-D tensor of dtype dt holding v (the 16-bit floats rounded to nearest even).
Tensor scalarOf(DType dt, double v) {
  Tensor t = Tensor::alloc(dt, {});
  if (dt == DType::F16 || dt == DType::BF16) {
    *t.data<uint16_t>() = narrowFromDouble(v, dt == DType::BF16);
    return t;
  }
  dispatchDType(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) *t.data<uint8_t>() = v != 0;
    else *t.data<T>() = static_cast<T>(v);
  });
  return t;
}

bool isControlFlow(const std::string& op) { return op == "If" || op == "Loop" || op == "Scan"; }

// The values graph `g` (and the subgraphs inside it) reads from enclosing scopes, in order of
// first use: ONNX subgraphs see outer values by name; Tandem passes them as operands.
void collectOuterReads(const onnx::GraphProto& g, std::unordered_set<std::string> bound,
                       std::vector<std::string>* out) {
  for (const auto& i : g.input()) bound.insert(i.name());
  for (const auto& t : g.initializer()) bound.insert(t.name());
  for (const auto& n : g.node())
    for (const std::string& o : n.output()) bound.insert(o);
  auto use = [&](const std::string& name) {
    if (!name.empty() && !bound.count(name) && std::find(out->begin(), out->end(), name) == out->end())
      out->push_back(name);
  };
  for (const auto& n : g.node()) {
    for (const std::string& i : n.input()) use(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collectOuterReads(a.g(), bound, out);
      for (const auto& sub : a.graphs()) collectOuterReads(sub, bound, out);
    }
  }
  for (const auto& o : g.output()) use(o.name());
}

// ai.onnx.preview.training.Gradient: a graph op that differentiates another value of the graph.
bool isGradientOp(const onnx::NodeProto& n) {
  return n.op_type() == "Gradient" && n.domain() == "ai.onnx.preview.training";
}

// The outer values node `n`'s subgraphs read (and the `y` a Gradient differentiates).
std::vector<std::string> outerReadsOf(const onnx::NodeProto& n) {
  std::vector<std::string> reads;
  if (isGradientOp(n))
    for (const auto& a : n.attribute())
      if (a.name() == "y") reads.push_back(a.s());
  for (const auto& a : n.attribute())
    if (a.has_g()) collectOuterReads(a.g(), {}, &reads);
  return reads;
}

/// The node being translated: its ONNX form after normalisation to opset 17.
struct NodeForm {
  std::string opType;
  llvm::SmallVector<mlir::Value> operands;          // null = skipped optional input
  std::map<std::string, mlir::Attribute> attrs;     // ONNX name → MLIR attribute
  unsigned numResults = 1;
};

class OnnxImporter {
 public:
  OnnxImporter(mlir::MLIRContext* ctx, std::string source, const ImportOptions& options,
               int depth = 0)
      : ctx_(ctx), b_(ctx), source_(std::move(source)), options_(options),
        fileLoc_(mlir::FileLineColLoc::get(ctx, source_, 0, 0)), depth_(depth) {}

  mlir::OwningOpRef<mlir::ModuleOp> import(const onnx::ModelProto& model, std::string* error);

 private:
  // ---- steps, in order ----
  mlir::LogicalResult checkOpsets(const onnx::ModelProto& model);
  mlir::LogicalResult indexGraph();
  mlir::LogicalResult sortNodes(std::vector<int>* order);
  mlir::LogicalResult declareInputs(llvm::SmallVectorImpl<mlir::Type>* argTypes);
  mlir::LogicalResult importNode(int index);
  mlir::LogicalResult buildReturn(mlir::func::FuncOp func, llvm::ArrayRef<mlir::Type> argTypes);

  // ---- node translation helpers ----
  mlir::LogicalResult checkLegacyOp(int index);
  mlir::LogicalResult convertAttribute(int index, const onnx::AttributeProto& a,
                                       mlir::Attribute* out);
  mlir::LogicalResult normalise(int index, mlir::Location loc, NodeForm* f);
  mlir::LogicalResult normaliseNewer(int index, mlir::Location loc, NodeForm* f);
  mlir::LogicalResult expandNewOp(int index, mlir::Location loc, const std::string& op,
                                  NodeForm* f);
  // Each value name read other than as DequantizeLinear's x or zero point: its first such
  // (node, input); built at the first INT4/UINT4 initializer (valueFor).
  std::optional<std::unordered_map<std::string, std::pair<int, int>>> notDequantized_;
  mlir::LogicalResult checkDomain(int index);
  /// ONNX Runtime's MatMulNBits (com.microsoft-1) as Tandem's DequantizeMatMul: the packed
  /// weights, scales and zero points unpacked into B [K, N], [blocks, N] and [blocks, N].
  mlir::LogicalResult convertMatMulNBits(int index, mlir::Location loc, NodeForm* f);
  mlir::LogicalResult importConstant(int index, mlir::Location loc);
  mlir::LogicalResult importCoercedSoftmax(int index, mlir::Location loc, NodeForm* f);
  mlir::LogicalResult importControlFlow(int index, mlir::Location loc);
  /// torch.onnx's EmbeddingBag Loop as one EmbeddingBag op: true when built, false when node
  /// `index` is not that Loop (it is imported as a Loop).
  mlir::FailureOr<bool> importEmbeddingBagLoop(int index, mlir::Location loc);
  mlir::LogicalResult importGradient(int index, mlir::Location loc);
  mlir::LogicalResult compileSubgraph(int index, const std::string& attr, onnx::ModelProto model,
                                      std::string* planBytes);
  mlir::LogicalResult setSubgraphType(int index, const std::string& attr,
                                      onnx::ValueInfoProto* info, mlir::Type type, bool dynamicAllowed = false);
  mlir::LogicalResult compileEagerSubgraph(int index, const std::string& attr, onnx::ModelProto model,
                                           std::string* planBytes);
  mlir::LogicalResult importSubgraph(int index, const std::string& attr, const onnx::ModelProto& model,
                                     mlir::OwningOpRef<mlir::ModuleOp>* out);
  mlir::FailureOr<mlir::Operation*> create(int index, mlir::Location loc, const NodeForm& f);
  /// create's first result; null when it failed (the error is recorded).
  mlir::Value createValue(int index, mlir::Location loc, const NodeForm& f) {
    auto built = create(index, loc, f);
    return mlir::failed(built) ? mlir::Value() : (*built)->getResult(0);
  }
  void foldEarly(mlir::Operation* op, const std::string& type,
                 llvm::SmallVectorImpl<mlir::Value>* results);
  mlir::Value constInts(mlir::Location loc, llvm::ArrayRef<int64_t> v);
  mlir::Value valueFor(const std::string& name);
  mlir::Location nodeLoc(int index);

  // ---- errors ----
  std::string nodeLabel(int index) const;
  mlir::LogicalResult fail(const std::string& msg);
  mlir::LogicalResult failNode(int index, const std::string& reason);
  /// The first error diagnostic MLIR emitted since the last call, "" if none.
  std::string takeDiagnostic();

  mlir::MLIRContext* ctx_;
  mlir::OpBuilder b_;
  std::string source_;
  const ImportOptions& options_;
  mlir::Location fileLoc_;
  const onnx::ModelProto* model_ = nullptr;
  const onnx::GraphProto* graph_ = nullptr;
  int depth_ = 0;  // control-flow nesting: 0 for the model's graph, 1 for its subgraphs, ...
  int64_t opset_ = 0;
  int64_t previewTrainingOpset_ = 0;  // version of ai.onnx.preview.training imported, 0 if none
  int64_t microsoftOpset_ = 0;        // version of com.microsoft imported, 0 if none

  std::unordered_map<std::string, const onnx::TensorProto*> initializers_;
  std::unordered_map<std::string, int> producer_;  // value name → index of the node making it
  std::unordered_set<std::string> graphInputs_;    // declared graph inputs (incl. initializers)
  std::unordered_map<std::string, mlir::Value> values_;
  // The constants of f32/f64/f16/bf16 initializers (valueFor): weights, which foldEarly keeps.
  llvm::DenseSet<mlir::Value> floatInitializers_;

  std::string error_;
  std::string diagnostic_;
};

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

std::string OnnxImporter::nodeLabel(int index) const {
  const onnx::NodeProto& n = graph_->node(index);
  std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
  return "node '" + name + "' (" + n.op_type() + ")";
}

mlir::LogicalResult OnnxImporter::fail(const std::string& msg) {
  if (error_.empty()) error_ = oneLine(source_ + ": " + msg);
  return mlir::failure();
}

mlir::LogicalResult OnnxImporter::failNode(int index, const std::string& reason) {
  return fail(nodeLabel(index) + ": " + reason);
}

std::string OnnxImporter::takeDiagnostic() {
  std::string d = std::move(diagnostic_);
  diagnostic_.clear();
  return d;
}

// ---------------------------------------------------------------------------------------------
// The translation
// ---------------------------------------------------------------------------------------------

mlir::OwningOpRef<mlir::ModuleOp> OnnxImporter::import(const onnx::ModelProto& model,
                                                        std::string* error) {
  ctx_->getOrLoadDialect<TandemDialect>();
  ctx_->getOrLoadDialect<mlir::func::FuncDialect>();
  // Shape errors arrive as diagnostics from createTandemOp; keep the first, report it per node.
  mlir::ScopedDiagnosticHandler handler(ctx_, [&](mlir::Diagnostic& d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error && diagnostic_.empty())
      diagnostic_ = d.str();
    return mlir::success();
  });

  auto done = [&](mlir::OwningOpRef<mlir::ModuleOp> m) {
    if (!m && error) *error = error_.empty() ? source_ + ": import failed" : error_;
    return m;
  };

  if (!model.has_graph()) {
    (void)fail("not a valid ONNX model (no graph)");
    return done(nullptr);
  }
  model_ = &model;
  graph_ = &model.graph();
  if (mlir::failed(checkOpsets(model)) || mlir::failed(indexGraph())) return done(nullptr);
  std::vector<int> order;
  if (mlir::failed(sortNodes(&order))) return done(nullptr);

  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(fileLoc_);
  auto func = mlir::func::FuncOp::create(fileLoc_, "main", b_.getFunctionType({}, {}));
  module->push_back(func);
  mlir::Block* entry = func.addEntryBlock();
  b_.setInsertionPointToStart(entry);

  llvm::SmallVector<mlir::Type> argTypes;
  if (mlir::failed(declareInputs(&argTypes))) return done(nullptr);
  for (int index : order)
    if (mlir::failed(importNode(index))) return done(nullptr);
  if (mlir::failed(buildReturn(func, argTypes))) return done(nullptr);
  return done(std::move(module));
}

mlir::LogicalResult OnnxImporter::checkOpsets(const onnx::ModelProto& model) {
  bool found = false;
  for (const auto& o : model.opset_import()) {
    if (o.domain() == kPreviewTrainingDomain) previewTrainingOpset_ = o.version();
    if (o.domain() == kMicrosoftDomain) microsoftOpset_ = o.version();
    if (!isDefaultDomain(o.domain())) continue;  // other domains are checked per node
    found = true;
    opset_ = o.version();
  }
  // IR version 1-2 models predate opset_import and mean opset 1. A later model without a
  // default-domain entry may only use other domains (indexGraph rejects it otherwise).
  if (!found) {
    opset_ = model.ir_version() < 3 ? 1 : 0;
    if (opset_ == 0) return mlir::success();
  }
  if (opset_ < 1 || opset_ > kMaxOpset) {
    return fail("unsupported opset " + std::to_string(opset_) + " (supported: " +
                std::to_string(kMinOpset) + "–" + std::to_string(kMaxOpset) + ")");
  }
  return mlir::success();
}

// Ops of opsets 1–6 are accepted where their definition is still the one in force at opset 7
// (Elu-6, Softplus-1, GlobalAveragePool-1, ...), or where the legacy form has an exact opset-17
// rewrite (the broadcast/axis attributes of Add-6 and friends, is_test/consumed_inputs, ...).
mlir::LogicalResult OnnxImporter::checkLegacyOp(int index) {
  if (opset_ >= kMinOpset) return mlir::success();
  const std::string& op = graph_->node(index).op_type();
  const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(op, (int)opset_, "");
  const onnx::OpSchema* s7 = onnx::OpSchemaRegistry::Schema(op, (int)kMinOpset, "");
  if (!s) return failNode(index, op + " is not defined in opset " + std::to_string(opset_));
  if (s7 && s7->SinceVersion() == s->SinceVersion()) return mlir::success();
  static const std::unordered_set<std::string> rewritten = {
      "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "Gemm",
      "BatchNormalization", "Dropout", "AveragePool", "PRelu"};
  if (rewritten.count(op)) return mlir::success();
  return failNode(index, op + "-" + std::to_string(s->SinceVersion()) + " (opset " +
                             std::to_string(opset_) +
                             ") is not supported: its definition changed in opset " +
                             std::to_string(s7 ? s7->SinceVersion() : kMinOpset) +
                             " (supported: " + std::to_string(kMinOpset) + "–" +
                             std::to_string(kMaxOpset) + ")");
}

// Checks every node before building anything, so the first reported error is the first bad node
// in file order: foreign domain, unknown op, legacy op, or an input nothing produces.
mlir::LogicalResult OnnxImporter::indexGraph() {
  for (const auto& init : graph_->initializer()) initializers_[init.name()] = &init;
  for (const auto& in : graph_->input()) graphInputs_.insert(in.name());
  for (const auto& [name, _] : options_.constantInputs) {
    if (!graphInputs_.count(name))
      return fail("constant input '" + name + "' is not a graph input of the model");
  }

  for (int i = 0; i < graph_->node_size(); ++i) {
    const onnx::NodeProto& n = graph_->node(i);
    for (const std::string& out : n.output()) {
      if (out.empty()) continue;
      if (producer_.count(out)) {
        return failNode(i, "output '" + out + "' is also produced by " +
                               nodeLabel(producer_[out]) + " (a value must have one producer)");
      }
      if (graphInputs_.count(out) || initializers_.count(out))
        return failNode(i, "output '" + out + "' has the name of a graph input or initializer");
      producer_[out] = i;
    }
  }
  for (int i = 0; i < graph_->node_size(); ++i) {
    const onnx::NodeProto& n = graph_->node(i);
    if (mlir::failed(checkDomain(i))) return mlir::failure();
    for (const std::string& in : n.input()) {
      if (in.empty() || producer_.count(in) || graphInputs_.count(in) || initializers_.count(in))
        continue;
      return failNode(i, "input '" + in + "' is not produced by any node, graph input or "
                         "initializer (missing initializer?)");
    }
    for (const std::string& in : outerReadsOf(n)) {
      if (producer_.count(in) || graphInputs_.count(in) || initializers_.count(in)) continue;
      return failNode(i, "a subgraph reads '" + in + "', which no node, graph input or "
                         "initializer of the enclosing graph makes");
    }
    bool anyOutput = std::any_of(n.output().begin(), n.output().end(),
                                 [](const std::string& o) { return !o.empty(); });
    if (!anyOutput) return failNode(i, "has no outputs");
  }
  for (const auto& out : graph_->output()) {
    if (!producer_.count(out.name()) && !graphInputs_.count(out.name()) &&
        !initializers_.count(out.name())) {
      return fail("graph output '" + out.name() +
                  "' is not produced by any node, graph input or initializer");
    }
  }
  return mlir::success();
}

// A node's op must be one of its domain's: the default ONNX domain's ops at the model's opset, or
// the optimizer updates of ai.onnx.preview.training-1. Tandem's own ops (kTandemDomain: the
// backward ops autodiff builds) are in no ONNX domain, so a model cannot name them.
mlir::LogicalResult OnnxImporter::checkDomain(int index) {
  const onnx::NodeProto& n = graph_->node(index);
  const OpInfo* info = findOp(n.op_type());
  if (n.domain() == kPreviewTrainingDomain) {
    // Gradient is lowered at import (importGradient), the others are ops of the table.
    if ((!info || !info->has(kPreviewTraining)) && n.op_type() != "Gradient")
      return failNode(index, "unsupported op type '" + n.op_type() + "' of domain " +
                                 kPreviewTrainingDomain + " (supported: Adagrad, Adam, Gradient, Momentum)");
    if (previewTrainingOpset_ == 0)
      return failNode(index, std::string("the model imports no opset of domain ") +
                                 kPreviewTrainingDomain + " (opset_import)");
    if (previewTrainingOpset_ != 1)
      return failNode(index, std::string("domain ") + kPreviewTrainingDomain + " version " +
                                 std::to_string(previewTrainingOpset_) +
                                 " is not supported (supported: 1)");
    return mlir::success();
  }
  if (n.domain() == kMicrosoftDomain) {
    if (n.op_type() != "MatMulNBits")
      return failNode(index, "unsupported op type '" + n.op_type() + "' of domain " +
                                 kMicrosoftDomain + " (of ONNX Runtime's contrib ops only "
                                 "MatMulNBits is supported)");
    if (microsoftOpset_ != 1)
      return failNode(index, std::string("MatMulNBits needs the model to import version 1 of "
                                         "domain ") + kMicrosoftDomain + " (opset_import)");
    return mlir::success();
  }
  if (!isDefaultDomain(n.domain())) {
    return failNode(index, "op domain '" + n.domain() + "' is not supported (only the default "
                           "ONNX domain, " + kPreviewTrainingDomain + " and " + kMicrosoftDomain +
                           "'s MatMulNBits are)");
  }
  if (opset_ == 0)
    return failNode(index, "the model imports no opset of the default ONNX domain (opset_import)");
  if (!isKnownOp(onnxOpset17Name(n.op_type())) ||
      (info && (info->flags & (kPreviewTraining | kTandemDomain)))) {
    std::string where = info && info->has(kPreviewTraining)
                            ? std::string(" (it is an op of domain ") + kPreviewTrainingDomain + ")"
                            : "";
    return failNode(index, "unsupported op type '" + n.op_type() + "'" + where);
  }
  if (const int first = opsetIntroducing(n.op_type()); first > opset_)
    return failNode(index, n.op_type() + " is defined from opset " + std::to_string(first) +
                               " on, but the model imports opset " + std::to_string(opset_));
  if (opset_ > 17) {
    std::string why = checkNewerOpsetNode(n, opset_);
    if (!why.empty()) return failNode(index, why + " (opset " + std::to_string(opset_) + ")");
  }
  return checkLegacyOp(index);
}

// Kahn's algorithm, taking the lowest file index among ready nodes so a sorted graph keeps its
// order (and its IR reads like the file).
mlir::LogicalResult OnnxImporter::sortNodes(std::vector<int>* order) {
  int n = graph_->node_size();
  std::vector<std::vector<int>> users(n);
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> deps(n);
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> reads(graph_->node(i).input().begin(), graph_->node(i).input().end());
    // A subgraph's outer reads are inputs of its node too: their producers must come first.
    for (const std::string& r : outerReadsOf(graph_->node(i))) reads.push_back(r);
    for (const std::string& in : reads) {
      auto it = producer_.find(in);
      if (in.empty() || it == producer_.end()) continue;
      deps[i].push_back(it->second);
      users[it->second].push_back(i);
      ++pending[i];
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<bool> done(n, false);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    done[i] = true;
    order->push_back(i);
    for (int u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if ((int)order->size() == n) return mlir::success();

  // Every unsorted node waits on another unsorted node, so walking those edges must revisit one:
  // that node and the walk since its first visit form a cycle.
  int start = 0;
  while (done[start]) ++start;
  std::vector<int> path;
  std::vector<int> seenAt(n, -1);
  int cur = start;
  while (seenAt[cur] < 0) {
    seenAt[cur] = (int)path.size();
    path.push_back(cur);
    int next = -1;
    for (int d : deps[cur])
      if (!done[d]) { next = d; break; }
    assert(next >= 0 && "unsorted node with all dependencies sorted");
    cur = next;
  }
  // The walk follows producer edges, i.e. against the data flow: print it reversed.
  std::vector<int> cycle(path.begin() + seenAt[cur], path.end());
  std::reverse(cycle.begin(), cycle.end());
  // Start at the node that comes first in the file, so the message is stable.
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  auto name = [&](int i) {
    const onnx::NodeProto& nd = graph_->node(i);
    return nd.name().empty() ? nd.op_type() + "_" + std::to_string(i) : nd.name();
  };
  std::string chain;
  for (int i : cycle) chain += name(i) + " -> ";
  chain += name(cycle.front());
  return failNode(cycle.front(), "graph has a cycle (" + chain + ")");
}

mlir::LogicalResult OnnxImporter::declareInputs(llvm::SmallVectorImpl<mlir::Type>* argTypes) {
  mlir::Block* entry = b_.getInsertionBlock();
  auto func = llvm::cast<mlir::func::FuncOp>(entry->getParentOp());
  std::vector<std::pair<std::string, mlir::ArrayAttr>> argInfo;

  for (const onnx::ValueInfoProto& in : graph_->input()) {
    const std::string& name = in.name();
    mlir::Location loc = mlir::NameLoc::get(b_.getStringAttr(name), fileLoc_);
    auto cst = options_.constantInputs.find(name);
    bool isInit = initializers_.count(name) != 0;
    if (cst == options_.constantInputs.end() && isInit) continue;  // a constant, made on use

    if (!in.type().has_tensor_type())
      return fail("graph input '" + name + "' is not a tensor (sequence, map and optional "
                  "types are not supported)");
    const auto& tt = in.type().tensor_type();
    int32_t code = tt.elem_type();
    if (!isKnownDType(code)) {
      return fail("graph input '" + name + "' has element type " +
                  onnx::TensorProto::DataType_Name((onnx::TensorProto::DataType)code) +
                  ", which is not supported");
    }
    DType dtype = (DType)code;

    if (cst != options_.constantInputs.end()) {
      // A fed constant must match what the model declares, or shapes would be inferred from a
      // tensor the model never meant to accept.
      const Tensor& t = cst->second;
      bool ok = t.dtype() == dtype;
      if (ok && tt.has_shape()) {
        ok = tt.shape().dim_size() == t.rank();
        for (int d = 0; ok && d < t.rank(); ++d) {
          const auto& dim = tt.shape().dim(d);
          if (dim.has_dim_value() && dim.dim_value() != t.dim(d)) ok = false;
        }
      }
      if (!ok) {
        return fail("constant input '" + name + "' is " + dtypeName(t.dtype()) +
                    shapeToString(t.shape()) + " but the model declares " + dtypeName(dtype) +
                    (tt.has_shape() ? " of rank " + std::to_string(tt.shape().dim_size())
                                    : std::string()));
      }
      values_[name] = createConstant(b_, loc, t);
      continue;
    }

    if (!tt.has_shape()) {
      return fail("graph input '" + name +
                  "' has no shape (unknown rank is not supported; give the model a shape)");
    }
    llvm::SmallVector<int64_t> dims;
    llvm::SmallVector<mlir::Attribute> params;
    for (const auto& dim : tt.shape().dim()) {
      if (dim.has_dim_value() && dim.dim_value() >= 0) {
        dims.push_back(dim.dim_value());
        params.push_back(b_.getStringAttr(""));
      } else {
        dims.push_back(mlir::ShapedType::kDynamic);
        params.push_back(b_.getStringAttr(dim.has_dim_param() ? dim.dim_param() : ""));
      }
    }
    auto type = mlir::RankedTensorType::get(dims, dtypeToMlir(ctx_, dtype));
    argTypes->push_back(type);
    values_[name] = entry->addArgument(type, loc);
    argInfo.push_back({name, b_.getArrayAttr(params)});
  }

  func.setType(b_.getFunctionType(*argTypes, {}));
  for (size_t i = 0; i < argInfo.size(); ++i) {
    func.setArgAttr(i, "tandem.name", b_.getStringAttr(argInfo[i].first));
    func.setArgAttr(i, "tandem.dim_params", argInfo[i].second);
  }
  return mlir::success();
}

mlir::Value OnnxImporter::valueFor(const std::string& name) {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  // Initializers become constants where first used: unused ones cost nothing and never fail.
  auto init = initializers_.find(name);
  assert(init != initializers_.end() && "indexGraph checked every input name");
  // INT4 / UINT4 are widened to 8 bits (tensorFromProto), which keeps their meaning only where
  // the value is dequantized: as DequantizeLinear's x or x_zero_point.
  const int32_t code = init->second->data_type();
  if (code == 21 || code == 22) {
    if (!notDequantized_) {  // one scan of the graph, at the first 4-bit tensor
      notDequantized_.emplace();
      for (int i = 0; i < graph_->node_size(); ++i) {
        const onnx::NodeProto& n = graph_->node(i);
        for (int k = 0; k < n.input_size(); ++k)
          if (!(n.op_type() == "DequantizeLinear" && (k == 0 || k == 2)))
            notDequantized_->emplace(n.input(k), std::make_pair(i, k));
      }
    }
    auto use = notDequantized_->find(name);
    if (use != notDequantized_->end()) {
      (void)failNode(use->second.first,
                     std::string(code == 22 ? "INT4" : "UINT4") + " tensor '" + name +
                         "' is its input " + std::to_string(use->second.second) +
                         "; 4-bit tensors are supported as DequantizeLinear's x and "
                         "x_zero_point only (widened to 8 bits at import)");
      return nullptr;
    }
  }
  Tensor t;
  Status st = tensorFromProto(*init->second, &t);
  if (!st.isOk()) {
    (void)fail(st.message());  // names the initializer ("tensor 'w': ...")
    return nullptr;
  }
  mlir::Value v = createConstant(b_, mlir::NameLoc::get(b_.getStringAttr(name), fileLoc_), t);
  values_[name] = v;
  if (auto type = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
      type && llvm::isa<mlir::FloatType>(type.getElementType()))
    floatInitializers_.insert(v);
  return v;
}

mlir::Location OnnxImporter::nodeLoc(int index) {
  const onnx::NodeProto& n = graph_->node(index);
  std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
  return mlir::NameLoc::get(b_.getStringAttr(name), fileLoc_);
}

mlir::Value OnnxImporter::constInts(mlir::Location loc, llvm::ArrayRef<int64_t> v) {
  return createConstant(
      b_, loc, Tensor::fromVector<int64_t>({(int64_t)v.size()}, std::vector<int64_t>(v.begin(), v.end())));
}

mlir::LogicalResult OnnxImporter::convertAttribute(int index, const onnx::AttributeProto& a,
                                                   mlir::Attribute* out) {
  switch (attrType(a)) {
    case onnx::AttributeProto::FLOAT: *out = b_.getF32FloatAttr(a.f()); return mlir::success();
    case onnx::AttributeProto::INT: *out = b_.getI64IntegerAttr(a.i()); return mlir::success();
    case onnx::AttributeProto::STRING: *out = b_.getStringAttr(a.s()); return mlir::success();
    case onnx::AttributeProto::INTS:
      *out = b_.getI64ArrayAttr(llvm::SmallVector<int64_t>(a.ints().begin(), a.ints().end()));
      return mlir::success();
    case onnx::AttributeProto::FLOATS:
      *out = b_.getF32ArrayAttr(llvm::SmallVector<float>(a.floats().begin(), a.floats().end()));
      return mlir::success();
    case onnx::AttributeProto::STRINGS: {
      llvm::SmallVector<llvm::StringRef> s(a.strings().begin(), a.strings().end());
      *out = b_.getStrArrayAttr(s);
      return mlir::success();
    }
    case onnx::AttributeProto::TENSOR: {
      Tensor t;
      Status st = tensorFromProto(a.t(), &t);
      if (!st.isOk()) return failNode(index, "attribute '" + a.name() + "': " + st.message());
      *out = tensorToAttr(ctx_, t);
      return mlir::success();
    }
    default:
      return failNode(index, "attribute '" + a.name() + "' of type " + attrTypeName(attrType(a)) +
                                 " is not supported");
  }
}

mlir::LogicalResult OnnxImporter::importNode(int index) {
  const onnx::NodeProto& n = graph_->node(index);
  mlir::Location loc = nodeLoc(index);
  if (n.op_type() == "Constant") return importConstant(index, loc);
  if (isControlFlow(n.op_type())) return importControlFlow(index, loc);
  if (isGradientOp(n)) return importGradient(index, loc);

  NodeForm f;
  f.opType = onnxOpset17Name(n.op_type());
  for (const std::string& in : n.input()) {
    if (in.empty()) {
      f.operands.push_back(nullptr);
      continue;
    }
    mlir::Value v = valueFor(in);
    if (!v) return mlir::failure();
    f.operands.push_back(v);
  }
  for (const onnx::AttributeProto& a : n.attribute()) {
    mlir::Attribute attr;
    if (mlir::failed(convertAttribute(index, a, &attr))) return mlir::failure();
    f.attrs[a.name()] = attr;
  }
  int last = n.output_size() - 1;
  while (last >= 0 && n.output(last).empty()) --last;
  f.numResults = (unsigned)(last + 1);

  if ((f.opType == "Softmax" || f.opType == "LogSoftmax") && opset_ < 13)
    return importCoercedSoftmax(index, loc, &f);
  if (n.domain() == kMicrosoftDomain) {
    if (mlir::failed(convertMatMulNBits(index, loc, &f))) return mlir::failure();
  } else if (mlir::failed(normalise(index, loc, &f))) {
    return mlir::failure();
  }

  mlir::FailureOr<mlir::Operation*> op = create(index, loc, f);
  if (mlir::failed(op)) return mlir::failure();
  llvm::SmallVector<mlir::Value> results((*op)->getResults());
  if (f.opType != "Dropout") foldEarly(*op, f.opType, &results);
  for (int i = 0; i <= last; ++i)
    if (!n.output(i).empty()) values_[n.output(i)] = results[i];

  // Dropout-1..-7's mask has the input's dtype (Dropout-10 made it bool): all ones either way.
  if (f.opType == "Dropout" && opset_ < 10 && last >= 1 && !n.output(1).empty()) {
    DType dt = mlirToDType(llvm::cast<mlir::ShapedType>(f.operands[0].getType()).getElementType());
    NodeForm c{"Cast", {(*op)->getResult(1)}, {{"to", b_.getI64IntegerAttr((int64_t)dt)}}, 1};
    auto castOp = create(index, loc, c);
    if (mlir::failed(castOp)) return mlir::failure();
    values_[n.output(1)] = (*castOp)->getResult(0);
  }
  return mlir::success();
}

mlir::FailureOr<mlir::Operation*> OnnxImporter::create(int index, mlir::Location loc,
                                                       const NodeForm& f) {
  llvm::SmallVector<mlir::NamedAttribute> attrs;
  for (const auto& [name, a] : f.attrs) attrs.push_back(b_.getNamedAttr(name, a));
  takeDiagnostic();
  mlir::FailureOr<mlir::Operation*> op =
      createTandemOp(b_, loc, f.opType, f.operands, attrs, f.numResults);
  if (mlir::failed(op)) {
    std::string d = takeDiagnostic();
    // Shape functions prefix their op type; the node label already names it.
    std::string prefix = f.opType + ": ";
    if (d.compare(0, prefix.size(), prefix) == 0) d = d.substr(prefix.size());
    else if (f.opType != graph_->node(index).op_type() && !d.empty()) d = "(as " + f.opType + ") " + d;
    (void)failNode(index, d.empty() ? "could not be built" : d);
  }
  return op;
}

// Folds a just-built op whose values a later node's shape function may need: Shape of a static
// shape, Gather of a Shape's static dims, and small ops on constants (not DequantizeLinear). ONNX function bodies compute a Reshape's shape from
// Shape -> Size -> Sub -> ConstantOfShape -> Concat; unfolded, the Reshape's rank would be
// unknown when it is built. --tandem-canonicalize folds the same ops later; this only folds
// them before their readers exist. `results` gets the constants that replace the op. A kernel
// that fails on its constants leaves the op as it is: canonicalize reports that error.
void OnnxImporter::foldEarly(mlir::Operation* op, const std::string& type,
                             llvm::SmallVectorImpl<mlir::Value>* results) {
  // The most elements a shape function reads from a constant operand (TandemDialect.cpp).
  constexpr int64_t kFoldLimit = 4096;
  mlir::IRRewriter rewriter(b_);
  if (type == "Shape") {
    foldShapeOp(rewriter, op, results);
    return;
  }
  if (type == "Gather" && foldGatherOfShape(rewriter, op, results)) return;
  // A DequantizeLinear's float result is never a shape operand, and folded here it would hide
  // the quantized weights of a QDQ convolution from --tandem-fuse-qdq (canonicalize, after it,
  // folds the DequantizeLinears it leaves).
  if (op->getNumOperands() == 0 || type == "DequantizeLinear") return;
  if (!llvm::all_of(op->getOperands(), isConstantOrNone)) return;
  // Nor an op reading a float tensor larger than any shape function reads: a weight, such as
  // a position embedding gathered by constant ids (PyTorch's pos(arange(T))). Folded here, the
  // initializer would vanish from the graph and not train (compiler/training); canonicalize
  // folds it for inference. Nor, for the same reason, one reading a float initializer of more
  // elements than a float shape operand has (a 4-D Resize's scales): that is a weight whatever
  // its size (ViT's class_token, Expand to [N, 1, D] once the batch is fixed; a small Linear's
  // weight behind its Transpose). An Identity of one still folds: an initializer under a
  // second name imports as a constant of its own (PyTorch's PRESERVE export shares a
  // BatchNorm's equal statistics that way).
  for (mlir::Value v : op->getOperands()) {
    auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
    if (!t || !llvm::isa<mlir::FloatType>(t.getElementType()) || !t.hasStaticShape()) continue;
    if (t.getNumElements() > kFoldLimit) return;
    if (type != "Identity" && t.getNumElements() > 4 && floatInitializers_.count(v)) return;
  }
  if (mlir::failed(foldWithCpuKernel(rewriter, op, type, kFoldLimit, "import", results)))
    takeDiagnostic();
}

// Constant nodes become tandem.constant; every value_* form is one tensor.
mlir::LogicalResult OnnxImporter::importConstant(int index, mlir::Location loc) {
  const onnx::NodeProto& n = graph_->node(index);
  if (n.attribute_size() != 1)
    return failNode(index, "needs exactly one value attribute, has " +
                               std::to_string(n.attribute_size()));
  const onnx::AttributeProto& a = n.attribute(0);
  Tensor t;
  const std::string& k = a.name();
  if (k == "value") {
    Status st = tensorFromProto(a.t(), &t);
    if (!st.isOk()) return failNode(index, "attribute 'value': " + st.message());
  } else if (k == "value_float") {
    t = Tensor::fromVector<float>({}, {a.f()});
  } else if (k == "value_floats") {
    t = Tensor::fromVector<float>({(int64_t)a.floats_size()},
                                  std::vector<float>(a.floats().begin(), a.floats().end()));
  } else if (k == "value_int") {
    t = Tensor::fromVector<int64_t>({}, {a.i()});
  } else if (k == "value_ints") {
    t = Tensor::fromVector<int64_t>({(int64_t)a.ints_size()},
                                    std::vector<int64_t>(a.ints().begin(), a.ints().end()));
  } else if (k == "value_string" || k == "value_strings") {
    return failNode(index, "string constants are not supported");
  } else if (k == "sparse_value") {
    return failNode(index, "sparse constants (sparse_value) are not supported");
  } else {
    return failNode(index, "unknown attribute '" + k + "'");
  }
  for (const std::string& out : n.output())
    if (!out.empty()) values_[out] = createConstant(b_, loc, t);
  return mlir::success();
}

// Softmax-1/-11 coerce the input to 2-D at `axis` (default 1) and normalise each row; opset 13
// normalises along one axis. Flatten → Softmax(axis=-1) → Reshape back is exactly the old op.
mlir::LogicalResult OnnxImporter::importCoercedSoftmax(int index, mlir::Location loc, NodeForm* f) {
  const onnx::NodeProto& n = graph_->node(index);
  if (f->operands.size() != 1 || !f->operands[0])
    return failNode(index, "takes exactly one input");
  mlir::Value x = f->operands[0];
  auto type = llvm::cast<mlir::RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  int64_t axis = 1;
  if (auto a = f->attrs.count("axis") ? llvm::dyn_cast<mlir::IntegerAttr>(f->attrs["axis"]) : nullptr)
    axis = a.getInt();
  if (axis < -rank || axis > rank || (rank == 0 && axis != 0))
    return failNode(index, "axis " + std::to_string(axis) + " is out of range for rank " +
                               std::to_string(rank));
  if (axis < 0) axis += rank;

  mlir::Operation* result = nullptr;
  if (rank > 0 && axis == rank - 1) {
    // One trailing axis: the old and the new definitions agree.
    NodeForm g{f->opType, {x}, {{"axis", b_.getI64IntegerAttr(axis)}}, 1};
    auto op = create(index, loc, g);
    if (mlir::failed(op)) return mlir::failure();
    result = *op;
  } else {
    NodeForm flat{"Flatten", {x}, {{"axis", b_.getI64IntegerAttr(axis)}}, 1};
    auto flatOp = create(index, loc, flat);
    if (mlir::failed(flatOp)) return mlir::failure();
    NodeForm sm{f->opType, {(*flatOp)->getResult(0)}, {{"axis", b_.getI64IntegerAttr(-1)}}, 1};
    auto smOp = create(index, loc, sm);
    if (mlir::failed(smOp)) return mlir::failure();
    mlir::Value shape;
    if (type.hasStaticShape()) {
      shape = constInts(loc, type.getShape());
    } else {
      NodeForm shp{"Shape", {x}, {}, 1};
      auto shpOp = create(index, loc, shp);
      if (mlir::failed(shpOp)) return mlir::failure();
      shape = (*shpOp)->getResult(0);
    }
    // allowzero: a zero-size dim in the original shape is a real 0, not "copy".
    NodeForm back{"Reshape", {(*smOp)->getResult(0), shape},
                  {{"allowzero", b_.getI64IntegerAttr(1)}}, 1};
    auto backOp = create(index, loc, back);
    if (mlir::failed(backOp)) return mlir::failure();
    result = *backOp;
  }
  if (!n.output(0).empty()) values_[n.output(0)] = result->getResult(0);
  return mlir::success();
}

// ONNX value info for subgraph input `info` from the outer value's type: subgraphs are compiled
// now, with static shapes, so the type must be static, unless `dynamicAllowed` (an If branch
// written as an eager plan, compileEagerSubgraph): then its unknown dims stay unknown.
mlir::LogicalResult OnnxImporter::setSubgraphType(int index, const std::string& attr,
                                                  onnx::ValueInfoProto* info, mlir::Type type,
                                                  bool dynamicAllowed) {
  auto t = llvm::dyn_cast<mlir::RankedTensorType>(type);
  if (!t || (!t.hasStaticShape() && !dynamicAllowed))
    return failNode(index, "subgraph '" + attr + "' input '" + info->name() +
                               "' would have a dynamic shape; control-flow subgraphs are compiled "
                               "with static shapes (bind the model's input shapes)");
  auto* tt = info->mutable_type()->mutable_tensor_type();
  info->mutable_type()->clear_value();
  tt = info->mutable_type()->mutable_tensor_type();
  tt->set_elem_type((int32_t)mlirToDType(t.getElementType()));
  auto* shape = tt->mutable_shape();
  shape->clear_dim();
  for (int64_t d : t.getShape()) {
    auto* dim = shape->add_dim();
    if (!mlir::ShapedType::isDynamic(d)) dim->set_dim_value(d);  // else: unknown
  }
  return mlir::success();
}

// Imports `model` (a subgraph made a model) one control-flow level deeper; errors name the node.
mlir::LogicalResult OnnxImporter::importSubgraph(int index, const std::string& attr,
                                                 const onnx::ModelProto& model,
                                                 mlir::OwningOpRef<mlir::ModuleOp>* out) {
  for (const auto& o : model.graph().output()) {
    if (o.has_type() && !o.type().has_tensor_type())
      return failNode(index, "subgraph '" + attr + "' output '" + o.name() +
                                 "' is not a tensor (sequence, map and optional values are not "
                                 "supported)");
  }
  ImportOptions none;
  OnnxImporter inner(ctx_, source_, none, depth_ + 1);
  std::string error;
  *out = inner.import(model, &error);
  if (*out) return mlir::success();
  if (error.compare(0, source_.size() + 2, source_ + ": ") == 0) error = error.substr(source_.size() + 2);
  return failNode(index, "subgraph '" + attr + "': " + error);
}

// Imports `model` as compileSubgraph does, but writes it as an eager plan (writeEagerPlan,
// passes/Passes.h): inputs of unknown dims stay unknown, every op one step, shapes inferred
// when it runs.
mlir::LogicalResult OnnxImporter::compileEagerSubgraph(int index, const std::string& attr,
                                                       onnx::ModelProto model, std::string* planBytes) {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  if (mlir::failed(importSubgraph(index, attr, model, &module))) return mlir::failure();
  mlir::func::FuncOp main = getMainFunc(*module);
  mlir::Block& block = main.getBody().front();
  llvm::SmallVector<mlir::Value> inputs(main.getArguments().begin(), main.getArguments().end());
  llvm::SmallVector<mlir::Operation*> ops;
  for (mlir::Operation& o : block)
    if (!llvm::isa<mlir::func::ReturnOp>(o)) ops.push_back(&o);
  llvm::SmallVector<mlir::Value> outputs(block.getTerminator()->getOperands());
  plan::Plan p;
  writeEagerPlan(inputs, ops, outputs, &p);
  *planBytes = p.SerializeAsString();
  return mlir::success();
}

// Imports `model` (a subgraph made a model: its inputs typed, its outer reads appended as
// inputs) and compiles it with the same pipeline, for the CPU, into a serialized plan.
mlir::LogicalResult OnnxImporter::compileSubgraph(int index, const std::string& attr,
                                                  onnx::ModelProto model, std::string* planBytes) {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  if (mlir::failed(importSubgraph(index, attr, model, &module))) return mlir::failure();
  CompileOptions co;
  DeviceSet cpu;
  if (Status st = DeviceSet::parse("cpu", &cpu); !st.isOk()) return failNode(index, st.message());
  co.devices = cpu;
  CompileResult compiled;
  std::string diagnostic;
  {
    mlir::ScopedDiagnosticHandler handler(ctx_, [&](mlir::Diagnostic& d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error && diagnostic.empty()) {
        std::string where = nodeName(d.getLocation());
        diagnostic = (where.empty() ? "" : "node '" + where + "': ") + d.str();
      }
      return mlir::success();
    });
    if (mlir::failed(compileModule(*module, co, &compiled)))
      return failNode(index, "subgraph '" + attr + "': " +
                                 (diagnostic.empty() ? std::string("could not be compiled") : diagnostic));
  }
  *planBytes = compiled.plan.SerializeAsString();
  return mlir::success();
}

// If-16, Loop-16 and Scan-16 (and Scan-8, rewritten): each subgraph becomes a model of its own,
// typed from the operands, compiled now into a CPU plan carried as a string attribute; the
// outer values it reads become extra operands (runtime/ControlFlow.h has the layout).
// Gradient-1 (ai.onnx.preview.training): outputs d y / d xs[i], where y (attribute) is a value
// of this graph and the xs (attribute, the node's first inputs) are values it depends on. Lowered
// here onto the gradient rules (compiler/autodiff): the ops between the xs and y are swept in
// reverse from a seed of ones (so a tensor y gives the gradient of its sum), and each output is
// its x's gradient, zeros where y does not depend on x. zs (the remaining inputs) only need to
// exist. Errors name the node: an x or y that is not a float tensor, an op without a rule.
mlir::LogicalResult OnnxImporter::importGradient(int index, mlir::Location loc) {
  const onnx::NodeProto& n = graph_->node(index);
  std::vector<std::string> xs;
  std::string y;
  for (const auto& a : n.attribute()) {
    if (a.name() == "xs") xs.assign(a.strings().begin(), a.strings().end());
    else if (a.name() == "y") y = a.s();
  }
  if (xs.empty() || y.empty()) return failNode(index, "Gradient needs the attributes xs and y");
  if ((int)xs.size() != n.output_size())
    return failNode(index, "Gradient has " + std::to_string(n.output_size()) + " outputs for " +
                               std::to_string(xs.size()) + " xs");
  auto isFloat = [](mlir::Value v) {
    auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
    return t && t.hasStaticShape() && (t.getElementType().isF32() || t.getElementType().isF64());
  };
  mlir::Value yv = valueFor(y);
  if (!yv) return mlir::failure();
  if (!isFloat(yv)) return failNode(index, "y '" + y + "' is not a float tensor of static shape");
  llvm::SmallVector<mlir::Value> xv;
  llvm::DenseSet<mlir::Value> active;
  for (const std::string& x : xs) {
    mlir::Value v = valueFor(x);
    if (!v) return mlir::failure();
    if (!isFloat(v)) return failNode(index, "x '" + x + "' is not a float tensor of static shape");
    xv.push_back(v);
    active.insert(v);
  }
  // Forward: what depends on the xs, among the ops built so far (all before this node).
  mlir::Block* block = b_.getInsertionBlock();
  llvm::SmallVector<mlir::Operation*> forward;
  for (mlir::Operation& op : *block) {
    forward.push_back(&op);
    if (llvm::any_of(op.getOperands(), [&](mlir::Value v) { return active.count(v); }))
      for (mlir::Value r : op.getResults())
        if (isFloat(r)) active.insert(r);
  }
  llvm::DenseMap<mlir::Value, mlir::Value> grads;
  auto yt = llvm::cast<mlir::RankedTensorType>(yv.getType());
  Shape ys(yt.getShape().begin(), yt.getShape().end());
  const int64_t count = numElements(ys);
  Tensor ones = yt.getElementType().isF64()
                    ? Tensor::fromVector<double>(ys, std::vector<double>((size_t)count, 1.0))
                    : Tensor::fromVector<float>(ys, std::vector<float>((size_t)count, 1.0f));
  if (active.count(yv)) grads[yv] = createConstant(b_, loc, ones);
  takeDiagnostic();
  if (mlir::failed(autodiff::reverseSweep(b_, forward, active, grads))) {
    std::string d = takeDiagnostic();
    return failNode(index, d.empty() ? "could not be differentiated" : d);
  }
  for (size_t i = 0; i < xv.size(); ++i) {
    mlir::Value g = grads.lookup(xv[i]);
    if (!g) {
      auto t = llvm::cast<mlir::RankedTensorType>(xv[i].getType());
      Shape xsh(t.getShape().begin(), t.getShape().end());
      const int64_t m = numElements(xsh);
      g = createConstant(b_, loc, t.getElementType().isF64()
                                      ? Tensor::fromVector<double>(xsh, std::vector<double>((size_t)m, 0.0))
                                      : Tensor::fromVector<float>(xsh, std::vector<float>((size_t)m, 0.0f)));
    }
    if (!n.output(i).empty()) values_[n.output(i)] = g;
  }
  return mlir::success();
}

// The Loop torch.onnx writes for nn.EmbeddingBag (frontend/EmbeddingBagLoop.h) becomes
//   bags = Range(0, M, 1); EmbeddingBag(weight, indices, Gather(starts, bags),
//                                       Gather(ends, bags)[, per_sample_weights])
// which computes what the Loop's M iterations do: iteration m reads starts[m] and ends[m], and
// the Gathers keep the Loop's error for a trip count past the offsets. With static shapes the
// Range folds and nothing downstream needs a dynamic region. Outer values of other types than
// the op takes leave the Loop as it is.
mlir::FailureOr<bool> OnnxImporter::importEmbeddingBagLoop(int index, mlir::Location loc) {
  const onnx::NodeProto& n = graph_->node(index);
  auto outerConstant = [&](const std::string& name) -> std::optional<Tensor> {
    if (!values_.count(name) && !initializers_.count(name)) return std::nullopt;
    mlir::Value v = valueFor(name);
    Tensor t;
    if (!v || !getConstantValue(v, &t)) return std::nullopt;
    return t;
  };
  std::optional<EmbeddingBagLoop> m = matchEmbeddingBagLoop(n, outerConstant);
  if (!m) return false;
  mlir::Value count = valueFor(m->tripCount), weight = valueFor(m->weight),
              indices = valueFor(m->indices), starts = valueFor(m->starts), ends = valueFor(m->ends);
  mlir::Value scale = m->perSampleWeights.empty() ? mlir::Value() : valueFor(m->perSampleWeights);
  if (!count || !weight || !indices || !starts || !ends || (!m->perSampleWeights.empty() && !scale))
    return mlir::failure();
  auto typed = [](mlir::Value v, int64_t rank, bool isIndex) {
    auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
    if (!t || t.getRank() != rank) return false;
    mlir::Type e = t.getElementType();
    return isIndex ? e.isSignlessInteger(32) || e.isSignlessInteger(64) : e.isF32() || e.isF64();
  };
  if (!typed(count, 0, true) || !llvm::cast<mlir::RankedTensorType>(count.getType()).getElementType().isInteger(64) ||
      !typed(weight, 2, false) || !typed(indices, 1, true) || !typed(starts, 1, true) ||
      !typed(ends, 1, true) ||
      (scale && (!typed(scale, 1, false) ||
                 llvm::cast<mlir::RankedTensorType>(scale.getType()).getElementType() !=
                     llvm::cast<mlir::RankedTensorType>(weight.getType()).getElementType())))
    return false;
  const std::string base = n.name().empty() ? "Loop_" + std::to_string(index) : n.name();
  auto build = [&](const NodeForm& f, const std::string& suffix) -> mlir::Value {
    mlir::Location l = suffix.empty() ? loc : mlir::NameLoc::get(b_.getStringAttr(base + "/" + suffix), fileLoc_);
    mlir::FailureOr<mlir::Operation*> op = create(index, l, f);
    if (mlir::failed(op)) return nullptr;
    llvm::SmallVector<mlir::Value> results((*op)->getResults());
    foldEarly(*op, f.opType, &results);
    return results[0];
  };
  auto scalar = [&](int64_t v) { return createConstant(b_, loc, Tensor::fromVector<int64_t>({}, {v})); };
  mlir::Value bags = build(NodeForm{"Range", {scalar(0), count, scalar(1)}, {}, 1}, "bags");
  if (!bags) return mlir::failure();
  NodeForm gather{"Gather", {starts, bags}, {{"axis", b_.getI64IntegerAttr(0)}}, 1};
  mlir::Value first = build(gather, "starts");
  gather.operands = {ends, bags};
  mlir::Value last = build(gather, "ends");
  if (!first || !last) return mlir::failure();
  NodeForm bag{"EmbeddingBag", {weight, indices, first, last}, {{"mode", b_.getStringAttr(m->mode)}}, 1};
  if (scale) bag.operands.push_back(scale);
  mlir::Value y = build(bag, "");
  if (!y) return mlir::failure();
  values_[n.output(0)] = y;
  return true;
}

mlir::LogicalResult OnnxImporter::importControlFlow(int index, mlir::Location loc) {
  const onnx::NodeProto& n = graph_->node(index);
  const std::string& op = n.op_type();
  if (op == "Loop") {
    mlir::FailureOr<bool> bag = importEmbeddingBagLoop(index, loc);
    if (mlir::failed(bag)) return mlir::failure();
    if (*bag) return mlir::success();
  }
  if (depth_ >= kMaxControlFlowDepth)
    return failNode(index, "control flow nested more than " + std::to_string(kMaxControlFlowDepth) +
                               " levels deep is not supported");
  NodeForm f;
  f.opType = op;
  for (const std::string& in : n.input()) {
    mlir::Value v = in.empty() ? mlir::Value() : valueFor(in);
    if (!in.empty() && !v) return mlir::failure();
    f.operands.push_back(v);
  }
  std::map<std::string, const onnx::GraphProto*> graphs;
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (attrType(a) == onnx::AttributeProto::GRAPH) {
      graphs[a.name()] = &a.g();
      continue;
    }
    mlir::Attribute attr;
    if (mlir::failed(convertAttribute(index, a, &attr))) return mlir::failure();
    f.attrs[a.name()] = attr;
  }
  std::vector<std::string> names = op == "If" ? std::vector<std::string>{"then_branch", "else_branch"}
                                              : std::vector<std::string>{"body"};
  for (const std::string& name : names)
    if (!graphs.count(name)) return failNode(index, "needs the graph attribute '" + name + "'");
  f.numResults = (unsigned)n.output_size();

  // Scan-8: a leading sequence_lens input and a batch axis 0 on every state and scan input
  // (scan axis 1). With batch 1 and no sequence_lens it is Scan-9 on the squeezed operands.
  bool scan8 = op == "Scan" && opset_ < 9;
  if (scan8) {
    if (!f.operands.empty() && f.operands[0])
      return failNode(index, "Scan-8 with sequence_lens is not supported");
    if (!f.operands.empty()) f.operands.erase(f.operands.begin());
    for (mlir::Value& v : f.operands) {
      auto t = llvm::cast<mlir::RankedTensorType>(v.getType());
      if (t.getRank() < 1 || t.getDimSize(0) != 1)
        return failNode(index, "Scan-8 with a batch size other than 1 is not supported");
      NodeForm sq{"Squeeze", {v, constInts(loc, {0})}, {}, 1};
      auto sqOp = create(index, loc, sq);
      if (mlir::failed(sqOp)) return mlir::failure();
      v = (*sqOp)->getResult(0);
    }
    auto dirs = f.attrs.find("directions");
    if (dirs != f.attrs.end()) {
      f.attrs["scan_input_directions"] = dirs->second;
      f.attrs.erase(dirs);
    }
  }

  // Outer reads: one operand each, after the ONNX operands, in first-use order over all the
  // node's subgraphs (an If's two branches take the same list).
  std::vector<std::string> captures;
  for (const std::string& name : names) collectOuterReads(*graphs[name], {}, &captures);
  std::vector<mlir::Value> captured;
  for (const std::string& c : captures) {
    mlir::Value v = valueFor(c);
    if (!v) return mlir::failure();
    captured.push_back(v);
  }

  // The subgraph's own inputs, typed from the operands.
  std::vector<mlir::Type> inputTypes;
  size_t carried = 0, scanInputs = 0;
  auto typeOf = [&](size_t i) { return f.operands[i].getType(); };
  if (op == "Loop") {
    carried = f.operands.size() >= 2 ? f.operands.size() - 2 : 0;
    inputTypes.push_back(mlir::RankedTensorType::get({}, b_.getI64Type()));
    inputTypes.push_back(mlir::RankedTensorType::get({}, b_.getI1Type()));
    for (size_t k = 0; k < carried; ++k) inputTypes.push_back(typeOf(2 + k));
    const onnx::GraphProto& body = *graphs["body"];
    if (body.input_size() != (int)(2 + carried))
      return failNode(index, "body has " + std::to_string(body.input_size()) +
                                 " inputs but Loop passes " + std::to_string(2 + carried) +
                                 " (iteration number, condition, " + std::to_string(carried) +
                                 " loop-carried)");
    if (n.output_size() < (int)carried || body.output_size() != 1 + n.output_size())
      return failNode(index, "body has " + std::to_string(body.output_size()) +
                                 " outputs but Loop has " + std::to_string(carried) +
                                 " loop-carried values and " + std::to_string(n.output_size()) +
                                 " outputs, so its body needs " + std::to_string(1 + n.output_size()) +
                                 " (condition, loop-carried, scan outputs)");
  } else if (op == "Scan") {
    auto it = f.attrs.find("num_scan_inputs");
    int64_t m = it == f.attrs.end() ? 0 : llvm::cast<mlir::IntegerAttr>(it->second).getInt();
    if (m < 1 || m > (int64_t)f.operands.size())
      return failNode(index, "num_scan_inputs must be in [1, " + std::to_string(f.operands.size()) +
                                 "], is " + std::to_string(m));
    scanInputs = (size_t)m;
    carried = f.operands.size() - scanInputs;
    llvm::SmallVector<int64_t> axes;
    if (auto a = f.attrs.count("scan_input_axes") ? llvm::dyn_cast<mlir::ArrayAttr>(f.attrs["scan_input_axes"]) : nullptr)
      for (mlir::Attribute e : a) axes.push_back(llvm::cast<mlir::IntegerAttr>(e).getInt());
    for (size_t k = 0; k < carried; ++k) inputTypes.push_back(typeOf(k));
    for (size_t j = 0; j < scanInputs; ++j) {
      auto t = llvm::cast<mlir::RankedTensorType>(typeOf(carried + j));
      int64_t axis = j < axes.size() ? axes[j] : 0;
      if (axis < 0) axis += t.getRank();
      if (axis < 0 || axis >= t.getRank())
        return failNode(index, "scan_input_axes entry " + std::to_string(j) + " is out of range");
      llvm::SmallVector<int64_t> dims(t.getShape());
      dims.erase(dims.begin() + axis);
      inputTypes.push_back(mlir::RankedTensorType::get(dims, t.getElementType()));
    }
    const onnx::GraphProto& body = *graphs["body"];
    if (body.input_size() != (int)(carried + scanInputs))
      return failNode(index, "body has " + std::to_string(body.input_size()) +
                                 " inputs but Scan passes " + std::to_string(carried + scanInputs) +
                                 " (" + std::to_string(carried) + " state, " +
                                 std::to_string(scanInputs) + " scan slices)");
    if (n.output_size() < (int)carried || body.output_size() != n.output_size())
      return failNode(index, "body has " + std::to_string(body.output_size()) +
                                 " outputs but Scan has " + std::to_string(n.output_size()) +
                                 " (" + std::to_string(carried) + " state variables and the scan "
                                 "outputs)");
  } else {
    for (const std::string& name : names) {
      const onnx::GraphProto& g = *graphs[name];
      if (g.input_size() != 0)
        return failNode(index, name + " declares " + std::to_string(g.input_size()) +
                                   " inputs; an If branch takes none");
      if (g.output_size() != n.output_size())
        return failNode(index, name + " has " + std::to_string(g.output_size()) +
                                   " outputs but If has " + std::to_string(n.output_size()));
    }
  }

  // An If or Loop reading values whose shapes are not static (downstream of NonZero, say) has
  // its subgraphs written as eager plans, run with the shapes they meet (runtime/DynamicRegion.h);
  // so has a Loop whose loop-carried values change shape between iterations (torch.cat onto a
  // carried tensor: found by compiling the body with static shapes first).
  auto isStatic = [](mlir::Type t) {
    auto r = llvm::dyn_cast<mlir::RankedTensorType>(t);
    return r && r.hasStaticShape();
  };
  bool eager = (op == "If" || op == "Loop") &&
               !llvm::all_of(captured, [&](mlir::Value v) { return isStatic(v.getType()); });
  for (size_t k = 0; op == "Loop" && k < carried; ++k)
    if (!isStatic(typeOf(2 + k))) eager = true;

  // Compiles every subgraph (static plans, or eager ones) into f.attrs; `captures`/`captured`
  // lose the constants an eager subgraph takes as its own initializers (it sees no folding
  // pass, and shape operands such as Unsqueeze's axes must be constants).
  auto compileGraphs = [&](bool asEager) -> mlir::LogicalResult {
    std::vector<mlir::Type> types = inputTypes;
    // An eager Loop body's loop-carried values may take any shape of their rank each iteration.
    for (size_t k = 0; asEager && op == "Loop" && k < carried; ++k) {
      auto t = llvm::cast<mlir::RankedTensorType>(types[2 + k]);
      llvm::SmallVector<int64_t> dims(t.getRank(), mlir::ShapedType::kDynamic);
      types[2 + k] = mlir::RankedTensorType::get(dims, t.getElementType());
    }
    std::vector<onnx::TensorProto> outerConstants;
    if (asEager) {
      std::vector<std::string> kept;
      std::vector<mlir::Value> keptValues;
      for (size_t k = 0; k < captures.size(); ++k) {
        Tensor t;
        if (!getConstantValue(captured[k], &t)) {
          kept.push_back(captures[k]);
          keptValues.push_back(captured[k]);
          continue;
        }
        onnx::TensorProto p;
        p.set_name(captures[k]);
        p.set_data_type((int32_t)t.dtype());
        for (int64_t d : t.shape()) p.add_dims(d);
        p.set_raw_data(std::string(static_cast<const char*>(t.raw()), t.bytes()));
        outerConstants.push_back(std::move(p));
      }
      captures = std::move(kept);
      captured = std::move(keptValues);
    }
    for (const std::string& name : names) {
      onnx::ModelProto sub;
      sub.set_ir_version(model_->ir_version());
      *sub.mutable_opset_import() = model_->opset_import();
      *sub.mutable_graph() = *graphs[name];
      onnx::GraphProto* g = sub.mutable_graph();
      for (const onnx::TensorProto& c : outerConstants) *g->add_initializer() = c;
      g->set_name(nodeLabel(index) + " " + name);
      for (size_t k = 0; k < types.size(); ++k) {
        onnx::ValueInfoProto* in = g->mutable_input((int)k);
        if (in->has_type() && !in->type().has_tensor_type())
          return failNode(index, name + " input '" + in->name() +
                                     "' is not a tensor (sequence, map and optional values are not "
                                     "supported)");
        if (mlir::failed(setSubgraphType(index, name, in, types[k], asEager))) return mlir::failure();
      }
      for (size_t k = 0; k < captures.size(); ++k) {
        onnx::ValueInfoProto* in = g->add_input();
        in->set_name(captures[k]);
        if (mlir::failed(setSubgraphType(index, name, in, captured[k].getType(), asEager)))
          return mlir::failure();
      }
      std::string bytes;
      if (mlir::failed(asEager ? compileEagerSubgraph(index, name, std::move(sub), &bytes)
                               : compileSubgraph(index, name, std::move(sub), &bytes)))
        return mlir::failure();
      f.attrs[name] = b_.getStringAttr(bytes);
    }
    return mlir::success();
  };
  if (mlir::failed(compileGraphs(eager))) return mlir::failure();
  if (op == "Loop" && !eager) {
    // A static body whose loop-carried value leaves it with another shape than it entered
    // (torch.cat onto the carried tensor): compile it again, eagerly.
    plan::Plan body;
    auto bytes = llvm::cast<mlir::StringAttr>(f.attrs["body"]).getValue();
    if (!body.ParseFromArray(bytes.data(), (int)bytes.size())) return failNode(index, "body plan does not parse");
    bool changes = false;
    for (size_t k = 0; k < carried && !changes; ++k) {
      const int in = body.inputs((int)(2 + k)), out = body.outputs((int)(1 + k));
      changes = in < 0 || out < 0 || in >= body.values_size() || out >= body.values_size() ||
                !std::equal(body.values(in).dims().begin(), body.values(in).dims().end(),
                            body.values(out).dims().begin(), body.values(out).dims().end());
    }
    if (changes && mlir::failed(compileGraphs(true))) return mlir::failure();
  }
  for (mlir::Value v : captured) f.operands.push_back(v);
  if (op != "If") f.attrs["num_captures"] = b_.getI64IntegerAttr((int64_t)captures.size());

  mlir::FailureOr<mlir::Operation*> built = create(index, loc, f);
  if (mlir::failed(built)) return mlir::failure();
  llvm::SmallVector<mlir::Value> results((*built)->getResults());
  foldEarly(*built, op, &results);
  for (int i = 0; i < n.output_size(); ++i) {
    if (n.output(i).empty()) continue;
    mlir::Value v = results[i];
    if (scan8) {
      NodeForm un{"Unsqueeze", {v, constInts(loc, {0})}, {}, 1};
      auto unOp = create(index, loc, un);
      if (mlir::failed(unOp)) return mlir::failure();
      v = (*unOp)->getResult(0);
    }
    values_[n.output(i)] = v;
  }
  return mlir::success();
}

// Rewrites older-opset forms to opset 17 (attributes that became inputs, dropped legacy
// attributes), and newer ones through normaliseNewer, so the dialect only ever sees opset-17
// ops (and the ops new after 17 in their own versions).
mlir::LogicalResult OnnxImporter::normalise(int index, mlir::Location loc, NodeForm* f) {
  const std::string& op = f->opType;
  auto& attrs = f->attrs;
  auto takeInts = [&](const char* name, llvm::SmallVector<int64_t>* out) {
    auto it = attrs.find(name);
    if (it == attrs.end()) return false;
    if (auto arr = llvm::dyn_cast<mlir::ArrayAttr>(it->second))
      for (mlir::Attribute e : arr) out->push_back(llvm::cast<mlir::IntegerAttr>(e).getInt());
    attrs.erase(it);
    return true;
  };
  auto takeFloat = [&](const char* name, double* out) {
    auto it = attrs.find(name);
    if (it == attrs.end()) return false;
    if (auto fa = llvm::dyn_cast<mlir::FloatAttr>(it->second)) *out = fa.getValueAsDouble();
    attrs.erase(it);
    return true;
  };
  auto takeInt = [&](const char* name, int64_t* out) {
    auto it = attrs.find(name);
    if (it == attrs.end()) return false;
    if (auto ia = llvm::dyn_cast<mlir::IntegerAttr>(it->second)) *out = ia.getInt();
    attrs.erase(it);
    return true;
  };
  auto setOperand = [&](size_t i, mlir::Value v) {
    if (f->operands.size() <= i) f->operands.resize(i + 1);
    f->operands[i] = v;
  };
  auto dtypeOfOperand = [&](size_t i) {
    return mlirToDType(llvm::cast<mlir::ShapedType>(f->operands[i].getType()).getElementType());
  };
  auto hasInput = [&](size_t i) { return i < f->operands.size() && f->operands[i]; };
  auto attrsToInputs = [&](std::initializer_list<const char*> names, size_t first) {
    size_t slot = first;
    for (const char* name : names) {
      llvm::SmallVector<int64_t> v;
      if (takeInts(name, &v)) setOperand(slot, constInts(loc, v));
      ++slot;
    }
  };

  // Upsample-7 (scales attribute) and -9 (scales input) as Resize-13: X, roi (none), scales.
  if (graph_->node(index).op_type() == "Upsample") {
    if (!hasInput(0)) return failNode(index, "needs input 0 (X)");
    mlir::Value scales = hasInput(1) ? f->operands[1] : mlir::Value();
    auto it = attrs.find("scales");
    if (it != attrs.end()) {
      std::vector<float> v;
      if (auto arr = llvm::dyn_cast<mlir::ArrayAttr>(it->second))
        for (mlir::Attribute e : arr) v.push_back((float)llvm::cast<mlir::FloatAttr>(e).getValueAsDouble());
      attrs.erase(it);
      scales = createConstant(b_, loc, Tensor::fromVector<float>({(int64_t)v.size()}, v));
    }
    if (!scales) return failNode(index, "Upsample needs scales");
    f->operands = {f->operands[0], nullptr, scales};
    attrs["coordinate_transformation_mode"] = b_.getStringAttr("asymmetric");
    attrs["nearest_mode"] = b_.getStringAttr("floor");
  }

  // Squeeze/Unsqueeze-1/-11, Split-2/-11, ReduceSum-1/-11: axes/split became input 1 at 13.
  if (opset_ < 13 && (op == "Squeeze" || op == "Unsqueeze" || op == "ReduceSum"))
    attrsToInputs({"axes"}, 1);
  if (opset_ < 13 && op == "Split") attrsToInputs({"split"}, 1);
  // Slice-1: starts/ends/axes attributes became inputs at 10.
  if (opset_ < 10 && op == "Slice") {
    if (!attrs.count("starts") || !attrs.count("ends"))
      return failNode(index, "Slice-1 needs the starts and ends attributes");
    attrsToInputs({"starts", "ends", "axes"}, 1);
  }
  // Pad-2: pads and value attributes became inputs at 11 (value in the data's dtype).
  if (opset_ < 11 && op == "Pad") {
    if (!hasInput(0)) return failNode(index, "needs input 0 (data)");
    llvm::SmallVector<int64_t> pads;
    if (!takeInts("pads", &pads)) return failNode(index, "Pad-2 needs the pads attribute");
    setOperand(1, constInts(loc, pads));
    double value = 0;
    if (takeFloat("value", &value))
      setOperand(2, createConstant(b_, loc, scalarOf(dtypeOfOperand(0), value)));
  }
  // Clip-6: min/max attributes became optional inputs at 11; absent stays absent (no bound).
  if (opset_ < 11 && op == "Clip") {
    if (!hasInput(0)) return failNode(index, "needs input 0 (input)");
    DType dt = dtypeOfOperand(0);
    double lo = 0, hi = 0;
    bool hasLo = takeFloat("min", &lo), hasHi = takeFloat("max", &hi);
    if (hasLo) setOperand(1, createConstant(b_, loc, scalarOf(dt, lo)));
    if (hasHi) setOperand(2, createConstant(b_, loc, scalarOf(dt, hi)));
  }
  // RoiAlign-10 sampled without the half-pixel shift: RoiAlign-16 added
  // coordinate_transformation_mode, default half_pixel, and named the old rule output_half_pixel.
  if (op == "RoiAlign" && opset_ < 16 && !attrs.count("coordinate_transformation_mode"))
    attrs["coordinate_transformation_mode"] = b_.getStringAttr("output_half_pixel");
  // Dropout-1..-10: ratio and is_test were attributes; inference ignores both.
  if (op == "Dropout" && opset_ < 12) {
    double unused;
    int64_t unusedInt;
    takeFloat("ratio", &unused);
    takeInt("is_test", &unusedInt);
    llvm::SmallVector<int64_t> consumed;
    takeInts("consumed_inputs", &consumed);
  }
  // BatchNormalization-1..-8: spatial, is_test, consumed_inputs. Inference with spatial=1 (the
  // default) is BatchNormalization-15; spatial=0 means per-activation statistics.
  if (op == "BatchNormalization" && opset_ < 9) {
    int64_t spatial = 1, unusedInt;
    takeInt("spatial", &spatial);
    takeInt("is_test", &unusedInt);
    llvm::SmallVector<int64_t> consumed;
    takeInts("consumed_inputs", &consumed);
    if (spatial == 0)
      return failNode(index, "spatial=0 (per-activation statistics) is not supported");
  }
  // Gemm-1/-6: `broadcast` only allowed what Gemm-7's unidirectional C broadcast allows.
  if (op == "Gemm" && opset_ < 7) {
    int64_t unusedInt;
    takeInt("broadcast", &unusedInt);
  }
  // Add-1/-6 and friends: with broadcast=1, B's dims align with A's starting at `axis`
  // (default: the trailing dims, which numpy broadcasting does too). Other axes get B trailing
  // size-1 dims so numpy alignment matches.
  static const std::unordered_set<std::string> legacyBroadcast = {
      "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater"};
  if (opset_ < 7 && legacyBroadcast.count(op)) {
    int64_t broadcast = 0, axis = 0;
    takeInt("broadcast", &broadcast);
    bool hasAxis = takeInt("axis", &axis);
    llvm::SmallVector<int64_t> consumed;
    takeInts("consumed_inputs", &consumed);
    if (broadcast && hasAxis && hasInput(0) && hasInput(1)) {
      int64_t rankA = llvm::cast<mlir::ShapedType>(f->operands[0].getType()).getRank();
      int64_t rankB = llvm::cast<mlir::ShapedType>(f->operands[1].getType()).getRank();
      if (axis < 0) axis += rankA;
      int64_t trailing = rankA - axis - rankB;
      if (axis < 0 || trailing < 0)
        return failNode(index, "legacy broadcast axis " + std::to_string(axis) +
                                   " does not fit B of rank " + std::to_string(rankB) +
                                   " into A of rank " + std::to_string(rankA));
      if (trailing > 0) {
        llvm::SmallVector<int64_t> axes;
        for (int64_t k = 0; k < trailing; ++k) axes.push_back(rankB + k);
        NodeForm u{"Unsqueeze", {f->operands[1], constInts(loc, axes)}, {}, 1};
        auto uOp = create(index, loc, u);
        if (mlir::failed(uOp)) return mlir::failure();
        f->operands[1] = (*uOp)->getResult(0);
      }
    }
  }
  // PRelu-1/-6: a 1-D slope of X's channel count is per channel (dim 1); PRelu-7 broadcasts
  // numpy-style from the last dim, so the slope gets trailing size-1 dims.
  if (opset_ < 7 && op == "PRelu" && hasInput(0) && hasInput(1)) {
    llvm::SmallVector<int64_t> consumed;
    takeInts("consumed_inputs", &consumed);
    auto xt = llvm::cast<mlir::ShapedType>(f->operands[0].getType());
    auto st = llvm::cast<mlir::ShapedType>(f->operands[1].getType());
    if (st.getRank() == 1 && xt.getRank() >= 3 && st.getDimSize(0) != 1 &&
        st.getDimSize(0) == xt.getDimSize(1)) {
      llvm::SmallVector<int64_t> axes;
      for (int64_t k = 1; k <= xt.getRank() - 2; ++k) axes.push_back(k);
      NodeForm u{"Unsqueeze", {f->operands[1], constInts(loc, axes)}, {}, 1};
      auto uOp = create(index, loc, u);
      if (mlir::failed(uOp)) return mlir::failure();
      f->operands[1] = (*uOp)->getResult(0);
    }
  }
  if (opset_ >= 18) return normaliseNewer(index, loc, f);
  return mlir::success();
}

// Opsets 18-25 (NewerOpsets.h): inputs that replaced opset-17 attributes, read back from
// constants, and renamed attribute values.
mlir::LogicalResult OnnxImporter::normaliseNewer(int index, mlir::Location loc, NodeForm* f) {
  auto& attrs = f->attrs;
  auto hasInput = [&](size_t i) { return i < f->operands.size() && f->operands[i]; };
  auto rankOf = [&](size_t i) -> int64_t {
    auto t = llvm::dyn_cast<mlir::RankedTensorType>(f->operands[i].getType());
    return t ? t.getRank() : -1;
  };
  // The integer values of constant operand i, or failure naming `what`.
  auto constInputInts = [&](size_t i, const std::string& what,
                            llvm::SmallVector<int64_t>* out) -> mlir::LogicalResult {
    Tensor t;
    if (!getConstantValue(f->operands[i], &t) ||
        (t.dtype() != DType::I64 && t.dtype() != DType::I32))
      return failNode(index, what + " must be a constant of int64 values (computed at run time "
                                    "it is not supported)");
    for (int64_t k = 0; k < t.numel(); ++k)
      out->push_back(t.dtype() == DType::I64 ? t.data<int64_t>()[k] : t.data<int32_t>()[k]);
    return mlir::success();
  };
  auto intAttr = [&](const char* name, int64_t dflt) {
    auto it = attrs.find(name);
    auto ia = it == attrs.end() ? nullptr : llvm::dyn_cast<mlir::IntegerAttr>(it->second);
    return ia ? ia.getInt() : dflt;
  };
  const std::string& original = graph_->node(index).op_type();
  if (original == "Swish" || original == "CenterCropPad" || original == "AffineGrid")
    return expandNewOp(index, loc, original, f);
  const std::string op = f->opType;
  const std::string label = op + "-" + std::to_string(newerOpVersion(op, opset_));
  for (const std::string& name : attributesAddedAfter17(op, opset_)) attrs.erase(name);
  static const std::unordered_set<std::string> reductions18 = {
      "ReduceMean", "ReduceMax",    "ReduceMin",       "ReduceProd",     "ReduceL1",
      "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  if (reductions18.count(op)) {
    // axes became input 1 (ReduceSum's already at 13), with noop_with_empty_axes: no axes and
    // noop 1 is the identity, no axes and noop 0 reduces every dim (the axes attribute absent).
    llvm::SmallVector<int64_t> axes;
    if (hasInput(1) && mlir::failed(constInputInts(1, label + ": input 1 (axes)", &axes)))
      return mlir::failure();
    const bool noop = intAttr("noop_with_empty_axes", 0) != 0;
    attrs.erase("noop_with_empty_axes");
    f->operands.resize(1);
    if (axes.empty() && noop) {
      f->opType = "Identity";
      attrs.clear();
    } else if (!axes.empty()) {
      attrs["axes"] = b_.getI64ArrayAttr(axes);
    }
  } else if (op == "Split") {
    // num_outputs (18): chunks of ceil(d / n), the last one smaller, as split sizes.
    auto it = attrs.find("num_outputs");
    if (it != attrs.end()) {
      const int64_t n = llvm::cast<mlir::IntegerAttr>(it->second).getInt();
      attrs.erase(it);
      if (!hasInput(1)) {
        const int64_t rank = rankOf(0);
        int64_t axis = intAttr("axis", 0);
        if (axis < 0) axis += rank;
        auto t = llvm::dyn_cast<mlir::RankedTensorType>(f->operands[0].getType());
        if (n < 1 || !t || axis < 0 || axis >= rank || t.isDynamicDim(axis))
          return failNode(index, label + ": num_outputs " + std::to_string(n) +
                                     " needs the split axis of a known size");
        const int64_t d = t.getDimSize(axis), chunk = (d + n - 1) / n;
        llvm::SmallVector<int64_t> sizes(n, chunk);
        sizes.back() = d - chunk * (n - 1);
        if (sizes.back() < 0)
          return failNode(index, label + ": " + std::to_string(d) + " elements do not split into " +
                                     std::to_string(n) + " chunks of " + std::to_string(chunk));
        if (f->operands.size() < 2) f->operands.resize(2);
        f->operands[1] = constInts(loc, sizes);
      }
    }
  } else if (op == "Pad" && hasInput(3)) {
    // axes (18): the pads of the listed axes; the others 0.
    llvm::SmallVector<int64_t> axes, pads;
    if (mlir::failed(constInputInts(3, label + ": input 3 (axes)", &axes)) ||
        mlir::failed(constInputInts(1, label + ": input 1 (pads) with axes", &pads)))
      return mlir::failure();
    const int64_t rank = rankOf(0), k = axes.size();
    if (rank < 0 || (int64_t)pads.size() != 2 * k)
      return failNode(index, label + ": pads has " + std::to_string(pads.size()) +
                                 " entries for " + std::to_string(k) + " axes");
    llvm::SmallVector<int64_t> full(2 * rank, 0);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t a = axes[j] < 0 ? axes[j] + rank : axes[j];
      if (a < 0 || a >= rank)
        return failNode(index, label + ": axis " + std::to_string(axes[j]) + " is out of range");
      full[a] = pads[j];
      full[a + rank] = pads[j + k];
    }
    f->operands[1] = constInts(loc, full);
    f->operands.resize(3);
  } else if (op == "DFT" && opset_ >= 20) {
    // axis (20): from attribute (default 1) to input 2 (default -2, the same dim of the
    // [batch, ..., n, 1|2] signal).
    llvm::SmallVector<int64_t> axis;
    if (hasInput(2) && mlir::failed(constInputInts(2, label + ": input 2 (axis)", &axis)))
      return mlir::failure();
    int64_t a = axis.empty() ? -2 : axis[0];
    if (a < 0 && rankOf(0) > 0) a += rankOf(0);
    if (f->operands.size() > 2) f->operands.resize(2);
    attrs["axis"] = b_.getI64IntegerAttr(a);
  } else if (op == "GroupNormalization" && opset_ < 21) {
    // GroupNormalization-18 scales and shifts per group ([num_groups]), -21 per channel ([C]):
    // each group's value repeated C / num_groups times, Reshape(Expand(Unsqueeze(v))).
    const int64_t groups = intAttr("num_groups", 0);
    auto t = llvm::dyn_cast<mlir::RankedTensorType>(f->operands[0].getType());
    if (groups < 1 || !t || t.getRank() < 2 || t.isDynamicDim(1) || t.getDimSize(1) % groups)
      return failNode(index, label + ": needs X with a known channel count that num_groups " +
                                 std::to_string(groups) + " divides");
    const int64_t C = t.getDimSize(1);
    for (size_t i : {1, 2}) {
      if (!hasInput(i)) continue;
      mlir::Value v = f->operands[i];
      for (NodeForm step : {NodeForm{"Unsqueeze", {v, constInts(loc, {1})}, {}, 1},
                            NodeForm{"Expand", {nullptr, constInts(loc, {groups, C / groups})}, {}, 1},
                            NodeForm{"Reshape", {nullptr, constInts(loc, {C})}, {}, 1}}) {
        if (!step.operands[0]) step.operands[0] = v;
        auto built = create(index, loc, step);
        if (mlir::failed(built)) return mlir::failure();
        v = (*built)->getResult(0);
      }
      f->operands[i] = v;
    }
  } else if (op == "Resize" && (attrs.count("axes") || resizeAspectPolicy(graph_->node(index)) != "stretch")) {
    // axes (18): roi, scales and sizes give only the listed axes; made full-rank here (scales
    // 1, sizes the input's own dims, roi [0, 1] on the others), so they must be constants.
    // keep_aspect_ratio_policy (18) not_larger / not_smaller, with sizes: one scale for the
    // axes, the least / greatest of sizes / X.dims there, and the output round(scale * X.dims)
    // (half up) on the axes (ONNX's reference, op_resize.py). That output is not floor(X.dims *
    // scales), so the op keeps both: sizes give the output, the scales, in f64 (Tandem's form;
    // an ONNX Resize gives one or the other, scales in f32), map the coordinates.
    const std::string policy = resizeAspectPolicy(graph_->node(index));
    const bool hasAxes = attrs.count("axes") != 0;
    llvm::SmallVector<int64_t> axes;
    if (hasAxes)
      for (mlir::Attribute e : llvm::cast<mlir::ArrayAttr>(attrs["axes"]))
        axes.push_back(llvm::cast<mlir::IntegerAttr>(e).getInt());
    attrs.erase("axes");
    auto xt = llvm::dyn_cast<mlir::RankedTensorType>(f->operands[0].getType());
    const int64_t rank = xt ? xt.getRank() : -1;
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
      return failNode(index, label + ": keep_aspect_ratio_policy '" + policy +
                                 "' is not one of stretch, not_larger, not_smaller");
    if (rank < 0)
      return failNode(index, label + ": axes and keep_aspect_ratio_policy need X of a known rank");
    if (!hasAxes)
      for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
    for (int64_t& a : axes) {
      if (a < 0) a += rank;
      if (a < 0 || a >= rank)
        return failNode(index, label + ": axes has a value out of range for rank " +
                                   std::to_string(rank));
    }
    const int64_t k = axes.size();
    auto constFloats = [&](size_t i, const std::string& what, std::vector<float>* out) {
      Tensor t;
      if (!getConstantValue(f->operands[i], &t) || t.dtype() != DType::F32 ||
          t.numel() != (int64_t)out->size())
        return failNode(index, label + ": with axes, " + what + " must be a constant f32 of " +
                                   std::to_string(out->size()) + " values");
      std::copy(t.data<float>(), t.data<float>() + t.numel(), out->begin());
      return mlir::success();
    };
    auto present = [&](size_t i) {
      if (!hasInput(i)) return false;
      auto t = llvm::dyn_cast<mlir::RankedTensorType>(f->operands[i].getType());
      return !t || t.getNumElements() != 0;
    };
    if (hasAxes && present(1)) {
      std::vector<float> roi(2 * k), full(2 * rank, 0.f);
      if (mlir::failed(constFloats(1, "input 1 (roi)", &roi))) return mlir::failure();
      for (int64_t d = 0; d < rank; ++d) full[rank + d] = 1.f;
      for (int64_t j = 0; j < k; ++j) full[axes[j]] = roi[j], full[rank + axes[j]] = roi[k + j];
      f->operands[1] = createConstant(b_, loc, Tensor::fromVector<float>({2 * rank}, full));
    }
    if (present(2) && present(3))
      return failNode(index, label + ": exactly one of input 2 (scales) and input 3 (sizes) may be given");
    if (hasAxes && present(2)) {
      std::vector<float> scales(k), full(rank, 1.f);
      if (mlir::failed(constFloats(2, "input 2 (scales)", &scales))) return mlir::failure();
      for (int64_t j = 0; j < k; ++j) full[axes[j]] = scales[j];
      f->operands[2] = createConstant(b_, loc, Tensor::fromVector<float>({rank}, full));
    }
    if (present(3)) {
      llvm::SmallVector<int64_t> sizes;
      if (mlir::failed(constInputInts(3, label + ": input 3 (sizes) with axes", &sizes)))
        return mlir::failure();
      if ((int64_t)sizes.size() != k)
        return failNode(index, label + ": sizes has " + std::to_string(sizes.size()) +
                                   " values for " + std::to_string(k) + " axes");
      llvm::SmallVector<int64_t> full;
      for (int64_t d = 0; d < rank; ++d) {
        if (xt.isDynamicDim(d) && std::find(axes.begin(), axes.end(), d) == axes.end())
          return failNode(index, label + ": with axes, the input's other dims must be known");
        full.push_back(xt.isDynamicDim(d) ? 0 : xt.getDimSize(d));
      }
      for (int64_t j = 0; j < k; ++j) full[axes[j]] = sizes[j];
      if (policy != "stretch") {
        double scale = 0;
        for (int64_t j = 0; j < k; ++j) {
          if (xt.isDynamicDim(axes[j]) || xt.getDimSize(axes[j]) == 0)
            return failNode(index, label + ": keep_aspect_ratio_policy '" + policy +
                                       "' needs X's dims on the axes to be known and non-zero");
          const double r = double(sizes[j]) / double(xt.getDimSize(axes[j]));
          if (j == 0 || (policy == "not_larger" ? r < scale : r > scale)) scale = r;
        }
        if (!(scale > 0))
          return failNode(index, label + ": keep_aspect_ratio_policy '" + policy +
                                     "' needs positive sizes");
        std::vector<double> scales(rank, 1.0);
        for (int64_t a : axes) {
          scales[a] = scale;
          full[a] = (int64_t)(scale * double(xt.getDimSize(a)) + 0.5);
        }
        if (f->operands.size() < 3) f->operands.resize(3);
        f->operands[2] = createConstant(b_, loc, Tensor::fromVector<double>({rank}, scales));
      }
      f->operands[3] = constInts(loc, full);
    }
  } else if (op == "GridSample" && opset_ >= 20) {
    // mode (20): linear and cubic (any rank) were bilinear and bicubic (4-D) before.
    auto it = attrs.find("mode");
    std::string mode = "linear";
    if (it != attrs.end()) mode = llvm::cast<mlir::StringAttr>(it->second).getValue().str();
    if (mode == "linear") mode = "bilinear";
    else if (mode == "cubic") mode = "bicubic";
    attrs["mode"] = b_.getStringAttr(mode);
  }
  return mlir::success();
}

// Ops new after opset 17 that are compositions of table ops, built here so they run (and
// fuse, and place) as those ops: f becomes the expansion's last op, the others are created.
// MatMulNBits (ONNX Runtime's contrib op, com.microsoft-1): Y = A x W^T (+ bias), W [N, K]
// quantized in blocks of block_size along K, `bits` bits a value: B uint8 [N, blocks,
// block_size * bits / 8] (element i of a block in byte i * bits / 8, from the low bits up: 4
// bits put element 2i in byte i's low nibble, 2i + 1 in its high one), scales [N * blocks] (or
// [N, blocks]), zero_points uint8 packed the same way along the blocks ([N * ceil(blocks *
// bits / 8)]; absent: 2^(bits - 1)), W = (q - zp) * scale. g_idx (int32 [K], act-order, as
// GPTQ writes it) gives row k's group: its scale and zero point are those of block g_idx[k]
// while q stays at k. Where every group holds as many rows as a block would, the rows are
// sorted by group at import (B's rows, and A's columns by a Gather), so the groups become
// blocks; a g_idx of k / block_size is the blocks as they are. f16 A, scales and bias (the
// form of GPU-exported models) compute in f32 between Casts: the scales widened at import.
// Taken: bits 2, 4 and 8, constant B, scales, zero points and g_idx. accuracy_level 4 (or
// more: ONNX Runtime clamps it), "int8 activations allowed", is kept on the DequantizeMatMul:
// its CPU kernel then quantizes A to int8 per row and block (where the CPU has AVX2), as
// ONNX Runtime does; other levels compute in f32.
mlir::LogicalResult OnnxImporter::convertMatMulNBits(int index, mlir::Location loc, NodeForm* f) {
  auto intAttr = [&](const char* name, int64_t dflt) {
    auto it = f->attrs.find(name);
    auto ia = it == f->attrs.end() ? nullptr : llvm::dyn_cast<mlir::IntegerAttr>(it->second);
    return ia ? ia.getInt() : dflt;
  };
  auto has = [&](size_t i) { return i < f->operands.size() && f->operands[i]; };
  const int64_t K = intAttr("K", -1), N = intAttr("N", -1), bits = intAttr("bits", 4),
                bs = intAttr("block_size", -1);
  if (K < 1 || N < 1 || bs < 1)
    return failNode(index, "MatMulNBits needs attributes K, N and block_size >= 1");
  if (bits != 2 && bits != 4 && bits != 8)
    return failNode(index, "MatMulNBits with bits=" + std::to_string(bits) +
                               " is not supported (supported: 2, 4, 8)");
  if ((bs * bits) % 8)
    return failNode(index, "MatMulNBits: block_size " + std::to_string(bs) + " of " +
                               std::to_string(bits) + "-bit values is not whole bytes");
  if (!has(0) || !has(1) || !has(2)) return failNode(index, "MatMulNBits needs inputs A, B and scales");
  auto at = llvm::dyn_cast<mlir::RankedTensorType>(f->operands[0].getType());
  const DType adt = at ? mlirToDType(at.getElementType()) : DType::F32;
  if (!at || (adt != DType::F32 && adt != DType::F16))
    return failNode(index, "MatMulNBits: A must be f32 or f16 of a known rank");
  const int64_t blocks = (K + bs - 1) / bs, blob = bs * bits / 8;
  const int64_t zpBytes = (blocks * bits + 7) / 8;  // per column
  Tensor B, scalesIn, zps, gIdx;
  if (!getConstantValue(f->operands[1], &B) || B.dtype() != DType::U8 || B.numel() != N * blocks * blob)
    return failNode(index, "MatMulNBits: B must be a constant uint8 of N x blocks x block_size * "
                           "bits / 8 = " + std::to_string(N * blocks * blob) + " bytes");
  if (!getConstantValue(f->operands[2], &scalesIn) || scalesIn.dtype() != adt ||
      scalesIn.numel() != N * blocks)
    return failNode(index, std::string("MatMulNBits: scales must be a constant ") + dtypeName(adt) +
                               " (A's dtype) of N x blocks = " + std::to_string(N * blocks) + " values");
  // The scales in f32 (f16 ones widened exactly).
  Tensor scales = Tensor::alloc(DType::F32, {N * blocks});
  for (int64_t i = 0; i < N * blocks; ++i)
    scales.data<float>()[i] = adt == DType::F16 ? halfToFloat(scalesIn.data<uint16_t>()[i])
                                                : scalesIn.data<float>()[i];
  // g_idx: each row's group, sorted into blocks (order[j]: the row that goes to place j).
  std::vector<int64_t> order;
  if (has(4)) {
    if (!getConstantValue(f->operands[4], &gIdx) ||
        (gIdx.dtype() != DType::I32 && gIdx.dtype() != DType::I64) ||
        (gIdx.numel() != K && gIdx.numel() != blocks * bs))
      return failNode(index, "MatMulNBits: g_idx must be a constant int32 of K = " + std::to_string(K) +
                                 " values");
    std::vector<int64_t> group(K), count(blocks, 0);
    bool inPlace = true;
    for (int64_t k = 0; k < K; ++k) {
      group[k] = gIdx.dtype() == DType::I32 ? gIdx.data<int32_t>()[k] : gIdx.data<int64_t>()[k];
      if (group[k] < 0 || group[k] >= blocks)
        return failNode(index, "MatMulNBits: g_idx[" + std::to_string(k) + "] = " +
                                   std::to_string(group[k]) + " is not a block index (0 to " +
                                   std::to_string(blocks - 1) + ")");
      ++count[group[k]];
      inPlace &= group[k] == k / bs;
    }
    for (int64_t g = 0; g < blocks; ++g)
      if (count[g] != std::min(bs, K - g * bs))
        return failNode(index, "MatMulNBits: g_idx puts " + std::to_string(count[g]) +
                                   " rows in group " + std::to_string(g) + " where a block holds " +
                                   std::to_string(std::min(bs, K - g * bs)) +
                                   " (groups of other sizes are not supported)");
    if (!inPlace) {
      order.resize(K);
      for (int64_t k = 0; k < K; ++k) order[k] = k;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return group[a] < group[b]; });
    }
  }
  if (has(3) && (!getConstantValue(f->operands[3], &zps) || zps.dtype() != DType::U8 ||
                 zps.numel() != N * zpBytes))
    return failNode(index, "MatMulNBits: zero_points must be a constant uint8 of N x " +
                               std::to_string(zpBytes) + " packed bytes (float zero points are "
                               "not supported)");
  const uint8_t* bq = B.data<uint8_t>();
  const uint8_t* zq = has(3) ? zps.data<uint8_t>() : nullptr;
  Tensor q = Tensor::alloc(DType::U8, {K, N}), s = Tensor::alloc(DType::F32, {blocks, N}),
         z = Tensor::alloc(DType::U8, {blocks, N});
  const int perByte = (int)(8 / bits);
  const uint32_t mask = (1u << bits) - 1;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < blocks; ++b) {
      s.data<float>()[b * N + n] = scales.data<float>()[n * blocks + b];
      uint32_t zp = 1u << (bits - 1);
      if (zq) zp = (zq[n * zpBytes + b / perByte] >> (bits * (b % perByte))) & mask;
      z.data<uint8_t>()[b * N + n] = (uint8_t)zp;
      for (int64_t i = 0; i < bs; ++i) {
        const int64_t k = b * bs + i;
        if (k >= K) break;
        const uint8_t byte = bq[(n * blocks + b) * blob + i / perByte];
        q.data<uint8_t>()[k * N + n] = (uint8_t)((byte >> (bits * (i % perByte))) & mask);
      }
    }
  mlir::Value a = f->operands[0], bias = has(5) ? f->operands[5] : mlir::Value();
  auto build = [&](const NodeForm& step) { return createValue(index, loc, step); };
  if (!order.empty()) {
    // Rows sorted by group: B's here, A's columns by a Gather on its last axis.
    Tensor sorted = Tensor::alloc(DType::U8, {K, N});
    for (int64_t j = 0; j < K; ++j)
      std::copy(q.data<uint8_t>() + order[j] * N, q.data<uint8_t>() + (order[j] + 1) * N,
                sorted.data<uint8_t>() + j * N);
    q = std::move(sorted);
    if (!(a = build({"Gather", {a, constInts(loc, llvm::SmallVector<int64_t>(order.begin(), order.end()))},
                     {{"axis", b_.getI64IntegerAttr(at.getRank() - 1)}}, 1})))
      return mlir::failure();
  }
  auto castTo = [&](mlir::Value v, DType dt) {
    return build({"Cast", {v}, {{"to", b_.getI64IntegerAttr((int64_t)dt)}}, 1});
  };
  if (adt == DType::F16) {
    if (!(a = castTo(a, DType::F32)) || (bias && !(bias = castTo(bias, DType::F32))))
      return mlir::failure();
  }
  NodeForm product{"DequantizeMatMul",
                   {a, createConstant(b_, loc, q), createConstant(b_, loc, s),
                    createConstant(b_, loc, z), bias},
                   {{"block_size", b_.getI64IntegerAttr(bs)}},
                   1};
  if (intAttr("accuracy_level", 0) >= 4) product.attrs["accuracy_level"] = b_.getI64IntegerAttr(4);
  if (adt == DType::F32) {
    *f = std::move(product);
    return mlir::success();
  }
  // f16: the f32 product cast back; f becomes that Cast.
  mlir::Value y = build(product);
  if (!y) return mlir::failure();
  *f = NodeForm{"Cast", {y}, {{"to", b_.getI64IntegerAttr((int64_t)DType::F16)}}, 1};
  return mlir::success();
}

mlir::LogicalResult OnnxImporter::expandNewOp(int index, mlir::Location loc, const std::string& op,
                                              NodeForm* f) {
  auto& attrs = f->attrs;
  auto hasInput = [&](size_t i) { return i < f->operands.size() && f->operands[i]; };
  auto build = [&](const NodeForm& step) { return createValue(index, loc, step); };
  if (!hasInput(0)) return failNode(index, op + " needs input 0");
  mlir::Value x = f->operands[0];
  auto xt = llvm::dyn_cast<mlir::RankedTensorType>(x.getType());
  if (!xt) return failNode(index, op + ": input 0 needs a known rank");
  const DType dt = mlirToDType(xt.getElementType());
  auto scalar = [&](double v) { return createConstant(b_, loc, scalarOf(dt, v)); };

  if (op == "Swish") {
    // Swish-24: x * Sigmoid(alpha * x), alpha default 1.
    double alpha = 1.0;
    auto it = attrs.find("alpha");
    if (it != attrs.end()) {
      if (auto fa = llvm::dyn_cast<mlir::FloatAttr>(it->second)) alpha = fa.getValueAsDouble();
      attrs.erase(it);
    }
    if (!isFloat(dt)) return failNode(index, "Swish-24 needs a float input");
    mlir::Value arg = x;
    if (alpha != 1.0 && !(arg = build({"Mul", {x, scalar(alpha)}, {}, 1}))) return mlir::failure();
    mlir::Value sig = build({"Sigmoid", {arg}, {}, 1});
    if (!sig) return mlir::failure();
    f->operands = {x, sig};
    attrs.clear();
    return mlir::success();
  }

  if (op == "CenterCropPad") {
    // CenterCropPad-18: per axis, a longer dim is cropped from (d - s) / 2 (rounded down), a
    // shorter one padded with zeros, (s - d) / 2 before (rounded down) and the rest after.
    if (!hasInput(1)) return failNode(index, "CenterCropPad-18 needs input 1 (shape)");
    Tensor shapeT;
    if (!getConstantValue(f->operands[1], &shapeT) ||
        (shapeT.dtype() != DType::I64 && shapeT.dtype() != DType::I32))
      return failNode(index, "CenterCropPad-18: input 1 (shape) must be a constant of int64 or "
                             "int32 values (computed at run time it is not supported)");
    const int64_t rank = xt.getRank();
    llvm::SmallVector<int64_t> axes;
    auto it = attrs.find("axes");
    if (it != attrs.end()) {
      for (mlir::Attribute e : llvm::cast<mlir::ArrayAttr>(it->second))
        axes.push_back(llvm::cast<mlir::IntegerAttr>(e).getInt());
      attrs.erase(it);
    } else {
      for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    }
    if ((int64_t)axes.size() != shapeT.numel())
      return failNode(index, "CenterCropPad-18: shape has " + std::to_string(shapeT.numel()) +
                                 " values for " + std::to_string(axes.size()) + " axes");
    llvm::SmallVector<int64_t> starts, ends, sliceAxes, pads(2 * rank, 0);
    bool padded = false;
    for (size_t k = 0; k < axes.size(); ++k) {
      const int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
      const int64_t want = shapeT.dtype() == DType::I64 ? shapeT.data<int64_t>()[k]
                                                         : shapeT.data<int32_t>()[k];
      if (a < 0 || a >= rank || want < 0)
        return failNode(index, "CenterCropPad-18: axis " + std::to_string(axes[k]) +
                                   " or size " + std::to_string(want) + " is out of range");
      if (xt.isDynamicDim(a))
        return failNode(index, "CenterCropPad-18: dim " + std::to_string(a) +
                                   " of the input must be known");
      const int64_t d = xt.getDimSize(a);
      if (want < d) {
        starts.push_back((d - want) / 2);
        ends.push_back((d - want) / 2 + want);
        sliceAxes.push_back(a);
      } else if (want > d) {
        pads[a] = (want - d) / 2;
        pads[a + rank] = want - d - pads[a];
        padded = true;
      }
    }
    mlir::Value v = x;
    if (!starts.empty() && !(v = build({"Slice", {x, constInts(loc, starts), constInts(loc, ends),
                                                  constInts(loc, sliceAxes)}, {}, 1})))
      return mlir::failure();
    f->operands = {v, constInts(loc, pads)};
    attrs.clear();
    if (!padded) f->opType = "Identity", f->operands = {v};
    return mlir::success();
  }

  // AffineGrid-20: grid [N, (D,) H, W, k] = base [(D) H W, k + 1] x theta^T, the base grid's
  // rows (x, y, (z,) 1) at -1 + 2i / (n - 1) (align_corners) or -1 + (2i + 1) / n.
  if (!hasInput(1)) return failNode(index, "AffineGrid-20 needs input 1 (size)");
  Tensor sizeT;
  if (!getConstantValue(f->operands[1], &sizeT) || sizeT.dtype() != DType::I64 ||
      (sizeT.numel() != 4 && sizeT.numel() != 5))
    return failNode(index, "AffineGrid-20: input 1 (size) must be a constant int64 [N, C, H, W] "
                           "or [N, C, D, H, W] (computed at run time it is not supported)");
  if (dt != DType::F32 && dt != DType::F64)
    return failNode(index, "AffineGrid-20: theta must be f32 or f64");
  const bool align = [&] {
    auto it = attrs.find("align_corners");
    auto ia = it == attrs.end() ? nullptr : llvm::dyn_cast<mlir::IntegerAttr>(it->second);
    return ia && ia.getInt() != 0;
  }();
  const int64_t* sz = sizeT.data<int64_t>();
  const int64_t k = sizeT.numel() - 2;  // spatial dims: 2 or 3
  std::vector<int64_t> spatial(sz + 2, sz + 2 + k);
  if (xt.getRank() != 3 || (!xt.isDynamicDim(1) && xt.getDimSize(1) != k) ||
      (!xt.isDynamicDim(2) && xt.getDimSize(2) != k + 1))
    return failNode(index, "AffineGrid-20: theta must be [N, " + std::to_string(k) + ", " +
                               std::to_string(k + 1) + "] for a size of " +
                               std::to_string(sizeT.numel()) + " values");
  int64_t points = 1;
  for (int64_t d : spatial) {
    if (d < 1) return failNode(index, "AffineGrid-20: size must be positive");
    points *= d;
  }
  Tensor base = Tensor::alloc(dt, {points, k + 1});
  for (int64_t p = 0; p < points; ++p) {
    // p's index along each spatial dim, the last (W: x) fastest.
    int64_t rest = p;
    std::vector<double> coord(k);
    for (int64_t d = k - 1; d >= 0; --d) {
      const int64_t n = spatial[d], i = rest % n;
      rest /= n;
      coord[d] = align ? (n > 1 ? -1.0 + 2.0 * double(i) / double(n - 1) : -1.0)
                       : -1.0 + (2.0 * double(i) + 1.0) / double(n);
    }
    // Row (x, y, (z,) 1): x is the last spatial dim's coordinate.
    for (int64_t c = 0; c <= k; ++c) {
      const double v = c == k ? 1.0 : coord[k - 1 - c];
      if (dt == DType::F32) base.data<float>()[p * (k + 1) + c] = float(v);
      else base.data<double>()[p * (k + 1) + c] = v;
    }
  }
  llvm::SmallVector<int64_t> perm = {0, 2, 1};
  mlir::Value thetaT = build({"Transpose", {x}, {{"perm", b_.getI64ArrayAttr(perm)}}, 1});
  if (!thetaT) return mlir::failure();
  mlir::Value grid = build({"MatMul", {createConstant(b_, loc, base), thetaT}, {}, 1});
  if (!grid) return mlir::failure();
  llvm::SmallVector<int64_t> outShape = {sz[0]};
  outShape.append(spatial.begin(), spatial.end());
  outShape.push_back(k);
  f->operands = {grid, constInts(loc, outShape)};
  attrs.clear();
  return mlir::success();
}

mlir::LogicalResult OnnxImporter::buildReturn(mlir::func::FuncOp func,
                                              llvm::ArrayRef<mlir::Type> argTypes) {
  if (graph_->output_size() == 0) return fail("the graph has no outputs");
  llvm::SmallVector<mlir::Value> results;
  llvm::SmallVector<mlir::Type> resultTypes;
  for (const auto& out : graph_->output()) {
    mlir::Value v = valueFor(out.name());
    if (!v) return mlir::failure();
    results.push_back(v);
    resultTypes.push_back(v.getType());
  }
  b_.create<mlir::func::ReturnOp>(fileLoc_, results);
  func.setType(b_.getFunctionType(argTypes, resultTypes));
  for (int i = 0; i < graph_->output_size(); ++i)
    func.setResultAttr(i, "tandem.name", b_.getStringAttr(graph_->output(i).name()));
  return mlir::success();
}

}  // namespace

// Scatter-9/-11 is ScatterElements without a reduction; Upsample-7/-9 is Resize with
// asymmetric coordinates (and floor for nearest): normalise() rewrites their operands. Ops new
// after 17 that normaliseNewer builds from table ops are named by the op that ends the
// expansion: Swish-24 (x * Sigmoid(alpha x)), CenterCropPad-18 (Slice, then Pad) and
// AffineGrid-20 (MatMul of the base grid and theta^T, then Reshape).
const std::string& onnxOpset17Name(const std::string& op) {
  static const std::map<std::string, std::string> renamed = {
      {"Scatter", "ScatterElements"}, {"Upsample", "Resize"}, {"Swish", "Mul"},
      {"CenterCropPad", "Pad"},       {"AffineGrid", "Reshape"}};
  auto it = renamed.find(op);
  return it == renamed.end() ? op : it->second;
}

namespace {

mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext* ctx, onnx::ModelProto* model,
                                              const std::string& sourceName,
                                              const ImportOptions& options, std::string* error) {
  std::string why;
  if (!inlineLocalFunctions(model, &why)) {
    if (error) *error = sourceName + ": " + why;
    return nullptr;
  }
  OnnxImporter importer(ctx, sourceName, options);
  return importer.import(*model, error);
}

}  // namespace

mlir::OwningOpRef<mlir::ModuleOp> importOnnxBytes(mlir::MLIRContext* ctx, const std::string& bytes,
                                                  const std::string& sourceName,
                                                  const ImportOptions& options, std::string* error) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    if (error) *error = sourceName + ": not a valid ONNX model (protobuf parse failed)";
    return nullptr;
  }
  return importModel(ctx, &model, sourceName, options, error);
}

mlir::OwningOpRef<mlir::ModuleOp> importOnnxFile(mlir::MLIRContext* ctx, const std::string& path,
                                                 const ImportOptions& options, std::string* error) {
  // Untrusted path: a directory, a device (/dev/zero) or a file over the input limit is refused
  // before anything is read. Tensors stored as external data are read next to the file.
  std::string bytes;
  if (Status st = readInputFile(path, &bytes, "ONNX model file"); !st.isOk()) {
    if (error) *error = st.message();
    return nullptr;
  }
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    if (error) *error = path + ": not a valid ONNX model (protobuf parse failed)";
    return nullptr;
  }
  std::string().swap(bytes);
  if (Status st = loadExternalData(&model, path); !st.isOk()) {
    if (error) *error = path + ": " + st.message();
    return nullptr;
  }
  return importModel(ctx, &model, path, options, error);
}

}  // namespace tandem

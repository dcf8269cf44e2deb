// The in-process driver: import and compile with captured diagnostics (tensor files and
// comparison: TensorFiles.cpp).
#include "tools/driver/Driver.h"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <vector>

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "passes/Passes.h"

namespace tandem {

namespace {

// "node 'conv1'" for an ONNX node, "file.cpp:42" for a builder call site.
std::string describeLocation(mlir::Location loc) {
  if (auto n = mlir::dyn_cast<mlir::NameLoc>(loc)) return "node '" + n.getName().str() + "'";
  if (auto f = mlir::dyn_cast<mlir::FileLineColLoc>(loc))
    return f.getFilename().str() + ":" + std::to_string(f.getLine());
  if (auto c = mlir::dyn_cast<mlir::CallSiteLoc>(loc)) return describeLocation(c.getCallee());
  if (auto fu = mlir::dyn_cast<mlir::FusedLoc>(loc))
    if (!fu.getLocations().empty()) return describeLocation(fu.getLocations().front());
  std::string s;
  llvm::raw_string_ostream os(s);
  loc.print(os);
  return os.str();
}

// Collects error diagnostics (with their attached notes) into lines.
struct DiagnosticCollector {
  std::vector<std::string> lines;
  mlir::ScopedDiagnosticHandler handler;
  explicit DiagnosticCollector(mlir::MLIRContext* ctx)
      : handler(ctx, [this](mlir::Diagnostic& d) {
          // Errors read "node 'x': reason"; warnings and notes say what they are. MLIR's
          // "see current operation" notes dump IR, which users of an ONNX model never wrote.
          const char* sev = d.getSeverity() == mlir::DiagnosticSeverity::Error     ? ""
                            : d.getSeverity() == mlir::DiagnosticSeverity::Warning ? "warning: "
                                                                                     : "note: ";
          lines.push_back(describeLocation(d.getLocation()) + ": " + sev + d.str());
          for (mlir::Diagnostic& n : d.getNotes()) {
            std::string text = n.str();
            if (text.rfind("see current operation", 0) == 0) continue;
            lines.push_back(describeLocation(n.getLocation()) + ": note: " + text);
          }
          return mlir::success();
        }) {}
  std::string joined() const {
    std::string s;
    for (size_t i = 0; i < lines.size(); ++i) s += (i ? "\n" : "") + lines[i];
    return s;
  }
};

}  // namespace

Status compileModuleToPlan(mlir::ModuleOp module, const CompileOptions& compileOptions,
                           CompileResult* result) {
  DiagnosticCollector diags(module->getContext());
  if (mlir::failed(compileModule(module, compileOptions, result)))
    return Status::error(diags.lines.empty() ? "compilation failed" : diags.joined());
  return Status::ok();
}

Status compileOnnxFile(const std::string& path, const ImportOptions& importOptions,
                       const CompileOptions& compileOptions, CompileResult* result) {
  mlir::MLIRContext ctx;
  ctx.disableMultithreading();
  loadTandemDialects(&ctx);
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  {
    DiagnosticCollector diags(&ctx);
    auto t0 = std::chrono::steady_clock::now();
    module = importOnnxFile(&ctx, path, importOptions, &error);
    result->stepSeconds.push_back(
        {"import", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    if (!module) {
      if (error.empty()) error = diags.joined();
      return Status::error(error.empty() ? path + ": import failed" : error);
    }
  }
  // Name the model after its file (ONNX test layout: after its directory, DIR/model.onnx).
  std::string stem = path.substr(path.find_last_of('/') + 1);
  if (stem == "model.onnx" && path.find('/') != std::string::npos) {
    std::string dir = path.substr(0, path.find_last_of('/'));
    stem = dir.substr(dir.find_last_of('/') + 1);
  } else if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".onnx") == 0) {
    stem.resize(stem.size() - 5);
  }
  (*module)->setAttr("tandem.model_name", mlir::StringAttr::get(&ctx, stem));
  return compileModuleToPlan(*module, compileOptions, result).withContext(path);
}

}  // namespace tandem

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <set>

#include "compiler/ShapeInference.h"
#include "runtime/DataDependent.h"
#include "runtime/FileIO.h"

namespace tandem {

Status onnxGraphInputs(const std::string& path, std::vector<std::string>* names) {
  std::string bytes;
  TANDEM_RETURN_IF_ERROR(readInputFile(path, &bytes));
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) return Status::error(path + ": not a valid ONNX model (protobuf parse failed)");
  std::set<std::string> inits;
  for (auto& t : m.graph().initializer()) inits.insert(t.name());
  names->clear();
  for (auto& i : m.graph().input())
    if (!inits.count(i.name())) names->push_back(i.name());
  return Status::ok();
}

Status onnxShapeOperandInputs(const std::string& path, std::set<std::string>* names) {
  std::string bytes;
  TANDEM_RETURN_IF_ERROR(readInputFile(path, &bytes));
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) return Status::error(path + ": not a valid ONNX model (protobuf parse failed)");
  const onnx::GraphProto& g = m.graph();
  // value name -> (node, input position) of each reader.
  std::map<std::string, std::vector<std::pair<int, int>>> readers;
  for (int n = 0; n < g.node_size(); ++n)
    for (int i = 0; i < g.node(n).input_size(); ++i)
      if (!g.node(n).input(i).empty()) readers[g.node(n).input(i)].push_back({n, i});
  std::set<std::string> inits;
  for (auto& t : g.initializer()) inits.insert(t.name());
  names->clear();
  for (const auto& gi : g.input()) {
    if (inits.count(gi.name())) continue;
    // Forward over the values computed from this input's values. Shape and Size read only
    // their input's shape, so a value flows on through every other op, not through them.
    std::set<std::string> seen = {gi.name()};
    std::vector<std::string> work = {gi.name()};
    bool reaches = false;
    while (!work.empty() && !reaches) {
      std::string v = work.back();
      work.pop_back();
      for (auto [n, pos] : readers[v]) {
        const onnx::NodeProto& node = g.node(n);
        // Ops whose result size is counted from their data (NonZero, ...) run with run-time
        // values in a dynamic region (runtime/DynamicRegion.h): their data need not be folded.
        const std::vector<int>& shapeOps =
            sizeCountedFromData(node.op_type()) ? std::vector<int>{} : shapeOperandPositions(node.op_type());
        if (std::find(shapeOps.begin(), shapeOps.end(), pos) != shapeOps.end()) {
          reaches = true;
          break;
        }
        if (node.op_type() == "Shape" || node.op_type() == "Size") continue;
        for (const std::string& out : node.output())
          if (!out.empty() && seen.insert(out).second) work.push_back(out);
      }
    }
    if (reaches) names->insert(gi.name());
  }
  return Status::ok();
}

Status specializeOnnxInputs(const std::string& path, const std::vector<Tensor>& given,
                            ImportOptions* importOptions, CompileOptions* compileOptions,
                            std::vector<Tensor>* runtimeInputs, std::vector<std::string>* folded) {
  std::vector<std::string> names;
  TANDEM_RETURN_IF_ERROR(onnxGraphInputs(path, &names));
  if (!given.empty() && given.size() != names.size())
    return Status::error(path + ": the model has " + std::to_string(names.size()) +
                         " graph inputs but " + std::to_string(given.size()) + " input files were given");
  std::set<std::string> shapeInputs;
  if (!given.empty()) TANDEM_RETURN_IF_ERROR(onnxShapeOperandInputs(path, &shapeInputs));
  runtimeInputs->clear();
  if (folded) folded->clear();
  for (size_t i = 0; i < given.size(); ++i) {
    // Any dtype: Resize's scales and roi are f32, Range's start/limit/delta may be float (they
    // fix its length as integer shapes do).
    if (shapeInputs.count(names[i])) {
      importOptions->constantInputs[names[i]] = given[i];
      if (folded) folded->push_back(names[i]);
    } else {
      compileOptions->inputShapes[names[i]] = given[i].shape();
      runtimeInputs->push_back(given[i]);
    }
  }
  return Status::ok();
}

}  // namespace tandem

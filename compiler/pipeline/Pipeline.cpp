// compileModule: the pass pipeline as straight-line code, one step per line (Halide Lower.cpp
// style), with the IR printable after every step.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>

#include "compiler/Compiler.h"
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "compiler/pipeline/EmitPlan.h"
#include "compiler/training/TrainingGraph.h"
#include "compiler/training/Variables.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"

namespace tandem {

void loadTandemDialects(mlir::MLIRContext* ctx) {
  ctx->getOrLoadDialect<TandemDialect>();
  ctx->getOrLoadDialect<mlir::func::FuncDialect>();
}

namespace {

void printIr(mlir::ModuleOp module, const CompileOptions& options, llvm::StringRef step) {
  if (!options.printIrAfterAll) return;
  llvm::raw_ostream& os = *options.printIrAfterAll;
  os << "// -----// IR Dump After " << step << " //----- //\n";
  // Weights would drown the graph: print large constants as dense_resource placeholders.
  module->print(os, mlir::OpPrintingFlags().elideLargeElementsAttrs(16));
  os << "\n";
  os.flush();
}

// Wall seconds of one pipeline step into CompileResult::stepSeconds, however it ends.
struct StepTimer {
  CompileResult* result;
  std::string step;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~StepTimer() {
    result->stepSeconds.push_back(
        {step, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
  }
};

bool verifyEachPass(const CompileOptions& options) {
  const char* env = std::getenv("TANDEM_VERIFY_EACH_PASS");
  return options.verifyEachPass || (env && std::string(env) == "1");
}

// Runs one pass on the module; the pass manager verifies the IR after it when asked
// (CompileOptions::verifyEachPass), else compileModule verifies once at the end.
mlir::LogicalResult runPass(mlir::ModuleOp module, std::unique_ptr<mlir::Pass> pass,
                            const CompileOptions& options, CompileResult* result) {
  std::string name = pass->getArgument().str();
  StepTimer timer{result, name};
  mlir::PassManager pm(module->getContext(), mlir::ModuleOp::getOperationName());
  pm.enableVerifier(verifyEachPass(options));
  pm.addPass(std::move(pass));
  if (mlir::failed(pm.run(module))) return mlir::failure();
  printIr(module, options, name);
  return mlir::success();
}

mlir::LogicalResult bindInputs(mlir::ModuleOp module, const CompileOptions& options,
                               CompileResult* result) {
  if (mlir::failed(bindInputShapes(module, options.dimBindings, options.inputShapes,
                                   options.defaultDim, &result->notes)))
    return mlir::failure();
  printIr(module, options, "bind-inputs");
  return mlir::success();
}

// A pin naming no node of the model (a typo, another model's name) is an error that lists the
// nearest node names, not a silent no-op. Checked on the module as given, before any pass folds
// a node away (a pin on a node canonicalize folds is only a warning of the place pass).
mlir::LogicalResult checkPinsNameNodes(mlir::ModuleOp module, const CompileOptions& o) {
  if (o.pins.empty()) return mlir::success();
  std::set<std::string> names;
  module.walk([&](mlir::Operation* op) {
    std::string n = nodeName(op->getLoc());
    if (!n.empty()) names.insert(n);
  });
  for (const placement::NodePin& pin : o.pins) {
    if (names.count(pin.node)) continue;
    std::vector<std::pair<unsigned, std::string>> near;
    for (const std::string& n : names)
      near.push_back({llvm::StringRef(n).edit_distance(pin.node, true, 64), n});
    std::sort(near.begin(), near.end());
    std::string list;
    for (size_t i = 0; i < near.size() && i < 5; ++i) list += (i ? ", '" : "'") + near[i].second + "'";
    module.emitError() << "--pin " << pin.node << "=" << pin.device << ": the model has no node named '"
                       << pin.node << "'"
                       << (list.empty() ? " (its nodes have no names)" : "; nearest: " + list);
    return mlir::failure();
  }
  return mlir::success();
}

std::unique_ptr<mlir::Pass> placePass(const CompileOptions& options, const DeviceSet& devices) {
  PlaceConfig c;
  c.devices = devices;
  c.profilePath = options.profilePath;
  c.policy = options.placementPolicy;
  c.pins = options.pins;
  c.strict = options.strictPlacement;
  return createPlacePass(std::move(c));
}

// Before canonicalize: a constant named in `wrt` must still exist (canonicalize folds ops over
// constants into new ones), and canonicalize then folds and prunes the backward graph.
std::unique_ptr<mlir::Pass> autodiffPass(const CompileOptions::Autodiff& a) {
  TandemAutodiffOptions o;
  o.loss = a.loss;
  o.wrt = a.wrt;
  return createAutodiffPass(o);
}

// Whether every device of `devices` is a CPU (--tandem-fuse-qdq's condition).
bool cpuOnly(const DeviceSet& devices) {
  for (const DeviceSpec& d : devices.devices())
    if (d.kind != DeviceKind::Cpu) return false;
  return true;
}

int64_t countOps(mlir::ModuleOp module, llvm::StringRef onnxType) {
  int64_t n = 0;
  module.walk([&](mlir::Operation* op) { n += onnxOpType(op) == onnxType; });
  return n;
}

// A dynamic region (--tandem-outline-dynamic) runs outside the plan's static schedule: say how
// much of the graph it holds and where it starts.
std::string dynamicRegionNote(const plan::Step& s) {
  const plan::Plan* body = nullptr;
  for (const plan::Attribute& a : s.attrs())
    if (a.name() == "body") body = &a.g();
  const int n = body ? body->steps_size() : 0;
  std::string first;
  if (n > 0) first = " (from " + body->steps(0).op_type() + " '" + body->steps(0).name() + "' on)";
  return "DynamicRegion '" + s.name() + "': " + std::to_string(n) + " ops" + first +
         " have shapes known only at run time; they run eagerly on " + s.device() +
         ", each shape inferred from the values it meets";
}

}  // namespace

mlir::LogicalResult compileModule(mlir::ModuleOp module, const CompileOptions& options,
                                  CompileResult* result) {
  loadTandemDialects(module->getContext());
  if (mlir::failed(checkPinsNameNodes(module, options))) return mlir::failure();
  if (mlir::failed(bindInputs(module, options, result))) return mlir::failure();
  auto run = [&](std::unique_ptr<mlir::Pass> pass) {
    return runPass(module, std::move(pass), options, result);
  };
  if (mlir::failed(run(createVerifyPass()))) return mlir::failure();
  if (mlir::failed(run(createInferShapesPass()))) return mlir::failure();
  if (options.training) {
    // Loss and parameter arguments, their gradients, then the optimizer's updates in place of
    // the gradients: canonicalize and everything after see one ordinary graph.
    const CompileOptions::Training& t = *options.training;
    if (mlir::func::FuncOp main = getMainFunc(module)) {
      rewriteWrittenOutGelu(main);
      rewriteWrittenOutLayerNorm(main);
    }
    if (mlir::failed(training::buildLoss(module, t))) return mlir::failure();
    printIr(module, options, "training-loss");
    if (!t.forwardOnly) {
      if (mlir::failed(run(autodiffPass(CompileOptions::Autodiff{})))) return mlir::failure();
      if (mlir::failed(training::appendOptimizer(module, t))) return mlir::failure();
      if (t.residentState && mlir::failed(training::makeStateResident(module))) return mlir::failure();
      if (t.residentState && t.metrics) training::dropLossOutput(module);
      printIr(module, options, "training-optimizer");
    }
  } else if (options.autodiff && mlir::failed(run(autodiffPass(*options.autodiff)))) {
    return mlir::failure();
  }
  TandemLegalizeF16Options f16;
  f16.perOpRounding = options.f16PerOpRounding;
  if (mlir::failed(run(createLegalizeF16Pass(f16)))) return mlir::failure();
  // The target devices, discovered once when not given (fuse-qdq and place read them).
  const DeviceSet devices = options.devices ? *options.devices : DeviceSet::live();
  if (options.qdqFusion && cpuOnly(devices)) {
    const int64_t convsBefore = countOps(module, "QLinearConv");
    auto countProducts = [&] {
      return countOps(module, "QLinearMatMul") + countOps(module, "QLinearMatMulBias") +
             countOps(module, "DynamicQuantizeMatMul");
    };
    const int64_t productsBefore = countProducts();
    const int64_t weightOnlyBefore = countOps(module, "DequantizeMatMul");
    if (mlir::failed(run(createFuseQdqPass()))) return mlir::failure();
    const int64_t convs = countOps(module, "QLinearConv") - convsBefore;
    const int64_t products = countProducts() - productsBefore;
    if (convs + products > 0) {
      std::string what = convs > 0 ? std::to_string(convs) + " convolution(s)" : "";
      if (products > 0)
        what += (convs > 0 ? " and " : "") + std::to_string(products) + " matrix product(s)";
      result->notes.push_back(what +
                              " in QDQ form (DequantizeLinear -> Conv/MatMul/Gemm -> "
                              "QuantizeLinear) or dynamically quantized (DynamicQuantizeLinear "
                              "-> MatMulInteger) run as one quantized op each (--no-qdq-fusion: as "
                              "written)");
    }
    if (const int64_t n = countOps(module, "DequantizeMatMul") - weightOnlyBefore; n > 0)
      result->notes.push_back(std::to_string(n) +
                              " matrix product(s) of weight-only quantized weights "
                              "(DequantizeLinear of constants -> MatMul/Gemm) run as DequantizeMatMul, "
                              "their weights kept 8-bit, or 4-bit where they fit (--no-qdq-fusion: "
                              "folded to f32)");
    if (auto slow = module->getAttrOfType<mlir::IntegerAttr>(kWeightOnlyWithoutFastKernelAttr)) {
      result->notes.push_back(std::to_string(slow.getInt()) +
                              " matrix product(s) of weight-only quantized weights run on weights "
                              "dequantized to f32 at compile time: this CPU has no fast kernel for "
                              "DequantizeMatMul (it needs AVX2 + FMA)");
      module->removeAttr(kWeightOnlyWithoutFastKernelAttr);
    }
    if (auto slow = module->getAttrOfType<mlir::IntegerAttr>(kQdqWithoutFastKernelAttr)) {
      result->notes.push_back(
          std::to_string(slow.getInt()) +
          " quantized convolution(s) or matrix product(s) stay as written: this CPU has no fast "
          "int8 kernel for them (without VNNI oneDNN's int8 products are exact only for u8 inputs "
          "and |W - zero point| <= 64), and the graph as written is faster than their exact f32 "
          "form");
      module->removeAttr(kQdqWithoutFastKernelAttr);
    }
  }
  // Int8 activations of weight-only products: the model's accuracy_level, or all, or none.
  {
    int64_t int8 = 0;
    module.walk([&](mlir::Operation* op) {
      if (onnxOpType(op) != "DequantizeMatMul") return;
      if (options.int8Activations == CompileOptions::Int8Activations::All)
        op->setAttr("accuracy_level", mlir::IntegerAttr::get(mlir::IntegerType::get(op->getContext(), 64), 4));
      else if (options.int8Activations == CompileOptions::Int8Activations::None)
        op->removeAttr("accuracy_level");
      if (auto a = op->getAttrOfType<mlir::IntegerAttr>("accuracy_level"); a && a.getInt() >= 4) ++int8;
    });
    if (int8 > 0)
      result->notes.push_back(
          std::to_string(int8) + " weight-only quantized matrix product(s) at accuracy_level 4 " +
          (options.int8Activations == CompileOptions::Int8Activations::All ? "(--int8-activations all)"
                                                                           : "(the model's)") +
          ": their activations are quantized to int8 per row and block where the CPU has AVX2 "
          "(--int8-activations none: f32)");
  }
  // The importer's one EmbeddingBag op per torch.onnx EmbeddingBag Loop (frontend/EmbeddingBagLoop.h).
  if (const int64_t bags = countOps(module, "EmbeddingBag"); bags > 0)
    result->notes.push_back(std::to_string(bags) +
                            " Loop(s) over bags as torch.onnx writes nn.EmbeddingBag (Slice, "
                            "Gather, ReduceSum/Mean/Max per bag) run as one EmbeddingBag op each");
  if (mlir::failed(run(createCanonicalizePass()))) return mlir::failure();
  if (mlir::failed(run(createOutlineDynamicPass()))) return mlir::failure();
  if (mlir::failed(run(placePass(options, devices)))) return mlir::failure();
  if (mlir::failed(run(createInsertTransfersPass()))) return mlir::failure();
  if (options.fuse && mlir::failed(run(createFusePass()))) return mlir::failure();
  TandemPlanMemoryOptions memory;
  memory.updateVariablesInPlace = !options.training || options.training->updatesInPlace;
  if (mlir::failed(run(createPlanMemoryPass(memory)))) return mlir::failure();
  if (!verifyEachPass(options)) {
    StepTimer timer{result, "verify-ir"};
    if (mlir::failed(mlir::verify(module))) return mlir::failure();
  }
  StepTimer timer{result, "emit-plan"};
  if (mlir::failed(emitPlan(module, result))) return mlir::failure();
  // Control flow runs its subgraphs' own plans (compiled by the importer for the CPU) in one
  // CPU step: say so, since the placer saw only the op.
  for (const plan::Step& s : result->plan.steps()) {
    if (s.op_type() == "If" || s.op_type() == "Loop" || s.op_type() == "Scan")
      result->notes.push_back(s.op_type() + " '" + s.name() + "': subgraphs run on " + s.device() +
                              " as a whole");
    if (s.op_type() == "DynamicRegion") result->notes.push_back(dynamicRegionNote(s));
  }
  return mlir::success();
}

}  // namespace tandem

// The placer's view of CUDA and the CUDA kernel registry agree: with the backend built, every
// (op, dtypes) the table accepts has a registered "cuda" def and nothing else does; without it,
// feasibility comes from the same table. Either way every table op is a tandem op.
#include <gtest/gtest.h>

#include <set>

#include "compiler/ShapeInference.h"
#include "compiler/placement/KernelCapabilities.h"
#include "runtime/Backend.h"
#include "runtime/Kernel.h"
#include "runtime/cuda/CudaKernelTable.h"

using namespace tandem;

namespace {

// Dtype lists to probe: every op with 1..3 inputs of the common dtypes, uniform and mixed.
std::vector<std::vector<DType>> probes() {
  const std::vector<DType> ts = {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::U8};
  std::vector<std::vector<DType>> r;
  for (DType a : ts) {
    r.push_back({a});
    for (DType b : ts) {
      r.push_back({a, b});
      for (DType c : {DType::F32, DType::I64, DType::Bool}) r.push_back({a, b, c});
    }
    r.push_back({a, a, a, a, a});
    r.push_back({a, DType::I64, DType::I64, DType::I64, DType::I64});
  }
  return r;
}

TEST(CudaCapabilities, TableOpsAreTandemOps) {
  for (const std::string& op : cudaKernelOps()) EXPECT_TRUE(isKnownOp(op)) << op;
}

TEST(CudaCapabilities, PlacerAndRegistryAgreeOnEveryOpAndDtype) {
  std::set<std::string> ops(knownOps().begin(), knownOps().end());
  for (const KernelDef& d : KernelRegistry::global().all()) ops.insert(d.opType);
  ops.erase("Fused");  // tandem.fused exists only after placement (the fuse pass forms it)
  int checked = 0, accepted = 0;
  for (const std::string& op : ops)
    for (const auto& dts : probes()) {
      bool table = isKnownOp(op) && cudaKernelAccepts(op, dts);
      bool placer = deviceKindSupports("cuda", op, dts);
      EXPECT_EQ(placer, table) << op << " on " << dts.size() << " inputs starting " << dtypeName(dts[0]);
      if (cudaBackendBuilt()) {
        bool registry = KernelRegistry::global().supports(op, "cuda", dts);
        EXPECT_EQ(registry, table) << op << " on " << dts.size() << " inputs starting " << dtypeName(dts[0]);
      }
      ++checked;
      accepted += table;
    }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(checked, accepted);
  EXPECT_EQ(isCapabilityTableOnly("cuda"), !cudaBackendBuilt());
}

TEST(CudaCapabilities, EveryRegisteredCudaDefIsInTheTable) {
  std::set<std::string> table(cudaKernelOps().begin(), cudaKernelOps().end()), registered;
  for (const KernelDef& d : KernelRegistry::global().all())
    // "Fused" runs tandem.fused groups, which the fuse pass forms after placement: not an op
    // the placer places, so not in the table.
    if (d.deviceKind == "cuda" && d.opType != "Fused") registered.insert(d.opType);
  if (cudaBackendBuilt()) EXPECT_EQ(registered, table);
  else EXPECT_TRUE(registered.empty());
}

TEST(CudaCapabilities, HostOnlyOpsStayOnTheCpu) {
  // Ops whose values are known at load (shapes, constants) have no CUDA kernel.
  for (const char* op : {"Shape", "Constant", "ConstantOfShape"})
    EXPECT_FALSE(deviceKindSupports("cuda", op, {DType::F32})) << op;
  EXPECT_TRUE(deviceKindSupports("cuda", "Conv", {DType::F32, DType::F32, DType::F32}));
  EXPECT_FALSE(deviceKindSupports("cuda", "Conv", {DType::F64, DType::F64}));
  EXPECT_TRUE(deviceKindSupports("cuda", "Gather", {DType::F32, DType::I64}));
  EXPECT_TRUE(deviceKindSupports("cuda", "Where", {DType::Bool, DType::I64, DType::I64}));
  EXPECT_FALSE(deviceKindSupports("cuda", "Where", {DType::F32, DType::I64, DType::I64}));
}

// A training step's pooling gradient and loss have CUDA kernels (f32 scores, i32/i64 labels,
// optional f32 weight); f64 and float labels stay with the CPU.
TEST(CudaCapabilities, TrainingLossAndPoolGradientRunOnCuda) {
  EXPECT_TRUE(deviceKindSupports("cuda", "MaxPoolGrad", {DType::F32, DType::F32}));
  EXPECT_FALSE(deviceKindSupports("cuda", "MaxPoolGrad", {DType::F64, DType::F64}));
  EXPECT_TRUE(deviceKindSupports("cuda", "ConvWeightGrad", {DType::F32, DType::F32}));
  for (DType l : {DType::I64, DType::I32}) {
    EXPECT_TRUE(deviceKindSupports("cuda", "SoftmaxCrossEntropyLoss", {DType::F32, l}));
    EXPECT_TRUE(deviceKindSupports("cuda", "SoftmaxCrossEntropyLoss", {DType::F32, l, DType::F32}));
    EXPECT_TRUE(deviceKindSupports("cuda", "SoftmaxCrossEntropyLossGrad", {DType::F32, DType::F32, l}));
    EXPECT_TRUE(deviceKindSupports("cuda", "SoftmaxCrossEntropyLossGrad", {DType::F32, DType::F32, l, DType::F32}));
  }
  EXPECT_FALSE(deviceKindSupports("cuda", "SoftmaxCrossEntropyLoss", {DType::F64, DType::I64}));
  EXPECT_FALSE(deviceKindSupports("cuda", "SoftmaxCrossEntropyLoss", {DType::F32, DType::F32}));
  EXPECT_FALSE(deviceKindSupports("cuda", "SoftmaxCrossEntropyLoss", {DType::F32}));
  EXPECT_FALSE(deviceKindSupports("cuda", "SoftmaxCrossEntropyLossGrad", {DType::F32, DType::I64, DType::I64}));
  EXPECT_FALSE(deviceKindSupports("cuda", "SoftmaxCrossEntropyLossGrad", {DType::F32, DType::F32}));
  EXPECT_FALSE(deviceKindSupports("cuda", "NegativeLogLikelihoodLoss", {DType::F32, DType::I64}));
}

// The hot-path selection, scan and image ops: GatherElements of any dtype by i32/i64 indices,
// CumSum of the numeric dtypes, TopK of f32/f64/i32/i64 (K i64), Resize of f32/f64 with float
// roi/scales or i64 sizes. NonMaxSuppression and the recurrent ops stay with the CPU.
TEST(CudaCapabilities, SelectionScanAndResizeRunOnCuda) {
  for (DType d : {DType::F32, DType::F64, DType::I64, DType::U8, DType::Bool}) {
    EXPECT_TRUE(deviceKindSupports("cuda", "GatherElements", {d, DType::I64})) << dtypeName(d);
    EXPECT_TRUE(deviceKindSupports("cuda", "GatherElements", {d, DType::I32})) << dtypeName(d);
  }
  EXPECT_FALSE(deviceKindSupports("cuda", "GatherElements", {DType::F32, DType::F32}));
  for (DType d : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::I8})
    EXPECT_TRUE(deviceKindSupports("cuda", "CumSum", {d, DType::I64})) << dtypeName(d);
  EXPECT_TRUE(deviceKindSupports("cuda", "CumSum", {DType::F32, DType::I32}));
  EXPECT_FALSE(deviceKindSupports("cuda", "CumSum", {DType::Bool, DType::I64}));
  EXPECT_FALSE(deviceKindSupports("cuda", "CumSum", {DType::F32, DType::F32}));
  for (DType d : {DType::F32, DType::F64, DType::I32, DType::I64})
    EXPECT_TRUE(deviceKindSupports("cuda", "TopK", {d, DType::I64})) << dtypeName(d);
  EXPECT_FALSE(deviceKindSupports("cuda", "TopK", {DType::U8, DType::I64}));
  EXPECT_TRUE(deviceKindSupports("cuda", "Resize", {DType::F32, DType::F32, DType::F32}));  // X, roi, scales
  EXPECT_TRUE(deviceKindSupports("cuda", "Resize", {DType::F64, DType::F32}));               // X, scales
  EXPECT_TRUE(deviceKindSupports("cuda", "Resize", {DType::F32, DType::I64}));               // X, sizes
  EXPECT_FALSE(deviceKindSupports("cuda", "Resize", {DType::I64, DType::I64}));
  EXPECT_FALSE(deviceKindSupports("cuda", "Resize", {DType::F32, DType::I32}));
}

// NonMaxSuppression (f32 boxes and scores, i64 max_output_boxes_per_class, f32 thresholds) and
// the recurrent ops (f32; an i32 sequence_lens is accepted so that the rule can refuse it with
// its reason) have CUDA kernels.
TEST(CudaCapabilities, NmsAndRecurrentOpsRunOnCuda) {
  const DType f = DType::F32, i = DType::I64;
  EXPECT_TRUE(deviceKindSupports("cuda", "NonMaxSuppression", {f, f}));
  EXPECT_TRUE(deviceKindSupports("cuda", "NonMaxSuppression", {f, f, i, f, f}));
  EXPECT_FALSE(deviceKindSupports("cuda", "NonMaxSuppression", {DType::F64, DType::F64}));
  EXPECT_FALSE(deviceKindSupports("cuda", "NonMaxSuppression", {f, i}));
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    EXPECT_TRUE(deviceKindSupports("cuda", op, {f, f, f})) << op;
    EXPECT_TRUE(deviceKindSupports("cuda", op, {f, f, f, f, f})) << op;              // B, initial_h
    EXPECT_TRUE(deviceKindSupports("cuda", op, {f, f, f, f, DType::I32, f})) << op;  // sequence_lens
    EXPECT_FALSE(deviceKindSupports("cuda", op, {DType::F64, DType::F64, DType::F64})) << op;
    EXPECT_FALSE(deviceKindSupports("cuda", op, {f, f})) << op;
  }
}

// The CUDA Dropout draws the CPU's Philox mask: ratio (f32/f64), training_mode (bool) and the
// counter (f32/i64) are accepted, each absent one omitted from the list.
TEST(CudaCapabilities, TrainingDropoutRunsOnCuda) {
  EXPECT_TRUE(deviceKindSupports("cuda", "Dropout", {DType::F32}));
  EXPECT_TRUE(deviceKindSupports("cuda", "Dropout", {DType::F32, DType::F32, DType::Bool}));
  EXPECT_TRUE(deviceKindSupports("cuda", "Dropout", {DType::F32, DType::F32, DType::Bool, DType::F32}));
  EXPECT_TRUE(deviceKindSupports("cuda", "Dropout", {DType::F64, DType::F64, DType::Bool, DType::I64}));
  EXPECT_TRUE(deviceKindSupports("cuda", "Dropout", {DType::F32, DType::F32}));
  EXPECT_TRUE(deviceKindSupports("cuda", "Dropout", {DType::F32, DType::Bool, DType::F32}));  // no ratio
  EXPECT_TRUE(deviceKindSupports("cuda", "Dropout", {DType::F32, DType::F32, DType::F32}));   // no mode
  EXPECT_FALSE(deviceKindSupports("cuda", "Dropout", {DType::F32, DType::F32, DType::Bool, DType::F64}));
  EXPECT_FALSE(deviceKindSupports("cuda", "Dropout", {DType::F32, DType::I64, DType::Bool}));
  EXPECT_FALSE(deviceKindSupports("cuda", "Dropout", {DType::F32, DType::Bool, DType::F32, DType::I64}));
  EXPECT_FALSE(deviceKindSupports("cuda", "Dropout", {DType::F16}));
}

}  // namespace

namespace {

struct Instance {
  AttrMap attrs;
  KernelContext ctx;
  Tensor marker;
  Instance(const std::string& op, std::vector<Shape> ins, std::vector<Shape> outs,
           std::vector<bool> constant = {}) {
    ctx.opType = op;
    ctx.attrs = &attrs;
    for (size_t i = 0; i < ins.size(); ++i) {
      ctx.inputTypes.push_back({DType::F32, ins[i]});
      ctx.constInputs.push_back(i < constant.size() && constant[i] ? &marker : nullptr);
    }
    for (const Shape& s : outs) ctx.outputTypes.push_back({DType::F32, s});
  }
  std::string rejects() { return deviceKindRejects("cuda", ctx); }
};

}  // namespace

TEST(CudaInstanceLimits, MirrorWhatTheKernelsRefuseAtLoad) {
  // Pools: floor-rounded symmetric pads are fine; ceil_mode and dilation are not; no Indices.
  Instance pool("MaxPool", {{1, 8, 57, 57}}, {{1, 8, 28, 28}});
  pool.attrs.set("kernel_shape", Attr::ofInts({2, 2}));
  pool.attrs.set("strides", Attr::ofInts({2, 2}));
  EXPECT_EQ(pool.rejects(), "");
  Instance ceil("MaxPool", {{1, 8, 57, 57}}, {{1, 8, 29, 29}});
  ceil.attrs.set("kernel_shape", Attr::ofInts({2, 2}));
  ceil.attrs.set("strides", Attr::ofInts({2, 2}));
  ceil.attrs.set("ceil_mode", Attr::ofInt(1));
  EXPECT_NE(ceil.rejects().find("ceil_mode"), std::string::npos);
  Instance dil("MaxPool", {{1, 8, 16, 16}}, {{1, 8, 14, 14}});
  dil.attrs.set("kernel_shape", Attr::ofInts({2, 2}));
  dil.attrs.set("dilations", Attr::ofInts({2, 2}));
  EXPECT_NE(dil.rejects().find("dilated"), std::string::npos);
  Instance idx("MaxPool", {{1, 8, 16, 16}}, {{1, 8, 8, 8}, {1, 8, 8, 8}});
  idx.attrs.set("kernel_shape", Attr::ofInts({2, 2}));
  idx.attrs.set("strides", Attr::ofInts({2, 2}));
  EXPECT_NE(idx.rejects().find("Indices"), std::string::npos);

  Instance bn("BatchNormalization", {{2, 4, 3, 3}, {4}, {4}, {4}, {4}}, {{2, 4, 3, 3}});
  EXPECT_EQ(bn.rejects(), "");
  bn.attrs.set("training_mode", Attr::ofInt(1));
  EXPECT_NE(bn.rejects().find("training_mode"), std::string::npos);

  // Dropout: a mask output and a training_mode are fine; training integer data is not.
  Instance drop("Dropout", {{4}, {}, {}, {}}, {{4}, {4}});
  drop.ctx.inputTypes[2].dtype = drop.ctx.outputTypes[1].dtype = DType::Bool;
  EXPECT_EQ(drop.rejects(), "");
  drop.ctx.inputTypes[0].dtype = drop.ctx.outputTypes[0].dtype = DType::I64;
  EXPECT_NE(drop.rejects().find("f32 or f64 data only"), std::string::npos) << drop.rejects();
  drop.ctx.inputTypes[2] = TensorType{};  // no training_mode: a copy of any dtype
  EXPECT_EQ(drop.rejects(), "");

  // Pad's pads operand: a constant is fine, a computed one is not.
  Instance padConst("Pad", {{4, 4}, {4}}, {{6, 6}}, {false, true});
  EXPECT_EQ(padConst.rejects(), "");
  Instance padRuntime("Pad", {{4, 4}, {4}}, {{6, 6}}, {false, false});
  // The registry answers for the dtypes a def accepts: pads are i64.
  padConst.ctx.inputTypes[1].dtype = padRuntime.ctx.inputTypes[1].dtype = DType::I64;
  EXPECT_EQ(padConst.rejects(), "");
  EXPECT_NE(padRuntime.rejects().find("input 1 to be a constant"), std::string::npos);

  // LayerNormalization: Scale of the normalized shape, not a broadcast one.
  Instance ln("LayerNormalization", {{2, 3, 8}, {8}, {8}}, {{2, 3, 8}});
  EXPECT_EQ(ln.rejects(), "");
  Instance lnb("LayerNormalization", {{2, 3, 8}, {1}, {8}}, {{2, 3, 8}});
  EXPECT_NE(lnb.rejects().find("no broadcast"), std::string::npos);

  // MaxPoolGrad: any window, pads and dilations of 1-3 spatial dims; the losses: the three
  // reductions.
  Instance mpg("MaxPoolGrad", {{1, 8, 16, 16}, {1, 8, 7, 7}}, {{1, 8, 16, 16}});
  mpg.attrs.set("kernel_shape", Attr::ofInts({3, 3}));
  mpg.attrs.set("strides", Attr::ofInts({2, 2}));
  mpg.attrs.set("dilations", Attr::ofInts({1, 1}));
  mpg.attrs.set("pads", Attr::ofInts({0, 0, 1, 1}));
  EXPECT_EQ(mpg.rejects(), "");
  Instance mpg4("MaxPoolGrad", {{1, 2, 2, 2, 2, 2}, {1, 2, 1, 1, 1, 1}}, {{1, 2, 2, 2, 2, 2}});
  mpg4.attrs.set("kernel_shape", Attr::ofInts({2, 2, 2, 2}));
  EXPECT_NE(mpg4.rejects().find("1-D to 3-D"), std::string::npos);
  Instance sce("SoftmaxCrossEntropyLoss", {{4, 10}, {4}}, {{}});
  sce.ctx.inputTypes[1].dtype = DType::I64;
  for (const char* r : {"none", "sum", "mean"}) {
    sce.attrs.set("reduction", Attr::ofString(r));
    EXPECT_EQ(sce.rejects(), "") << r;
  }
  sce.attrs.set("reduction", Attr::ofString("max"));
  EXPECT_NE(sce.rejects().find("none, sum or mean"), std::string::npos);

  // CumSum and TopK read axis and K at load; TopK's K is bounded; Resize builds its taps from
  // constant scales (and roi for tf_crop_and_resize). Sizes need not be constant.
  Instance cs("CumSum", {{4, 100}, {}}, {{4, 100}}, {false, true});
  cs.ctx.inputTypes[1].dtype = DType::I64;
  EXPECT_EQ(cs.rejects(), "");
  Instance csv("CumSum", {{4, 100}, {}}, {{4, 100}});
  csv.ctx.inputTypes[1].dtype = DType::I64;
  EXPECT_NE(csv.rejects().find("axis (input 1) to be a constant"), std::string::npos);
  Instance tk("TopK", {{8, 5000}, {1}}, {{8, 256}, {8, 256}}, {false, true});
  tk.ctx.inputTypes[1].dtype = DType::I64;
  EXPECT_EQ(tk.rejects(), "");
  Instance tkBig("TopK", {{8, 5000}, {1}}, {{8, 257}, {8, 257}}, {false, true});
  tkBig.ctx.inputTypes[1].dtype = DType::I64;
  EXPECT_NE(tkBig.rejects().find("at most 256 per row, not K = 257"), std::string::npos);
  Instance tkAxis("TopK", {{300, 8}, {1}}, {{257, 8}}, {false, true});
  tkAxis.ctx.inputTypes[1].dtype = DType::I64;
  tkAxis.attrs.set("axis", Attr::ofInt(0));
  EXPECT_NE(tkAxis.rejects().find("K = 257"), std::string::npos);
  Instance tkVar("TopK", {{8, 5000}, {1}}, {{8, 5}});
  tkVar.ctx.inputTypes[1].dtype = DType::I64;
  EXPECT_NE(tkVar.rejects().find("K (input 1) to be a constant"), std::string::npos);
  Instance rs("Resize", {{1, 3, 8, 8}, {0}, {4}}, {{1, 3, 16, 16}}, {false, false, true});
  rs.attrs.set("mode", Attr::ofString("cubic"));
  EXPECT_EQ(rs.rejects(), "");
  Instance rsVar("Resize", {{1, 3, 8, 8}, {0}, {4}}, {{1, 3, 16, 16}});
  EXPECT_NE(rsVar.rejects().find("scales (input 2) to be a constant"), std::string::npos);
  Instance rsSizes("Resize", {{1, 3, 8, 8}, {0}, {0}, {4}}, {{1, 3, 16, 16}});
  rsSizes.ctx.inputTypes[3].dtype = DType::I64;
  EXPECT_EQ(rsSizes.rejects(), "");
  rsSizes.attrs.set("coordinate_transformation_mode", Attr::ofString("tf_crop_and_resize"));
  EXPECT_NE(rsSizes.rejects().find("roi (input 1) to be a constant"), std::string::npos);
  EXPECT_EQ(deviceKindRejects("cpu", tkBig.ctx), "");

  // NonMaxSuppression: constant limits are fine, a computed threshold is not.
  Instance nms("NonMaxSuppression", {{1, 6, 4}, {1, 1, 6}, {1}, {1}, {1}}, {{3, 3}},
               {false, false, true, true, true});
  nms.ctx.inputTypes[2].dtype = nms.ctx.outputTypes[0].dtype = DType::I64;
  EXPECT_EQ(nms.rejects(), "");
  nms.ctx.constInputs[3] = nullptr;
  EXPECT_NE(nms.rejects().find("input 3 to be a constant"), std::string::npos) << nms.rejects();

  // Recurrent ops: ONNX's defaults with constant weights run on cuDNN; each departure is
  // refused with its reason.
  // (Instance holds pointers into itself: built in place, never copied.)
  const std::vector<Shape> lstmIn = {{5, 2, 3}, {2, 16, 3}, {2, 16, 4}, {2, 32}};
  const std::vector<Shape> lstmOut = {{5, 2, 2, 4}, {2, 2, 4}, {2, 2, 4}};
  const std::vector<bool> lstmConst = {false, true, true, true};
  auto bidirectional = [](Instance& r) {
    r.attrs.set("direction", Attr::ofString("bidirectional"));
    r.attrs.set("hidden_size", Attr::ofInt(4));
  };
  Instance ok("LSTM", lstmIn, lstmOut, lstmConst);
  bidirectional(ok);
  EXPECT_EQ(ok.rejects(), "");
  ok.attrs.set("activations", Attr::ofStrings({"Sigmoid", "Tanh", "Tanh", "sigmoid", "tanh", "tanh"}));
  EXPECT_EQ(ok.rejects(), "");
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"layout", "layout 0"}, {"clip", "do not clip"}, {"input_forget", "input_forget=1"},
      {"activations", "default activations, not Sigmoid,Tanh,Relu"}, {"P", "no peepholes"},
      {"sequence_lens", "full-length sequences only"}, {"W", "input 1 must be a constant"}};
  for (auto& [what, why] : refused) {
    Instance r("LSTM", lstmIn, lstmOut, lstmConst);
    bidirectional(r);
    if (what == "layout") r.attrs.set("layout", Attr::ofInt(1));
    if (what == "clip") r.attrs.set("clip", Attr::ofFloat(3.f));
    if (what == "input_forget") r.attrs.set("input_forget", Attr::ofInt(1));
    if (what == "activations") r.attrs.set("activations", Attr::ofStrings({"Sigmoid", "Tanh", "Relu"}));
    if (what == "P" || what == "sequence_lens") {
      r.ctx.inputTypes.resize(8);
      r.ctx.constInputs.resize(8, nullptr);
      if (what == "P") r.ctx.inputTypes[7] = {DType::F32, {2, 12}};
      else r.ctx.inputTypes[4] = {DType::I32, {2}};
    }
    if (what == "W") r.ctx.constInputs[1] = nullptr;
    EXPECT_NE(r.rejects().find(why), std::string::npos) << what << ": " << r.rejects();
    EXPECT_EQ(deviceKindRejects("cpu", r.ctx), "") << what;
  }
  Instance gru("GRU", {{5, 2, 3}, {1, 12, 3}, {1, 12, 4}}, {{5, 1, 2, 4}}, {false, true, true});
  EXPECT_NE(gru.rejects().find("linear_before_reset=0"), std::string::npos) << gru.rejects();
  gru.attrs.set("linear_before_reset", Attr::ofInt(1));
  EXPECT_EQ(gru.rejects(), "");
  Instance rnn("RNN", {{5, 2, 3}, {2, 4, 3}, {2, 4, 4}}, {{5, 2, 2, 4}}, {false, true, true});
  rnn.attrs.set("direction", Attr::ofString("bidirectional"));
  rnn.attrs.set("activations", Attr::ofStrings({"Relu", "Relu"}));
  EXPECT_EQ(rnn.rejects(), "");
  rnn.attrs.set("activations", Attr::ofStrings({"Relu", "Tanh"}));
  EXPECT_NE(rnn.rejects().find("default activations"), std::string::npos) << rnn.rejects();

  // The CPU refuses none of these.
  EXPECT_EQ(deviceKindRejects("cpu", ceil.ctx), "");
}

// One rule: what the placer is told (deviceKindRejects) is what the registry answers when the
// loader creates the CUDA kernel, before it touches a device. With no device context, a kernel
// the rule lets through fails later, on the missing context; one it refuses fails with the
// placer's reason.
TEST(CudaInstanceLimits, PlacerAndLoaderRefuseTheSameInstances) {
  if (!cudaBackendBuilt()) GTEST_SKIP() << "no CUDA backend in this build: nothing loads CUDA kernels";
  Instance conv4d("Conv", {{1, 2, 4, 4, 4, 4}, {3, 2, 1, 1, 1, 1}}, {{1, 3, 4, 4, 4, 4}});
  Instance conv2d("Conv", {{1, 2, 8, 8}, {3, 2, 3, 3}}, {{1, 3, 6, 6}});
  Instance dil("MaxPool", {{1, 8, 16, 16}}, {{1, 8, 14, 14}});
  dil.attrs.set("kernel_shape", Attr::ofInts({2, 2}));
  dil.attrs.set("dilations", Attr::ofInts({2, 2}));
  Instance bn("BatchNormalization", {{2, 4, 3, 3}, {4}, {4}, {4}, {4}}, {{2, 4, 3, 3}});
  bn.attrs.set("training_mode", Attr::ofInt(1));
  Instance padRuntime("Pad", {{4, 4}, {4}}, {{6, 6}}, {false, false});
  padRuntime.ctx.inputTypes[1].dtype = DType::I64;
  Instance drop("Dropout", {{4}, {}, {}}, {{4}, {4}});  // training integer data
  drop.ctx.inputTypes[0].dtype = drop.ctx.outputTypes[0].dtype = DType::I64;
  drop.ctx.inputTypes[2].dtype = drop.ctx.outputTypes[1].dtype = DType::Bool;
  Instance dropF32("Dropout", {{4}, {}, {}, {}}, {{4}, {4}});  // trains on CUDA
  dropF32.ctx.inputTypes[2].dtype = dropF32.ctx.outputTypes[1].dtype = DType::Bool;
  Instance topKBig("TopK", {{4, 1000}, {1}}, {{4, 300}, {4, 300}}, {false, true});
  topKBig.ctx.inputTypes[1].dtype = DType::I64;
  topKBig.ctx.outputTypes[1].dtype = DType::I64;
  Instance cumSumRuntime("CumSum", {{4, 100}, {}}, {{4, 100}});
  cumSumRuntime.ctx.inputTypes[1].dtype = DType::I64;
  int refused = 0;
  for (Instance* in : {&conv4d, &conv2d, &dil, &bn, &padRuntime, &drop, &dropF32, &topKBig, &cumSumRuntime}) {
    std::string placer = in->rejects();
    std::unique_ptr<Kernel> k;
    Status st = KernelRegistry::global().create("cuda", in->ctx, &k);
    ASSERT_FALSE(st.isOk()) << in->ctx.opType;
    if (placer.empty()) {
      EXPECT_NE(st.message().find("without a CUDA device context"), std::string::npos)
          << in->ctx.opType << ": " << st.message();
    } else {
      ++refused;
      EXPECT_NE(st.message().find(placer), std::string::npos) << in->ctx.opType << ": " << st.message();
    }
  }
  EXPECT_EQ(refused, 7);
  EXPECT_NE(conv4d.rejects().find("1-D to 3-D convolutions"), std::string::npos);
  EXPECT_EQ(conv2d.rejects(), "");
}

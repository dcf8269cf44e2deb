// OpWork: FLOPs and bytes per op against hand-computed values.
#include <gtest/gtest.h>

#include "compiler/placement/OpWork.h"

using namespace tandem;

namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s)}; }
TensorType absent() { return TensorType{}; }

OpWork work(const std::string& op, std::vector<TensorType> in, std::vector<TensorType> out,
            const AttrMap& attrs = AttrMap()) {
  return estimateOpWork(op, in, out, attrs);
}

}  // namespace

TEST(OpWork, ResNet18FirstConvAtBatch1) {
  // 2 * N * Cout * Hout * Wout * Cin/group * kh * kw = 2*1*64*112*112*3*7*7.
  OpWork w = work("Conv", {f32({1, 3, 224, 224}), f32({64, 3, 7, 7})}, {f32({1, 64, 112, 112})});
  EXPECT_EQ(w.cls, OpClass::Conv);
  EXPECT_DOUBLE_EQ(w.flops, 236027904.0);
  // X 3*224*224*4 + W 64*3*49*4 + Y 64*112*112*4 bytes.
  EXPECT_DOUBLE_EQ(w.bytes, 602112.0 + 37632.0 + 3211264.0);
  EXPECT_EQ(w.dtype, DType::F32);
  EXPECT_FALSE(w.estimated) << w.note;
}

TEST(OpWork, ConvBiasAddsOneFlopPerOutput) {
  OpWork w = work("Conv", {f32({1, 3, 224, 224}), f32({64, 3, 7, 7}), f32({64})},
                  {f32({1, 64, 112, 112})});
  EXPECT_DOUBLE_EQ(w.flops, 236027904.0 + 802816.0);
  EXPECT_DOUBLE_EQ(w.bytes, 602112.0 + 37632.0 + 256.0 + 3211264.0);
}

TEST(OpWork, DepthwiseConvUsesCinPerGroupFromTheWeights) {
  AttrMap a;
  a.set("group", Attr::ofInt(32));
  // MobileNet-style 3x3 depthwise: W [32, 1, 3, 3]; 2 * 32*112*112 * 1 * 9.
  OpWork w =
      work("Conv", {f32({1, 32, 112, 112}), f32({32, 1, 3, 3})}, {f32({1, 32, 112, 112})}, a);
  EXPECT_DOUBLE_EQ(w.flops, 7225344.0);
}

TEST(OpWork, ConvTransposeScattersEachInput) {
  // X [1,16,8,8], W [16, 8, 4, 4]: 2 * 1024 inputs * 8 * 16.
  OpWork w = work("ConvTranspose", {f32({1, 16, 8, 8}), f32({16, 8, 4, 4})}, {f32({1, 8, 18, 18})});
  EXPECT_EQ(w.cls, OpClass::Conv);
  EXPECT_DOUBLE_EQ(w.flops, 262144.0);
}

TEST(OpWork, GemmWithBiasAndTransposes) {
  // A fully connected layer at batch 1: 2*1*1000*512 + 1000.
  OpWork fc = work("Gemm", {f32({1, 512}), f32({512, 1000}), f32({1000})}, {f32({1, 1000})});
  EXPECT_EQ(fc.cls, OpClass::Gemm);
  EXPECT_DOUBLE_EQ(fc.flops, 1025000.0);
  EXPECT_DOUBLE_EQ(fc.bytes, (512.0 + 512000.0 + 1000.0 + 1000.0) * 4);

  AttrMap t;
  t.set("transA", Attr::ofInt(1));
  OpWork ta = work("Gemm", {f32({512, 4}), f32({512, 10})}, {f32({4, 10})}, t);
  EXPECT_DOUBLE_EQ(ta.flops, 2.0 * 4 * 10 * 512);

  OpWork big = work("Gemm", {f32({4096, 4096}), f32({4096, 4096})}, {f32({4096, 4096})});
  EXPECT_DOUBLE_EQ(big.flops, 137438953472.0);  // 2 * 4096^3
  EXPECT_DOUBLE_EQ(big.bytes, 3.0 * 4096 * 4096 * 4);
}

TEST(OpWork, BatchedAndVectorMatMul) {
  // Attention scores: [8,12,128,64] x [8,12,64,128] -> 2 * (8*12*128*128) * 64.
  OpWork w = work("MatMul", {f32({8, 12, 128, 64}), f32({8, 12, 64, 128})},
                  {f32({8, 12, 128, 128})});
  EXPECT_DOUBLE_EQ(w.flops, 201326592.0);
  OpWork v = work("MatMul", {f32({64}), f32({64, 10})}, {f32({10})});
  EXPECT_DOUBLE_EQ(v.flops, 1280.0);
}

TEST(OpWork, QuantizedProductsDetAndRecurrent) {
  auto t = [](DType d, Shape s) { return TensorType{d, std::move(s)}; };
  const TensorType u8s = t(DType::U8, {}), f32s = f32({});
  // MatMulInteger [4,16] x [16,8]: 2*32*16 multiply-adds; QLinearMatMul adds 3 per result.
  EXPECT_DOUBLE_EQ(work("MatMulInteger", {t(DType::U8, {4, 16}), t(DType::U8, {16, 8})},
                        {t(DType::I32, {4, 8})}).flops, 1024.0);
  OpWork q = work("QLinearMatMul", {t(DType::U8, {4, 16}), f32s, u8s, t(DType::U8, {16, 8}), f32s,
                                    u8s, f32s, u8s},
                  {t(DType::U8, {4, 8})});
  EXPECT_EQ(q.cls, OpClass::Gemm);
  EXPECT_DOUBLE_EQ(q.flops, 1024.0 + 96.0);
  // QLinearConv reads W at operand 3: 2 * (1*8*6*6) * 4*3*3 + 3 per result.
  OpWork c = work("QLinearConv", {t(DType::U8, {1, 4, 8, 8}), f32s, u8s, t(DType::I8, {8, 4, 3, 3}),
                                  f32s, t(DType::I8, {}), f32s, u8s},
                  {t(DType::U8, {1, 8, 6, 6})});
  EXPECT_EQ(c.cls, OpClass::Conv);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 288 * 36 + 3 * 288);
  // Det of 5 matrices of 3x3: 5 * 2/3 * 27.
  EXPECT_DOUBLE_EQ(work("Det", {f32({5, 3, 3})}, {f32({5})}).flops, 90.0);
  // LSTM seq 10, batch 2, input 3, hidden 4: 80 hidden values, each 4 gates * (2*(3+4) + 4);
  // the same without Y (only Y_h requested), bidirectional twice that.
  OpWork l = work("LSTM", {f32({10, 2, 3}), f32({1, 16, 3}), f32({1, 16, 4})},
                  {f32({10, 1, 2, 4}), f32({1, 2, 4}), f32({1, 2, 4})});
  EXPECT_DOUBLE_EQ(l.flops, 80.0 * 4 * 18);
  EXPECT_FALSE(l.estimated) << l.note;
  EXPECT_DOUBLE_EQ(work("LSTM", {f32({10, 2, 3}), f32({1, 16, 3}), f32({1, 16, 4})},
                        {absent(), f32({1, 2, 4})}).flops, 80.0 * 4 * 18);
  // DFT of 8 samples to 8 bins, 3 signals: 24 bins * 8 samples * 8; STFT 15 frames of 9 bins
  // of a 16-sample window.
  EXPECT_DOUBLE_EQ(work("DFT", {f32({3, 8, 1})}, {f32({3, 8, 2})}).flops, 24.0 * 8 * 8);
  EXPECT_DOUBLE_EQ(work("STFT", {f32({1, 128, 1}), TensorType{DType::I64, {}}, f32({16})},
                        {f32({1, 15, 9, 2})}).flops, 135.0 * 16 * 8);
  EXPECT_DOUBLE_EQ(work("GRU", {f32({10, 2, 3}), f32({2, 12, 3}), f32({2, 12, 4})},
                        {f32({10, 2, 2, 4})}).flops, 160.0 * 3 * 18);
}

TEST(OpWork, Pools) {
  AttrMap a;
  a.set("kernel_shape", Attr::ofInts({3, 3}));
  a.set("strides", Attr::ofInts({2, 2}));
  OpWork mp = work("MaxPool", {f32({1, 64, 112, 112})}, {f32({1, 64, 56, 56})}, a);
  EXPECT_EQ(mp.cls, OpClass::Memory);
  EXPECT_DOUBLE_EQ(mp.flops, 200704.0 * 9);
  OpWork gap = work("GlobalAveragePool", {f32({1, 512, 7, 7})}, {f32({1, 512, 1, 1})});
  EXPECT_DOUBLE_EQ(gap.flops, 25088.0);
  EXPECT_DOUBLE_EQ(gap.bytes, (25088.0 + 512.0) * 4);
}

TEST(OpWork, ElementwiseAndTranscendental) {
  OpWork relu = work("Relu", {f32({1, 64, 56, 56})}, {f32({1, 64, 56, 56})});
  EXPECT_EQ(relu.cls, OpClass::Memory);
  EXPECT_DOUBLE_EQ(relu.flops, 200704.0);
  EXPECT_DOUBLE_EQ(relu.bytes, 2 * 200704.0 * 4);
  // Broadcast add: bytes count each operand as stored.
  OpWork add = work("Add", {f32({32, 100}), f32({100})}, {f32({32, 100})});
  EXPECT_DOUBLE_EQ(add.flops, 3200.0);
  EXPECT_DOUBLE_EQ(add.bytes, (3200.0 + 100.0 + 3200.0) * 4);
  EXPECT_DOUBLE_EQ(work("Erf", {f32({1000})}, {f32({1000})}).flops, 4000.0);
  EXPECT_DOUBLE_EQ(work("Sigmoid", {f32({1000})}, {f32({1000})}).flops, 4000.0);
  EXPECT_DOUBLE_EQ(work("Clip", {f32({1000}), absent(), absent()}, {f32({1000})}).flops, 2000.0);
  EXPECT_DOUBLE_EQ(work("Sum", {f32({10}), f32({10}), f32({10})}, {f32({10})}).flops, 20.0);
  EXPECT_DOUBLE_EQ(work("Max", {f32({10})}, {f32({10})}).flops, 10.0);  // one input: a copy, 1/elem
}

TEST(OpWork, ReductionsAndNormalisations) {
  EXPECT_DOUBLE_EQ(work("ReduceSum", {f32({64, 100})}, {f32({64, 1})}).flops, 6400.0);
  EXPECT_DOUBLE_EQ(work("ReduceMean", {f32({64, 100})}, {f32({64, 1})}).flops, 6464.0);
  EXPECT_DOUBLE_EQ(work("Softmax", {f32({32, 1000})}, {f32({32, 1000})}).flops, 256000.0);
  OpWork ln = work("LayerNormalization", {f32({2, 128, 768}), f32({768}), f32({768})},
                   {f32({2, 128, 768})});
  EXPECT_DOUBLE_EQ(ln.flops, 7.0 * 196608);
  OpWork bn = work("BatchNormalization",
                   {f32({1, 64, 56, 56}), f32({64}), f32({64}), f32({64}), f32({64})},
                   {f32({1, 64, 56, 56})});
  EXPECT_DOUBLE_EQ(bn.flops, 2.0 * 200704);
  EXPECT_DOUBLE_EQ(bn.bytes, (2 * 200704.0 + 4 * 64) * 4);
}

TEST(OpWork, LossesAndOptimizerUpdates) {
  const TensorType labels{DType::I64, {8, 4}};
  // A pick, weight and sum per label; SCE adds a log-softmax over the 8*10*4 scores.
  OpWork nll = work("NegativeLogLikelihoodLoss", {f32({8, 10, 4}), labels}, {f32({})});
  EXPECT_DOUBLE_EQ(nll.flops, 3.0 * 32);
  EXPECT_FALSE(nll.estimated);
  EXPECT_DOUBLE_EQ(work("SoftmaxCrossEntropyLoss", {f32({8, 10, 4}), labels}, {f32({})}).flops,
                   3.0 * 32 + 7.0 * 320);
  // Per element of every X: Adam of X1[100], X2[50] (R, T, X1, X2, G1, G2, V1, V2, H1, H2).
  const TensorType r = f32({}), t{DType::I64, {}};
  OpWork adam = work("Adam", {r, t, f32({100}), f32({50}), f32({100}), f32({50}), f32({100}),
                              f32({50}), f32({100}), f32({50})},
                     {f32({100}), f32({50}), f32({100}), f32({50}), f32({100}), f32({50})});
  EXPECT_DOUBLE_EQ(adam.flops, 14.0 * 150);
  EXPECT_FALSE(adam.estimated);
  const std::vector<TensorType> xgv = {r, t, f32({64}), f32({64}), f32({64})};
  EXPECT_DOUBLE_EQ(work("Momentum", xgv, {f32({64}), f32({64})}).flops, 6.0 * 64);
  EXPECT_DOUBLE_EQ(work("Adagrad", xgv, {f32({64}), f32({64})}).flops, 9.0 * 64);
  // The gradients count the d-input they write.
  EXPECT_DOUBLE_EQ(work("SoftmaxCrossEntropyLossGrad",
                        {f32({}), f32({8, 10}), TensorType{DType::I64, {8}}}, {f32({8, 10})})
                       .flops,
                   6.0 * 80);
}

TEST(OpWork, DataMovementMovesBytesOnly) {
  AttrMap perm;
  perm.set("perm", Attr::ofInts({2, 0, 1}));
  OpWork t = work("Transpose", {f32({2, 3, 4})}, {f32({4, 2, 3})}, perm);
  EXPECT_EQ(t.cls, OpClass::Memory);
  EXPECT_DOUBLE_EQ(t.flops, 0);
  EXPECT_DOUBLE_EQ(t.bytes, 192.0);
  // Embedding lookup: only the 16 gathered rows are read, not the 50000-row table.
  OpWork g = work("Gather", {f32({50000, 512}), TensorType{DType::I64, {1, 16}}},
                  {f32({1, 16, 512})});
  EXPECT_DOUBLE_EQ(g.bytes, 2.0 * 16 * 512 * 4 + 16 * 8);
  OpWork s = work("Slice",
                  {f32({1, 1000}), TensorType{DType::I64, {1}}, TensorType{DType::I64, {1}}},
                  {f32({1, 10})});
  EXPECT_DOUBLE_EQ(s.bytes, 2.0 * 40 + 16);
}

TEST(OpWork, MetadataOpsAreFree) {
  for (const char* op : {"Shape", "Constant"}) {
    OpWork w = work(op, {f32({1, 512, 1, 1})}, {f32({1, 512})});
    EXPECT_EQ(w.cls, OpClass::Free) << op;
    EXPECT_DOUBLE_EQ(w.flops, 0) << op;
    EXPECT_DOUBLE_EQ(w.bytes, 0) << op;
  }
}

// A reshaping op runs as a step that copies its input unless it can share the input's buffer:
// its work is that copy (the placer zeroes it where the copy vanishes).
TEST(OpWork, ReshapingOpsCopyTheirInput) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"}) {
    OpWork w = work(op, {f32({1, 512, 1, 1}), TensorType{DType::I64, {2}}}, {f32({1, 512})});
    EXPECT_EQ(w.cls, OpClass::Memory) << op;
    EXPECT_TRUE(w.reshape) << op;
    EXPECT_DOUBLE_EQ(w.flops, 0) << op;
    EXPECT_DOUBLE_EQ(w.bytes, 2.0 * 512 * 4) << op << ": read and write of input 0 only";
  }
  EXPECT_FALSE(work("Relu", {f32({4})}, {f32({4})}).reshape);
  // A Dropout with training_mode draws a mask and scales: an element-wise pass, never free.
  OpWork d = work("Dropout", {f32({1, 512}), f32({}), TensorType{DType::Bool, {}}, f32({})},
                  {f32({1, 512}), TensorType{DType::Bool, {1, 512}}});
  EXPECT_FALSE(d.reshape);
  EXPECT_DOUBLE_EQ(d.flops, 512);
  EXPECT_DOUBLE_EQ(d.bytes, 512 * 4 + 4 + 1 + 4 + 512 * 4 + 512) << "x, ratio, mode, counter; y, mask";
}

TEST(OpWork, DTypeIsTheFirstFloatingInput) {
  OpWork d = work("Gemm", {TensorType{DType::F64, {4, 4}}, TensorType{DType::F64, {4, 4}}},
                  {TensorType{DType::F64, {4, 4}}});
  EXPECT_EQ(d.dtype, DType::F64);
  EXPECT_DOUBLE_EQ(d.bytes, 3 * 16 * 8.0);
  OpWork i = work("Add", {TensorType{DType::I64, {4}}, TensorType{DType::I64, {4}}},
                  {TensorType{DType::I64, {4}}});
  EXPECT_EQ(i.dtype, DType::I64);
}

TEST(OpWork, GuessesAreMarked) {
  OpWork u = work("FancyOp", {f32({8})}, {f32({2, 8})});
  EXPECT_TRUE(u.estimated);
  EXPECT_DOUBLE_EQ(u.flops, 16.0);
  EXPECT_NE(u.note.find("FancyOp"), std::string::npos) << u.note;
  OpWork dyn = work("Relu", {f32({-1, 10})}, {f32({-1, 10})});
  EXPECT_TRUE(dyn.estimated);
  EXPECT_DOUBLE_EQ(dyn.flops, 10.0);
  EXPECT_NE(dyn.note.find("unknown dims"), std::string::npos) << dyn.note;
}

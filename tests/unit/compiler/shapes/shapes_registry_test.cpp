// Unit tests of the shape registry: knownOps/isKnownOp (the op table's ops), dispatch of unknown
// ops, and that every op in scope has a written shape function.
#include <algorithm>

#include "runtime/OpTable.h"
#include "tests/unit/compiler/shapes/shape_test_util.h"

namespace tandem::testing {
namespace {

// The ops in scope: the op table's rows (runtime/core/OpTable.def; op_table_test checks them
// against the dialect's ops).
const std::vector<std::string> kScope = [] {
  std::vector<std::string> v;
  size_t n = 0;
  const OpInfo* rows = allOps(&n);
  for (size_t i = 0; i < n; ++i) v.push_back(rows[i].name);
  return v;
}();

TEST(Registry, KnownOpsIsTheScopeSorted) {
  std::vector<std::string> want = kScope;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(knownOps(), want);
  // The 67 of the first release, Sin ... Atanh, then issue 16's indexing and image ops and its
  // element-wise, logic, reduction, generation, window and quantization ops, then the losses,
  // their Grad ops, the preview-training optimizers (issue 14) and MaxPoolGrad (autodiff), then
  // Det, the quantized products (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv), RNN,
  // GRU, LSTM, DFT, STFT, MelWeightMatrix, DynamicRegion (--tandem-outline-dynamic),
  // QLinearMatMulBias, DynamicQuantizeMatMul and DequantizeMatMul (--tandem-fuse-qdq), then the ops of opsets
  // 18-23 Mish, GroupNormalization and RMSNormalization (frontend/NewerOpsets.h), and of opsets
  // 18-25 BitwiseAnd/Or/Xor/Not, Attention, RotaryEmbedding, DeformConv, Col2Im, TensorScatter,
  // and EmbeddingBag (torch.onnx's EmbeddingBag Loop, frontend/EmbeddingBagLoop.h) with its
  // EmbeddingBagGrad (autodiff), BatchNormalizationGrad, ConvWeightGrad, GeluGrad and
  // LayerNormalizationGrad (autodiff).
  EXPECT_EQ(knownOps().size(), 181u);
  for (const char* op : {"Conv", "Gelu", "Constant", "Sin", "Atanh"}) EXPECT_TRUE(isKnownOp(op)) << op;
  EXPECT_FALSE(isKnownOp("ImageDecoder"));
  EXPECT_FALSE(isKnownOp("conv"));  // ONNX names are case-sensitive
}

TEST(Registry, UnknownOp) {
  std::vector<ResultInfo> res(1);
  EXPECT_EQ(inferResultTypes("ImageDecoder", {F32({1})}, AttrMap(), 1, &res),
            "unknown op 'ImageDecoder' (not a tandem op)");
}

TEST(Registry, EveryOpIsWrittenAndRejectsBadArity) {
  // Ten operands is wrong for every op but the variadic ones; none may be a placeholder.
  std::vector<OperandInfo> many(10, F32({1}));
  for (const auto& op : kScope) {
    SCOPED_TRACE(op);
    std::vector<ResultInfo> res;
    std::string err = inferResultTypes(op, {}, AttrMap(), 1, &res);
    EXPECT_EQ(err.find("not written"), std::string::npos) << err;
    if (op == "Constant") continue;  // zero inputs is its arity
    EXPECT_FALSE(err.empty());
    EXPECT_EQ(err.rfind(op, 0), 0u) << "message should start with the op: " << err;
    EXPECT_TRUE(res.empty()) << "results are cleared on error";
    // Variadic: any count may be right (the optimizers take a whole list of tensors).
    if (op != "Sum" && op != "Mean" && op != "Min" && op != "Max" && op != "Concat" &&
        op != "Einsum" && op != "Adam" && op != "Adagrad" && op != "Momentum" &&
        op != "If" && op != "Loop" && op != "Scan" &&  // control flow: + captured values
        op != "DynamicRegion") {                        // its body says how many
      std::string e2 = inferResultTypes(op, many, AttrMap(), 1, &res);
      EXPECT_NE(e2.find("got 10"), std::string::npos) << e2;
    }
  }
}

TEST(Registry, ResultsAreResizedToNumResults) {
  std::vector<ResultInfo> res(5);
  ASSERT_EQ(inferResultTypes("Relu", {F32({2})}, AttrMap(), 1, &res), "");
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].dims, (Dims{2}));
}

TEST(Registry, OldOpsetAttributeFormsAreRejected) {
  // Opset < 13 put these in attributes; reading them as absent inputs would give wrong shapes.
  EXPECT_ERR(infer("Unsqueeze", {F32({3})}, Attrs({Is("axes", {0})})),
             "Unsqueeze: attribute axes is the pre-opset-13 form; opset 17 takes it as input 1 (axes)");
  EXPECT_ERR_HAS(infer("Squeeze", {F32({1, 3})}, Attrs({Is("axes", {0})})), "pre-opset-13 form");
  EXPECT_ERR_HAS(infer("ReduceSum", {F32({1, 3})}, Attrs({Is("axes", {0})})), "input 1 (axes)");
  EXPECT_ERR_HAS(infer("Split", {F32({4})}, Attrs({Is("split", {2, 2})}), 2), "input 1 (split)");
  EXPECT_ERR_HAS(infer("Pad", {F32({4}), Ints({1, 1})}, Attrs({Is("pads", {1, 1})})), "input 1 (pads)");
  EXPECT_ERR_HAS(infer("Slice", {F32({4}), Ints({0}), Ints({1})}, Attrs({Is("starts", {0})})),
                 "input 1 (starts)");
  EXPECT_ERR_HAS(infer("Clip", {F32({4})}, Attrs({{"min", Attr::ofFloat(0)}})), "input 1 (min)");
  // Dropout-10's ratio attribute changes nothing at inference, so it is accepted.
  EXPECT_SHAPE(infer("Dropout", {F32({4})}, Attrs({{"ratio", Attr::ofFloat(0.5f)}})), DType::F32, {4});
  EXPECT_ERR_HAS(infer("Reshape", {F32({4}), Ints({4})}, Attrs({Is("shape", {4})})), "input 1 (shape)");
  // ReduceMean-13 keeps axes as an attribute.
  EXPECT_SHAPE(infer("ReduceMean", {F32({1, 3})}, Attrs({Is("axes", {0})})), DType::F32, {1, 3});
}

}  // namespace
}  // namespace tandem::testing

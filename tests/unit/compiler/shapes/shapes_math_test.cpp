// Unit tests of the Gemm, MatMul, Det, quantized matmul, Softmax/LogSoftmax, DFT and STFT shape
// functions.
#include "tests/unit/compiler/shapes/shape_test_util.h"

namespace tandem::testing {
namespace {

TEST(Gemm, Transposes) {
  EXPECT_SHAPE(infer("Gemm", {F32({3, 5}), F32({5, 4})}), DType::F32, {3, 4});
  EXPECT_SHAPE(infer("Gemm", {F32({5, 3}), F32({5, 4})}, Attrs({I("transA", 1)})), DType::F32, {3, 4});
  EXPECT_SHAPE(infer("Gemm", {F32({3, 5}), F32({4, 5})}, Attrs({I("transB", 1)})), DType::F32, {3, 4});
  EXPECT_SHAPE(infer("Gemm", {F32({5, 3}), F32({4, 5})}, Attrs({I("transA", 1), I("transB", 1)})),
               DType::F32, {3, 4});
  EXPECT_SHAPE(infer("Gemm", {F32({U, 5}), F32({5, 4})}), DType::F32, {U, 4});
}

TEST(Gemm, BiasBroadcastsUnidirectionally) {
  EXPECT_SHAPE(infer("Gemm", {F32({3, 5}), F32({5, 4}), F32({4})}), DType::F32, {3, 4});
  EXPECT_SHAPE(infer("Gemm", {F32({3, 5}), F32({5, 4}), F32({3, 1})}), DType::F32, {3, 4});
  EXPECT_SHAPE(infer("Gemm", {F32({3, 5}), F32({5, 4}), F32({})}), DType::F32, {3, 4});
  EXPECT_SHAPE(infer("Gemm", {F32({3, 5}), F32({5, 4}), Absent()}), DType::F32, {3, 4});
  EXPECT_ERR(infer("Gemm", {F32({3, 5}), F32({5, 4}), F32({3})}),
             "Gemm: input 2 (C) shape [3] is not unidirectionally broadcastable to the result (M, N) shape [3,4]");
  EXPECT_ERR_HAS(infer("Gemm", {F32({3, 5}), F32({5, 4}), F32({2, 3, 4})}), "not unidirectionally");
}

TEST(Gemm, Errors) {
  EXPECT_ERR(infer("Gemm", {F32({3, 5})}), "Gemm expects 2 or 3 inputs, got 1");
  EXPECT_ERR(infer("Gemm", {F32({3, 5}), F32({6, 4})}),
             "Gemm: input 0 (A) has K=5 but input 1 (B) has K=6");
  EXPECT_ERR(infer("Gemm", {F32({3, 5}), F32({4, 6})}, Attrs({I("transB", 1)})),
             "Gemm: input 0 (A) has K=5 but input 1 (B) has K=6 (transB=1)");
  EXPECT_ERR(infer("Gemm", {F32({3, 5, 1}), F32({5, 4})}),
             "Gemm: input 0 (A) must be 2-D, got shape [3,5,1]");
  EXPECT_ERR(infer("Gemm", {F32({3, 5}), F64({5, 4})}),
             "Gemm: input 1 (B) has dtype f64 but input 0 (A) has f32");
  EXPECT_ERR_HAS(infer("Gemm", {T(DType::Bool, {3, 5}), T(DType::Bool, {5, 4})}), "dtype bool");
}

TEST(MatMul, NumpySemantics) {
  EXPECT_SHAPE(infer("MatMul", {F32({3, 4}), F32({4, 5})}), DType::F32, {3, 5});
  EXPECT_SHAPE(infer("MatMul", {F32({2, 1, 3, 4}), F32({6, 4, 5})}), DType::F32, {2, 6, 3, 5});
  // 1-D operands: the added dim is dropped again.
  EXPECT_SHAPE(infer("MatMul", {F32({4}), F32({4, 5})}), DType::F32, {5});
  EXPECT_SHAPE(infer("MatMul", {F32({2, 3, 4}), F32({4})}), DType::F32, {2, 3});
  EXPECT_SHAPE(infer("MatMul", {F32({4}), F32({4})}), DType::F32, {});
  EXPECT_SHAPE(infer("MatMul", {F32({U, 7, 4}), F32({4, U})}), DType::F32, {U, 7, U});
  EXPECT_SHAPE(infer("MatMul", {I64({2, 3}), I64({3, 0})}), DType::I64, {2, 0});
}

TEST(MatMul, Errors) {
  EXPECT_ERR(infer("MatMul", {F32({3, 4}), F32({5, 6})}),
             "MatMul: input 0 (A) shape [3,4] and input 1 (B) shape [5,6] have mismatched inner dims 4 vs 5");
  EXPECT_ERR(infer("MatMul", {F32({}), F32({4})}), "MatMul: input 0 (A) must not be a scalar");
  EXPECT_ERR_HAS(infer("MatMul", {F32({2, 3, 4}), F32({5, 4, 6})}),
                 "input 0 (A) batch shape [2] and input 1 (B) batch shape [5] are not broadcastable");
  EXPECT_ERR(infer("MatMul", {F32({3, 4}), I64({4, 5})}),
             "MatMul: input 1 (B) has dtype i64 but input 0 (A) has f32");
}

TEST(Softmax, AxisChecks) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    SCOPED_TRACE(op);
    EXPECT_SHAPE(infer(op, {F32({2, U, 5})}), DType::F32, {2, U, 5});
    EXPECT_SHAPE(infer(op, {F64({2, 3})}, Attrs({I("axis", 0)})), DType::F64, {2, 3});
    EXPECT_SHAPE(infer(op, {F32({2, 3})}, Attrs({I("axis", -2)})), DType::F32, {2, 3});
    EXPECT_ERR(infer(op, {F32({2, 3})}, Attrs({I("axis", 2)})),
               std::string(op) + ": attribute axis 2 is out of range [-2, 1] for a rank-2 input");
    EXPECT_ERR_HAS(infer(op, {I64({2})}), "has dtype i64");
  }
}

TEST(Det, BatchOfSquareMatrices) {
  EXPECT_SHAPE(infer("Det", {F32({3, 3})}), DType::F32, {});
  EXPECT_SHAPE(infer("Det", {F64({2, 4, 5, 5})}), DType::F64, {2, 4});
  EXPECT_ERR(infer("Det", {F32({2, 3})}), "Det: input 0 (X) must be [*, M, M] (square matrices), got shape [2,3]");
}

TEST(QuantizedMatMul, IntegerAndQLinear) {
  const OperandInfo a = T(DType::U8, {2, 3, 4}), b = T(DType::I8, {4, 5});
  EXPECT_SHAPE(infer("MatMulInteger", {a, b, T(DType::U8, {}), T(DType::I8, {5})}), DType::I32, {2, 3, 5});
  EXPECT_ERR_HAS(infer("MatMulInteger", {a, b, T(DType::I8, {})}), "input 2 (a_zero_point) has dtype i8");
  const OperandInfo s = F32({});
  EXPECT_SHAPE(infer("QLinearMatMul", {a, s, T(DType::U8, {}), b, s, T(DType::I8, {}), s, T(DType::I8, {})}),
               DType::I8, {2, 3, 5});
  EXPECT_ERR_HAS(infer("QLinearMatMul", {a, s, T(DType::U8, {}), T(DType::I8, {3, 5}), s,
                                         T(DType::I8, {}), s, T(DType::U8, {})}),
                 "mismatched inner dims");
  // QLinearMatMulBias: QLinearMatMul's operands, then B i32 [N] (b a matrix).
  const OperandInfo q8 = T(DType::U8, {}), w8 = T(DType::I8, {});
  EXPECT_SHAPE(infer("QLinearMatMulBias", {a, s, q8, b, s, w8, s, q8, T(DType::I32, {5})}),
               DType::U8, {2, 3, 5});
  EXPECT_ERR_HAS(infer("QLinearMatMulBias", {a, s, q8, b, s, w8, s, q8}), "input");
  EXPECT_ERR_HAS(infer("QLinearMatMulBias", {a, s, q8, b, s, w8, s, q8, T(DType::I32, {4})}),
                 "input 8 (B) must have shape [5]");
  EXPECT_ERR_HAS(infer("QLinearMatMulBias", {a, s, q8, b, s, w8, s, q8, F32({5})}),
                 "input 8 (B) has dtype f32");
  // DynamicQuantizeMatMul: A f32, B a u8/i8 matrix, f32 Y.
  EXPECT_SHAPE(infer("DynamicQuantizeMatMul", {F32({2, 3, 4}), b, F32({5}), w8, F32({5})}),
               DType::F32, {2, 3, 5});
  EXPECT_ERR_HAS(infer("DynamicQuantizeMatMul", {a, b, s}), "input 0 (A) has dtype u8");
  EXPECT_ERR_HAS(infer("DynamicQuantizeMatMul", {F32({3, 4}), T(DType::I8, {2, 4, 5}), s}),
                 "input 1 (B) must be a matrix [K, N]");
  EXPECT_ERR_HAS(infer("DynamicQuantizeMatMul", {F32({3, 4}), b, s, w8, F32({4})}),
                 "input 4 (bias) must have shape [5]");
  // DequantizeMatMul: A f32 [..., K], B u8/i8 [K, N], scales per tensor, column or block of K.
  EXPECT_SHAPE(infer("DequantizeMatMul", {F32({2, 3, 4}), b, F32({5}), T(DType::I8, {5}), F32({5})}),
               DType::F32, {2, 3, 5});
  EXPECT_SHAPE(infer("DequantizeMatMul", {F32({3, 4}), b, s}), DType::F32, {3, 5});
  EXPECT_SHAPE(infer("DequantizeMatMul", {F32({3, 4}), b, F32({2, 5}), T(DType::I8, {2, 5})},
                     Attrs({I("block_size", 3)})),
               DType::F32, {3, 5});  // blocks of 3 rows of 4: 2, the last one row
  EXPECT_ERR_HAS(infer("DequantizeMatMul", {F32({3, 4}), b, F32({2, 5})}),
                 "input 2 (b_scale) must have shape [] or [5]");
  EXPECT_ERR_HAS(infer("DequantizeMatMul", {F32({3, 4}), b, F32({5})}, Attrs({I("block_size", 2)})),
                 "input 2 (b_scale) must have shape [2,5] (blocks of 2 rows of B");
  EXPECT_ERR_HAS(infer("DequantizeMatMul", {F32({3, 4}), b, F32({5}), T(DType::U8, {5})}),
                 "input 3 (b_zero_point) has dtype u8 but input 1 (B) has i8");
  EXPECT_ERR_HAS(infer("DequantizeMatMul", {F32({3, 4}), b, F32({5}), T(DType::I8, {})}),
                 "input 3 (b_zero_point) must have b_scale's shape [5]");
  EXPECT_ERR_HAS(infer("DequantizeMatMul", {F32({3, 6}), b, s}), "have mismatched inner dims");
  EXPECT_ERR_HAS(infer("DequantizeMatMul", {F32({4}), b, s}), "input 0 (A) must have rank >= 2");
  EXPECT_ERR_HAS(infer("DequantizeMatMul", {F32({3, 4}), b, s, Absent(), F32({4})}),
                 "input 4 (bias) must have shape [5]");
}

TEST(Signal, DFTAndSTFT) {
  EXPECT_SHAPE(infer("DFT", {F32({2, 8, 1})}), DType::F32, {2, 8, 2});
  EXPECT_SHAPE(infer("DFT", {F32({2, 8, 3, 2}), Ints({6})}, Attrs({I("onesided", 1)})), DType::F32,
               {2, 4, 3, 2});
  EXPECT_SHAPE(infer("DFT", {F32({2, 8, 3, 1})}, Attrs({I("axis", 2)})), DType::F32, {2, 8, 3, 2});
  EXPECT_ERR(infer("DFT", {F32({2, 8, 3, 1})}, Attrs({I("axis", 3)})),
             "DFT: attribute axis=3 must name a signal dim, in [1, 2]");
  EXPECT_ERR(infer("DFT", {F32({2, 8, 3})}), "DFT: input 0 (input) must be [batch, signal dims..., 1 or 2], got shape [2,8,3]");
  // 128 samples, frames of 16 every 8: 15 frames of 9 onesided bins.
  EXPECT_SHAPE(infer("STFT", {F32({1, 128, 1}), Ints({8}), Absent(), Ints({16})}), DType::F32,
               {1, 15, 9, 2});
  EXPECT_SHAPE(infer("STFT", {F32({1, 128, 2}), Ints({8}), F32({16})}, Attrs({I("onesided", 0)})),
               DType::F32, {1, 15, 16, 2});
  EXPECT_ERR(infer("STFT", {F32({1, 128, 1}), Ints({8}), F32({16}), Ints({8})}),
             "STFT: input 3 (frame_length) is 8 but input 2 (window) has 16 values");
  EXPECT_SHAPE(infer("MelWeightMatrix", {Ints({8}), Ints({16}), Ints({8192}), F32({}), F32({})}),
               DType::F32, {9, 8});
  EXPECT_SHAPE(infer("MelWeightMatrix", {I64({}), I64({}), I64({}), F32({}), F32({})},
                     Attrs({I("output_datatype", 11)})),
               DType::F64, {U, U});
}

}  // namespace
}  // namespace tandem::testing

// Unit tests of the NN shape functions: Conv, ConvTranspose, pools, BatchNormalization,
// LayerNormalization, ConvInteger, QLinearConv and the recurrent ops.
#include "tests/unit/compiler/shapes/shape_test_util.h"

namespace tandem::testing {
namespace {

TEST(Conv, BasicAndPads) {
  // 5x5 input, 3x3 kernel: 3x3 without padding, 5x5 with 1 on every side.
  EXPECT_SHAPE(infer("Conv", {F32({1, 1, 5, 5}), F32({1, 1, 3, 3})}), DType::F32, {1, 1, 3, 3});
  EXPECT_SHAPE(infer("Conv", {F32({1, 1, 5, 5}), F32({1, 1, 3, 3})}, Attrs({Is("pads", {1, 1, 1, 1})})),
               DType::F32, {1, 1, 5, 5});
  // ONNX test_conv_with_strides_and_asymmetric_padding: 7x5, stride 2, pads (1,0,1,0) -> 4x2.
  EXPECT_SHAPE(infer("Conv", {F32({1, 1, 7, 5}), F32({1, 1, 3, 3})},
                     Attrs({Is("strides", {2, 2}), Is("pads", {1, 0, 1, 0})})),
               DType::F32, {1, 1, 4, 2});
  // Bias, 1-D and 3-D convolutions.
  EXPECT_SHAPE(infer("Conv", {F32({2, 3, 10}), F32({8, 3, 3}), F32({8})}), DType::F32, {2, 8, 8});
  EXPECT_SHAPE(infer("Conv", {F32({1, 2, 4, 4, 4}), F32({4, 2, 2, 2, 2})}), DType::F32, {1, 4, 3, 3, 3});
}

TEST(Conv, DilationsStridesAutoPad) {
  // Dilation 2 makes a 3x3 kernel span 5: 7 -> 3.
  EXPECT_SHAPE(infer("Conv", {F32({1, 1, 7, 7}), F32({1, 1, 3, 3})}, Attrs({Is("dilations", {2, 2})})),
               DType::F32, {1, 1, 3, 3});
  // SAME_*: ceil(in / stride) whatever the kernel.
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    EXPECT_SHAPE(infer("Conv", {F32({1, 1, 7, 8}), F32({1, 1, 3, 3})},
                       Attrs({S("auto_pad", mode), Is("strides", {2, 3})})),
                 DType::F32, {1, 1, 4, 3});
  }
  // VALID ignores pads: floor((7 - 3) / 2) + 1 = 3.
  EXPECT_SHAPE(infer("Conv", {F32({1, 1, 7, 7}), F32({1, 1, 3, 3})},
                     Attrs({S("auto_pad", "VALID"), Is("strides", {2, 2}), Is("pads", {5, 5, 5, 5})})),
               DType::F32, {1, 1, 3, 3});
  // Unknown batch and spatial dims propagate; known dims are still computed.
  EXPECT_SHAPE(infer("Conv", {F32({U, 3, U, 9}), F32({16, 3, 3, 3})}), DType::F32, {U, 16, U, 7});
}

TEST(Conv, Groups) {
  // Depthwise: 8 channels, group 8, W (8, 1, 3, 3).
  EXPECT_SHAPE(infer("Conv", {F32({1, 8, 6, 6}), F32({8, 1, 3, 3})}, Attrs({I("group", 8)})),
               DType::F32, {1, 8, 4, 4});
  EXPECT_SHAPE(infer("Conv", {F32({1, 4, 6, 6}), F32({6, 2, 1, 1})}, Attrs({I("group", 2)})),
               DType::F32, {1, 6, 6, 6});
  EXPECT_ERR(infer("Conv", {F32({1, 3, 5, 5}), F32({1, 1, 3, 3})}),
             "Conv: X has 3 channels but W expects 1 x group 1 = 1");
  EXPECT_ERR(infer("Conv", {F32({1, 4, 6, 6}), F32({5, 2, 1, 1})}, Attrs({I("group", 2)})),
             "Conv: W has 5 output channels, not a multiple of group 2");
}

TEST(Conv, Errors) {
  EXPECT_ERR(infer("Conv", {F32({1, 1, 5, 5})}), "Conv expects 2 or 3 inputs, got 1");
  EXPECT_ERR(infer("Conv", {F32({1, 5, 5}), F32({1, 1, 3})}, Attrs()), "Conv: X has 5 channels but W expects 1 x group 1 = 1");
  EXPECT_ERR(infer("Conv", {F32({1, 1}), F32({1, 1})}),
             "Conv: input 0 (X) must have rank >= 3 (N, C, spatial...), got shape [1,1]");
  EXPECT_ERR(infer("Conv", {F32({1, 1, 5, 5}), F32({1, 1, 3})}),
             "Conv: input 1 (W) has rank 3 but X has rank 4");
  EXPECT_ERR(infer("Conv", {F32({1, 1, 5, 5}), F32({2, 1, 3, 3}), F32({3})}),
             "Conv: input 2 (B) must have shape [2] (one per output channel), got [3]");
  EXPECT_ERR(infer("Conv", {F32({1, 1, 2, 2}), F32({1, 1, 3, 3})}),
             "Conv: spatial dim 0 of size 2 plus pads 0+0 is smaller than the dilated kernel 3");
  EXPECT_ERR(infer("Conv", {F32({1, 1, 5, 5}), F32({1, 1, 3, 3})}, Attrs({Is("pads", {1, 1})})),
             "Conv: attribute pads has 2 values but needs 4 (begin and end per spatial dim)");
  EXPECT_ERR(infer("Conv", {F32({1, 1, 5, 5}), F32({1, 1, 3, 3})}, Attrs({Is("kernel_shape", {2, 2})})),
             "Conv: attribute kernel_shape [2,2] does not match W's spatial dims [3,3]");
  EXPECT_ERR(infer("Conv", {F32({1, 1, 5, 5}), F32({1, 1, 3, 3})}, Attrs({S("auto_pad", "SAME")})),
             "Conv: attribute auto_pad='SAME' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  EXPECT_ERR(infer("Conv", {F32({1, 1, 5, 5}), F32({1, 1, 3, 3})}, Attrs({Is("strides", {0, 1})})),
             "Conv: attribute strides [0,1] must be >= 1");
  EXPECT_ERR(infer("Conv", {I64({1, 1, 5, 5}), I64({1, 1, 3, 3})}),
             "Conv: input 0 (X) has dtype i64 but must be one of f32, f64");
}

TEST(ConvTranspose, OutputSize) {
  // ONNX test_convtranspose: 3x3 input, 3x3 kernel, 2 output channels -> 5x5.
  EXPECT_SHAPE(infer("ConvTranspose", {F32({1, 1, 3, 3}), F32({1, 2, 3, 3})}), DType::F32, {1, 2, 5, 5});
  // test_convtranspose_pads: strides (3,2), pads (1,2,1,2) -> 7x3: 3*2+3-2 = 7, 2*2+3-4 = 3.
  EXPECT_SHAPE(infer("ConvTranspose", {F32({1, 1, 3, 3}), F32({1, 2, 3, 3})},
                     Attrs({Is("strides", {3, 2}), Is("pads", {1, 2, 1, 2})})),
               DType::F32, {1, 2, 7, 3});
  // output_padding adds at the end: test_convtranspose_pad -> 10x8.
  EXPECT_SHAPE(infer("ConvTranspose", {F32({1, 1, 3, 3}), F32({1, 2, 3, 3})},
                     Attrs({Is("strides", {3, 2}), Is("output_padding", {1, 1})})),
               DType::F32, {1, 2, 10, 8});
  // Dilation 2 on a 2x2 kernel spans 3: (3-1) + 3 = 5.
  EXPECT_SHAPE(infer("ConvTranspose", {F32({1, 1, 3, 3}), F32({1, 1, 2, 2})}, Attrs({Is("dilations", {2, 2})})),
               DType::F32, {1, 1, 5, 5});
  // SAME_UPPER: in * stride.
  EXPECT_SHAPE(infer("ConvTranspose", {F32({1, 1, 3, 3}), F32({1, 2, 3, 3})},
                     Attrs({S("auto_pad", "SAME_UPPER"), Is("strides", {2, 2})})),
               DType::F32, {1, 2, 6, 6});
  // output_shape wins, given spatially or in full.
  EXPECT_SHAPE(infer("ConvTranspose", {F32({1, 1, 3, 3}), F32({1, 2, 3, 3})},
                     Attrs({Is("strides", {3, 2}), Is("output_shape", {10, 8})})),
               DType::F32, {1, 2, 10, 8});
  EXPECT_SHAPE(infer("ConvTranspose", {F32({1, 1, 3, 3}), F32({1, 2, 3, 3})},
                     Attrs({Is("strides", {3, 2}), Is("output_shape", {1, 2, 10, 8})})),
               DType::F32, {1, 2, 10, 8});
  // Groups: output channels = W.dim(1) * group.
  EXPECT_SHAPE(infer("ConvTranspose", {F32({U, 4, 3}), F32({4, 3, 2}), F32({6})}, Attrs({I("group", 2)})),
               DType::F32, {U, 6, 4});
}

TEST(ConvTranspose, Errors) {
  EXPECT_ERR(infer("ConvTranspose", {F32({1, 3, 3, 3}), F32({1, 2, 3, 3})}),
             "ConvTranspose: X has 3 channels but W expects 1 (W is C x M/group x kernel)");
  EXPECT_ERR(infer("ConvTranspose", {F32({1, 1, 3, 3}), F32({1, 2, 3, 3}), F32({3})}),
             "ConvTranspose: input 2 (B) must have shape [2] (one per output channel), got [3]");
  EXPECT_ERR(infer("ConvTranspose", {F32({1, 1, 3, 3}), F32({1, 2, 3, 3})}, Attrs({Is("output_shape", {4})})),
             "ConvTranspose: attribute output_shape [4] must have 2 spatial values");
  EXPECT_ERR(infer("ConvTranspose", {F32({1, 1, 1}), F32({1, 1, 1})}, Attrs({Is("pads", {1, 1})})),
             "ConvTranspose: spatial dim 0 gets negative output size -1 (pads exceed the transposed extent)");
}

TEST(Pool, MaxAndAverage) {
  for (const char* op : {"MaxPool", "AveragePool"}) {
    SCOPED_TRACE(op);
    EXPECT_SHAPE(infer(op, {F32({1, 3, 32, 32})}, Attrs({Is("kernel_shape", {2, 2})})), DType::F32,
                 {1, 3, 31, 31});
    EXPECT_SHAPE(infer(op, {F32({1, 3, 32, 32})}, Attrs({Is("kernel_shape", {5, 5}), Is("strides", {3, 3})})),
                 DType::F32, {1, 3, 10, 10});
    EXPECT_SHAPE(infer(op, {F32({1, 3, 28, 28})},
                       Attrs({Is("kernel_shape", {3, 3}), Is("pads", {2, 2, 2, 2})})),
                 DType::F32, {1, 3, 30, 30});
    EXPECT_SHAPE(infer(op, {F32({1, 3, 32})}, Attrs({Is("kernel_shape", {2})})), DType::F32, {1, 3, 31});
    // SAME: ceil(in / stride).
    EXPECT_SHAPE(infer(op, {F32({1, 3, 32, 31})},
                       Attrs({Is("kernel_shape", {3, 3}), Is("strides", {2, 2}), S("auto_pad", "SAME_LOWER")})),
                 DType::F32, {1, 3, 16, 16});
    // ceil_mode: test_maxpool_2d_ceil, 4x4 kernel 3 stride 2 -> 2x2 (1x1 with floor).
    EXPECT_SHAPE(infer(op, {F32({1, 1, 4, 4})},
                       Attrs({Is("kernel_shape", {3, 3}), Is("strides", {2, 2}), I("ceil_mode", 1)})),
                 DType::F32, {1, 1, 2, 2});
    EXPECT_SHAPE(infer(op, {F32({1, 1, 4, 4})}, Attrs({Is("kernel_shape", {3, 3}), Is("strides", {2, 2})})),
                 DType::F32, {1, 1, 1, 1});
    // ceil_mode drops a last window that would start in the end padding: 5 + pad 1 + 1, k 2,
    // s 2 -> ceil(5/2)+1 = 4 windows, but the 4th starts at 6 >= 5 + 1.
    EXPECT_SHAPE(infer(op, {F32({1, 1, 5})},
                       Attrs({Is("kernel_shape", {2}), Is("strides", {2}), Is("pads", {1, 1}), I("ceil_mode", 1)})),
                 DType::F32, {1, 1, 3});
    EXPECT_SHAPE(infer(op, {F32({U, 3, U, 8})}, Attrs({Is("kernel_shape", {2, 2}), Is("strides", {2, 2})})),
                 DType::F32, {U, 3, U, 4});
    EXPECT_ERR(infer(op, {F32({1, 3, 8, 8})}), std::string(op) + ": attribute kernel_shape is required");
    EXPECT_ERR(infer(op, {F32({1, 3, 8, 8})}, Attrs({Is("kernel_shape", {2})})),
               std::string(op) + ": attribute kernel_shape [2] has 1 values but X has 2 spatial dims");
  }
}

TEST(Pool, MaxPoolExtras) {
  // Dilations: kernel 2 dilation 2 spans 3: 4 -> 2.
  EXPECT_SHAPE(infer("MaxPool", {F32({1, 1, 4, 4})}, Attrs({Is("kernel_shape", {2, 2}), Is("dilations", {2, 2})})),
               DType::F32, {1, 1, 2, 2});
  auto r = infer("MaxPool", {F32({1, 3, 5, 5})}, Attrs({Is("kernel_shape", {3, 3})}), 2);
  ASSERT_EQ(r.err, "");
  EXPECT_EQ(r.dims(1), (Dims{1, 3, 3, 3}));
  EXPECT_EQ(r.dtype(1), DType::I64);
  EXPECT_SHAPE(infer("MaxPool", {T(DType::U8, {1, 1, 4, 4})}, Attrs({Is("kernel_shape", {2, 2})})),
               DType::U8, {1, 1, 3, 3});
  EXPECT_ERR(infer("AveragePool", {F32({1, 3, 5, 5})}, Attrs({Is("kernel_shape", {3, 3})}), 2),
             "AveragePool expects 1 result, got 2");
  EXPECT_ERR_HAS(infer("AveragePool", {T(DType::U8, {1, 1, 4, 4})}, Attrs({Is("kernel_shape", {2, 2})})),
                 "has dtype u8");
}

TEST(Pool, MaxPoolGradIsXShapedAndChecksDY) {
  // MaxPool 3x3 stride 2 of 7x7 gives 3x3: dY must be [1, 2, 3, 3]; dX is X's type.
  AttrMap a = Attrs({Is("kernel_shape", {3, 3}), Is("strides", {2, 2})});
  EXPECT_SHAPE(infer("MaxPoolGrad", {F64({1, 2, 7, 7}), F64({1, 2, 3, 3})}, a), DType::F64,
               {1, 2, 7, 7});
  EXPECT_SHAPE(infer("MaxPoolGrad", {F32({U, 2, 7, 7}), F32({U, 2, 3, 3})}, a), DType::F32,
               {U, 2, 7, 7});
  EXPECT_ERR(infer("MaxPoolGrad", {F32({1, 2, 7, 7}), F32({1, 2, 4, 4})}, a),
             "MaxPoolGrad: input 1 (dY) [1,2,4,4] must have MaxPool's result shape [1,2,3,3]");
  EXPECT_ERR_HAS(infer("MaxPoolGrad", {F32({1, 2, 7, 7}), F64({1, 2, 3, 3})}, a), "dY");
  EXPECT_ERR_HAS(infer("MaxPoolGrad", {F32({1, 2, 7, 7})}, a), "expects 2");
}

TEST(GlobalPool, KeepsNAndC) {
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    SCOPED_TRACE(op);
    EXPECT_SHAPE(infer(op, {F32({U, 3, 7, 9})}), DType::F32, {U, 3, 1, 1});
    EXPECT_SHAPE(infer(op, {F64({2, 4, 5})}), DType::F64, {2, 4, 1});
    EXPECT_ERR_HAS(infer(op, {F32({3})}), "must have rank >= 2");
  }
}

TEST(BatchNormalization, Inference) {
  EXPECT_SHAPE(infer("BatchNormalization", {F32({U, 3, 4, 4}), F32({3}), F32({3}), F32({3}), F32({3})}),
               DType::F32, {U, 3, 4, 4});
  EXPECT_SHAPE(infer("BatchNormalization", {F64({2, 5}), F64({5}), F64({5}), F64({5}), F64({5})}),
               DType::F64, {2, 5});
  EXPECT_ERR(infer("BatchNormalization", {F32({1, 3, 4, 4}), F32({3}), F32({3}), F32({4}), F32({3})}),
             "BatchNormalization: input 3 (input_mean) must have shape [3] (one per channel of X), got [4]");
  EXPECT_ERR(infer("BatchNormalization", {F32({1, 3, 4, 4}), F32({3}), F32({3})}),
             "BatchNormalization expects 5 inputs, got 3");
  EXPECT_ERR(infer("BatchNormalization", {F32({1, 3}), F32({3}), F32({3}), F32({3}), F32({3})}, Attrs(), 3),
             "BatchNormalization: outputs running_mean and running_var need attribute training_mode=1");
}

TEST(BatchNormalization, TrainingModeGivesRunningStatistics) {
  // Y like X; running_mean and running_var like input_mean and input_var (their dtype, T2).
  auto r = infer("BatchNormalization", {F32({2, 3, 4}), F32({3}), F32({3}), F64({3}), F64({3})},
                 Attrs({I("training_mode", 1)}), 3);
  ASSERT_EQ(r.err, "");
  EXPECT_EQ(r.dims(0), (Dims{2, 3, 4}));
  EXPECT_EQ(r.dtype(0), DType::F32);
  EXPECT_EQ(r.dims(1), (Dims{3}));
  EXPECT_EQ(r.dims(2), (Dims{3}));
  EXPECT_EQ(r.dtype(2), DType::F64);
  EXPECT_ERR(infer("BatchNormalization", {F32({1, 3}), F32({3}), F32({3}), F32({3}), F32({3})},
                   Attrs({I("training_mode", 1)}), 4),
             "BatchNormalization expects 1 to 3 results, got 4");
}

// BatchNormalizationGrad (autodiff): dX like X, dscale and dB like scale.
TEST(BatchNormalizationGrad, ShapesAndErrors) {
  auto r = infer("BatchNormalizationGrad", {F32({U, 3, 4, 4}), F32({U, 3, 4, 4}), F32({3})}, Attrs(), 3);
  ASSERT_EQ(r.err, "");
  EXPECT_EQ(r.dims(0), (Dims{U, 3, 4, 4}));
  EXPECT_EQ(r.dims(1), (Dims{3}));
  EXPECT_EQ(r.dims(2), (Dims{3}));
  EXPECT_ERR_HAS(infer("BatchNormalizationGrad", {F32({2, 3, 4}), F32({2, 3, 5}), F32({3})}, Attrs(), 3),
                 "input 1 (dY) must have X's shape");
  EXPECT_ERR_HAS(infer("BatchNormalizationGrad", {F32({2, 3, 4}), F32({2, 3, 4}), F32({4})}, Attrs(), 3),
                 "input 2 (scale) must have shape [C]");
  EXPECT_ERR_HAS(infer("BatchNormalizationGrad", {F32({2, 3, 4}), F64({2, 3, 4}), F32({3})}, Attrs(), 3),
                 "dY");
}

// ConvWeightGrad (autodiff): dW [M, C/group, kernel_shape...] from X and dY; dY at most the
// Conv's output extent (ConvTranspose's weight gradient keeps fewer rows).
TEST(ConvWeightGrad, ShapesAndErrors) {
  auto attrs = [](std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p, int64_t g) {
    return Attrs({Is("kernel_shape", k), Is("strides", s), Is("pads", p), I("group", g)});
  };
  auto r = infer("ConvWeightGrad", {F32({8, 32, 26, 26}), F32({8, 64, 24, 24})}, attrs({3, 3}, {1, 1}, {0, 0, 0, 0}, 1));
  ASSERT_EQ(r.err, "");
  EXPECT_EQ(r.dims(0), (Dims{64, 32, 3, 3}));
  EXPECT_EQ(r.dtype(0), DType::F32);
  r = infer("ConvWeightGrad", {F64({U, 4, 9, 8}), F64({U, 6, 5, 4})}, attrs({3, 2}, {2, 2}, {1, 0, 1, 1}, 2));
  ASSERT_EQ(r.err, "");
  EXPECT_EQ(r.dims(0), (Dims{6, 2, 3, 2}));
  EXPECT_EQ(r.dtype(0), DType::F64);
  EXPECT_EQ(infer("ConvWeightGrad", {F32({1, 2, 7}), F32({1, 3, 2})}, attrs({3}, {2}, {0, 0}, 1)).err, "");
  EXPECT_ERR_HAS(infer("ConvWeightGrad", {F32({1, 2, 7}), F32({1, 3, 4})}, attrs({3}, {2}, {0, 0}, 1)),
                 "does not fit the Conv output of X");
  EXPECT_ERR_HAS(infer("ConvWeightGrad", {F32({1, 3, 7}), F32({1, 4, 5})}, attrs({3}, {1}, {0, 0}, 2)),
                 "not a multiple of group 2");
  EXPECT_ERR_HAS(infer("ConvWeightGrad", {F32({1, 2, 7}), F32({2, 3, 5})}, attrs({3}, {1}, {0, 0}, 1)),
                 "differ in batch");
  EXPECT_ERR_HAS(infer("ConvWeightGrad", {F32({1, 2, 7, 7}), F32({1, 3, 5, 5})}, attrs({3}, {1}, {0, 0}, 1)),
                 "kernel_shape");
  EXPECT_ERR_HAS(infer("ConvWeightGrad", {F32({1, 2, 7}), F64({1, 3, 5})}, attrs({3}, {1}, {0, 0}, 1)), "dY");
}

TEST(IntegerConv, ConvIntegerAndQLinearConv) {
  const OperandInfo x = T(DType::U8, {1, 2, 5, 5}), w = T(DType::I8, {4, 1, 3, 3});
  EXPECT_SHAPE(infer("ConvInteger", {x, w}, Attrs({I("group", 2), Is("pads", {1, 1, 1, 1})})),
               DType::I32, {1, 4, 5, 5});
  EXPECT_ERR(infer("ConvInteger", {x, w}),
             "ConvInteger: x has 2 channels but w expects 1 x group 1");
  const OperandInfo s = F32({}), y0 = T(DType::I8, {});
  EXPECT_SHAPE(infer("QLinearConv", {x, s, T(DType::U8, {}), w, F32({4}), T(DType::I8, {4}), s, y0,
                                     T(DType::I32, {4})},
                     Attrs({I("group", 2)})),
               DType::I8, {1, 4, 3, 3});
  EXPECT_ERR(infer("QLinearConv", {x, s, T(DType::U8, {}), w, s, T(DType::I8, {}), s, y0,
                                   T(DType::I32, {3})},
                   Attrs({I("group", 2)})),
             "QLinearConv: input 8 (B) must have shape [4] (one per output channel), got [3]");
  EXPECT_ERR_HAS(infer("ConvInteger", {F32({1, 2, 5, 5}), w}), "input 0 (x)");
}

TEST(Recurrent, LayoutsDirectionsAndResults) {
  // X [seq 5, batch 2, input 3], hidden 4: Y [5, dirs, 2, 4], Y_h and Y_c [dirs, 2, 4].
  auto r = infer("LSTM", {F32({5, 2, 3}), F32({2, 16, 3}), F32({2, 16, 4}), F32({2, 32})},
                 Attrs({S("direction", "bidirectional")}), 3);
  ASSERT_EQ(r.err, "");
  EXPECT_EQ(r.dims(0), (Dims{5, 2, 2, 4}));
  EXPECT_EQ(r.dims(2), (Dims{2, 2, 4}));
  // layout 1: X [batch 2, seq 5, input 3], Y [2, 5, 1, 4], Y_h [2, 1, 4].
  auto g = infer("GRU", {F32({2, 5, 3}), F32({1, 12, 3}), F32({1, 12, 4})}, Attrs({I("layout", 1)}), 2);
  ASSERT_EQ(g.err, "");
  EXPECT_EQ(g.dims(0), (Dims{2, 5, 1, 4}));
  EXPECT_EQ(g.dims(1), (Dims{2, 1, 4}));
  EXPECT_SHAPE(infer("RNN", {F32({5, 2, 3}), F32({1, 4, 3}), F32({1, 4, 4})}), DType::F32, {5, 1, 2, 4});
  EXPECT_ERR(infer("GRU", {F32({5, 2, 3}), F32({1, 8, 3}), F32({1, 12, 4})}),
             "GRU: input 1 (W) must have shape [1,12,3], got [1,8,3]");
  EXPECT_ERR(infer("RNN", {F32({5, 2, 3}), F32({2, 4, 3}), F32({2, 4, 4})}),
             "RNN: input 1 (W) must have shape [1,4,3], got [2,4,3]");
  EXPECT_ERR(infer("LSTM", {F32({5, 2, 3}), F32({1, 16, 3}), F32({1, 16, 4}), Absent(), Absent(),
                            F32({1, 2, 4}), F32({1, 2, 4}), F32({1, 8})}),
             "LSTM: input 7 (P) must have shape [1,12], got [1,8]");
}

TEST(LayerNormalization, StatsShapes) {
  auto r = infer("LayerNormalization", {F32({2, 3, 4}), F32({4}), F32({4})}, Attrs(), 3);
  ASSERT_EQ(r.err, "");
  EXPECT_EQ(r.dims(0), (Dims{2, 3, 4}));
  EXPECT_EQ(r.dims(1), (Dims{2, 3, 1}));
  EXPECT_EQ(r.dims(2), (Dims{2, 3, 1}));
  EXPECT_EQ(r.dtype(2), DType::F32);
  auto r1 = infer("LayerNormalization", {F64({U, 3, 4}), F64({3, 4})}, Attrs({I("axis", 1)}), 2);
  ASSERT_EQ(r1.err, "");
  EXPECT_EQ(r1.dtype(0), DType::F64);
  EXPECT_EQ(r1.dims(1), (Dims{U, 1, 1}));
  EXPECT_EQ(r1.dtype(1), DType::F32);  // stash_type defaults to f32
  EXPECT_ERR(infer("LayerNormalization", {F32({2, 3, 4}), F32({3})}),
             "LayerNormalization: input 1 (Scale) shape [3] is not unidirectionally broadcastable to X's normalised shape [4]");
  EXPECT_ERR(infer("LayerNormalization", {F32({2, 3, 4}), F32({4})}, Attrs({I("axis", 3)})),
             "LayerNormalization: attribute axis 3 is out of range [-3, 2] for a rank-3 input");
  EXPECT_ERR(infer("LayerNormalization", {F32({2, 3, 4}), F32({4})}, Attrs(), 4),
             "LayerNormalization expects 1 to 3 results, got 4");
}

}  // namespace
}  // namespace tandem::testing

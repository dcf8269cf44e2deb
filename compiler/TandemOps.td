// The tandem dialect in ODS: one op per ONNX op in scope (opset-17 semantics), plus constant,
// none and copy: operands, attributes and the ONNX name. The other per-op facts (shape function,
// work, fusion and in-place flags, scalar formulas) are the op table's, runtime/core/OpTable.def,
// which the runtime reads without MLIR; op_table_test checks that both list the same ops.
#ifndef TANDEM_OPS_TD
#define TANDEM_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Tandem_Dialect : Dialect {
  let name = "tandem";
  let cppNamespace = "::tandem";
  let summary = "ONNX-aligned ops on ranked tensors, placed and memory-planned by Tandem";
  let description = [{
    Every op but `constant`, `none` and `copy` is one ONNX operator with the same operands (in
    ONNX positional order), attributes (ONNX names) and semantics as ONNX opset 17. A skipped
    optional operand in the middle of an operand list is a `tandem.none` value. Result types
    are inferred by the MLIR-free shape functions of compiler/ShapeInference.h.

    Passes add discardable attributes: `device`, `placement_reason`, `placement_candidates`,
    `arena_offset`.
  }];
  // ONNX attributes stay in the op's attribute dictionary: the generic builder and the shared
  // inferReturnTypes read them from a DictionaryAttr without per-op code.
  let usePropertiesForAttributes = 0;
  // Folding and canonicalization materialize folded values as tandem.constant.
  let hasConstantMaterializer = 1;
  let extraClassDeclaration = [{
    /// "tandem.conv" for "Conv"; "" when no tandem op has that ONNX name.
    llvm::StringRef opNameForOnnx(llvm::StringRef onnxType) const;
    /// "Conv" for "tandem.conv"; "" for an unknown name.
    llvm::StringRef onnxNameForOp(llvm::StringRef opName) const;
  private:
    void registerOnnxNames();
    llvm::StringMap<std::string> onnxToOp_;
    llvm::StringMap<std::string> opToOnnx_;
  public:
  }];
}

class Tandem_Op<string mnemonic, list<Trait> traits = []> : Op<Tandem_Dialect, mnemonic, traits>;

// One ONNX operator. `attrs` lists its ONNX-17 attributes, all optional: defaults are ONNX's,
// applied by the shape function and the kernels, so the IR shows exactly what the model said.
class Tandem_OnnxOp<string mnemonic, string onnxName, string onnxVersion, string what,
                    dag attrs = (ins), list<Trait> traits = []>
    : Tandem_Op<mnemonic, traits # [Pure,
        DeclareOpInterfaceMethods<InferTypeOpInterface, ["refineReturnTypes"]>]> {
  let summary = "ONNX " # onnxName # "-" # onnxVersion # ": " # what;
  let description = [{
    Semantics, operands, attributes and defaults: ONNX operator }] # onnxName # [{ version }]
    # onnxVersion # [{ (https://onnx.ai/onnx/operators/onnx__}] # onnxName # [{.html), the
    version in force at opset 17. Operands are in ONNX positional order; a skipped optional
    operand followed by a present one is a `tandem.none` value.
  }];
  let arguments = !con((ins Variadic<AnyTypeOf<[AnyTensor, NoneType]>>:$inputs), attrs);
  let results = (outs Variadic<AnyTensor>:$outputs);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $outputs)";
  let extraClassDeclaration = [{
    /// The ONNX op type this op implements.
    static ::llvm::StringRef getOnnxName() { return "}] # onnxName # [{"; }
  }];
  // Result types come from the one generic implementation (TandemDialect.cpp); the number of
  // results verified is the number the op has (Split, Dropout have several).
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *context,
        ::std::optional<::mlir::Location> location, ::mlir::ValueRange operands,
        ::mlir::DictionaryAttr attributes, ::mlir::OpaqueProperties properties,
        ::mlir::RegionRange regions, ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::tandem::detail::inferOnnxOpTypes(getOnnxName(), getAttributeNames(), context,
          location, operands, attributes, /*numResults=*/0, inferred);
    }
    ::mlir::LogicalResult $cppClass::refineReturnTypes(::mlir::MLIRContext *context,
        ::std::optional<::mlir::Location> location, ::mlir::ValueRange operands,
        ::mlir::DictionaryAttr attributes, ::mlir::OpaqueProperties properties,
        ::mlir::RegionRange regions, ::llvm::SmallVectorImpl<::mlir::Type> &returnTypes) {
      return ::tandem::detail::refineOnnxOpTypes(getOnnxName(), getAttributeNames(), context,
          location, operands, attributes, returnTypes);
    }
  }];
}

// An op of another domain: ONNX's ai.onnx.preview.training (Adam, ...), or Tandem's own
// training ops (the backward kernels the autodiff pass emits, named like ONNX Runtime's training
// ops). Same operand and attribute conventions as Tandem_OnnxOp; `spec` says where its semantics
// are written.
class Tandem_DomainOp<string mnemonic, string onnxName, string domain, string onnxVersion,
                      string what, string spec, dag attrs = (ins)>
    : Tandem_OnnxOp<mnemonic, onnxName, onnxVersion, what, attrs> {
  let summary = domain # " " # onnxName # "-" # onnxVersion # ": " # what;
  let description = [{
    Domain }] # domain # [{, version }] # onnxVersion # [{. Semantics: }] # spec # [{. Operands
    are in positional order; a skipped optional operand followed by a present one is a
    `tandem.none` value.
  }];
}

// Attribute kinds as ONNX AttributeProto has them.
defvar Int = OptionalAttr<I64Attr>;
defvar Float = OptionalAttr<F32Attr>;
defvar Str = OptionalAttr<StrAttr>;
defvar Ints = OptionalAttr<I64ArrayAttr>;
defvar Floats = OptionalAttr<F32ArrayAttr>;
defvar Strs = OptionalAttr<StrArrayAttr>;
defvar TensorAttr = OptionalAttr<ElementsAttr>;

//===----------------------------------------------------------------------===//
// Elementwise arithmetic and comparisons
//===----------------------------------------------------------------------===//

def Tandem_AddOp : Tandem_OnnxOp<"add", "Add", "14", "elementwise A + B with numpy broadcasting">;
def Tandem_SubOp : Tandem_OnnxOp<"sub", "Sub", "14", "elementwise A - B with numpy broadcasting">;
def Tandem_MulOp : Tandem_OnnxOp<"mul", "Mul", "14", "elementwise A * B with numpy broadcasting">;
def Tandem_DivOp : Tandem_OnnxOp<"div", "Div", "14", "elementwise A / B with numpy broadcasting">;
def Tandem_PowOp : Tandem_OnnxOp<"pow", "Pow", "15", "elementwise X ^ Y; Y may have another dtype">;
def Tandem_SumOp : Tandem_OnnxOp<"sum", "Sum", "13", "elementwise sum of 1..N inputs">;
def Tandem_MinOp : Tandem_OnnxOp<"min", "Min", "13", "elementwise minimum of 1..N inputs">;
def Tandem_MaxOp : Tandem_OnnxOp<"max", "Max", "13", "elementwise maximum of 1..N inputs">;
def Tandem_EqualOp : Tandem_OnnxOp<"equal", "Equal", "13", "elementwise A == B (bool result)">;
def Tandem_LessOp : Tandem_OnnxOp<"less", "Less", "13", "elementwise A < B (bool result)">;
def Tandem_GreaterOp : Tandem_OnnxOp<"greater", "Greater", "13", "elementwise A > B (bool result)">;
def Tandem_GreaterOrEqualOp : Tandem_OnnxOp<"greater_or_equal", "GreaterOrEqual", "16",
    "elementwise A >= B (bool result)">;
def Tandem_LessOrEqualOp : Tandem_OnnxOp<"less_or_equal", "LessOrEqual", "16",
    "elementwise A <= B (bool result)">;
def Tandem_ModOp : Tandem_OnnxOp<"mod", "Mod", "13",
    "elementwise remainder: sign of B (Python %), or of A with fmod = 1 (C fmod)", (ins Int:$fmod)>;
def Tandem_MeanOp : Tandem_OnnxOp<"mean", "Mean", "13", "elementwise mean of 1..N inputs">;
def Tandem_AndOp : Tandem_OnnxOp<"and", "And", "7", "elementwise logical A and B (bool)">;
def Tandem_OrOp : Tandem_OnnxOp<"or", "Or", "7", "elementwise logical A or B (bool)">;
def Tandem_XorOp : Tandem_OnnxOp<"xor", "Xor", "7", "elementwise logical A xor B (bool)">;
def Tandem_NotOp : Tandem_OnnxOp<"not", "Not", "1", "elementwise logical not (bool)">;
def Tandem_BitShiftOp : Tandem_OnnxOp<"bit_shift", "BitShift", "11",
    "unsigned X shifted by Y bits, `direction` LEFT or RIGHT", (ins Str:$direction)>;
def Tandem_BitwiseAndOp : Tandem_OnnxOp<"bitwise_and", "BitwiseAnd", "18",
    "elementwise A & B of integers, numpy broadcasting">;
def Tandem_BitwiseOrOp : Tandem_OnnxOp<"bitwise_or", "BitwiseOr", "18",
    "elementwise A | B of integers, numpy broadcasting">;
def Tandem_BitwiseXorOp : Tandem_OnnxOp<"bitwise_xor", "BitwiseXor", "18",
    "elementwise A ^ B of integers, numpy broadcasting">;
def Tandem_BitwiseNotOp : Tandem_OnnxOp<"bitwise_not", "BitwiseNot", "18",
    "elementwise ~X of integers">;
def Tandem_IsNaNOp : Tandem_OnnxOp<"is_nan", "IsNaN", "13", "elementwise x is NaN (bool result)">;
def Tandem_IsInfOp : Tandem_OnnxOp<"is_inf", "IsInf", "10",
    "elementwise x is +inf (detect_positive) or -inf (detect_negative) (bool result)",
    (ins Int:$detect_negative, Int:$detect_positive)>;
def Tandem_WhereOp : Tandem_OnnxOp<"where", "Where", "16", "select X where condition else Y">;

//===----------------------------------------------------------------------===//
// Unary math and activations
//===----------------------------------------------------------------------===//

def Tandem_SqrtOp : Tandem_OnnxOp<"sqrt", "Sqrt", "13", "elementwise square root">;
def Tandem_ExpOp : Tandem_OnnxOp<"exp", "Exp", "13", "elementwise e^x">;
def Tandem_LogOp : Tandem_OnnxOp<"log", "Log", "13", "elementwise natural logarithm">;
def Tandem_NegOp : Tandem_OnnxOp<"neg", "Neg", "13", "elementwise -x">;
def Tandem_AbsOp : Tandem_OnnxOp<"abs", "Abs", "13", "elementwise |x|">;
def Tandem_ReciprocalOp : Tandem_OnnxOp<"reciprocal", "Reciprocal", "13", "elementwise 1/x">;
def Tandem_ErfOp : Tandem_OnnxOp<"erf", "Erf", "13", "elementwise error function">;
def Tandem_SinOp : Tandem_OnnxOp<"sin", "Sin", "7", "elementwise sine (radians)">;
def Tandem_CosOp : Tandem_OnnxOp<"cos", "Cos", "7", "elementwise cosine (radians)">;
def Tandem_TanOp : Tandem_OnnxOp<"tan", "Tan", "7", "elementwise tangent (radians)">;
def Tandem_AsinOp : Tandem_OnnxOp<"asin", "Asin", "7", "elementwise arcsine, in [-pi/2, pi/2]">;
def Tandem_AcosOp : Tandem_OnnxOp<"acos", "Acos", "7", "elementwise arccosine, in [0, pi]">;
def Tandem_AtanOp : Tandem_OnnxOp<"atan", "Atan", "7", "elementwise arctangent, in [-pi/2, pi/2]">;
def Tandem_SinhOp : Tandem_OnnxOp<"sinh", "Sinh", "9", "elementwise hyperbolic sine">;
def Tandem_CoshOp : Tandem_OnnxOp<"cosh", "Cosh", "9", "elementwise hyperbolic cosine">;
def Tandem_AsinhOp : Tandem_OnnxOp<"asinh", "Asinh", "9", "elementwise inverse hyperbolic sine">;
def Tandem_AcoshOp : Tandem_OnnxOp<"acosh", "Acosh", "9", "elementwise inverse hyperbolic cosine">;
def Tandem_AtanhOp : Tandem_OnnxOp<"atanh", "Atanh", "9", "elementwise inverse hyperbolic tangent">;
def Tandem_CeilOp : Tandem_OnnxOp<"ceil", "Ceil", "13", "elementwise smallest integer >= x">;
def Tandem_FloorOp : Tandem_OnnxOp<"floor", "Floor", "13", "elementwise largest integer <= x">;
def Tandem_RoundOp : Tandem_OnnxOp<"round", "Round", "11",
    "elementwise nearest integer, halves to even">;
def Tandem_SignOp : Tandem_OnnxOp<"sign", "Sign", "13", "elementwise -1, 0 or 1 by the sign of x">;
def Tandem_ReluOp : Tandem_OnnxOp<"relu", "Relu", "14", "elementwise max(0, x)">;
def Tandem_LeakyReluOp : Tandem_OnnxOp<"leaky_relu", "LeakyRelu", "16",
    "x if x >= 0 else alpha * x", (ins Float:$alpha)>;
def Tandem_PReluOp : Tandem_OnnxOp<"prelu", "PRelu", "16",
    "x if x >= 0 else slope * x, slope broadcast unidirectionally">;
def Tandem_EluOp : Tandem_OnnxOp<"elu", "Elu", "6", "x if x >= 0 else alpha * (e^x - 1)",
    (ins Float:$alpha)>;
def Tandem_SeluOp : Tandem_OnnxOp<"selu", "Selu", "6", "scaled exponential linear unit",
    (ins Float:$alpha, Float:$gamma)>;
def Tandem_SigmoidOp : Tandem_OnnxOp<"sigmoid", "Sigmoid", "13", "elementwise 1 / (1 + e^-x)">;
def Tandem_HardSigmoidOp : Tandem_OnnxOp<"hard_sigmoid", "HardSigmoid", "6",
    "max(0, min(1, alpha * x + beta))", (ins Float:$alpha, Float:$beta)>;
def Tandem_TanhOp : Tandem_OnnxOp<"tanh", "Tanh", "13", "elementwise hyperbolic tangent">;
def Tandem_GeluOp : Tandem_OnnxOp<"gelu", "Gelu", "20",
    "0.5 x (1 + erf(x / sqrt 2)); approximate = \"tanh\": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
    (ins Str:$approximate)>;
def Tandem_GeluGradOp : Tandem_DomainOp<"gelu_grad", "GeluGrad", "tandem", "1",
    "d X of Gelu from dY: dY, X -> dY * Gelu'(X), approximate as Gelu's (none: erf; tanh)",
    "ONNX Runtime's training ops GeluGrad and FastGeluGrad (com.microsoft-1), the derivative "
      # "of ONNX Gelu-20: none: Phi(x) + x phi(x); tanh, with t = tanh(sqrt(2/pi) (x + "
      # "0.044715 x^3)): 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)",
    (ins Str:$approximate)>;
def Tandem_SoftplusOp : Tandem_OnnxOp<"softplus", "Softplus", "1", "elementwise ln(e^x + 1)">;
def Tandem_MishOp : Tandem_OnnxOp<"mish", "Mish", "18", "elementwise x * tanh(ln(e^x + 1))">;
def Tandem_SoftsignOp : Tandem_OnnxOp<"softsign", "Softsign", "1", "elementwise x / (1 + |x|)">;
def Tandem_HardSwishOp : Tandem_OnnxOp<"hard_swish", "HardSwish", "14",
    "elementwise x * max(0, min(1, x / 6 + 1/2))">;
def Tandem_ThresholdedReluOp : Tandem_OnnxOp<"thresholded_relu", "ThresholdedRelu", "10",
    "x if x > alpha else 0", (ins Float:$alpha)>;
def Tandem_CeluOp : Tandem_OnnxOp<"celu", "Celu", "12",
    "max(0, x) + min(0, alpha * (e^(x / alpha) - 1))", (ins Float:$alpha)>;
def Tandem_ShrinkOp : Tandem_OnnxOp<"shrink", "Shrink", "9",
    "x + bias if x < -lambd, x - bias if x > lambd, else 0", (ins Float:$bias, Float:$lambd)>;
def Tandem_ClipOp : Tandem_OnnxOp<"clip", "Clip", "13",
    "clamp to [min, max]; min and max are optional scalar inputs">;
def Tandem_CastOp : Tandem_OnnxOp<"cast", "Cast", "13", "convert to dtype `to` (ONNX code)",
    (ins Int:$to)>;
def Tandem_CastLikeOp : Tandem_OnnxOp<"cast_like", "CastLike", "15",
    "convert to the dtype of the second input">;
def Tandem_QuantizeLinearOp : Tandem_OnnxOp<"quantize_linear", "QuantizeLinear", "13",
    "saturate(round(x / y_scale) + y_zero_point), per tensor, per `axis` (default 1), or per "
    "block of `block_size` along it (QuantizeLinear-21)",
    (ins Int:$axis, Int:$block_size)>;
def Tandem_DequantizeLinearOp : Tandem_OnnxOp<"dequantize_linear", "DequantizeLinear", "13",
    "(x - x_zero_point) * x_scale, per tensor, per `axis` (default 1), or per block of "
    "`block_size` along it (DequantizeLinear-21)", (ins Int:$axis, Int:$block_size)>;
def Tandem_DynamicQuantizeLinearOp : Tandem_OnnxOp<"dynamic_quantize_linear",
    "DynamicQuantizeLinear", "11",
    "u8 quantization of x with scale and zero point from its range (three results)">;
def Tandem_IdentityOp : Tandem_OnnxOp<"identity", "Identity", "16", "the input, unchanged">;
// Tandem extension of Dropout-13: an optional fourth operand `counter`, an f32 or i64 scalar
// read at run time, is the Philox step word of the training mask (runtime/Philox.h): each
// counter value draws an independent mask, the same value the same mask; absent = 0. The
// training step graph feeds it the step counter `step` (compiler/training/TrainingGraph.h);
// the ONNX importer never sets it.
def Tandem_DropoutOp : Tandem_OnnxOp<"dropout", "Dropout", "13",
    "inference: identity, optional all-true mask; training: a Philox mask, selected by the "
    "optional Tandem operand 3 (counter)", (ins Int:$seed)>;

//===----------------------------------------------------------------------===//
// Matrix products, normalisation, softmax
//===----------------------------------------------------------------------===//

def Tandem_GemmOp : Tandem_OnnxOp<"gemm", "Gemm", "13",
    "alpha * A' * B' + beta * C with C broadcast unidirectionally",
    (ins Float:$alpha, Float:$beta, Int:$transA, Int:$transB)>;
def Tandem_MatMulOp : Tandem_OnnxOp<"mat_mul", "MatMul", "13",
    "numpy matmul: 1-D operands promoted, batch dims broadcast">;
def Tandem_AttentionOp : Tandem_OnnxOp<"attention", "Attention", "25",
    "softmax(scale Q K^T (softcapped) + mask) V per head (MHA, GQA, MQA), causal and window "
    "masks, past/present KV cache (Attention-23 and -24 are its subsets)",
    (ins Int:$is_causal, Int:$kv_num_heads, Int:$q_num_heads, Int:$qk_matmul_output_mode,
         Float:$scale, Float:$softcap, Int:$softmax_precision, Int:$left_window_size,
         Int:$right_window_size)>;
def Tandem_RotaryEmbeddingOp : Tandem_OnnxOp<"rotary_embedding", "RotaryEmbedding", "23",
    "rotate pairs of X's first rotary_embedding_dim features per head by the cos/sin caches "
    "at each token's position (halves or interleaved)",
    (ins Int:$interleaved, Int:$num_heads, Int:$rotary_embedding_dim)>;
def Tandem_SoftmaxOp : Tandem_OnnxOp<"softmax", "Softmax", "13",
    "softmax along one axis (default -1)", (ins Int:$axis)>;
def Tandem_LogSoftmaxOp : Tandem_OnnxOp<"log_softmax", "LogSoftmax", "13",
    "log of softmax along one axis (default -1)", (ins Int:$axis)>;
def Tandem_HardmaxOp : Tandem_OnnxOp<"hardmax", "Hardmax", "13",
    "1 at the first max along one axis (default -1), 0 elsewhere", (ins Int:$axis)>;
def Tandem_MatMulIntegerOp : Tandem_OnnxOp<"matmul_integer", "MatMulInteger", "10",
    "numpy matmul of (A - a_zero_point) and (B - b_zero_point), u8/i8 in, i32 out">;
def Tandem_QLinearMatMulOp : Tandem_OnnxOp<"qlinear_matmul", "QLinearMatMul", "10",
    "quantized matmul: i32 product of the zero-point-shifted operands, requantized by "
    "a_scale * b_scale / y_scale to y_zero_point's dtype">;
def Tandem_QLinearMatMulBiasOp : Tandem_DomainOp<"qlinear_matmul_bias", "QLinearMatMulBias",
    "tandem", "1",
    "QLinearMatMul with an i32 bias B [N] added to the accumulators before the requantization "
      # "(as QLinearConv's B): a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, "
      # "y_zero_point, B -> y",
    "compiler/shapes/Quantize.cpp and runtime/cpu/ref/QuantizedMath.cpp (--tandem-fuse-qdq "
      # "builds it from a QDQ Gemm, or MatMul + Add, with a bias)">;
def Tandem_DynamicQuantizeMatMulOp : Tandem_DomainOp<"dynamic_quantize_matmul",
    "DynamicQuantizeMatMul", "tandem", "1",
    "A (f32) quantized as DynamicQuantizeLinear does, times B (u8/i8) in i32, then f32: "
      # "A, B, b_scale, b_zero_point[, bias] -> Y",
    "ONNX Runtime's contrib op DynamicQuantizeMatMul (com.microsoft-1): "
      # "Y = float((DynamicQuantizeLinear(A) - a_zero_point) x (B - b_zero_point)) * "
      # "float(a_scale * b_scale) + bias; compiler/shapes/Quantize.cpp, "
      # "runtime/cpu/ref/QuantizedMath.cpp (--tandem-fuse-qdq builds it from quantize_dynamic's "
      # "DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul)">;
def Tandem_DequantizeMatMulOp : Tandem_DomainOp<"dequantize_matmul", "DequantizeMatMul",
    "tandem", "1",
    "A (f32) times DequantizeLinear(B) with B kept 8-bit (weight-only quantization): A, B "
      # "(u8/i8 [K, N]), b_scale, b_zero_point[, bias] -> Y",
    "Y = A x ((float(B) - float(b_zero_point)) * b_scale) + bias, A f32 [..., M, K], b_scale f32 "
      # "[] or [N], or [ceil(K / block_size), N] with block_size > 0 (DequantizeLinear-21 "
      # "blocks along K), b_zero_point B's dtype and b_scale's shape, bias f32 [N]; "
      # "compiler/shapes/Quantize.cpp, runtime/cpu/ref/DequantizeMatMul.cpp (--tandem-fuse-qdq "
      # "builds it from DequantizeLinear of constant weights -> MatMul or Gemm [-> bias Add]); "
      # "accuracy_level 0-4 as ONNX Runtime's MatMulNBits (0 the default): 4 lets the CPU "
      # "kernel quantize A to int8 per row and block (the reference stays f32)",
    (ins Int:$block_size, Int:$accuracy_level)>;
def Tandem_DetOp : Tandem_OnnxOp<"det", "Det", "11",
    "determinant of each square matrix of X [*, M, M]">;
def Tandem_ConvIntegerOp : Tandem_OnnxOp<"conv_integer", "ConvInteger", "10",
    "convolution of (x - x_zero_point) and (w - w_zero_point), u8/i8 in, i32 out",
    (ins Str:$auto_pad, Ints:$dilations, Int:$group, Ints:$kernel_shape, Ints:$pads,
         Ints:$strides)>;
def Tandem_QLinearConvOp : Tandem_OnnxOp<"qlinear_conv", "QLinearConv", "10",
    "quantized convolution with optional i32 bias, requantized by x_scale * w_scale / y_scale",
    (ins Str:$auto_pad, Ints:$dilations, Int:$group, Ints:$kernel_shape, Ints:$pads,
         Ints:$strides)>;
def Tandem_BatchNormalizationOp : Tandem_OnnxOp<"batch_normalization", "BatchNormalization",
    "15", "batch normalisation with the running statistics, or (training_mode = 1) the batch's, "
    "also giving the updated running mean and variance",
    (ins Float:$epsilon, Float:$momentum, Int:$training_mode)>;
// Not an ONNX operator: a Conv's weight gradient, made by --tandem-autodiff.
def Tandem_ConvWeightGradOp : Tandem_OnnxOp<"conv_weight_grad", "ConvWeightGrad", "1",
    "d loss / d W of a Conv-11 from its input X and its output's gradient dY",
    (ins Ints:$dilations, Int:$group, Ints:$kernel_shape, Ints:$pads, Ints:$strides)> {
  let summary = "Tandem ConvWeightGrad (autodiff): d loss / d W of a Conv-11";
  let description = [{
    Not an ONNX operator. Operands X [N, C, D...] (the Conv's input) and dY [N, M, O...]
    (d loss / d Y); attributes those of the Conv with explicit pads (begins, then ends) and
    kernel_shape k. Result dW [M, C/group, k...] (X's type): dW[m, c, t] = sum over n and o of
    dY[n, m, o] * X[n, g * C/group + c, o * strides + t * dilations - pads], g = m's group,
    taps in the padding contributing nothing. O is at most the Conv's output extent for D
    (ConvTranspose's weight gradient keeps fewer rows than its equivalent Conv gives). oneDNN's convolution backward-weights primitive
    runs it on the CPU (f32), a reference kernel otherwise.
  }];
}
// Not an ONNX operator: the gradient of a training-mode BatchNormalization, made by
// --tandem-autodiff.
def Tandem_BatchNormalizationGradOp : Tandem_OnnxOp<"batch_normalization_grad",
    "BatchNormalizationGrad", "1", "d loss / d (X, scale, B) of a training-mode "
    "BatchNormalization-15", (ins Float:$epsilon)> {
  let summary = "Tandem BatchNormalizationGrad (autodiff): d loss / d (X, scale, B) of a "
                "training-mode BatchNormalization-15";
  let description = [{
    Not an ONNX operator. Operands X [N, C, D...], dY (d loss / d Y, X's shape) and scale [C];
    attribute epsilon, that of the BatchNormalization it differentiates. With the batch
    statistics of X per channel over N and D... (M values each: mean, population variance
    var, rstd = 1 / sqrt(var + epsilon), xhat = (x - mean) * rstd), the results are
    dX = scale * rstd * (dY - mean(dY) - xhat * mean(dY * xhat)) (X's type), dscale =
    sum(dY * xhat) and dB = sum(dY) ([C], scale's type).
  }];
}
def Tandem_InstanceNormalizationOp : Tandem_OnnxOp<"instance_normalization",
    "InstanceNormalization", "6",
    "normalise each (n, c) over the spatial dims, then per-channel scale and bias",
    (ins Float:$epsilon)>;
def Tandem_GroupNormalizationOp : Tandem_OnnxOp<"group_normalization",
    "GroupNormalization", "21",
    "normalise each (n, group of C / num_groups channels) over its channels and spatial dims, "
    "then per-channel scale and bias",
    (ins Float:$epsilon, Int:$num_groups, Int:$stash_type)>;
def Tandem_LRNOp : Tandem_OnnxOp<"lrn", "LRN", "13",
    "local response normalisation across `size` neighbouring channels",
    (ins Float:$alpha, Float:$beta, Float:$bias, Int:$size)>;
// Not an ONNX operator: the gradient of LayerNormalization, made by --tandem-autodiff.
def Tandem_LayerNormalizationGradOp : Tandem_OnnxOp<"layer_normalization_grad",
    "LayerNormalizationGrad", "1", "d loss / d (X, Scale, B) of a LayerNormalization-17",
    (ins Int:$axis, Float:$epsilon)> {
  let summary = "Tandem LayerNormalizationGrad (autodiff): d loss / d (X, Scale, B) of a "
                "LayerNormalization-17";
  let description = [{
    Not an ONNX operator (ONNX Runtime's training op LayerNormalizationGrad, which takes the
    forward's mean and inverse std; these are recomputed here). Operands X, dY (d loss / d Y,
    X's shape) and Scale (X's shape from `axis` on: one value per normalised element);
    attributes axis and epsilon, those of the LayerNormalization it differentiates. Per row
    of the dims from axis on (n elements: mean, population variance var, rstd = 1 / sqrt(var
    + epsilon), xhat = (x - mean) * rstd, g = dY * Scale), the results are dX = rstd * (g -
    mean(g) - xhat * mean(g * xhat)) (X's type), dScale = sum over the rows of dY * xhat and
    dB = sum of dY (Scale's shape and type).
  }];
}
def Tandem_LayerNormalizationOp : Tandem_OnnxOp<"layer_normalization", "LayerNormalization",
    "17", "normalise over the dims from `axis` on, then scale and bias",
    (ins Int:$axis, Float:$epsilon, Int:$stash_type)>;
def Tandem_RMSNormalizationOp : Tandem_OnnxOp<"rms_normalization", "RMSNormalization", "23",
    "x / sqrt(mean of x^2 over the dims from `axis` on + epsilon) * scale",
    (ins Int:$axis, Float:$epsilon, Int:$stash_type)>;
def Tandem_MeanVarianceNormalizationOp : Tandem_OnnxOp<"mean_variance_normalization",
    "MeanVarianceNormalization", "13",
    "(x - mean) / (std + 1e-9) over `axes` (default [0, 2, 3])", (ins Ints:$axes)>;

def Tandem_NegativeLogLikelihoodLossOp : Tandem_OnnxOp<"negative_log_likelihood_loss",
    "NegativeLogLikelihoodLoss", "13",
    "-input[n, target, d...] * weight[target], reduced by `reduction` (none, sum, mean)",
    (ins Str:$reduction, Int:$ignore_index)>;
def Tandem_SoftmaxCrossEntropyLossOp : Tandem_OnnxOp<"softmax_cross_entropy_loss",
    "SoftmaxCrossEntropyLoss", "13",
    "NegativeLogLikelihoodLoss of LogSoftmax over axis 1; optional second output log_prob",
    (ins Str:$reduction, Int:$ignore_index)>;

//===----------------------------------------------------------------------===//
// Training: optimizer updates (ai.onnx.preview.training) and loss gradients (Tandem's)
//===----------------------------------------------------------------------===//

def Tandem_AdagradOp : Tandem_DomainOp<"adagrad", "Adagrad", "ai.onnx.preview.training", "1",
    "Adagrad update of N tensors: R, T, X1..XN, G1..GN, H1..HN -> X_new1..N, H_new1..N",
    "https://onnx.ai/onnx/operators/onnx_aionnxpreviewtraining_Adagrad.html",
    (ins Float:$decay_factor, Float:$epsilon, Float:$norm_coefficient)>;
def Tandem_AdamOp : Tandem_DomainOp<"adam", "Adam", "ai.onnx.preview.training", "1",
    "Adam update of N tensors: R, T, X1..N, G1..N, V1..N, H1..N -> X_new, V_new, H_new (each 1..N)",
    "https://onnx.ai/onnx/operators/onnx_aionnxpreviewtraining_Adam.html",
    (ins Float:$alpha, Float:$beta, Float:$epsilon, Float:$norm_coefficient,
         Float:$norm_coefficient_post)>;
def Tandem_MomentumOp : Tandem_DomainOp<"momentum", "Momentum", "ai.onnx.preview.training", "1",
    "SGD with momentum (standard or nesterov) of N tensors: R, T, X1..N, G1..N, V1..N -> "
      # "X_new, V_new",
    "https://onnx.ai/onnx/operators/onnx_aionnxpreviewtraining_Momentum.html",
    (ins Float:$alpha, Float:$beta, Str:$mode, Float:$norm_coefficient)>;
def Tandem_NegativeLogLikelihoodLossGradOp : Tandem_DomainOp<"negative_log_likelihood_loss_grad",
    "NegativeLogLikelihoodLossGrad", "tandem", "1",
    "d input of NegativeLogLikelihoodLoss from dY: dY, input, target[, weight] -> d_input",
    "runtime/cpu/ref/Loss.cpp (the derivative of ONNX NegativeLogLikelihoodLoss-13)",
    (ins Str:$reduction, Int:$ignore_index)>;
def Tandem_SoftmaxCrossEntropyLossGradOp : Tandem_DomainOp<"softmax_cross_entropy_loss_grad",
    "SoftmaxCrossEntropyLossGrad", "tandem", "1",
    "d logits of SoftmaxCrossEntropyLoss from dY: dY, log_prob, label[, weight] -> d_logits",
    "ONNX Runtime's training op SoftmaxCrossEntropyLossGrad (com.microsoft-1), the derivative "
      # "of ONNX SoftmaxCrossEntropyLoss-13",
    (ins Str:$reduction, Int:$ignore_index)>;

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

def Tandem_ConvOp : Tandem_OnnxOp<"conv", "Conv", "11", "N-D convolution with groups and dilations",
    (ins Str:$auto_pad, Ints:$dilations, Int:$group, Ints:$kernel_shape, Ints:$pads,
         Ints:$strides)>;
def Tandem_DeformConvOp : Tandem_OnnxOp<"deform_conv", "DeformConv", "19",
    "2-D convolution sampling X bilinearly at the kernel taps moved by `offset`, scaled by `mask`",
    (ins Ints:$dilations, Int:$group, Ints:$kernel_shape, Int:$offset_group, Ints:$pads,
         Ints:$strides)>;
def Tandem_Col2ImOp : Tandem_OnnxOp<"col2im", "Col2Im", "18",
    "sum the column blocks of [N, C * prod(block), L] back into an image of image_shape",
    (ins Ints:$dilations, Ints:$pads, Ints:$strides)>;
def Tandem_ConvTransposeOp : Tandem_OnnxOp<"conv_transpose", "ConvTranspose", "11",
    "N-D transposed convolution",
    (ins Str:$auto_pad, Ints:$dilations, Int:$group, Ints:$kernel_shape, Ints:$output_padding,
         Ints:$output_shape, Ints:$pads, Ints:$strides)>;
def Tandem_MaxPoolOp : Tandem_OnnxOp<"max_pool", "MaxPool", "12", "N-D max pooling (one output)",
    (ins Str:$auto_pad, Int:$ceil_mode, Ints:$dilations, Ints:$kernel_shape, Ints:$pads,
         Int:$storage_order, Ints:$strides)>;
// Not an ONNX operator: the gradient of MaxPool, made by --tandem-autodiff.
def Tandem_MaxPoolGradOp : Tandem_OnnxOp<"max_pool_grad", "MaxPoolGrad", "1",
    "d loss / d X of MaxPool-12",
    (ins Str:$auto_pad, Int:$ceil_mode, Ints:$dilations, Ints:$kernel_shape, Ints:$pads,
         Ints:$strides)> {
  let summary = "Tandem MaxPoolGrad (autodiff): d loss / d X of MaxPool-12";
  let description = [{
    Not an ONNX operator. Operands X (MaxPool's input) and dY (d loss / d MaxPool's result, of
    its shape); attributes those of the MaxPool-12 it differentiates. The result, of X's type,
    is zero except where a window took its maximum: there it is the sum of dY over the windows
    whose maximum that element was (the first of equal maxima, as MaxPool picks).
  }];
}
def Tandem_AveragePoolOp : Tandem_OnnxOp<"average_pool", "AveragePool", "11",
    "N-D average pooling",
    (ins Str:$auto_pad, Int:$ceil_mode, Int:$count_include_pad, Ints:$kernel_shape, Ints:$pads,
         Ints:$strides)>;
def Tandem_GlobalAveragePoolOp : Tandem_OnnxOp<"global_average_pool", "GlobalAveragePool", "1",
    "mean over all spatial dims, kept as size 1">;
def Tandem_GlobalMaxPoolOp : Tandem_OnnxOp<"global_max_pool", "GlobalMaxPool", "1",
    "max over all spatial dims, kept as size 1">;

def Tandem_MaxUnpoolOp : Tandem_OnnxOp<"max_unpool", "MaxUnpool", "11",
    "scatter pooled values to the flat indices MaxPool returned; zeros elsewhere",
    (ins Ints:$kernel_shape, Ints:$pads, Ints:$strides)>;

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

def Tandem_ReduceMeanOp : Tandem_OnnxOp<"reduce_mean", "ReduceMean", "13",
    "mean over `axes` (attribute; all when absent)", (ins Ints:$axes, Int:$keepdims)>;
def Tandem_ReduceMaxOp : Tandem_OnnxOp<"reduce_max", "ReduceMax", "13",
    "max over `axes` (attribute; all when absent)", (ins Ints:$axes, Int:$keepdims)>;
def Tandem_ReduceMinOp : Tandem_OnnxOp<"reduce_min", "ReduceMin", "13",
    "min over `axes` (attribute; all when absent)", (ins Ints:$axes, Int:$keepdims)>;
def Tandem_ReduceL2Op : Tandem_OnnxOp<"reduce_l2", "ReduceL2", "13",
    "square root of the sum of squares over `axes` (attribute; all when absent)",
    (ins Ints:$axes, Int:$keepdims)>;
def Tandem_ReduceSumSquareOp : Tandem_OnnxOp<"reduce_sum_square", "ReduceSumSquare", "13",
    "sum of squares over `axes` (attribute; all when absent)", (ins Ints:$axes, Int:$keepdims)>;
def Tandem_ReduceL1Op : Tandem_OnnxOp<"reduce_l1", "ReduceL1", "13",
    "sum of absolute values over `axes` (attribute; all when absent)",
    (ins Ints:$axes, Int:$keepdims)>;
def Tandem_ReduceProdOp : Tandem_OnnxOp<"reduce_prod", "ReduceProd", "13",
    "product over `axes` (attribute; all when absent)", (ins Ints:$axes, Int:$keepdims)>;
def Tandem_ReduceLogSumOp : Tandem_OnnxOp<"reduce_log_sum", "ReduceLogSum", "13",
    "natural log of the sum over `axes` (attribute; all when absent)",
    (ins Ints:$axes, Int:$keepdims)>;
def Tandem_ReduceLogSumExpOp : Tandem_OnnxOp<"reduce_log_sum_exp", "ReduceLogSumExp", "13",
    "log of the sum of exponentials over `axes` (attribute; all when absent)",
    (ins Ints:$axes, Int:$keepdims)>;
def Tandem_ReduceSumOp : Tandem_OnnxOp<"reduce_sum", "ReduceSum", "13",
    "sum over the axes input (all, or none with noop_with_empty_axes, when absent)",
    (ins Int:$keepdims, Int:$noop_with_empty_axes)>;
def Tandem_ArgMaxOp : Tandem_OnnxOp<"arg_max", "ArgMax", "13", "index of the max along `axis` (i64)",
    (ins Int:$axis, Int:$keepdims, Int:$select_last_index)>;
def Tandem_ArgMinOp : Tandem_OnnxOp<"arg_min", "ArgMin", "13", "index of the min along `axis` (i64)",
    (ins Int:$axis, Int:$keepdims, Int:$select_last_index)>;

def Tandem_TopKOp : Tandem_OnnxOp<"top_k", "TopK", "11",
    "the k largest (or smallest) entries along `axis` and their i64 indices",
    (ins Int:$axis, Int:$largest, Int:$sorted)>;
def Tandem_EinsumOp : Tandem_OnnxOp<"einsum", "Einsum", "12",
    "Einstein summation by `equation` (explicit or implicit output, ellipsis)",
    (ins Str:$equation)>;

//===----------------------------------------------------------------------===//
// Recurrent
//===----------------------------------------------------------------------===//

def Tandem_RNNOp : Tandem_OnnxOp<"rnn", "RNN", "14",
    "Elman RNN over a sequence, forward, reverse or bidirectional (results Y, Y_h)",
    (ins Floats:$activation_alpha, Floats:$activation_beta, Strs:$activations,
         Float:$clip, Str:$direction, Int:$hidden_size, Int:$layout)>;
def Tandem_GRUOp : Tandem_OnnxOp<"gru", "GRU", "14",
    "GRU over a sequence, gates z, r, h (results Y, Y_h)",
    (ins Floats:$activation_alpha, Floats:$activation_beta, Strs:$activations,
         Float:$clip, Str:$direction, Int:$hidden_size, Int:$layout, Int:$linear_before_reset)>;
def Tandem_LSTMOp : Tandem_OnnxOp<"lstm", "LSTM", "14",
    "LSTM over a sequence, gates i, o, f, c, optional peepholes (results Y, Y_h, Y_c)",
    (ins Floats:$activation_alpha, Floats:$activation_beta, Strs:$activations,
         Float:$clip, Str:$direction, Int:$hidden_size, Int:$input_forget, Int:$layout)>;

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

def Tandem_FlattenOp : Tandem_OnnxOp<"flatten", "Flatten", "13",
    "2-D view: dims before `axis` and from `axis` on", (ins Int:$axis)>;
def Tandem_ReshapeOp : Tandem_OnnxOp<"reshape", "Reshape", "14",
    "reshape to the shape input (0 copies a dim unless allowzero, -1 infers one)",
    (ins Int:$allowzero)>;
def Tandem_TransposeOp : Tandem_OnnxOp<"transpose", "Transpose", "13",
    "permute dims by `perm` (reverse when absent)", (ins Ints:$perm)>;
def Tandem_SqueezeOp : Tandem_OnnxOp<"squeeze", "Squeeze", "13",
    "remove size-1 dims (the axes input, or all)">;
def Tandem_UnsqueezeOp : Tandem_OnnxOp<"unsqueeze", "Unsqueeze", "13",
    "insert size-1 dims at the axes input">;
def Tandem_ConcatOp : Tandem_OnnxOp<"concat", "Concat", "13", "concatenate inputs along `axis`",
    (ins Int:$axis)>;
def Tandem_SplitOp : Tandem_OnnxOp<"split", "Split", "13",
    "split along `axis` by the split input, or equally into the number of outputs",
    (ins Int:$axis, Int:$num_outputs)>;
def Tandem_SliceOp : Tandem_OnnxOp<"slice", "Slice", "13",
    "slice by the starts, ends, axes, steps inputs (clamped, negative steps allowed)">;
def Tandem_GatherOp : Tandem_OnnxOp<"gather", "Gather", "13",
    "take entries along `axis` at the indices input (negative indices count from the end)",
    (ins Int:$axis)>;
def Tandem_ShapeOp : Tandem_OnnxOp<"shape", "Shape", "15",
    "the input's shape as i64, dims [start, end)", (ins Int:$start, Int:$end)>;
def Tandem_ConstantOfShapeOp : Tandem_OnnxOp<"constant_of_shape", "ConstantOfShape", "9",
    "tensor of the shape input filled with `value` (f32 0 when absent)", (ins TensorAttr:$value)>;
def Tandem_EyeLikeOp : Tandem_OnnxOp<"eye_like", "EyeLike", "9",
    "2-D ones on diagonal k, zeros elsewhere, of the input's shape and `dtype`",
    (ins Int:$dtype, Int:$k)>;
def Tandem_RangeOp : Tandem_OnnxOp<"range", "Range", "11",
    "start, start + delta, ... up to limit (exclusive); the three are scalars">;
def Tandem_SizeOp : Tandem_OnnxOp<"size", "Size", "13", "the input's element count (i64 scalar)">;
def Tandem_HannWindowOp : Tandem_OnnxOp<"hann_window", "HannWindow", "17",
    "Hann window of the size input's length, periodic (default) or symmetric",
    (ins Int:$output_datatype, Int:$periodic)>;
def Tandem_HammingWindowOp : Tandem_OnnxOp<"hamming_window", "HammingWindow", "17",
    "Hamming window (alpha 25/46) of the size input's length, periodic (default) or symmetric",
    (ins Int:$output_datatype, Int:$periodic)>;
def Tandem_BlackmanWindowOp : Tandem_OnnxOp<"blackman_window", "BlackmanWindow", "17",
    "Blackman window of the size input's length, periodic (default) or symmetric",
    (ins Int:$output_datatype, Int:$periodic)>;
def Tandem_DFTOp : Tandem_OnnxOp<"dft", "DFT", "17",
    "discrete Fourier transform along `axis` of real [..., 1] or complex [..., 2] input, "
    "optional dft_length (zero-padded or truncated), `inverse`, `onesided`",
    (ins Int:$axis, Int:$inverse, Int:$onesided)>;
def Tandem_STFTOp : Tandem_OnnxOp<"stft", "STFT", "17",
    "short-time Fourier transform: frames of frame_length every frame_step samples, times the "
    "optional window; [batch, frames, bins, 2]", (ins Int:$onesided)>;
def Tandem_MelWeightMatrixOp : Tandem_OnnxOp<"mel_weight_matrix", "MelWeightMatrix", "17",
    "triangular mel filter bank [dft_length / 2 + 1, num_mel_bins] of output_datatype (default f32)",
    (ins Int:$output_datatype)>;
def Tandem_ExpandOp : Tandem_OnnxOp<"expand", "Expand", "13",
    "broadcast to the shape input (bidirectionally)">;
def Tandem_PadOp : Tandem_OnnxOp<"pad", "Pad", "13",
    "pad by the pads input; mode constant, reflect or edge", (ins Str:$mode)>;
def Tandem_TileOp : Tandem_OnnxOp<"tile", "Tile", "13", "repeat along each dim by the repeats input">;
def Tandem_TriluOp : Tandem_OnnxOp<"trilu", "Trilu", "14",
    "upper (default) or lower triangle of the last two dims from diagonal k (input 1, default 0)",
    (ins Int:$upper)>;
def Tandem_CumSumOp : Tandem_OnnxOp<"cum_sum", "CumSum", "14",
    "running sums along the axis input; exclusive leaves out each element, reverse runs backwards",
    (ins Int:$exclusive, Int:$reverse)>;

def Tandem_GatherElementsOp : Tandem_OnnxOp<"gather_elements", "GatherElements", "13",
    "y[i][j] = data[index[i][j]][j] along `axis`; the result has the indices' shape",
    (ins Int:$axis)>;
def Tandem_GatherNDOp : Tandem_OnnxOp<"gather_nd", "GatherND", "13",
    "gather slices of data at index tuples (the indices' last dim) after `batch_dims`",
    (ins Int:$batch_dims)>;
def Tandem_ScatterElementsOp : Tandem_OnnxOp<"scatter_elements", "ScatterElements", "16",
    "copy of data with updates written (or reduced: add, mul) at indices along `axis`",
    (ins Int:$axis, Str:$reduction)>;
def Tandem_ScatterNDOp : Tandem_OnnxOp<"scatter_nd", "ScatterND", "16",
    "copy of data with update slices written (or reduced: add, mul) at index tuples",
    (ins Str:$reduction)>;
def Tandem_TensorScatterOp : Tandem_OnnxOp<"tensor_scatter", "TensorScatter", "24",
    "copy of past_cache with update written along `axis` from each batch's write index "
    "(mode linear, or circular: modulo the cache length)",
    (ins Int:$axis, Str:$mode)>;
// Tandem's own: PyTorch's nn.EmbeddingBag, which torch.onnx writes as a Loop over the bags
// (frontend/EmbeddingBagLoop.h recognises it at import).
def Tandem_EmbeddingBagOp : Tandem_DomainOp<"embedding_bag", "EmbeddingBag", "tandem", "1",
    "per bag m, reduce (mode sum, mean or max) the weight rows at indices[starts[m]:ends[m]], "
      # "each times per_sample_weights[j] when given: weight, indices, starts, ends"
      # "[, per_sample_weights] -> [M, D]",
    "weight f32/f64 [V, D]; indices i32/i64 [L]; starts and ends i32/i64 [M]; "
      # "per_sample_weights [L] of weight's dtype. Each bag's range is Slice's on [0, L) "
      # "(a negative start or end counts from L, then both are clamped to [0, L]); an index "
      # "counts from V when negative and outside [-V, V) is an error. An empty bag gives 0 "
      # "(sum), NaN (mean) or -inf (max), as ReduceSum, ReduceMean and ReduceMax over nothing; "
      # "a NaN row wins the max. compiler/shapes/Indexing.cpp, runtime/cpu/ref/EmbeddingBag.cpp",
    (ins Str:$mode)>;
def Tandem_EmbeddingBagGradOp : Tandem_DomainOp<"embedding_bag_grad", "EmbeddingBagGrad", "tandem", "1",
    "d loss / d weight of EmbeddingBag: weight, indices, starts, ends, dY [M, D]"
      # "[, per_sample_weights] -> [V, D]",
    "--tandem-autodiff's rule for EmbeddingBag: zeros of weight's shape, and for each bag m and "
      # "index j of it, dY[m] added into row indices[j], times per_sample_weights[j] when given "
      # "and divided by the bag's length for mode mean; for max, dY[m, d] goes to the row that "
      # "gave the max of column d, the one the forward kept (the first of equal maxima, the first "
      # "NaN; none for an empty bag). compiler/shapes/Indexing.cpp, runtime/cpu/ref/EmbeddingBag.cpp",
    (ins Str:$mode)>;
def Tandem_OneHotOp : Tandem_OnnxOp<"one_hot", "OneHot", "11",
    "values[1] at the indices along a new `axis` of size depth, values[0] elsewhere",
    (ins Int:$axis)>;
def Tandem_DepthToSpaceOp : Tandem_OnnxOp<"depth_to_space", "DepthToSpace", "13",
    "move channel blocks into blocksize x blocksize spatial tiles (mode DCR or CRD)",
    (ins Int:$blocksize, Str:$mode)>;
def Tandem_SpaceToDepthOp : Tandem_OnnxOp<"space_to_depth", "SpaceToDepth", "13",
    "move blocksize x blocksize spatial tiles into channels", (ins Int:$blocksize)>;
def Tandem_ReverseSequenceOp : Tandem_OnnxOp<"reverse_sequence", "ReverseSequence", "10",
    "reverse the first sequence_lens[b] entries along `time_axis` of each batch entry b",
    (ins Int:$batch_axis, Int:$time_axis)>;
def Tandem_CompressOp : Tandem_OnnxOp<"compress", "Compress", "11",
    "the slices along `axis` (or elements of the flattened input) where condition is true",
    (ins Int:$axis)>;
def Tandem_NonZeroOp : Tandem_OnnxOp<"non_zero", "NonZero", "13",
    "indices of the non-zero elements, i64 [rank, count], row-major order">;
def Tandem_UniqueOp : Tandem_OnnxOp<"unique", "Unique", "11",
    "unique elements (or slices along `axis`) with first indices, inverse indices and counts",
    (ins Int:$axis, Int:$sorted)>;
def Tandem_NonMaxSuppressionOp : Tandem_OnnxOp<"non_max_suppression", "NonMaxSuppression", "11",
    "per batch and class, greedily keep boxes by score whose IoU with kept ones is small",
    (ins Int:$center_point_box)>;

//===----------------------------------------------------------------------===//
// Control flow: each subgraph is compiled ahead of time, by the importer, into a CPU plan of its
// own, held serialized in a string attribute (a GRAPH attribute in the plan). Outer-scope values
// a subgraph reads are explicit: extra operands after the ONNX ones, passed to every subgraph
// after its ONNX inputs (`num_captures` of them for Loop and Scan; every operand after If's
// condition). Tandem runs the op on the CPU as a whole (runtime/cpu/ControlFlow.h).
//===----------------------------------------------------------------------===//

def Tandem_IfOp : Tandem_OnnxOp<"if", "If", "16",
    "run then_branch or else_branch on the boolean condition; results are the branch's",
    (ins Str:$then_branch, Str:$else_branch)>;
def Tandem_LoopOp : Tandem_OnnxOp<"loop", "Loop", "16",
    "run body while iter < M and cond: loop-carried values, per-iteration scan outputs stacked",
    (ins Str:$body, Int:$num_captures)>;
def Tandem_ScanOp : Tandem_OnnxOp<"scan", "Scan", "16",
    "run body over slices of the scan inputs along their axes, carrying state, stacking outputs",
    (ins Str:$body, Int:$num_scan_inputs, Ints:$scan_input_axes, Ints:$scan_input_directions,
         Ints:$scan_output_axes, Ints:$scan_output_directions, Int:$num_captures)>;

// Tandem's own: the ops downstream of a value-dependent result size (NonZero, Compress, Unique,
// NonMaxSuppression, TopK on a computed K), outlined by --tandem-outline-dynamic. `body` is their
// plan (values of unknown dims allowed); operands are the outer values it reads, results the
// graph outputs it computes, whose dims may be known only at run time.
def Tandem_DynamicRegionOp : Tandem_DomainOp<"dynamic_region", "DynamicRegion", "tandem", "1",
    "run ops whose shapes depend on computed values eagerly, inferring shapes at run time",
    "runtime/DynamicRegion.h (the runtime) and --tandem-outline-dynamic in passes/Passes.td (what is outlined)",
    (ins Str:$body)>;

//===----------------------------------------------------------------------===//
// Image sampling
//===----------------------------------------------------------------------===//

def Tandem_ResizeOp : Tandem_OnnxOp<"resize", "Resize", "13",
    "resize by scales or to sizes: nearest, linear or cubic interpolation; also Resize-18's "
    "antialias (a linear or cubic filter widened by 1 / scale when downsampling) and -19's "
    "half_pixel_symmetric coordinates (its axes input is made full-rank at import)",
    (ins Int:$antialias, Str:$coordinate_transformation_mode, Float:$cubic_coeff_a,
         Int:$exclude_outside, Float:$extrapolation_value, Str:$mode, Str:$nearest_mode)>;
def Tandem_GridSampleOp : Tandem_OnnxOp<"grid_sample", "GridSample", "16",
    "sample X at the normalised (x, y) positions of grid: bilinear, nearest or bicubic",
    (ins Int:$align_corners, Str:$mode, Str:$padding_mode)>;
def Tandem_RoiAlignOp : Tandem_OnnxOp<"roi_align", "RoiAlign", "16",
    "pool each region of interest to output_height x output_width by bilinear samples",
    (ins Str:$coordinate_transformation_mode, Str:$mode, Int:$output_height,
         Int:$output_width, Int:$sampling_ratio, Float:$spatial_scale)>;

//===----------------------------------------------------------------------===//
// Ops that are not ONNX operators
//===----------------------------------------------------------------------===//

def Tandem_ConstantOp : Tandem_Op<"constant",
    [Pure, ConstantLike, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "a constant tensor (ONNX Constant-13 and initializers)";
  let description = [{
    Weights, initializers and ONNX Constant nodes. The importer turns Constant's value_float,
    value_ints, ... into `value`. Constants live outside the arenas: the runtime loads them once.

    ```mlir
    %w = tandem.constant dense<1.0> : tensor<4x3xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let extraClassDeclaration = [{
    static ::llvm::StringRef getOnnxName() { return "Constant"; }
  }];
}

def Tandem_NoneOp : Tandem_Op<"none", [Pure]> {
  let summary = "an absent optional operand";
  let description = [{
    Stands for a skipped optional ONNX input followed by a present one, e.g. Clip's min when
    only max is given: `tandem.clip %x, %none, %max`.
  }];
  let results = (outs NoneType:$output);
  let assemblyFormat = "attr-dict";
  let extraClassDeclaration = [{
    static ::llvm::StringRef getOnnxName() { return ""; }
  }];
}

def Tandem_CopyOp : Tandem_Op<"copy", [Pure, SameOperandsAndResultType]> {
  let summary = "transfer of a value between devices";
  let description = [{
    Inserted by --tandem-insert-transfers: one copy per (value, destination device), placed
    right after the producer so every consumer on `to` reads the copy.

    ```mlir
    %1 = tandem.copy %0 {from = "cpu", to = "cuda:0"} : tensor<8xf32>
    ```
  }];
  let arguments = (ins AnyTensor:$input, StrAttr:$from, StrAttr:$to);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let extraClassDeclaration = [{
    static ::llvm::StringRef getOnnxName() { return "Copy"; }
  }];
}

def Tandem_FusedOp : Tandem_Op<"fused", [Pure, IsolatedFromAbove]> {
  let summary = "a fusion group: ops of one device run as one kernel (DESIGN §2 FusionGroup)";
  let description = [{
    Created by --tandem-fuse after placement. The region's block arguments are the group's
    external inputs (the operands, in order); its ops are ordinary tandem ops of one device;
    `tandem.yield` returns the group's outputs (the results, in order). `kind` says how the
    runtime executes it: `conv-epilogue` / `gemm-epilogue` (the first body op is a Conv, Gemm
    or MatMul; every later op is one post-op applied to the running result: a residual Add as
    oneDNN's `sum`, or an element-wise activation), or `elementwise` (one loop over memory,
    several outputs allowed). Every body result has the type of the first output.

    ```mlir
    %y = tandem.fused "conv-epilogue" (%x, %w, %b, %r) {device = "cpu"} :
        (tensor<1x8x4x4xf32>, tensor<8x8x3x3xf32>, tensor<8xf32>, tensor<1x8x4x4xf32>)
        -> tensor<1x8x4x4xf32> {
    ^bb0(%a: tensor<1x8x4x4xf32>, %b0: tensor<8x8x3x3xf32>, %b1: tensor<8xf32>, %b2: tensor<1x8x4x4xf32>):
      %c = tandem.conv %a, %b0, %b1 {pads = [1, 1, 1, 1]} : ...
      %s = tandem.add %c, %b2 : ...
      %t = tandem.relu %s : ...
      tandem.yield %t : tensor<1x8x4x4xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyTensor>:$inputs, StrAttr:$kind);
  let results = (outs Variadic<AnyTensor>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$kind `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    static ::llvm::StringRef getOnnxName() { return "Fused"; }
  }];
}

def Tandem_YieldOp : Tandem_Op<"yield", [Pure, Terminator, HasParent<"FusedOp">]> {
  let summary = "the outputs of a tandem.fused region";
  let arguments = (ins Variadic<AnyTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
  let extraClassDeclaration = [{
    static ::llvm::StringRef getOnnxName() { return ""; }
  }];
}

#endif  // TANDEM_OPS_TD

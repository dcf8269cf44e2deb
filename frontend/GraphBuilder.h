// The public C++ graph API: build a tandem model op by op, with ONNX opset-17 semantics.
//
//   tandem::GraphBuilder g;
//   tandem::Value x = g.input("x", tandem::DType::F32, {tandem::Dim("N"), 1, 28, 28});
//   tandem::Value y = g.relu(g.conv(x, g.constant(w), g.constant(b)));
//   g.output(g.softmax(y), "y");
//   std::string err;
//   auto module = g.finish(&err);           // null module + err on the first build error
//   tandem::compileModule(*module, options, &result);
//
// Every op is checked as it is built: result types are inferred by the op's shape function, and
// the first error is recorded with the C++ call site ("mnist.cpp:42: Conv: input 1 (W) has 3
// input channels but X has 1"). After an error later calls do nothing and return an invalid
// Value, so a build can be written straight through and checked once with ok()/finish().
// Semantics, operand orders, attribute names and defaults are ONNX opset 17
// (https://onnx.ai/onnx/operators/); each method names the operator it builds.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Value.h"
#include "runtime/Attr.h"
#include "runtime/DType.h"
#include "runtime/Tensor.h"

namespace mlir { class MLIRContext; }

namespace tandem {

/// Where a builder call was made; defaulted at each method so errors and op locations name the
/// user's file and line, not the builder's.
struct SourceLoc {
  const char* file = "";
  int line = 0;
  static SourceLoc current(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return SourceLoc{file, line};
  }
};

/// One dimension of a graph input: a size (>= 0), or a symbolic dim named like ONNX's dim_param
/// ("N"), bound at compile time (CompileOptions::dimBindings). -1 is symbolic without a name.
struct Dim {
  int64_t value = -1;
  std::string param;
  Dim(int64_t v) : value(v) {}               // NOLINT: implicit so {Dim("N"), 1, 28, 28} reads
  Dim(const char* p) : param(p) {}            // NOLINT
  Dim(std::string p) : param(std::move(p)) {} // NOLINT
};

/// A tensor value in the graph being built. Cheap to copy. An invalid Value comes back from any
/// call made after the builder recorded an error.
class Value {
 public:
  Value() = default;
  explicit Value(mlir::Value v) : v_(v) {}
  bool valid() const { return (bool)v_; }
  explicit operator bool() const { return valid(); }
  /// Element type; Undefined for an invalid Value.
  DType dtype() const;
  /// Dims; -1 for a dim unknown at build time (symbolic batch, data-dependent shape); empty for
  /// an invalid Value.
  std::vector<int64_t> shape() const;
  int64_t rank() const { return (int64_t)shape().size(); }
  /// The underlying MLIR value (for code that extends the builder).
  mlir::Value raw() const { return v_; }

 private:
  mlir::Value v_;
};

// ---- Per-op options (ONNX attribute names in snake_case become camelCase; defaults are ONNX's) ----

/// ONNX Conv-11. Empty vectors mean the ONNX default (strides/dilations 1, pads 0, kernel shape
/// from W). autoPad: "NOTSET" (use pads), "SAME_UPPER", "SAME_LOWER", "VALID".
struct ConvOptions {
  std::vector<int64_t> kernelShape;
  std::vector<int64_t> strides;
  std::vector<int64_t> pads;       // [x1_begin, x2_begin, ..., x1_end, x2_end, ...]
  std::vector<int64_t> dilations;
  int64_t group = 1;
  std::string autoPad = "NOTSET";
};

/// ONNX ConvTranspose-11: ConvOptions plus outputPadding and outputShape.
struct ConvTransposeOptions : ConvOptions {
  std::vector<int64_t> outputPadding;
  std::vector<int64_t> outputShape;
};

/// ONNX MaxPool-12 / AveragePool-11. kernelShape is required.
struct PoolOptions {
  std::vector<int64_t> kernelShape;
  std::vector<int64_t> strides;
  std::vector<int64_t> pads;
  std::vector<int64_t> dilations;  // MaxPool only
  bool ceilMode = false;
  bool countIncludePad = false;    // AveragePool only
  std::string autoPad = "NOTSET";
};

/// ONNX Gemm-13: Y = alpha * A' * B' + beta * C.
struct GemmOptions {
  float alpha = 1.0f;
  float beta = 1.0f;
  bool transA = false;
  bool transB = false;
};

class GraphBuilder {
 public:
  /// A builder with its own MLIR context. The module finish() returns lives in that context, so
  /// the builder must outlive the module.
  GraphBuilder();
  /// A builder in `ctx` (tandem and func dialects are loaded into it).
  explicit GraphBuilder(mlir::MLIRContext* ctx);
  ~GraphBuilder();
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  mlir::MLIRContext* context() const;

  // ---- State and errors ----

  /// False once any call failed; error() is then "file:line: Op: reason" of the first failure.
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  /// Ends the build: adds the return of every output() in order. Returns the module, or null
  /// with *error set (the first build error; "no outputs" if output() was never called).
  /// The builder accepts no calls afterwards.
  mlir::OwningOpRef<mlir::ModuleOp> finish(std::string* error);

  /// Pins the ops created from now on to `device` ("cpu", "cuda:0"; "" to stop pinning). The pin
  /// is the op's `device` attribute, which the placer treats as a user constraint.
  void setDevice(const std::string& device) { device_ = device; }
  const std::string& device() const { return device_; }

  // ---- Graph inputs, outputs, constants ----

  /// A graph input (an argument of @main) of `dtype` and `dims`; symbolic dims (Dim("N") or -1)
  /// are bound when compiling. Errors: duplicate name, unsupported dtype (f16), dim < -1.
  Value input(const std::string& name, DType dtype, const std::vector<Dim>& dims,
              SourceLoc loc = SourceLoc::current());
  /// Marks `v` as a graph output called `name` (outputs keep the order of these calls).
  void output(Value v, const std::string& name, SourceLoc loc = SourceLoc::current());
  /// A constant holding a copy of `t` (weights, shape operands).
  Value constant(const Tensor& t, SourceLoc loc = SourceLoc::current());
  /// A constant named like an ONNX initializer: `name` is the op's location (mlir::NameLoc),
  /// which training (CompileOptions::Training) takes as the parameter's name: the forward
  /// plan's input, the Trainer's variable and checkpoint entry. Training needs every weight and
  /// bias named, uniquely. Errors: empty name, a name already given to an input or a
  /// namedConstant; then as constant().
  Value namedConstant(const std::string& name, const Tensor& t,
                      SourceLoc loc = SourceLoc::current());
  /// A constant of f32 values with `shape` (values.size() must equal the element count).
  Value constant(const std::vector<float>& values, const Shape& shape,
                 SourceLoc loc = SourceLoc::current());
  /// A 1-D i64 constant (shapes, axes, pads).
  Value constantInts(const std::vector<int64_t>& values, SourceLoc loc = SourceLoc::current());
  /// A 0-D f32 constant.
  Value scalar(float v, SourceLoc loc = SourceLoc::current());

  // ---- Elementwise binary (numpy broadcasting; A and B of one dtype unless noted) ----

  Value add(Value a, Value b, SourceLoc loc = SourceLoc::current());  // ONNX Add-14
  Value sub(Value a, Value b, SourceLoc loc = SourceLoc::current());  // ONNX Sub-14
  Value mul(Value a, Value b, SourceLoc loc = SourceLoc::current());  // ONNX Mul-14
  Value div(Value a, Value b, SourceLoc loc = SourceLoc::current());  // ONNX Div-14
  /// ONNX Pow-15: x ^ y; y may have another numeric dtype; result has x's dtype.
  Value pow(Value x, Value y, SourceLoc loc = SourceLoc::current());
  /// ONNX Min-13 / Max-13 / Sum-13 over 1..N inputs.
  Value min(const std::vector<Value>& xs, SourceLoc loc = SourceLoc::current());
  Value max(const std::vector<Value>& xs, SourceLoc loc = SourceLoc::current());
  Value sum(const std::vector<Value>& xs, SourceLoc loc = SourceLoc::current());
  /// ONNX Equal-13 / Less-13 / Greater-13: bool result.
  Value equal(Value a, Value b, SourceLoc loc = SourceLoc::current());
  Value less(Value a, Value b, SourceLoc loc = SourceLoc::current());
  Value greater(Value a, Value b, SourceLoc loc = SourceLoc::current());
  /// ONNX Where-16: cond (bool) ? x : y, all three broadcast.
  Value where(Value cond, Value x, Value y, SourceLoc loc = SourceLoc::current());

  // ---- Elementwise unary and activations (result has the input's shape and dtype) ----

  Value sqrt(Value x, SourceLoc loc = SourceLoc::current());        // ONNX Sqrt-13
  Value exp(Value x, SourceLoc loc = SourceLoc::current());         // ONNX Exp-13
  Value log(Value x, SourceLoc loc = SourceLoc::current());         // ONNX Log-13
  Value neg(Value x, SourceLoc loc = SourceLoc::current());         // ONNX Neg-13
  Value abs(Value x, SourceLoc loc = SourceLoc::current());         // ONNX Abs-13
  Value reciprocal(Value x, SourceLoc loc = SourceLoc::current());  // ONNX Reciprocal-13
  Value erf(Value x, SourceLoc loc = SourceLoc::current());         // ONNX Erf-13
  Value relu(Value x, SourceLoc loc = SourceLoc::current());        // ONNX Relu-14
  Value sigmoid(Value x, SourceLoc loc = SourceLoc::current());     // ONNX Sigmoid-13
  Value tanh(Value x, SourceLoc loc = SourceLoc::current());        // ONNX Tanh-13
  Value softplus(Value x, SourceLoc loc = SourceLoc::current());    // ONNX Softplus-1
  Value identity(Value x, SourceLoc loc = SourceLoc::current());    // ONNX Identity-16
  /// ONNX LeakyRelu-16: x < 0 ? alpha * x : x.
  Value leakyRelu(Value x, float alpha = 0.01f, SourceLoc loc = SourceLoc::current());
  /// ONNX PRelu-16: x < 0 ? slope * x : x, slope broadcast unidirectionally to x.
  Value prelu(Value x, Value slope, SourceLoc loc = SourceLoc::current());
  /// ONNX Elu-6: x < 0 ? alpha * (exp(x) - 1) : x.
  Value elu(Value x, float alpha = 1.0f, SourceLoc loc = SourceLoc::current());
  /// ONNX Selu-6: gamma * (x > 0 ? x : alpha * (exp(x) - 1)).
  Value selu(Value x, float alpha = 1.67326319217681884765625f,
             float gamma = 1.05070102214813232421875f, SourceLoc loc = SourceLoc::current());
  /// ONNX HardSigmoid-6: max(0, min(1, alpha * x + beta)).
  Value hardSigmoid(Value x, float alpha = 0.2f, float beta = 0.5f,
                    SourceLoc loc = SourceLoc::current());
  /// ONNX Clip-13: clamp to [min, max]; absent bounds do not clamp. Bounds are 0-D of x's dtype.
  Value clip(Value x, std::optional<Value> min = {}, std::optional<Value> max = {},
             SourceLoc loc = SourceLoc::current());
  /// Convenience: Clip with f32 scalar bounds made into constants (x must be f32).
  Value clip(Value x, float min, float max, SourceLoc loc = SourceLoc::current());
  /// ONNX Softmax-13 / LogSoftmax-13 along one axis (negative counts from the end).
  Value softmax(Value x, int64_t axis = -1, SourceLoc loc = SourceLoc::current());
  Value logSoftmax(Value x, int64_t axis = -1, SourceLoc loc = SourceLoc::current());
  /// ONNX Cast-13 to `to`.
  Value cast(Value x, DType to, SourceLoc loc = SourceLoc::current());

  // ---- Matrix products, convolution, pooling, normalisation ----

  /// ONNX Conv-11. x: [N, C, D1..Dn], w: [M, C/group, k1..kn], b: [M]. Result [N, M, O1..On].
  Value conv(Value x, Value w, std::optional<Value> b = {}, const ConvOptions& opts = {},
             SourceLoc loc = SourceLoc::current());
  /// ONNX ConvTranspose-11. w: [C, M/group, k1..kn], b: [M].
  Value convTranspose(Value x, Value w, std::optional<Value> b = {},
                      const ConvTransposeOptions& opts = {}, SourceLoc loc = SourceLoc::current());
  /// ONNX Gemm-13. a: [M, K] ([K, M] if transA), b: [K, N] ([N, K] if transB), c broadcast to
  /// [M, N] unidirectionally.
  Value gemm(Value a, Value b, std::optional<Value> c = {}, const GemmOptions& opts = {},
             SourceLoc loc = SourceLoc::current());
  /// A Keras Dense layer without activation: x [N, in] · w [in, out] + b [out] (a Gemm).
  Value dense(Value x, Value w, std::optional<Value> b = {}, SourceLoc loc = SourceLoc::current());
  /// ONNX MatMul-13: numpy matmul (1-D operands promoted, batch dims broadcast).
  Value matMul(Value a, Value b, SourceLoc loc = SourceLoc::current());
  /// ONNX MaxPool-12 (one output) and AveragePool-11 over x [N, C, D1..Dn].
  Value maxPool(Value x, const PoolOptions& opts, SourceLoc loc = SourceLoc::current());
  Value averagePool(Value x, const PoolOptions& opts, SourceLoc loc = SourceLoc::current());
  /// ONNX GlobalAveragePool-1 / GlobalMaxPool-1: [N, C, D...] → [N, C, 1...].
  Value globalAveragePool(Value x, SourceLoc loc = SourceLoc::current());
  Value globalMaxPool(Value x, SourceLoc loc = SourceLoc::current());
  /// ONNX BatchNormalization-15, inference: (x - mean) / sqrt(var + epsilon) * scale + bias,
  /// per channel (dim 1); scale, bias, mean, var: [C].
  Value batchNormalization(Value x, Value scale, Value bias, Value mean, Value var,
                           float epsilon = 1e-5f, SourceLoc loc = SourceLoc::current());
  /// ONNX LayerNormalization-17 over the dims from `axis` on; scale/bias broadcast to them.
  Value layerNormalization(Value x, Value scale, std::optional<Value> bias = {}, int64_t axis = -1,
                           float epsilon = 1e-5f, SourceLoc loc = SourceLoc::current());
  /// ONNX Dropout-13 for inference: the identity (ratio kept for the record; it must be in
  /// [0, 1)).
  Value dropout(Value x, float ratio = 0.5f, SourceLoc loc = SourceLoc::current());

  // ---- Shape manipulation ----

  /// ONNX Flatten-13: [d0..dn] → [d0*..*d(axis-1), d(axis)*..*dn].
  Value flatten(Value x, int64_t axis = 1, SourceLoc loc = SourceLoc::current());
  /// ONNX Reshape-14 to a constant shape (0 copies the input dim unless allowZero; -1 infers).
  Value reshape(Value x, const std::vector<int64_t>& shape, bool allowZero = false,
                SourceLoc loc = SourceLoc::current());
  /// ONNX Reshape-14 to a computed shape (1-D i64 value).
  Value reshape(Value x, Value shape, bool allowZero = false, SourceLoc loc = SourceLoc::current());
  /// ONNX Transpose-13; empty perm reverses the dims.
  Value transpose(Value x, const std::vector<int64_t>& perm = {},
                  SourceLoc loc = SourceLoc::current());
  /// ONNX Squeeze-13: removes the size-1 dims at `axes` (all size-1 dims when empty).
  Value squeeze(Value x, const std::vector<int64_t>& axes = {},
                SourceLoc loc = SourceLoc::current());
  /// ONNX Unsqueeze-13: inserts size-1 dims at `axes` (positions in the result).
  Value unsqueeze(Value x, const std::vector<int64_t>& axes, SourceLoc loc = SourceLoc::current());
  /// ONNX Concat-13 along `axis`.
  Value concat(const std::vector<Value>& xs, int64_t axis, SourceLoc loc = SourceLoc::current());
  /// ONNX Split-13 along `axis` into parts of the sizes in `split` (one result each).
  std::vector<Value> split(Value x, int64_t axis, const std::vector<int64_t>& split,
                           SourceLoc loc = SourceLoc::current());
  /// ONNX Split-13 along `axis` into `numOutputs` equal parts (split input absent; the dim
  /// must divide evenly, as Split-13 requires).
  std::vector<Value> splitEqual(Value x, int64_t axis, int numOutputs,
                                SourceLoc loc = SourceLoc::current());
  /// ONNX Slice-13 with constant starts/ends/axes/steps (clamped; negative = from the end).
  Value slice(Value x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
              const std::vector<int64_t>& axes = {}, const std::vector<int64_t>& steps = {},
              SourceLoc loc = SourceLoc::current());
  /// ONNX Gather-13: entries of x along `axis` at `indices` (i32/i64, negative from the end).
  Value gather(Value x, Value indices, int64_t axis = 0, SourceLoc loc = SourceLoc::current());
  /// Tandem's EmbeddingBag (PyTorch's nn.EmbeddingBag): per bag m, the sum, mean or max
  /// (`mode`) of the weight [V, D] rows at indices[starts[m] : ends[m]] (indices [L], starts and
  /// ends [M], i32/i64; Slice's bounds), each times per_sample_weights[j] [L] when given ->
  /// [M, D]. An empty bag gives 0 (sum), NaN (mean), -inf (max). compiler/TandemOps.td.
  Value embeddingBag(Value weight, Value indices, Value starts, Value ends,
                     const std::string& mode = "sum", std::optional<Value> perSampleWeights = {},
                     SourceLoc loc = SourceLoc::current());
  /// ONNX Shape-15: the dims [start, end) of x as 1-D i64 (end absent = rank).
  Value shapeOf(Value x, int64_t start = 0, std::optional<int64_t> end = {},
                SourceLoc loc = SourceLoc::current());
  /// ONNX ConstantOfShape-9: a tensor of `shape` filled with `value` (a 1-element tensor; f32 0
  /// when undefined).
  Value constantOfShape(const std::vector<int64_t>& shape, const Tensor& value = Tensor(),
                        SourceLoc loc = SourceLoc::current());
  /// ONNX Expand-13: broadcast x to `shape` (bidirectionally).
  Value expand(Value x, const std::vector<int64_t>& shape, SourceLoc loc = SourceLoc::current());
  /// ONNX Pad-13: pads [x1_begin, x2_begin, ..., x1_end, ...]; mode "constant", "reflect",
  /// "edge"; value fills for "constant" (converted to x's dtype).
  Value pad(Value x, const std::vector<int64_t>& pads, const std::string& mode = "constant",
            double value = 0.0, SourceLoc loc = SourceLoc::current());
  /// ONNX Tile-13: repeat each dim `repeats[i]` times.
  Value tile(Value x, const std::vector<int64_t>& repeats, SourceLoc loc = SourceLoc::current());

  // ---- Reductions (empty axes = all dims) ----

  Value reduceMean(Value x, const std::vector<int64_t>& axes = {}, bool keepDims = true,
                   SourceLoc loc = SourceLoc::current());  // ONNX ReduceMean-13
  Value reduceSum(Value x, const std::vector<int64_t>& axes = {}, bool keepDims = true,
                  SourceLoc loc = SourceLoc::current());   // ONNX ReduceSum-13
  Value reduceMax(Value x, const std::vector<int64_t>& axes = {}, bool keepDims = true,
                  SourceLoc loc = SourceLoc::current());   // ONNX ReduceMax-13
  Value reduceMin(Value x, const std::vector<int64_t>& axes = {}, bool keepDims = true,
                  SourceLoc loc = SourceLoc::current());   // ONNX ReduceMin-13
  /// ONNX ArgMax-13: i64 indices of the maxima along `axis`.
  Value argMax(Value x, int64_t axis = 0, bool keepDims = true, bool selectLastIndex = false,
               SourceLoc loc = SourceLoc::current());

  // ---- Any op by ONNX name (ops without a method, or attributes built at run time) ----

  /// Builds ONNX op `opType` (one of tandem's ops) with `inputs` in ONNX order (an invalid Value
  /// marks a skipped optional input) and `attrs` by ONNX name. Returns `numOutputs` results.
  std::vector<Value> op(const std::string& opType, const std::vector<Value>& inputs,
                        const AttrMap& attrs = {}, unsigned numOutputs = 1,
                        SourceLoc loc = SourceLoc::current());

 private:
  struct Impl;
  /// The single path every op takes: checks inputs, builds with createTandemOp, records errors.
  std::vector<Value> build(const char* opType, const std::vector<std::optional<Value>>& inputs,
                           const AttrMap& attrs, unsigned numOutputs, const SourceLoc& loc);
  Value build1(const char* opType, const std::vector<std::optional<Value>>& inputs,
               const AttrMap& attrs, const SourceLoc& loc);
  bool usable(const SourceLoc& loc, const char* opType);
  /// A constant operand a method makes itself (shape, axes, pads, fill values): never pinned,
  /// since such operands are read at compile time wherever the op runs.
  Value operandConstant(const Tensor& t, const SourceLoc& loc);
  Value intsOperand(const std::vector<int64_t>& values, const SourceLoc& loc);
  void recordError(const SourceLoc& loc, const std::string& msg);

  std::unique_ptr<Impl> impl_;
  std::string error_;
  std::string device_;
  friend class DeviceScope;
};

/// Pins every op built while it lives to `device`, then restores the previous pin (scopes nest).
///   { tandem::DeviceScope gpu(g, "cuda:0"); h = g.relu(g.conv(x, w)); }
class DeviceScope {
 public:
  DeviceScope(GraphBuilder& g, const std::string& device) : g_(g), saved_(g.device()) {
    g.setDevice(device);
  }
  ~DeviceScope() { g_.setDevice(saved_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  GraphBuilder& g_;
  std::string saved_;
};

}  // namespace tandem

// Tandem's passes, declared once: summary, description and a before/after example each
// (STYLE §2). The pipeline that runs them in order is compiler/pipeline/Pipeline.cpp.
#ifndef TANDEM_PASSES_TD
#define TANDEM_PASSES_TD

include "mlir/Pass/PassBase.td"

def TandemVerify : Pass<"tandem-verify", "mlir::ModuleOp"> {
  let summary = "Check that a module is a tandem graph the pipeline can compile";
  let description = [{
    Requires a `func.func @main`, only tandem ops and `func.return` inside it, ranked tensors
    everywhere, and element types the runtime has kernels for (f32, f64, i32, i64, i1, i8,
    ui8). Every op's own verifier (including result-type inference) runs first. Errors are
    reported on the offending op's location.

    ```mlir
    // Rejected: unknown rank.
    func.func @main(%x: tensor<*xf32>) -> tensor<*xf32> { ... }
    // error: input 'x' has unknown rank; Tandem needs ranked tensors
    ```
  }];
  let constructor = "::tandem::createVerifyPass()";
}

def TandemInferShapes : Pass<"tandem-infer-shapes", "mlir::ModuleOp"> {
  let summary = "Bind symbolic input dims and re-infer every result type in order";
  let description = [{
    Optionally binds @main's symbolic argument dims first (named by the `tandem.dim_params`
    argument attribute): `dims` binds by name, `default-dim` (when >= 0) the rest. Then every op
    in @main has its result types re-inferred from its operands (refining dynamic dims; a
    contradiction with a declared static dim is an error), and @main's result types follow.

    ```mlir
    // --tandem-infer-shapes=dims=N=2
    func.func @main(%x: tensor<?x3xf32> {tandem.dim_params = ["N", ""]}) -> tensor<?x3xf32> {
      %0 = tandem.relu %x : (tensor<?x3xf32>) -> tensor<?x3xf32>
      return %0 : tensor<?x3xf32>
    }
    // becomes
    func.func @main(%x: tensor<2x3xf32> {...}) -> tensor<2x3xf32> {
      %0 = tandem.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }
    ```
  }];
  let constructor = "::tandem::createInferShapesPass()";
  let options = [
    ListOption<"dims", "dims", "std::string",
               "Symbolic dim bindings NAME=VALUE (ONNX dim_param names)">,
    Option<"defaultDim", "default-dim", "int64_t", /*default=*/"-1",
           "Binding for symbolic dims not named in `dims`; -1 leaves them dynamic">,
  ];
}

def TandemAutodiff : Pass<"tandem-autodiff", "mlir::ModuleOp"> {
  let summary = "Append reverse-mode gradients of a scalar loss to @main and return them";
  let description = [{
    Differentiates @main's result number `loss` (default 0: an f32 or f64 tensor of one element)
    with respect to the "wrt" values: every float @main argument carrying the unit attribute
    `tandem.trainable`, plus the @main arguments (by `tandem.name`) and tandem.constant ops
    (by node name, the ONNX initializer's) listed in `wrt`. A `wrt` name that matches nothing
    is an error, and so is an empty wrt set.

    Algorithm (linear in the ops of @main): a forward sweep marks the float values that depend
    on a wrt value ("active"); then, seeded with d loss / d loss = 1, the ops are visited in
    reverse order. An op none of whose results received a gradient is skipped (it does not
    reach the loss); one with no active operand is skipped too (its inputs are all constant).
    Otherwise the op's gradient rule (compiler/autodiff/GradientRules.cpp, one function per op;
    the op table's kGradient rows list them) appends ordinary tandem ops computing d loss / d
    operand for the active operands, and a value read by several ops gets the sum of their
    contributions (Add). An active op without a rule is an error naming the op type and node:
    `no gradient for op 'TopK' (node 'topk1')`. Non-float values (indices, masks, shapes)
    carry no gradient.

    Each wrt value's gradient (zeros where the loss does not depend on it) is appended to
    @main's results, in wrt order (trainable arguments, then `wrt` names), with result
    attributes `tandem.name = "<name>_grad"` and `tandem.gradient_of = "<name>"`. Gradient ops
    are located at "<forward node>/grad". Shapes must be static (run after infer-shapes).
    The pipeline (CompileOptions::autodiff) runs it right after infer-shapes and before
    canonicalize, so a constant named in `wrt` still exists (canonicalize folds ops over
    constants into new constants) and canonicalize then folds, CSEs and prunes the backward
    graph; placement and fusion treat gradient ops as any other.

    Training-mode Dropout's gradient is a Dropout of the output gradient that redraws the
    forward mask (same node name, seed and counter). Not differentiated: training-mode
    BatchNormalization, Slice with steps other
    than 1, Gather on an axis other than 0, and the ops without a rule.

    ```mlir
    func.func @main(%x: tensor<2x3xf32>, %w: tensor<3x4xf32> {tandem.trainable}) -> tensor<f32> {
      %y = tandem.mat_mul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      %l = tandem.reduce_sum %y {keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32>
      return %l : tensor<f32>
    }
    // becomes (d loss / dy = ones, expanded; dw = x^T . dy)
    func.func @main(...)
        -> (tensor<f32>, tensor<3x4xf32> {tandem.gradient_of = "w", tandem.name = "w_grad"}) {
      ...
      %one = tandem.constant dense<1.0> : tensor<f32>
      %dy = tandem.expand %r, %s : (tensor<1x1xf32>, tensor<2xi64>) -> tensor<2x4xf32>
      %xt = tandem.transpose %x {perm = [1, 0]} : ...
      %dw = tandem.mat_mul %xt, %dy : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
      return %l, %dw : tensor<f32>, tensor<3x4xf32>
    }
    ```
  }];
  let constructor = "::tandem::createAutodiffPass()";
  let options = [
    Option<"loss", "loss", "unsigned", /*default=*/"0",
           "Index of the @main result that is the loss (one float element)">,
    ListOption<"wrt", "wrt", "std::string",
               "Names of @main arguments (tandem.name) or constants (node name) to "
               "differentiate with respect to, besides the tandem.trainable arguments">,
  ];
}

def TandemLegalizeF16 : Pass<"tandem-legalize-f16", "mlir::ModuleOp"> {
  let summary = "Run ops without an f16/bf16 CPU kernel in f32, between Casts";
  let description = [{
    For every op of @main that reads an f16 or bf16 tensor and has no CPU kernel for its operand
    dtypes (the kernel registry's answer, as placement asks it), each 16-bit operand is widened
    by a Cast to f32, the op's result types are re-inferred (f32), and each result that was
    f16 (bf16) is narrowed back by a Cast to f16 (bf16) that every former user reads. @main's
    argument and result types are kept. Ops with f16/bf16 kernels (Cast, CastLike, Max, Min,
    Mod) are left alone. The Cast of an f16 constant folds to an f32 constant in canonicalize,
    which runs next; CSE merges the Casts of one value read by several ops.

    Rounding. By default an op widened here reads the f32 result of a widened producer
    directly: values stay f32 inside a run of such ops (an "f32 island") and are rounded to 16
    bits only where they leave it (a 16-bit kernel, @main's results). That is what ONNX
    Runtime's CPU provider does (it removes the Cast pairs it inserted); it is more accurate
    than per-op rounding, and the ops fuse and keep the blocked activation layouts, which the
    Casts between them prevented (ResNet-18 in f16: 3.5x faster). With per-op-rounding=true
    every widened op's result is rounded to 16 bits (a later op widens that rounded value):
    ONNX's f16/bf16 semantics exactly, with f32 arithmetic inside each op. Ops that only move,
    pick or negate elements (Relu, MaxPool, Reshape, ...) round nothing, so after them the f32
    value is read in either mode.

    ```mlir
    %0 = tandem.relu %x : (tensor<4xf16>) -> tensor<4xf16>
    // becomes
    %w = tandem.cast %x {to = 1 : i64} : (tensor<4xf16>) -> tensor<4xf32>
    %r = tandem.relu %w : (tensor<4xf32>) -> tensor<4xf32>
    %0 = tandem.cast %r {to = 10 : i64} : (tensor<4xf32>) -> tensor<4xf16>
    ```
  }];
  let constructor = "::tandem::createLegalizeF16Pass()";
  let options = [
    Option<"perOpRounding", "per-op-rounding", "bool", /*default=*/"false",
           "Round every widened op's result to 16 bits (ONNX's semantics exactly) instead of "
           "keeping f32 between widened ops">,
  ];
}

def TandemFuseQdq : Pass<"tandem-fuse-qdq", "mlir::ModuleOp"> {
  let summary = "DequantizeLinear -> Conv | MatMul | Gemm [-> bias Add] [-> Relu] -> QuantizeLinear "
                "as one int8 QLinearConv, QLinearMatMul or QLinearMatMulBias";
  let description = [{
    Quantization-aware training (PyTorch) and ONNX Runtime's static quantizer export an int8
    convolution or matrix product in QDQ form: the f32 Conv, MatMul or Gemm of
    DequantizeLinear(x_q) and DequantizeLinear(W_q), quantized again by a QuantizeLinear. Run as
    written, every product is an f32 one between element-wise quantization steps. This pass
    replaces each such group by one int8 op, which the CPU runs on oneDNN's int8 kernels
    (runtime/cpu/dnnl/DnnlQuantized.cpp), as ONNX Runtime's QDQ transformer does:
      - Conv: QLinearConv(x_q, x_scale, x_zero_point, W_q, w_scale, w_zero_point, y_scale,
        y_zero_point, B_q);
      - MatMul and Gemm: QLinearMatMul with the same operands but B_q, or, with a bias,
        Tandem's QLinearMatMulBias (QLinearMatMul plus B_q per column before the
        requantization). W_q is b [K, N]: as written (DequantizeLinear(W_q [K, N]), channels
        axis 1), or transposed here from W_q [N, K] (channels axis 0) where the graph
        transposes it (a Transpose between the DequantizeLinear and the MatMul, PyTorch's
        nn.Linear; Gemm's transB = 1). The bias is Gemm's C, or for MatMul an Add of one value
        per column right after it (PyTorch's 3-D nn.Linear). Gemm needs transA = 0 and
        alpha = beta = 1.

    A group is taken when: x, W and y are u8/i8 with constant scales (x, y per tensor; W per
    tensor or per output channel; all finite and > 0) and constant zero points; W_q is a
    constant or a QuantizeLinear of constants (folded here); each f32 value between the
    product and the QuantizeLinear has no other reader; a Relu only where y's zero point is the
    type's least value (then Q(Relu(v)) = Q(v), saturated); the bias, if any, is an f32
    constant, quantized to B_q = round_half_even(B / (x_scale * w_scale)) in i32 (as ONNX
    Runtime's quantizer writes it), or that quantizer's DequantizeLinear of an i32 constant,
    taken as it is where its scale is x_scale * w_scale (f32) and its zero point 0, else
    dequantized and quantized again. A product of two activations (W not constant, as
    attention's Q K^T) stays f32. With require-fast-kernel (the default) the CPU's kernel
    registry must offer an int8 kernel for the result (on CPUs without VNNI oneDNN's int8
    products are exact only for u8 x and |W - w_zero_point| <= 64; the reference is about
    100x slower than the f32 product, and the exact f32 variants are slower than the f32 graph
    as written); the groups left for that reason are counted in the module attribute
    `tandem.qdq_without_fast_kernel` (the compiler turns it into a note).

    ONNX Runtime's dynamic quantization (quantize_dynamic) is taken too:
    DynamicQuantizeLinear(x) -> MatMulInteger(x_q, W_q, x_zero_point[, w_zero_point]) ->
    Cast(f32) -> Mul by Mul(x_scale, w_scale), W_q a constant matrix and w_scale a constant
    (1 or N values), each intermediate read once, becomes Tandem's DynamicQuantizeMatMul(x, W_q,
    w_scale[, w_zero_point]) (ONNX Runtime's contrib op): the same f32 arithmetic, so the same
    bits; the DynamicQuantizeLinear goes once nothing else reads it. With require-fast-kernel
    it needs a kernel other than the reference (the exact f32 ones count here: MatMulInteger
    as written would run on them too).

    Weight-only quantization is taken too (ONNX Runtime's 8-bit and 4-bit weight quantizers
    in QDQ form, the activations left f32): MatMul(A, DequantizeLinear(W_q)) (W_q [K, N], or
    [N, K] through Transpose) or Gemm(A, DequantizeLinear(W_q), C) (transB allowed, transA 0,
    alpha and beta 1), W_q an 8-bit constant (4-bit ones are widened at import), scales per
    tensor, per output column or in blocks along K (block_size), zero points constant, A not
    itself from a DequantizeLinear (a QDQ product left as written stays so), and no
    QuantizeLinear after: Tandem's DequantizeMatMul(A, W_q [K, N], scale, zero point[, bias]),
    with a constant bias row from Gemm's C or the Add right after a MatMul. The weights stay
    8-bit in memory (runtime/cpu/avx2/DequantGemm.h) instead of being folded to f32; the
    DequantizeLinear goes once nothing else reads it. With require-fast-kernel the registry
    must offer a kernel other than the reference (AVX2 + FMA); the products left for that
    reason are counted in `tandem.weight_only_without_fast_kernel` and fold to f32 as before.

    Numbers: y differs from the f32 graph's by at most one quantization step, where the f32
    sum and the exact integer sum round to different sides of a tie (and by B's rounding, at
    most x_scale * w_scale / 2 before requantization). The compiler runs this pass only when
    the plan targets CPUs alone (CompileOptions::qdqFusion; `--no-qdq-fusion` turns it off).

    ```mlir
    %x = tandem.dequantize_linear %xq, %xs, %xz : (tensor<1x8x6x6xui8>, ...) -> tensor<1x8x6x6xf32>
    %w = tandem.dequantize_linear %wq, %ws, %wz {axis = 0 : i64} : ... -> tensor<4x8x3x3xf32>
    %c = tandem.conv %x, %w, %b : ... -> tensor<1x4x6x6xf32>
    %r = tandem.relu %c : ...
    %y = tandem.quantize_linear %r, %ys, %yz : ... -> tensor<1x4x6x6xui8>
    // becomes
    %y = tandem.qlinear_conv %xq, %xs, %xz, %wq, %ws, %wz, %ys, %yz, %bq : ... -> tensor<1x4x6x6xui8>
    ```
  }];
  let constructor = "::tandem::createFuseQdqPass()";
  let options = [
    Option<"requireFastKernel", "require-fast-kernel", "bool", /*default=*/"true",
           "Fuse only where this CPU has a kernel other than the reference for the int8 op">,
  ];
}

def TandemCanonicalize : Pass<"tandem-canonicalize", "mlir::ModuleOp"> {
  let summary = "Constant folding with the CPU kernels, Shape/Identity/Dropout/BatchNorm folds, DCE, CSE";
  let description = [{
    A forward walk over @main: re-infer each op's result types (operands may have become
    constants); fold Identity, inference Dropout and a Pad of constant zero pads to their
    input; fold Shape of a
    static-shaped value to a constant; fold an inference BatchNormalization into the Conv that
    feeds it (constant weights, no other reader of the Conv); recognise written-out composites
    by their last op (GELU in erf and tanh forms -> Gelu; LayerNorm over the last axis, with
    its scalar eps and per-channel scale and bias, -> LayerNormalization; exp / reduce-sum
    softmax -> Softmax; 2-D MatMul + Add -> Gemm; ReduceMean over every spatial axis of a
    rank >= 4 value -> GlobalAveragePool, + Flatten without keepdims; GroupNorm as PyTorch
    writes it up to opset 17, Reshape [N, G, -1] -> InstanceNormalization -> Reshape back
    [-> Mul gamma per channel] [-> Add beta per channel], -> GroupNormalization with the
    InstanceNormalization's scale and bias folded in; a two-operand f32/f64 Einsum of static
    shapes whose labels are batch, row, column or contracted ones -> Transpose / Reshape /
    batched MatMul, diagonals and labels summed within one operand left to Einsum's kernel;
    a constant-mode Pad by zero over spatial dims only, read only by a Conv, -> the Conv with
    those pads added to its own; likewise into an AveragePool without ceil_mode, which then
    counts its pads (count_include_pad = 1; pads of its own only if it already counted them)),
    each only after its whole pattern matched
    (constants, axes, broadcast shapes, no reader outside the pattern of an op it makes dead),
    so a near-match stays as it is; fold any op whose operands are
    all constants by running its CPU kernel from the kernel registry (skipped when the result
    would exceed `fold-limit` elements and be larger than the inputs). Then remove unused ops
    and merge identical ones (MLIR's CSE), which also merges duplicate constants.
    Last, a value returned at several result positions gets an Identity for each repeat, so
    every graph output is its own plan value and keeps its own name.

    ```mlir
    %s = tandem.shape %x : (tensor<2x3x4xf32>) -> tensor<3xi64>
    %i = tandem.constant dense<[1, 2]> : tensor<2xi64>
    %g = tandem.gather %s, %i : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
    // becomes
    %g = tandem.constant dense<[3, 4]> : tensor<2xi64>
    ```
  }];
  let constructor = "::tandem::createCanonicalizePass()";
  let options = [
    Option<"foldLimit", "fold-limit", "int64_t", /*default=*/"1048576",
           "Largest folded result (elements) unless the inputs are larger still">,
  ];
}

def TandemOutlineDynamic : Pass<"tandem-outline-dynamic", "mlir::ModuleOp"> {
  let summary = "Move the ops whose shapes are known only at run time into one DynamicRegion op";
  let description = [{
    After infer-shapes and canonicalize have bound every symbolic dim and folded every constant,
    a result dim still unknown comes from a value-dependent size: NonZero, Compress, Unique or
    NonMaxSuppression on computed values, TopK with a computed K. Such an op and every op that
    reads its results, transitively, move into one `tandem.dynamic_region`, in their order. Its
    operands are the outer values they read (constants included, so weights stay constants of
    the plan), its results the graph outputs they compute (dims unknown before run time stay
    `?`), and its `body` attribute is their plan: steps and values as in a plan, values of
    unknown dims allowed, no placement, no arena. The runtime runs the body on the CPU step by
    step, inferring each step's shapes from the values it meets (runtime/DynamicRegion.h). A
    module without unknown dims is left as it is. Error: an unknown dim that reaches an op the
    region cannot take (a variable update).

    ```mlir
    %m = tandem.greater %x, %zero : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xi1>
    %nz = tandem.non_zero %m : (tensor<4x5xi1>) -> tensor<2x?xi64>
    %t = tandem.transpose %nz {perm = [1, 0]} : (tensor<2x?xi64>) -> tensor<?x2xi64>
    return %t : tensor<?x2xi64>
    // becomes
    %m = tandem.greater %x, %zero : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xi1>
    %t = tandem.dynamic_region %m {body = "<plan: NonZero, Transpose>"}
        : (tensor<4x5xi1>) -> tensor<?x2xi64>
    return %t : tensor<?x2xi64>
    ```
  }];
  let constructor = "::tandem::createOutlineDynamicPass()";
}

def TandemPlace : Pass<"tandem-place", "mlir::ModuleOp"> {
  let summary = "Put every op on a device at minimum estimated time, and record why";
  let description = [{
    Builds a placement problem from the module and solves it (compiler/placement, DESIGN §4):
    1. Devices and links come from the target list (`target`, e.g. "cpu,cuda:0=h100"; else
       `devices`; else the live machine) with built-in specs, corrected by a calibration
       `profile`.
    2. Feasibility: the devices whose kind has a kernel for the op's type and input dtypes (the
       runtime's registry; a capability table for backends not built, e.g. CUDA here).
    3. Costs: each op's time on each feasible device from the cost model (roofline + dispatch
       overhead), each value's transfer time per device pair (H2D != D2H); weights are uploaded
       once at load and cost no per-run transfer; graph inputs and outputs live on the host.
    4. Constraints: pins (option `pins` by node name, or an existing `device` attribute from
       the GraphBuilder's DeviceScope); an unsatisfiable pin falls back (`fallback(<why>)`) or,
       with `strict`, is an error.
    5. Solve with `policy` (cost: exact min cut for two devices, Stone 1977; alpha-expansion
       plus a HEFT refinement for more; or a baseline: greedy, ort, cpu, gpu) and record per op
       `device`, `placement_reason`, `placement_candidates` and `placement_costs` (seconds per
       candidate). The estimated time of the plan and of every baseline on the same graph is
       recorded on the module (`tandem.placement_estimates`).
    Constants take the device of their first consumer; graph inputs arrive on the host.

    ```mlir
    %0 = tandem.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    // becomes
    %0 = tandem.relu %x {device = "cpu", placement_candidates = ["cpu"],
                         placement_costs = {cpu = 1.0e-06 : f64},
                         placement_reason = "only-kernel"} : (tensor<4xf32>) -> tensor<4xf32>
    ```
  }];
  let constructor = "::tandem::createPlacePass()";
  let options = [
    ListOption<"devices", "devices", "std::string", "Target devices in order (default: cpu)">,
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "Target list with models, e.g. cpu,cuda:0=h100 (overrides devices)">,
    Option<"profile", "profile", "std::string", /*default=*/"\"\"",
           "Calibration profile JSON (tandem calibrate)">,
    Option<"policy", "policy", "std::string", /*default=*/"\"cost\"",
           "cost (default), greedy, ort, cpu or gpu">,
    ListOption<"pins", "pins", "std::string", "Pins NODE=DEVICE (node = the op's NameLoc)">,
    Option<"strict", "strict", "bool", /*default=*/"false",
           "Infeasible pins are errors instead of falling back">,
  ];
}

def TandemInsertTransfers : Pass<"tandem-insert-transfers", "mlir::ModuleOp"> {
  let summary = "Insert one tandem.copy per (value, consumer device)";
  let description = [{
    For every value and every distinct device among its consumers other than the producer's,
    inserts exactly one `tandem.copy` right after the producer and rewires all consumers on that
    device to it, so a value is moved to a device once however many ops read it there. The copy
    runs on the destination device. Constants are load-time data: instead of a run-time copy,
    the constant is duplicated onto the consumer's device (uploaded once at load).

    ```mlir
    %0 = tandem.relu %x {device = "cpu"} : ...
    %1 = tandem.neg %0 {device = "cpu:1"} : ...
    %2 = tandem.exp %0 {device = "cpu:1"} : ...
    // becomes
    %0 = tandem.relu %x {device = "cpu"} : ...
    %c = tandem.copy %0 {device = "cpu:1", from = "cpu", to = "cpu:1"} : tensor<4xf32>
    %1 = tandem.neg %c {device = "cpu:1"} : ...
    %2 = tandem.exp %c {device = "cpu:1"} : ...
    ```
  }];
  let constructor = "::tandem::createInsertTransfersPass()";
}

def TandemFuse : Pass<"tandem-fuse", "mlir::ModuleOp"> {
  let summary = "Group ops of one device into tandem.fused kernels (CPU: oneDNN epilogues, element-wise loops, reductions with their producers; CUDA: cuBLASLt epilogues, generated kernels)";
  let description = [{
    Runs after placement and transfer insertion. Groups never span devices: members share the
    root's `device`, and `tandem.copy` is never a member. The CPU rules:
    1. Epilogues: a Conv, Gemm or MatMul (f32) absorbs its chain of single consumers while each
       is a post-op oneDNN applies in the same primitive: one residual Add of a same-typed
       non-constant value (oneDNN `sum`; Gemm only when its C is absent or a bias row; not
       after an activation, which oneDNN 2.6 runs only with reference kernels) and
       activations (the op table's kDnnlPostOp rows, runtime/core/OpTable.def: Relu,
       LeakyRelu, Elu, Selu, Sigmoid, HardSigmoid, Tanh, Exp, Sqrt, Abs, Neg, Clip with constant
       bounds, Gelu). A Gemm or MatMul also takes, first, a constant bias
       row (N values, every other dim 1; Gemm without C, MatMul with one B matrix: the
       primitive's bias) and, anywhere, Muls by a constant row of N values (a per-column
       scale, oneDNN binary_mul). Kind `conv-epilogue` / `gemm-epilogue`. At load the
       runtime compares the fused primitive's implementation with the unfused one and runs the
       group unfused if fusing would fall to a gemm or reference kernel. Then an inference
       BatchNormalization read only by a Relu (kind `batchnorm-relu`: one per-channel affine +
       ReLU pass; DenseNet's pre-activation, which cannot fold into the Conv after the Relu),
       with the channel Concat it alone reads when there is one (kind
       `concat-batchnorm-relu`: the pass reads the Concat's inputs; the concatenation is never
       written). Layouts (`result_layouts`): 4-D and 5-D values between ops that read and write
       the host's activation layout (Conv, conv-epilogue, pools, BatchNormalization,
       batchnorm-relu, concat-batchnorm-relu, channel Concat) stay in it ("blocked").
    2. Element-wise chains (kind `elementwise`), visited consumers first: producers of the same
       type (operands of the result's type or scalars) join if the op table marks them kCpuLoop
       (the unary math and activations, Add, Sub, Mul, Div, Max, Min); one also read outside becomes an
       extra output only if the group stays convex and those readers follow the root.
    3. Row groups: a reduction over the last axes (ReduceSum with constant axes, ReduceMean,
       ReduceMax, ReduceMin, ReduceL2, ReduceSumSquare), a Softmax/LogSoftmax or a LayerNormalization over the last axis
       (Scale/B of that length) absorbs the element-wise producers of its X by rule 2; one
       kernel computes them row by row while reducing (kinds `reduction`, `softmax`,
       `layernorm`, and `add-layernorm` when X is a member Add: the transformer's residual
       sum, an extra output when read outside). A reduction is only ever a root: one read by
       a loop gets `fusion_refused` saying so.
    4. Duplication (XLA's instruction fusion): before rules 2 and 3, a cheap loop op (the op
       table's kCheap rows: Relu, LeakyRelu, HardSigmoid, Abs, Neg, Clip, Add, Sub, Mul, Max,
       Min; XLA's IsExpensive rules out Exp, Log, Tanh, Erf, Sqrt, Div, ...) whose every reader is on its device and
       would absorb it (a loop op of its type, or a row root reading it as X) is copied into
       each reader (`fusion_duplicated`), so no group materialises it, unless the copies read
       more memory than materialising it (f full-size operands, k readers: f*k >= f + 1 + k;
       a chain of residual sums). An expensive one, or one refused for traffic, gets
       `fusion_not_duplicated` and is materialised once.
    The CUDA rules (ops on cuda devices, passes/FuseCuda.cpp; same one-device and convexity
    guarantees):
    5. `gemm-epilogue`: an f32 Gemm or MatMul, then at most one bias Add (a row of N values; not
       when Gemm has a C; MatMul only with one B matrix), then at most one Relu or Gelu with
       approximate = "tanh" (cuBLASLt's GELU epilogue is the tanh approximation, so an exact
       Gelu is refused): one cuBLASLt matmul with a BIAS / RELU / GELU (_BIAS) epilogue.
    6. `add-layernorm`: a same-shape Add feeding a LayerNormalization's X (Scale/B one value per
       normalised element, Mean/InvStdDev unread): one block per row computes the sum and the
       normalisation; the sum is a second output when it is read outside (after the root).
    7. `elementwise`: as rule 2, with the generated CUDA kernel's ops (the op table's
       kCudaExpr rows, all of them kCpuLoop rows too): one
       NVRTC kernel per group, one pass over memory.
    Softmax and LayerNormalization alone are already one block per row.
    A producer kept out of a group for a device boundary or convexity gets `fusion_refused`.

    ```mlir
    %c = tandem.conv %x, %w, %b {device = "cpu"} : ...
    %s = tandem.add %c, %r {device = "cpu"} : ...
    %y = tandem.relu %s {device = "cpu"} : ...
    // becomes
    %y = tandem.fused "conv-epilogue" (%x, %w, %b, %r) {device = "cpu"} : (...) -> ... {
    ^bb0(%a0: ..., %a1: ..., %a2: ..., %a3: ...):
      %0 = tandem.conv %a0, %a1, %a2 {device = "cpu"} : ...
      %1 = tandem.add %0, %a3 {device = "cpu"} : ...
      %2 = tandem.relu %1 {device = "cpu"} : ...
      tandem.yield %2 : ...
    }

    %s = tandem.add %x, %r {device = "cpu"} : ...
    %n = tandem.layer_normalization %s, %g, %b {device = "cpu"} : ...   // %s also returned
    // becomes
    %f:2 = tandem.fused "add-layernorm" (%x, %r, %g, %b) {device = "cpu"} : (...) -> (...) {
    ^bb0(%a0: ..., %a1: ..., %a2: ..., %a3: ...):
      %0 = tandem.add %a0, %a1 {device = "cpu"} : ...
      %1 = tandem.layer_normalization %0, %a2, %a3 {device = "cpu"} : ...
      tandem.yield %0, %1 : ...
    }
    ```
  }];
  let constructor = "::tandem::createFusePass()";
}

def TandemPlanMemory : Pass<"tandem-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assign per-device arena offsets from liveness (greedy by size)";
  let description = [{
    Liveness over the op order: a value lives from its producer to its last consumer (graph
    inputs from the start, graph outputs to the end). Each device has one arena; offsets are
    assigned with TFLite's "greedy by size" strategy (Pisarchyk & Lee 2020): values in
    decreasing size order, each in the best-fitting gap among the values whose lifetimes
    overlap it. Before that, in-place reuse: a result shares the buffer of an operand that its
    kernel may overwrite (operand 0 of the op table's kInPlace rows: unary element-wise ops,
    Add/Sub/Mul/Div/Max/Min, the reshaping ops; any operand of an element-wise tandem.fused;
    the residual of a fused epilogue) when the op is
    that operand's last reader and dtype, element count and device agree. Sizes are rounded up to `alignment` bytes. Constants are not in arenas.
    Training: a variable's update (the @main result with `tandem.variable_update`) is written
    straight into the variable's buffer, and gets no arena slot, when its producer runs on the
    variable's device after every other reader of the variable, reads the variable only at the
    index it writes (an element-wise op or tandem.fused), and the variable is not returned;
    such results get `tandem.variable_in_place`. The others are copied back after a run.
    Records `arena_offset` (one per result) on ops, `tandem.arena_offset` on @main's
    arguments, and `tandem.arena_peak_bytes` / `tandem.arena_unplanned_bytes` (per device) on
    the module. A value with a dynamic dim is an error naming it.

    ```mlir
    %0 = tandem.relu %x {device = "cpu"} : (tensor<16xf32>) -> tensor<16xf32>
    // becomes
    %0 = tandem.relu %x {arena_offset = [64], device = "cpu"} : ...
    ```
  }];
  let constructor = "::tandem::createPlanMemoryPass()";
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"64", "Offset alignment in bytes">,
    Option<"updateVariablesInPlace", "update-variables-in-place", "bool", /*default=*/"true",
           "Write variables' updates into the variables where safe (off: copy every one back)">,
  ];
}

#endif  // TANDEM_PASSES_TD

// The work of one op: FLOPs and bytes moved, from its ONNX op type, static operand types and
// attributes. The cost model turns work into time on a device (CostModel.h).
#pragma once
#include <string>
#include <vector>

#include "runtime/Attr.h"
#include "runtime/DType.h"
#include "runtime/Kernel.h"  // TensorType

namespace tandem {

/// Which throughput governs an op: a calibration profile has a GEMM table, a conv table and a
/// memory-bandwidth table (CostModel.h); `Free` ops cost nothing on any device.
enum class OpClass {
  Free,    // metadata that never runs as a kernel in a static plan: Shape Constant
  Gemm,    // Gemm, MatMul
  Conv,    // Conv, ConvTranspose
  Memory,  // elementwise, reductions, pools, normalisations, data movement (bandwidth-bound)
};
const char* opClassName(OpClass c);  // "free", "gemm", "conv", "memory"

struct OpWork {
  OpClass cls = OpClass::Memory;
  /// Floating-point (or integer) operations; a fused multiply-add counts 2.
  double flops = 0;
  /// Compulsory DRAM/HBM traffic in bytes: every operand read once and every result written
  /// once (perfect caching), except where an op reads less of an input (Slice, Gather).
  double bytes = 0;
  /// The arithmetic type: the first floating-point input's dtype, else the first input's.
  DType dtype = DType::F32;
  /// True when the figure is a guess: an op type this table does not know (counted as one
  /// FLOP per output element) or unknown dims (counted as 1). `note` says which.
  bool estimated = false;
  std::string note;
  /// A reshaping op (Identity Flatten Reshape Squeeze Unsqueeze, Dropout without training_mode:
  /// one with it is an element-wise pass): its kernel copies
  /// the data (`bytes` = read + write of input 0) unless the memory plan gives its result the
  /// input's buffer (passes/PlanMemory.cpp, when the op is the input's last reader), and the
  /// copy vanishes. The placer sets `bytes` to 0 where it expects that; the op then costs the
  /// CPU's dispatch (the step still runs) and nothing on a GPU (no copy is enqueued).
  bool reshape = false;
  /// Of `bytes`: the op's constant operands (weights), and the plan's working set besides
  /// this op (all its constants); both set by the placer (0 when unknown). A CPU with a known
  /// last-level cache reads the weights from there when the plan's constants and this op's
  /// bytes fit in it together: they stay cached between steps and runs (CostModel.h).
  double constantBytes = 0;
  double planConstantBytes = 0;
  /// Seconds this op's kernel took on this machine's CPU as the runtime measured it (the
  /// kernel timing cache: CostModel::measuredCpuSeconds), or -1. Used for the live CPU only.
  double measuredCpuSeconds = -1;
};

/// FLOPs and bytes of one op (ONNX opset 17 semantics, operands in ONNX order; an absent
/// optional input has dtype Undefined). Shapes are the static shapes after inference; a dim of
/// -1 (unknown) is counted as 1 and marks the result `estimated`. Never fails.
///
/// FLOP counts (N = output elements unless said otherwise). The per-element and per-kind counts
/// are the op table's work column (runtime/core/OpTable.def); OpWork.cpp writes out the rest:
///   Conv           2·N·(Cin/group)·prod(kernel) (+N with bias), i.e. 2·Nb·Cout·prod(out
///                  spatial)·Cin/group·prod(kernel); Cin/group and kernel read from W's shape
///   ConvTranspose  2·numel(X)·(Cout/group)·prod(kernel) (+N with bias)
///   Gemm           2·M·N·K (+M·N with C);  MatMul 2·N·K (batched, K = A's last dim)
///   MaxPool/AveragePool N·prod(kernel_shape); GlobalAveragePool/GlobalMaxPool numel(X)
///   Add Sub Mul Div Relu Abs Neg Sqrt Reciprocal Equal Less Greater Where: 1 per element;
///   Clip PRelu LeakyRelu: 2; HardSigmoid: 3; Sum/Max/Min of k inputs: k-1 (at least 1)
///   Exp Log Erf Tanh Sigmoid Softplus Elu Selu Pow, the trigonometric and hyperbolic functions
///   (Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh): 4 per element (vector approximations of
///   transcendental functions cost several FMAs; these ops are memory-bound on every device
///   anyway, so the exact count rarely matters)
///   ReduceSum/Max/Min/L2/SumSquare, ArgMax: numel(X); ReduceMean: numel(X) + N
///   Softmax/LogSoftmax: 8 per element (max, subtract, exp = 4, sum, divide)
///   LayerNormalization: 6 per element (+1 with bias); BatchNormalization (inference): 2
///   Transpose Concat Split Slice Gather Pad Tile Expand Cast ConstantOfShape: 0 (data movement)
///   Identity Flatten Reshape Squeeze Unsqueeze Dropout: 0 FLOPs, a copy of input 0 (`reshape`)
///   Free ops (Shape, Constant): 0 FLOPs and 0 bytes.
OpWork estimateOpWork(const std::string& opType, const std::vector<TensorType>& inputs,
                      const std::vector<TensorType>& outputs, const AttrMap& attrs);

}  // namespace tandem

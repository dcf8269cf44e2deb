// Per-op facts from the one op table (runtime/core/OpTable.def): lookup by ONNX name. MLIR-free
// and light (no <string>), read by the compiler's shape registry, work estimates and passes and
// by the runtime's element-wise kernels.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tandem {

/// Facts a pass or kernel asks of an op (OpInfo::flags). Where each was a hand-written list
/// before, the reader is named.
enum OpFlag : uint32_t {
  kUnary = 1u << 0,           // element-wise over operand 0 (Clip: plus its scalar bounds)
  kBinary = 1u << 1,          // element-wise over two operands with ONNX broadcasting
  kCheap = 1u << 2,           // one or two instructions per element: fusion may compute it
                              // again in every consumer (XLA's !IsExpensive; passes/Fuse.cpp)
  kInPlace = 1u << 3,         // its kernels may write the result over operand 0 when the op
                              // is that operand's last reader (passes/PlanMemory.cpp)
  kDnnlPostOp = 1u << 4,      // a oneDNN eltwise post-op of a Conv/Gemm/MatMul epilogue
                              // (runtime/cpu/dnnl/DnnlEltwise.cpp maps it; passes/Fuse.cpp)
  kCudaExpr = 1u << 5,        // the generated CUDA element-wise kernels evaluate it, alone
                              // and in fused groups (runtime/cuda/Elementwise.cpp, Fused.cpp)
  kCpuLoop = 1u << 6,         // the CPU fused element-wise loop evaluates it
                              // (runtime/cpu/ref/Fused.cpp)
  kReductionRoot = 1u << 7,   // needs a whole row before writing any of it: a fusion group's
                              // root, never a producer inside a group (passes/Fuse.cpp)
  kOwnResultDType = 1u << 8,  // result 0's dtype is not input 0's (comparisons, Cast, Shape,
                              // ...): kernels skip that check (runtime/cpu/ref/Register.cpp)
  kDnnlEltwise = 1u << 9,     // a oneDNN eltwise primitive runs it alone (DnnlEltwise.cpp
                              // registers these); every post-op is one
  kTandemDomain = 1u << 10,     // Tandem's own op (the backward ops the autodiff pass builds):
                                // in no ONNX domain, so the importer refuses it
  kPreviewTraining = 1u << 11,  // an op of ONNX domain ai.onnx.preview.training, version 1
                                // (frontend/OnnxImporter.cpp imports it from that domain only)
  kGradient = 1u << 12,         // has a reverse-mode gradient rule (--tandem-autodiff; one
                                // function per op in compiler/autodiff/GradientRules.cpp)
};

/// How compiler/placement/OpWork.cpp counts an op's FLOPs (OpTable.def explains each).
enum class OpWorkKind : uint8_t { Elementwise, Variadic, ReduceInput, Reshape, Free, Data, Formula, Unknown };

/// One row of the op table.
struct OpInfo {
  const char* name;        // ONNX op type, e.g. "Sin"
  int since;               // ONNX version in force at opset 17, e.g. 7 for Sin-7
  OpWorkKind work;
  double flopsPerElement;  // for OpWorkKind::Elementwise
  uint32_t flags;          // OpFlag bits
  const char* formula;     // unary math ops: the scalar formula over `a` (OpTable.def), else null

  /// True when the op has every bit of `f`.
  bool has(uint32_t f) const { return (flags & f) == f; }
};

/// The row of ONNX op `onnxName` (case-sensitive), or null when the op is not in scope.
const OpInfo* findOp(std::string_view onnxName);

/// True when `onnxName` is in the table and has every bit of `f`.
inline bool opHas(std::string_view onnxName, uint32_t f) {
  const OpInfo* op = findOp(onnxName);
  return op && op->has(f);
}

/// Every row, in the table's order: `*count` rows from the returned pointer.
const OpInfo* allOps(size_t* count);

/// True when Mul(x, gate(x)) is a gated activation a Conv/Gemm/MatMul epilogue applies as one
/// oneDNN post-op: gate Sigmoid is SiLU (eltwise_swish, alpha 1), gate HardSigmoid with alpha
/// 1/6 and beta 1/2 (as f32) is HardSwish (eltwise_hardswish). These are PyTorch's exports of
/// nn.SiLU and nn.Hardswish. `alpha`/`beta`: the gate's attributes (HardSigmoid's defaults are
/// 0.2 and 0.5; ignored for Sigmoid). Read by passes/Fuse.cpp and runtime/cpu/dnnl/DnnlFused.cpp.
inline bool isSwishGate(std::string_view gateType, float alpha, float beta) {
  if (gateType == "Sigmoid") return true;
  return gateType == "HardSigmoid" && alpha == 1.f / 6.f && beta == 0.5f;
}

}  // namespace tandem

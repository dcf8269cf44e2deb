// The ops and dtypes the CUDA backend has kernels for, and the instances its kernels refuse: one
// table and one rule, registered as the CUDA kernels' KernelDef::accepts / rejects
// (runtime/cuda/Register.cpp) or, in a build without the backend, as its capabilities
// (runtime/cuda/CudaAbsent.cpp), so the placer and the loader give the same answer. No CUDA
// headers here: runtime/core/CudaKernelTable.cpp and runtime/cuda/KernelLimits.cpp are compiled
// into every build.
#pragma once
#include <string>
#include <vector>

#include "runtime/DType.h"
#include "runtime/Kernel.h"

namespace tandem {

/// The largest K the CUDA TopK selects per row (runtime/cuda/Selection.cpp: one scan of the row
/// per selection, so its time grows with K * row length).
constexpr int64_t kCudaTopKMax = 256;

/// Ops with a CUDA kernel, sorted.
const std::vector<std::string>& cudaKernelOps();
/// Whether the CUDA backend runs `opType` on inputs of these dtypes (present inputs, ONNX
/// order). False for ops not in cudaKernelOps().
bool cudaKernelAccepts(const std::string& opType, const std::vector<DType>& inputDTypes);
/// The table's dtype rule for `tandem kernels`, e.g. "f32" or "f32,i32,i64 (all the same)".
std::string cudaKernelDTypesText(const std::string& opType);
/// Why the CUDA kernel for ctx.opType cannot run this instance although it accepts its dtypes,
/// or "" when it can (KernelDef::rejects). Reads the attributes, static shapes and which inputs
/// are constants (ctx.constInputs non-null; values are not read, so a placer may pass markers).
/// Refused: pools of rank other than 3-5, dilated pools, pools whose output cuDNN's
/// symmetric-pad floor rounding does not give (ceil_mode, asymmetric pads), MaxPool's Indices
/// output; MaxPoolGrad of rank other than 3-5; SoftmaxCrossEntropyLoss(Grad) with a reduction
/// other than none/sum/mean; convolutions of rank other than 3-5; training-mode
/// BatchNormalization; Dropout with a training_mode operand on data other than f32/f64, or a
/// ratio of more than one element (the CUDA Dropout draws the CPU kernel's Philox mask, with
/// the mask output, reading ratio, training_mode and counter on the device); non-constant
/// Pad/Slice/Clip/reduction parameters; LayerNormalization with a broadcast Scale or B,
/// RMSNormalization with a broadcast scale; CumSum
/// with a non-constant axis; TopK with a non-constant K or K above kCudaTopKMax; Resize with
/// non-constant scales (or roi under tf_crop_and_resize), as the reference needs them at load;
/// NonMaxSuppression with non-constant max_output_boxes_per_class or thresholds; LSTM, GRU, RNN
/// with layout 1, clip, input_forget=1, peepholes P, sequence_lens, non-default activations (RNN:
/// tanh or relu), GRU linear_before_reset=0, or non-constant W, R, B (cuDNN's cells,
/// runtime/cuda/Recurrent.cpp).
std::string cudaKernelRejects(const KernelContext& ctx);

}  // namespace tandem

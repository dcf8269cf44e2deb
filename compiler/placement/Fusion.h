// Which op pairs a device's fuse pass merges, as the placer sees it (issue 5, fusion-aware
// placement): a pointwise consumer fused into its producer runs inside the producer's kernel,
// so on that device it costs neither a dispatch/launch nor a pass over memory. The placer
// charges a fusible chain that it splits across devices for the fusion it loses.
#pragma once
#include <string>

namespace tandem {

/// Pointwise ops that fuse into the op producing their first input: activations (Relu,
/// LeakyRelu, Sigmoid, Tanh, Clip, Elu, Selu, HardSigmoid, Softplus), unary math (Abs, Neg, Exp,
/// Log, Sqrt, Erf, Reciprocal) and binary arithmetic (Add, Sub, Mul, Div: bias, scale, residual
/// sum).
bool isFusiblePointwise(const std::string& opType);

/// True when `consumer` (reading `producer`'s only result as its first input, and the only
/// reader of it) fuses into `producer` on a device of kind `deviceKind` ("cpu", "cuda"):
///   cpu:  Conv, ConvTranspose, Gemm, MatMul + pointwise (oneDNN eltwise/binary/sum post-ops);
///         pointwise + pointwise (one loop over memory)
///   cuda: nothing yet: the fuse pass forms CPU groups only (passes/Fuse.cpp)
bool fusesIntoProducer(const std::string& deviceKind, const std::string& producer,
                       const std::string& consumer);

}  // namespace tandem

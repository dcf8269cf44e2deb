// Tensor files and checks shared by `tandem` and `tandem-run` (no MLIR): ONNX test-data
// directories, output comparison, random inputs; atomic file writes come from runtime/FileIO.h.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "runtime/FileIO.h"  // writeFileAtomic (output files: mkstemp, fsync, rename)
#include "runtime/Kernel.h"  // TensorType
#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace tandem {

/// Reads PREFIX_0.pb, PREFIX_1.pb, ... (ONNX TensorProto files; stops at the first missing index)
/// from `dir`. `names` (may be null) receives each TensorProto.name.
/// Errors: `dir` missing or without PREFIX_0.pb, unreadable/corrupt tensor files (named).
Status readTensorDir(const std::string& dir, const std::string& prefix,
                     std::vector<Tensor>* tensors, std::vector<std::string>* names);

/// Comparison of an output with its reference, ONNX backend-test style:
/// pass iff |a-b| <= atol + rtol*|b| elementwise (NaN equal to NaN, infinities of one sign
/// equal) and shapes/dtypes agree.
struct Comparison {
  bool pass = false;
  double maxAbsError = 0;
  double maxRelError = 0;
  std::string reason;  // when !pass
};
Comparison compareTensors(const Tensor& actual, const Tensor& expected, double atol, double rtol);

/// Sum of elements as double (bool and ints included): a cheap fingerprint for printing.
double checksum(const Tensor& t);

/// A host tensor of `type` with uniform [0,1) floats, ints in [0,10) and fair bools: what
/// `--random` feeds a model (ids in [0,10) are valid for every embedding table we know).
Tensor randomTensor(const TensorType& type, std::mt19937& rng);

}  // namespace tandem

// Fusion rules the placer prices (Fusion.h).
#include "compiler/placement/Fusion.h"

#include <set>

namespace tandem {

bool isFusiblePointwise(const std::string& opType) {
  static const std::set<std::string> ops = {
      "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "Elu", "Selu", "HardSigmoid", "Softplus",
      "Abs", "Neg", "Exp", "Log", "Sqrt", "Erf", "Reciprocal", "Add", "Sub", "Mul", "Div"};
  return ops.count(opType) > 0;
}

bool fusesIntoProducer(const std::string& deviceKind, const std::string& producer,
                       const std::string& consumer) {
  if (!isFusiblePointwise(consumer)) return false;
  // CUDA: the backend has cuBLASLt bias/ReLU epilogues and NVRTC chains, but the fuse pass
  // does not form CUDA groups yet (issue 5's CUDA part); pricing fusion there would promise
  // what the plan does not run. Then: (Conv|Gemm|MatMul) + (Relu|Add), pointwise chains.
  if (deviceKind != "cpu") return false;
  return isFusiblePointwise(producer) ||  // one elementwise loop
         producer == "Conv" || producer == "ConvTranspose" || producer == "Gemm" ||
         producer == "MatMul";
}

}  // namespace tandem

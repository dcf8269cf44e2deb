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
  if (isFusiblePointwise(producer)) return true;  // one elementwise loop / kernel
  if (deviceKind == "cpu")
    return producer == "Conv" || producer == "ConvTranspose" || producer == "Gemm" ||
           producer == "MatMul";
  if (deviceKind == "cuda")
    return (producer == "Conv" || producer == "Gemm" || producer == "MatMul") &&
           (consumer == "Relu" || consumer == "Add");
  return false;
}

}  // namespace tandem

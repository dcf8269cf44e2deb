// An installed-Tandem user of the runtime alone: loads a plan made by `tandem compile` from
// ONNX's test_relu and checks y = max(x, 0) on a known input. Built by tests/install/install.sh
// with find_package(Tandem) and with pkg-config.
#include <cstdio>
#include <memory>
#include <vector>

#include "runtime/Executable.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: runtime_consumer PLAN.tplan\n");
    return 2;
  }
  std::unique_ptr<tandem::Executable> exe;
  tandem::LoadOptions options;
  options.threads = 1;
  tandem::Status st = tandem::Executable::loadFile(argv[1], options, &exe);
  if (!st.isOk()) {
    std::fprintf(stderr, "runtime_consumer: %s\n", st.message().c_str());
    return 1;
  }
  const tandem::TensorType& type = exe->inputTypes().at(0);
  tandem::Tensor x = tandem::Tensor::alloc(type.dtype, type.shape);
  const int64_t n = x.bytes() / sizeof(float);
  for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = 0.25f * (float)(i - n / 2);
  std::vector<tandem::Tensor> outputs;
  st = exe->run({x}, &outputs);
  if (!st.isOk() || outputs.size() != 1 || outputs[0].bytes() != x.bytes()) {
    std::fprintf(stderr, "runtime_consumer: run failed: %s\n", st.message().c_str());
    return 1;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float want = x.data<float>()[i] > 0 ? x.data<float>()[i] : 0.f;
    if (outputs[0].data<float>()[i] != want) {
      std::fprintf(stderr, "runtime_consumer: y[%lld] = %g, want %g\n", (long long)i,
                   outputs[0].data<float>()[i], want);
      return 1;
    }
    sum += want;
  }
  std::printf("runtime_consumer: %lld elements, relu ok, sum %g\n", (long long)n, sum);
  return 0;
}

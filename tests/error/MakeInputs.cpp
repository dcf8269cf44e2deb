// Writes the bad run-time inputs for the must-fail tests: wrong dtype, wrong shape, corrupt file.
// usage: make_inputs OUT_DIR   (creates OUT_DIR/{wrong_dtype,wrong_shape,corrupt_tensor}/input_0.pb)
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "frontend/OnnxTensor.h"

using namespace tandem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_inputs OUT_DIR\n");
    return 2;
  }
  std::string out = argv[1];
  for (const char* d : {"", "/wrong_dtype", "/wrong_shape", "/corrupt_tensor", "/good"})
    mkdir((out + d).c_str(), 0755);
  // good_add.onnx takes x: f32[2,3].
  Status st = writeTensorFile(out + "/good/input_0.pb",
                              Tensor::fromVector<float>({2, 3}, {1, -2, 3, -4, 5, -6}), "x");
  if (st.isOk())
    st = writeTensorFile(out + "/wrong_dtype/input_0.pb",
                         Tensor::fromVector<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6}), "x");
  if (st.isOk())
    st = writeTensorFile(out + "/wrong_shape/input_0.pb",
                         Tensor::fromVector<float>({3, 2}, {1, 2, 3, 4, 5, 6}), "x");
  if (!st.isOk()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  std::ofstream(out + "/corrupt_tensor/input_0.pb", std::ios::binary) << "\x08\x01\x12\xff\xff garbage";
  return 0;
}

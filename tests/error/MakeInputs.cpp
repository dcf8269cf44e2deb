// Writes the bad run-time inputs for the must-fail tests: wrong dtype, wrong shape, corrupt file,
// and tensor files whose dims claim far more than their bytes (issue 15).
// usage: make_inputs OUT_DIR   (creates OUT_DIR/<case>/input_0.pb)
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <vector>

#include "frontend/OnnxTensor.h"

using namespace tandem;

// input_0.pb of f32 tensor 'x' with `dims` and `rawBytes` zero bytes of raw_data.
static bool writeLyingTensor(const std::string& dir, const std::vector<int64_t>& dims,
                             size_t rawBytes) {
  mkdir(dir.c_str(), 0755);
  onnx::TensorProto p;
  p.set_name("x");
  p.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) p.add_dims(d);
  p.set_raw_data(std::string(rawBytes, '\0'));
  std::ofstream o(dir + "/input_0.pb", std::ios::binary | std::ios::trunc);
  o << p.SerializeAsString();
  return (bool)o;
}

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
  bool ok = writeLyingTensor(out + "/huge_dims", {4294967297LL, 784}, 8) &&
            writeLyingTensor(out + "/overflow_dims", {int64_t(1) << 62, 8}, 8) &&
            writeLyingTensor(out + "/short_raw", {2, 3}, 20);
  // A directory where the tensor file should be: refused as not a regular file.
  mkdir((out + "/dir_as_file").c_str(), 0755);
  mkdir((out + "/dir_as_file/input_0.pb").c_str(), 0755);
  return ok ? 0 : 1;
}

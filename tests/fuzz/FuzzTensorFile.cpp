// libFuzzer target: tensor-file bytes (an `--inputs` input_N.pb) -> readTensorBytes, the reader
// behind readTensorFile and readTensorDir. Every byte of an accepted tensor is read back, so a
// tensor whose buffer is shorter than its shape says is an ASan report.
#include <cstdint>
#include <string>

#include "frontend/OnnxTensor.h"
#include "tests/fuzz/FuzzCommon.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tandem::fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  tandem::Tensor t;
  std::string name;
  tandem::Status st = tandem::readTensorBytes(bytes, "input_0.pb", &t, &name);
  if (!st.isOk()) {
    // Every refusal names the file it came from.
    if (st.message().find("input_0.pb") == std::string::npos) __builtin_trap();
    return 0;
  }
  volatile uint8_t sum = 0;
  const uint8_t* p = static_cast<const uint8_t*>(t.raw());
  for (size_t i = 0; i < t.bytes(); ++i) sum += p[i];
  if (t.dtype() == tandem::DType::Bool)
    for (size_t i = 0; i < t.bytes(); ++i)
      if (p[i] > 1) __builtin_trap();  // bools are stored as 0/1 bytes
  return 0;
}

// An installed-Tandem user of the compiler: compiles an ONNX model in-process, runs it and
// compares with the model's reference output (ONNX test layout: DIR/model.onnx,
// DIR/test_data_set_0/{input,output}_0.pb). Built by tests/install/install.sh.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tools/driver/Driver.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: compiler_consumer MODEL_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "compiler_consumer: %s\n", msg.c_str());
    return 1;
  };
  tandem::CompileResult compiled;
  tandem::Status st = tandem::compileOnnxFile(dir + "/model.onnx", tandem::ImportOptions{},
                                              tandem::CompileOptions{}, &compiled);
  if (!st.isOk()) return fail(st.message());
  std::unique_ptr<tandem::Executable> exe;
  tandem::LoadOptions options;
  options.threads = 1;
  st = tandem::Executable::load(compiled.plan, options, &exe);
  if (!st.isOk()) return fail(st.message());
  std::vector<tandem::Tensor> inputs, expected, outputs;
  st = tandem::readTensorDir(dir + "/test_data_set_0", "input", &inputs, nullptr);
  if (st.isOk()) st = tandem::readTensorDir(dir + "/test_data_set_0", "output", &expected, nullptr);
  if (st.isOk()) st = exe->run(inputs, &outputs);
  if (!st.isOk()) return fail(st.message());
  if (outputs.size() != expected.size()) return fail("output count differs from the reference");
  for (size_t i = 0; i < outputs.size(); ++i) {
    tandem::Comparison c = tandem::compareTensors(outputs[i], expected[i], 1e-6, 1e-6);
    if (!c.pass) return fail("output " + std::to_string(i) + ": " + c.reason);
  }
  std::printf("compiler_consumer: %d plan steps, %zu outputs match the reference\n",
              compiled.plan.steps_size(), outputs.size());
  return 0;
}

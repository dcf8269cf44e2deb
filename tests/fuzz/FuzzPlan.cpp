// libFuzzer target: plan bytes -> Executable::load -> one run with zero-filled inputs, the
// runtime alone (no compiler), as `tandem-run PLAN` would see a hostile .tplan. A load or run
// refusal is fine; a crash, leak, hang or sanitizer report is a finding.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/Executable.h"
#include "tests/fuzz/FuzzCommon.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tandem::fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tandem::plan::Plan plan;
  if (!plan.ParseFromArray(data, (int)size)) return 0;
  tandem::LoadOptions options;
  options.threads = 1;
  options.tuning = tandem::TuningMode::Off;  // no measuring, no timing-cache file
  options.tuningCache = "/dev/null";
  std::unique_ptr<tandem::Executable> exe;
  if (!tandem::Executable::load(plan, options, &exe).isOk()) return 0;
  std::vector<tandem::Tensor> inputs;
  for (size_t i = 0; i < exe->inputTypes().size(); ++i) {
    const tandem::TensorType& type = exe->inputTypes()[i];
    tandem::Tensor t;
    if (!tandem::Tensor::tryAlloc(type.dtype, type.shape, exe->inputNames()[i], &t).isOk())
      return 0;
    inputs.push_back(std::move(t));
  }
  std::vector<tandem::Tensor> outputs;
  tandem::Status st = exe->run(inputs, &outputs);
  if (st.isOk() && outputs.size() != exe->outputNames().size()) __builtin_trap();
  return 0;
}

// Test helpers for the reference CPU kernels: build a KernelContext from tensors, create the
// kernel from a local registry, run it, and compare outputs with hand-computed values.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "runtime/Kernel.h"

namespace tandem {
namespace reftest {

inline KernelRegistry& registry() {
  static KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    registerCpuReferenceKernels(*reg);
    return reg;
  }();
  return *r;
}

template <typename T>
Tensor tensor(Shape shape, std::vector<T> values) {
  EXPECT_EQ(numElements(shape), (int64_t)values.size()) << "test tensor " << shapeToString(shape);
  return Tensor::fromVector<T>(std::move(shape), values);
}
inline Tensor f32(Shape s, std::vector<float> v) {
  return tensor<float>(std::move(s), std::move(v));
}
inline Tensor f64(Shape s, std::vector<double> v) {
  return tensor<double>(std::move(s), std::move(v));
}
inline Tensor i32(Shape s, std::vector<int32_t> v) {
  return tensor<int32_t>(std::move(s), std::move(v));
}
inline Tensor i64(Shape s, std::vector<int64_t> v) {
  return tensor<int64_t>(std::move(s), std::move(v));
}
inline Tensor u8(Shape s, std::vector<uint8_t> v) {
  return tensor<uint8_t>(std::move(s), std::move(v));
}
inline Tensor i8(Shape s, std::vector<int8_t> v) {
  return tensor<int8_t>(std::move(s), std::move(v));
}
inline Tensor boolean(Shape s, std::vector<bool> v) {
  return tensor<bool>(std::move(s), std::move(v));
}
/// An absent optional input.
inline Tensor none() { return Tensor(); }

inline AttrMap attrs(std::initializer_list<std::pair<const char*, Attr>> list) {
  AttrMap m;
  for (const auto& kv : list) m.set(kv.first, kv.second);
  return m;
}

/// One op invocation. Inputs that are undefined Tensors are absent; with `constInputs`, every
/// present input is also passed as a load-time constant (as the compiler does for weights and
/// shape operands).
struct OpCall {
  std::string op;
  AttrMap attrs;
  std::vector<Tensor> inputs;
  std::vector<TensorType> outputs;  // an output with dtype Undefined is not requested
  bool constInputs = false;
  int threads = 1;
  KernelContext::ResultAllocator allocResult;  // a dynamic region's, for kernel-sized results

  Status create(std::unique_ptr<Kernel>* k) const {
    KernelContext ctx;
    ctx.opType = op;
    ctx.nodeName = "n";
    ctx.attrs = &attrs;
    ctx.threads = threads;
    ctx.allocResult = allocResult;
    for (const Tensor& t : inputs) {
      ctx.inputTypes.push_back({t.dtype(), t.shape()});
      ctx.constInputs.push_back(constInputs && t.defined() ? &t : nullptr);
    }
    ctx.outputTypes = outputs;
    return registry().create("cpu", ctx, k);
  }

  /// Creates and runs the kernel; outputs are poisoned first so unwritten elements show.
  Status run(std::vector<Tensor>* outs) const {
    std::unique_ptr<Kernel> k;
    Status st = create(&k);
    if (!st) return st;
    outs->clear();
    std::vector<Tensor*> ptrs;
    for (const TensorType& t : outputs) {
      outs->push_back(t.present() ? Tensor::alloc(t.dtype, t.shape) : Tensor());
    }
    for (Tensor& t : *outs) {
      if (t.defined() && t.bytes()) std::memset(t.raw(), 0x5a, t.bytes());
      ptrs.push_back(t.defined() ? &t : nullptr);
    }
    std::vector<const Tensor*> ins;
    for (const Tensor& t : inputs) ins.push_back(t.defined() ? &t : nullptr);
    return k->run(ins, ptrs);
  }
};

/// Runs a one-output op; on error, records a failure and returns an undefined tensor.
inline Tensor run1(const std::string& op, AttrMap a, std::vector<Tensor> inputs, DType dt,
                   Shape shape, bool constInputs = false) {
  OpCall c{op, std::move(a), std::move(inputs), {{dt, std::move(shape)}}, constInputs};
  std::vector<Tensor> outs;
  Status st = c.run(&outs);
  if (!st) {
    ADD_FAILURE() << op << " failed: " << st.message();
    return Tensor();
  }
  return outs[0];
}

/// The error message of creating-or-running the op, "" when it succeeded.
inline std::string errorOf(const OpCall& c) {
  std::vector<Tensor> outs;
  Status st = c.run(&outs);
  return st ? "" : st.message();
}

template <typename T>
void expectValues(const Tensor& t, const Shape& shape, const std::vector<T>& expected,
                  double tol = 1e-5) {
  ASSERT_TRUE(t.defined());
  ASSERT_EQ(t.dtype(), dtypeOf<T>());
  ASSERT_EQ(shapeToString(t.shape()), shapeToString(shape));
  ASSERT_EQ(t.numel(), (int64_t)expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const T got = t.data<T>()[i];
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(expected[i])) {
        EXPECT_TRUE(std::isnan(got)) << "element " << i;
      } else if (std::isinf(expected[i])) {
        EXPECT_EQ(got, expected[i]) << "element " << i;
      } else {
        EXPECT_NEAR(got, expected[i], tol * std::max(1.0, std::fabs(double(expected[i]))))
            << "element " << i;
      }
    } else {
      EXPECT_EQ(got, expected[i]) << "element " << i;
    }
  }
}

}  // namespace reftest
}  // namespace tandem

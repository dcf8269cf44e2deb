// Helpers for the shape-function unit tests: operand builders and a one-call infer().
#pragma once
#include <gtest/gtest.h>

#include <deque>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ShapeInference.h"

namespace tandem::testing {

using Dims = std::vector<int64_t>;
constexpr int64_t U = kUnknownDim;

inline OperandInfo T(DType t, Dims d) {
  OperandInfo o;
  o.dtype = t;
  o.dims = std::move(d);
  return o;
}
inline OperandInfo F32(Dims d) { return T(DType::F32, std::move(d)); }
inline OperandInfo I64(Dims d) { return T(DType::I64, std::move(d)); }
inline OperandInfo F64(Dims d) { return T(DType::F64, std::move(d)); }
inline OperandInfo Absent() {
  OperandInfo o;
  o.present = false;
  return o;
}

// Constant tensors must outlive the OperandInfo pointing at them; tests are short-lived.
inline std::deque<Tensor>& constantStore() {
  static std::deque<Tensor> store;
  return store;
}
/// A constant 1-D i64 operand with these values.
inline OperandInfo Ints(std::vector<int64_t> v) {
  int64_t n = v.size();
  constantStore().push_back(Tensor::fromVector<int64_t>({n}, v));
  OperandInfo o = I64({n});
  o.value = &constantStore().back();
  return o;
}
/// The same as an i32 constant.
inline OperandInfo Ints32(std::vector<int32_t> v) {
  int64_t n = v.size();
  constantStore().push_back(Tensor::fromVector<int32_t>({n}, v));
  OperandInfo o = T(DType::I32, {n});
  o.value = &constantStore().back();
  return o;
}

inline AttrMap Attrs(std::initializer_list<std::pair<std::string, Attr>> l = {}) {
  AttrMap m;
  for (const auto& kv : l) m.set(kv.first, kv.second);
  return m;
}
inline std::pair<std::string, Attr> I(const std::string& n, int64_t v) { return {n, Attr::ofInt(v)}; }
inline std::pair<std::string, Attr> Is(const std::string& n, std::vector<int64_t> v) {
  return {n, Attr::ofInts(std::move(v))};
}
inline std::pair<std::string, Attr> S(const std::string& n, std::string v) {
  return {n, Attr::ofString(std::move(v))};
}

struct Inferred {
  std::string err;
  std::vector<ResultInfo> res;
  const Dims& dims(size_t i = 0) const { return res.at(i).dims; }
  DType dtype(size_t i = 0) const { return res.at(i).dtype; }
};

inline Inferred infer(const std::string& op, std::vector<OperandInfo> ops,
                      const AttrMap& attrs = AttrMap(), size_t numResults = 1) {
  Inferred r;
  r.err = inferResultTypes(op, ops, attrs, numResults, &r.res);
  if (r.err.empty()) {
    EXPECT_EQ(r.res.size(), numResults);
  }
  return r;
}

// One successful single-result inference, checked in one line.
#define EXPECT_SHAPE(inferred, dtype_, ...)                         \
  do {                                                              \
    auto r_ = (inferred);                                           \
    ASSERT_EQ(r_.err, "");                                          \
    EXPECT_EQ(r_.dims(), (::tandem::testing::Dims __VA_ARGS__));    \
    EXPECT_EQ(r_.dtype(), dtype_);                                  \
  } while (0)

#define EXPECT_ERR(inferred, msg) EXPECT_EQ((inferred).err, msg)
#define EXPECT_ERR_HAS(inferred, sub)                                         \
  do {                                                                        \
    std::string e_ = (inferred).err;                                          \
    EXPECT_NE(e_.find(sub), std::string::npos) << "error was: '" << e_ << "'"; \
  } while (0)

}  // namespace tandem::testing

// Shape functions of Gemm, MatMul, Det and Softmax/LogSoftmax (ONNX Gemm-13, MatMul-13, Det-11,
// Softmax-13).
#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {
namespace {

const std::vector<DType> kMatTypes = {DType::F16, DType::BF16, DType::F32,
                                      DType::F64, DType::I32,  DType::I64};

}  // namespace

std::string inferGemm(const Ctx& c) {
  // Y = alpha * A' * B' + beta * C, A' = transA ? A^T : A (M x K), B' (K x N), C -> (M, N).
  static const std::vector<const char*> names = {"A", "B", "C"};
  if (auto e = checkArity(c, 2, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kMatTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  for (size_t i = 0; i < 2; ++i)
    if (c.in[i].dims.size() != 2)
      return c.fail(operandLabel(i, names[i]) + " must be 2-D, got shape " + dimsStr(c.in[i].dims));
  bool ta = c.attrs.getInt("transA", 0) != 0, tb = c.attrs.getInt("transB", 0) != 0;
  const auto& a = c.in[0].dims;
  const auto& b = c.in[1].dims;
  int64_t m = ta ? a[1] : a[0], ka = ta ? a[0] : a[1];
  int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (!dimsAgree(ka, kb))
    return c.fail("input 0 (A) has K=" + std::to_string(ka) + (ta ? " (transA=1)" : "") +
                  " but input 1 (B) has K=" + std::to_string(kb) + (tb ? " (transB=1)" : ""));
  std::vector<int64_t> y = {m, n};
  if (c.has(2)) {
    if (auto e = checkSameDType(c, 2, 0, names); !e.empty()) return e;
    if (auto e = checkUnidirectional(y, c.in[2].dims, "the result (M, N)", operandLabel(2, "C"));
        !e.empty())
      return c.fail(e);
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferMatMul(const Ctx& c) {
  // numpy.matmul: 1-D A is [1,K] then the 1 is dropped; 1-D B is [K,1] likewise; batch dims
  // broadcast.
  static const std::vector<const char*> names = {"A", "B"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kMatTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  std::vector<int64_t> a = c.in[0].dims, b = c.in[1].dims;
  for (size_t i = 0; i < 2; ++i)
    if (c.in[i].dims.empty()) return c.fail(operandLabel(i, names[i]) + " must not be a scalar");
  bool aVec = a.size() == 1, bVec = b.size() == 1;
  if (aVec) a.insert(a.begin(), 1);
  if (bVec) b.push_back(1);
  int64_t ka = a.back(), kb = b[b.size() - 2];
  if (!dimsAgree(ka, kb))
    return c.fail("input 0 (A) shape " + dimsStr(c.in[0].dims) + " and input 1 (B) shape " +
                  dimsStr(c.in[1].dims) + " have mismatched inner dims " + std::to_string(ka) +
                  " vs " + std::to_string(kb));
  std::vector<int64_t> batchA(a.begin(), a.end() - 2), batchB(b.begin(), b.end() - 2), y;
  if (auto e = broadcastTwo(batchA, batchB, "input 0 (A) batch", "input 1 (B) batch", &y);
      !e.empty())
    return c.fail(e);
  if (!aVec) y.push_back(a[a.size() - 2]);
  if (!bVec) y.push_back(b.back());
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferDet(const Ctx& c) {
  // Det-11: X [*, M, M] floats; the result is [*] (a scalar for one matrix).
  static const std::vector<const char*> names = {"X"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  if (x.size() < 2 || !dimsAgree(x[x.size() - 1], x[x.size() - 2]))
    return c.fail("input 0 (X) must be [*, M, M] (square matrices), got shape " + dimsStr(x));
  c.set(0, c.in[0].dtype, std::vector<int64_t>(x.begin(), x.end() - 2));
  return "";
}

std::string inferSoftmax(const Ctx& c) {
  // Softmax-13/LogSoftmax-13: one axis (default -1); the result has the input's type.
  static const std::vector<const char*> names = {"input"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  int64_t rank = c.in[0].dims.size(), axis = 0;
  if (rank == 0) return c.fail("input 0 (input) must have rank >= 1, got a scalar");
  if (auto e = normAxis(c, c.attrs.getInt("axis", -1), rank, "attribute axis", &axis); !e.empty())
    return e;
  c.set(0, c.in[0].dtype, c.in[0].dims);
  return "";
}

}  // namespace tandem::shapes

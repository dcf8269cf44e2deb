// ONNX test-data directories, output comparison, random inputs and atomic writes (no MLIR).
#include "tools/driver/TensorFiles.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "frontend/OnnxTensor.h"
#include "runtime/Half.h"

namespace tandem {

Status readTensorDir(const std::string& dir, const std::string& prefix,
                     std::vector<Tensor>* tensors, std::vector<std::string>* names) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(dir + ": no such directory");
  tensors->clear();
  if (names) names->clear();
  for (int k = 0;; ++k) {
    std::string f = dir + "/" + prefix + "_" + std::to_string(k) + ".pb";
    if (stat(f.c_str(), &st) != 0) break;
    Tensor t;
    std::string name;
    TANDEM_RETURN_IF_ERROR(readTensorFile(f, &t, &name));
    tensors->push_back(t);
    if (names) names->push_back(name);
  }
  if (tensors->empty()) return Status::error(dir + ": no " + prefix + "_0.pb in this directory");
  return Status::ok();
}

template <typename T>
static double elementAsDouble(const Tensor& t, int64_t i) {
  return (double)t.data<T>()[i];
}

static double valueAt(const Tensor& t, int64_t i) {
  if (isHalfFloat(t.dtype())) return narrowToFloat(t.data<uint16_t>()[i], t.dtype() == DType::BF16);
  double v = 0;
  dispatchDType(t.dtype(), [&](auto tag) { v = elementAsDouble<decltype(tag)>(t, i); });
  return v;
}

Comparison compareTensors(const Tensor& a, const Tensor& b, double atol, double rtol) {
  Comparison c;
  if (a.dtype() != b.dtype()) {
    c.reason = std::string("dtype ") + dtypeName(a.dtype()) + " != expected " + dtypeName(b.dtype());
    return c;
  }
  if (a.shape() != b.shape()) {
    c.reason = "shape " + shapeToString(a.shape()) + " != expected " + shapeToString(b.shape());
    return c;
  }
  bool ok = true;
  for (int64_t i = 0, n = a.numel(); i < n; ++i) {
    double x = valueAt(a, i), y = valueAt(b, i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::isinf(x) && std::isinf(y) && (x > 0) == (y > 0)) continue;
    double abs = std::fabs(x - y);
    if (std::isnan(abs)) abs = INFINITY;
    double rel = abs / std::max(std::fabs(y), 1e-12);
    c.maxAbsError = std::max(c.maxAbsError, abs);
    c.maxRelError = std::max(c.maxRelError, std::fabs(y) > 0 ? rel : (abs > 0 ? INFINITY : 0));
    if (!(abs <= atol + rtol * std::fabs(y))) ok = false;
  }
  c.pass = ok;
  if (!ok) {
    std::ostringstream os;
    os << "max abs error " << c.maxAbsError << " exceeds atol " << atol << " + rtol " << rtol;
    c.reason = os.str();
  }
  return c;
}

double checksum(const Tensor& t) {
  double s = 0;
  for (int64_t i = 0, n = t.numel(); i < n; ++i) s += valueAt(t, i);
  return s;
}

Tensor randomTensor(const TensorType& type, std::mt19937& rng) {
  Tensor x = Tensor::alloc(type.dtype, type.shape);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  if (isHalfFloat(type.dtype)) {
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<uint16_t>()[i] = narrowFromDouble(u(rng), type.dtype == DType::BF16);
    return x;
  }
  dispatchDType(type.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double r = u(rng);
      if constexpr (std::is_floating_point_v<T>) p[i] = (T)r;
      else if constexpr (std::is_same_v<T, bool>) p[i] = r < 0.5;
      else p[i] = (T)(r * 10);
    }
  });
  return x;
}

}  // namespace tandem

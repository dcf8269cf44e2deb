// IDX and ONNX TensorProto dataset readers, dataset validation, the reproducible epoch order.
#include "frontend/Datasets.h"

#include <dirent.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "frontend/OnnxTensor.h"
#include "runtime/FileIO.h"
#include "runtime/Half.h"

namespace tandem {
namespace {

// The whole of a gzip'd or plain file (gzread passes plain files through), at most
// maxInputFileBytes() decompressed so a small malicious .gz cannot exhaust memory.
Status readMaybeGz(const std::string& path, std::string* out) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode)) return Status::error(path + ": not a regular file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  out->clear();
  char buf[1 << 16];
  int n;
  bool tooBig = false;
  while ((n = gzread(f, buf, sizeof buf)) > 0) {
    if ((int64_t)(out->size() + (size_t)n) > maxInputFileBytes()) {
      tooBig = true;
      break;
    }
    out->append(buf, (size_t)n);
  }
  int errnum = Z_OK;
  const char* why = n < 0 ? gzerror(f, &errnum) : nullptr;
  std::string whyText = why ? why : "";
  gzclose(f);
  if (tooBig)
    return Status::error(path + ": more than " + std::to_string(maxInputFileBytes()) +
                         " bytes decompressed (TANDEM_MAX_INPUT_BYTES raises the limit)");
  if (n < 0) return Status::error(path + ": gzip read error (" + whyText + ")");
  return Status::ok();
}

uint32_t be32(const std::string& s, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + at;
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

// One parsed IDX file: dims, element type code and where the big-endian elements start.
struct Idx {
  std::vector<int64_t> dims;
  int type = 0;
  size_t elemBytes = 0;
  size_t dataAt = 0;
  int64_t count = 0;  // elements
};

Status parseIdx(const std::string& path, const std::string& b, Idx* idx) {
  if (b.size() < 4 || b[0] != 0 || b[1] != 0)
    return Status::error(path +
                         ": not an IDX file (the magic number must start with two zero bytes)");
  idx->type = (unsigned char)b[2];
  switch (idx->type) {
    case 0x08:
    case 0x09:
      idx->elemBytes = 1;
      break;
    case 0x0B:
      idx->elemBytes = 2;
      break;
    case 0x0C:
    case 0x0D:
      idx->elemBytes = 4;
      break;
    case 0x0E:
      idx->elemBytes = 8;
      break;
    default:
      return Status::error(path + ": not an IDX file (unknown element type 0x" +
                           "0123456789abcdef"[idx->type >> 4] + "0123456789abcdef"[idx->type & 15] +
                           ")");
  }
  const int rank = (unsigned char)b[3];
  if (rank == 0) return Status::error(path + ": an IDX file of rank 0 holds no samples");
  idx->dataAt = 4 + 4 * (size_t)rank;
  if (b.size() < idx->dataAt) return Status::error(path + ": truncated (in the IDX header)");
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    idx->dims.push_back(be32(b, 4 + 4 * i));
    n *= idx->dims.back();
    if (n > (int64_t)b.size()) break;  // cannot fit: the size check below reports it
  }
  idx->count = n;
  const size_t want = idx->dataAt + (size_t)n * idx->elemBytes;
  if (n > (int64_t)b.size() || b.size() < want)
    return Status::error(path + ": truncated (the IDX header's dims " + shapeToString(idx->dims) +
                         " need more bytes than the " + std::to_string(b.size()) + " there are)");
  if (b.size() > want)
    return Status::error(path + ": " + std::to_string(b.size() - want) +
                         " bytes after the IDX data (not an IDX file, or a corrupt header)");
  return Status::ok();
}

// Element i of an IDX file as a double (big-endian, IDX type codes).
double idxValue(const std::string& b, const Idx& idx, int64_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(b.data()) + idx.dataAt + i * idx.elemBytes;
  uint64_t u = 0;
  for (size_t k = 0; k < idx.elemBytes; ++k) u = u << 8 | p[k];
  switch (idx.type) {
    case 0x08:
      return (double)(uint8_t)u;
    case 0x09:
      return (double)(int8_t)u;
    case 0x0B:
      return (double)(int16_t)u;
    case 0x0C:
      return (double)(int32_t)u;
    case 0x0D: {
      uint32_t v = (uint32_t)u;
      float f;
      std::memcpy(&f, &v, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, &u, 8);
      return d;
    }
  }
}

// Appends `t`'s values to *out as f32 (any numeric dtype; f16 and bf16 via their bits).
Status appendAsFloat(const Tensor& t, const std::string& what, std::vector<float>* out) {
  const int64_t n = t.numel();
  if (isHalfFloat(t.dtype())) {
    const bool bf = t.dtype() == DType::BF16;
    for (int64_t i = 0; i < n; ++i) out->push_back(narrowToFloat(t.data<uint16_t>()[i], bf));
    return Status::ok();
  }
  if (t.dtype() == DType::Bool) return Status::error(what + ": bool samples are not supported");
  bool known = dispatchDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) out->push_back((float)p[i]);
  });
  if (!known)
    return Status::error(what + ": samples of dtype " + dtypeName(t.dtype()) +
                         " are not supported");
  return Status::ok();
}

// Integer values of t appended to out as i64; `role` ("labels", "samples") names them in the error.
Status appendIntegers(const Tensor& t, const std::string& what, const char* role,
                      std::vector<int64_t>* out) {
  if (!isInteger(t.dtype()))
    return Status::error(what + ": " + role + " must have an integer dtype, not " +
                         dtypeName(t.dtype()));
  const int64_t n = t.numel();
  dispatchDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) out->push_back((int64_t)p[i]);
  });
  return Status::ok();
}

// Sort key of a "test_data_set_<k>" name: numeric k first (by value), then other names.
bool dataSetLess(const std::string& a, const std::string& b) {
  auto num = [](const std::string& s, uint64_t* v) {
    const std::string k = s.substr(std::strlen("test_data_set_"));
    if (k.empty() || k.size() > 18 || k.find_first_not_of("0123456789") != std::string::npos)
      return false;
    *v = std::stoull(k);
    return true;
  };
  uint64_t va = 0, vb = 0;
  const bool na = num(a, &va), nb = num(b, &vb);
  if (na != nb) return na;
  if (na && va != vb) return va < vb;
  return a < b;
}

}  // namespace

Status validateDataset(const LabelledDataset& d, const DatasetOptions& o,
                       const std::string& source) {
  const int64_t per = d.sampleSize(), perLabel = d.labelSize();
  const size_t values = d.dtype == DType::I64 ? d.integerSamples.size() : d.samples.size();
  const size_t other = d.dtype == DType::I64 ? d.samples.size() : d.integerSamples.size();
  if (d.count < 0 || per < 0 || perLabel < 1 || (int64_t)d.labels.size() != d.count * perLabel ||
      (int64_t)values != d.count * per || other != 0 ||
      (d.dtype != DType::F32 && d.dtype != DType::I64))
    return Status::error(source + ": " + std::to_string(values) + " " + dtypeName(d.dtype) +
                         " sample values and " +
                         std::to_string(d.labels.size()) + " labels for " +
                         std::to_string(d.count) + " samples of shape " +
                         shapeToString(d.sampleShape) + " with labels " + shapeToString(d.labelShape));
  for (int64_t i = 0; i < (int64_t)d.samples.size(); ++i)
    if (!std::isfinite(d.samples[i]))
      return Status::error(source + ": sample " + std::to_string(i / per) + " element " +
                           std::to_string(i % per) + " is " +
                           (std::isnan(d.samples[i]) ? "nan"
                            : d.samples[i] > 0       ? "inf"
                                                     : "-inf"));
  if (o.numClasses > 0)
    for (int64_t i = 0; i < (int64_t)d.labels.size(); ++i)
      if (d.labels[i] < 0 || d.labels[i] >= o.numClasses)
        return Status::error(source + ": label " + std::to_string(i) + " is " +
                             std::to_string(d.labels[i]) + ", outside [0, " +
                             std::to_string(o.numClasses) + ")");
  return Status::ok();
}

Status loadIdxFiles(const std::string& imagesPath, const std::string& labelsPath,
                    LabelledDataset* out, const DatasetOptions& o) {
  std::string img, lab;
  TANDEM_RETURN_IF_ERROR(readMaybeGz(imagesPath, &img));
  TANDEM_RETURN_IF_ERROR(readMaybeGz(labelsPath, &lab));
  Idx ii, li;
  TANDEM_RETURN_IF_ERROR(parseIdx(imagesPath, img, &ii));
  TANDEM_RETURN_IF_ERROR(parseIdx(labelsPath, lab, &li));
  if (li.dims.size() != 1)
    return Status::error(labelsPath + ": labels must have rank 1, have dims " +
                         shapeToString(li.dims));
  if (li.type == 0x0D || li.type == 0x0E)
    return Status::error(labelsPath + ": labels must be integers, the file holds floats");
  if (li.dims[0] != ii.dims[0])
    return Status::error(labelsPath + ": " + std::to_string(li.dims[0]) + " labels for " +
                         std::to_string(ii.dims[0]) + " images in " + imagesPath);
  LabelledDataset d;
  d.count = ii.dims[0];
  d.sampleShape.assign(ii.dims.begin() + 1, ii.dims.end());
  d.samples.resize((size_t)ii.count);
  if (ii.type == 0x08) {
    const auto* p = reinterpret_cast<const unsigned char*>(img.data()) + ii.dataAt;
    for (int64_t i = 0; i < ii.count; ++i) d.samples[i] = p[i] / 255.0f;
  } else {
    for (int64_t i = 0; i < ii.count; ++i) d.samples[i] = (float)idxValue(img, ii, i);
  }
  d.labels.resize((size_t)d.count);
  for (int64_t i = 0; i < d.count; ++i) d.labels[i] = (int64_t)idxValue(lab, li, i);
  TANDEM_RETURN_IF_ERROR(validateDataset(d, o, imagesPath));
  *out = std::move(d);
  return Status::ok();
}

Status loadIdxDataset(const std::string& dir, const std::string& prefix, LabelledDataset* out,
                      const DatasetOptions& o) {
  return loadIdxFiles(dir + "/" + prefix + "-images-idx3-ubyte.gz",
                      dir + "/" + prefix + "-labels-idx1-ubyte.gz", out, o);
}

Status loadOnnxDataSets(const std::string& dir, LabelledDataset* out, const DatasetOptions& o) {
  DIR* dp = opendir(dir.c_str());
  if (!dp)
    return Status::error(dir + ": cannot open the data set directory (" + std::strerror(errno) +
                         ")");
  std::vector<std::string> sets;
  while (dirent* e = readdir(dp))
    if (std::strncmp(e->d_name, "test_data_set_", 14) == 0) sets.push_back(e->d_name);
  closedir(dp);
  if (sets.empty()) return Status::error(dir + ": no test_data_set_* directory");
  std::sort(sets.begin(), sets.end(), dataSetLess);
  if (o.sampleDtype != DType::F32 && o.sampleDtype != DType::I64)
    return Status::error(dir + ": samples can be kept as f32 or i64, not " + dtypeName(o.sampleDtype));
  LabelledDataset d;
  d.dtype = o.sampleDtype;
  std::string firstSet;
  for (const auto& s : sets) {
    const std::string base = dir + "/" + s;
    Tensor x, y;
    TANDEM_RETURN_IF_ERROR(readTensorFile(base + "/input_0.pb", &x));
    TANDEM_RETURN_IF_ERROR(readTensorFile(base + "/input_1.pb", &y));
    if (x.rank() < 1)
      return Status::error(base + "/input_0.pb: samples must be [n, ...], are a scalar");
    if (y.rank() < 1 || y.dim(0) != x.dim(0))
      return Status::error(base + "/input_1.pb: labels " + shapeToString(y.shape()) +
                           " for samples " + shapeToString(x.shape()) + " (want [" +
                           std::to_string(x.dim(0)) + "], [" + std::to_string(x.dim(0)) +
                           ", 1] or [" + std::to_string(x.dim(0)) + ", d...])");
    Shape sampleShape(x.shape().begin() + 1, x.shape().end());
    // [n, 1] is one label a sample, as [n] (a column of class ids).
    Shape labelShape = y.rank() == 2 && y.dim(1) == 1 ? Shape{} : Shape(y.shape().begin() + 1, y.shape().end());
    if (firstSet.empty()) {
      firstSet = s;
      d.sampleShape = sampleShape;
      d.labelShape = labelShape;
    } else if (sampleShape != d.sampleShape) {
      return Status::error(base + "/input_0.pb: samples of shape " + shapeToString(sampleShape) +
                           ", but " + firstSet + "'s are " + shapeToString(d.sampleShape));
    } else if (labelShape != d.labelShape) {
      return Status::error(base + "/input_1.pb: labels of shape " + shapeToString(labelShape) +
                           " a sample, but " + firstSet + "'s are " + shapeToString(d.labelShape));
    }
    if (o.sampleDtype == DType::I64)
      TANDEM_RETURN_IF_ERROR(appendIntegers(x, base + "/input_0.pb", "samples (the model takes integers)",
                                            &d.integerSamples));
    else
      TANDEM_RETURN_IF_ERROR(appendAsFloat(x, base + "/input_0.pb", &d.samples));
    TANDEM_RETURN_IF_ERROR(appendIntegers(y, base + "/input_1.pb", "labels", &d.labels));
    d.count += x.dim(0);
  }
  TANDEM_RETURN_IF_ERROR(validateDataset(d, o, dir));
  *out = std::move(d);
  return Status::ok();
}

std::vector<int64_t> shuffledOrder(int64_t count, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order((size_t)std::max<int64_t>(count, 0));
  for (int64_t i = 0; i < (int64_t)order.size(); ++i) order[i] = i;
  const uint64_t e = (uint64_t)epoch;
  std::seed_seq seq{(uint32_t)seed, (uint32_t)(seed >> 32), (uint32_t)e, (uint32_t)(e >> 32)};
  std::mt19937_64 rng(seq);
  for (int64_t i = (int64_t)order.size() - 1; i > 0; --i) {
    const uint64_t bound = (uint64_t)i + 1, threshold = (0 - bound) % bound;
    uint64_t r;
    do r = rng();
    while (r < threshold);
    std::swap(order[i], order[(size_t)(r % bound)]);
  }
  return order;
}

}  // namespace tandem

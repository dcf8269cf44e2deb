// ONNX TensorProto <-> runtime Tensor conversion and .pb tensor files (no MLIR).
#include "frontend/OnnxTensor.h"

#include <onnx/onnx_pb.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <type_traits>

#include "runtime/CheckedMath.h"
#include "runtime/FileIO.h"

namespace tandem {
namespace {

std::string tensorLabel(const onnx::TensorProto& p) {
  return p.name().empty() ? std::string("tensor <unnamed>") : "tensor '" + p.name() + "'";
}

const char* onnxTypeName(int32_t code) {
  switch (code) {
    case onnx::TensorProto::FLOAT: return "FLOAT";
    case onnx::TensorProto::UINT8: return "UINT8";
    case onnx::TensorProto::INT8: return "INT8";
    case onnx::TensorProto::UINT16: return "UINT16";
    case onnx::TensorProto::INT16: return "INT16";
    case onnx::TensorProto::INT32: return "INT32";
    case onnx::TensorProto::INT64: return "INT64";
    case onnx::TensorProto::STRING: return "STRING";
    case onnx::TensorProto::BOOL: return "BOOL";
    case onnx::TensorProto::FLOAT16: return "FLOAT16";
    case onnx::TensorProto::DOUBLE: return "DOUBLE";
    case onnx::TensorProto::UINT32: return "UINT32";
    case onnx::TensorProto::UINT64: return "UINT64";
    case onnx::TensorProto::COMPLEX64: return "COMPLEX64";
    case onnx::TensorProto::COMPLEX128: return "COMPLEX128";
    case onnx::TensorProto::BFLOAT16: return "BFLOAT16";
    case 21: return "UINT4";
    case 22: return "INT4";
    default: return "UNDEFINED";
  }
}

// Copies a typed repeated field into the tensor, converting each element to the tensor's C++
// type (int32_data carries bool/u8/i8 values widened to int32, per onnx.proto).
template <typename Field>
Status copyTyped(const onnx::TensorProto& p, const Field& field, int64_t expected, Tensor* t) {
  if ((int64_t)field.size() != expected) {
    return Status::error(tensorLabel(p) + ": has " + std::to_string(field.size()) +
                         " elements in its typed data field but its shape " +
                         shapeToString(t->shape()) + " needs " + std::to_string(expected));
  }
  dispatchDType(t->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* dst = t->data<T>();
    for (int64_t i = 0; i < expected; ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        // Stored as one byte 0/1 (DType::Bool); any non-zero ONNX value is true.
        reinterpret_cast<uint8_t*>(dst)[i] = field.Get((int)i) != 0 ? 1 : 0;
      } else {
        dst[i] = static_cast<T>(field.Get((int)i));
      }
    }
  });
  return Status::ok();
}

}  // namespace

// INT4 (22) and UINT4 (21), opsets 21+: two values a byte, the first in the low nibble, in
// raw_data or one byte per int32_data entry; widened to I8 (sign-extended) or U8.
Status int4FromProto(const onnx::TensorProto& p, bool isSigned, Tensor* out) {
  const Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape)
    if (d < 0) return Status::error(tensorLabel(p) + ": negative dimension in shape " + shapeToString(shape));
  int64_t n = 0;
  if (std::string e = checkTensorSize(shape, 1, isSigned ? "INT4" : "UINT4", &n); !e.empty())
    return Status::error(tensorLabel(p) + ": " + e);
  const int64_t packed = (n + 1) / 2;
  const bool raw = p.has_raw_data();
  const int64_t have = raw ? (int64_t)p.raw_data().size() : p.int32_data_size();
  if (have != packed)
    return Status::error(tensorLabel(p) + ": " + (raw ? "raw_data has " : "int32_data has ") +
                         std::to_string(have) + (raw ? " bytes" : " entries") + " but " +
                         (isSigned ? "INT4" : "UINT4") + " shape " + shapeToString(shape) +
                         " needs " + std::to_string(packed) + " (two values a byte)");
  Tensor t;
  TANDEM_RETURN_IF_ERROR(Tensor::tryAlloc(isSigned ? DType::I8 : DType::U8, shape, tensorLabel(p), &t));
  uint8_t* y = t.data<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t byte = raw ? uint8_t(p.raw_data()[i / 2]) : uint8_t(p.int32_data(int(i / 2)));
    const uint8_t nibble = i % 2 ? byte >> 4 : byte & 0x0F;
    y[i] = isSigned ? uint8_t(int8_t(nibble << 4) >> 4) : nibble;
  }
  *out = std::move(t);
  return Status::ok();
}

namespace {

// The bytes a tensor of fixed-size dtype needs (ceil(n / 2) for INT4/UINT4), or -1 when that
// is not known here (strings, an unknown dtype, a size past the limit: tensorFromProto says so).
int64_t expectedBytes(const onnx::TensorProto& p) {
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape)
    if (d < 0) return -1;
  const int32_t code = p.data_type();
  if (code == 21 || code == 22) {
    int64_t n = 0;
    if (!checkTensorSize(shape, 1, "INT4", &n).empty()) return -1;
    return (n + 1) / 2;
  }
  if (!isKnownDType(code)) return -1;
  int64_t bytes = 0;
  const DType d = static_cast<DType>(code);
  if (!checkTensorSize(shape, (int64_t)dtypeSize(d), dtypeName(d), &bytes).empty()) return -1;
  return bytes;
}

bool parseByteCount(const std::string& s, int64_t* v) {
  if (s.empty() || s.size() > 18) return false;
  int64_t r = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    r = r * 10 + (c - '0');
  }
  *v = r;
  return true;
}

// Reads each external tensor's range into raw_data; files opened once each.
class ExternalDataLoader {
 public:
  explicit ExternalDataLoader(std::string dir) : dir_(std::move(dir)) {}
  ~ExternalDataLoader() {
    for (auto& [loc, f] : files_) close(f.fd);
  }

  Status graph(onnx::GraphProto* g) {
    for (auto& t : *g->mutable_initializer()) TANDEM_RETURN_IF_ERROR(tensor(&t));
    for (auto& sp : *g->mutable_sparse_initializer()) {
      TANDEM_RETURN_IF_ERROR(tensor(sp.mutable_values()));
      TANDEM_RETURN_IF_ERROR(tensor(sp.mutable_indices()));
    }
    for (auto& n : *g->mutable_node()) TANDEM_RETURN_IF_ERROR(node(&n));
    return Status::ok();
  }

  Status node(onnx::NodeProto* n) {
    for (auto& a : *n->mutable_attribute()) {
      if (a.has_t()) TANDEM_RETURN_IF_ERROR(tensor(a.mutable_t()));
      for (auto& t : *a.mutable_tensors()) TANDEM_RETURN_IF_ERROR(tensor(&t));
      if (a.has_sparse_tensor()) {
        TANDEM_RETURN_IF_ERROR(tensor(a.mutable_sparse_tensor()->mutable_values()));
        TANDEM_RETURN_IF_ERROR(tensor(a.mutable_sparse_tensor()->mutable_indices()));
      }
      if (a.has_g()) TANDEM_RETURN_IF_ERROR(graph(a.mutable_g()));
      for (auto& g : *a.mutable_graphs()) TANDEM_RETURN_IF_ERROR(graph(&g));
    }
    return Status::ok();
  }

  Status tensor(onnx::TensorProto* p) {
    if (p->data_location() != onnx::TensorProto::EXTERNAL && p->external_data_size() == 0)
      return Status::ok();
    const std::string what = tensorLabel(*p);
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : p->external_data()) {
      if (kv.key() == "location") {
        location = kv.value();
      } else if (kv.key() == "offset" || kv.key() == "length") {
        int64_t v = 0;
        if (!parseByteCount(kv.value(), &v))
          return Status::error(what + ": external data " + kv.key() + " '" + kv.value() +
                               "' is not a byte count");
        (kv.key() == "offset" ? offset : length) = v;
      }
    }
    if (location.empty()) return Status::error(what + ": external data without a location");
    if (location[0] == '/' || location == ".." || location.rfind("../", 0) == 0 ||
        location.find("/../") != std::string::npos ||
        (location.size() >= 3 && location.compare(location.size() - 3, 3, "/..") == 0))
      return Status::error(what + ": external data location '" + location +
                           "' must be a path inside the model's directory (relative, no '..')");
    const std::string path = dir_.empty() ? location : dir_ + "/" + location;
    File* f = nullptr;
    TANDEM_RETURN_IF_ERROR(open(location, path, what, &f));
    if (length < 0) length = offset <= f->size ? f->size - offset : 0;
    if (offset > f->size || length > f->size - offset)
      return Status::error(what + ": external data range [" + std::to_string(offset) + ", " +
                           std::to_string(offset + length) + ") is past the end of '" + path +
                           "' (" + std::to_string(f->size) + " bytes)");
    if (int64_t want = expectedBytes(*p); want >= 0 && want != length)
      return Status::error(what + ": external data in '" + path + "' has " + std::to_string(length) +
                           " bytes, but its dims and dtype need " + std::to_string(want));
    if (length > maxTensorBytes())
      return Status::error(what + ": external data of " + std::to_string(length) +
                           " bytes, more than the limit of " + std::to_string(maxTensorBytes()) +
                           " (TANDEM_MAX_TENSOR_BYTES raises it)");
    std::string bytes;
    try {
      bytes.resize((size_t)length);
    } catch (const std::exception&) {
      return Status::error(what + ": out of memory reading " + std::to_string(length) +
                           " bytes of external data");
    }
    for (int64_t done = 0; done < length;) {
      ssize_t r = pread(f->fd, &bytes[(size_t)done], (size_t)(length - done), (off_t)(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        return Status::error(what + ": cannot read external data from '" + path + "' (" +
                             (r < 0 ? std::strerror(errno) : "unexpected end of file") + ")");
      done += r;
    }
    p->set_raw_data(std::move(bytes));
    p->clear_external_data();
    p->set_data_location(onnx::TensorProto::DEFAULT);
    return Status::ok();
  }

 private:
  struct File {
    int fd = -1;
    int64_t size = 0;
  };

  Status open(const std::string& location, const std::string& path, const std::string& what, File** out) {
    auto it = files_.find(location);
    if (it == files_.end()) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        return Status::error(what + ": cannot open its external data file '" + path + "' (" +
                             std::strerror(errno) + ")");
      struct stat st;
      if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return Status::error(what + ": external data '" + path + "' is not a regular file");
      }
      it = files_.emplace(location, File{fd, (int64_t)st.st_size}).first;
    }
    *out = &it->second;
    return Status::ok();
  }

  std::string dir_;
  std::map<std::string, File> files_;
};

}  // namespace

Status loadExternalData(onnx::ModelProto* model, const std::string& modelPath) {
  const size_t slash = modelPath.find_last_of('/');
  ExternalDataLoader loader(slash == std::string::npos ? "" : modelPath.substr(0, slash == 0 ? 1 : slash));
  TANDEM_RETURN_IF_ERROR(loader.graph(model->mutable_graph()));
  for (auto& fn : *model->mutable_functions())
    for (auto& n : *fn.mutable_node()) TANDEM_RETURN_IF_ERROR(loader.node(&n));
  return Status::ok();
}

Status tensorFromProto(const onnx::TensorProto& p, Tensor* out) {
  if (p.data_location() == onnx::TensorProto::EXTERNAL || p.external_data_size() > 0) {
    return Status::error(tensorLabel(p) +
                         ": uses external data (data_location=EXTERNAL), which is read only when "
                         "the model is compiled from its file (its location is relative to the "
                         "model's directory)");
  }
  if (p.has_segment()) {
    return Status::error(tensorLabel(p) + ": segmented tensors are not supported");
  }
  int32_t code = p.data_type();
  if (code == 21 || code == 22) return int4FromProto(p, code == 22, out);
  if (!isKnownDType(code)) {
    return Status::error(tensorLabel(p) + ": data type " + onnxTypeName(code) + " (" +
                         std::to_string(code) +
                         ") is not supported (supported: FLOAT, DOUBLE, INT32, INT64, BOOL, UINT8, "
                         "INT8, UINT16, INT16, UINT32, UINT64, FLOAT16, BFLOAT16; INT4 and UINT4 widened to 8 "
                         "bits)");
  }
  DType dtype = static_cast<DType>(code);
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape) {
    if (d < 0) {
      return Status::error(tensorLabel(p) + ": negative dimension in shape " +
                           shapeToString(shape));
    }
  }
  // Every size is checked against the data actually present before anything is allocated: a
  // 30-byte proto may claim dims [4294967297, 784].
  int64_t want = 0;
  if (std::string e = checkTensorSize(shape, (int64_t)dtypeSize(dtype), dtypeName(dtype), &want);
      !e.empty())
    return Status::error(tensorLabel(p) + ": " + e);
  int64_t n = numElements(shape);

  if (p.has_raw_data()) {
    if ((int64_t)p.raw_data().size() != want) {
      return Status::error(tensorLabel(p) + ": raw_data has " +
                           std::to_string(p.raw_data().size()) + " bytes but " + dtypeName(dtype) +
                           " shape " + shapeToString(shape) + " needs " + std::to_string(want));
    }
    Tensor t;
    TANDEM_RETURN_IF_ERROR(Tensor::tryAlloc(dtype, shape, tensorLabel(p), &t));
    // raw_data is little-endian by spec, as is every host we build for.
    if (want) std::memcpy(t.raw(), p.raw_data().data(), (size_t)want);
    if (dtype == DType::Bool) {
      uint8_t* b = t.data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) b[i] = b[i] ? 1 : 0;
    }
    *out = std::move(t);
    return Status::ok();
  }

  int64_t typed = 0;
  switch (dtype) {
    case DType::F32: typed = p.float_data_size(); break;
    case DType::F64: typed = p.double_data_size(); break;
    case DType::I64: typed = p.int64_data_size(); break;
    case DType::I32:
    case DType::Bool:
    case DType::U8:
    case DType::I8:
    case DType::U16:
    case DType::I16:
    case DType::F16:
    case DType::BF16: typed = p.int32_data_size(); break;
    case DType::U32:
    case DType::U64: typed = p.uint64_data_size(); break;
    default:
      return Status::error(tensorLabel(p) + ": data type " + onnxTypeName(code) +
                           " is not supported");
  }
  if (typed != n) {
    return Status::error(tensorLabel(p) + ": has " + std::to_string(typed) +
                         " elements in its typed data field but its shape " +
                         shapeToString(shape) + " needs " + std::to_string(n));
  }
  Tensor t;
  TANDEM_RETURN_IF_ERROR(Tensor::tryAlloc(dtype, shape, tensorLabel(p), &t));
  Status st;
  switch (dtype) {
    case DType::F32: st = copyTyped(p, p.float_data(), n, &t); break;
    case DType::F64: st = copyTyped(p, p.double_data(), n, &t); break;
    case DType::I64: st = copyTyped(p, p.int64_data(), n, &t); break;
    case DType::I32:
    case DType::Bool:
    case DType::U8:
    case DType::I8:
    case DType::U16:
    case DType::I16: st = copyTyped(p, p.int32_data(), n, &t); break;
    case DType::F16:
    case DType::BF16:
      // int32_data holds each f16's or bf16's bits in its low 16 bits (onnx.proto).
      for (int64_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = uint16_t(p.int32_data((int)i));
      break;
    case DType::U32:
    case DType::U64: st = copyTyped(p, p.uint64_data(), n, &t); break;
    default:
      return Status::error(tensorLabel(p) + ": data type " + onnxTypeName(code) +
                           " is not supported");
  }
  if (!st.isOk()) return st;
  *out = std::move(t);
  return Status::ok();
}

Status readTensorFile(const std::string& path, Tensor* out, std::string* name) {
  std::string bytes;
  TANDEM_RETURN_IF_ERROR(readInputFile(path, &bytes));
  return readTensorBytes(bytes, path, out, name);
}

Status readTensorBytes(const std::string& bytes, const std::string& path, Tensor* out,
                       std::string* name) {
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) {
    return Status::error(path + ": not a valid ONNX TensorProto (protobuf parse failed)");
  }
  Status st = tensorFromProto(p, out);
  if (!st.isOk()) return st.withContext(path);
  if (name) *name = p.name();
  return Status::ok();
}

Status writeTensorFile(const std::string& path, const Tensor& t, const std::string& name) {
  if (!t.defined()) return Status::error(path + ": cannot write an undefined tensor");
  if (t.device() != "cpu") {
    return Status::error(path + ": tensor lives on device '" + t.device() +
                         "'; copy it to the cpu before writing");
  }
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(static_cast<int32_t>(t.dtype()));  // f16/bf16: their bits, as onnx.proto says
  for (int64_t d : t.shape()) p.add_dims(d);
  p.set_raw_data(t.bytes() ? std::string(static_cast<const char*>(t.raw()), t.bytes())
                           : std::string());
  std::string bytes;
  if (!p.SerializeToString(&bytes)) return Status::error(path + ": protobuf serialization failed");

  // A reader never sees a half-written file: an O_EXCL temporary beside it, fsync, rename.
  return writeFileAtomic(path, bytes);
}

}  // namespace tandem

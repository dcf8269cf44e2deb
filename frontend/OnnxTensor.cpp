// ONNX TensorProto <-> runtime Tensor conversion and .pb tensor files (no MLIR).
#include "frontend/OnnxTensor.h"

#include <onnx/onnx_pb.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
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

Status tensorFromProto(const onnx::TensorProto& p, Tensor* out) {
  if (p.data_location() == onnx::TensorProto::EXTERNAL || p.external_data_size() > 0) {
    return Status::error(tensorLabel(p) +
                         ": uses external data (data_location=EXTERNAL), which is not supported; "
                         "re-save the model with its tensors embedded");
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

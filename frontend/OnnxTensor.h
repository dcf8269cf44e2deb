// ONNX TensorProto <-> runtime Tensor, and .pb test-data files (no MLIR).
#pragma once
#include <string>

#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace onnx { class TensorProto; }

namespace tandem {

/// Converts a TensorProto (raw_data or typed *_data fields; external data is an error) to an
/// owning Tensor. INT4 and UINT4 (two values a byte) are widened to I8 and U8. Errors name the
/// tensor and the reason (unsupported dtype, size mismatch).
Status tensorFromProto(const onnx::TensorProto& p, Tensor* out);
/// Reads a serialized TensorProto file (input_0.pb). `name` receives TensorProto.name.
Status readTensorFile(const std::string& path, Tensor* out, std::string* name = nullptr);
/// The same from the file's bytes (tests/fuzz feeds them); `source` names the file in errors.
Status readTensorBytes(const std::string& bytes, const std::string& source, Tensor* out,
                       std::string* name = nullptr);
/// Writes `t` as a TensorProto file (via a temporary and rename).
Status writeTensorFile(const std::string& path, const Tensor& t, const std::string& name);

}  // namespace tandem

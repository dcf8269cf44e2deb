// ONNX TensorProto <-> runtime Tensor, and .pb test-data files (no MLIR).
#pragma once
#include <string>

#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace onnx {
class ModelProto;
class TensorProto;
}

namespace tandem {

/// Converts a TensorProto (raw_data or typed *_data fields; external data is an error) to an
/// owning Tensor. INT4 and UINT4 (two values a byte) are widened to I8 and U8. Errors name the
/// tensor and the reason (unsupported dtype, size mismatch).
Status tensorFromProto(const onnx::TensorProto& p, Tensor* out);
/// Reads into raw_data the bytes of every tensor of `model` stored as ONNX external data
/// (data_location EXTERNAL; keys `location`, `offset`, `length`, and `checksum`, which is not
/// checked), as onnx.load does, so the model reads as if saved with its tensors embedded:
/// initializers, sparse initializers, attribute tensors (Constant's value), subgraphs and
/// model-local functions. `location` is relative to the directory of `modelPath` (the model file);
/// symbolic links are followed (Hugging Face's cache links blobs so), but an absolute location or
/// one with a ".." component is refused. A missing `length` reads to the end of the file.
/// Errors name the tensor and the file: a file that is missing or not a regular file, a range
/// past its end, a length other than the tensor's dims and dtype need (fixed-size dtypes),
/// more bytes than TANDEM_MAX_TENSOR_BYTES, a malformed offset or length. Nothing is read past
/// the first error. Models over protobuf's 2 GiB limit are stored this way (PyTorch's
/// exporter and Hugging Face Optimum write `model.onnx` + `model.onnx_data`).
Status loadExternalData(onnx::ModelProto* model, const std::string& modelPath);
/// Reads a serialized TensorProto file (input_0.pb). `name` receives TensorProto.name.
Status readTensorFile(const std::string& path, Tensor* out, std::string* name = nullptr);
/// The same from the file's bytes (tests/fuzz feeds them); `source` names the file in errors.
Status readTensorBytes(const std::string& bytes, const std::string& source, Tensor* out,
                       std::string* name = nullptr);
/// Writes `t` as a TensorProto file (via a temporary and rename).
Status writeTensorFile(const std::string& path, const Tensor& t, const std::string& name);

}  // namespace tandem

// Element types of tensors, numbered as ONNX TensorProto.DataType so that plans and ONNX agree.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem {

enum class DType : int32_t {
  Undefined = 0,
  F32 = 1,
  U8 = 2,
  I8 = 3,
  U16 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  Bool = 9,  // one byte per element, 0 or 1
  F16 = 10,  // IEEE binary16 bits (runtime/Half.h); only Cast/CastLike and data movement read it
  F64 = 11,
  U32 = 12,
  U64 = 13,
  BF16 = 16,  // bfloat16 bits, the high half of an f32 (runtime/Half.h); read like F16
};

/// Bytes per element; 0 for Undefined.
size_t dtypeSize(DType t);
/// "f32", "f64", "i32", "i64", "bool", "u8", "i8", "u16", "i16", "u32", "u64", "f16", "bf16";
/// "undefined" otherwise.
const char* dtypeName(DType t);
/// Inverse of dtypeName; returns false for an unknown name.
bool parseDType(const std::string& name, DType* out);
/// True for the ONNX codes Tandem knows (the enum values above).
bool isKnownDType(int32_t onnxCode);
inline bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}
/// The 16-bit floats (f16, bf16): stored as uint16_t bits, converted by runtime/Half.h, and read
/// only by the kernels that say so (Cast, CastLike, Max, Min, Mod); other ops run them in f32.
inline bool isHalfFloat(DType t) { return t == DType::F16 || t == DType::BF16; }
inline bool isInteger(DType t) {
  return t == DType::I32 || t == DType::I64 || t == DType::U8 || t == DType::I8 ||
         t == DType::U16 || t == DType::I16 || t == DType::U32 || t == DType::U64;
}

/// Calls f(T{}) with T the C++ type of `t` (float, double, int32_t, int64_t, bool as uint8_t via
/// `bool`, uint8_t, int8_t, uint16_t, int16_t, uint32_t, uint64_t). Returns false (without
/// calling) for Undefined/F16/BF16.
template <typename F>
bool dispatchDType(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return true;
    case DType::F64: f(double{}); return true;
    case DType::I32: f(int32_t{}); return true;
    case DType::I64: f(int64_t{}); return true;
    case DType::Bool: f(bool{}); return true;
    case DType::U8: f(uint8_t{}); return true;
    case DType::I8: f(int8_t{}); return true;
    case DType::U16: f(uint16_t{}); return true;
    case DType::I16: f(int16_t{}); return true;
    case DType::U32: f(uint32_t{}); return true;
    case DType::U64: f(uint64_t{}); return true;
    default: return false;
  }
}

template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::F32; }
template <> constexpr DType dtypeOf<double>() { return DType::F64; }
template <> constexpr DType dtypeOf<int32_t>() { return DType::I32; }
template <> constexpr DType dtypeOf<int64_t>() { return DType::I64; }
template <> constexpr DType dtypeOf<bool>() { return DType::Bool; }
template <> constexpr DType dtypeOf<uint8_t>() { return DType::U8; }
template <> constexpr DType dtypeOf<int8_t>() { return DType::I8; }
template <> constexpr DType dtypeOf<uint16_t>() { return DType::U16; }
template <> constexpr DType dtypeOf<int16_t>() { return DType::I16; }
template <> constexpr DType dtypeOf<uint32_t>() { return DType::U32; }
template <> constexpr DType dtypeOf<uint64_t>() { return DType::U64; }

}  // namespace tandem

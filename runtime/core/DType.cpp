// Element type names and sizes.
#include "runtime/DType.h"

namespace tandem {

size_t dtypeSize(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: case DType::U32: return 4;
    case DType::F64: case DType::I64: case DType::U64: return 8;
    case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
    case DType::U8: case DType::I8: case DType::Bool: return 1;
    default: return 0;
  }
}

const char* dtypeName(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
    case DType::I8: return "i8";
    case DType::Bool: return "bool";
    case DType::U16: return "u16";
    case DType::I16: return "i16";
    case DType::U32: return "u32";
    case DType::U64: return "u64";
    default: return "undefined";
  }
}

bool parseDType(const std::string& name, DType* out) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::I32, DType::I64, DType::U8,
                  DType::I8, DType::Bool, DType::U16, DType::I16, DType::U32, DType::U64,
                  DType::BF16}) {
    if (name == dtypeName(t)) { *out = t; return true; }
  }
  return false;
}

bool isKnownDType(int32_t c) {
  return (c >= 1 && c <= 7) || (c >= 9 && c <= 13) || c == 16;  // not 8 (string), 14/15 (complex)
}

}  // namespace tandem

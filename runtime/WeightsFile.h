// Weights files: a plan's constants stored outside it, content-addressed, so many plans of one
// model (placement policies x batch sizes) share one copy (`tandem compile --weights FILE`).
//
// Format (little-endian):
//   [0, 64)            header: magic "TNDMWTS1", u64 index offset, u64 index entries, zeros
//   [64, index offset) blobs, each at a multiple of 64 bytes (aligned loads, mmap-friendly)
//   [index offset, end) index: per blob 32-byte SHA-256 key, u64 offset, u64 bytes
// A blob's key is SHA-256 (FIPS 180-4) over the constant's dtype (i32, ONNX code), rank (i32),
// dims (i64 each) and bytes, so equal tensors of different types never share a blob. A plan
// refers to a blob by plan::ExternalData (file relative to the plan's directory, offset, bytes,
// hex key); the loader needs no index. Appending rewrites the file through a temporary and a
// rename, keeping every existing blob at its offset: plans written earlier stay valid.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/Plan.pb.h"
#include "runtime/Status.h"

namespace tandem {

/// Constants smaller than this stay in the plan: a reference costs about 100 bytes itself.
constexpr int64_t kMinExternalConstantBytes = 256;

/// Hex SHA-256 of a constant's identity: dtype (i32 LE), rank (i32 LE), dims (i64 LE), bytes.
std::string constantKey(int32_t dtype, const std::vector<int64_t>& dims, const void* data,
                        size_t bytes);

struct ExternalizeStats {
  int constants = 0;         // constants of the plan now referring to the file
  int64_t constantBytes = 0; // their bytes
  int newBlobs = 0;          // blobs appended (0 when another plan stored them already)
  int64_t newBytes = 0;
  int64_t fileBytes = 0;     // size of the weights file afterwards
};

/// Moves every CONSTANT value of `plan` of at least kMinExternalConstantBytes into the weights
/// file `weightsPath` (created if absent; blobs it already holds are not written again) and
/// replaces its data by an ExternalData reference naming `weightsPath` relative to the
/// directory of `planPath` (where the plan will be written). The file is rewritten atomically
/// (temporary + rename) only when blobs are added; concurrent writers in one directory are
/// serialised with flock on the directory. Errors: an existing file that is not a weights file
/// or is truncated, I/O failures (each names the file); on error the file is unchanged.
Status externalizeConstants(plan::Plan* plan, const std::string& weightsPath,
                            const std::string& planPath, ExternalizeStats* stats);

/// Replaces every external reference of `plan` (loaded from `planPath`) by the bytes it names,
/// read (mmap) from the file resolved relative to the directory of `planPath`. Checks the
/// header, the range against the file size, the byte count against the value's type and the
/// SHA-256 key. Errors name the file and the value: missing file, not a weights file, range
/// outside the file (truncated), size or hash mismatch (corrupt or rewritten).
Status resolveExternalConstants(plan::Plan* plan, const std::string& planPath);

}  // namespace tandem

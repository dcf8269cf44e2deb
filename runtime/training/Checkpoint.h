// Training checkpoints: named tensors plus resume state, saved atomically and checked on load.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace tandem {

/// The file format written by saveCheckpoint. Layout: 8 bytes magic "TNDMCKPT", the format
/// version (u32 little-endian), the payload's byte count (u64 LE), the SHA-256 of the payload
/// (32 bytes), then the payload: a serialized tandem.ckpt.Checkpoint (Checkpoint.proto). A
/// payload is one protobuf message, so a checkpoint holds at most 2 GiB - 1 bytes of tensors.
constexpr uint32_t kCheckpointFormatVersion = 1;

/// What a checkpoint holds. Tensors may have any dtype (DType.h) including f16; their bytes are
/// stored as-is (row-major, host byte order, which is little-endian on every supported host).
struct Checkpoint {
  uint32_t formatVersion = kCheckpointFormatVersion;  // set by loadCheckpoint; save ignores it
  /// Identifies the model the tensors belong to; load refuses another one. The Trainer passes
  /// checkpointFingerprint(variables).
  std::string fingerprint;
  int64_t step = 0;                             // optimizer steps taken so far
  int64_t epoch = 0;                            // the epoch in progress, 0-based
  int64_t positionInEpoch = 0;                  // samples of this epoch's order already consumed
  uint64_t shuffleSeed = 0;                     // the seed of shuffledOrder (frontend/Datasets.h)
  std::string rngState;                         // any other generator's state, opaque bytes
  std::map<std::string, std::string> metadata;  // free form (hyper-parameters, notes)
  std::map<std::string, Tensor> tensors;        // variables and optimizer state, by name
};

/// What load expects of one tensor: present, with this dtype and shape.
struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
};

/// A model fingerprint: the hex SHA-256 (64 chars) of the tensors' names, dtypes and shapes in
/// name order (not their values), so it changes when a variable is added, renamed or reshaped.
std::string checkpointFingerprint(const std::map<std::string, Tensor>& tensors);
std::string checkpointFingerprint(const std::vector<TensorSpec>& specs);

/// Writes `c` to `path` atomically (runtime/FileIO.h AtomicFile: mkstemp temporary in the same
/// directory, fsync, rename, fsync of the directory). Errors name `path`: a tensor that is not
/// on the host, undefined or with a bad dtype; the payload over 2 GiB; any write failure ("PATH:
/// write failed (File too large)" on a full disk or RLIMIT_FSIZE). On error the temporary is
/// removed and a previous file at `path` is left as it was.
Status saveCheckpoint(const std::string& path, const Checkpoint& c);

/// Reads `path` into *out. Refused, with an error starting with `path`: a file that is not a
/// checkpoint (bad magic), a newer format version, a truncated file (fewer bytes than the
/// header says), a corrupt one (SHA-256 mismatch, or a payload protobuf cannot parse), a tensor
/// whose byte count does not match its dtype and dims, a fingerprint other than
/// `expectedFingerprint` (both named; an empty expectedFingerprint accepts any), and when
/// `expected` is given, a tensor of it missing or with another dtype or shape (tensors the list
/// does not name are kept). *out is only written on success.
Status loadCheckpoint(const std::string& path, const std::string& expectedFingerprint,
                      Checkpoint* out, const std::vector<TensorSpec>* expected = nullptr);

/// A directory of checkpoints DIR/ckpt-<step>.tckpt (step in decimal, no padding) and a file
/// DIR/latest holding the newest one's file name and a newline, replaced atomically after the
/// checkpoint itself is durable. A crash at any point leaves `latest` naming a complete file.
class CheckpointDir {
 public:
  /// keepLast >= 1 checkpoints are kept by save (older ones by step are deleted).
  explicit CheckpointDir(std::string dir, int keepLast = 3);

  const std::string& dir() const { return dir_; }
  /// "DIR/ckpt-<step>.tckpt".
  std::string pathForStep(int64_t step) const;

  /// Creates DIR (one level) if missing, writes pathForStep(c.step), then `latest`, then deletes
  /// all but the newest keepLast checkpoints by step (never the one just written). A failure of
  /// the checkpoint leaves `latest` and every old file as they were; a failure to prune is not
  /// an error (the files stay). *written, when given, receives the file's path.
  Status save(const Checkpoint& c, std::string* written = nullptr);

  /// Loads the checkpoint `latest` names (loadCheckpoint's checks). Without `latest` (a crash
  /// between the checkpoint and the pointer) the highest step's file is used. *found = false,
  /// ok, when DIR has no checkpoint at all (or does not exist): a fresh start. A `latest` that
  /// names a missing or corrupt file is an error, not a silent resume from an older step.
  Status loadLatest(const std::string& expectedFingerprint, Checkpoint* out, bool* found,
                    const std::vector<TensorSpec>* expected = nullptr) const;

  /// The steps of the ckpt-<step>.tckpt files in DIR, ascending (empty if DIR is missing).
  Status steps(std::vector<int64_t>* out) const;

 private:
  std::string dir_;
  int keepLast_;
};

}  // namespace tandem

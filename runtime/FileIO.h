// Reading untrusted input files with a size limit, and writing output files atomically (no MLIR).
#pragma once
#include <cstdint>
#include <string>

#include "runtime/Status.h"

namespace tandem {

/// The most bytes a model, plan or tensor file may have: TANDEM_MAX_INPUT_BYTES when set to a
/// positive integer, else 2 GiB - 1 (protobuf cannot parse a larger message anyway).
int64_t maxInputFileBytes();

/// Reads the whole of `path` into *bytes. Refused before reading: a path that is not a regular
/// file (a directory, /dev/zero, a FIFO) and a file larger than maxInputFileBytes(). Errors
/// start with `path`: "PATH: cannot open KIND (No such file or directory)", "PATH: not a regular
/// file", "PATH: 3000000000 bytes, more than the limit of ... (TANDEM_MAX_INPUT_BYTES raises it)".
Status readInputFile(const std::string& path, std::string* bytes, const std::string& kind = "file");

/// An output file being written: a temporary created with mkstemp (O_EXCL, mode 0600 widened to
/// 0644) in the target's directory, named "<path>.tmp.XXXXXX", so a planted file or symlink is
/// never followed and a reader of `path` sees the old file or the whole new one.
class AtomicFile {
 public:
  AtomicFile() = default;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  /// Removes the temporary unless commit() succeeded.
  ~AtomicFile();
  /// Creates the temporary for `path`. Error: "PATH: cannot write (<errno text>)".
  Status open(const std::string& path);
  int fd() const { return fd_; }
  /// Writes all of [data, data + n); errors name the target path.
  Status write(const void* data, size_t n);
  /// fsync, close, rename over the target, fsync the target's directory. On an error before
  /// the rename the temporary is removed and the target is untouched.
  Status commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool done_ = false;
};

/// Writes `bytes` to `path` through an AtomicFile. On error nothing is left behind and the
/// message names `path` and the errno text.
Status writeFileAtomic(const std::string& path, const std::string& bytes);

}  // namespace tandem

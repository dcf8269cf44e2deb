// Size-limited reads of input files and mkstemp + fsync + rename writes of output files.
#include "runtime/FileIO.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tandem {

int64_t maxInputFileBytes() {
  static const int64_t limit = [] {
    if (const char* e = std::getenv("TANDEM_MAX_INPUT_BYTES")) {
      char* end = nullptr;
      long long v = std::strtoll(e, &end, 10);
      if (end && *end == '\0' && v > 0) return (int64_t)v;
    }
    return (int64_t)INT32_MAX;
  }();
  return limit;
}

Status readInputFile(const std::string& path, std::string* bytes, const std::string& kind) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::error(path + ": cannot open " + kind + " (" + std::strerror(errno) + ")");
  struct stat st;
  if (fstat(fd, &st) != 0) {
    std::string why = std::strerror(errno);
    close(fd);
    return Status::error(path + ": cannot open " + kind + " (" + why + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return Status::error(path + (S_ISDIR(st.st_mode) ? ": is a directory, not a " + kind
                                                     : ": not a regular file (a " + kind +
                                                           " must be one)"));
  }
  if ((int64_t)st.st_size > maxInputFileBytes()) {
    close(fd);
    return Status::error(path + ": " + std::to_string((int64_t)st.st_size) +
                         " bytes, more than the limit of " + std::to_string(maxInputFileBytes()) +
                         " bytes for an input file (TANDEM_MAX_INPUT_BYTES raises it)");
  }
  bytes->resize((size_t)st.st_size);
  size_t got = 0;
  while (got < bytes->size()) {
    ssize_t r = ::read(fd, bytes->data() + got, bytes->size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      std::string why = std::strerror(errno);
      close(fd);
      return Status::error(path + ": read failed (" + why + ")");
    }
    if (r == 0) break;  // shrank while reading: parse what is there
    got += (size_t)r;
  }
  bytes->resize(got);
  close(fd);
  return Status::ok();
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty() && !done_) std::remove(tmp_.c_str());
}

Status AtomicFile::open(const std::string& path) {
  path_ = path;
  std::vector<char> name(path.begin(), path.end());
  const char suffix[] = ".tmp.XXXXXX";
  name.insert(name.end(), suffix, suffix + sizeof suffix);  // with the NUL
  fd_ = mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) return Status::error(path + ": cannot write (" + std::strerror(errno) + ")");
  tmp_ = name.data();
  // mkstemp makes 0600; an output file is as readable as one written by open(2) with a 022 umask.
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd_, 0666 & ~mask);
  return Status::ok();
}

Status AtomicFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::error(path_ + ": write failed (" + std::strerror(errno) + ")");
    p += w;
    n -= (size_t)w;
  }
  return Status::ok();
}

Status AtomicFile::commit() {
  if (fsync(fd_) != 0) return Status::error(path_ + ": write failed (" + std::strerror(errno) + ")");
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return Status::error(path_ + ": write failed (" + std::strerror(errno) + ")");
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    return Status::error(path_ + ": cannot write (" + std::strerror(errno) + ")");
  done_ = true;
  // The rename is durable only once the directory entry is: without this a crash soon after
  // can leave the old file (or none) although commit() said ok.
  const size_t slash = path_.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return Status::error(path_ + ": cannot sync directory " + dir + " (" + std::strerror(errno) +
                         ")");
  int src = fsync(dfd);
  int err = errno;
  ::close(dfd);
  // Some file systems cannot fsync a directory (EINVAL); the rename is as durable as they allow.
  if (src != 0 && err != EINVAL)
    return Status::error(path_ + ": cannot sync directory " + dir + " (" + std::strerror(err) + ")");
  return Status::ok();
}

Status writeFileAtomic(const std::string& path, const std::string& bytes) {
  AtomicFile f;
  TANDEM_RETURN_IF_ERROR(f.open(path));
  TANDEM_RETURN_IF_ERROR(f.write(bytes.data(), bytes.size()));
  return f.commit();
}

}  // namespace tandem

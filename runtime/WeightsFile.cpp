// Weights files (format in WeightsFile.h): writing content-addressed blobs for `tandem compile
// --weights`, and resolving a plan's references to them at load.
#include "runtime/WeightsFile.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "runtime/DType.h"
#include "runtime/FileIO.h"

namespace tandem {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'T', 'N', 'D', 'M', 'W', 'T', 'S', '1'};
constexpr uint64_t kHeaderBytes = 64, kAlign = 64, kEntryBytes = 48;

std::string errnoText() { return std::strerror(errno); }

void putU64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back((char)(v >> (8 * i)));
}
uint64_t getU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string hex(const uint8_t* d, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += digits[d[i] >> 4], s += digits[d[i] & 15];
  return s;
}

// The raw 32-byte key (WeightsFile.h): SHA-256 over dtype, rank, dims, then the bytes.
std::string rawKey(int32_t dtype, const std::vector<int64_t>& dims, const void* data, size_t bytes) {
  std::string prefix;
  for (int i = 0; i < 4; ++i) prefix.push_back((char)((uint32_t)dtype >> (8 * i)));
  for (int i = 0; i < 4; ++i) prefix.push_back((char)((uint32_t)dims.size() >> (8 * i)));
  for (int64_t d : dims) putU64(&prefix, (uint64_t)d);
  uint8_t md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  bool ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(ctx.get(), prefix.data(), prefix.size()) == 1 &&
            (bytes == 0 || EVP_DigestUpdate(ctx.get(), data, bytes) == 1) &&
            EVP_DigestFinal_ex(ctx.get(), md, &len) == 1;
  // OpenSSL's SHA-256 fails only without memory; an empty key then matches nothing.
  return ok ? std::string((const char*)md, len) : std::string();
}

// A read-only mapping of a whole file.
struct Mapping {
  const uint8_t* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data && size) munmap(const_cast<uint8_t*>(data), size);
  }
};

Status mapFile(const std::string& path, Mapping* m) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::error(path + ": cannot open weights file (" + errnoText() + ")");
  struct stat st;
  if (fstat(fd, &st) != 0) {
    std::string why = errnoText();
    close(fd);
    return Status::error(path + ": cannot stat weights file (" + why + ")");
  }
  m->size = (size_t)st.st_size;
  if (m->size) {
    void* p = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      std::string why = errnoText();
      close(fd);
      m->size = 0;
      return Status::error(path + ": cannot map weights file (" + why + ")");
    }
    m->data = static_cast<const uint8_t*>(p);
  }
  close(fd);
  return Status::ok();
}

Status checkMagic(const std::string& path, const Mapping& m) {
  if (m.size < kHeaderBytes || std::memcmp(m.data, kMagic, sizeof kMagic) != 0)
    return Status::error(path + ": not a Tandem weights file (no TNDMWTS1 header)");
  return Status::ok();
}

// Checks the header and the index bounds (for writers; a reader needs no index); returns the
// index position and entry count.
Status readHeader(const std::string& path, const Mapping& m, uint64_t* indexOffset, uint64_t* entries) {
  TANDEM_RETURN_IF_ERROR(checkMagic(path, m));
  *indexOffset = getU64(m.data + 8);
  *entries = getU64(m.data + 16);
  if (*indexOffset < kHeaderBytes || *indexOffset > m.size ||
      *entries > (m.size - *indexOffset) / kEntryBytes)
    return Status::error(path + ": weights file index is outside the file of " +
                         std::to_string(m.size) + " bytes (truncated?)");
  return Status::ok();
}

// The weights file's name as the plan records it: relative to the plan's directory when both
// are under one root, so a folder of plans and weights can move as a whole.
std::string nameFromPlan(const std::string& weightsPath, const std::string& planPath) {
  fs::path w = fs::absolute(weightsPath).lexically_normal();
  fs::path dir = fs::absolute(planPath).lexically_normal().parent_path();
  fs::path rel = w.lexically_relative(dir);
  return rel.empty() ? w.string() : rel.string();
}

// An exclusive flock on `dir` for the lifetime of this object: compiles writing one weights
// file at once would otherwise each rename their own version over the other's.
struct DirLock {
  int fd = -1;
  explicit DirLock(const std::string& dir) {
    fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) flock(fd, LOCK_EX);
  }
  ~DirLock() {
    if (fd >= 0) close(fd);  // releases the lock
  }
};

}  // namespace

std::string constantKey(int32_t dtype, const std::vector<int64_t>& dims, const void* data, size_t bytes) {
  std::string k = rawKey(dtype, dims, data, bytes);
  return hex((const uint8_t*)k.data(), k.size());
}

Status externalizeConstants(plan::Plan* plan, const std::string& weightsPath,
                            const std::string& planPath, ExternalizeStats* stats) {
  *stats = ExternalizeStats{};
  fs::path wdir = fs::absolute(weightsPath).parent_path();
  DirLock lock(wdir.string());

  // 1. The blobs the file holds already, by key.
  std::map<std::string, std::pair<uint64_t, uint64_t>> have;  // key -> (offset, bytes)
  Mapping old;
  uint64_t blobEnd = kHeaderBytes;  // where the blob region of the existing file ends
  struct stat st;
  if (stat(weightsPath.c_str(), &st) == 0) {
    TANDEM_RETURN_IF_ERROR(mapFile(weightsPath, &old));
    uint64_t indexOffset = 0, entries = 0;
    TANDEM_RETURN_IF_ERROR(readHeader(weightsPath, old, &indexOffset, &entries));
    for (uint64_t i = 0; i < entries; ++i) {
      const uint8_t* e = old.data + indexOffset + i * kEntryBytes;
      uint64_t off = getU64(e + 32), n = getU64(e + 40);
      if (off < kHeaderBytes || off > indexOffset || n > indexOffset - off)
        return Status::error(weightsPath + ": weights file index entry " + std::to_string(i) +
                             " points outside the blob region (corrupt)");
      have[std::string((const char*)e, 32)] = {off, n};
    }
    blobEnd = indexOffset;
  } else if (errno != ENOENT) {
    return Status::error(weightsPath + ": cannot stat weights file (" + errnoText() + ")");
  }

  // 2. Every large constant gets a key; the new ones are laid out after the existing blobs.
  struct NewBlob {
    const std::string* raw;
    uint64_t offset;
  };
  std::vector<NewBlob> added;
  std::vector<std::string> addedKeys;
  uint64_t end = blobEnd;
  const std::string name = nameFromPlan(weightsPath, planPath);
  for (plan::Value& v : *plan->mutable_values()) {
    if (v.kind() != plan::Value::CONSTANT || (int64_t)v.constant().raw().size() < kMinExternalConstantBytes)
      continue;
    const plan::TensorData& t = v.constant();
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    std::string key = rawKey(t.dtype(), dims, t.raw().data(), t.raw().size());
    if (key.size() != 32) return Status::error("SHA-256 failed (out of memory?)");
    auto it = have.find(key);
    if (it == have.end()) {
      end = (end + kAlign - 1) / kAlign * kAlign;
      it = have.emplace(key, std::make_pair(end, (uint64_t)t.raw().size())).first;
      added.push_back({&t.raw(), end});
      addedKeys.push_back(key);
      end += t.raw().size();
      stats->newBlobs++;
      stats->newBytes += (int64_t)t.raw().size();
    }
    stats->constants++;
    stats->constantBytes += (int64_t)t.raw().size();
    plan::ExternalData* x = v.mutable_external();
    x->set_file(name);
    x->set_offset((int64_t)it->second.first);
    x->set_bytes((int64_t)it->second.second);
    x->set_sha256(hex((const uint8_t*)key.data(), key.size()));
  }

  // 3. Without new blobs the file stays as it is (not even rewritten).
  if (!added.empty()) {
    // An O_EXCL temporary beside the target (a planted file or symlink is never followed),
    // fsync'd and renamed over it; the AtomicFile removes it on any error.
    AtomicFile out;
    TANDEM_RETURN_IF_ERROR(out.open(weightsPath));
    // Header with the final index position, the old blob region as it was, the new blobs.
    std::string header(kMagic, sizeof kMagic);
    uint64_t indexOffset = (end + kAlign - 1) / kAlign * kAlign;
    putU64(&header, indexOffset);
    putU64(&header, have.size());
    header.resize(kHeaderBytes, '\0');
    TANDEM_RETURN_IF_ERROR(out.write(header.data(), header.size()));
    if (blobEnd > kHeaderBytes)
      TANDEM_RETURN_IF_ERROR(out.write(old.data + kHeaderBytes, blobEnd - kHeaderBytes));
    uint64_t pos = blobEnd;
    static const char zeros[kAlign] = {};
    for (const NewBlob& b : added) {
      TANDEM_RETURN_IF_ERROR(out.write(zeros, b.offset - pos));
      TANDEM_RETURN_IF_ERROR(out.write(b.raw->data(), b.raw->size()));
      pos = b.offset + b.raw->size();
    }
    TANDEM_RETURN_IF_ERROR(out.write(zeros, indexOffset - pos));
    std::string index;
    for (const auto& [key, where] : have) {
      index += key;
      putU64(&index, where.first);
      putU64(&index, where.second);
    }
    TANDEM_RETURN_IF_ERROR(out.write(index.data(), index.size()));
    TANDEM_RETURN_IF_ERROR(out.commit());
    stats->fileBytes = (int64_t)(indexOffset + index.size());
  } else {
    stats->fileBytes = (int64_t)old.size;
  }
  // The plan keeps only types for the moved constants.
  for (plan::Value& v : *plan->mutable_values())
    if (v.has_external()) v.mutable_constant()->clear_raw();
  return Status::ok();
}

Status resolveExternalConstants(plan::Plan* plan, const std::string& planPath) {
  fs::path dir = fs::path(planPath).parent_path();
  std::map<std::string, std::unique_ptr<Mapping>> files;  // resolved path -> mapping
  for (plan::Value& v : *plan->mutable_values()) {
    if (!v.has_external()) continue;
    const plan::ExternalData& x = v.external();
    const std::string what = "value '" + v.name() + "'";
    fs::path p = x.file();
    std::string path = (p.is_absolute() || dir.empty() ? p : dir / p).string();
    auto& m = files[path];
    if (!m) {
      m = std::make_unique<Mapping>();
      Status st = mapFile(path, m.get());
      if (!st.isOk()) return Status::error(st.message() + ", needed by " + what);
      // Not the index: each reference is checked on its own, so errors name the value.
      TANDEM_RETURN_IF_ERROR(checkMagic(path, *m));
    }
    if (!isKnownDType(v.constant().dtype()))
      return Status::error(what + ": unsupported dtype code " + std::to_string(v.constant().dtype()));
    std::vector<int64_t> dims(v.constant().dims().begin(), v.constant().dims().end());
    int64_t want = (int64_t)dtypeSize((DType)v.constant().dtype());
    for (int64_t d : dims) want *= d;
    if (x.bytes() != want)
      return Status::error(path + ": " + what + ": reference of " + std::to_string(x.bytes()) +
                           " bytes, its type needs " + std::to_string(want));
    if (x.offset() < (int64_t)kHeaderBytes || (uint64_t)x.offset() > m->size ||
        (uint64_t)x.bytes() > m->size - (uint64_t)x.offset())
      return Status::error(path + ": " + what + ": bytes [" + std::to_string(x.offset()) + ", +" +
                           std::to_string(x.bytes()) + ") are outside the file of " +
                           std::to_string(m->size) + " bytes (truncated or not this plan's file?)");
    const uint8_t* data = m->data + x.offset();
    if (constantKey(v.constant().dtype(), dims, data, (size_t)x.bytes()) != x.sha256())
      return Status::error(path + ": " + what + ": content does not match its SHA-256 " +
                           x.sha256().substr(0, 16) + "... (corrupt, or rewritten since the plan "
                           "was compiled)");
    v.mutable_constant()->set_raw(data, (size_t)x.bytes());
    v.clear_external();
  }
  return Status::ok();
}

}  // namespace tandem

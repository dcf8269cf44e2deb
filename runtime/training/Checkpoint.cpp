// Checkpoint files (a checked header around a protobuf payload) and the checkpoint directory.
#include "runtime/training/Checkpoint.h"

#include <dirent.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "runtime/FileIO.h"
#include "runtime/training/Checkpoint.pb.h"

namespace tandem {
namespace {

constexpr char kMagic[8] = {'T', 'N', 'D', 'M', 'C', 'K', 'P', 'T'};
constexpr size_t kHeaderBytes = 8 + 4 + 8 + 32;
constexpr char kLatest[] = "latest";

// The raw 32-byte SHA-256 of [data, data + n); empty only if OpenSSL runs out of memory.
std::string sha256(const void* data, size_t n) {
  uint8_t md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  bool ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1 &&
            (n == 0 || EVP_DigestUpdate(ctx.get(), data, n) == 1) &&
            EVP_DigestFinal_ex(ctx.get(), md, &len) == 1;
  return ok ? std::string(reinterpret_cast<char*>(md), len) : std::string();
}

std::string hex(const std::string& raw) {
  static const char d[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : raw) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

void putLE(std::string* s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s->push_back((char)(v >> (8 * i) & 0xff));
}
uint64_t getLE(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= (uint64_t)(unsigned char)s[at + i] << (8 * i);
  return v;
}

std::string specLine(const std::string& name, DType t, const Shape& s) {
  return name + "\t" + dtypeName(t) + "\t" + shapeToString(s) + "\n";
}

bool parseStep(const char* name, int64_t* step) {
  // "ckpt-<digits>.tckpt", nothing else (a temporary "ckpt-3.tckpt.tmp.XXXXXX" is not one).
  const char* p = name;
  if (std::strncmp(p, "ckpt-", 5) != 0) return false;
  p += 5;
  if (*p < '0' || *p > '9') return false;
  int64_t v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (*p - '0');
  }
  if (std::strcmp(p, ".tckpt") != 0) return false;
  *step = v;
  return true;
}

}  // namespace

std::string checkpointFingerprint(const std::vector<TensorSpec>& specs) {
  std::vector<std::string> lines;
  for (const auto& s : specs) lines.push_back(specLine(s.name, s.dtype, s.shape));
  std::sort(lines.begin(), lines.end());
  std::string all;
  for (const auto& l : lines) all += l;
  return hex(sha256(all.data(), all.size()));
}

std::string checkpointFingerprint(const std::map<std::string, Tensor>& tensors) {
  std::vector<TensorSpec> specs;
  for (const auto& [name, t] : tensors) specs.push_back({name, t.dtype(), t.shape()});
  return checkpointFingerprint(specs);
}

Status saveCheckpoint(const std::string& path, const Checkpoint& c) {
  ckpt::Checkpoint p;
  p.set_fingerprint(c.fingerprint);
  p.set_step(c.step);
  p.set_epoch(c.epoch);
  p.set_position_in_epoch(c.positionInEpoch);
  p.set_shuffle_seed(c.shuffleSeed);
  p.set_rng_state(c.rngState);
  for (const auto& [k, v] : c.metadata) (*p.mutable_metadata())[k] = v;
  size_t tensorBytes = 0;
  for (const auto& [name, t] : c.tensors) {
    const std::string what = path + ": tensor '" + name + "'";
    if (!t.defined() || dtypeSize(t.dtype()) == 0)
      return Status::error(what + " has no dtype (an undefined tensor)");
    if (t.numel() < 0) return Status::error(what + " has a bad shape " + shapeToString(t.shape()));
    if (t.device() != "cpu")
      return Status::error(what + " is on " + t.device() + "; copy it to the host first");
    if (t.bytes() > 0 && !t.raw()) return Status::error(what + " has no data");
    tensorBytes += t.bytes();
    if (tensorBytes >= (size_t)INT32_MAX)
      return Status::error(path + ": the tensors pass 2 GiB, more than one checkpoint holds");
    auto* nt = p.add_tensors();
    nt->set_name(name);
    auto* td = nt->mutable_tensor();
    td->set_dtype((int32_t)t.dtype());
    for (int64_t d : t.shape()) td->add_dims(d);
    td->set_raw(t.raw(), t.bytes());
  }
  std::string payload;
  if (p.ByteSizeLong() >= (size_t)INT32_MAX || !p.SerializeToString(&payload))
    return Status::error(path + ": the checkpoint passes 2 GiB, more than one file holds");
  std::string digest = sha256(payload.data(), payload.size());
  if (digest.size() != 32) return Status::error(path + ": SHA-256 failed (out of memory?)");
  std::string header(kMagic, sizeof kMagic);
  putLE(&header, kCheckpointFormatVersion, 4);
  putLE(&header, payload.size(), 8);
  header += digest;
  AtomicFile f;
  TANDEM_RETURN_IF_ERROR(f.open(path));
  TANDEM_RETURN_IF_ERROR(f.write(header.data(), header.size()));
  TANDEM_RETURN_IF_ERROR(f.write(payload.data(), payload.size()));
  return f.commit();
}

Status loadCheckpoint(const std::string& path, const std::string& expectedFingerprint,
                      Checkpoint* out, const std::vector<TensorSpec>* expected) {
  std::string bytes;
  TANDEM_RETURN_IF_ERROR(readInputFile(path, &bytes, "checkpoint"));
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return Status::error(path + ": not a Tandem checkpoint (no \"TNDMCKPT\" header)");
  if (bytes.size() < kHeaderBytes)
    return Status::error(path + ": truncated checkpoint (" + std::to_string(bytes.size()) +
                         " bytes, shorter than its " + std::to_string(kHeaderBytes) +
                         "-byte header)");
  const uint32_t version = (uint32_t)getLE(bytes, 8, 4);
  if (version == 0 || version > kCheckpointFormatVersion)
    return Status::error(path + ": checkpoint format version " + std::to_string(version) +
                         ", this build reads up to " + std::to_string(kCheckpointFormatVersion));
  const uint64_t size = getLE(bytes, 12, 8);
  if (size != bytes.size() - kHeaderBytes)
    return Status::error(path + (size > bytes.size() - kHeaderBytes ? ": truncated" : ": corrupt") +
                         " checkpoint (header says " + std::to_string(size) +
                         " payload bytes, the file has " +
                         std::to_string(bytes.size() - kHeaderBytes) + ")");
  const char* payload = bytes.data() + kHeaderBytes;
  if (sha256(payload, size) != bytes.substr(20, 32))
    return Status::error(path + ": corrupt checkpoint (SHA-256 of the payload does not match)");
  ckpt::Checkpoint p;
  if (!p.ParseFromArray(payload, (int)size))
    return Status::error(path + ": corrupt checkpoint (the payload does not parse)");
  if (!expectedFingerprint.empty() && p.fingerprint() != expectedFingerprint)
    return Status::error(path + ": checkpoint of another model (its fingerprint " +
                         p.fingerprint() + ", this model's " + expectedFingerprint + ")");
  Checkpoint c;
  c.formatVersion = version;
  c.fingerprint = p.fingerprint();
  c.step = p.step();
  c.epoch = p.epoch();
  c.positionInEpoch = p.position_in_epoch();
  c.shuffleSeed = p.shuffle_seed();
  c.rngState = p.rng_state();
  c.metadata.insert(p.metadata().begin(), p.metadata().end());
  for (const auto& nt : p.tensors()) {
    const std::string what = path + ": tensor '" + nt.name() + "'";
    const auto& td = nt.tensor();
    if (!isKnownDType(td.dtype()) || td.dtype() == 0)
      return Status::error(what + " has an unknown dtype code " + std::to_string(td.dtype()));
    Shape shape(td.dims().begin(), td.dims().end());
    Tensor t;
    TANDEM_RETURN_IF_ERROR(Tensor::tryAlloc((DType)td.dtype(), shape, what, &t));
    if (td.raw().size() != t.bytes())
      return Status::error(what + " has " + std::to_string(td.raw().size()) + " bytes, " +
                           dtypeName(t.dtype()) + " " + shapeToString(shape) + " needs " +
                           std::to_string(t.bytes()));
    if (t.bytes() > 0) std::memcpy(t.raw(), td.raw().data(), t.bytes());
    if (!c.tensors.emplace(nt.name(), t).second) return Status::error(what + " appears twice");
  }
  if (expected) {
    for (const auto& s : *expected) {
      auto it = c.tensors.find(s.name);
      if (it == c.tensors.end())
        return Status::error(path + ": the checkpoint has no tensor '" + s.name + "'");
      const Tensor& t = it->second;
      if (t.dtype() != s.dtype || t.shape() != s.shape)
        return Status::error(path + ": tensor '" + s.name + "' is " + dtypeName(t.dtype()) + " " +
                             shapeToString(t.shape()) + ", the model expects " +
                             dtypeName(s.dtype) + " " + shapeToString(s.shape));
    }
  }
  *out = std::move(c);
  return Status::ok();
}

CheckpointDir::CheckpointDir(std::string dir, int keepLast)
    : dir_(std::move(dir)), keepLast_(std::max(1, keepLast)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

std::string CheckpointDir::pathForStep(int64_t step) const {
  return dir_ + "/ckpt-" + std::to_string(step) + ".tckpt";
}

Status CheckpointDir::steps(std::vector<int64_t>* out) const {
  out->clear();
  DIR* d = opendir(dir_.c_str());
  if (!d) {
    if (errno == ENOENT) return Status::ok();
    return Status::error(dir_ + ": cannot list the checkpoint directory (" + std::strerror(errno) +
                         ")");
  }
  while (dirent* e = readdir(d)) {
    int64_t step;
    if (parseStep(e->d_name, &step)) out->push_back(step);
  }
  closedir(d);
  std::sort(out->begin(), out->end());
  return Status::ok();
}

Status CheckpointDir::save(const Checkpoint& c, std::string* written) {
  if (c.step < 0)
    return Status::error(dir_ + ": checkpoint step " + std::to_string(c.step) + " is negative");
  if (mkdir(dir_.c_str(), 0777) != 0 && errno != EEXIST)
    return Status::error(dir_ + ": cannot create the checkpoint directory (" +
                         std::strerror(errno) + ")");
  const std::string path = pathForStep(c.step);
  TANDEM_RETURN_IF_ERROR(saveCheckpoint(path, c));
  TANDEM_RETURN_IF_ERROR(
      writeFileAtomic(dir_ + "/" + kLatest, "ckpt-" + std::to_string(c.step) + ".tckpt\n"));
  if (written) *written = path;
  std::vector<int64_t> all;
  if (steps(&all).isOk() && (int64_t)all.size() > keepLast_) {
    // Oldest first; the one just written survives even when an older run left higher steps.
    int64_t excess = (int64_t)all.size() - keepLast_;
    for (int64_t s : all) {
      if (excess == 0) break;
      if (s == c.step) continue;
      std::remove(pathForStep(s).c_str());
      --excess;
    }
  }
  return Status::ok();
}

Status CheckpointDir::loadLatest(const std::string& expectedFingerprint, Checkpoint* out,
                                 bool* found, const std::vector<TensorSpec>* expected) const {
  *found = false;
  const std::string latest = dir_ + "/" + kLatest;
  std::string name;
  struct stat st;
  if (stat(latest.c_str(), &st) == 0) {
    TANDEM_RETURN_IF_ERROR(readInputFile(latest, &name, "checkpoint pointer"));
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
    int64_t step;
    if (!parseStep(name.c_str(), &step))
      return Status::error(latest + ": does not name a checkpoint (\"ckpt-<step>.tckpt\")");
  } else {
    std::vector<int64_t> all;
    TANDEM_RETURN_IF_ERROR(steps(&all));
    if (all.empty()) return Status::ok();
    name = "ckpt-" + std::to_string(all.back()) + ".tckpt";
  }
  TANDEM_RETURN_IF_ERROR(loadCheckpoint(dir_ + "/" + name, expectedFingerprint, out, expected));
  *found = true;
  return Status::ok();
}

}  // namespace tandem

// The kernel timing cache file: keys, JSON reading and merging, atomic writes.
#include "runtime/TimingCache.h"
#include "KernelSourcesId.h"  // generated: TANDEM_KERNEL_SOURCES_ID

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tandem {

namespace {

constexpr const char* kFormat = "tandem-kernel-timings";
constexpr int kVersion = 1;

std::string typeText(const TensorType& t) {
  if (!t.present()) return "-";
  return std::string(dtypeName(t.dtype)) + shapeToString(t.shape);
}

std::string floatText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// FNV-1a over a tensor attribute's bytes: keys stay short and still change with the values.
uint64_t fnv1a(const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

std::string attrText(const Attr& a) {
  std::ostringstream os;
  switch (a.kind) {
    case Attr::Kind::Int: os << a.i; break;
    case Attr::Kind::Float: os << floatText(a.f); break;
    case Attr::Kind::String: os << '"' << a.s << '"'; break;
    case Attr::Kind::Ints:
      os << '[';
      for (size_t i = 0; i < a.ints.size(); ++i) os << (i ? "," : "") << a.ints[i];
      os << ']';
      break;
    case Attr::Kind::Floats:
      os << '[';
      for (size_t i = 0; i < a.floats.size(); ++i) os << (i ? "," : "") << floatText(a.floats[i]);
      os << ']';
      break;
    case Attr::Kind::Strings:
      os << '[';
      for (size_t i = 0; i < a.strings.size(); ++i) os << (i ? "," : "") << '"' << a.strings[i] << '"';
      os << ']';
      break;
    case Attr::Kind::Tensor:
      os << "tensor:" << dtypeName(a.t.dtype()) << shapeToString(a.t.shape()) << ":" << std::hex
         << fnv1a(a.t.raw(), a.t.bytes());
      break;
    case Attr::Kind::Graph: os << "graph:" << std::hex << fnv1a(a.s.data(), a.s.size()); break;
  }
  return os.str();
}

struct FileContents {
  std::map<std::string, KernelTimings> entries;
  std::map<std::string, OpTiming> ops;
};

bool readEntries(const nlohmann::json& j, FileContents* file) {
  std::map<std::string, KernelTimings>* out = &file->entries;
  if (!j.is_object() || j.value("format", "") != kFormat || j.value("version", 0) != kVersion ||
      !j.contains("entries") || !j["entries"].is_object())
    return false;
  for (auto& [key, e] : j["entries"].items()) {
    if (!e.is_object()) return false;
    KernelTimings t;
    if (e.contains("seconds"))
      for (auto& [v, s] : e["seconds"].items()) {
        if (!s.is_number() || s.get<double>() < 0) return false;
        t.seconds[v] = s.get<double>();
      }
    if (e.contains("impls"))
      for (auto& [v, s] : e["impls"].items())
        if (s.is_string()) t.impls[v] = s.get<std::string>();
    if (e.contains("failed"))
      for (auto& [v, s] : e["failed"].items())
        if (s.is_string()) t.failed[v] = s.get<std::string>();
    (*out)[key] = std::move(t);
  }
  if (j.contains("ops")) {
    if (!j["ops"].is_object()) return false;
    for (auto& [key, e] : j["ops"].items()) {
      if (!e.is_object() || !e.contains("seconds") || !e["seconds"].is_number()) return false;
      OpTiming t;
      t.seconds = e["seconds"].get<double>();
      if (e.contains("variant") && e["variant"].is_string()) t.variant = e["variant"].get<std::string>();
      file->ops[key] = std::move(t);
    }
  }
  return true;
}

// Reads `path`: 0 missing, 1 read, -1 unusable (*why says what).
int readFile(const std::string& path, FileContents* out, std::string* why) {
  std::ifstream in(path);
  if (!in) return 0;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *why = "not valid JSON";
    return -1;
  }
  FileContents entries;
  if (!readEntries(j, &entries)) {
    *why = std::string("not a ") + kFormat + " version " + std::to_string(kVersion) + " file";
    return -1;
  }
  *out = std::move(entries);
  return 1;
}

}  // namespace

std::string kernelSourcesId() { return TANDEM_KERNEL_SOURCES_ID; }

std::string defaultTimingCachePath() {
  if (const char* p = std::getenv("TANDEM_TUNING_CACHE"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/tandem/kernel-timings.json";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/tandem/kernel-timings.json";
  return "";
}

namespace {
std::string timingKey(const TimingHost& host, const KernelContext& ctx, bool withLayouts) {
  std::ostringstream os;
  os << "cpu=" << host.cpuModel << "|isa=" << host.isa << "|kernels=" << host.kernels
     << "|threads=" << ctx.threads
     << "|op=" << ctx.opType << "|attrs={";
  if (ctx.attrs) {
    bool first = true;
    for (const auto& [name, a] : ctx.attrs->all()) {
      if (!withLayouts && (name == "input_layouts" || name == "output_layouts")) continue;
      os << (first ? "" : ",") << name << ":" << attrText(a);
      first = false;
    }
  }
  os << "}|in=";
  for (size_t i = 0; i < ctx.inputTypes.size(); ++i) {
    os << (i ? "," : "") << typeText(ctx.inputTypes[i]);
    if (i < ctx.constInputs.size() && ctx.constInputs[i]) os << "c";
  }
  os << "|out=";
  for (size_t i = 0; i < ctx.outputTypes.size(); ++i) os << (i ? "," : "") << typeText(ctx.outputTypes[i]);
  return os.str();
}
}  // namespace

std::string kernelTimingKey(const TimingHost& host, const KernelContext& ctx) {
  return timingKey(host, ctx, true);
}

std::string kernelOpTimingKey(const TimingHost& host, const KernelContext& ctx) {
  return timingKey(host, ctx, false);
}

bool timingCacheOffByEnvironment() {
  const char* t = std::getenv("TANDEM_TUNING");
  return t && std::string(t) == "off";
}

bool KernelTimings::covers(const std::vector<std::string>& candidates) const {
  for (const std::string& c : candidates)
    if (!seconds.count(c) && !failed.count(c)) return false;
  return true;
}

std::string KernelTimings::fastest(const std::vector<std::string>& candidates) const {
  std::string best;
  double bestS = std::numeric_limits<double>::infinity();
  for (const std::string& c : candidates) {
    auto it = seconds.find(c);
    if (it != seconds.end() && it->second < bestS) {
      best = c;
      bestS = it->second;
    }
  }
  return best;
}

void TimingCache::load(const std::string& path, std::string* note) {
  entries_.clear();
  added_.clear();
  ops_.clear();
  addedOps_.clear();
  std::string why;
  FileContents file;
  if (readFile(path, &file, &why) < 0)
    *note = "kernel timing cache " + path + " ignored (" + why + "); it will be replaced";
  entries_ = std::move(file.entries);
  ops_ = std::move(file.ops);
  opTypes_.clear();
  for (const auto& kv : ops_) noteOpType(kv.first);
}

const OpTiming* TimingCache::findOp(const std::string& key) const {
  auto it = ops_.find(key);
  return it == ops_.end() ? nullptr : &it->second;
}

void TimingCache::putOp(const std::string& key, OpTiming t) {
  noteOpType(key);
  ops_[key] = std::move(t);
  addedOps_.insert(key);
}

const KernelTimings* TimingCache::find(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void TimingCache::put(const std::string& key, KernelTimings t) {
  entries_[key] = std::move(t);
  added_.insert(key);
}

void TimingCache::noteOpType(const std::string& key) {
  // Keys read "...|op=TYPE|attrs=..." (timingKey above).
  size_t b = key.find("|op=");
  if (b == std::string::npos) return;
  b += 4;
  opTypes_.insert(key.substr(b, key.find('|', b) - b));
}

Status TimingCache::save(const std::string& path) const {
  namespace fs = std::filesystem;
  FileContents onDisk;
  std::string why;
  readFile(path, &onDisk, &why);  // an unusable file is replaced
  std::map<std::string, KernelTimings>& merged = onDisk.entries;
  for (const std::string& k : added_) merged[k] = entries_.at(k);
  for (const std::string& k : addedOps_) onDisk.ops[k] = ops_.at(k);
  nlohmann::json entries = nlohmann::json::object();
  for (const auto& [k, t] : merged) {
    nlohmann::json e;
    e["seconds"] = t.seconds;
    if (!t.impls.empty()) e["impls"] = t.impls;
    if (!t.failed.empty()) e["failed"] = t.failed;
    entries[k] = std::move(e);
  }
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [k, t] : onDisk.ops) ops[k] = {{"seconds", t.seconds}, {"variant", t.variant}};
  nlohmann::json j = {{"format", kFormat}, {"version", kVersion}, {"entries", std::move(entries)},
                      {"ops", std::move(ops)}};
  std::error_code ec;
  fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) return Status::error("kernel timing cache: cannot create " + target.parent_path().string() + ": " + ec.message());
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(1) << "\n";
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      return Status::error("kernel timing cache: cannot write " + tmp);
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::error("kernel timing cache: cannot rename " + tmp + " to " + path);
  }
  return Status::ok();
}

}  // namespace tandem

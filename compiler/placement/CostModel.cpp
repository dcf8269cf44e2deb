// Roofline op times, link transfer times, and calibration profiles (schema in CostModel.h).
#include "compiler/placement/CostModel.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/Device.h"

namespace tandem {

using nlohmann::json;

double MeasuredCurve::at(double x) const {
  assert(!points.empty());
  if (points.size() == 1 || !(x > points.front().first)) return points.front().second;
  if (x >= points.back().first) return points.back().second;
  auto hi = std::upper_bound(
      points.begin(), points.end(), x,
      [](double v, const std::pair<double, double>& p) { return v < p.first; });
  auto lo = hi - 1;
  double t = (std::log(x) - std::log(lo->first)) / (std::log(hi->first) - std::log(lo->first));
  return lo->second + t * (hi->second - lo->second);
}

CostModel::CostModel(DeviceSet devices, CostOptions options)
    : devices_(std::move(devices)),
      options_(options),
      cal_(devices_.size()),
      hasCal_(devices_.size(), false) {}

const DeviceCalibration* CostModel::calibration(size_t device) const {
  return device < cal_.size() && hasCal_[device] ? &cal_[device] : nullptr;
}

Precision CostModel::precisionFor(const OpWork& w, size_t device) const {
  const DeviceSpec& d = devices_.device(device);
  const bool matrix = w.cls == OpClass::Gemm || w.cls == OpClass::Conv;
  if (w.dtype == DType::F64) return Precision::F64;
  if (w.dtype == DType::F16 && matrix) return Precision::F16;
  if (w.dtype == DType::BF16 && matrix) return Precision::BF16;
  if (w.dtype == DType::F32 && matrix && options_.allowTf32 && d.peakTf32FlopsPerSec > 0)
    return Precision::TF32;
  return Precision::F32;
}

OpCost CostModel::opCost(const OpWork& w, size_t device) const {
  assert(device < devices_.size());
  OpCost c;
  const DeviceSpec& d = devices_.device(device);
  c.precision = precisionFor(w, device);
  if (w.measuredCpuSeconds >= 0 && d.kind == DeviceKind::Cpu && d.model == "x86-64") {
    // This machine's CPU ran this kernel (the runtime's timing cache), whatever its kind: no
    // model needed. The runtime timed the whole launch, dispatch included, so none is added.
    c.computeSec = w.measuredCpuSeconds;
    c.seconds = c.computeSec;
    c.source = "measured";
    return c;
  }
  if (w.cls == OpClass::Free) {
    c.source = "free";
    return c;
  }
  if (w.reshape && !(w.bytes > 0) && d.isGpu()) {
    c.source = "free";  // in place: the CUDA kernel enqueues nothing
    return c;
  }
  const DeviceCalibration* cal = calibration(device);
  c.overheadSec = cal && cal->dispatchOverheadSec >= 0 ? cal->dispatchOverheadSec
                                                       : d.dispatchOverheadSec;
  bool calibrated = cal && cal->dispatchOverheadSec >= 0;

  double flopRate = d.peakFlops(c.precision);
  // The measured curves were taken in f32 on the device's default math; they stand for the
  // op's rate only in that arithmetic.
  const bool f32Math = c.precision == Precision::F32;
  if (cal && f32Math && w.cls == OpClass::Gemm && !cal->gemm.empty() && w.flops > 0) {
    flopRate = cal->gemm.at(std::cbrt(w.flops / 2));
    calibrated = true;
  } else if (cal && f32Math && w.cls == OpClass::Conv && !cal->conv.empty() && w.flops > 0) {
    flopRate = cal->conv.at(w.flops);
    calibrated = true;
  }
  // Memory: activations at the measured elementwise curve's rate for this op's footprint (it
  // runs from cache below the cache sizes), else at DRAM bandwidth. Weights are read every run:
  // when all of the plan's fit in the last-level cache with this op's other bytes they stay
  // there between steps and runs, so they come at the cache's rate (the curve's at the
  // footprint, or DeviceSpec::cacheBandwidthBytesPerSec); when they do not, from DRAM (the
  // curve's largest size, or DRAM bandwidth). Without a known cache size: as activations.
  const bool curve = cal && !cal->elementwise.empty();
  const double llc = (double)d.lastLevelCacheBytes;
  const bool knowsCache = llc > 0 && d.cacheBandwidthBytesPerSec > 0;
  if (w.bytes > 0) {
    if (curve) calibrated = true;
    const double weights = std::min(std::max(w.constantBytes, 0.0), w.bytes);
    const double others = w.bytes - weights;
    const double dram = curve ? cal->elementwise.points.back().second : d.memoryBandwidthBytesPerSec;
    const double footprint = curve ? cal->elementwise.at(w.bytes) : d.memoryBandwidthBytesPerSec;
    double weightRate = footprint;
    if (knowsCache && weights > 0)
      weightRate = w.planConstantBytes + others <= llc
                       ? (curve ? footprint : d.cacheBandwidthBytesPerSec)
                       : dram;
    c.memorySec = others / footprint + weights / weightRate;
  }
  c.computeSec = w.flops > 0 ? w.flops / flopRate : 0;
  if (d.isGpu() && d.enqueueSec > 0 && !(cal && cal->dispatchOverheadSec >= 0)) {
    // Kernels on one stream: the host enqueues ahead while the GPU runs earlier ones, so the
    // launch hides behind execution and only the host's enqueue bounds tiny kernels. The full
    // launch latency is charged where the GPU's queue runs dry (crossingTime).
    c.overheadSec = d.enqueueSec;
    c.seconds = std::max(c.overheadSec, std::max(c.computeSec, c.memorySec));
  } else {
    c.seconds = c.overheadSec + std::max(c.computeSec, c.memorySec);
  }
  c.source = calibrated ? "calibrated" : "roofline";
  return c;
}

void CostModel::loadKernelTimings(const std::string& path) {
  const std::string p = path.empty() ? defaultTimingCachePath() : path;
  if (p.empty()) return;
  std::string note;
  kernelTimings_.load(p, &note);
  if (!note.empty()) notes_.push_back(note);
  host_.cpuModel = cpuModelName();
  host_.isa = cpuEffectiveIsa();
  timingThreads_.clear();
  for (int t : {defaultThreads(nullptr, 3), availableCores(), 1})
    if (std::find(timingThreads_.begin(), timingThreads_.end(), t) == timingThreads_.end())
      timingThreads_.push_back(t);
}

double CostModel::measuredCpuSeconds(const KernelContext& op) const {
  if (timingThreads_.empty() || !kernelTimings_.hasOpType(op.opType)) return -1;
  KernelContext c = op;
  for (int t : timingThreads_) {
    c.threads = t;
    if (const OpTiming* m = kernelTimings_.findOp(kernelOpTimingKey(host_, c))) return m->seconds;
  }
  return -1;
}

double CostModel::transferTime(size_t from, size_t to, double bytes, HostMemory m) const {
  if (from == to) return 0;
  const Link* l = devices_.link(from, to);
  assert(l && "device index out of range");
  return l->latencySec + bytes / l->bytesPerSec(m);
}

double CostModel::returnTime(size_t from, size_t to, double bytes, HostMemory m) const {
  double t = transferTime(from, to, bytes, m);
  if (from != to && devices_.device(from).isGpu() && !devices_.device(to).isGpu())
    t += devices_.device(from).syncLatencySec;
  return t;
}

double CostModel::crossingTime(size_t from, size_t to, double bytes, HostMemory m) const {
  // A return's host wait, then the launch the next kernel pays on the drained GPU.
  double t = returnTime(from, to, bytes, m);
  if (from != to && devices_.device(from).isGpu() && !devices_.device(to).isGpu())
    t += devices_.device(from).dispatchOverheadSec;
  return t;
}

double CostModel::transferTime(const std::string& from, const std::string& to, double bytes,
                               HostMemory m) const {
  int a = devices_.indexOf(from), b = devices_.indexOf(to);
  if (a < 0 || b < 0) return std::numeric_limits<double>::infinity();
  return transferTime((size_t)a, (size_t)b, bytes, m);
}

// ---- Profiles ----

namespace {

// RFC 6901 escaping of one JSON-pointer token.
std::string token(const std::string& key) {
  std::string s;
  for (char ch : key) {
    if (ch == '~') s += "~0";
    else if (ch == '/') s += "~1";
    else s += ch;
  }
  return s;
}

struct ProfileReader {
  std::string source;

  Status fail(const std::string& path, const std::string& msg) const {
    return Status::error(source + ": " + path + ": " + msg);
  }

  Status positive(const json& obj, const char* key, const std::string& path, bool required,
                  double* out) const {
    auto it = obj.find(key);
    std::string p = path + "/" + key;
    if (it == obj.end())
      return required ? fail(p, "missing (expected a positive number)") : Status::ok();
    if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>()))
      return fail(p, "expected a positive number, got " + it->dump());
    *out = it->get<double>();
    return Status::ok();
  }

  Status curve(const json& dev, const char* key, const char* xKey, const char* yKey,
               const std::string& path, MeasuredCurve* out) const {
    auto it = dev.find(key);
    if (it == dev.end()) return Status::ok();
    std::string p = path + "/" + key;
    if (!it->is_array() || it->empty())
      return fail(p, std::string("expected a non-empty array of {\"") + xKey + "\": ..., \"" +
                         yKey + "\": ...}");
    MeasuredCurve c;
    for (size_t i = 0; i < it->size(); ++i) {
      const json& pt = (*it)[i];
      std::string pp = p + "/" + std::to_string(i);
      if (!pt.is_object()) return fail(pp, "expected an object, got " + pt.dump());
      double x = 0, y = 0;
      TANDEM_RETURN_IF_ERROR(positive(pt, xKey, pp, true, &x));
      TANDEM_RETURN_IF_ERROR(positive(pt, yKey, pp, true, &y));
      c.points.push_back({x, y});
    }
    std::sort(c.points.begin(), c.points.end());
    for (size_t i = 1; i < c.points.size(); ++i)
      if (c.points[i].first == c.points[i - 1].first) {
        std::ostringstream os;
        os << "two points at " << xKey << " = " << c.points[i].first;
        return fail(p, os.str());
      }
    *out = std::move(c);
    return Status::ok();
  }
};

}  // namespace

Status CostModel::loadProfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot read: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::error(path + ": cannot read: " + std::strerror(errno));
  return loadProfileText(ss.str(), path);
}

Status CostModel::loadProfileText(const std::string& text, const std::string& sourceName) {
  ProfileReader r{sourceName};
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    // what() reads "[json.exception.parse_error.101] parse error at line 1, column 65: ...";
    // the bracketed id means nothing to a user.
    std::string what = e.what();
    if (auto b = what.find("] "); what.rfind("[json.exception", 0) == 0 && b != std::string::npos)
      what = what.substr(b + 2);
    return Status::error(sourceName + ": not JSON: " + what);
  }
  if (!root.is_object()) return r.fail("/", "expected an object");
  auto schema = root.find("schema");
  if (schema == root.end()) return r.fail("/schema", "missing (expected \"tandem-calibration/1\")");
  if (!schema->is_string() || schema->get<std::string>() != "tandem-calibration/1")
    return r.fail("/schema", "expected \"tandem-calibration/1\", got " + schema->dump());
  auto devs = root.find("devices");
  if (devs == root.end()) return r.fail("/devices", "missing (expected an object by device name)");
  if (!devs->is_object()) return r.fail("/devices", "expected an object by device name");

  // Parse everything first; apply only when the whole profile is valid.
  std::vector<std::pair<int, DeviceCalibration>> newCal;
  std::vector<std::string> notes;
  for (auto it = devs->begin(); it != devs->end(); ++it) {
    std::string p = "/devices/" + token(it.key());
    if (!it->is_object()) return r.fail(p, "expected an object");
    DeviceCalibration c;
    const json& d = *it;
    if (auto t = d.find("threads"); t != d.end()) {
      if (!t->is_number_integer() || t->get<int64_t>() < 0)
        return r.fail(p + "/threads", "expected a non-negative integer, got " + t->dump());
      c.threads = (int)t->get<int64_t>();
    }
    if (auto o = d.find("dispatch_overhead_s"); o != d.end()) {
      if (!o->is_number() || !(o->get<double>() >= 0) || !std::isfinite(o->get<double>()))
        return r.fail(p + "/dispatch_overhead_s",
                      "expected a non-negative number, got " + o->dump());
      c.dispatchOverheadSec = o->get<double>();
    }
    TANDEM_RETURN_IF_ERROR(r.curve(d, "gemm", "size", "flops_per_s", p, &c.gemm));
    TANDEM_RETURN_IF_ERROR(r.curve(d, "conv", "flops", "flops_per_s", p, &c.conv));
    TANDEM_RETURN_IF_ERROR(r.curve(d, "elementwise", "bytes", "bytes_per_s", p, &c.elementwise));
    int idx = devices_.indexOf(it.key());
    if (idx < 0) {
      notes.push_back(sourceName + ": device '" + it.key() + "' is not in the target set (" +
                      devices_.toString() + "): its measurements are not used");
      continue;
    }
    const DeviceSpec& spec = devices_.device(idx);
    if (!spec.isGpu() && c.threads > 0 && c.threads != spec.cores)
      notes.push_back(sourceName + ": " + spec.name + " was measured with " +
                      std::to_string(c.threads) + " threads but has " + std::to_string(spec.cores) +
                      " cores in this target set: its tables are used as measured");
    newCal.push_back({idx, std::move(c)});
  }

  struct LinkOverride {
    int from, to;
    double latency, pinned, pageable;  // pageable < 0: keep the ratio
  };
  std::vector<LinkOverride> newLinks;
  if (auto links = root.find("links"); links != root.end()) {
    if (!links->is_array()) return r.fail("/links", "expected an array");
    for (size_t i = 0; i < links->size(); ++i) {
      const json& l = (*links)[i];
      std::string p = "/links/" + std::to_string(i);
      if (!l.is_object()) return r.fail(p, "expected an object");
      std::string names[2];
      const char* keys[2] = {"from", "to"};
      for (int k = 0; k < 2; ++k) {
        auto f = l.find(keys[k]);
        if (f == l.end() || !f->is_string() || f->get<std::string>().empty())
          return r.fail(p + "/" + keys[k], "expected a device name");
        names[k] = f->get<std::string>();
      }
      auto lat = l.find("latency_s");
      if (lat == l.end() || !lat->is_number() || !(lat->get<double>() >= 0) ||
          !std::isfinite(lat->get<double>()))
        return r.fail(p + "/latency_s", "expected a non-negative number of seconds");
      LinkOverride o{devices_.indexOf(names[0]), devices_.indexOf(names[1]), lat->get<double>(),
                     0, -1};
      TANDEM_RETURN_IF_ERROR(r.positive(l, "bytes_per_s", p, true, &o.pinned));
      TANDEM_RETURN_IF_ERROR(r.positive(l, "pageable_bytes_per_s", p, false, &o.pageable));
      if (o.from < 0 || o.to < 0) {
        notes.push_back(sourceName + ": link " + names[0] + " -> " + names[1] +
                        " is not in the target set (" + devices_.toString() + "): not used");
        continue;
      }
      if (o.from == o.to) return r.fail(p, "a link needs two different devices");
      newLinks.push_back(o);
    }
  }

  for (auto& [idx, c] : newCal) {
    cal_[idx] = std::move(c);
    hasCal_[idx] = true;
  }
  for (const LinkOverride& o : newLinks) {
    Link* l = devices_.mutableLink(o.from, o.to);
    double ratio = l->pinnedBytesPerSec > 0 ? l->pageableBytesPerSec / l->pinnedBytesPerSec : 1;
    l->latencySec = o.latency;
    l->pinnedBytesPerSec = o.pinned;
    l->pageableBytesPerSec = o.pageable > 0 ? o.pageable : o.pinned * ratio;
  }
  notes_.insert(notes_.end(), notes.begin(), notes.end());
  return Status::ok();
}

Status buildCostModel(const std::string& targetList, const std::string& profilePath,
                      CostOptions options, std::unique_ptr<CostModel>* out) {
  DeviceSet devices;
  if (targetList.empty()) devices = DeviceSet::live();
  else TANDEM_RETURN_IF_ERROR(DeviceSet::parse(targetList, &devices));
  return buildCostModel(std::move(devices), profilePath, options, out);
}

Status buildCostModel(DeviceSet devices, const std::string& profilePath, CostOptions options,
                      std::unique_ptr<CostModel>* out) {
  auto model = std::make_unique<CostModel>(std::move(devices), options);
  if (!profilePath.empty()) TANDEM_RETURN_IF_ERROR(model->loadProfile(profilePath));
  *out = std::move(model);
  return Status::ok();
}

}  // namespace tandem

// The Chrome trace event writer for profiled runs (runtime/Trace.h).
#include "runtime/Trace.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/DType.h"
#include "runtime/FileIO.h"

namespace tandem {

void Trace::addRun(const RunStats& stats, const std::string& label) {
  runs_.push_back({label, stats});
}

namespace {

int64_t typeBytes(const TensorType& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d < 0 ? 0 : d;
  return n * (int64_t)dtypeSize(t.dtype);
}

// [{"dtype", "shape", "bytes"}] and their byte total.
nlohmann::json operands(const std::vector<TensorType>& ts, int64_t* total) {
  nlohmann::json a = nlohmann::json::array();
  *total = 0;
  for (const TensorType& t : ts) {
    int64_t b = typeBytes(t);
    *total += b;
    a.push_back({{"dtype", dtypeName(t.dtype)}, {"shape", t.shape}, {"bytes", b}});
  }
  return a;
}

// Microseconds to the nanosecond: the format's unit, without float noise in the file.
double us(double seconds) { return std::round(seconds * 1e9) / 1e3; }

nlohmann::json meta(const char* what, int pid, int tid, const std::string& name) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

nlohmann::json sortIndex(const char* what, int pid, int tid, int index) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", index}}}};
}

}  // namespace

std::string Trace::json() const {
  // 1. Lanes: a process per device in order of first appearance, a thread per queue used.
  // 2. A run event per run on the "runs" lane, then its steps on their lanes; all times relative
  //    to the first run's start, in microseconds (the format's unit).
  using Seconds = std::chrono::duration<double>;
  nlohmann::json events = nlohmann::json::array();
  events.push_back(meta("process_name", 0, 0, "tandem"));
  events.push_back(sortIndex("process_sort_index", 0, 0, 0));
  events.push_back(meta("thread_name", 0, 0, "runs"));
  static const std::map<std::string, int> kQueueTid = {{"compute", 0}, {"h2d", 1}, {"d2h", 2}};
  std::map<std::string, int> devicePid;
  std::map<std::pair<int, int>, bool> lanes;
  auto laneOf = [&](const StepTiming& s, int* pid, int* tid) {
    auto d = devicePid.find(s.streamDevice);
    if (d == devicePid.end()) {
      d = devicePid.emplace(s.streamDevice, (int)devicePid.size() + 1).first;
      events.push_back(meta("process_name", d->second, 0, s.streamDevice));
      events.push_back(sortIndex("process_sort_index", d->second, 0, d->second));
    }
    auto q = kQueueTid.find(s.queue);
    *pid = d->second;
    *tid = q == kQueueTid.end() ? (int)kQueueTid.size() : q->second;
    if (lanes.emplace(std::make_pair(*pid, *tid), true).second) {
      events.push_back(meta("thread_name", *pid, *tid, s.queue));
      events.push_back(sortIndex("thread_sort_index", *pid, *tid, *tid));
    }
  };
  const auto origin = runs_.empty() ? std::chrono::steady_clock::time_point() : runs_[0].stats.start;
  for (size_t r = 0; r < runs_.size(); ++r) {
    const RunStats& st = runs_[r].stats;
    const double runStart = Seconds(st.start - origin).count();
    events.push_back({{"ph", "X"}, {"name", runs_[r].label}, {"cat", "run"}, {"pid", 0}, {"tid", 0},
                      {"ts", us(runStart)}, {"dur", us(st.seconds)},
                      {"args", {{"run", r}, {"steps", st.steps.size()}}}});
    for (size_t i = 0; i < st.steps.size(); ++i) {
      const StepTiming& s = st.steps[i];
      int pid, tid;
      laneOf(s, &pid, &tid);
      // A complete event of one op on the step's lane: args op_type, node, device, impl, step,
      // run, the operands and their byte totals; `*outBytes` gets the outputs' bytes.
      auto opEvent = [&](const std::string& name, const std::string& opType, const std::string& impl,
                         const std::vector<TensorType>& ins, const std::vector<TensorType>& outs,
                         double start, double seconds, int64_t* outBytes) {
        int64_t inBytes;
        nlohmann::json args = {{"op_type", opType}, {"node", name}, {"device", s.device},
                               {"impl", impl},      {"step", i},    {"run", r},
                               {"inputs", operands(ins, &inBytes)},
                               {"outputs", operands(outs, outBytes)}};
        args["input_bytes"] = inBytes;
        args["output_bytes"] = *outBytes;
        return nlohmann::json{{"ph", "X"}, {"name", name.empty() ? opType : name}, {"pid", pid},
                              {"tid", tid}, {"ts", us(runStart + start)}, {"dur", us(seconds)},
                              {"args", std::move(args)}};
      };
      int64_t outBytes;
      nlohmann::json e = opEvent(s.name, s.opType, s.impl, s.inputs, s.outputs, s.start, s.seconds, &outBytes);
      const bool copy = s.opType == "Copy";
      if (copy) e["args"]["bytes"] = outBytes;
      e["cat"] = copy ? "copy" : "op";
      events.push_back(std::move(e));
      // A DynamicRegion's eager ops, nested inside its event on the same lane.
      for (size_t k = 0; k < s.subSteps.size(); ++k) {
        const SubStepTiming& sub = s.subSteps[k];
        e = opEvent(sub.name, sub.opType, sub.impl, sub.inputs, sub.outputs, s.start + sub.start,
                    sub.seconds, &outBytes);
        e["cat"] = "region-op";
        e["args"]["sub_step"] = k;
        e["args"]["region"] = s.name;
        events.push_back(std::move(e));
      }
    }
  }
  nlohmann::json j = {{"traceEvents", events},
                      {"displayTimeUnit", "ms"},
                      {"otherData", {{"tool", "tandem"}, {"runs", runs_.size()}}}};
  return j.dump(1) + "\n";
}

Status Trace::write(const std::string& path) const {
  return writeFileAtomic(path, json());
}

}  // namespace tandem

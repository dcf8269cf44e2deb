// The Chrome trace of profiled runs (runtime/Trace.h): every step once per run on its stream's
// lane, lanes named by metadata events, operand shapes and bytes, times inside the run event.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unistd.h>

#include "plan_test_util.h"
#include "runtime/Executable.h"
#include "runtime/PlanFormat.h"
#include "runtime/Trace.h"

using namespace tandem;
using nlohmann::json;

namespace {

// y = Relu(x) on cpu, copied to cpu:1, + b there: two host devices, each its own stream.
plan::Plan twoHostPlan() { return twoHostDevicePlan({4, 16}, 0.f, kPlanVersion); }

// Runs the plan `runs` times profiled and returns the parsed trace.
json traceOf(int runs) {
  LoadOptions o;
  o.threads = 1;
  o.tuning = TuningMode::Off;
  std::unique_ptr<Executable> exe;
  Status st = Executable::load(twoHostPlan(), o, &exe);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!exe) return {};
  Trace trace;
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = (float)i - 32;
  for (int r = 0; r < runs; ++r) {
    std::vector<Tensor> out;
    RunStats stats;
    st = exe->run({Tensor::fromVector<float>({4, 16}, x)}, &out, &stats, /*profile=*/true);
    EXPECT_TRUE(st.isOk()) << st.message();
    EXPECT_FLOAT_EQ(out[0].data<float>()[40], 8.f);  // Relu(40 - 32) + 0
    trace.addRun(stats, "run " + std::to_string(r));
  }
  EXPECT_EQ(trace.runs(), (size_t)runs);
  return json::parse(trace.json());
}

}  // namespace

TEST(Trace, EveryStepOncePerRunOnItsStreamLane) {
  json j = traceOf(3);
  ASSERT_TRUE(j.contains("traceEvents"));
  // Lane names from the metadata events.
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  for (const json& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"));
    if (e["ph"] == "M" && e["name"] == "process_name") process[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name") thread[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  EXPECT_EQ(process[0], "tandem");
  std::map<int, std::pair<double, double>> runSpan;  // run -> [ts, ts + dur]
  std::map<std::pair<int, int>, json> steps;         // (run, step) -> event
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number());
    EXPECT_GE(e["dur"].get<double>(), 0);
    if (e["cat"] == "run") {
      runSpan[e["args"]["run"]] = {e["ts"], e["ts"].get<double>() + e["dur"].get<double>()};
      EXPECT_EQ(e["pid"], 0);
      continue;
    }
    auto key = std::make_pair(e["args"]["run"].get<int>(), e["args"]["step"].get<int>());
    EXPECT_TRUE(steps.emplace(key, e).second) << "step twice: " << e.dump();
  }
  ASSERT_EQ(runSpan.size(), 3u);
  ASSERT_EQ(steps.size(), 9u);  // 3 steps x 3 runs, each once
  for (auto& [key, e] : steps) {
    auto [r, si] = key;
    const json& a = e["args"];
    const std::string lane = process[e["pid"]] + "/" + thread[{e["pid"], e["tid"]}];
    double ts = e["ts"], end = ts + e["dur"].get<double>();
    EXPECT_GE(ts, runSpan[r].first) << e.dump();
    EXPECT_LE(end, runSpan[r].second + 1e-3) << e.dump();
    EXPECT_EQ(a["inputs"][0]["shape"], json({4, 16}));
    EXPECT_EQ(a["inputs"][0]["dtype"], "f32");
    EXPECT_EQ(a["output_bytes"], 256);  // f32[4,16]
    EXPECT_FALSE(a["impl"].get<std::string>().empty());
    if (si == 0) {
      EXPECT_EQ(a["op_type"], "Relu");
      EXPECT_EQ(e["cat"], "op");
      EXPECT_EQ(lane, "cpu/compute");
      EXPECT_EQ(a["input_bytes"], 256);
    } else if (si == 1) {
      // A copy between host devices runs on the destination's queue and carries its bytes.
      EXPECT_EQ(a["op_type"], "Copy");
      EXPECT_EQ(e["cat"], "copy");
      EXPECT_EQ(a["bytes"], 256);
      EXPECT_EQ(lane, "cpu:1/compute");
    } else {
      EXPECT_EQ(a["op_type"], "Add");
      EXPECT_EQ(a["node"], "Add3");
      EXPECT_EQ(e["name"], "Add3");
      EXPECT_EQ(a["device"], "cpu:1");
      EXPECT_EQ(a["inputs"][1]["shape"], json({16}));
      EXPECT_EQ(a["input_bytes"], 256 + 64);
      EXPECT_EQ(lane, "cpu:1/compute");
    }
  }
  // Steps of one run are in plan order in time (profiled runs synchronise per step).
  for (int r = 0; r < 3; ++r)
    for (int si = 1; si < 3; ++si) {
      const json& prev = steps[std::make_pair(r, si - 1)];
      EXPECT_GE(steps[std::make_pair(r, si)]["ts"].get<double>(),
                prev["ts"].get<double>() + prev["dur"].get<double>() - 1e-3);
    }
  // Runs follow one another.
  EXPECT_DOUBLE_EQ(runSpan[0].first, 0);
  EXPECT_GE(runSpan[1].first, runSpan[0].second - 1e-3);
}

TEST(Trace, WritesTheFileAtomicallyAndNamesAnUnwritablePath) {
  Trace trace;
  RunStats stats;
  stats.seconds = 1e-3;
  trace.addRun(stats, "run 0");  // no steps (not profiled): the run event only
  std::string path = ::testing::TempDir() + "/trace_test_" + std::to_string(getpid()) + ".json";
  ASSERT_TRUE(trace.write(path).isOk());
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  json j = json::parse(ss.str());
  int runs = 0, x = 0;
  for (const json& e : j["traceEvents"]) {
    runs += e["ph"] == "X" && e["cat"] == "run";
    x += e["ph"] == "X";
  }
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(x, 1);
  EXPECT_DOUBLE_EQ(j["traceEvents"][3]["dur"].get<double>(), 1000.0);  // microseconds
  std::remove(path.c_str());
  Status st = trace.write("/nonexistent-dir/t.json");
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("/nonexistent-dir/t.json"), std::string::npos) << st.message();
}

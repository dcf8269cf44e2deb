// A timeline of profiled runs in the Chrome trace event format, for Perfetto and chrome://tracing.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "runtime/Executable.h"
#include "runtime/Status.h"

namespace tandem {

/// Collects runs made with Executable::run(inputs, &outputs, &stats, /*profile=*/true) and writes
/// them as the Chrome trace event format (Google, "Trace Event Format", the JSON object form
/// {"traceEvents": [...]}), which ui.perfetto.dev and chrome://tracing open.
///
/// Layout: process 0 ("tandem") has one lane, "runs", with a complete event per run spanning it
/// (inputs in to outputs out). Each device of the runs is a process named after it ("cpu",
/// "cpu:1", "cuda:0"), in order of first appearance, with one lane (thread) per stream:
/// "compute" (tid 0), "h2d" (tid 1), "d2h" (tid 2). Each step is a complete event ("ph":"X") on
/// its stream's lane: name = the step (node) name, cat = "op" or "copy", args = op_type, node,
/// device (as the plan placed it), impl, step index, run index, inputs and outputs as
/// [{"dtype", "shape", "bytes"}], input_bytes and output_bytes (a copy's bytes are its
/// output_bytes, also as "bytes"). A DynamicRegion step's eager ops follow it as events of cat
/// "region-op" on the same lane, inside its span (Perfetto draws them nested under it), with
/// the same args plus sub_step (their index in the region) and region (the step's name). Lanes
/// are named by "M" (metadata) events. ts and dur are in microseconds from the start of the
/// first run added.
///
/// Profiled runs synchronise after every step (Executable::run), so a step's duration is its
/// whole time on its stream and streams do not overlap: a trace shows where the time goes, not
/// the overlap of an unprofiled run.
///
/// Not thread-safe: add runs from one thread.
class Trace {
 public:
  /// Adds one run. `label` names its run event ("run 0"). A run without step entries (profile
  /// off) adds the run event only.
  void addRun(const RunStats& stats, const std::string& label);
  /// Number of runs added.
  size_t runs() const { return runs_.size(); }
  /// The trace as JSON text (an object with "traceEvents", "displayTimeUnit" and "otherData").
  std::string json() const;
  /// Writes json() to `path` atomically (runtime/FileIO.h: a reader sees the old file or the
  /// whole new one). Errors name the path and the errno text.
  Status write(const std::string& path) const;

 private:
  struct Run {
    std::string label;
    RunStats stats;
  };
  std::vector<Run> runs_;
};

}  // namespace tandem

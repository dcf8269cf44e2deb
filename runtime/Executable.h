// A Plan bound to live devices: kernels created and weights prepared once, then run many times.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/Plan.pb.h"
#include "runtime/Backend.h"
#include "runtime/Kernel.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"
#include "runtime/Tuning.h"

namespace tandem {

struct LoadOptions {
  /// Intra-op threads for CPU kernels (oneDNN/OpenMP). 0 = defaultThreads() (runtime/Device.h):
  /// the cores not busy with other processes at load time, with a note when that is fewer than
  /// all of them.
  int threads = 0;
  /// A plan step on a device this build cannot drive (cuda:N without the CUDA backend) runs on
  /// the CPU instead, with a note (notes()); false makes it an error.
  bool deviceFallback = true;
  /// GPU memory: 0 grows each device's arena on demand; in (0, 1] preallocates that fraction of
  /// each GPU's memory at first use and never grows (an allocation past it is an error naming
  /// the step and the bytes). The first plan loaded on a device fixes its mode for the process.
  double gpuMemoryFraction = 0;
  /// CPU 3x3 convolutions as Winograd: by shape (default), F(2x2, 3x3) only, or never
  /// (runtime/Kernel.h, WinogradPolicy).
  WinogradPolicy winograd = WinogradPolicy::Auto;
  /// Seed of the random ops that have no seed attribute of their own (Dropout in training
  /// mode, runtime/Philox.h): the same seed gives the same masks on every device.
  uint64_t seed = 0;
  /// Kernel choice where a CPU step has several implementations: measured and cached (default),
  /// from the cache only, or the built-in heuristic (runtime/Tuning.h, TuningMode). Default
  /// reads $TANDEM_TUNING.
  TuningMode tuning = TuningMode::Default;
  /// The kernel timing cache file; "" = defaultTimingCachePath() ($TANDEM_TUNING_CACHE,
  /// $XDG_CACHE_HOME/tandem/kernel-timings.json or ~/.cache/tandem/kernel-timings.json).
  std::string tuningCache;
  /// Creates the backend of a non-host device ("cuda:0"); null uses the built-in CUDA backend.
  /// For tests (a fake asynchronous device) and backends built outside this library.
  std::function<Status(const std::string& device, std::unique_ptr<DeviceBackend>* out)> backendFactory;
};

/// Per-step timing of one run, in seconds.
struct StepTiming {
  std::string name;
  std::string opType;
  std::string device;
  std::string impl;
  double seconds = 0;
  double start = 0;            // when the step was issued, seconds after RunStats::start
  // The stream it ran on: its backend's device and queue ("compute", "h2d", "d2h"). A copy runs
  // on its link's queue: an upload on the GPU's h2d, a download on its d2h, a copy between host
  // devices on the destination's compute queue.
  std::string streamDevice;
  std::string queue;
  std::vector<TensorType> inputs, outputs;  // absent optional inputs left out
  // A step that runs a body itself (a DynamicRegion): its ops, in the order they ran; their
  // start times are seconds after this step's `start`.
  std::vector<SubStepTiming> subSteps;
};

struct RunStats {
  double seconds = 0;                // whole run (inputs in to outputs out)
  std::chrono::steady_clock::time_point start;  // when run() was entered
  std::vector<StepTiming> steps;     // filled only when profiling was requested
};

class Executable {
 public:
  /// Binds `plan` to the live devices: allocates one arena per device (the first run context),
  /// loads constants, creates every kernel (oneDNN primitives built and weights reordered here,
  /// never per run).
  /// Errors: malformed plan (dangling value ids, wrong version), a device the plan needs that is
  /// not present, a step with no kernel; each names the step.
  static Status load(const plan::Plan& plan, const LoadOptions& options,
                     std::unique_ptr<Executable>* out);
  /// The same, taking the plan over: no copy of its constants is made (they move into the
  /// executable's tensors, and their bytes in the plan are dropped once loaded).
  static Status load(plan::Plan&& plan, const LoadOptions& options,
                     std::unique_ptr<Executable>* out);
  /// Reads a serialized Plan file (.tplan) then load()s it.
  static Status loadFile(const std::string& path, const LoadOptions& options,
                         std::unique_ptr<Executable>* out);

  ~Executable();

  /// Bytes of the plan's constants the executable holds in host memory. A constant that every
  /// step reading it copied at creation (prepacked weights: Kernel::consumesConstant), and
  /// that is no graph output, is dropped after load and not counted.
  int64_t constantBytes() const;

  /// Graph inputs/outputs as the plan declares them (names, static types). An output a
  /// DynamicRegion step computes (runtime/DynamicRegion.h) has -1 for each dim its run sizes.
  const std::vector<std::string>& inputNames() const;
  const std::vector<TensorType>& inputTypes() const;
  const std::vector<std::string>& outputNames() const;
  const std::vector<TensorType>& outputTypes() const;

  /// Runs the plan. `inputs` in plan order, each of exactly the declared dtype and shape
  /// (otherwise an error naming the input, expected and actual); never written. An input only
  /// host steps read is read in place from its buffer when that is 64-byte aligned (as
  /// Tensor::alloc's are), else copied into the run's arena; so the caller must not change an
  /// input's bytes while its run is in flight. `outputs` receives owning tensors. With `profile`, stats->steps gets one entry per step (each step then runs to
  /// completion before the next is issued), with its stream, start and operand types, and a
  /// DynamicRegion's eager ops as its subSteps, which is what a Trace (runtime/Trace.h)
  /// records. Every device runs through its DeviceBackend (runtime/Backend.h): the host issues the steps in plan order onto their (device, queue)
  /// streams and cross-stream dependencies are events. One host device runs its steps on the
  /// calling thread; several host devices (cpu, cpu:1) each get a queue thread with its own
  /// OpenMP pool; each live GPU has a compute, an H2D and a D2H stream. The run synchronises
  /// once, when the outputs are copied back.
  ///
  /// Thread-safe: run() may be called from many threads at once on one Executable, as ONNX
  /// Runtime's Session::Run. Constants, prepacked weights and kernels are shared; each run
  /// takes a run context (one arena per device, for intermediates and inputs) from a pool, or
  /// allocates one when every context is in use by another run, and returns it at the end, so
  /// a run allocates no arena while a free one exists and the pool holds as many contexts as
  /// runs were ever in flight at once (peakBytes() counts them). Each run uses this load's
  /// intra-op thread count on its calling thread. Same plan, inputs and thread count give
  /// bit-identical outputs whether runs overlap or not. Kernels that rebind state per call hold
  /// a mutex for it (oneDNN steps, Kernel.h), so overlapping runs pipeline through such a step
  /// one at a time rather than wait for each other's whole run. Plans with a GPU or several host
  /// devices share their queues, events and pinned staging buffers between runs: their runs
  /// are serialised (a mutex): one at a time.
  Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs,
             RunStats* stats = nullptr, bool profile = false);

  /// Issues one run whose outputs are not wanted (a training step whose metrics stay in
  /// variables) and returns without waiting for the devices, so the host prepares the next
  /// batch while they compute. Inputs as for run(); once enqueue() returns the caller may
  /// overwrite or free them. A graph output that only leaves a GPU (a copy no step reads) is
  /// not copied. The devices then still work on the run: the next run() or enqueue() is
  /// ordered after it on the devices (each of their queues waits for every queue's end of the
  /// run before, with no host wait, except the host waiting for the run before's uploads before
  /// it refills their host buffers), so at most about one run is in flight beyond the one being
  /// issued. readVariable(), writeVariable() and synchronize() wait for it first.
  ///
  /// Asynchronous only when every step runs on a GPU backend (kernels and the copies they
  /// issue) and every variable lives on a GPU: a plan with any host step (e.g. everything on
  /// the CPU, or a cuda:N that fell back to it) runs to completion inside enqueue(), as run()
  /// without outputs. isAsynchronous() says which.
  ///
  /// Errors: bad inputs as run(), before anything is issued; a device error of this run is
  /// reported by the call that next waits for it (the next run(), enqueue() when it waits for
  /// the uploads, readVariable(), writeVariable(), synchronize()), naming "a run issued by
  /// enqueue()"; a device error of a step issued here is returned here. Variables updated in
  /// place keep what the failed run wrote (see the variables' note below).
  Status enqueue(const std::vector<Tensor>& inputs);
  /// Waits until every run issued by enqueue() has finished on every device. Errors: a device
  /// error of one of them.
  Status synchronize();
  /// Whether enqueue() returns before the devices finish (see enqueue()).
  bool isAsynchronous() const;

  /// Host memory for input `index` (its dtype and shape), which this plan's devices read
  /// without a staging copy: pinned (cudaHostAlloc) when the input crosses to a GPU, ordinary
  /// host memory otherwise. run() and enqueue() upload an input held in such memory (the
  /// whole buffer or a view into it) straight from it instead of copying it into their own
  /// pinned staging first (runtime/training/Prefetcher.h's BatchAllocator uses it for the
  /// training batches). Release every copy of the Tensor before the Executable is destroyed
  /// (one still held then is leaked, not freed under the caller). Errors: `index` is not an
  /// input, or the allocation fails (naming the bytes).
  Status allocateInput(int index, Tensor* out);

  /// Resident state (plan VARIABLE values: trainable parameters, optimizer slots, a step
  /// counter), in plan order: names and static types. Each lives in a buffer of its own on its
  /// device, initialised at load from the plan and read in place by the steps. After a run it
  /// holds its update value: an update planned in place (Value.aliases_variable; the compiler
  /// plans every one it can, passes/PlanMemory.cpp) is written into the variable by its step,
  /// never copied; any other is copied in after the run's last step (a copy within the device).
  /// Failed runs: a variable updated by copy keeps its value. One updated in place keeps its
  /// value when the run fails before the step that writes it, which is the case for bad inputs
  /// (checked before any step) and bad labels or losses (the loss comes before the optimizer's
  /// updates); when a step at or after the first in-place update fails (a device fault), the
  /// error names the variables already written ("variables updated in place before the
  /// failure keep their new value: ..."), e.g. to reload a checkpoint. An update that is also
  /// a graph output is returned as computed. Plans with variables run one run at a time (the
  /// next run reads what the last one wrote).
  const std::vector<std::string>& variableNames() const;
  const std::vector<TensorType>& variableTypes() const;
  /// Copies variable `name` to a new host tensor (synchronises its device). Error: no such
  /// variable.
  Status readVariable(const std::string& name, Tensor* out);
  /// Overwrites variable `name` with `value` (host memory, exactly the variable's dtype and
  /// shape; e.g. a checkpoint being restored). Errors: no such variable, a type mismatch
  /// (naming expected and actual); the variable is unchanged then.
  Status writeVariable(const std::string& name, const Tensor& value);

  /// One line per decision the user should know about, e.g. a device fallback.
  const std::vector<std::string>& notes() const;
  /// The intra-op thread count in use (LoadOptions::threads, or the one chosen for 0).
  int threads() const;

  /// Implementation chosen for each step, in order (for logs and tests).
  std::vector<std::string> stepImpls() const;

  /// The tuning mode this load used (LoadOptions::tuning resolved) and, per CPU step that had
  /// several kernel variants to choose from, in plan order, how the choice was made.
  TuningMode tuningMode() const;
  const std::vector<StepTuning>& tuning() const;

  /// Stores each CPU kernel step's time in the kernel timing cache (LoadOptions::tuningCache)
  /// for the placer: `stepSeconds[i]` is step i's time in seconds (e.g. the median of profiled
  /// runs, RunStats::steps in plan order), kept under stepOpTimingKey (runtime/Tuning.h) with
  /// the kernel's implName() as the variant; steps that share a key keep the median of their
  /// times. Copies, GPU steps and steps with a non-positive time are skipped. *recorded (may
  /// be null) gets the number of keys written. Errors: a size mismatch, or the cache file
  /// cannot be written (the message names it).
  Status recordStepTimes(const std::vector<double>& stepSeconds, int* recorded);

  /// Per device of the plan: the most bytes this executable held there at once (arenas, one
  /// per run context, constants, workspaces), e.g. {{"cpu", 4096}, {"cuda:0", 1 << 20}}.
  std::vector<std::pair<std::string, size_t>> peakBytes() const;

 private:
  Executable();
  struct RunContext;  // one run's arenas and the tensors bound to them (Executable.cpp)
  Status runSteps(RunContext& rc, const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs,
                  RunStats* stats, bool profile, bool wait);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem

// The `tandem` Python module: compiles ONNX models through the CLI's driver and runs the plans
// on NumPy arrays, onnxruntime-style; saves and loads .tplan files; lists the live devices.
//
// Errors cross into Python as exceptions (DESIGN §7's "no exceptions across the public API" is
// about C++; Python callers expect them): a wrong input name or shape, a bad option value ->
// ValueError; a wrong dtype or argument type -> TypeError; a missing file -> FileNotFoundError;
// what the compiler or runtime reports (an invalid model, an unsatisfiable pin, a kernel that
// fails) -> tandem.Error (a RuntimeError) with the driver's message, as `tandem` prints it.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/OnnxTensor.h"
#include "runtime/Device.h"
#include "runtime/FileIO.h"
#include "runtime/WeightsFile.h"
#include "tools/driver/Driver.h"

namespace py = pybind11;

namespace tandem {
namespace {

// tandem.Error: the compiler's or runtime's Status message.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void check(const Status& st) {
  if (!st.isOk()) throw Error(st.message());
}

[[noreturn]] void raise(PyObject* type, const std::string& msg) {
  PyErr_SetString(type, msg.c_str());
  throw py::error_already_set();
}

// FileNotFoundError (errno set) before the driver's own, less specific, message.
void requireFile(const std::string& path, const char* kind) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    int err = errno;
    PyObject* args = Py_BuildValue("(iss)", err, std::strerror(err), path.c_str());
    PyErr_SetObject(err == ENOENT ? PyExc_FileNotFoundError : PyExc_OSError, args);
    Py_XDECREF(args);
    throw py::error_already_set();
  }
  if (S_ISDIR(st.st_mode)) raise(PyExc_IsADirectoryError, path + ": is a directory, not " + kind);
}

// ---- dtypes: runtime/DType.h <-> NumPy ----

py::dtype numpyDType(DType t) {
  // NumPy has no bfloat16 (nor does this module map float16): no uint16 view is handed out,
  // which would read as integers; a model keeps f32 at its boundary and Casts inside.
  if (isHalfFloat(t))
    throw Error(std::string("dtype ") + dtypeName(t) +
                " has no NumPy equivalent here (NumPy has no bfloat16): give the model f32 "
                "inputs and outputs and Cast to and from " + dtypeName(t) + " inside it");
  py::dtype out;
  if (!dispatchDType(t, [&](auto tag) { out = py::dtype::of<decltype(tag)>(); }))
    throw Error(std::string("dtype ") + dtypeName(t) + " has no NumPy equivalent here");
  return out;
}

const char* kSupportedDTypes = "float32, float64, int32, int64, bool, uint8, int8";

// False for a dtype Tandem does not take (float16, complex, object, big-endian, ...).
bool dtypeFromNumpy(const py::dtype& d, DType* out) {
  if (d.attr("byteorder").cast<std::string>() == ">") return false;
  const char kind = d.kind();
  const size_t size = d.itemsize();
  if (kind == 'f' && size == 4) *out = DType::F32;
  else if (kind == 'f' && size == 8) *out = DType::F64;
  else if (kind == 'i' && size == 4) *out = DType::I32;
  else if (kind == 'i' && size == 8) *out = DType::I64;
  else if (kind == 'i' && size == 1) *out = DType::I8;
  else if (kind == 'u' && size == 1) *out = DType::U8;
  else if (kind == 'b' && size == 1) *out = DType::Bool;
  else return false;
  return true;
}

std::string typeText(DType d, const Shape& s) { return std::string(dtypeName(d)) + shapeToString(s); }

// The array owns the tensor's buffer: a heap copy of the Tensor (which shares its buffer through
// its owner) lives in a capsule that NumPy frees with the array. No bytes are copied.
py::array toNumpy(Tensor t) {
  py::dtype dt = numpyDType(t.dtype());
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  void* data = t.raw();
  auto* keep = new Tensor(std::move(t));
  py::capsule owner(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dt, shape, data, owner);
}

// A C-contiguous, aligned, native-order array of a Tandem dtype, as `want` (dtype and shape
// checked; messages as Executable::run words them). Arrays that already are so are returned
// as they are (the tensor will view their buffer); others are copied once, in C order; Python
// sequences and scalars are converted to the input's dtype.
py::array conformingArray(py::handle obj, const std::string& name, const TensorType& want) {
  py::module_ np = py::module_::import("numpy");
  py::array arr;
  if (py::isinstance<py::array>(obj)) {
    arr = py::reinterpret_borrow<py::array>(obj);
  } else {
    arr = np.attr("asarray")(obj, numpyDType(want.dtype));
  }
  DType got;
  if (!dtypeFromNumpy(arr.dtype(), &got))
    raise(PyExc_TypeError, "input '" + name + "': dtype " + py::str(arr.dtype()).cast<std::string>() +
                               " is not supported (Tandem takes " + kSupportedDTypes + ")");
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  if (got != want.dtype)
    raise(PyExc_TypeError, "input '" + name + "': expected " + typeText(want.dtype, want.shape) +
                               ", got " + typeText(got, shape));
  if (shape != want.shape)
    raise(PyExc_ValueError, "input '" + name + "': expected " + typeText(want.dtype, want.shape) +
                                ", got " + typeText(got, shape));
  constexpr int kAligned = 0x0100;  // NPY_ARRAY_ALIGNED
  if (!(arr.flags() & py::array::c_style) || !(arr.flags() & kAligned))
    arr = np.attr("array")(arr, py::arg("order") = "C", py::arg("copy") = true);
  return arr;
}

// Any array-like as an owning Tensor of its own dtype (constants, compile(shapes=...)).
Tensor tensorCopyOf(py::handle obj, const std::string& what) {
  py::array arr = py::module_::import("numpy").attr("ascontiguousarray")(obj);
  DType d;
  if (!dtypeFromNumpy(arr.dtype(), &d))
    raise(PyExc_TypeError, what + ": dtype " + py::str(arr.dtype()).cast<std::string>() +
                               " is not supported (Tandem takes " + kSupportedDTypes + ")");
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  return Tensor::copyOf(Tensor::view(d, shape, const_cast<void*>(arr.data())));
}

// ---- Plan ----

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
};

// Where a plan came from, so that save() can read its constants again: a PyPlan keeps none
// (the executable holds the weights, mostly in its kernels' packed forms; a second copy in the
// plan doubled a Python process's memory against `tandem run`'s).
struct PlanSource {
  std::string path;       // the ONNX model compiled, or the .tplan loaded
  bool onnx = false;
  ImportOptions importOptions;    // onnx: as compile() was called
  CompileOptions compileOptions;
};

// The plan without its constants' bytes (dtype and dims stay) and a digest of each constant's
// bytes, by value id (0 for other values). Built by moving the bytes out and back, so the
// plan is never copied whole.
void splitConstants(plan::Plan* p, plan::Plan* skeleton, std::vector<uint64_t>* digests) {
  std::vector<std::string> raw(p->values_size());
  digests->assign(p->values_size(), 0);
  for (int i = 0; i < p->values_size(); ++i) {
    plan::Value* v = p->mutable_values(i);
    if (v->kind() != plan::Value::CONSTANT) continue;
    raw[i].swap(*v->mutable_constant()->mutable_raw());
    (*digests)[i] = std::hash<std::string_view>()(raw[i]);
  }
  *skeleton = *p;
  for (int i = 0; i < p->values_size(); ++i)
    if (p->values(i).kind() == plan::Value::CONSTANT) raw[i].swap(*p->mutable_values(i)->mutable_constant()->mutable_raw());
}

// A compiled or loaded plan bound to this machine's devices.
struct PyPlan {
  std::shared_ptr<Executable> exe;
  plan::Plan skeleton;           // the plan that runs, without its constants' bytes
  std::vector<uint64_t> constantDigests;  // by value id: what save() checks the rebuilt bytes against
  PlanSource source;
  bool compiled = false;         // false: read from a .tplan, which keeps only the JSON log
  std::string logText, logDot;   // the placement log as text and Graphviz (compiled plans)
  std::vector<std::string> notes;

  std::vector<TensorInfo> infos(bool inputs) const {
    const auto& names = inputs ? exe->inputNames() : exe->outputNames();
    const auto& types = inputs ? exe->inputTypes() : exe->outputTypes();
    std::vector<TensorInfo> r;
    for (size_t i = 0; i < names.size(); ++i) r.push_back({names[i], types[i].dtype, types[i].shape});
    return r;
  }

  std::string namesText(bool inputs) const {
    std::string s;
    for (const std::string& n : inputs ? exe->inputNames() : exe->outputNames())
      s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? "none" : s;
  }

  // run(feeds) -> {name: array}; run(output_names, feeds) -> [array] (output_names None: all).
  py::object run(py::args args) const {
    if (args.size() != 1 && args.size() != 2)
      raise(PyExc_TypeError, "run() takes (feeds) or (output_names, feeds), got " +
                                 std::to_string(args.size()) + " arguments");
    const bool ortStyle = args.size() == 2;
    py::handle feeds = args[ortStyle ? 1 : 0];
    const std::vector<std::string>& names = exe->inputNames();
    const std::vector<TensorType>& types = exe->inputTypes();

    // 1. Feeds in plan order, by name (dict) or position (list/tuple).
    std::vector<py::handle> given(names.size());
    if (py::isinstance<py::dict>(feeds)) {
      for (auto item : py::reinterpret_borrow<py::dict>(feeds)) {
        std::string key = py::str(item.first).cast<std::string>();
        auto it = std::find(names.begin(), names.end(), key);
        if (it == names.end())
          raise(PyExc_ValueError, "unknown input '" + key + "' (the plan's inputs: " + namesText(true) + ")");
        given[it - names.begin()] = item.second;
      }
      for (size_t i = 0; i < names.size(); ++i)
        if (!given[i]) raise(PyExc_ValueError, "missing input '" + names[i] + "'");
    } else if (py::isinstance<py::list>(feeds) || py::isinstance<py::tuple>(feeds)) {
      py::sequence seq = py::reinterpret_borrow<py::sequence>(feeds);
      if (seq.size() != names.size())
        raise(PyExc_ValueError, "expected " + std::to_string(names.size()) + " inputs (" +
                                    namesText(true) + "), got " + std::to_string(seq.size()));
      for (size_t i = 0; i < names.size(); ++i) given[i] = seq[i];
    } else {
      raise(PyExc_TypeError, "feeds must be a dict {name: array} or a list in input order, got " +
                                 py::str(py::type::handle_of(feeds).attr("__name__")).cast<std::string>());
    }

    // 2. Outputs wanted, by index.
    const std::vector<std::string>& outNames = exe->outputNames();
    std::vector<size_t> wanted;
    if (ortStyle && !args[0].is_none()) {
      for (py::handle h : py::reinterpret_borrow<py::iterable>(args[0])) {
        std::string n = py::str(h).cast<std::string>();
        auto it = std::find(outNames.begin(), outNames.end(), n);
        if (it == outNames.end())
          raise(PyExc_ValueError, "unknown output '" + n + "' (the plan's outputs: " + namesText(false) + ")");
        wanted.push_back(it - outNames.begin());
      }
    } else {
      for (size_t i = 0; i < outNames.size(); ++i) wanted.push_back(i);
    }

    // 3. Inputs as views of the arrays (kept alive here), the run without the GIL.
    std::vector<py::array> keep;
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < names.size(); ++i) {
      keep.push_back(conformingArray(given[i], names[i], types[i]));
      inputs.push_back(Tensor::view(types[i].dtype, types[i].shape, const_cast<void*>(keep.back().data())));
    }
    std::vector<Tensor> outputs;
    Status st;
    {
      py::gil_scoped_release noGil;
      st = exe->run(inputs, &outputs);
    }
    check(st);

    if (ortStyle) {
      py::list r;
      for (size_t i : wanted) r.append(toNumpy(outputs[i]));
      return std::move(r);
    }
    py::dict r;
    for (size_t i : wanted) r[py::str(outNames[i])] = toNumpy(outputs[i]);
    return std::move(r);
  }

  std::string placementLog(const std::string& format) const {
    if (format == "json") return skeleton.placement_log_json();
    if (format != "text" && format != "dot")
      raise(PyExc_ValueError, "placement_log: format must be 'text', 'json' or 'dot', got '" + format + "'");
    if (!compiled)
      raise(PyExc_ValueError, "placement_log: a plan loaded from a .tplan keeps only the JSON log; "
                              "use format='json'");
    return format == "text" ? logText : logDot;
  }

  // save(path): the plan rebuilt from its source (the model compiled again, or the .tplan read
  // again) and written only when it is the plan that runs: the same steps, placement, memory
  // plan and log, and constants with the same bytes. A source changed or removed since is a
  // tandem.Error that says so; nothing is written then.
  void save(const std::string& path) const {
    plan::Plan rebuilt;
    Status st;
    {
      py::gil_scoped_release noGil;
      st = rebuild(&rebuilt);
    }
    if (!st.isOk())
      throw Error("save: this plan keeps no copy of its constants and reads them again from '" +
                  source.path + "', which failed: " + st.message());
    plan::Plan rebuiltSkeleton;
    std::vector<uint64_t> digests;
    splitConstants(&rebuilt, &rebuiltSkeleton, &digests);
    if (digests != constantDigests || rebuiltSkeleton.SerializeAsString() != skeleton.SerializeAsString())
      throw Error("save: '" + source.path + "' no longer gives the plan that runs (the file, or the " +
                  "calibration the placer read, changed since " + (source.onnx ? "compile" : "load") +
                  "); compile or load it again, then save");
    std::string bytes;
    if (!rebuilt.SerializeToString(&bytes)) throw Error("cannot serialise the plan");
    st = writeFileAtomic(path, bytes);
    if (!st.isOk()) raise(PyExc_OSError, st.message());
  }

 private:
  Status rebuild(plan::Plan* out) const {
    if (source.onnx) {
      CompileResult result;
      TANDEM_RETURN_IF_ERROR(compileOnnxFile(source.path, source.importOptions, source.compileOptions, &result));
      *out = std::move(result.plan);
      return Status::ok();
    }
    std::string bytes;
    TANDEM_RETURN_IF_ERROR(readInputFile(source.path, &bytes, "plan file"));
    if (!out->ParseFromString(bytes)) return Status::error("not a valid Tandem plan (protobuf parse failed)");
    return resolveExternalConstants(out, source.path);
  }
};

LoadOptions loadOptions(int threads) {
  if (threads < 0) raise(PyExc_ValueError, "threads must be >= 0 (0: the idle cores), got " + std::to_string(threads));
  LoadOptions lo;
  lo.threads = threads;
  return lo;
}

std::unique_ptr<PyPlan> bindPlan(plan::Plan p, const LoadOptions& lo, PlanSource source) {
  auto r = std::make_unique<PyPlan>();
  splitConstants(&p, &r->skeleton, &r->constantDigests);
  r->source = std::move(source);
  std::unique_ptr<Executable> exe;
  Status st;
  {
    py::gil_scoped_release noGil;
    st = Executable::load(std::move(p), lo, &exe).withContext(r->source.path);
  }
  check(st);
  r->exe = std::move(exe);
  for (const std::string& n : r->exe->notes()) r->notes.push_back(n);
  return r;
}

std::unique_ptr<PyPlan> compile(const std::string& path, py::object target, const std::string& placement,
                                std::optional<std::map<std::string, int64_t>> dims,
                                std::optional<std::map<std::string, std::string>> pins, bool fuse,
                                std::optional<std::map<std::string, std::vector<int64_t>>> shapes,
                                std::optional<std::map<std::string, py::object>> constants,
                                bool strictPlacement, int threads, bool qdqFusion,
                                const std::string& f16Rounding, const std::string& int8Activations) {
  // 1. Options, checked as the CLI checks its flags (ValueError instead of a usage error).
  CompileOptions co;
  ImportOptions io;
  if (!target.is_none()) {
    std::string list;
    if (py::isinstance<py::str>(target)) {
      list = target.cast<std::string>();
    } else {
      for (py::handle h : py::reinterpret_borrow<py::iterable>(target))
        list += (list.empty() ? "" : ",") + h.cast<std::string>();
    }
    Status st = setTargetDevices(&co, list);
    if (!st.isOk()) raise(PyExc_ValueError, "target: " + st.message());
  }
  std::optional<placement::PlacementPolicy> policy = placement::parsePolicy(placement);
  if (!policy) raise(PyExc_ValueError, "placement: unknown policy '" + placement + "' (cost, greedy, ort, cpu, gpu)");
  co.placementPolicy = *policy;
  for (const auto& [name, v] : dims.value_or(std::map<std::string, int64_t>{})) {
    if (v < 0) raise(PyExc_ValueError, "dims: '" + name + "' must be >= 0, got " + std::to_string(v));
    co.dimBindings[name] = v;
  }
  for (const auto& [node, device] : pins.value_or(std::map<std::string, std::string>{})) {
    std::string dev = canonicalDeviceName(device);
    if (dev.empty()) raise(PyExc_ValueError, "pins: unknown device '" + device + "' for node '" + node + "'");
    co.pins.push_back({node, dev});
  }
  for (const auto& [name, s] : shapes.value_or(std::map<std::string, std::vector<int64_t>>{}))
    co.inputShapes[name] = s;
  for (const auto& [name, v] : constants.value_or(std::map<std::string, py::object>{}))
    io.constantInputs[name] = tensorCopyOf(v, "constants: '" + name + "'");
  co.fuse = fuse;
  co.qdqFusion = qdqFusion;
  if (f16Rounding != "islands" && f16Rounding != "per-op")
    raise(PyExc_ValueError, "f16_rounding: 'islands' or 'per-op', got '" + f16Rounding + "'");
  co.f16PerOpRounding = f16Rounding == "per-op";
  if (int8Activations == "model") co.int8Activations = CompileOptions::Int8Activations::Model;
  else if (int8Activations == "all") co.int8Activations = CompileOptions::Int8Activations::All;
  else if (int8Activations == "none") co.int8Activations = CompileOptions::Int8Activations::None;
  else raise(PyExc_ValueError, "int8_activations: 'model', 'all' or 'none', got '" + int8Activations + "'");
  co.strictPlacement = strictPlacement;
  LoadOptions lo = loadOptions(threads);
  requireFile(path, "an ONNX model");

  // 2. Compile and bind, without the GIL (each compile has its own MLIR context).
  CompileResult result;
  Status st;
  {
    py::gil_scoped_release noGil;
    st = compileOnnxFile(path, io, co, &result);
  }
  check(st);
  PlanSource source{path, true, io, co};
  std::unique_ptr<PyPlan> bound = bindPlan(std::move(result.plan), lo, std::move(source));
  bound->compiled = true;
  bound->logText = std::move(result.placementLogText);
  bound->logDot = std::move(result.placementLogDot);
  bound->notes.insert(bound->notes.begin(), result.notes.begin(), result.notes.end());
  return bound;
}

std::unique_ptr<PyPlan> load(const std::string& path, int threads) {
  LoadOptions lo = loadOptions(threads);
  requireFile(path, "a plan");
  std::string bytes;
  Status st = readInputFile(path, &bytes, "plan file");
  check(st);
  plan::Plan p;
  if (!p.ParseFromString(bytes)) throw Error(path + ": not a valid Tandem plan (protobuf parse failed)");
  // Constants kept in a shared weights file come in here, so save() writes a self-contained plan.
  check(resolveExternalConstants(&p, path).withContext(path));
  return bindPlan(std::move(p), lo, PlanSource{path, false, {}, {}});
}

py::tuple shapeTuple(const Shape& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) t[i] = py::int_(s[i]);
  return t;
}

}  // namespace
}  // namespace tandem

PYBIND11_MODULE(tandem, m) {
  using namespace tandem;
  m.doc() =
      "Tandem: compile ONNX models for this machine's devices (or a target list) and run them on "
      "NumPy arrays.\n\n"
      "    import numpy as np, tandem\n"
      "    plan = tandem.compile('model.onnx', dims={'N': 1})\n"
      "    out = plan.run({'input': np.zeros((1, 784), np.float32)})  # {name: ndarray}\n";
  m.attr("__version__") = TANDEM_VERSION_STRING;
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);

  py::class_<TensorInfo>(m, "TensorInfo", "A graph input or output of a plan: name, dtype, shape.")
      .def_readonly("name", &TensorInfo::name)
      .def_property_readonly("dtype", [](const TensorInfo& t) { return numpyDType(t.dtype); },
                             "numpy.dtype")
      .def_property_readonly("shape", [](const TensorInfo& t) { return shapeTuple(t.shape); },
                             "tuple of ints (static: symbolic dims were bound at compile time)")
      .def("__repr__", [](const TensorInfo& t) {
        return "TensorInfo(name='" + t.name + "', dtype=" + py::str(numpyDType(t.dtype)).cast<std::string>() +
               ", shape=" + py::repr(shapeTuple(t.shape)).cast<std::string>() + ")";
      });

  py::class_<PyPlan>(m, "Plan",
                     "A placed, fused, memory-planned program bound to this machine's devices, "
                     "ready to run many times (from several threads at once).")
      .def("run", &PyPlan::run,
           "run(feeds) -> {output name: ndarray}\n"
           "run(output_names, feeds) -> [ndarray]   (onnxruntime's order; None: every output)\n\n"
           "feeds: {input name: array} or a list in input order (Plan.inputs). Each array must "
           "have the input's dtype exactly (TypeError otherwise; no silent casts) and its shape "
           "(ValueError). A C-contiguous, aligned array is read in place, without a copy; any "
           "other layout is copied once into C order; a Python sequence is converted to the "
           "input's dtype. Unknown or missing names raise ValueError.\n\n"
           "Outputs are zero-copy: each array owns the buffer of the runtime's output tensor "
           "(freed with the array), so nothing is copied after the run. The GIL is released "
           "while the plan runs; runs from several threads overlap (Executable::run is "
           "thread-safe; plans with a GPU run one at a time).\n"
           "Errors: tandem.Error when a kernel fails.")
      .def_property_readonly("inputs", [](const PyPlan& p) { return p.infos(true); },
                             "list of TensorInfo, in run order")
      .def_property_readonly("outputs", [](const PyPlan& p) { return p.infos(false); },
                             "list of TensorInfo, in output order")
      .def_readonly("notes", &PyPlan::notes,
                    "what the compiler and the loader decided that one should know "
                    "(e.g. \"symbolic dim 'N' bound to 1\", a device fallback)")
      .def_property_readonly("threads", [](const PyPlan& p) { return p.exe->threads(); },
                             "intra-op CPU threads this plan runs with")
      .def("placement_log", &PyPlan::placementLog, py::arg("format") = "text",
           "The placement log: 'text' (one line per op and per copy, as `tandem compile "
           "--log-placement` prints), 'json' or 'dot' (Graphviz). A plan from tandem.load() "
           "has only 'json' (ValueError for the others).")
      .def("save", &PyPlan::save, py::arg("path"),
           "Writes the plan as a .tplan file (constants inline) that `tandem run`, "
           "`tandem-run` and tandem.load() read. A Plan keeps no second copy of its weights (the "
           "runtime holds them once), so save() reads them again from where they came from: it "
           "compiles the model again with the same options, or reads the .tplan again, and "
           "writes the result only if it is the plan that runs (same steps, placement and "
           "constants), so it takes about a compile's time. Errors: tandem.Error when that "
           "source is gone or has changed; OSError when the file cannot be written. Written to "
           "a temporary and renamed: on error no partial file is left.")
      .def("__repr__", [](const PyPlan& p) {
        return "<tandem.Plan inputs: " + p.namesText(true) + "; outputs: " + p.namesText(false) +
               "; " + std::to_string(p.skeleton.steps_size()) + " steps>";
      });

  m.def("compile", &compile, py::arg("path"), py::arg("target") = py::none(),
        py::arg("placement") = "cost", py::arg("dims") = py::none(), py::arg("pins") = py::none(),
        py::arg("fuse") = true, py::kw_only(), py::arg("shapes") = py::none(),
        py::arg("constants") = py::none(), py::arg("strict_placement") = false,
        py::arg("threads") = 0, py::arg("qdq_fusion") = true, py::arg("f16_rounding") = "islands",
        py::arg("int8_activations") = "model",
        "compile(path, target=None, placement='cost', dims=None, pins=None, fuse=True, *, "
        "shapes=None, constants=None, strict_placement=False, threads=0, qdq_fusion=True, "
        "f16_rounding='islands', int8_activations='model') -> Plan\n\n"
        "Compiles the ONNX model at `path` as `tandem compile` does and binds it to this "
        "machine's devices.\n"
        "  target: devices to place on, e.g. 'cpu' or 'cpu,cuda:0=h100' (a list of names works "
        "too); None = the live devices. A plan for absent GPUs runs their steps on the CPU.\n"
        "  placement: 'cost' | 'greedy' | 'ort' | 'cpu' | 'gpu'.\n"
        "  dims: {'N': 32} binds symbolic dims (others bind to 1, with a note in Plan.notes).\n"
        "  pins: {'node name': 'cuda:0'}; soft unless strict_placement.\n"
        "  fuse: False gives one kernel per op.\n"
        "  shapes: {'input': (1, 3, 224, 224)} exact input shapes (win over dims).\n"
        "  constants: {'input': array} imports those graph inputs as constants (inputs that "
        "size other tensors, e.g. Reshape's shape).\n"
        "  threads: intra-op CPU threads, 0 = the idle cores.\n"
        "  qdq_fusion: False keeps convolutions and matrix products in QDQ form "
        "(DequantizeLinear -> Conv/MatMul/Gemm -> QuantizeLinear) in f32 as written and folds "
        "weight-only quantized weights to f32; True (CPU-only targets) runs each as one int8 "
        "QLinearConv or QLinearMatMul, or a DequantizeMatMul on weights kept 8-bit or 4-bit, "
        "where this CPU has a fast kernel for it (tandem compile --no-qdq-fusion).\n"
        "  f16_rounding: f16/bf16 models, ops without a 16-bit kernel: 'islands' keeps f32 "
        "between them, 'per-op' rounds each result to 16 bits (tandem compile --f16-rounding).\n"
        "  int8_activations: weight-only quantized products may quantize "
        "their activations to int8 per row and block (ONNX Runtime's accuracy level 4): "
        "'model' where the model says so (MatMulNBits accuracy_level 4), 'all' every one, "
        "'none' never (tandem compile --int8-activations).\n"
        "Errors: FileNotFoundError; ValueError for a bad option; tandem.Error with the "
        "compiler's diagnostics (node name and reason) for a model it cannot compile.");
  m.def("load", &load, py::arg("path"), py::kw_only(), py::arg("threads") = 0,
        "load(path, *, threads=0) -> Plan from a .tplan file (tandem compile -o, Plan.save). "
        "Errors: FileNotFoundError; tandem.Error for a file that is not a valid plan.");
  m.def("devices", [] {
        py::list r;
        for (const DeviceInfo& d : discoverDevices()) {
          py::dict props;
          for (const auto& [k, v] : d.properties) props[py::str(k)] = v;
          py::dict e;
          e["name"] = d.name;
          e["kind"] = d.kind;
          e["properties"] = props;
          r.append(e);
        }
        return r;
      },
      "The live devices as `tandem devices --json` lists them: [{'name': 'cpu', 'kind': 'cpu', "
      "'properties': {'cores': '8', 'isa': 'avx2', ...}}, ...] (property values are strings).");
  m.def("read_tensor", [](const std::string& path) {
        requireFile(path, "a tensor file");
        Tensor t;
        check(readTensorFile(path, &t, nullptr));
        return toNumpy(std::move(t));
      },
      py::arg("path"),
      "Reads a serialized ONNX TensorProto (test_data_set_0/input_0.pb) into an ndarray.");
}

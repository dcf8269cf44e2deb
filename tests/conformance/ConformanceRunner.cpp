// ONNX backend-test conformance: runs every test under the ONNX test-data folders, classifies it
// pass / fail / unsupported (with a reason), writes a report, and enforces the committed list of
// passing tests (a listed test that does not pass fails the run; --update-passing only adds).
#include <dirent.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/ShapeInference.h"
#include "frontend/OnnxImporter.h"
#include "runtime/OpTable.h"
#include "tools/driver/Driver.h"

using namespace tandem;

namespace {

struct Options {
  std::string dataDir = "/usr/share/libonnx-testdata/data";
  std::vector<std::string> folders = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  std::string report = "conformance-report.txt";
  std::string passing;  // the committed list
  bool updatePassing = false;
  std::string filter;
  int jobs = 2;
  int timeoutSec = 120;
  double atol = 1e-4, rtol = 1e-3;
};

struct Result {
  std::string name;    // folder/test
  std::string status;  // pass, fail, unsupported
  std::string reason;
};

std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> r;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') r.push_back(e->d_name);
    closedir(d);
  }
  std::sort(r.begin(), r.end());
  return r;
}

bool isDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Unsupported means "uses something outside Tandem's op list or dtypes", decided before running.
std::string unsupportedReason(const std::string& modelPath) {
  std::ifstream in(modelPath, std::ios::binary);
  onnx::ModelProto m;
  if (!in || !m.ParseFromIstream(&in)) return "";  // let the run report the parse error
  for (auto& o : m.opset_import())
    if ((o.domain().empty() || o.domain() == "ai.onnx") && o.version() > 17)
      return "opset " + std::to_string(o.version());
  std::set<std::string> missing;
  for (auto& n : m.graph().node()) {
    // The importer takes the optimizer updates and Gradient from ai.onnx.preview.training.
    const bool training = n.domain() == "ai.onnx.preview.training";
    // Gradient is lowered onto the gradient rules at import.
    if (training ? !opHas(n.op_type(), kPreviewTraining) && n.op_type() != "Gradient"
                 : !n.domain().empty() && n.domain() != "ai.onnx")
      missing.insert(n.domain() + "." + n.op_type());
    else if (!training && !isKnownOp(onnxOpset17Name(n.op_type()))) missing.insert(n.op_type());
  }
  if (!missing.empty()) {
    std::string s = "op";
    for (auto& x : missing) s += " " + x;
    return s;
  }
  auto checkType = [](const onnx::ValueInfoProto& v) -> std::string {
    if (!v.type().has_tensor_type()) return "non-tensor value '" + v.name() + "'";
    int dt = v.type().tensor_type().elem_type();
    if (!isKnownDType(dt))
      return "dtype code " + std::to_string(dt) + " of '" + v.name() + "'";
    return "";
  };
  for (auto& v : m.graph().input())
    if (std::string r = checkType(v); !r.empty()) return r;
  for (auto& v : m.graph().output())
    if (std::string r = checkType(v); !r.empty()) return r;
  return "";
}

// ONNX's backend-test data (this onnx, 1.12) stores BFLOAT16 tensors as UINT16 arrays of the
// bits, numpy having no bfloat16: a UINT16 file for a value the model declares BFLOAT16 is
// re-tagged bf16 (same bytes). The files are the model's graph outputs (`outputs`) or inputs;
// `names`, when given, says which inputs they are (those that are not initializers).
void retagBf16(const std::string& modelPath, bool outputs, const std::vector<std::string>* names,
               std::vector<Tensor>* tensors) {
  std::ifstream in(modelPath, std::ios::binary);
  onnx::ModelProto m;
  if (!in || !m.ParseFromIstream(&in)) return;
  std::map<std::string, int> types;
  std::vector<int> order;
  for (const onnx::ValueInfoProto& v : outputs ? m.graph().output() : m.graph().input()) {
    types[v.name()] = v.type().tensor_type().elem_type();
    order.push_back(v.type().tensor_type().elem_type());
  }
  for (size_t i = 0; i < tensors->size(); ++i) {
    int code = 0;
    if (names && i < names->size()) code = types.count((*names)[i]) ? types[(*names)[i]] : 0;
    else if (!names && i < order.size()) code = order[i];
    Tensor& t = (*tensors)[i];
    if (code != (int)DType::BF16 || !t.defined() || t.dtype() != DType::U16) continue;
    Tensor b = Tensor::alloc(DType::BF16, t.shape());
    std::memcpy(b.raw(), t.raw(), t.bytes());
    t = std::move(b);
  }
}

// Runs one test in this (child) process; returns "" on pass or the failure reason.
std::string runTest(const std::string& dir, const Options& o) {
  std::string model = dir + "/model.onnx";
  std::vector<std::string> names;
  Status st = onnxGraphInputs(model, &names);
  if (!st.isOk()) return st.message();
  int sets = 0;
  for (const std::string& ds : listDir(dir)) {
    if (ds.rfind("test_data_set_", 0) != 0) continue;
    std::string dsDir = dir + "/" + ds;
    std::vector<Tensor> given, expected;
    if (!(st = readTensorDir(dsDir, "input", &given, nullptr)).isOk() && names.size() > 0)
      return st.message();
    if (!(st = readTensorDir(dsDir, "output", &expected, nullptr)).isOk()) return st.message();
    retagBf16(model, false, &names, &given);
    retagBf16(model, true, nullptr, &expected);
    if (given.size() != names.size())
      return ds + ": " + std::to_string(given.size()) + " input files for " +
             std::to_string(names.size()) + " graph inputs";
    ImportOptions io;
    CompileOptions co;
    std::vector<Tensor> inputs;
    if (!(st = specializeOnnxInputs(model, given, &io, &co, &inputs, nullptr)).isOk())
      return st.message();
    CompileResult compiled;
    if (!(st = compileOnnxFile(model, io, co, &compiled)).isOk()) return "compile: " + st.message();
    std::unique_ptr<Executable> exe;
    LoadOptions lo;
    lo.threads = 1;
    if (!(st = Executable::load(compiled.plan, lo, &exe)).isOk()) return "load: " + st.message();
    std::vector<Tensor> outputs;
    if (!(st = exe->run(inputs, &outputs)).isOk()) return "run: " + st.message();
    if (outputs.size() != expected.size())
      return ds + ": " + std::to_string(outputs.size()) + " outputs, expected " + std::to_string(expected.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      Comparison c = compareTensors(outputs[i], expected[i], o.atol, o.rtol);
      if (!c.pass) return ds + " output " + std::to_string(i) + ": " + c.reason;
    }
    ++sets;
  }
  if (sets == 0) return "no test_data_set_* directory";
  return "";
}

std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\t') c = ' ';
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s;
}

// Forks per test so that a crash or hang in one test is a reported failure, not a dead runner.
struct Child {
  pid_t pid;
  int fd;
  size_t index;
};

void startChild(const std::string& dir, size_t index, const Options& o, std::vector<Child>* running) {
  int p[2];
  if (pipe(p) != 0) { perror("pipe"); exit(1); }
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    alarm(o.timeoutSec);
    std::string r = runTest(dir, o);
    std::string msg = r.empty() ? "pass" : "fail\t" + oneLine(r);
    (void)!write(p[1], msg.data(), msg.size());
    close(p[1]);
    _exit(0);
  }
  close(p[1]);
  running->push_back({pid, p[0], index});
}

int usage() {
  std::cerr << "usage: tandem-conformance [--data DIR] [--folders a,b] [--report FILE]\n"
               "         [--passing FILE [--update-passing]] [--filter SUBSTR] [--jobs N]\n"
               "Runs the ONNX backend tests under DIR/<folder>/test_*/ and classifies each as\n"
               "pass, fail or unsupported. With --passing, every test listed there must pass\n"
               "(exit 1 otherwise); --update-passing adds newly passing tests to the list.\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { usage(); exit(2); }
      return argv[++i];
    };
    if (a == "--data") o.dataDir = next();
    else if (a == "--folders") {
      o.folders.clear();
      std::stringstream ss(next());
      for (std::string f; std::getline(ss, f, ',');) o.folders.push_back(f);
    } else if (a == "--report") o.report = next();
    else if (a == "--passing") o.passing = next();
    else if (a == "--update-passing") o.updatePassing = true;
    else if (a == "--filter") o.filter = next();
    else if (a == "--jobs") o.jobs = std::max(1, std::atoi(next().c_str()));
    else if (a == "--timeout") o.timeoutSec = std::max(1, std::atoi(next().c_str()));
    else if (a == "--help" || a == "-h") { usage(); return 0; }
    else return usage();
  }
  if (!isDir(o.dataDir)) {
    std::cerr << "tandem-conformance: " << o.dataDir << ": no such directory (install libonnx-testdata)\n";
    return 1;
  }

  // 1. Collect tests and decide which are unsupported without running them.
  std::vector<std::string> names, dirs;
  std::vector<Result> results;
  for (const std::string& f : o.folders)
    for (const std::string& t : listDir(o.dataDir + "/" + f)) {
      std::string name = f + "/" + t, dir = o.dataDir + "/" + name;
      if (!isDir(dir) || (!o.filter.empty() && name.find(o.filter) == std::string::npos)) continue;
      names.push_back(name);
      dirs.push_back(dir);
    }
  results.resize(names.size());
  std::vector<size_t> toRun;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string why = unsupportedReason(dirs[i] + "/model.onnx");
    if (!why.empty()) results[i] = {names[i], "unsupported", why};
    else toRun.push_back(i);
  }

  // 2. Run the rest, o.jobs at a time, each in its own process.
  std::vector<Child> running;
  size_t next = 0;
  while (next < toRun.size() || !running.empty()) {
    while (next < toRun.size() && (int)running.size() < o.jobs) {
      startChild(dirs[toRun[next]], toRun[next], o, &running);
      ++next;
    }
    int wstatus;
    pid_t done = waitpid(-1, &wstatus, WNOHANG);
    if (done == 0) { usleep(2000); continue; }
    for (size_t k = 0; k < running.size(); ++k) {
      if (running[k].pid != done) continue;
      Child c = running[k];
      running.erase(running.begin() + k);
      std::string out;
      char buf[4096];
      ssize_t n;
      while ((n = read(c.fd, buf, sizeof buf)) > 0) out.append(buf, n);
      close(c.fd);
      Result r{names[c.index], "fail", ""};
      if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        r.reason = sig == SIGALRM ? "timed out after " + std::to_string(o.timeoutSec) + " s"
                                  : std::string("crashed with signal ") + strsignal(sig);
      } else if (out == "pass") r.status = "pass";
      else if (out.rfind("fail\t", 0) == 0) r.reason = out.substr(5);
      else r.reason = "test process exited without a result";
      results[c.index] = r;
      break;
    }
  }

  // 3. Report: one line per test, totals per folder.
  std::map<std::string, std::map<std::string, int>> totals;
  std::ofstream rep(o.report);
  for (const Result& r : results) {
    rep << r.name << "\t" << r.status << (r.reason.empty() ? "" : "\t" + r.reason) << "\n";
    totals[r.name.substr(0, r.name.find('/'))][r.status]++;
  }
  int all[3] = {0, 0, 0};
  std::ostringstream sum;
  for (auto& [folder, t] : totals) {
    sum << folder << ": " << t["pass"] << " pass, " << t["fail"] << " fail, " << t["unsupported"]
        << " unsupported\n";
    all[0] += t["pass"], all[1] += t["fail"], all[2] += t["unsupported"];
  }
  sum << "total: " << all[0] << " pass, " << all[1] << " fail, " << all[2] << " unsupported\n";
  rep << "\n" << sum.str();
  std::cout << sum.str() << "report: " << o.report << "\n";

  // 4. The committed list of passing tests only grows: every listed test must still pass.
  if (o.passing.empty()) return 0;
  std::set<std::string> listed;
  {
    std::ifstream in(o.passing);
    for (std::string l; std::getline(in, l);)
      if (!l.empty() && l[0] != '#') listed.insert(l);
  }
  std::map<std::string, const Result*> byName;
  for (const Result& r : results) byName[r.name] = &r;
  int regressions = 0;
  for (const std::string& l : listed) {
    auto it = byName.find(l);
    if (it == byName.end()) {
      if (o.filter.empty()) {
        std::cout << "REGRESSION " << l << ": listed as passing but not found in " << o.dataDir << "\n";
        ++regressions;
      }
      continue;
    }
    if (it->second->status != "pass") {
      std::cout << "REGRESSION " << l << ": " << it->second->status << " " << it->second->reason << "\n";
      ++regressions;
    }
  }
  if (o.updatePassing) {
    for (const Result& r : results)
      if (r.status == "pass") listed.insert(r.name);
    std::ofstream out(o.passing + ".tmp");
    out << "# ONNX backend tests that pass; tests/conformance/ConformanceRunner enforces it. Only grows.\n";
    for (const std::string& l : listed) out << l << "\n";
    out.close();
    std::rename((o.passing + ".tmp").c_str(), o.passing.c_str());
    std::cout << "passing list: " << listed.size() << " tests in " << o.passing << "\n";
  }
  std::cout << regressions << " listed tests regressed\n";
  return regressions ? 1 : 0;
}

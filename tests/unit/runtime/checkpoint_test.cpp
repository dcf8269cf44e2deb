// Checkpoints (runtime/training/Checkpoint.h): bit-exact round trips, refusal of corrupt,
// truncated and foreign files, a full disk mid-save, and the directory's latest/keep-last-K.
#include "runtime/training/Checkpoint.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace tandem {
namespace {

// Directories made by tempDir, removed when the test binary exits (not by the forked child,
// which leaves through _exit).
struct TempDirs {
  std::vector<std::string> dirs;
  ~TempDirs() {
    for (const auto& d : dirs) std::filesystem::remove_all(d);
  }
} tempDirs;

std::string tempDir() {
  char tmpl[] = "/tmp/tandem_ckpt_XXXXXX";
  const char* d = mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  tempDirs.dirs.push_back(d);
  return d;
}

std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string readAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
void writeAll(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), (std::streamsize)bytes.size());
}

// Tensors of several dtypes with values chosen to catch conversions: NaN payloads, -0.0,
// denormals, int64 extremes, f16 bit patterns.
Checkpoint sample(int64_t step) {
  Checkpoint c;
  c.step = step;
  c.epoch = 4;
  c.positionInEpoch = 384;
  c.shuffleSeed = 0xfedcba9876543210ull;
  c.rngState = std::string("rng\0state\xff", 10);
  c.metadata = {{"lr", "0.001"}, {"optimizer", "adam"}};
  uint32_t nanBits = 0x7fc01234u;
  float nanWithPayload;
  std::memcpy(&nanWithPayload, &nanBits, 4);
  c.tensors["w"] = Tensor::fromVector<float>(
      {2, 3}, {1.5f, -0.0f, nanWithPayload, std::numeric_limits<float>::denorm_min(),
               std::numeric_limits<float>::infinity(), 3.14159274f + (float)step});
  c.tensors["step_count"] = Tensor::fromVector<int64_t>(
      {3}, {std::numeric_limits<int64_t>::min(), -1, std::numeric_limits<int64_t>::max()});
  c.tensors["m.f64"] = Tensor::fromVector<double>({1}, {0.1});
  c.tensors["mask"] = Tensor::fromVector<uint8_t>({2, 2}, {0, 255, 7, 128});
  c.tensors["i32"] = Tensor::fromVector<int32_t>({}, {-123456});
  Tensor h = Tensor::alloc(DType::F16, {2});
  h.data<uint16_t>()[0] = 0x3c00;  // 1.0
  h.data<uint16_t>()[1] = 0xfc01;  // a NaN
  c.tensors["half"] = h;
  c.tensors["empty"] = Tensor::alloc(DType::F32, {0, 4});
  c.fingerprint = checkpointFingerprint(c.tensors);
  return c;
}

void expectSame(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.positionInEpoch, b.positionInEpoch);
  EXPECT_EQ(a.shuffleSeed, b.shuffleSeed);
  EXPECT_EQ(a.rngState, b.rngState);
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    auto it = b.tensors.find(name);
    ASSERT_NE(it, b.tensors.end()) << name;
    EXPECT_EQ(t.dtype(), it->second.dtype()) << name;
    EXPECT_EQ(t.shape(), it->second.shape()) << name;
    ASSERT_EQ(t.bytes(), it->second.bytes()) << name;
    EXPECT_EQ(0, std::memcmp(t.raw(), it->second.raw(), t.bytes())) << name << " not bit-exact";
  }
}

TEST(Checkpoint, RoundTripIsBitExactForEveryDType) {
  const std::string dir = tempDir(), path = dir + "/a.tckpt";
  Checkpoint c = sample(42);
  ASSERT_TRUE(saveCheckpoint(path, c)) << saveCheckpoint(path, c).message();
  Checkpoint back;
  Status st = loadCheckpoint(path, c.fingerprint, &back);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(back.formatVersion, kCheckpointFormatVersion);
  expectSame(c, back);
  // The NaN payload survived (a float round trip through arithmetic could quiet or drop it).
  uint32_t bits;
  std::memcpy(&bits, &back.tensors["w"].data<float>()[2], 4);
  EXPECT_EQ(bits, 0x7fc01234u);
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"a.tckpt"});  // no temporary left
}

TEST(Checkpoint, FingerprintDependsOnNamesDTypesShapesNotValues) {
  Checkpoint a = sample(1), b = sample(2);
  EXPECT_EQ(checkpointFingerprint(a.tensors), checkpointFingerprint(b.tensors));  // values differ
  EXPECT_EQ(checkpointFingerprint(a.tensors).size(), 64u);
  b.tensors["w"] = b.tensors["w"].reshaped({3, 2});
  EXPECT_NE(checkpointFingerprint(a.tensors), checkpointFingerprint(b.tensors));
  std::vector<TensorSpec> specs;
  for (const auto& [n, t] : a.tensors) specs.push_back({n, t.dtype(), t.shape()});
  std::reverse(specs.begin(), specs.end());  // order does not matter
  EXPECT_EQ(checkpointFingerprint(specs), checkpointFingerprint(a.tensors));
}

TEST(Checkpoint, RefusesACorruptByteAnywhere) {
  const std::string dir = tempDir(), path = dir + "/c.tckpt";
  Checkpoint c = sample(7);
  ASSERT_TRUE(saveCheckpoint(path, c));
  const std::string good = readAll(path);
  // Every byte of the header and a spread of the payload: each flip is caught.
  for (size_t at = 0; at < good.size(); at += (at < 64 ? 1 : 37)) {
    std::string bad = good;
    bad[at] ^= 0x20;
    writeAll(path, bad);
    Checkpoint out;
    out.step = -5;
    Status st = loadCheckpoint(path, "", &out);
    ASSERT_FALSE(st) << "flip at byte " << at << " was not detected";
    EXPECT_EQ(st.message().rfind(path + ": ", 0), 0u) << st.message();
    EXPECT_EQ(out.step, -5);  // untouched on error
  }
  // A payload byte: the checksum says so.
  std::string bad = good;
  bad[good.size() - 10] ^= 1;
  writeAll(path, bad);
  Checkpoint out;
  Status st = loadCheckpoint(path, "", &out);
  EXPECT_NE(st.message().find("corrupt checkpoint (SHA-256"), std::string::npos) << st.message();
}

TEST(Checkpoint, RefusesTruncatedAndNonCheckpointFiles) {
  const std::string dir = tempDir(), path = dir + "/t.tckpt";
  ASSERT_TRUE(saveCheckpoint(path, sample(1)));
  const std::string good = readAll(path);
  Checkpoint out;
  for (size_t keep : {good.size() - 1, good.size() / 2, (size_t)60, (size_t)30}) {
    writeAll(path, good.substr(0, keep));
    Status st = loadCheckpoint(path, "", &out);
    ASSERT_FALSE(st) << keep;
    EXPECT_NE(st.message().find("truncated checkpoint"), std::string::npos) << st.message();
  }
  writeAll(path, "");
  EXPECT_NE(loadCheckpoint(path, "", &out).message().find("not a Tandem checkpoint"),
            std::string::npos);
  writeAll(path, "\x08\x01\x12\x03 some protobuf or text file, not ours");
  EXPECT_EQ(loadCheckpoint(path, "", &out).message(),
            path + ": not a Tandem checkpoint (no \"TNDMCKPT\" header)");
  Status st = loadCheckpoint(dir + "/absent.tckpt", "", &out);
  EXPECT_NE(st.message().find("absent.tckpt: cannot open checkpoint (No such file"),
            std::string::npos)
      << st.message();
  // A future format version is named.
  std::string future = good;
  future[8] = 9;
  writeAll(path, future);
  EXPECT_NE(loadCheckpoint(path, "", &out).message().find("format version 9"), std::string::npos);
}

TEST(Checkpoint, RefusesAnotherModelsCheckpointNamingBothFingerprints) {
  const std::string dir = tempDir(), path = dir + "/f.tckpt";
  Checkpoint c = sample(3);
  ASSERT_TRUE(saveCheckpoint(path, c));
  Checkpoint out;
  Status st = loadCheckpoint(path, "other-model-fp", &out);
  EXPECT_EQ(st.message(), path + ": checkpoint of another model (its fingerprint " + c.fingerprint +
                              ", this model's other-model-fp)");
  EXPECT_TRUE(loadCheckpoint(path, "", &out));  // no expectation: any model
}

TEST(Checkpoint, ChecksExpectedTensors) {
  const std::string dir = tempDir(), path = dir + "/e.tckpt";
  ASSERT_TRUE(saveCheckpoint(path, sample(3)));
  Checkpoint out;
  std::vector<TensorSpec> ok = {{"w", DType::F32, {2, 3}}, {"step_count", DType::I64, {3}}};
  EXPECT_TRUE(loadCheckpoint(path, "", &out, &ok));
  std::vector<TensorSpec> missing = {{"w", DType::F32, {2, 3}}, {"bias", DType::F32, {3}}};
  EXPECT_EQ(loadCheckpoint(path, "", &out, &missing).message(),
            path + ": the checkpoint has no tensor 'bias'");
  std::vector<TensorSpec> shape = {{"w", DType::F32, {3, 2}}};
  EXPECT_EQ(loadCheckpoint(path, "", &out, &shape).message(),
            path + ": tensor 'w' is f32 [2,3], the model expects f32 [3,2]");
  std::vector<TensorSpec> dtype = {{"step_count", DType::I32, {3}}};
  EXPECT_EQ(loadCheckpoint(path, "", &out, &dtype).message(),
            path + ": tensor 'step_count' is i64 [3], the model expects i32 [3]");
}

TEST(Checkpoint, SaveRefusesDeviceTensorsAndUnwritablePaths) {
  const std::string dir = tempDir();
  Checkpoint c = sample(1);
  c.tensors["w"].setDevice("cuda:0");
  EXPECT_EQ(saveCheckpoint(dir + "/d.tckpt", c).message(),
            dir + "/d.tckpt: tensor 'w' is on cuda:0; copy it to the host first");
  Status st = saveCheckpoint(dir + "/no/such/dir/x.tckpt", sample(1));
  EXPECT_EQ(st.message(), dir + "/no/such/dir/x.tckpt: cannot write (No such file or directory)");
  EXPECT_TRUE(listDir(dir).empty());
}

// A full disk, simulated by RLIMIT_FSIZE in a child (SIGXFSZ ignored so write fails with EFBIG):
// the save fails naming the file, the old checkpoint is intact and loads, no temporary is left.
TEST(Checkpoint, DiskFullLeavesThePreviousCheckpointIntact) {
  const std::string dir = tempDir(), path = dir + "/ckpt.tckpt";
  Checkpoint old = sample(10);
  ASSERT_TRUE(saveCheckpoint(path, old));
  const std::string oldBytes = readAll(path);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {4096, 4096};
    setrlimit(RLIMIT_FSIZE, &rl);
    Checkpoint big = sample(11);
    big.tensors["big"] = Tensor::alloc(DType::F32, {64 * 1024});  // 256 KiB > 4 KiB
    Status st = saveCheckpoint(path, big);
    std::string msg = st ? std::string("ok") : st.message();
    ssize_t w = write(pipefd[1], msg.data(), msg.size());
    (void)w;
    _exit(st ? 1 : 0);
  }
  close(pipefd[1]);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) msg.append(buf, (size_t)n);
  close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "save should have failed: " << msg;
  EXPECT_EQ(msg, path + ": write failed (File too large)");
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"ckpt.tckpt"});  // no temporary
  EXPECT_EQ(readAll(path), oldBytes);
  Checkpoint back;
  ASSERT_TRUE(loadCheckpoint(path, old.fingerprint, &back));
  expectSame(old, back);
}

TEST(CheckpointDir, KeepsTheLastKAndLatestPointsAtTheNewest) {
  const std::string root = tempDir(), dir = root + "/run";  // created by save
  CheckpointDir cd(dir, 3);
  Checkpoint out;
  bool found = true;
  ASSERT_TRUE(cd.loadLatest("", &out, &found));
  EXPECT_FALSE(found);  // a fresh start
  for (int64_t step : {100, 200, 300, 400, 500}) {
    std::string written;
    ASSERT_TRUE(cd.save(sample(step), &written));
    EXPECT_EQ(written, dir + "/ckpt-" + std::to_string(step) + ".tckpt");
    EXPECT_EQ(readAll(dir + "/latest"), "ckpt-" + std::to_string(step) + ".tckpt\n");
  }
  EXPECT_EQ(listDir(dir), (std::vector<std::string>{"ckpt-300.tckpt", "ckpt-400.tckpt",
                                                    "ckpt-500.tckpt", "latest"}));
  std::vector<int64_t> steps;
  ASSERT_TRUE(cd.steps(&steps));
  EXPECT_EQ(steps, (std::vector<int64_t>{300, 400, 500}));
  ASSERT_TRUE(cd.loadLatest(sample(0).fingerprint, &out, &found));
  EXPECT_TRUE(found);
  expectSame(sample(500), out);
  // Numeric, not lexical, order: step 1000 is newer than 500.
  ASSERT_TRUE(cd.save(sample(1000)));
  ASSERT_TRUE(cd.steps(&steps));
  EXPECT_EQ(steps, (std::vector<int64_t>{400, 500, 1000}));
}

TEST(CheckpointDir, LatestSurvivesAFailedSaveAndIsRequired) {
  const std::string dir = tempDir();
  CheckpointDir cd(dir, 2);
  ASSERT_TRUE(cd.save(sample(1)));
  ASSERT_TRUE(cd.save(sample(2)));
  Checkpoint bad = sample(3);
  bad.tensors["w"].setDevice("cuda:0");  // refused before anything is written
  EXPECT_FALSE(cd.save(bad));
  EXPECT_EQ(readAll(dir + "/latest"), "ckpt-2.tckpt\n");
  EXPECT_EQ(listDir(dir), (std::vector<std::string>{"ckpt-1.tckpt", "ckpt-2.tckpt", "latest"}));
  // A resumed run that saves an older step keeps it (the file just written is never pruned).
  ASSERT_TRUE(cd.save(sample(0)));
  EXPECT_EQ(readAll(dir + "/latest"), "ckpt-0.tckpt\n");
  EXPECT_EQ(listDir(dir), (std::vector<std::string>{"ckpt-0.tckpt", "ckpt-2.tckpt", "latest"}));
  // Without `latest` (a crash between the file and the pointer) the highest step is used.
  ASSERT_EQ(unlink((dir + "/latest").c_str()), 0);
  Checkpoint out;
  bool found = false;
  ASSERT_TRUE(cd.loadLatest("", &out, &found));
  EXPECT_TRUE(found);
  EXPECT_EQ(out.step, 2);
  // A `latest` naming a lost file is an error, not a silent fall-back.
  writeAll(dir + "/latest", "ckpt-7.tckpt\n");
  Status st = cd.loadLatest("", &out, &found);
  EXPECT_FALSE(found);
  EXPECT_NE(st.message().find(dir + "/ckpt-7.tckpt: cannot open checkpoint"), std::string::npos)
      << st.message();
  writeAll(dir + "/latest", "../../etc/passwd\n");
  EXPECT_EQ(cd.loadLatest("", &out, &found).message(),
            dir + "/latest: does not name a checkpoint (\"ckpt-<step>.tckpt\")");
}

}  // namespace
}  // namespace tandem

// Builds the Keras MNIST CNN with tandem::GraphBuilder, compiles it and classifies Fashion-MNIST
// test images on the CPU. The weights are random (He-uniform, fixed seed) until Tandem can
// train, so about 10% of the predictions are right by chance: the point is the API, not accuracy.
//
//   mnist_graph_builder [--count N] [--data DIR]
//
// DIR holds t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz (default
// /usr/share/datasets/fashion-mnist).
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compiler/Compiler.h"
#include "frontend/GraphBuilder.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "runtime/Executable.h"

namespace {

const char* kClassNames[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                               "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// ---- IDX files (http://yann.lecun.com/exdb/mnist/): big-endian u32 magic, dims, then u8 data ----

bool readAll(gzFile f, void* dst, size_t n) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    int chunk = (int)std::min<size_t>(n, 1 << 30);
    int got = gzread(f, p, (unsigned)chunk);
    if (got <= 0) return false;
    p += got;
    n -= (size_t)got;
  }
  return true;
}

bool readU32(gzFile f, uint32_t* v) {
  unsigned char b[4];
  if (!readAll(f, b, 4)) return false;
  *v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
  return true;
}

/// Reads the first `count` items of a gzip'd IDX file with `rank` dims after the item dim.
/// Returns "" or an error naming the file.
std::string readIdx(const std::string& path, uint32_t magic, int rank, size_t count,
                    std::vector<uint8_t>* data, std::vector<uint32_t>* dims) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return path + ": cannot open (is the Fashion-MNIST dataset installed? see --data)";
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(f, gzclose);
  uint32_t m = 0, n = 0;
  if (!readU32(f, &m) || m != magic) return path + ": not an IDX file of the expected kind";
  if (!readU32(f, &n)) return path + ": truncated header";
  dims->clear();
  size_t itemSize = 1;
  for (int i = 0; i < rank; ++i) {
    uint32_t d;
    if (!readU32(f, &d)) return path + ": truncated header";
    dims->push_back(d);
    itemSize *= d;
  }
  if (count > n) {
    return path + ": asked for " + std::to_string(count) + " items but the file has " +
           std::to_string(n);
  }
  data->resize(count * itemSize);
  if (!readAll(f, data->data(), data->size())) return path + ": truncated data";
  return "";
}

// ---- The model ----

/// He-uniform init (Keras' he_uniform): U(-limit, limit), limit = sqrt(6 / fan_in).
tandem::Tensor heUniform(std::mt19937& rng, tandem::Shape shape, int64_t fanIn) {
  tandem::Tensor t = tandem::Tensor::alloc(tandem::DType::F32, shape);
  float limit = std::sqrt(6.0f / (float)fanIn);
  std::uniform_real_distribution<float> u(-limit, limit);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

tandem::Tensor zeros(int64_t n) { return tandem::Tensor::alloc(tandem::DType::F32, {n}); }

/// Conv2D(32, 3x3, relu) → Conv2D(64, 3x3, relu) → MaxPool(2x2) → Dropout(0.25) → Flatten →
/// Dense(128, relu) → Dropout(0.5) → Dense(10, softmax), on x: f32[N, 1, 28, 28].
void buildMnistCnn(tandem::GraphBuilder& g, uint32_t seed) {
  std::mt19937 rng(seed);
  tandem::Value x = g.input("input", tandem::DType::F32, {tandem::Dim("N"), 1, 28, 28});

  tandem::Value h = g.conv(x, g.constant(heUniform(rng, {32, 1, 3, 3}, 1 * 3 * 3)),
                           g.constant(zeros(32)));
  h = g.relu(h);
  h = g.conv(h, g.constant(heUniform(rng, {64, 32, 3, 3}, 32 * 3 * 3)), g.constant(zeros(64)));
  h = g.relu(h);
  tandem::PoolOptions pool;
  pool.kernelShape = {2, 2};
  pool.strides = {2, 2};
  h = g.maxPool(h, pool);                 // [N, 64, 12, 12]
  h = g.dropout(h, 0.25f);                // identity at inference
  h = g.flatten(h, 1);                    // [N, 9216]
  h = g.dense(h, g.constant(heUniform(rng, {9216, 128}, 9216)), g.constant(zeros(128)));
  h = g.relu(h);
  h = g.dropout(h, 0.5f);
  h = g.dense(h, g.constant(heUniform(rng, {128, 10}, 128)), g.constant(zeros(10)));
  g.output(g.softmax(h, -1), "probabilities");  // [N, 10]
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--count N] [--data DIR]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  size_t count = 16;
  std::string dataDir = "/usr/share/datasets/fashion-mnist";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--count" && i + 1 < argc) {
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (*end || v < 1 || v > 10000) {
        std::fprintf(stderr, "error: --count must be an integer in [1, 10000]\n");
        return 2;
      }
      count = (size_t)v;
    } else if (a == "--data" && i + 1 < argc) {
      dataDir = argv[++i];
    } else if (a == "--help" || a == "-h") {
      usage(argv[0]);
      return 0;
    } else {
      return usage(argv[0]);
    }
  }

  // 1. Data: the first `count` test images, scaled to [0, 1] as the model expects.
  std::vector<uint8_t> pixels, labels;
  std::vector<uint32_t> dims;
  std::string err = readIdx(dataDir + "/t10k-images-idx3-ubyte.gz", 0x00000803, 2, count,
                            &pixels, &dims);
  if (err.empty() && (dims[0] != 28 || dims[1] != 28)) err = "images are not 28x28";
  if (err.empty())
    err = readIdx(dataDir + "/t10k-labels-idx1-ubyte.gz", 0x00000801, 0, count, &labels, &dims);
  if (!err.empty()) {
    std::fprintf(stderr, "error: %s\n", err.c_str());
    return 1;
  }
  tandem::Tensor images = tandem::Tensor::alloc(tandem::DType::F32, {(int64_t)count, 1, 28, 28});
  for (size_t i = 0; i < pixels.size(); ++i) images.data<float>()[i] = pixels[i] / 255.0f;

  // 2. Build. Shape errors would come back here with this file's line numbers.
  tandem::GraphBuilder g;
  buildMnistCnn(g, /*seed=*/42);
  mlir::OwningOpRef<mlir::ModuleOp> module = g.finish(&err);
  if (!module) {
    std::fprintf(stderr, "error: %s\n", err.c_str());
    return 1;
  }

  // 3. Compile for the CPU with the symbolic batch N bound to the number of images.
  tandem::CompileOptions options;
  options.dimBindings["N"] = (int64_t)count;
  tandem::CompileResult compiled;
  std::string diagnostics;
  {
    mlir::ScopedDiagnosticHandler handler(g.context(), [&](mlir::Diagnostic& d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
        diagnostics += "  " + d.str() + "\n";
      return mlir::success();
    });
    if (mlir::failed(tandem::compileModule(*module, options, &compiled))) {
      std::fprintf(stderr, "error: compilation failed\n%s", diagnostics.c_str());
      return 1;
    }
  }

  // 4. Load and run.
  std::unique_ptr<tandem::Executable> exe;
  tandem::Status st = tandem::Executable::load(compiled.plan, tandem::LoadOptions{}, &exe);
  std::vector<tandem::Tensor> outputs;
  if (st.isOk()) st = exe->run({images}, &outputs);
  if (!st.isOk()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return 1;
  }

  const tandem::Tensor& probs = outputs.at(0);
  std::printf("NOTE: the weights are random (He-uniform, seed 42): Tandem cannot train yet, so\n"
              "      about 10%% of the predictions are right by chance.\n\n");
  std::printf("%-6s %-24s %s\n", "image", "predicted (p)", "label");
  size_t right = 0;
  for (size_t i = 0; i < count; ++i) {
    const float* p = probs.data<float>() + i * 10;
    int best = 0;
    for (int c = 1; c < 10; ++c)
      if (p[c] > p[best]) best = c;
    bool ok = best == labels[i];
    right += ok;
    char predicted[64];
    std::snprintf(predicted, sizeof predicted, "%d %s (%.2f)", best, kClassNames[best], p[best]);
    std::printf("%-6zu %-24s %d %-12s %s\n", i, predicted, labels[i], kClassNames[labels[i]],
                ok ? "right" : "wrong");
  }
  std::printf("\n%zu of %zu right (%.1f%%) with random weights.\n", right, count,
              100.0 * (double)right / (double)count);
  return 0;
}

// Datasets (frontend/Datasets.h): IDX and ONNX .pb readers on files written here, validation
// errors, the reproducible shuffle, and the real Fashion-MNIST where installed.
#include "frontend/Datasets.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "frontend/OnnxTensor.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tandem_datasets_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

// An IDX file: magic 00 00 type rank, big-endian dims, then `elems` (already big-endian).
std::string idx(int type, const std::vector<uint32_t>& dims, const std::string& elems) {
  std::string b = {0, 0, (char)type, (char)dims.size()};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back((char)(d >> s & 0xff));
  return b + elems;
}

void writeGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), (unsigned)bytes.size()), (int)bytes.size());
  gzclose(f);
}
void writePlain(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), (std::streamsize)bytes.size());
}

TEST(IdxDataset, ReadsGzipUbyteImagesScaledAndLabels) {
  TempDir t;
  // 3 images of 2x2: pixel values chosen so /255 is checkable; labels 9, 0, 4.
  std::string px = {0, (char)255, 51, 102, 1, 2, 3, 4, (char)128, 0, 0, (char)200};
  writeGz(t.path + "/train-images-idx3-ubyte.gz", idx(0x08, {3, 2, 2}, px));
  writeGz(t.path + "/train-labels-idx1-ubyte.gz", idx(0x08, {3}, std::string{9, 0, 4}));
  LabelledDataset d;
  Status st = loadIdxDataset(t.path, "train", &d, {10});
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(d.count, 3);
  EXPECT_EQ(d.sampleShape, (Shape{2, 2}));
  EXPECT_EQ(d.sampleSize(), 4);
  ASSERT_EQ(d.samples.size(), 12u);
  EXPECT_FLOAT_EQ(d.samples[1], 1.0f);
  EXPECT_FLOAT_EQ(d.samples[2], 0.2f);
  EXPECT_FLOAT_EQ(d.sample(2)[0], 128 / 255.0f);
  EXPECT_FLOAT_EQ(d.sample(2)[3], 200 / 255.0f);
  EXPECT_EQ(d.labels, (std::vector<int64_t>{9, 0, 4}));
}

TEST(IdxDataset, ReadsPlainFilesAndWiderTypesBigEndian) {
  TempDir t;
  // i16 images [2, 3] (-2, 258, 7 / 0, 1, -32768) and i32 labels 70000, 3.
  std::string e = {(char)0xff, (char)0xfe, 0x01, 0x02, 0, 7, 0, 0, 0, 1, (char)0x80, 0};
  writePlain(t.path + "/img", idx(0x0B, {2, 3}, e));
  writePlain(t.path + "/lab", idx(0x0C, {2}, std::string{0, 1, 0x11, 0x70, 0, 0, 0, 3}));
  LabelledDataset d;
  Status st = loadIdxFiles(t.path + "/img", t.path + "/lab", &d);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(d.sampleShape, (Shape{3}));
  EXPECT_EQ(d.samples, (std::vector<float>{-2, 258, 7, 0, 1, -32768}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{70000, 3}));
  // The same with numClasses: label 0 is out of range, named with its index and value.
  EXPECT_EQ(loadIdxFiles(t.path + "/img", t.path + "/lab", &d, {10}).message(),
            t.path + "/img: label 0 is 70000, outside [0, 10)");
}

TEST(IdxDataset, RefusesBadFiles) {
  TempDir t;
  const std::string img = t.path + "/img", lab = t.path + "/lab";
  writePlain(lab, idx(0x08, {2}, std::string{1, 2}));
  LabelledDataset d;
  writePlain(img, idx(0x08, {2, 2}, std::string(3, 1)));  // one pixel short
  EXPECT_NE(loadIdxFiles(img, lab, &d).message().find(img + ": truncated"), std::string::npos);
  writePlain(img, idx(0x08, {2, 2}, std::string(5, 1)));
  EXPECT_EQ(loadIdxFiles(img, lab, &d).message(),
            img + ": 1 bytes after the IDX data (not an IDX file, or a corrupt header)");
  writePlain(img, "P5\n28 28\n255\n");
  EXPECT_NE(loadIdxFiles(img, lab, &d).message().find(img + ": not an IDX file"),
            std::string::npos);
  writePlain(img, idx(0x07, {2, 2}, std::string(4, 1)));
  EXPECT_EQ(loadIdxFiles(img, lab, &d).message(),
            img + ": not an IDX file (unknown element type 0x07)");
  writePlain(img, idx(0x08, {3, 1}, std::string(3, 1)));
  EXPECT_EQ(loadIdxFiles(img, lab, &d).message(), lab + ": 2 labels for 3 images in " + img);
  // f32 images with a NaN: refused, naming the sample and element.
  std::string f;
  for (float v : {1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    for (int s = 24; s >= 0; s -= 8) f.push_back((char)(u >> s & 0xff));
  }
  writePlain(img, idx(0x0D, {2, 1}, f));
  EXPECT_EQ(loadIdxFiles(img, lab, &d).message(), img + ": sample 1 element 0 is nan");
  EXPECT_NE(loadIdxFiles(t.path + "/none", lab, &d).message().find(t.path + "/none: cannot open"),
            std::string::npos);
}

// DIR/test_data_set_<k>/input_0.pb, input_1.pb as ONNX's backend tests lay them out.
void writeSet(const std::string& dir, const std::string& name, const Tensor& x, const Tensor& y) {
  fs::create_directories(dir + "/" + name);
  ASSERT_TRUE(writeTensorFile(dir + "/" + name + "/input_0.pb", x, "x"));
  ASSERT_TRUE(writeTensorFile(dir + "/" + name + "/input_1.pb", y, "y"));
}

TEST(OnnxDataSets, ConcatenatesSetsInNumericOrderConvertingLabels) {
  TempDir t;
  // Sets 0, 2 and 10 (10 must come last, not between 0 and 2); labels i32, u8 and i64.
  writeSet(t.path, "test_data_set_10", Tensor::fromVector<float>({1, 1, 2}, {10, 11}),
           Tensor::fromVector<int64_t>({1}, {5}));
  writeSet(t.path, "test_data_set_0", Tensor::fromVector<float>({2, 1, 2}, {0, 1, 2, 3}),
           Tensor::fromVector<int32_t>({2}, {1, 2}));
  writeSet(t.path, "test_data_set_2", Tensor::fromVector<double>({1, 1, 2}, {4.5, 5}),
           Tensor::fromVector<uint8_t>({1, 1}, {3}));
  LabelledDataset d;
  Status st = loadOnnxDataSets(t.path, &d, {6});
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(d.count, 4);
  EXPECT_EQ(d.sampleShape, (Shape{1, 2}));
  EXPECT_EQ(d.samples, (std::vector<float>{0, 1, 2, 3, 4.5, 5, 10, 11}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{1, 2, 3, 5}));
  EXPECT_EQ(loadOnnxDataSets(t.path, &d, {5}).message(), t.path + ": label 3 is 5, outside [0, 5)");
}

TEST(OnnxDataSets, RefusesMismatchesAndBadLabels) {
  TempDir t;
  LabelledDataset d;
  EXPECT_EQ(loadOnnxDataSets(t.path, &d).message(), t.path + ": no test_data_set_* directory");
  writeSet(t.path, "test_data_set_0", Tensor::fromVector<float>({2, 3}, {0, 1, 2, 3, 4, 5}),
           Tensor::fromVector<int64_t>({2}, {0, 1}));
  writeSet(t.path, "test_data_set_1", Tensor::fromVector<float>({1, 4}, {0, 1, 2, 3}),
           Tensor::fromVector<int64_t>({1}, {0}));
  EXPECT_EQ(
      loadOnnxDataSets(t.path, &d).message(),
      t.path + "/test_data_set_1/input_0.pb: samples of shape [4], but test_data_set_0's are [3]");
  writeSet(t.path, "test_data_set_1", Tensor::fromVector<float>({1, 3}, {0, 1, 2}),
           Tensor::fromVector<float>({1}, {0}));
  EXPECT_EQ(loadOnnxDataSets(t.path, &d).message(),
            t.path + "/test_data_set_1/input_1.pb: labels must have an integer dtype, not f32");
  writeSet(t.path, "test_data_set_1", Tensor::fromVector<float>({1, 3}, {0, 1, 2}),
           Tensor::fromVector<int64_t>({2}, {0, 1}));
  EXPECT_NE(loadOnnxDataSets(t.path, &d).message().find("input_1.pb: labels [2] for samples [1,3]"),
            std::string::npos);
  writeSet(t.path, "test_data_set_1",
           Tensor::fromVector<float>({1, 3}, {0, -std::numeric_limits<float>::infinity(), 2}),
           Tensor::fromVector<int64_t>({1}, {0}));
  EXPECT_EQ(loadOnnxDataSets(t.path, &d).message(), t.path + ": sample 2 element 1 is -inf");
  fs::remove(t.path + "/test_data_set_1/input_1.pb");
  EXPECT_NE(loadOnnxDataSets(t.path, &d).message().find("test_data_set_1/input_1.pb"),
            std::string::npos);
}

// A label per position ([n, T], a language model's next tokens): labelShape [T], the labels
// concatenated row-major; [n, 1] stays one label a sample; sets whose label dims differ, and a
// label outside the classes (counted over every position), are refused.
TEST(OnnxDataSets, LabelsPerPosition) {
  TempDir t;
  writeSet(t.path, "test_data_set_0", Tensor::fromVector<int64_t>({2, 3}, {0, 1, 2, 3, 4, 5}),
           Tensor::fromVector<int32_t>({2, 3}, {1, 2, 3, 4, 5, 0}));
  writeSet(t.path, "test_data_set_1", Tensor::fromVector<int64_t>({1, 3}, {6, 7, 8}),
           Tensor::fromVector<int64_t>({1, 3}, {7, 8, 0}));
  LabelledDataset d;
  DatasetOptions o;
  o.sampleDtype = DType::I64;
  o.numClasses = 9;
  Status st = loadOnnxDataSets(t.path, &d, o);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(d.count, 3);
  EXPECT_EQ(d.labelShape, (Shape{3}));
  EXPECT_EQ(d.labelSize(), 3);
  EXPECT_EQ(d.labels, (std::vector<int64_t>{1, 2, 3, 4, 5, 0, 7, 8, 0}));
  o.numClasses = 8;
  EXPECT_EQ(loadOnnxDataSets(t.path, &d, o).message(), t.path + ": label 7 is 8, outside [0, 8)");
  o.numClasses = 0;
  writeSet(t.path, "test_data_set_1", Tensor::fromVector<int64_t>({1, 3}, {6, 7, 8}),
           Tensor::fromVector<int64_t>({1, 1}, {7}));
  EXPECT_EQ(loadOnnxDataSets(t.path, &d, o).message(),
            t.path + "/test_data_set_1/input_1.pb: labels of shape [] a sample, but test_data_set_0's are [3]");
  fs::remove_all(t.path + "/test_data_set_0");
  ASSERT_TRUE(loadOnnxDataSets(t.path, &d, o));
  EXPECT_EQ(d.labelShape, Shape{});  // [n, 1]: a class id a sample
  EXPECT_EQ(d.labels, (std::vector<int64_t>{7}));
}

TEST(ShuffledOrder, IsAPermutationFixedBySeedAndEpoch) {
  const auto a = shuffledOrder(1000, 42, 3);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(a, shuffledOrder(1000, 42, 3));  // resumable: same (seed, epoch), same order
  EXPECT_NE(a, shuffledOrder(1000, 42, 4));
  EXPECT_NE(a, shuffledOrder(1000, 43, 3));
  // seed s epoch e+1 is not seed s+1 epoch e (a plain seed + epoch would make them equal).
  EXPECT_NE(shuffledOrder(1000, 42, 4), shuffledOrder(1000, 43, 3));
  int fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed += a[i] == i;
  EXPECT_LT(fixed, 10);  // a shuffle, not the identity (expected ~1 fixed point)
  EXPECT_TRUE(shuffledOrder(0, 1, 0).empty());
  EXPECT_EQ(shuffledOrder(1, 1, 0), (std::vector<int64_t>{0}));
  // Pinned: the documented algorithm (seed_seq -> mt19937_64 -> Fisher-Yates with rejection)
  // gives exactly this order on every platform; a change here breaks resumes. The values were
  // also produced by a separate Python transcription of the standard's seed_seq and MT19937-64.
  EXPECT_EQ(shuffledOrder(10, 7, 0), (std::vector<int64_t>{9, 2, 7, 4, 8, 3, 6, 5, 0, 1}));
}

TEST(FashionMnist, RealFilesLoadWithBalancedClasses) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << dir << " absent: the real Fashion-MNIST check is skipped";
  }
  for (auto [prefix, count] : {std::pair<const char*, int64_t>{"train", 60000}, {"t10k", 10000}}) {
    LabelledDataset d;
    Status st = loadIdxDataset(dir, prefix, &d, {10});
    ASSERT_TRUE(st) << st.message();
    EXPECT_EQ(d.count, count);
    EXPECT_EQ(d.sampleShape, (Shape{28, 28}));
    std::vector<int64_t> perClass(10);
    for (int64_t l : d.labels) ++perClass[l];
    for (int c = 0; c < 10; ++c) EXPECT_EQ(perClass[c], count / 10) << prefix << " class " << c;
    EXPECT_EQ(d.labels[0], 9) << prefix;  // the first image of both files is an ankle boot
    float lo = 1, hi = 0;
    for (float v : d.samples) lo = std::min(lo, v), hi = std::max(hi, v);
    EXPECT_EQ(lo, 0.0f);
    EXPECT_EQ(hi, 1.0f);
  }
}

}  // namespace
}  // namespace tandem

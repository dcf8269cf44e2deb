// In-memory labelled datasets for training: IDX and ONNX TensorProto readers, validation, and
// the reproducible shuffled order of an epoch (no MLIR).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace tandem {

/// `count` samples of shape `sampleShape` and their i64 labels, row-major and contiguous: the
/// samples are [count, sampleShape...] (`samples` for dtype F32, `integerSamples` for I64, e.g.
/// token ids; the other vector is empty), labels is [count, labelShape...] (labelShape [] : one
/// class a sample; [T]: one a position, e.g. a language model's next tokens).
struct LabelledDataset {
  int64_t count = 0;
  Shape sampleShape;            // one sample's dims, e.g. [28, 28] (IDX) or [1, 28, 28]
  DType dtype = DType::F32;     // F32 or I64
  std::vector<float> samples;   // count * sampleSize() values (F32)
  std::vector<int64_t> integerSamples;  // count * sampleSize() values (I64)
  Shape labelShape;             // one sample's labels; [] = one label
  std::vector<int64_t> labels;  // count * labelSize() values
  /// Elements per sample (the product of sampleShape; 1 for a scalar sample).
  int64_t sampleSize() const { return numElements(sampleShape); }
  int64_t labelSize() const { return numElements(labelShape); }
  const float* sample(int64_t i) const { return samples.data() + i * sampleSize(); }
  /// The samples' first byte, of whichever dtype.
  const void* data() const {
    return dtype == DType::I64 ? static_cast<const void*>(integerSamples.data())
                               : static_cast<const void*>(samples.data());
  }
};

struct DatasetOptions {
  /// When > 0, every label must lie in [0, numClasses); 0 accepts any label.
  int64_t numClasses = 0;
  /// The dtype the samples are kept in: F32 (any numeric samples, converted) or I64 (integer
  /// samples kept exactly, e.g. token ids for an Embedding / Gather; float or bool samples are
  /// an error). loadOnnxDataSets only; IDX images are always F32.
  DType sampleDtype = DType::F32;
};

/// Checks `d`: sizes consistent with count and sampleShape, every f32 sample value finite, every
/// label in [0, numClasses) when numClasses > 0. Errors start with `source` and name the first
/// offender: "SOURCE: label 5 is 12, outside [0, 10)", "SOURCE: sample 3 element 17 is nan".
Status validateDataset(const LabelledDataset& d, const DatasetOptions& o,
                       const std::string& source);

/// Reads an IDX pair (LeCun et al., "THE MNIST DATABASE", the IDX format: big-endian magic
/// 0x0000TTRR with element type TT and rank RR, RR big-endian u32 dims, then the elements).
/// Either file may be gzip-compressed or plain (zlib reads both). Images: rank >= 1, dims
/// [count, ...] become count samples of shape [...]; ubyte elements are scaled to [0, 1] (x/255),
/// other types (i8, i16, i32, f32, f64) are converted to f32 unscaled. Labels: rank 1 [count] of
/// an integer type, converted to i64. Then validateDataset. Errors name the file: missing,
/// not IDX (bad magic or element type), truncated or with trailing bytes, more than
/// maxInputFileBytes() once decompressed, label and image counts that differ.
Status loadIdxFiles(const std::string& imagesPath, const std::string& labelsPath,
                    LabelledDataset* out, const DatasetOptions& o = {});
/// loadIdxFiles of "<dir>/<prefix>-images-idx3-ubyte.gz" and "<dir>/<prefix>-labels-idx1-ubyte.gz"
/// (the MNIST/Fashion-MNIST names; prefix "train" or "t10k").
Status loadIdxDataset(const std::string& dir, const std::string& prefix, LabelledDataset* out,
                      const DatasetOptions& o = {});

/// Reads ONNX backend-test data sets: every DIR/test_data_set_<k>/ with input_0.pb the samples
/// [n, ...] (f32, f64, f16 or an integer type, converted to f32 unscaled; with
/// o.sampleDtype I64 an integer type, kept as i64) and input_1.pb the
/// labels [n] or [n, 1] (one a sample) or [n, d...] (one a position: labelShape [d...]; any
/// integer type, converted to i64), concatenated in order of k
/// (numerically when k is a number, so _2 precedes _10; by name otherwise). Then validateDataset.
/// Errors: DIR with no test_data_set_* directory, a missing or unreadable .pb, float labels,
/// non-integer samples for I64,
/// sample and label counts that differ within a set, sample or label dims that differ between
/// sets (both sets named).
Status loadOnnxDataSets(const std::string& dir, LabelledDataset* out, const DatasetOptions& o = {});

/// The sample order of `epoch` (0-based): a permutation of [0, count) that depends only on
/// (count, seed, epoch), identical on every platform and compiler, so a run resumed at (seed,
/// epoch, position) sees the same remaining samples. Algorithm: std::mt19937_64 seeded with
/// std::seed_seq{seed low 32 bits, seed high 32, epoch low 32, epoch high 32} (both fully
/// specified by the C++ standard); Fisher-Yates (Knuth, TAOCP vol. 2, Algorithm P) from i =
/// count - 1 down to 1 swapping i with j, j = r % (i + 1) for the first 64-bit draw r not below
/// 2^64 mod (i + 1) (rejection, so j is exactly uniform). std::shuffle and
/// std::uniform_int_distribution are not used: their algorithms differ between standard libraries.
std::vector<int64_t> shuffledOrder(int64_t count, uint64_t seed, int64_t epoch);

}  // namespace tandem

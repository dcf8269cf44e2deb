// Host side of the NVRTC-generated kernels: the launch geometry (mirrors TdGeo in the prelude),
// dtype names in generated code, and a Kernel base that resolves its functions after the plan's
// program is compiled and launches them grid-stride on the compute stream.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda/CudaCommon.h"

namespace tandem {
namespace cuda {

constexpr int kMaxRank = 8;

/// Byte-for-byte the TdGeo of generatedPrelude() (same field order and types; x86-64 and NVPTX
/// lay both out identically).
struct TdGeo {
  int64_t n = 0;
  int32_t rank = 0;
  int32_t contiguous = 0;
  int64_t dims[kMaxRank] = {};
  int64_t ostr[kMaxRank] = {};
  int64_t istr[3][kMaxRank] = {};
  int64_t imod[kMaxRank] = {};
  int64_t aux[kMaxRank] = {};
  int64_t obase = 0;
  int64_t ibase[3] = {};
  float alpha = 0, beta = 0;
};

/// Type of a dtype in generated code: "float", "double", "i32", "i64", "u8", "i8", "bool".
const char* deviceTypeName(DType t);
/// Unsigned type of the same size, for dtype-agnostic data movement: "u8", "u16", "u32", "u64".
const char* bitsTypeName(DType t);

/// Row-major strides of `s` in elements.
std::vector<int64_t> denseStrides(const Shape& s);

/// Geometry iterating `iter` (rank <= 8) with a dense output; input k has strides inStrides[k]
/// (same rank; 0 broadcasts) and no modulus. Error when the rank is above 8.
Status makeGeo(const KernelContext& ctx, const Shape& iter,
               const std::vector<std::vector<int64_t>>& inStrides, TdGeo* out);

/// Launches `fn` grid-stride over `n` elements (256 threads a block, at most 32 blocks per SM) on
/// the compute stream. Nothing is launched for n <= 0 (a zero-sized grid is a CUDA error).
Status launchGridStride(DeviceContext& dc, cudaKernel_t fn, int64_t n, void** args);
/// One block (of `threads`, a multiple of 32 up to 1024: the block reductions of the prelude
/// need whole warps; else an internal error) per item, at most 65,535 * 16 blocks (the kernels
/// loop over items by gridDim.x), on the compute stream. Nothing is launched for items <= 0.
Status launchBlocks(DeviceContext& dc, cudaKernel_t fn, int64_t items, int threads, void** args);

/// A kernel made of generated functions: names are added to the plan's program at creation and
/// looked up in prepare(); fn(i) is then launchable.
class GeneratedKernel : public Kernel {
 public:
  explicit GeneratedKernel(DeviceContext* dc) : dc_(dc) {}
  Status prepare() override {
    fns_.resize(names_.size());
    for (size_t i = 0; i < names_.size(); ++i) TANDEM_RETURN_IF_ERROR(dc_->program.function(names_[i], &fns_[i]));
    return Status::ok();
  }
  std::string implName() const override { return "nvrtc"; }

 protected:
  /// Adds a function to the plan's program; returns its index for fn().
  Status use(const std::string& name, const std::string& source, size_t* index) {
    TANDEM_RETURN_IF_ERROR(dc_->program.add(name, source));
    names_.push_back(name);
    *index = names_.size() - 1;
    return Status::ok();
  }
  cudaKernel_t fn(size_t i) const { return fns_[i]; }
  DeviceContext* dc_;

 private:
  std::vector<std::string> names_;
  std::vector<cudaKernel_t> fns_;
};

/// Source of the dtype-agnostic strided copy "td_copy_<bits>": out[obase + sum idx*ostr] =
/// in[ibase0 + sum (idx % imod) * istr0] over geo.dims. Used by Transpose, Expand, Tile, Slice,
/// Concat, Split and Gemm's C broadcast.
std::string copyKernelName(DType t);
std::string copyKernelSource(DType t);

/// Source of the dtype-agnostic gather through per-dim index maps "td_pad_<bits>" (Indexing.cpp):
/// out[i] = all maps[g.aux[d] + idx_d] >= 0 ? in[sum maps[...] * istr0] : fill. Pad, and the
/// asymmetric-padding path of Conv.
std::string padName(DType t);
std::string padSource(DType t);

/// Each category's generated functions for every dtype it supports (name, source).
std::vector<std::pair<std::string, std::string>> elementwiseSources();  // Elementwise.cpp
std::vector<std::pair<std::string, std::string>> tensorSources();       // Tensor.cpp
std::vector<std::pair<std::string, std::string>> indexingSources();     // Indexing.cpp
std::vector<std::pair<std::string, std::string>> lossSources();         // Loss.cpp
std::vector<std::pair<std::string, std::string>> imageSources();        // Image.cpp (Resize)
std::vector<std::pair<std::string, std::string>> generateSources();     // Generate.cpp (CumSum)
std::vector<std::pair<std::string, std::string>> selectionSources();    // Selection.cpp
std::vector<std::pair<std::string, std::string>> poolSources();         // Pool.cpp (MaxPoolGrad)
std::vector<std::pair<std::string, std::string>> reductionSources();    // Reduction.cpp
std::vector<std::pair<std::string, std::string>> normSources();         // Normalization.cpp
/// The fixed-source fused kernels (Fused.cpp); the element-wise ones are generated per body.
std::vector<std::pair<std::string, std::string>> fusedSources();        // Fused.cpp

/// Every generated function the backend can emit, instantiated for every dtype it supports
/// (name, source); the compile-only test builds them all into one program.
std::vector<std::pair<std::string, std::string>> allGeneratedSources();

}  // namespace cuda
}  // namespace tandem

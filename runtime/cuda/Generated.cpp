// Host helpers for generated kernels: geometry, launches, the shared strided-copy kernel.
#include "runtime/cuda/Generated.h"

#include <algorithm>

namespace tandem {
namespace cuda {

static_assert(sizeof(TdGeo) == 8 + 4 + 4 + 8 * 8 * 2 + 8 * 8 * 3 + 8 * 8 * 2 + 8 + 8 * 3 + 4 + 4,
              "TdGeo must match the prelude's struct");

const char* deviceTypeName(DType t) {
  switch (t) {
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
    case DType::I8: return "i8";
    case DType::Bool: return "bool";
    default: return "void";
  }
}

const char* bitsTypeName(DType t) {
  switch (dtypeSize(t)) {
    case 1: return "u8";
    case 2: return "u16";
    case 4: return "u32";
    default: return "u64";
  }
}

std::vector<int64_t> denseStrides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = (int64_t)s.size() - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

Status makeGeo(const KernelContext& ctx, const Shape& iter,
               const std::vector<std::vector<int64_t>>& inStrides, TdGeo* g) {
  if (iter.size() > (size_t)kMaxRank)
    return Status::error(opLabel(ctx) + ": rank " + std::to_string(iter.size()) +
                         " is above the CUDA kernels' limit of " + std::to_string(kMaxRank));
  *g = TdGeo{};
  g->n = numElements(iter);
  g->rank = (int32_t)iter.size();
  std::vector<int64_t> dense = denseStrides(iter);
  bool contiguous = true;
  for (size_t d = 0; d < iter.size(); ++d) {
    g->dims[d] = iter[d];
    g->ostr[d] = dense[d];
    g->imod[d] = std::max<int64_t>(iter[d], 1);
  }
  for (size_t k = 0; k < inStrides.size() && k < 3; ++k) {
    for (size_t d = 0; d < iter.size(); ++d) {
      g->istr[k][d] = inStrides[k][d];
      if (iter[d] > 1 && inStrides[k][d] != dense[d]) contiguous = false;
    }
  }
  g->contiguous = contiguous ? 1 : 0;
  return Status::ok();
}

Status launchGridStride(DeviceContext& dc, cudaKernel_t fn, int64_t n, void** args) {
  if (n <= 0) return Status::ok();
  int64_t blocks = std::min<int64_t>((n + 255) / 256, std::max(1, dc.smCount) * 32);
  return check(cudaLaunchKernel((const void*)fn, dim3((unsigned)blocks), dim3(256), args, 0, dc.compute),
               "cudaLaunchKernel");
}

Status launchBlocks(DeviceContext& dc, cudaKernel_t fn, int64_t items, int threads, void** args) {
  // The prelude's block reductions read one partial per full warp.
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    return Status::error("internal: a block of " + std::to_string(threads) +
                         " threads; generated block kernels need a multiple of 32 up to 1024");
  if (items <= 0) return Status::ok();
  int64_t blocks = std::min<int64_t>(items, 65535LL * 16);
  return check(cudaLaunchKernel((const void*)fn, dim3((unsigned)blocks), dim3(threads), args, 0, dc.compute),
               "cudaLaunchKernel");
}

std::string copyKernelName(DType t) { return std::string("td_copy_") + bitsTypeName(t); }

std::string copyKernelSource(DType t) {
  std::string T = bitsTypeName(t);
  return "extern \"C\" __global__ void " + copyKernelName(t) + "(TdGeo g, " + T + "* __restrict__ out, const " + T +
         R"(* __restrict__ in) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += (i64)gridDim.x * blockDim.x) {
    i64 r = i, oo = g.obase, io = g.ibase[0];
    for (int d = g.rank - 1; d >= 0; --d) {
      i64 x = r % g.dims[d];
      r /= g.dims[d];
      oo += x * g.ostr[d];
      io += (x % g.imod[d]) * g.istr[0][d];
    }
    out[oo] = in[io];
  }
}
)";
}

std::vector<std::pair<std::string, std::string>> allGeneratedSources() {
  std::vector<std::pair<std::string, std::string>> all;
  for (auto* f : {elementwiseSources, tensorSources, indexingSources, lossSources, imageSources,
                  generateSources, selectionSources, poolSources, reductionSources, normSources, fusedSources})
    for (auto& s : f()) all.push_back(std::move(s));
  return all;
}

}  // namespace cuda
}  // namespace tandem

// The fast CPU kernel of Tandem's DequantizeMatMul (runtime/cpu/ref/DequantizeMatMul.h): B packed
// once at load and kept 8-bit, or 4-bit where it fits (runtime/cpu/avx2/DequantGemm.h). Up to
// avx2::dequantGemmRegisterRows() rows of A (a decoding step) take DequantGemm's register
// path, 1 byte (or half of one) of B read per weight. More rows (a prefill) take one of three variants, which
// the loader times on the instance (KernelDef::variants); without one named, "dnnl":
//   "registers" DequantGemm's register path at any number of rows;
//   "panels"    DequantGemm's panel path: panels of B dequantized in L2, Sgemm.h's AVX2
//               micro-kernels;
//   "dnnl"      columns of B dequantized into a row-major f32 block of the thread workspace
//               (chunkColumns), then oneDNN's matmul on it (brgemm on AVX-512 hosts).
// With accuracy_level 4 (ONNX Runtime's "int8 activations allowed", taken from MatMulNBits),
// one variant at any number of rows, so that the numbers do not depend on a timing:
//   "int8"      A quantized to int8 per row and block, int32 dot products with the 4-bit or
//               8-bit weights (runtime/cpu/avx2/DequantGemmInt8.h).
#include <omp.h>

#include <algorithm>

#include "runtime/cpu/avx2/DequantGemm.h"
#include "runtime/cpu/avx2/DequantGemmInt8.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"
#include "runtime/cpu/ref/DequantizeMatMul.h"

namespace tandem {
namespace dnnlcpu {
namespace {

using dnnl::memory;

/// Columns of B per oneDNN product: the f32 block of K rows stays within 256 KiB, in L2 while
/// oneDNN copies it into its own layout. Measured on llama_prefill_int8 (128 rows, K 512 and
/// 1408; AMD EPYC Zen 5, AVX-512, 1 thread, 10+ runs each): 256 KiB 13.5-14.5 ms, 128 KiB 14.6,
/// 512 KiB 14.2-15.2, 1-16 MiB 14.6-14.9.
int64_t chunkColumns(int64_t K, int64_t N) {
  const int64_t fit = std::max<int64_t>(16, (256 << 10) / (4 * K) / 16 * 16);
  return std::min(fit, (N + 15) / 16 * 16);
}

/// B and its quantization parameters as DequantGemm reads them (constants of ctx).
avx2::QuantBSource quantSource(const KernelContext& ctx, const ref::DequantizeMatMulShape& s) {
  const Tensor& B = *ctx.constInputs[1];
  avx2::QuantBSource src;
  src.q = B.raw();
  src.isUnsigned = B.dtype() == DType::U8;
  src.K = s.K;
  src.N = s.N;
  src.scale = ctx.constInputs[2]->data<float>();
  src.scaleCount = s.scaleCount;
  src.zeroPoint = s.hasZeroPoint ? ctx.constInputs[3]->raw() : nullptr;
  src.blockSize = s.blockSize;
  return src;
}

class DequantizeMatMulKernel final : public DnnlKernel {
 public:
  /// `path`: DequantGemm's path, or (useDnnl) none: oneDNN on dequantized columns.
  /// int8: the "int8" variant (B packed for dot products; the f32 packing dropped).
  Status init(const KernelContext& ctx, const ref::DequantizeMatMulShape& s, bool useDnnl,
              avx2::DequantGemmPath path, bool int8) {
    std::string why;
    if (!packed_.pack(quantSource(ctx, s), &why)) return Status::error(ctx.opType + ": " + why);
    if (s.hasBias) {
      const float* b = ctx.constInputs[4]->data<float>();
      bias_.assign(b, b + s.N);
    }
    rows_ = s.rows;
    path_ = path;
    if (int8) {
      if (!dot_.pack(packed_, &why)) return Status::error(ctx.opType + ": " + why);
      packed_ = avx2::PackedQuantB();
      impl_ = std::string("avx2:dequant_gemm_int8(") + avx2::int8DotIsa() + ", " +
              (dot_.eightBit() ? "8-bit" : "4-bit") + ")";
      return Status::ok();
    }
    const std::string bits = packed_.nibbles() ? "4-bit" : "8-bit";
    impl_ = path == avx2::DequantGemmPath::Panels
                ? "avx2:dequant_gemm_panels(" + bits + ")"
                : std::string("avx2:dequant_gemm_registers(") + avx2::dequantGemmIsa() + ", " + bits + ")";
    if (useDnnl) buildChunks(s);
    return Status::ok();
  }

  /// B, b_scale and b_zero_point are packed, the bias copied: run() reads A only.
  bool consumesConstant(size_t input) const override { return input >= 1; }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    const float* a = in[0]->data<float>();
    float* y = out[0]->data<float>();
    if (dot_.rows() > 0) {
      avx2::dequantGemmInt8(rows_, a, dot_.rows(), dot_, y, dot_.cols(),
                            bias_.empty() ? nullptr : bias_.data(), omp_get_max_threads());
      return Status::ok();
    }
    if (chunks_.empty()) {
      avx2::GemmEpilogue ep;
      ep.bias = bias_.empty() ? nullptr : bias_.data();
      avx2::dequantGemm(rows_, a, packed_.rows(), packed_, y, packed_.cols(), ep,
                        omp_get_max_threads(), path_);
      return Status::ok();
    }
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("DequantizeMatMul", [&] {
      char* ws = threadWorkspace(ws_.total());
      float* block = reinterpret_cast<float*>(ws + blockAt_);
      for (Chunk& c : chunks_) {
        avx2::dequantizeColumns(packed_, c.n0 / 16, (c.cols + 15) / 16, block, ld_,
                                omp_get_max_threads());
        c.scratch.bindBuffers(ws);
        bind(c.a, a);
        bind(c.b, block);
        bind(c.y, y + c.n0);
        if (!bias_.empty()) bind(c.bias, bias_.data() + c.n0);
        c.args.execute(c.prim);
      }
      return Status::ok();
    });
  }

 private:
  /// One oneDNN product: all rows of A times columns [n0, n0 + cols) of B.
  struct Chunk {
    int64_t n0 = 0, cols = 0;
    dnnl::matmul prim;
    memory a, b, y, bias;
    Scratchpad scratch;
    ExecArgs args;
  };

  void buildChunks(const ref::DequantizeMatMulShape& s) {
    const int64_t K = s.K, N = s.N, M = s.rows;
    const int64_t width = chunkColumns(K, N);
    ld_ = width;
    dnnl::engine& eng = cpuEngine();
    chunks_.reserve((N + width - 1) / width);
    std::string impl;
    for (int64_t n0 = 0; n0 < N; n0 += width) {
      Chunk& c = chunks_.emplace_back();
      c.n0 = n0;
      c.cols = std::min(width, N - n0);
      const memory::desc aMd({M, K}, memory::data_type::f32, memory::dims{K, 1});
      const memory::desc bMd({K, c.cols}, memory::data_type::f32, memory::dims{ld_, 1});
      const memory::desc yMd({M, c.cols}, memory::data_type::f32, memory::dims{N, 1});
      const memory::desc biasMd({1, c.cols}, memory::data_type::f32, memory::dims{c.cols, 1});
      dnnl::matmul::primitive_desc pd =
          bias_.empty() ? dnnl::matmul::primitive_desc(dnnl::matmul::desc(aMd, bMd, yMd), baseAttr(), eng)
                        : dnnl::matmul::primitive_desc(dnnl::matmul::desc(aMd, bMd, biasMd, yMd),
                                                       baseAttr(), eng);
      c.prim = dnnl::matmul(pd);
      c.a = memory(aMd, eng, DNNL_MEMORY_NONE);
      c.b = memory(bMd, eng, DNNL_MEMORY_NONE);
      c.y = memory(yMd, eng, DNNL_MEMORY_NONE);
      c.args.add(DNNL_ARG_SRC, c.a);
      c.args.add(DNNL_ARG_WEIGHTS, c.b);
      c.args.add(DNNL_ARG_DST, c.y);
      if (!bias_.empty()) {
        c.bias = memory(biasMd, eng, DNNL_MEMORY_NONE);
        c.args.add(DNNL_ARG_BIAS, c.bias);
      }
      c.scratch.init(pd, &ws_, &c.args);
      impl = pd.impl_info_str();
    }
    blockAt_ = ws_.add(sizeof(float) * K * ld_);
    impl_ = "dnnl:" + impl + " on columns dequantized by avx2 (" +
            (packed_.nibbles() ? "4-bit" : "8-bit") + ")";
  }

  avx2::PackedQuantB packed_;
  avx2::PackedDotB dot_;  // the "int8" variant; else empty
  std::vector<float> bias_;
  int64_t rows_ = 0, ld_ = 0;
  avx2::DequantGemmPath path_ = avx2::DequantGemmPath::Registers;
  std::vector<Chunk> chunks_;  // the "dnnl" variant past the register path's rows; else empty
  WorkspaceLayout ws_;
  size_t blockAt_ = 0;
};

/// Whether the "int8" variant applies: accuracy_level 4 (or more, clamped as ONNX Runtime
/// does) on a host with the instructions.
bool int8Applies(const KernelContext& ctx) {
  return ctx.attrs->getInt("accuracy_level", 0) >= 4 && avx2::int8DotAvailable();
}

/// Whether A has so few rows that the register path is the one choice (no variants to time).
bool registerRows(const KernelContext& ctx) {
  const Shape& a = ctx.inputTypes[0].shape;
  return numElements(a) / std::max<int64_t>(1, a.empty() ? 1 : a.back()) <=
         avx2::dequantGemmRegisterRows();
}

Status createDequantizeMatMul(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const std::string& v = ctx.variant;
  if (!v.empty() && v != "registers" && v != "panels" && v != "dnnl" && v != "int8")
    return Status::error("DequantizeMatMul: unknown variant '" + v + "'");
  ref::DequantizeMatMulShape s;
  TANDEM_RETURN_IF_ERROR(ref::dequantizeMatMulShape(ctx, &s));
  if (!avx2::available() || !ref::dequantizeMatMulConstants(ctx)) {
    // The heuristic falls back on the reference; a named variant that does not apply is an
    // error (KernelContext::variant).
    if (v.empty()) return ref::createDequantizeMatMulRef(ctx, out);
    return Status::error("DequantizeMatMul: variant " + v +
                         " needs AVX2 + FMA and constant B, b_scale, b_zero_point and bias");
  }
  const bool int8 = (v.empty() || v == "int8") && int8Applies(ctx);
  if (v == "int8" && !int8)
    return Status::error("DequantizeMatMul: variant int8 needs accuracy_level 4 and AVX2 + FMA or "
                         "AVX-512 VNNI");
  const bool few = s.rows <= avx2::dequantGemmRegisterRows();
  const bool useDnnl = !int8 && (v == "dnnl" || (v.empty() && !few));
  const avx2::DequantGemmPath path =
      v == "panels" ? avx2::DequantGemmPath::Panels : avx2::DequantGemmPath::Registers;
  return guardDnnl(ctx, [&] {
    auto k = std::make_unique<DequantizeMatMulKernel>();
    TANDEM_RETURN_IF_ERROR(k->init(ctx, s, useDnnl, path, int8));
    *out = std::move(k);
    return Status::ok();
  });
}

}  // namespace

void registerDnnlDequantizeMatMulKernels(KernelRegistry& r) {
  KernelDef d = makeDef(
      "DequantizeMatMul",
      [](const KernelContext& ctx) {
        return avx2::available() && ref::dequantizeMatMulConstants(ctx) && !hasEmptyTensor(ctx);
      },
      createDequantizeMatMul);
  d.accepts = [](const std::vector<DType>& in) {
    return in.size() >= 3 && in[0] == DType::F32 && (in[1] == DType::U8 || in[1] == DType::I8) &&
           in[2] == DType::F32;
  };
  d.dtypesText = "A f32; B u8,i8 (constant); b_scale f32";
  // --tandem-fuse-qdq reads a name other than "ref" as "this CPU has a fast kernel"
  // (passes/FuseQdq.cpp). The reference is never offered: it dequantizes B on every run.
  d.variants = [](const KernelContext& ctx) {
    if (int8Applies(ctx)) return std::vector<std::string>{"int8"};
    if (registerRows(ctx)) return std::vector<std::string>{"registers"};
    return std::vector<std::string>{"registers", "panels", "dnnl"};
  };
  r.add(std::move(d));
}

}  // namespace dnnlcpu
}  // namespace tandem

// Gemm and MatMul through cuBLASLt, in FP32 (CUBLAS_COMPUTE_32F: no TF32, so results match the
// CPU within FP32 rounding). Row-major C = A B is computed as column-major C^T = B^T A^T.
// Epilogues (the gemm-epilogue fusion contract, runtime/cuda/Fused.cpp): a [N] bias (Gemm's C
// when it is a row vector and beta = 1; MatMul's optional third input) and the activation the
// step attribute `activation` names: "Relu", or "Gelu" (cuBLASLt's GELU epilogue is the tanh
// approximation, ONNX Gelu approximate="tanh"). Other C shapes are expanded into the output by
// the generated strided copy, then accumulated with beta (no activation then).
// MatMul batches: a single B folds A's batch into rows (one GEMM); equal batches, or a single A
// against B's batch (stride 0), make one strided-batched call; any other broadcast one call per
// output matrix.
// Alignment: cuBLASLt's heuristic assumes 256-byte-aligned operands unless told otherwise, but
// arena slots are only 64-byte aligned and matrices inside a batch may be 4; the algorithm is
// chosen per run for the real alignment of the pointers (a plan may run with other buffers),
// and cached per alignment.
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/Choices.h"
#include "runtime/cuda/Generated.h"

#include <array>
#include <map>
#include <mutex>

namespace tandem {
namespace cuda {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

enum class Activation { None, Relu, Gelu };

struct LtCall {
  int64_t aOffset = 0, bOffset = 0, dOffset = 0;  // elements, for per-matrix calls
};

class LtMatmulKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  ~LtMatmulKernel() override {
    if (pref_) cublasLtMatmulPreferenceDestroy(pref_);
    for (cublasLtMatrixLayout_t l : {la_, lb_, lc_}) if (l) cublasLtMatrixLayoutDestroy(l);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
  }
  std::string implName() const override { return "cublasLt"; }

  // Row-major problem: D[M,N] = alpha * op(A)[M,K] op(B)[K,N] (+ epilogue), `batch` matrices
  // with element strides sa, sb (0 = shared) and M*N for D.
  Status init(const KernelContext& ctx, int64_t M, int64_t N, int64_t K, bool transA, bool transB,
              int64_t batch, int64_t sa, int64_t sb, float alpha, float beta, bool bias, Activation act) {
    M_ = M, N_ = N, K_ = K, alpha_ = alpha, beta_ = beta;
    TANDEM_CUDA_RETURN(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    // Column-major view: first operand is our B, second our A.
    cublasOperation_t opFirst = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opSecond = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    TANDEM_CUDA_RETURN(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst, sizeof opFirst));
    TANDEM_CUDA_RETURN(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond, sizeof opSecond));
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    switch (act) {
      case Activation::None: epi = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
      case Activation::Relu: epi = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
      case Activation::Gelu: epi = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU; break;
    }
    if (bias) {
      cudaDataType_t bt = CUDA_R_32F;
      TANDEM_CUDA_RETURN(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    TANDEM_CUDA_RETURN(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    // Layouts (column-major): our B is N x K (ld N) or, transposed in storage, K x N (ld K).
    TANDEM_CUDA_RETURN(cublasLtMatrixLayoutCreate(&la_, CUDA_R_32F, transB ? K : N, transB ? N : K, transB ? K : N));
    TANDEM_CUDA_RETURN(cublasLtMatrixLayoutCreate(&lb_, CUDA_R_32F, transA ? M : K, transA ? K : M, transA ? M : K));
    TANDEM_CUDA_RETURN(cublasLtMatrixLayoutCreate(&lc_, CUDA_R_32F, N, M, N));
    if (batch > 1) {
      int32_t count = (int32_t)batch;
      int64_t sd = M * N;
      for (auto [l, st] : {std::pair{la_, sb}, std::pair{lb_, sa}, std::pair{lc_, sd}}) {
        TANDEM_CUDA_RETURN(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
        TANDEM_CUDA_RETURN(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st));
      }
    }
    batch_ = batch, sa_ = sa, sb_ = sb;
    label_ = opLabel(ctx);
    ctx.cuda->reserveWorkspace(kWorkspaceBytes);
    TANDEM_CUDA_RETURN(cublasLtMatmulPreferenceCreate(&pref_));
    size_t ws = kWorkspaceBytes;
    TANDEM_CUDA_RETURN(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    // At load, with fully aligned operands: a problem cuBLASLt cannot do at all fails here.
    const cublasLtMatmulAlgo_t* algo = nullptr;
    uint32_t best = (uint32_t)kMaxOperandAlignment;
    return algoFor({best, best, best}, &algo);
  }

  int aIn = 0, bIn = 1, biasIn = -1;   // input indices
  std::vector<LtCall> calls = {LtCall{}};
  // Gemm's non-vector C: expanded into the output before the product (beta accumulates it).
  bool expandC = false;
  TdGeo cGeo;
  Status useCopy(DType t) { return use(copyKernelName(t), copyKernelSource(t), &copyFn_); }

  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    // The bias pointer is an attribute of the shared descriptor, read when cublasLtMatmul
    // enqueues: two runs of one plan from two host threads must not interleave set and enqueue.
    std::lock_guard<std::mutex> lock(runMu_);
    float* d = static_cast<float*>(outs[0]->raw());
    const float* a = static_cast<const float*>(ins[aIn]->raw());
    const float* b = static_cast<const float*>(ins[bIn]->raw());
    if (biasIn >= 0) {
      const void* bias = ins[biasIn]->raw();
      TANDEM_CUDA_RETURN(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    if (expandC) {
      const void* c = ins[2]->raw();
      void* o = d;
      void* args[] = {&cGeo, &o, &c};
      TANDEM_RETURN_IF_ERROR(launchGridStride(*dc_, fn(copyFn_), cGeo.n, args));
    }
    float beta = expandC ? beta_ : 0.f;
    // The weakest alignment over every matrix this run touches (column-major first operand:
    // our B; second: our A; C and D: the output).
    size_t fs = sizeof(float);
    uint32_t alB = (uint32_t)kMaxOperandAlignment, alA = alB, alD = alB;
    for (const LtCall& c : calls) {
      alB = std::min(alB, (uint32_t)batchAlignment((uintptr_t)(b + c.bOffset), sb_ * (int64_t)fs, batch_));
      alA = std::min(alA, (uint32_t)batchAlignment((uintptr_t)(a + c.aOffset), sa_ * (int64_t)fs, batch_));
      alD = std::min(alD, (uint32_t)batchAlignment((uintptr_t)(d + c.dOffset), M_ * N_ * (int64_t)fs, batch_));
    }
    const cublasLtMatmulAlgo_t* algo = nullptr;
    TANDEM_RETURN_IF_ERROR(algoFor({alB, alA, alD}, &algo));
    for (const LtCall& c : calls)
      TANDEM_CUDA_RETURN(cublasLtMatmul(dc_->lt, desc_, &alpha_, b + c.bOffset, la_, a + c.aOffset, lb_, &beta,
                                        d + c.dOffset, lc_, d + c.dOffset, lc_, algo, dc_->workspace,
                                        dc_->workspaceBytes, dc_->compute));
    return Status::ok();
  }

 private:
  // Column-major operand alignments in bytes: {first (our B), second (our A), C = D}.
  using Alignments = std::array<uint32_t, 3>;

  // The heuristic's best algorithm for operands of these alignments, computed once per
  // alignment. Callers hold runMu_ (or are in init, before any run).
  Status algoFor(const Alignments& al, const cublasLtMatmulAlgo_t** out) {
    auto it = algos_.find(al);
    if (it == algos_.end()) {
      uint32_t c = al[2];
      TANDEM_CUDA_RETURN(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof al[0]));
      TANDEM_CUDA_RETURN(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof al[1]));
      TANDEM_CUDA_RETURN(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &c, sizeof c));
      TANDEM_CUDA_RETURN(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &c, sizeof c));
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      TANDEM_CUDA_RETURN(cublasLtMatmulAlgoGetHeuristic(dc_->lt, desc_, la_, lb_, lc_, lc_, pref_, 1, &result, &found));
      if (found == 0)
        return Status::error(label_ + ": cuBLASLt has no algorithm for " + std::to_string(M_) + "x" +
                             std::to_string(K_) + " * " + std::to_string(K_) + "x" + std::to_string(N_) +
                             " with operands aligned to " + std::to_string(al[1]) + ", " + std::to_string(al[0]) +
                             " and " + std::to_string(al[2]) + " bytes");
      it = algos_.emplace(al, result.algo).first;
    }
    *out = &it->second;
    return Status::ok();
  }

  int64_t M_ = 0, N_ = 0, K_ = 0;
  int64_t batch_ = 1, sa_ = 0, sb_ = 0;  // strided batch: count and element strides of A, B
  float alpha_ = 1.f, beta_ = 0.f;
  std::string label_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  std::map<Alignments, cublasLtMatmulAlgo_t> algos_;
  size_t copyFn_ = 0;
  std::mutex runMu_;
};

// The step's epilogue activation; an unknown name is an error at load, never a plain product.
Status activationOf(const KernelContext& ctx, Activation* act) {
  std::string a = ctx.attrs->getString("activation", "");
  if (a.empty()) *act = Activation::None;
  else if (a == "Relu") *act = Activation::Relu;
  else if (a == "Gelu") *act = Activation::Gelu;
  else return Status::error(opLabel(ctx) + ": activation '" + a + "' is not a cuBLASLt epilogue (Relu, Gelu)");
  return Status::ok();
}

Status createGemm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& as = ctx.inputTypes[0].shape;
  const Shape& bs = ctx.inputTypes[1].shape;
  if (as.size() != 2 || bs.size() != 2)
    return Status::error(opLabel(ctx) + ": A and B must be matrices, got " + shapeToString(as) + " and " + shapeToString(bs));
  bool tA = ctx.attrs->getInt("transA", 0) != 0, tB = ctx.attrs->getInt("transB", 0) != 0;
  int64_t M = tA ? as[1] : as[0], K = tA ? as[0] : as[1];
  int64_t Kb = tB ? bs[1] : bs[0], N = tB ? bs[0] : bs[1];
  if (K != Kb) return Status::error(opLabel(ctx) + ": inner dimensions differ (" + std::to_string(K) + " vs " + std::to_string(Kb) + ")");
  if (M == 0 || N == 0 || K == 0)
    return Status::error(opLabel(ctx) + ": empty matrices are not supported by the CUDA kernel");
  if (ctx.outputTypes[0].shape != Shape{M, N})
    return Status::error(opLabel(ctx) + ": output " + shapeToString(ctx.outputTypes[0].shape) + " is not [" +
                         std::to_string(M) + "," + std::to_string(N) + "]");
  float alpha = ctx.attrs->getFloat("alpha", 1.f), beta = ctx.attrs->getFloat("beta", 1.f);
  bool hasC = ctx.inputTypes.size() > 2 && ctx.inputTypes[2].present() && beta != 0.f;
  Shape cs = hasC ? ctx.inputTypes[2].shape : Shape{};
  bool biasVector = hasC && beta == 1.f && numElements(cs) == N && (cs == Shape{N} || cs == Shape{1, N});
  Activation act;
  TANDEM_RETURN_IF_ERROR(activationOf(ctx, &act));
  if (hasC && !biasVector && act != Activation::None)
    return Status::error(opLabel(ctx) + ": an activation epilogue with a C that is not a [N] bias row (beta 1) is not supported on CUDA");
  auto k = std::make_unique<LtMatmulKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init(ctx, M, N, K, tA, tB, 1, 0, 0, alpha, beta, biasVector, act));
  if (biasVector) k->biasIn = 2;
  if (hasC && !biasVector) {
    if (!ref::broadcastsTo(cs, {M, N}))
      return Status::error(opLabel(ctx) + ": C " + shapeToString(cs) + " does not broadcast to [" +
                           std::to_string(M) + "," + std::to_string(N) + "]");
    k->expandC = true;
    TANDEM_RETURN_IF_ERROR(k->useCopy(DType::F32));
    TANDEM_RETURN_IF_ERROR(makeGeo(ctx, {M, N}, {ref::broadcastStrides(cs, {M, N})}, &k->cGeo));
  }
  *out = std::move(k);
  return Status::ok();
}

// MatMul (numpy semantics): 1-D operands are promoted and the promoted dim dropped; batch dims
// broadcast.
Status createMatMul(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  Shape as = ctx.inputTypes[0].shape, bs = ctx.inputTypes[1].shape;
  if (as.empty() || bs.empty()) return Status::error(opLabel(ctx) + ": MatMul operands must have rank >= 1");
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), Kb = bs[bs.size() - 2], N = bs.back();
  if (K != Kb) return Status::error(opLabel(ctx) + ": inner dimensions differ (" + std::to_string(K) + " vs " + std::to_string(Kb) + ")");
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2), batch;
  size_t r = std::max(ab.size(), bb.size());
  while (ab.size() < r) ab.insert(ab.begin(), 1);
  while (bb.size() < r) bb.insert(bb.begin(), 1);
  for (size_t d = 0; d < r; ++d) {
    if (ab[d] != bb[d] && ab[d] != 1 && bb[d] != 1)
      return Status::error(opLabel(ctx) + ": batch dims " + shapeToString(ab) + " and " + shapeToString(bb) + " do not broadcast");
    batch.push_back(std::max(ab[d], bb[d]));
  }
  int64_t nb = numElements(batch), na = numElements(ab), nbb = numElements(bb);
  if (numElements(ctx.outputTypes[0].shape) != nb * M * N)
    return Status::error(opLabel(ctx) + ": output " + shapeToString(ctx.outputTypes[0].shape) + " does not hold " +
                         std::to_string(nb) + " products of " + std::to_string(M) + "x" + std::to_string(N));
  if (M == 0 || N == 0 || K == 0)
    return Status::error(opLabel(ctx) + ": empty matrices are not supported by the CUDA kernel");
  // A third input is the gemm-epilogue's bias row ([N], every other dim 1): one vector for the
  // whole product, so only where B is one matrix and the batch folds into rows.
  bool bias = ctx.inputTypes.size() > 2 && ctx.inputTypes[2].present();
  if (bias) {
    const Shape& bsh = ctx.inputTypes[2].shape;
    if (bsh.empty() || bsh.back() != N || numElements(bsh) != N)
      return Status::error(opLabel(ctx) + ": the bias epilogue needs " + std::to_string(N) + " values along the last dim, got " + shapeToString(bsh));
    if (nbb != 1) return Status::error(opLabel(ctx) + ": the bias epilogue needs B to be one matrix, got " + shapeToString(ctx.inputTypes[1].shape));
  }
  Activation act;
  TANDEM_RETURN_IF_ERROR(activationOf(ctx, &act));
  auto k = std::make_unique<LtMatmulKernel>(ctx.cuda);
  if (bias) k->biasIn = 2;
  if (nbb == 1) {
    // B is one matrix: A's batch (whole, or one matrix) folds into its rows, one GEMM.
    if (na != 1 && ab != batch) return Status::error(opLabel(ctx) + ": internal: batch of A is not the output batch");
    TANDEM_RETURN_IF_ERROR(k->init(ctx, M * na, N, K, false, false, 1, 0, 0, 1.f, 0.f, bias, act));
  } else if (ab == batch && bb == batch) {
    TANDEM_RETURN_IF_ERROR(k->init(ctx, M, N, K, false, false, nb, M * K, K * N, 1.f, 0.f, false, act));
  } else if (na == 1 && bb == batch) {
    // One A against B's whole batch: a strided batch whose A stride is 0 (shared), not one call
    // per matrix through pointers that may be only element-aligned.
    TANDEM_RETURN_IF_ERROR(k->init(ctx, M, N, K, false, false, nb, 0, K * N, 1.f, 0.f, false, act));
  } else {
    TANDEM_RETURN_IF_ERROR(k->init(ctx, M, N, K, false, false, 1, 0, 0, 1.f, 0.f, false, act));
    k->calls.clear();
    std::vector<int64_t> sa = ref::broadcastStrides(ab, batch), sb = ref::broadcastStrides(bb, batch);
    ref::forEachIndex(batch, [&](int64_t linear, const int64_t* idx) {
      LtCall c;
      for (size_t d = 0; d < r; ++d) {
        c.aOffset += idx[d] * sa[d] * M * K;
        c.bOffset += idx[d] * sb[d] * K * N;
      }
      c.dOffset = linear * M * N;
      k->calls.push_back(c);
    });
  }
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

void registerMathKernels(KernelRegistry& r) {
  addCuda(r, "Gemm", "cublasLt", createGemm);
  addCuda(r, "MatMul", "cublasLt", createMatMul);
}

}  // namespace cuda
}  // namespace tandem

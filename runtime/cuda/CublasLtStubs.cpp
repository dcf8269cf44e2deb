// cuBLASLt entry points Tandem calls, resolved from libcublasLt at first call (LazyLibraries.h).
// Add a function here when code starts calling it: the link fails until then.
#include <cublasLt.h>

#include "runtime/cuda/LazyLibraries.h"

#define LT_STUB(NAME, PARAMS, ARGS) \
  TANDEM_CUDA_STUB(CublasLt, CUBLAS_STATUS_NOT_INITIALIZED, cublasStatus_t, NAME, PARAMS, ARGS)

LT_STUB(cublasLtCreate, (cublasLtHandle_t* lightHandle), (lightHandle))
LT_STUB(cublasLtDestroy, (cublasLtHandle_t lightHandle), (lightHandle))

LT_STUB(cublasLtMatmulDescCreate,
        (cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType, cudaDataType_t scaleType),
        (matmulDesc, computeType, scaleType))
LT_STUB(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t matmulDesc), (matmulDesc))
LT_STUB(cublasLtMatmulDescSetAttribute,
        (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, const void* buf,
         size_t sizeInBytes),
        (matmulDesc, attr, buf, sizeInBytes))

LT_STUB(cublasLtMatrixLayoutCreate,
        (cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
        (matLayout, type, rows, cols, ld))
LT_STUB(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t matLayout), (matLayout))
LT_STUB(cublasLtMatrixLayoutSetAttribute,
        (cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr, const void* buf,
         size_t sizeInBytes),
        (matLayout, attr, buf, sizeInBytes))

LT_STUB(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t* pref), (pref))
LT_STUB(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
LT_STUB(cublasLtMatmulPreferenceSetAttribute,
        (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
         size_t sizeInBytes),
        (pref, attr, buf, sizeInBytes))

LT_STUB(cublasLtMatmulAlgoGetHeuristic,
        (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
         cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
         cublasLtMatmulPreference_t preference, int requestedAlgoCount,
         cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount),
        (lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
         heuristicResultsArray, returnAlgoCount))
LT_STUB(cublasLtMatmul,
        (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha, const void* A,
         cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
         const void* C, cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
         const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
         cudaStream_t stream),
        (lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
         workspaceSizeInBytes, stream))

// Queries that return no status: what they answer when cuBLASLt is missing.
TANDEM_CUDA_STUB(CublasLt, (size_t)0, size_t, cublasLtGetVersion, (void), ())
TANDEM_CUDA_STUB(CublasLt, "cuBLASLt not loaded", const char*, cublasLtGetStatusName,
                 (cublasStatus_t status), (status))
TANDEM_CUDA_STUB(CublasLt, "cuBLASLt could not be loaded (see the CUDA backend's error)", const char*,
                 cublasLtGetStatusString, (cublasStatus_t status), (status))

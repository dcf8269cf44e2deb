// cuDNN entry points Tandem calls, resolved from libcudnn at first call (LazyLibraries.h).
// libcudnn.so.9 is itself a small shim that opens its engine libraries on demand.
// Add a function here when code starts calling it: the link fails until then.
#include <cudnn.h>

#include "runtime/cuda/LazyLibraries.h"

#define DNN_STUB(NAME, PARAMS, ARGS) \
  TANDEM_CUDA_STUB(Cudnn, CUDNN_STATUS_NOT_INITIALIZED, cudnnStatus_t, NAME, PARAMS, ARGS)

// Handle and queries.
DNN_STUB(cudnnCreate, (cudnnHandle_t* handle), (handle))
DNN_STUB(cudnnDestroy, (cudnnHandle_t handle), (handle))
DNN_STUB(cudnnSetStream, (cudnnHandle_t handle, cudaStream_t streamId), (handle, streamId))
TANDEM_CUDA_STUB(Cudnn, (size_t)0, size_t, cudnnGetVersion, (void), ())
TANDEM_CUDA_STUB(Cudnn, "cuDNN could not be loaded (see the CUDA backend's error)", const char*,
                 cudnnGetErrorString, (cudnnStatus_t status), (status))

// Tensor and filter descriptors.
DNN_STUB(cudnnCreateTensorDescriptor, (cudnnTensorDescriptor_t* tensorDesc), (tensorDesc))
DNN_STUB(cudnnDestroyTensorDescriptor, (cudnnTensorDescriptor_t tensorDesc), (tensorDesc))
DNN_STUB(cudnnSetTensor4dDescriptor,
         (cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format, cudnnDataType_t dataType, int n,
          int c, int h, int w),
         (tensorDesc, format, dataType, n, c, h, w))
DNN_STUB(cudnnSetTensorNdDescriptor,
         (cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t dataType, int nbDims, const int dimA[],
          const int strideA[]),
         (tensorDesc, dataType, nbDims, dimA, strideA))
DNN_STUB(cudnnCreateFilterDescriptor, (cudnnFilterDescriptor_t* filterDesc), (filterDesc))
DNN_STUB(cudnnDestroyFilterDescriptor, (cudnnFilterDescriptor_t filterDesc), (filterDesc))
DNN_STUB(cudnnSetFilterNdDescriptor,
         (cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType, cudnnTensorFormat_t format,
          int nbDims, const int filterDimA[]),
         (filterDesc, dataType, format, nbDims, filterDimA))
DNN_STUB(cudnnAddTensor,
         (cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t aDesc, const void* A,
          const void* beta, const cudnnTensorDescriptor_t cDesc, void* C),
         (handle, alpha, aDesc, A, beta, cDesc, C))

// Convolution.
DNN_STUB(cudnnCreateConvolutionDescriptor, (cudnnConvolutionDescriptor_t* convDesc), (convDesc))
DNN_STUB(cudnnDestroyConvolutionDescriptor, (cudnnConvolutionDescriptor_t convDesc), (convDesc))
DNN_STUB(cudnnSetConvolutionNdDescriptor,
         (cudnnConvolutionDescriptor_t convDesc, int arrayLength, const int padA[], const int filterStrideA[],
          const int dilationA[], cudnnConvolutionMode_t mode, cudnnDataType_t computeType),
         (convDesc, arrayLength, padA, filterStrideA, dilationA, mode, computeType))
DNN_STUB(cudnnSetConvolutionGroupCount, (cudnnConvolutionDescriptor_t convDesc, int groupCount),
         (convDesc, groupCount))
DNN_STUB(cudnnSetConvolutionMathType, (cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType),
         (convDesc, mathType))
DNN_STUB(cudnnGetConvolutionNdForwardOutputDim,
         (const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t inputTensorDesc,
          const cudnnFilterDescriptor_t filterDesc, int nbDims, int tensorOuputDimA[]),
         (convDesc, inputTensorDesc, filterDesc, nbDims, tensorOuputDimA))
DNN_STUB(cudnnGetConvolutionForwardAlgorithm_v7,
         (cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc, const cudnnFilterDescriptor_t filterDesc,
          const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t destDesc,
          const int requestedAlgoCount, int* returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t* perfResults),
         (handle, srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount, returnedAlgoCount, perfResults))
DNN_STUB(cudnnGetConvolutionForwardWorkspaceSize,
         (cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
          const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
          cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes),
         (handle, xDesc, wDesc, convDesc, yDesc, algo, sizeInBytes))
DNN_STUB(cudnnConvolutionForward,
         (cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
          const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t convDesc,
          cudnnConvolutionFwdAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
          const cudnnTensorDescriptor_t yDesc, void* y),
         (handle, alpha, xDesc, x, wDesc, w, convDesc, algo, workSpace, workSpaceSizeInBytes, beta, yDesc, y))
DNN_STUB(cudnnGetConvolutionBackwardDataAlgorithm_v7,
         (cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc, const cudnnTensorDescriptor_t diffDesc,
          const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t gradDesc,
          const int requestedAlgoCount, int* returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t* perfResults),
         (handle, filterDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount, returnedAlgoCount, perfResults))
DNN_STUB(cudnnGetConvolutionBackwardDataWorkspaceSize,
         (cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
          const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
          cudnnConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes),
         (handle, wDesc, dyDesc, convDesc, dxDesc, algo, sizeInBytes))
DNN_STUB(cudnnConvolutionBackwardData,
         (cudnnHandle_t handle, const void* alpha, const cudnnFilterDescriptor_t wDesc, const void* w,
          const cudnnTensorDescriptor_t dyDesc, const void* dy, const cudnnConvolutionDescriptor_t convDesc,
          cudnnConvolutionBwdDataAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
          const cudnnTensorDescriptor_t dxDesc, void* dx),
         (handle, alpha, wDesc, w, dyDesc, dy, convDesc, algo, workSpace, workSpaceSizeInBytes, beta, dxDesc, dx))
DNN_STUB(cudnnGetConvolutionBackwardFilterAlgorithm_v7,
         (cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc, const cudnnTensorDescriptor_t diffDesc,
          const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
          const int requestedAlgoCount, int* returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t* perfResults),
         (handle, srcDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount, returnedAlgoCount, perfResults))
DNN_STUB(cudnnGetConvolutionBackwardFilterWorkspaceSize,
         (cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
          const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
          cudnnConvolutionBwdFilterAlgo_t algo, size_t* sizeInBytes),
         (handle, xDesc, dyDesc, convDesc, gradDesc, algo, sizeInBytes))
DNN_STUB(cudnnConvolutionBackwardFilter,
         (cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
          const cudnnTensorDescriptor_t dyDesc, const void* dy, const cudnnConvolutionDescriptor_t convDesc,
          cudnnConvolutionBwdFilterAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
          const cudnnFilterDescriptor_t dwDesc, void* dw),
         (handle, alpha, xDesc, x, dyDesc, dy, convDesc, algo, workSpace, workSpaceSizeInBytes, beta, dwDesc, dw))

// Pooling.
DNN_STUB(cudnnCreatePoolingDescriptor, (cudnnPoolingDescriptor_t* poolingDesc), (poolingDesc))
DNN_STUB(cudnnDestroyPoolingDescriptor, (cudnnPoolingDescriptor_t poolingDesc), (poolingDesc))
DNN_STUB(cudnnSetPoolingNdDescriptor,
         (cudnnPoolingDescriptor_t poolingDesc, const cudnnPoolingMode_t mode,
          const cudnnNanPropagation_t maxpoolingNanOpt, int nbDims, const int windowDimA[], const int paddingA[],
          const int strideA[]),
         (poolingDesc, mode, maxpoolingNanOpt, nbDims, windowDimA, paddingA, strideA))
DNN_STUB(cudnnGetPoolingNdForwardOutputDim,
         (const cudnnPoolingDescriptor_t poolingDesc, const cudnnTensorDescriptor_t inputTensorDesc, int nbDims,
          int outputTensorDimA[]),
         (poolingDesc, inputTensorDesc, nbDims, outputTensorDimA))
DNN_STUB(cudnnPoolingForward,
         (cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc, const void* alpha,
          const cudnnTensorDescriptor_t xDesc, const void* x, const void* beta,
          const cudnnTensorDescriptor_t yDesc, void* y),
         (handle, poolingDesc, alpha, xDesc, x, beta, yDesc, y))

// Batch normalization (inference).
DNN_STUB(cudnnDeriveBNTensorDescriptor,
         (cudnnTensorDescriptor_t derivedBnDesc, const cudnnTensorDescriptor_t xDesc, cudnnBatchNormMode_t mode),
         (derivedBnDesc, xDesc, mode))
DNN_STUB(cudnnBatchNormalizationForwardInference,
         (cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void* alpha, const void* beta,
          const cudnnTensorDescriptor_t xDesc, const void* x, const cudnnTensorDescriptor_t yDesc, void* y,
          const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void* bnScale, const void* bnBias,
          const void* estimatedMean, const void* estimatedVariance, double epsilon),
         (handle, mode, alpha, beta, xDesc, x, yDesc, y, bnScaleBiasMeanVarDesc, bnScale, bnBias, estimatedMean,
          estimatedVariance, epsilon))

// Dropout (a zero-dropout descriptor for the RNN descriptor: no states are allocated).
DNN_STUB(cudnnCreateDropoutDescriptor, (cudnnDropoutDescriptor_t* dropoutDesc), (dropoutDesc))
DNN_STUB(cudnnDestroyDropoutDescriptor, (cudnnDropoutDescriptor_t dropoutDesc), (dropoutDesc))
DNN_STUB(cudnnSetDropoutDescriptor,
         (cudnnDropoutDescriptor_t dropoutDesc, cudnnHandle_t handle, float dropout, void* states,
          size_t stateSizeInBytes, unsigned long long seed),
         (dropoutDesc, handle, dropout, states, stateSizeInBytes, seed))

// Recurrent networks (cuDNN 9's v8 RNN API: RNN, GRU, LSTM inference).
DNN_STUB(cudnnCreateRNNDescriptor, (cudnnRNNDescriptor_t* rnnDesc), (rnnDesc))
DNN_STUB(cudnnDestroyRNNDescriptor, (cudnnRNNDescriptor_t rnnDesc), (rnnDesc))
DNN_STUB(cudnnSetRNNDescriptor_v8,
         (cudnnRNNDescriptor_t rnnDesc, cudnnRNNAlgo_t algo, cudnnRNNMode_t cellMode, cudnnRNNBiasMode_t biasMode,
          cudnnDirectionMode_t dirMode, cudnnRNNInputMode_t inputMode, cudnnDataType_t dataType,
          cudnnDataType_t mathPrec, cudnnMathType_t mathType, int32_t inputSize, int32_t hiddenSize,
          int32_t projSize, int32_t numLayers, cudnnDropoutDescriptor_t dropoutDesc, uint32_t auxFlags),
         (rnnDesc, algo, cellMode, biasMode, dirMode, inputMode, dataType, mathPrec, mathType, inputSize, hiddenSize,
          projSize, numLayers, dropoutDesc, auxFlags))
DNN_STUB(cudnnCreateRNNDataDescriptor, (cudnnRNNDataDescriptor_t* rnnDataDesc), (rnnDataDesc))
DNN_STUB(cudnnDestroyRNNDataDescriptor, (cudnnRNNDataDescriptor_t rnnDataDesc), (rnnDataDesc))
DNN_STUB(cudnnSetRNNDataDescriptor,
         (cudnnRNNDataDescriptor_t rnnDataDesc, cudnnDataType_t dataType, cudnnRNNDataLayout_t layout,
          int maxSeqLength, int batchSize, int vectorSize, const int seqLengthArray[], void* paddingFill),
         (rnnDataDesc, dataType, layout, maxSeqLength, batchSize, vectorSize, seqLengthArray, paddingFill))
DNN_STUB(cudnnGetRNNWeightSpaceSize, (cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc, size_t* weightSpaceSize),
         (handle, rnnDesc, weightSpaceSize))
DNN_STUB(cudnnGetRNNWeightParams,
         (cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc, int32_t pseudoLayer, size_t weightSpaceSize,
          const void* weightSpace, int32_t linLayerID, cudnnTensorDescriptor_t mDesc, void** mAddr,
          cudnnTensorDescriptor_t bDesc, void** bAddr),
         (handle, rnnDesc, pseudoLayer, weightSpaceSize, weightSpace, linLayerID, mDesc, mAddr, bDesc, bAddr))
DNN_STUB(cudnnGetRNNTempSpaceSizes,
         (cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc, cudnnForwardMode_t fwdMode,
          cudnnRNNDataDescriptor_t xDesc, size_t* workSpaceSize, size_t* reserveSpaceSize),
         (handle, rnnDesc, fwdMode, xDesc, workSpaceSize, reserveSpaceSize))
DNN_STUB(cudnnRNNForward,
         (cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc, cudnnForwardMode_t fwdMode, const int32_t devSeqLengths[],
          cudnnRNNDataDescriptor_t xDesc, const void* x, cudnnRNNDataDescriptor_t yDesc, void* y,
          cudnnTensorDescriptor_t hDesc, const void* hx, void* hy, cudnnTensorDescriptor_t cDesc, const void* cx,
          void* cy, size_t weightSpaceSize, const void* weightSpace, size_t workSpaceSize, void* workSpace,
          size_t reserveSpaceSize, void* reserveSpace),
         (handle, rnnDesc, fwdMode, devSeqLengths, xDesc, x, yDesc, y, hDesc, hx, hy, cDesc, cx, cy, weightSpaceSize,
          weightSpace, workSpaceSize, workSpace, reserveSpaceSize, reserveSpace))

// The host-side halves of CUDA kernels, as pure functions without CUDA headers so that they are
// unit-tested without a GPU (tests/unit/runtime/cuda_host_passes_test.cpp): the walk of
// NonMaxSuppression over the device's suppression mask, and the repacking of ONNX recurrent
// weights into cuDNN's weight space (runtime/cuda/Recurrent.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/Status.h"

namespace tandem {
namespace cuda {

// ---- NonMaxSuppression -----------------------------------------------------------------------

/// 64-bit words of one suppression-mask row over n boxes: ceil(n / 64).
inline int64_t nmsMaskWords(int64_t n) { return (n + 63) / 64; }

/// NonMaxSuppression-11's selection (runtime/DataDependent.h: same triples, same order) from
/// `mask`, u64 [batches, n, nmsMaskWords(n)]: bit j of row r of batch b is set when box j, as a
/// candidate, has IoU > iou_threshold with box r already kept (the reference's arithmetic; the
/// NVRTC kernel td_nms_mask computes it; bit r of row r is clear). `scores` f32
/// [batches, classes, n]. Per batch and class: boxes whose score passes the threshold (when
/// given), by descending score (ties: lower index first), each kept unless a kept row's bit
/// suppresses it, at most maxPerClass (<= 0 keeps none). torchvision's nms walk, per class.
void nmsSelect(const float* scores, const uint64_t* mask, int64_t batches, int64_t classes, int64_t n,
               int64_t maxPerClass, bool hasScoreThreshold, float scoreThreshold, std::vector<int64_t>* selected);

// ---- cuDNN recurrent weights -----------------------------------------------------------------

enum class RecurrentCell { Rnn, Gru, Lstm };

/// Gates per cell: RNN 1, GRU 3, LSTM 4.
int recurrentGates(RecurrentCell c);

/// The ONNX gate block (W, R and B hold gates in the order LSTM i,o,f,c; GRU z,r,h) that cuDNN's
/// linear layer `linLayerId` multiplies. cuDNN numbers a cell's input matrices 0..G-1 and its
/// recurrent ones G..2G-1 in the order LSTM i,f,c(g),o and GRU r,z,h (cuDNN's cudnnRNNMode_t
/// docs); the same id selects the bias (CUDNN_RNN_DOUBLE_BIAS: input biases then recurrent).
/// So LSTM id k % 4 -> {0, 2, 3, 1}[k % 4], GRU k % 3 -> {1, 0, 2}[k % 3]. -1 for an id out of
/// range.
int onnxGateOfCudnnLayer(RecurrentCell c, int linLayerId);

/// Where cuDNN keeps linear layer `linLayerId` of one pseudo-layer (a direction) in its weight
/// space: element offsets (f32) of the row-major [H, I] (input) or [H, H] (recurrent) matrix and
/// of the [H] bias, as cudnnGetRNNWeightParams gives them.
struct CudnnRnnSlot {
  int64_t matrix = 0, bias = 0;
};

/// Fills `space` (f32, cuDNN's weight-space size in elements, resized by the caller) from ONNX's
/// W [dirs, G*H, I], R [dirs, G*H, H] and B [dirs, 2*G*H] (null: zero biases).
/// slots[d * 2G + k] is direction d's linear layer k. Error when a slot does not fit the space.
Status packCudnnRnnWeights(RecurrentCell cell, int64_t dirs, int64_t H, int64_t I, const float* W, const float* R,
                           const float* B, const std::vector<CudnnRnnSlot>& slots, std::vector<float>* space);

}  // namespace cuda
}  // namespace tandem

// The recurrent ops RNN-14, GRU-14 and LSTM-14 through cuDNN 9's cudnnRNNForward (inference), one
// layer, forward, reverse or bidirectional, mirroring runtime/cpu/ref/Recurrent.cpp for what
// cuDNN's cells compute (cudaKernelRejects refuses the rest with the reason: layout 1, clip,
// peepholes, sequence_lens, other activations, GRU linear_before_reset=0, non-constant weights).
// W, R and B are repacked into cuDNN's weight space once at load (cuda::packCudnnRnnWeights:
// gate orders differ). cuDNN's y is [seq, batch, dirs * H]; ONNX's Y [seq, dirs, batch, H], so a
// bidirectional Y goes through the workspace and a strided copy. cuDNN has no reverse-only
// direction: X is reversed in time into the workspace, run forward, and Y reversed back (Y_h
// and Y_c are the state after the last step taken, as ONNX defines them).
#include <cctype>

#include "runtime/cuda/Generated.h"
#include "runtime/cuda/HostPasses.h"

namespace tandem {
namespace cuda {

namespace {

size_t alignUp(size_t b) { return (b + 255) / 256 * 256; }

class RecurrentKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  ~RecurrentKernel() override {
    if (rnn_) cudnnDestroyRNNDescriptor(rnn_);
    if (drop_) cudnnDestroyDropoutDescriptor(drop_);
    if (xDesc_) cudnnDestroyRNNDataDescriptor(xDesc_);
    if (yDesc_) cudnnDestroyRNNDataDescriptor(yDesc_);
    if (hDesc_) cudnnDestroyTensorDescriptor(hDesc_);
  }
  std::string implName() const override { return "cudnn"; }

  Status init(const KernelContext& ctx) {
    const Shape& xs = ctx.inputTypes[0].shape;
    const Shape& rs = ctx.inputTypes[2].shape;
    cell_ = ctx.opType == "LSTM" ? RecurrentCell::Lstm : ctx.opType == "GRU" ? RecurrentCell::Gru : RecurrentCell::Rnn;
    const int64_t G = recurrentGates(cell_);
    const std::string dir = ctx.attrs->getString("direction", "forward");
    if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
      return Status::error(opLabel(ctx) + ": direction '" + dir + "' is not forward, reverse or bidirectional");
    dirs_ = dir == "bidirectional" ? 2 : 1;
    reverse_ = dir == "reverse";
    if (xs.size() != 3 || rs.size() != 3) return Status::error(opLabel(ctx) + ": X and R must be 3-D");
    seq_ = xs[0], batch_ = xs[1], I_ = xs[2], H_ = rs[2];
    if (ctx.inputTypes[1].shape != Shape{dirs_, G * H_, I_} || rs != Shape{dirs_, G * H_, H_})
      return Status::error(opLabel(ctx) + ": W " + shapeToString(ctx.inputTypes[1].shape) + " and R " +
                           shapeToString(rs) + " do not fit X " + shapeToString(xs) + " with " +
                           std::to_string(dirs_) + " direction(s)");
    const Shape state{dirs_, batch_, H_};
    for (size_t i : {5, 6})
      if (i < ctx.inputTypes.size() && ctx.inputTypes[i].present() && ctx.inputTypes[i].shape != state)
        return Status::error(opLabel(ctx) + ": input " + std::to_string(i) + " must have shape " + shapeToString(state));
    const Shape yShape{seq_, dirs_, batch_, H_};
    for (size_t i = 0; i < ctx.outputTypes.size(); ++i)
      if (ctx.outputTypes[i].present() && ctx.outputTypes[i].shape != (i == 0 ? yShape : state))
        return Status::error(opLabel(ctx) + ": output " + std::to_string(i) + " must have shape " +
                             shapeToString(i == 0 ? yShape : state));
    if (seq_ == 0 || batch_ == 0 || H_ == 0 || I_ == 0 || seq_ > INT32_MAX || batch_ > INT32_MAX || H_ > INT32_MAX ||
        I_ > INT32_MAX)
      return Status::error(opLabel(ctx) + ": cuDNN needs non-empty X, W, R with extents below 2^31, got X " +
                           shapeToString(xs) + " and hidden_size " + std::to_string(H_));
    const Tensor* W = ctx.constInputs.size() > 1 ? ctx.constInputs[1] : nullptr;
    const Tensor* R = ctx.constInputs.size() > 2 ? ctx.constInputs[2] : nullptr;
    const bool hasB = ctx.inputTypes.size() > 3 && ctx.inputTypes[3].present();
    const Tensor* B = hasB ? ctx.constInputs[3] : nullptr;
    if (!W || !R || (hasB && !B)) return Status::error(opLabel(ctx) + ": W, R and B must be constants");
    if (hasB && B->shape() != Shape{dirs_, 2 * G * H_})
      return Status::error(opLabel(ctx) + ": B must have shape " + shapeToString({dirs_, 2 * G * H_}));

    cudnnRNNMode_t mode = CUDNN_LSTM;
    if (cell_ == RecurrentCell::Gru) mode = CUDNN_GRU;
    if (cell_ == RecurrentCell::Rnn) {
      mode = CUDNN_RNN_TANH;
      if (const Attr* a = ctx.attrs->find("activations"); a && a->kind == Attr::Kind::Strings && !a->strings.empty()) {
        std::string n = a->strings[0];
        for (char& ch : n) ch = char(std::tolower((unsigned char)ch));
        if (n == "relu") mode = CUDNN_RNN_RELU;
      }
    }
    DeviceContext& dc = *dc_;
    if (!dc.dnn) return Status::error(opLabel(ctx) + ": no cuDNN handle (the context was created without a device)");
    TANDEM_CUDA_RETURN(cudnnCreateDropoutDescriptor(&drop_));
    // Zero dropout needs no RNG states (PyTorch's set_no_dropout); one layer applies none anyway.
    TANDEM_CUDA_RETURN(cudnnSetDropoutDescriptor(drop_, dc.dnn, 0.f, nullptr, 0, 0));
    TANDEM_CUDA_RETURN(cudnnCreateRNNDescriptor(&rnn_));
    // CUDNN_FMA_MATH: f32 products without TF32 tensor cores, so results stay within f32
    // rounding of the reference's (as Conv.cpp).
    TANDEM_CUDA_RETURN(cudnnSetRNNDescriptor_v8(rnn_, CUDNN_RNN_ALGO_STANDARD, mode, CUDNN_RNN_DOUBLE_BIAS,
                                                dirs_ == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
                                                CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH,
                                                (int32_t)I_, (int32_t)H_, (int32_t)H_, 1, drop_,
                                                CUDNN_RNN_PADDED_IO_ENABLED));
    std::vector<int> lens(batch_, (int)seq_);
    float fill = 0.f;
    TANDEM_CUDA_RETURN(cudnnCreateRNNDataDescriptor(&xDesc_));
    TANDEM_CUDA_RETURN(cudnnSetRNNDataDescriptor(xDesc_, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                                 (int)seq_, (int)batch_, (int)I_, lens.data(), &fill));
    TANDEM_CUDA_RETURN(cudnnCreateRNNDataDescriptor(&yDesc_));
    TANDEM_CUDA_RETURN(cudnnSetRNNDataDescriptor(yDesc_, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                                 (int)seq_, (int)batch_, (int)(dirs_ * H_), lens.data(), &fill));
    TANDEM_CUDA_RETURN(cudnnCreateTensorDescriptor(&hDesc_));
    const int hDims[3] = {(int)dirs_, (int)batch_, (int)H_}, hStrides[3] = {(int)(batch_ * H_), (int)H_, 1};
    TANDEM_CUDA_RETURN(cudnnSetTensorNdDescriptor(hDesc_, CUDNN_DATA_FLOAT, 3, hDims, hStrides));

    // The weight space: allocated, its slots queried, filled on the host, uploaded once.
    TANDEM_CUDA_RETURN(cudnnGetRNNWeightSpaceSize(dc.dnn, rnn_, &weightBytes_));
    TANDEM_RETURN_IF_ERROR(dc.allocate(weightBytes_, opLabel(ctx) + " weights", &weights_));
    cudnnTensorDescriptor_t mDesc = nullptr, bDesc = nullptr;
    TANDEM_CUDA_RETURN(cudnnCreateTensorDescriptor(&mDesc));
    TANDEM_CUDA_RETURN(cudnnCreateTensorDescriptor(&bDesc));
    std::vector<CudnnRnnSlot> slots;
    Status st = Status::ok();
    for (int64_t d = 0; d < dirs_ && st.isOk(); ++d)
      for (int k = 0; k < 2 * G && st.isOk(); ++k) {
        void *m = nullptr, *b = nullptr;
        st = check(cudnnGetRNNWeightParams(dc.dnn, rnn_, (int32_t)d, weightBytes_, weights_, k, mDesc, &m, bDesc, &b),
                   "cudnnGetRNNWeightParams");
        slots.push_back({((char*)m - (char*)weights_) / 4, ((char*)b - (char*)weights_) / 4});
      }
    cudnnDestroyTensorDescriptor(mDesc);
    cudnnDestroyTensorDescriptor(bDesc);
    TANDEM_RETURN_IF_ERROR(st);
    std::vector<float> space(weightBytes_ / 4);
    st = packCudnnRnnWeights(cell_, dirs_, H_, I_, W->data<float>(), R->data<float>(), B ? B->data<float>() : nullptr,
                             slots, &space);
    if (!st.isOk()) return Status::error(opLabel(ctx) + ": " + st.message());
    TANDEM_CUDA_RETURN(cudaMemcpyAsync(weights_, space.data(), weightBytes_, cudaMemcpyHostToDevice, dc.compute));
    TANDEM_CUDA_RETURN(cudaStreamSynchronize(dc.compute));
    std::vector<int32_t> devLens(batch_, (int32_t)seq_);
    TANDEM_RETURN_IF_ERROR(dc.upload(devLens.data(), devLens.size() * 4, opLabel(ctx) + " sequence lengths",
                                     (void**)&devLens_));

    // Workspace: cuDNN's, then (reverse) X reversed, then (bidirectional or reverse, or no Y)
    // cuDNN's y.
    size_t reserve = 0;
    TANDEM_CUDA_RETURN(cudnnGetRNNTempSpaceSizes(dc.dnn, rnn_, CUDNN_FWD_MODE_INFERENCE, xDesc_, &cudnnBytes_, &reserve));
    xOff_ = alignUp(cudnnBytes_);
    yOff_ = xOff_ + (reverse_ ? alignUp(seq_ * batch_ * I_ * 4) : 0);
    yToWorkspace_ = dirs_ == 2 || reverse_ || !ctx.outputTypes[0].present();
    dc.reserveWorkspace(yOff_ + (yToWorkspace_ ? seq_ * batch_ * dirs_ * H_ * 4 : 0));
    TANDEM_RETURN_IF_ERROR(use(copyKernelName(DType::F32), copyKernelSource(DType::F32), &copyFn_));

    // Time reversal: element (t, rest) from (seq - 1 - t, rest); the bidirectional Y
    // [seq, 2, batch, H] from y [seq, batch, 2, H].
    TANDEM_RETURN_IF_ERROR(makeGeo(ctx, {seq_, batch_ * I_}, {{-batch_ * I_, 1}}, &xRev_));
    xRev_.ibase[0] = (seq_ - 1) * batch_ * I_;
    TANDEM_RETURN_IF_ERROR(makeGeo(ctx, {seq_, batch_ * H_}, {{-batch_ * H_, 1}}, &yRev_));
    yRev_.ibase[0] = (seq_ - 1) * batch_ * H_;
    TANDEM_RETURN_IF_ERROR(
        makeGeo(ctx, {seq_, dirs_, batch_, H_}, {{batch_ * dirs_ * H_, H_, dirs_ * H_, 1}}, &yBidir_));
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    DeviceContext& dc = *dc_;
    auto inAt = [&](size_t i) -> const void* { return i < ins.size() && ins[i] ? ins[i]->raw() : nullptr; };
    auto outAt = [&](size_t i) -> void* { return i < outs.size() && outs[i] ? outs[i]->raw() : nullptr; };
    char* ws = static_cast<char*>(dc.workspace);
    const void* x = ins[0]->raw();
    if (reverse_) {
      void* xr = ws + xOff_;
      void* args[] = {&xRev_, &xr, &x};
      TANDEM_RETURN_IF_ERROR(launchGridStride(dc, fn(copyFn_), xRev_.n, args));
      x = xr;
    }
    void* Y = outAt(0);
    void* y = yToWorkspace_ ? ws + yOff_ : Y;
    const bool lstm = cell_ == RecurrentCell::Lstm;
    TANDEM_CUDA_RETURN(cudnnRNNForward(dc.dnn, rnn_, CUDNN_FWD_MODE_INFERENCE, devLens_, xDesc_, x, yDesc_, y, hDesc_,
                                       inAt(5), outAt(1), hDesc_, lstm ? inAt(6) : nullptr, lstm ? outAt(2) : nullptr,
                                       weightBytes_, weights_, cudnnBytes_, cudnnBytes_ ? ws : nullptr, 0, nullptr));
    if (!Y || Y == y) return Status::ok();
    TdGeo* g = reverse_ ? &yRev_ : &yBidir_;
    const void* src = y;
    void* args[] = {g, &Y, &src};
    return launchGridStride(dc, fn(copyFn_), g->n, args);
  }

 private:
  RecurrentCell cell_ = RecurrentCell::Lstm;
  int64_t dirs_ = 1, seq_ = 0, batch_ = 0, I_ = 0, H_ = 0;
  bool reverse_ = false, yToWorkspace_ = false;
  cudnnRNNDescriptor_t rnn_ = nullptr;
  cudnnDropoutDescriptor_t drop_ = nullptr;
  cudnnRNNDataDescriptor_t xDesc_ = nullptr, yDesc_ = nullptr;
  cudnnTensorDescriptor_t hDesc_ = nullptr;
  size_t weightBytes_ = 0, cudnnBytes_ = 0, xOff_ = 0, yOff_ = 0;
  void* weights_ = nullptr;
  int32_t* devLens_ = nullptr;
  size_t copyFn_ = 0;
  TdGeo xRev_, yRev_, yBidir_;
};

// Inputs X [seq, batch, I], W, R, B (constants), sequence_lens (refused), initial_h
// [dirs, batch, H], LSTM initial_c, P (refused); outputs Y [seq, dirs, batch, H] (optional),
// Y_h, LSTM Y_c [dirs, batch, H]. f32. The registry has asked cudaKernelRejects already.
Status createRecurrent(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() < 3) return Status::error(opLabel(ctx) + ": expects inputs X, W, R");
  auto k = std::make_unique<RecurrentKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init(ctx));
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

void registerRecurrentKernels(KernelRegistry& r) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) addCuda(r, op, "cudnn", createRecurrent, /*output0Optional=*/true);
}

}  // namespace cuda
}  // namespace tandem

#!/usr/bin/python3
"""Writes torchvision model families that ../shared/zoo does not cover, in the ONNX backend-test
layout (OUT/NAME/model.onnx, OUT/NAME/test_data_set_0/{input,output}_K.pb, batch 1, PyTorch
eager fp32 reference, random weights, seed 0), to check correctness and speed on models nobody
tuned for. Random weights alone make activations vanish (EfficientNet's logits are ~1e-14), so
every BatchNorm's running statistics are first calibrated on the test input and one more random
sample (as if trained, so each normalises to unit scale); RetinaNet's classification prior
(bias -4.6, scores ~0.01, below its 0.05 threshold: no boxes) is zeroed, and the detectors'
classifier weights widened (std 0.3; FCOS: std 0.03 and a random prior, so no two classes
of one box tie), so outputs are O(1) and the detectors find boxes with distinct scores.
Mask and Keypoint R-CNN and FCOS see a picture with structure (scene(): rectangles on a
gradient), not noise, whose RoIs all look alike and tie; ViT's zero-initialised head is drawn.

  efficientnet_b0     SiLU (x * Sigmoid(x)), squeeze-excitation, depthwise 3x3 / 5x5
  mobilenet_v3_small  HardSwish / HardSigmoid, squeeze-excitation
  shufflenet_v2_x0_5  channel shuffle (Reshape / Transpose), Split
  squeezenet1_1       Concat of 1x1 / 3x3 branches
  lraspp              segmentation: MobileNetV3 + LR-ASPP head, bilinear Resize x8 (256x256)
  deeplabv3_mnv3      segmentation: MobileNetV3 + ASPP (dilated convolutions), bilinear Resize
  r3d_18              video: 3-D convolutions over [1, 3, 8, 112, 112]
  mc3_18, r2plus1d_18 video: mixed 3-D / 2-D convolutions, (2+1)-D factorised convolutions
  s3d                 video: separable 3-D Inception blocks over [1, 3, 16, 224, 224], 5-D
                      channel Concats and ceil_mode 3-D pools (opset 17)
  alexnet, vgg11_bn   plain stacks: large 11x11 / 3x3 convolutions, three big Gemms (opset 17)
  mobilenet_v2        inverted residuals, depthwise 3x3, Clip(0, 6) (opset 17)
  resnext50           grouped 3x3 convolutions (32 groups) in a ResNet-50 (opset 17)
  efficientnet_v2_s   fused-MBConv (full 3x3) then MBConv with squeeze-excitation (opset 17)
  inception_v3        299x299: 1x7 / 7x1 factorised convolutions, Pad + AveragePool branches
                      (avg_pool2d counting its padding), four-way Concats (opset 17); its
                      logits reach ~8 and PyTorch's own f32 output is 2e-4 from float64, Tandem's
                      3e-4 (any kernel order): compare with --atol 1e-3
  maxvit_t            multi-axis attention: MBConv, block and grid attention with relative
                      position bias, Einsum (opset 17)
  swin_t              shifted-window attention (opset 14): 5-D broadcast masks, Roll as Slices
  vit_s16             vision transformer (4 layers, width 384, 6 heads, opset 14): LayerNorm,
                      GELU (Erf), batched attention MatMuls
  text_encoder        text transformer (4 pre-norm layers, width 256): token ids and a padding
                      mask in (i64 and bool inputs, batch 2 x 64), masked attention
  raft_small          optical flow (opset 16): correlation volumes, GridSample, 4 GRU updates
  ssdlite, fasterrcnn, retinanet, fcos
                      detection (320x320): NonZero, TopK, NonMaxSuppression on values computed
                      from the image (data-dependent shapes: Tandem runs those ops and their
                      readers as a dynamic region)
  maskrcnn, keypointrcnn
                      instance segmentation / keypoints (MobileNetV3-FPN, 320x320): their
                      post-processing Loops (one iteration per detection, a result grown by
                      Concat each iteration) run as eager bodies in the dynamic region
  diffusion_unet      a diffusion denoiser at 32x32: Sin/Cos timestep embedding of a float input,
                      GroupNorm (InstanceNormalization + Reshape), SiLU, self-attention at 8x8,
                      nearest Resize, skip Concats
  seq2seq             encoder-decoder Transformer (opset 14): source and target ids of different
                      lengths, causal mask (Trilu), cross-attention
  speech_ctc          Conv1d front end, 2-layer bidirectional LSTM, CTC log-probabilities
  gru_lm              2-layer GRU language model (linear_before_reset) with its state in and out
  style_sr            style transfer (reflection Pad, InstanceNorm, nearest Resize) then ESPCN
                      super-resolution (Tanh, DepthToSpace)
  gpt_kv              one GPT decoding step with a KV cache whose length T is a dynamic dim
                      (opset 14; position from Shape of the cache)
  resnet18_fp16       ResNet-18 in float16 end to end (BatchNorm folded, then every float tensor
                      float16; the reference is fp32 on the rounded weights and input)
  qdq_resnet18        ResNet-18 quantized the QDQ way (QAT fake quantization exported as
                      QuantizeLinear/DequantizeLinear around float ops; per-channel int8 weights);
                      Tandem, like ONNX Runtime, is a quantization step or two from PyTorch on a
                      few hundred of the 1000 logits (float order decides near-ties; --atol 0.1)
  qdq_bert            a BERT-style encoder (4 layers, width 256, sequence 128) whose 25 Linear
                      layers are quantized the QDQ way: MatMul of transposed per-channel int8
                      weights, f32 bias Add, QuantizeLinear (the attention products stay float);
                      PyTorch's own fake-quantized reference moves by a quantization step with
                      its BLAS (OpenBLAS against netlib's: 0.041 apart on the [1, 2] logits,
                      AMD EPYC): compare with --atol 0.1
  dynq_bert           the same encoder in float, then quantized as ONNX Runtime's quantize_dynamic
                      writes it: DynamicQuantizeLinear -> MatMulInteger (per-tensor int8 weights)
                      -> Cast -> Mul by the scales, for every MatMul of a weight matrix; the
                      reference is the float model (--atol 0.1)

Usage (Debian's python3-torch, python3-torchvision, python3-onnx):
  /usr/bin/python3 scripts/more-families.py OUT [NAME ...]
then, e.g.:  tandem run OUT/NAME/model.onnx --inputs OUT/NAME/test_data_set_0 --expect OUT/NAME/test_data_set_0
             scripts/bench-vs-ort.sh OUT/NAME/ ...
"""
import os
import sys

import onnx
import torch
import torchvision
from onnx import numpy_helper

M = torchvision.models


def flatten(o, acc):
    if isinstance(o, dict):
        for v in o.values():
            flatten(v, acc)
    elif isinstance(o, (list, tuple)):
        for v in o:
            flatten(v, acc)
    else:
        acc.append(o)
    return acc


def save(out_dir, name, model, inputs, opset=13, export=None):
    """`export`: more torch.onnx.export arguments (input_names, dynamic_axes), "fp16" to write
    the model in float16 (float16_model) with the fp32 model's outputs on the rounded inputs, or
    "dynq" to quantize its MatMuls dynamically (dynamic_quantize; the reference stays fp32)."""
    d = os.path.join(out_dir, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    model.eval()
    fp16 = export == "fp16"
    if fp16:
        # The reference is the fp32 model whose weights and inputs are rounded to float16, so
        # the only difference left is where Tandem computes in float16. BatchNorms are folded
        # into their convolutions first, as the export would (after the rounding here, or the
        # exported weights would be rounded twice).
        fold_batchnorm(model)
        with torch.no_grad():
            for t in list(model.parameters()) + list(model.buffers()):
                if t.is_floating_point():
                    t.copy_(t.half().float())
        inputs = [x.half().float() for x in inputs]
    with torch.no_grad():
        outputs = flatten(model(*inputs), [])
    dynq = export == "dynq"
    torch.onnx.export(model, tuple(inputs), os.path.join(d, "model.onnx"), opset_version=opset,
                      do_constant_folding=True,
                      **({} if fp16 or dynq or export is None else export))
    if dynq:
        dynamic_quantize(os.path.join(d, "model.onnx"))
    if fp16:
        float16_model(os.path.join(d, "model.onnx"))
        inputs = [x.half() for x in inputs]
        outputs = [y.half() for y in outputs]
    graph = onnx.load(os.path.join(d, "model.onnx")).graph
    for k, x in enumerate(flatten(inputs, [])):
        with open(os.path.join(d, "test_data_set_0", "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(x.numpy(), graph.input[k].name).SerializeToString())
    for k, y in enumerate(outputs):
        with open(os.path.join(d, "test_data_set_0", "output_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(y.numpy(), graph.output[k].name).SerializeToString())
    print(name, [tuple(y.shape) for y in outputs])


def fold_batchnorm(model):
    """Folds each eval-mode BatchNorm2d that directly follows a Conv2d among its parent's
    children into that convolution (torch.nn.utils.fusion.fuse_conv_bn_eval)."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval
    for parent in model.modules():
        names = list(parent._modules)
        for a, b in zip(names, names[1:]):
            conv, bn = parent._modules[a], parent._modules[b]
            if isinstance(conv, torch.nn.Conv2d) and isinstance(bn, torch.nn.BatchNorm2d):
                parent._modules[a] = fuse_conv_bn_eval(conv.eval(), bn.eval())
                parent._modules[b] = torch.nn.Identity()


def float16_model(path):
    """Rewrites an fp32 ONNX model in place as float16 end to end (what onnxconverter-common's
    convert_float_to_float16 does, keep_io_types=False): float initializers, Constant values,
    graph inputs/outputs/value_info, and Cast-to-float become float16 (the e2e tests' to_f16)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                    "e2e", "models"))
    from make_models import to_f16
    onnx.save(to_f16(onnx.load(path)), path)


def calibrate_batchnorm(model, inputs):
    """Running mean/var of every BatchNorm from one forward pass over `inputs` and a second
    random sample like them (batch 2: a BatchNorm after global pooling needs two values per
    channel), the rest of the model in eval mode."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    model.eval()
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    with torch.no_grad():
        model(*[torch.cat([x, torch.rand_like(x) * x.std() + x.mean()]) if isinstance(x, torch.Tensor)
                else x + [torch.rand_like(t) for t in x] for x in inputs])
    for m in bns:
        m.eval()


def image(size=224):
    return torch.randn(1, 3, size, size)


def scene(size=320):
    """A [3, size, size] picture with structure: a smooth background and 12 random rectangles."""
    g = torch.Generator().manual_seed(1)
    y = torch.linspace(0, 1, size)
    img = torch.stack([y[:, None] * torch.ones(size), torch.ones(size, 1) * y, 0.5 * torch.ones(size, size)])
    for _ in range(12):
        x0, y0 = torch.randint(0, size - 40, (2,), generator=g).tolist()
        w, h = torch.randint(20, 120, (2,), generator=g).tolist()
        img[:, y0:y0 + h, x0:x0 + w] = torch.rand(3, 1, 1, generator=g)
    return (img + 0.05 * torch.rand(3, size, size, generator=g)).clamp(0, 1)


def mobilenet_fpn_detector(cls):
    """Mask or Keypoint R-CNN on fasterrcnn_mobilenet_v3_large_320_fpn's backbone and anchors
    (torchvision builds these two on ResNet-50 only), with BatchNorm (calibrated) for the
    backbone's frozen norms and 150 proposals."""
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.backbone_utils import mobilenet_backbone
    backbone = mobilenet_backbone(backbone_name="mobilenet_v3_large", weights=None, fpn=True,
                                  trainable_layers=6, norm_layer=torch.nn.BatchNorm2d)
    anchors = AnchorGenerator(((32, 64, 128, 256, 512),) * 3, ((0.5, 1.0, 2.0),) * 3)
    return cls(backbone, num_classes=2 if cls is M.detection.KeypointRCNN else 91, min_size=320,
               max_size=320, rpn_anchor_generator=anchors, rpn_pre_nms_top_n_test=150,
               rpn_post_nms_top_n_test=150)


class TextEncoder(torch.nn.Module):
    """Token embedding + learned positions, 4 pre-norm encoder layers (GELU), a 2-way head on
    the first token; the padding mask (True: padding) is an input."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(1000, 256)
        self.pos = torch.nn.Parameter(torch.randn(1, 128, 256) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.head = torch.nn.Linear(256, 2)

    def forward(self, ids, mask):
        x = self.emb(ids) + self.pos[:, : ids.shape[1]]
        return self.head(self.enc(x, src_key_padding_mask=mask)[:, 0])


def text():
    ids = torch.randint(0, 1000, (2, 64))
    mask = torch.zeros(2, 64, dtype=torch.bool)
    mask[1, 40:] = True
    return TextEncoder(), [ids, mask], 14


class RaftSmall(torch.nn.Module):
    """raft_small with 4 flow updates, returning the last flow field."""

    def __init__(self):
        super().__init__()
        self.m = M.optical_flow.raft_small(weights=None)

    def forward(self, a, b):
        return self.m(a, b, num_flow_updates=4)[-1]


class ResBlock(torch.nn.Module):
    def __init__(self, cin, cout, tdim):
        super().__init__()
        self.n1, self.c1 = torch.nn.GroupNorm(8, cin), torch.nn.Conv2d(cin, cout, 3, padding=1)
        self.t = torch.nn.Linear(tdim, cout)
        self.n2, self.c2 = torch.nn.GroupNorm(8, cout), torch.nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = torch.nn.Conv2d(cin, cout, 1) if cin != cout else torch.nn.Identity()

    def forward(self, x, temb):
        h = self.c1(torch.nn.functional.silu(self.n1(x)))
        h = h + self.t(torch.nn.functional.silu(temb))[:, :, None, None]
        return self.skip(x) + self.c2(torch.nn.functional.silu(self.n2(h)))


class Attention2d(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n, self.qkv, self.out = torch.nn.GroupNorm(8, c), torch.nn.Conv2d(c, 3 * c, 1), torch.nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.n(x)).reshape(b, 3, c, h * w).unbind(1)
        a = torch.softmax(q.transpose(1, 2) @ k / c ** 0.5, dim=-1)
        return x + self.out((v @ a.transpose(1, 2)).reshape(b, c, h, w))


class DiffusionUNet(torch.nn.Module):
    """A diffusion model's denoiser at 32x32: sinusoidal timestep embedding (Sin/Cos of a float
    input), GroupNorm + SiLU residual blocks, self-attention at 8x8, strided-conv downsampling,
    nearest Upsample + conv upsampling, skip Concats."""

    def __init__(self, ch=(32, 64, 128), tdim=128):
        super().__init__()
        self.tmlp = torch.nn.Sequential(torch.nn.Linear(32, tdim), torch.nn.SiLU(), torch.nn.Linear(tdim, tdim))
        self.inp = torch.nn.Conv2d(3, ch[0], 3, padding=1)
        self.d0, self.down0 = ResBlock(ch[0], ch[0], tdim), torch.nn.Conv2d(ch[0], ch[0], 3, 2, 1)
        self.d1, self.down1 = ResBlock(ch[0], ch[1], tdim), torch.nn.Conv2d(ch[1], ch[1], 3, 2, 1)
        self.mid, self.attn = ResBlock(ch[1], ch[2], tdim), Attention2d(ch[2])
        self.up1, self.u1 = torch.nn.Conv2d(ch[2], ch[2], 3, padding=1), ResBlock(ch[2] + ch[1], ch[1], tdim)
        self.up0, self.u0 = torch.nn.Conv2d(ch[1], ch[1], 3, padding=1), ResBlock(ch[1] + ch[0], ch[0], tdim)
        self.out = torch.nn.Sequential(torch.nn.GroupNorm(8, ch[0]), torch.nn.SiLU(), torch.nn.Conv2d(ch[0], 3, 3, padding=1))

    def forward(self, x, t):
        f = torch.exp(-9.21034 * torch.arange(16, dtype=torch.float32) / 16)
        temb = self.tmlp(torch.cat([torch.sin(t[:, None] * f), torch.cos(t[:, None] * f)], 1))
        h0 = self.d0(self.inp(x), temb)
        h1 = self.d1(self.down0(h0), temb)
        h = self.attn(self.mid(self.down1(h1), temb))
        h = self.u1(torch.cat([self.up1(torch.nn.functional.interpolate(h, scale_factor=2.0)), h1], 1), temb)
        h = self.u0(torch.cat([self.up0(torch.nn.functional.interpolate(h, scale_factor=2.0)), h0], 1), temb)
        return self.out(h)


class Seq2Seq(torch.nn.Module):
    """An encoder-decoder Transformer (2 + 2 layers, width 128): source and target token ids of
    different lengths, a causal target mask, cross-attention; logits for every target step."""

    def __init__(self):
        super().__init__()
        self.src, self.tgt = torch.nn.Embedding(800, 128), torch.nn.Embedding(600, 128)
        self.t = torch.nn.Transformer(128, 4, 2, 2, 256, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(128, 600)

    def forward(self, src, tgt):
        n = tgt.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf")), 1)
        return self.head(self.t(self.src(src), self.tgt(tgt), tgt_mask=causal))


class SpeechCTC(torch.nn.Module):
    """Speech recognition acoustic model: 80 log-mel features -> two Conv1d (stride 2) ->
    2-layer bidirectional LSTM (ONNX LSTM, direction=bidirectional) -> 29 CTC log-probs."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Sequential(torch.nn.Conv1d(80, 128, 3, 2, 1), torch.nn.ReLU(),
                                        torch.nn.Conv1d(128, 128, 3, 1, 1), torch.nn.ReLU())
        self.lstm = torch.nn.LSTM(128, 96, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = torch.nn.Linear(192, 29)

    def forward(self, feats):
        y, _ = self.lstm(self.conv(feats).transpose(1, 2))
        return torch.log_softmax(self.fc(y), -1)


class GruLM(torch.nn.Module):
    """A 2-layer GRU language model that carries its state: (ids [1, 16], h0 [2, 1, 256]) ->
    (logits [1, 16, 500], hn)."""

    def __init__(self):
        super().__init__()
        self.emb, self.gru = torch.nn.Embedding(500, 128), torch.nn.GRU(128, 256, 2, batch_first=True)
        self.fc = torch.nn.Linear(256, 500)

    def forward(self, ids, h0):
        y, h = self.gru(self.emb(ids), h0)
        return self.fc(y), h


class StyleSR(torch.nn.Module):
    """Fast style transfer (reflection Pad, InstanceNorm, residual blocks, nearest Upsample)
    followed by ESPCN super-resolution (Tanh, PixelShuffle x2 = DepthToSpace)."""

    def __init__(self):
        super().__init__()
        nn = torch.nn

        def block(cin, cout, k, s=1):
            return [nn.ReflectionPad2d(k // 2), nn.Conv2d(cin, cout, k, s), nn.InstanceNorm2d(cout, affine=True), nn.ReLU()]
        self.enc = nn.Sequential(*block(3, 16, 9), *block(16, 32, 3, 2), *block(32, 64, 3, 2))
        self.res = nn.ModuleList([nn.Sequential(*block(64, 64, 3), nn.ReflectionPad2d(1), nn.Conv2d(64, 64, 3),
                                                nn.InstanceNorm2d(64, affine=True)) for _ in range(2)])
        self.dec = nn.Sequential(nn.Upsample(scale_factor=2), *block(64, 32, 3), nn.Upsample(scale_factor=2),
                                 *block(32, 16, 3), nn.ReflectionPad2d(4), nn.Conv2d(16, 3, 9))
        self.sr = nn.Sequential(nn.Conv2d(3, 32, 5, padding=2), nn.Tanh(), nn.Conv2d(32, 16, 3, padding=1), nn.Tanh(),
                                nn.Conv2d(16, 12, 3, padding=1), nn.PixelShuffle(2))

    def forward(self, x):
        h = self.enc(x)
        for r in self.res:
            h = h + r(h)
        return self.sr(self.dec(h))


class GptKV(torch.nn.Module):
    """One decoding step of a GPT with a KV cache (2 layers, width 128, 4 heads): the new token
    [1, 1] and the past keys/values [2, 2, 1, 4, T, 32] (T dynamic) in, the next-token logits
    and the cache grown to T + 1 out. The position comes from the cache's length."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.tok, self.pos = nn.Embedding(500, 128), nn.Embedding(256, 128)
        self.ln1 = nn.ModuleList([nn.LayerNorm(128) for _ in range(2)])
        self.qkv = nn.ModuleList([nn.Linear(128, 384) for _ in range(2)])
        self.proj = nn.ModuleList([nn.Linear(128, 128) for _ in range(2)])
        self.ln2 = nn.ModuleList([nn.LayerNorm(128) for _ in range(2)])
        self.mlp = nn.ModuleList([nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 128)) for _ in range(2)])
        self.head = nn.Linear(128, 500)

    def forward(self, ids, past):
        t = past.shape[4]
        x = self.tok(ids) + self.pos(torch.arange(t, t + 1).unsqueeze(0))
        present = []
        for i in range(2):
            q, k, v = self.qkv[i](self.ln1[i](x)).reshape(1, 1, 3, 4, 32).permute(2, 0, 3, 1, 4)
            k = torch.cat([past[i, 0], k], 2)
            v = torch.cat([past[i, 1], v], 2)
            present.append(torch.stack([k, v]))
            a = torch.softmax(q @ k.transpose(-1, -2) / 32 ** 0.5, -1)
            x = x + self.proj[i]((a @ v).transpose(1, 2).reshape(1, 1, 128))
            x = x + self.mlp[i](self.ln2[i](x))
        return self.head(x), torch.stack(present)


class QdqLinear(torch.nn.Module):
    """nn.Linear between a QuantStub and a DeQuantStub: with a QAT qconfig its input, weights and
    output are fake-quantized (eager mode quantizes what the stubs enclose)."""

    def __init__(self, d_in, d_out):
        super().__init__()
        q = torch.ao.quantization
        self.quant, self.fc, self.dequant = q.QuantStub(), torch.nn.Linear(d_in, d_out), q.DeQuantStub()

    def forward(self, x):
        return self.dequant(self.fc(self.quant(x)))


class QdqBert(torch.nn.Module):
    """A BERT-style encoder (4 post-norm layers, width 256, 4 heads, GELU feed-forward 1024) whose
    every Linear is quantized the QDQ way; attention, LayerNorm and GELU stay float."""

    def __init__(self, layers=4, d=256, heads=4, ff=1024):
        super().__init__()
        self.heads = heads
        self.emb = torch.nn.Embedding(1000, d)
        self.pos = torch.nn.Parameter(torch.randn(1, 128, d) * 0.02)
        self.qkv = torch.nn.ModuleList(QdqLinear(d, 3 * d) for _ in range(layers))
        self.out = torch.nn.ModuleList(QdqLinear(d, d) for _ in range(layers))
        self.ff1 = torch.nn.ModuleList(QdqLinear(d, ff) for _ in range(layers))
        self.ff2 = torch.nn.ModuleList(QdqLinear(ff, d) for _ in range(layers))
        self.ln1 = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in range(layers))
        self.ln2 = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in range(layers))
        self.head = QdqLinear(d, 2)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids) + self.pos[:, :t]
        for i in range(len(self.qkv)):
            q, k, v = self.qkv[i](x).reshape(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, -1)
            x = self.ln1[i](x + self.out[i]((a @ v).transpose(1, 2).reshape(b, t, -1)))
            x = self.ln2[i](x + self.ff2[i](torch.nn.functional.gelu(self.ff1[i](x))))
        return self.head(x[:, 0])


def qdq_bert():
    """QdqBert after quantization-aware training's preparation (fbgemm qconfig: per-channel int8
    weights, uint8 activations), exported as ONNX Runtime's quantizer would write it: MatMul of
    the transposed DequantizeLinear'd weights, Add of the f32 bias, QuantizeLinear."""
    q = torch.ao.quantization
    m = QdqBert()
    m.qconfig = q.get_default_qat_qconfig("fbgemm", version=0)
    m.train()
    q.prepare_qat(m, inplace=True)
    with torch.no_grad():
        for _ in range(4):
            m(torch.randint(0, 1000, (2, 128)))
    m.apply(q.disable_observer)
    return m.eval(), [torch.randint(0, 1000, (1, 128))], 13


def dynamic_quantize(path):
    """Rewrites the model at `path` as ONNX Runtime's quantize_dynamic writes it (its default:
    QInt8 weights per tensor, symmetric; uint8 activations quantized at run time): each MatMul
    of a 2-D f32 initializer W becomes DynamicQuantizeLinear(x) -> MatMulInteger(x_q, W_q,
    x_zero_point) -> Cast(f32) -> Mul(x_scale * w_scale). W_q = round(W / w_scale),
    w_scale = max|W| / 127."""
    import numpy as np
    from onnx import helper, TensorProto
    m = onnx.load(path)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    nodes = []
    for n in g.node:
        w = inits.get(n.input[1]) if n.op_type == "MatMul" else None
        if w is None or len(w.dims) != 2:
            nodes.append(n)
            continue
        W = numpy_helper.to_array(w).astype(np.float32)
        scale = np.float32(np.abs(W).max() / 127)
        p = n.name.replace("/", "_") or n.output[0]
        g.initializer.extend([
            numpy_helper.from_array(np.clip(np.rint(W / scale), -127, 127).astype(np.int8), p + "_Wq"),
            numpy_helper.from_array(np.array(scale, np.float32), p + "_Ws"),
            numpy_helper.from_array(np.array(0, np.int8), p + "_Wzp")])
        x = n.input[0]
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [x], [p + "_xq", p + "_xs", p + "_xzp"],
                             name=p + "_quant"),
            helper.make_node("MatMulInteger", [p + "_xq", p + "_Wq", p + "_xzp", p + "_Wzp"],
                             [p + "_acc"], name=p + "_MatMulInteger"),
            helper.make_node("Cast", [p + "_acc"], [p + "_accf"], to=TensorProto.FLOAT,
                             name=p + "_cast"),
            helper.make_node("Mul", [p + "_xs", p + "_Ws"], [p + "_s"], name=p + "_scale"),
            helper.make_node("Mul", [p + "_accf", p + "_s"], [n.output[0]], name=p + "_dequant")]
    del g.node[:]
    g.node.extend(nodes)
    onnx.checker.check_model(m)
    onnx.save(m, path)


def dynq_bert():
    """QdqBert's float network (no fake quantization), dynamically quantized afterwards."""
    return QdqBert(), [torch.randint(0, 1000, (1, 128))], 13, "dynq"


def qdq_resnet18():
    """ResNet-18 quantized the QDQ way (torch.ao QAT fake quantization, fbgemm qconfig: per-channel
    int8 weights, uint8 activations), exported as QuantizeLinear/DequantizeLinear pairs around
    float Conv/Add/Gemm, as ONNX Runtime's quantization tool writes them."""
    q = torch.ao.quantization
    m = torchvision.models.quantization.resnet18(weights=None, quantize=False).eval()
    calibrate_batchnorm(m, [image()])
    m.fuse_model()
    m.qconfig = q.get_default_qat_qconfig("fbgemm", version=0)  # unfused fake quantization: exportable
    m.train()
    q.prepare_qat(m, inplace=True)
    with torch.no_grad():
        for _ in range(4):
            m(torch.randn(2, 3, 224, 224))
    m.apply(q.disable_observer)
    return m.eval(), [image()], 13


FAMILIES = {
    "efficientnet_b0": lambda: (M.efficientnet_b0(), [image()], 13),
    "mobilenet_v3_small": lambda: (M.mobilenet_v3_small(), [image()], 13),
    "shufflenet_v2_x0_5": lambda: (M.shufflenet_v2_x0_5(), [image()], 13),
    "squeezenet1_1": lambda: (M.squeezenet1_1(), [image()], 13),
    "lraspp": lambda: (M.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None),
                       [image(256)], 13),
    "deeplabv3_mnv3": lambda: (M.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, aux_loss=False), [image(256)], 13),
    "r3d_18": lambda: (M.video.r3d_18(), [torch.randn(1, 3, 8, 112, 112)], 13),
    "swin_t": lambda: (M.swin_t(), [image()], 14),
    "mc3_18": lambda: (M.video.mc3_18(), [torch.randn(1, 3, 8, 112, 112)], 17),
    "r2plus1d_18": lambda: (M.video.r2plus1d_18(), [torch.randn(1, 3, 8, 112, 112)], 17),
    "s3d": lambda: (M.video.s3d(), [torch.randn(1, 3, 16, 224, 224)], 17),
    "alexnet": lambda: (M.alexnet(), [image()], 17),
    "vgg11_bn": lambda: (M.vgg11_bn(), [image()], 17),
    "mobilenet_v2": lambda: (M.mobilenet_v2(), [image()], 17),
    "resnext50": lambda: (M.resnext50_32x4d(), [image()], 17),
    "efficientnet_v2_s": lambda: (M.efficientnet_v2_s(), [image()], 17),
    "inception_v3": lambda: (M.inception_v3(init_weights=True, aux_logits=False), [image(299)], 17),
    "maxvit_t": lambda: (M.maxvit_t(), [image()], 17),
    "ssdlite": lambda: (M.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None),
                        [[torch.rand(3, 320, 320)]], 13),
    "fasterrcnn": lambda: (M.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None), [[torch.rand(3, 320, 320)]], 13),
    "retinanet": lambda: (M.detection.retinanet_resnet50_fpn(weights=None, weights_backbone=None),
                          [[torch.rand(3, 320, 320)]], 13),
    "vit_s16": lambda: (M.VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=6,
                                            hidden_dim=384, mlp_dim=1536), [image()], 14),
    "text_encoder": text,
    "raft_small": lambda: (RaftSmall(), [torch.rand(1, 3, 128, 128), torch.rand(1, 3, 128, 128)], 16),
    "fcos": lambda: (M.detection.fcos_resnet50_fpn(weights=None, weights_backbone=None, min_size=320,
                                                   max_size=320), [[scene()]], 13),
    "maskrcnn": lambda: (mobilenet_fpn_detector(M.detection.MaskRCNN), [[scene()]], 13),
    "keypointrcnn": lambda: (mobilenet_fpn_detector(M.detection.KeypointRCNN), [[scene()]], 13),
    "diffusion_unet": lambda: (DiffusionUNet(), [torch.randn(1, 3, 32, 32), torch.tensor([500.0])], 13),
    "seq2seq": lambda: (Seq2Seq(), [torch.randint(0, 800, (1, 20)), torch.randint(0, 600, (1, 12))], 14),
    "speech_ctc": lambda: (SpeechCTC(), [torch.randn(1, 80, 200)], 13),
    "gru_lm": lambda: (GruLM(), [torch.randint(0, 500, (1, 16)), torch.randn(2, 1, 256)], 13),
    "style_sr": lambda: (StyleSR(), [torch.rand(1, 3, 128, 128)], 13),
    "gpt_kv": lambda: (GptKV(), [torch.randint(0, 500, (1, 1)), torch.randn(2, 2, 1, 4, 7, 32)], 14,
                       dict(input_names=["ids", "past"], output_names=["logits", "present"],
                            dynamic_axes={"past": {4: "T"}, "present": {4: "T1"}})),
    "resnet18_fp16": lambda: (M.resnet18(), [image()], 13, "fp16"),
    "qdq_resnet18": qdq_resnet18,
    "qdq_bert": qdq_bert,
    "dynq_bert": dynq_bert,
}


def widen_heads(name, model):
    """Classifier logits of std ~10, not ~0.3: RetinaNet's sigmoid scores then spread over
    (0, 1) instead of crowding 0.5 +- 0.02 (near-ties whose order is float noise), and Faster
    R-CNN's softmax over 91 classes has winners above the 0.05 score threshold instead of ~1/91
    everywhere."""
    if name == "retinanet":
        torch.nn.init.zeros_(model.head.classification_head.cls_logits.bias)
        torch.nn.init.normal_(model.head.classification_head.cls_logits.weight, std=0.3)
    if name in ("fasterrcnn", "maskrcnn", "keypointrcnn"):
        torch.nn.init.normal_(model.roi_heads.box_predictor.cls_score.weight, std=0.3)
    if name == "fcos":
        torch.nn.init.normal_(model.head.classification_head.cls_logits.bias, std=1.0)
        torch.nn.init.normal_(model.head.classification_head.cls_logits.weight, std=0.03)
    if name == "vit_s16":
        torch.nn.init.normal_(model.heads.head.weight, std=0.3)


def main(families=FAMILIES, doc=__doc__, prog="more-families.py", prepare=widen_heads):
    """Writes the families named on the command line (all by default): each built with seed 0,
    `prepare(name, model)` applied, its BatchNorms calibrated, then saved."""
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(doc)
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    out_dir, names = sys.argv[1], sys.argv[2:] or list(families)
    for name in names:
        if name not in families:
            sys.exit("%s: unknown model '%s' (known: %s)" % (prog, name, ", ".join(families)))
        torch.manual_seed(0)
        model, inputs, opset, *export = families[name]()
        if prepare:
            prepare(name, model)
        calibrate_batchnorm(model, inputs)
        save(out_dir, name, model, inputs, opset, *export)


if __name__ == "__main__":
    main()

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


def save(out_dir, name, model, inputs, opset=13):
    d = os.path.join(out_dir, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    model.eval()
    with torch.no_grad():
        outputs = flatten(model(*inputs), [])
    torch.onnx.export(model, tuple(inputs), os.path.join(d, "model.onnx"), opset_version=opset,
                      do_constant_folding=True)
    graph = onnx.load(os.path.join(d, "model.onnx")).graph
    for k, x in enumerate(flatten(inputs, [])):
        with open(os.path.join(d, "test_data_set_0", "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(x.numpy(), graph.input[k].name).SerializeToString())
    for k, y in enumerate(outputs):
        with open(os.path.join(d, "test_data_set_0", "output_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(y.numpy(), graph.output[k].name).SerializeToString())
    print(name, [tuple(y.shape) for y in outputs])


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
}


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    out_dir, names = sys.argv[1], sys.argv[2:] or list(FAMILIES)
    for name in names:
        if name not in FAMILIES:
            sys.exit("more-families.py: unknown model '%s' (known: %s)" % (name, ", ".join(FAMILIES)))
        torch.manual_seed(0)
        model, inputs, opset = FAMILIES[name]()
        # Classifier logits of std ~10, not ~0.3: RetinaNet's sigmoid scores then spread over
        # (0, 1) instead of crowding 0.5 +- 0.02 (near-ties whose order is float noise), and
        # Faster R-CNN's softmax over 91 classes has winners above the 0.05 score threshold
        # instead of ~1/91 everywhere.
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
        calibrate_batchnorm(model, inputs)
        save(out_dir, name, model, inputs, opset)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch eager ResNet-18 on cuda:0, the peer of `tandem run resnet18 --dim N=32 --random`.

torchvision's resnet18 (or, without torchvision, the same network in plain torch.nn), eval mode,
random weights, float32 NCHW input. Times `--runs` forward passes after `--warmup`, each ended by
torch.cuda.synchronize(), twice: with the input already on the GPU (PyTorch's usual setting), and
with the input copied from host memory and the logits copied back (what one `tandem run` does).
Prints one JSON line. Exits 2 with a reason on stderr when torch or CUDA is missing.

  --tf32 off      cuDNN convs and matmuls in FP32 (like Tandem, which never uses TF32)
  --tf32 default  PyTorch's defaults as installed (cuDNN convs may use TF32)
"""
import argparse
import json
import statistics
import sys
import time


def plain_resnet18(nn):
    """ResNet-18 (He et al. 2016, torchvision's layout) for when torchvision is absent."""

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return self.relu(y + (self.down(x) if self.down is not None else x))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--tf32", choices=["off", "default"], default="off")
    a = ap.parse_args()
    try:
        import torch
        import torch.nn as nn
    except ImportError as e:
        print(f"torch_resnet18.py: no PyTorch ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_resnet18.py: PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    if a.tf32 == "off":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = False  # PyTorch's default; no autotuning advantage either way
    try:
        import torchvision
        model, source = torchvision.models.resnet18(weights=None), f"torchvision {torchvision.__version__}"
    except Exception:  # torchvision missing or too old for weights=
        model, source = plain_resnet18(nn), "plain torch.nn"
    torch.manual_seed(0)
    model = model.eval().cuda()
    host = torch.rand(a.batch, 3, 224, 224)
    dev = host.cuda()

    def timed(fn):
        with torch.inference_mode():
            for _ in range(a.warmup):
                fn()
            torch.cuda.synchronize()
            t = []
            for _ in range(a.runs):
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                t.append(time.perf_counter() - t0)
        return statistics.median(t) * 1e3, min(t) * 1e3

    resident, resident_min = timed(lambda: model(dev))
    copies, _ = timed(lambda: model(host.cuda()).cpu())
    print(json.dumps({"runtime": "torch", "model": "resnet18", "source": source, "batch": a.batch,
                      "tf32": a.tf32, "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                      "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                      "median_ms": round(resident, 4), "min_ms": round(resident_min, 4),
                      "median_ms_with_copies": round(copies, 4), "runs": a.runs,
                      "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Writes the Fashion-MNIST models `tandem train` is tested with, untrained (PyTorch's default
init, seeded), as ONNX opset 17 with a dynamic batch dim:
  fmnist_mlp.onnx  Flatten, Dense 128 relu, Dense 10         (input [N, 1, 28, 28])
  fmnist_cnn.onnx  the Keras MNIST CNN: Conv 32 3x3 relu, Conv 64 3x3 relu, MaxPool 2,
                   Dropout .25, Flatten, Dense 128 relu, Dropout .5, Dense 10
                   (exported in eval form: the Dropouts are the identity and are dropped)
Usage: make_fmnist_models.py OUT_DIR [mlp|cnn ...]"""
import sys

import torch
from torch import nn


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(128, 10))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    which = sys.argv[2:] or ["mlp", "cnn"]
    for name in which:
        torch.manual_seed(0)
        model = {"mlp": mlp, "cnn": cnn}[name]().eval()
        torch.onnx.export(model, torch.zeros(1, 1, 28, 28), f"{out}/fmnist_{name}.onnx",
                          input_names=["image"], output_names=["logits"], opset_version=17,
                          dynamic_axes={"image": {0: "N"}, "logits": {0: "N"}})


if __name__ == "__main__":
    main()

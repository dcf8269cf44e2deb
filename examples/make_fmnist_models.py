#!/usr/bin/python3
"""Writes the Fashion-MNIST models `tandem train` is tested with, untrained (PyTorch's default
init, seeded), as ONNX opset 17 with a dynamic batch dim:
  fmnist_mlp.onnx  Flatten, Dense 128 relu, Dense 10         (input [N, 1, 28, 28])
  fmnist_cnn.onnx  the Keras MNIST CNN: Conv 32 3x3 relu, Conv 64 3x3 relu, MaxPool 2,
                   Dropout .25, Flatten, Dense 128 relu, Dropout .5, Dense 10
                   (the Dropouts kept, in inference form: `tandem train` runs them in
                   training mode, `tandem run` as the identity, as Keras's fit and predict)
Usage: make_fmnist_models.py OUT_DIR [mlp|cnn ...]"""
import sys

import onnx
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
        model = {"mlp": mlp, "cnn": cnn}[name]()
        path = f"{out}/fmnist_{name}.onnx"
        # Exported in training form so that the Dropouts stay in the graph, then each made an
        # inference Dropout (data and ratio only: training_mode absent means off).
        torch.onnx.export(model, torch.zeros(1, 1, 28, 28), path,
                          input_names=["image"], output_names=["logits"], opset_version=17,
                          dynamic_axes={"image": {0: "N"}, "logits": {0: "N"}},
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        m = onnx.load(path)
        for node in m.graph.node:
            if node.op_type == "Dropout":
                del node.input[2:]
                del node.output[1:]
        onnx.checker.check_model(m)
        onnx.save(m, path)


if __name__ == "__main__":
    main()

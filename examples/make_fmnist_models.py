#!/usr/bin/python3
"""Writes the Fashion-MNIST models `tandem train` is tested with, untrained (PyTorch's default
init, seeded), as ONNX opset 17 with a dynamic batch dim:
  fmnist_mlp.onnx  Flatten, Dense 128 relu, Dense 10         (input [N, 1, 28, 28])
  fmnist_cnn.onnx  the Keras MNIST CNN: Conv 32 3x3 relu, Conv 64 3x3 relu, MaxPool 2,
                   Dropout .25, Flatten, Dense 128 relu, Dropout .5, Dense 10
                   (the Dropouts kept, in inference form: `tandem train` runs them in
                   training mode, `tandem run` as the identity, as Keras's fit and predict)
  fmnist_bncnn.onnx a small CNN with batch norm: (Conv 16 3x3 pad 1, BatchNorm, relu,
                   MaxPool 2) twice (16, then 32 channels), Flatten, Dense 10; the
                   BatchNormalizations in inference form with their own running_mean and
                   running_var initializers (`tandem train` trains them as model.train():
                   batch statistics, running statistics updated; `tandem run` normalises
                   with the running statistics, as model.eval())
Usage: make_fmnist_models.py OUT_DIR [mlp|cnn|bncnn ...]"""
import sys

import onnx
import onnx.numpy_helper
import torch
from torch import nn


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(128, 10))


def bncnn():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    which = sys.argv[2:] or ["mlp", "cnn"]
    for name in which:
        torch.manual_seed(0)
        model = {"mlp": mlp, "cnn": cnn, "bncnn": bncnn}[name]()
        path = f"{out}/fmnist_{name}.onnx"
        # Exporting in training mode runs the model once, which moves the BatchNorm running
        # statistics: the initializers are written back from this copy afterwards.
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        # Exported in training form so that the Dropouts stay in the graph and every
        # BatchNorm keeps initializers of its own (the other modes fold BatchNorm into the Conv
        # or share equal initializers, ones and zeros at init, through Identity), then each
        # Dropout and BatchNormalization made an inference one (Dropout: data and ratio only,
        # training_mode absent means off; BatchNormalization: Y only, training_mode 0).
        torch.onnx.export(model, torch.zeros(1, 1, 28, 28), path,
                          input_names=["image"], output_names=["logits"], opset_version=17,
                          dynamic_axes={"image": {0: "N"}, "logits": {0: "N"}},
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        m = onnx.load(path)
        for node in m.graph.node:
            if node.op_type == "Dropout":
                del node.input[2:]
                del node.output[1:]
            if node.op_type == "BatchNormalization":
                del node.output[1:]
                for a in node.attribute:
                    if a.name == "training_mode":
                        a.i = 0
        for init in m.graph.initializer:
            if init.name in state:
                init.CopyFrom(onnx.numpy_helper.from_array(state[init.name].numpy(), init.name))
        onnx.checker.check_model(m)
        onnx.save(m, path)


if __name__ == "__main__":
    main()

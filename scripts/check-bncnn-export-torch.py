#!/usr/bin/python3
"""Checks a BatchNorm CNN written by `tandem train -o` (examples/make_fmnist_models.py `bncnn`)
against PyTorch: its initializers (weights, BatchNorm scales, biases and running statistics)
are loaded into the same torch.nn model by name, which runs in eval mode (normalising with the
running statistics) on the first COUNT Fashion-MNIST test images; `tandem run` runs the ONNX
file on the same images. Prints the largest logit difference and both accuracies; exits 1 above
1e-4. Needs Debian's python3-torch and python3-onnx.

Usage: scripts/check-bncnn-export-torch.py TRAINED.onnx [--count 256] [--tandem build/tools/tandem]
"""
import argparse
import gzip
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import numpy_helper

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "examples"))
import make_fmnist_models  # noqa: E402


def read_idx(path):
    data = gzip.open(path).read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--count", type=int, default=256)
    ap.add_argument("--tandem", default=os.path.join(here, "..", "build", "tools", "tandem"))
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    x = read_idx(f"{a.data}/t10k-images-idx3-ubyte.gz")[:a.count].astype(np.float32) / 255.0
    x = x.reshape(a.count, 1, 28, 28)
    y = read_idx(f"{a.data}/t10k-labels-idx1-ubyte.gz")[:a.count]
    graph = onnx.load(a.model).graph
    model = make_fmnist_models.bncnn()
    state = model.state_dict()
    inits = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in graph.initializer}
    missing = [k for k in state if k not in inits and not k.endswith("num_batches_tracked")]
    if missing:
        sys.exit(f"{a.model}: no initializer for {missing} (not a make_fmnist_models.py bncnn?)")
    for k in state:
        if k in inits:
            state[k] = inits[k]
    model.load_state_dict(state)
    model.eval()
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    with tempfile.TemporaryDirectory() as work:
        os.makedirs(f"{work}/in")
        with open(f"{work}/in/input_0.pb", "wb") as f:
            f.write(numpy_helper.from_array(x, graph.input[0].name).SerializeToString())
        subprocess.run([a.tandem, "run", a.model, "--inputs", f"{work}/in", "--dim",
                        f"N={a.count}", "--save-outputs", f"{work}/out"], check=True,
                       stdout=subprocess.DEVNULL)
        t = onnx.TensorProto()
        with open(f"{work}/out/output_0.pb", "rb") as f:
            t.ParseFromString(f.read())
        got = numpy_helper.to_array(t)
    diff = float(np.abs(got - want).max())
    print(f"{a.count} images: max |tandem - torch eval| = {diff:.3g}; accuracy tandem "
          f"{(got.argmax(1) == y).mean():.4f}, torch {(want.argmax(1) == y).mean():.4f}")
    sys.exit(0 if diff <= 1e-4 else 1)


if __name__ == "__main__":
    main()

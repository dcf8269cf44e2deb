#!/usr/bin/python3
"""PyTorch's side of the BatchNorm CNN training comparison (README "Training speed"): the
model of examples/make_fmnist_models.py `bncnn` (same init: torch.manual_seed(0)), in
model.train() mode, Adam lr 1e-3, batch 128, cross-entropy, Fashion-MNIST scaled to [0, 1],
batches from a seeded permutation. Times `--steps` steps after 5 warm-up steps and prints one
line: ms/step and images/s. Compare with
  tandem train tests/e2e/models/fmnist_bncnn.onnx --max-steps N --threads T
run alternately on the same machine (a ratio from the same run, never across days).

Usage: torch_bncnn_train.py [--threads 2] [--blas-threads T] [--steps 100] [--data DIR]
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_blas import blas, set_threads  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import make_fmnist_models  # noqa: E402


def read_idx(path):
    data = gzip.open(path).read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blas-threads", type=int,
                    help="OpenBLAS's pool (default: --threads; torch.set_num_threads does not set it)")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    threads = set_threads(torch, a.threads, a.blas_threads)
    x = read_idx(f"{a.data}/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    x = torch.from_numpy(x.reshape(-1, 1, 28, 28))
    y = torch.from_numpy(read_idx(f"{a.data}/train-labels-idx1-ubyte.gz").astype(np.int64))
    torch.manual_seed(0)
    model = make_fmnist_models.bncnn()
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(1))

    def step(i):
        b = perm[(i * 128) % (len(y) - 128):][:128]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[b]), y[b])
        loss.backward()
        opt.step()

    for i in range(5):
        step(i)
    t = time.perf_counter()
    for i in range(5, 5 + a.steps):
        step(i)
    dt = time.perf_counter() - t
    print(f"torch {torch.__version__} (BLAS {blas()}), {threads}: {dt / a.steps * 1000:.2f} ms/step, "
          f"{a.steps * 128 / dt:.0f} images/s")


if __name__ == "__main__":
    main()

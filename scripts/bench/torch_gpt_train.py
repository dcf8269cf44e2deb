#!/usr/bin/python3
"""PyTorch's side of the transformer training comparison (README "Training speed"): the GPT of
../shared/models/gpt_like (../shared/zoo/make_zoo.py's GptLike: 4 pre-LayerNorm blocks, d 256,
4 heads, FFN 1024, vocab 1000, 64 tokens), in model.train() mode, Adam lr 1e-3, cross-entropy
on the last position's logits, batch --batch of random token ids (labels: the last id mod 10).
Times --steps steps after 3 warm-up steps and prints one line: ms/step and samples/s. Compare
with
  tandem train ../shared/models/gpt_like/model.onnx --data onnx:DIR --all-params --batch B \\
      --max-steps N --threads T
(DIR from `--write-data DIR`: the same kind of ids and labels), run alternately on the same
machine (a ratio from the same run, never across days).

With --lm the GPT is a language model (scripts/bench/gpt_lm.py: every position's logits, the
next token as every position's label, the mean cross-entropy over all of them); `--write-data
DIR --lm` writes next-token labels [n, 64] and the model to train, DIR/gpt_lm.onnx:
  tandem train DIR/gpt_lm.onnx --data onnx:DIR --all-params --batch B --max-steps N --threads T

Usage: torch_gpt_train.py [--threads 2] [--blas-threads T] [--steps 20] [--batch 32] [--shared ../shared] [--lm]
                          [--write-data DIR [--count 2048]]
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_blas import blas, set_threads  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))


def labels_of(x, lm):
    """ids[:, -1] % 10, or with lm the next id at every position (the first id after the last)."""
    return np.roll(x, -1, axis=1) if lm else x[:, -1] % 10


def write_data(out, count, lm):
    """DIR/{train,test}/test_data_set_0: random ids [n, 64] in [0, 1000), labels_of(ids, lm)."""
    from onnx import numpy_helper
    rng = np.random.default_rng(0)
    for split, n in (("train", count), ("test", max(256, count // 8))):
        d = os.path.join(out, split, "test_data_set_0")
        os.makedirs(d, exist_ok=True)
        x = rng.integers(0, 1000, size=(n, 64), dtype=np.int64)
        with open(os.path.join(d, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, "input").SerializeToString())
        with open(os.path.join(d, "input_1.pb"), "wb") as f:
            f.write(numpy_helper.from_array(labels_of(x, lm), "labels").SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blas-threads", type=int,
                    help="OpenBLAS's pool (default: --threads; torch.set_num_threads does not set it)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--shared", default=os.path.join(here, "..", "..", "..", "shared"))
    ap.add_argument("--write-data", metavar="DIR")
    ap.add_argument("--count", type=int, default=2048)
    ap.add_argument("--lm", action="store_true", help="a language model (scripts/bench/gpt_lm.py)")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.shared, "zoo"))
    import make_zoo  # noqa: E402
    from gpt_lm import GptLm, export_lm  # noqa: E402

    if a.write_data:
        write_data(a.write_data, a.count, a.lm)
        if a.lm:
            export_lm(os.path.join(a.write_data, "gpt_lm.onnx"))
        return
    threads = set_threads(torch, a.threads, a.blas_threads)
    torch.manual_seed(0)
    model = GptLm() if a.lm else make_zoo.GptLike()
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)

    def step():
        ids = torch.randint(0, 1000, (a.batch, 64), generator=g)
        opt.zero_grad()
        logits = model(ids)
        labels = torch.roll(ids, -1, dims=1) if a.lm else ids[:, -1] % 10
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    t = time.perf_counter()
    for _ in range(a.steps):
        step()
    dt = time.perf_counter() - t
    print(f"torch {torch.__version__} (BLAS {blas()}){' language model' if a.lm else ''}, {threads}: "
          f"{dt / a.steps * 1000:.1f} ms/step, "
          f"{a.steps * a.batch / dt:.0f} samples/s")


if __name__ == "__main__":
    main()

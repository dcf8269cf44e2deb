#!/usr/bin/python3
"""Checks `tandem train` on a transformer against PyTorch: the 4-layer GPT of
../shared/models/gpt_like (made by ../shared/zoo/make_zoo.py: token and position embeddings,
pre-LayerNorm blocks written out as ReduceMean/Sub/Pow/Sqrt/Div, causal attention, GELU (tanh),
the last position's next-token logits) takes STEPS full-batch optimizer steps on one fixed batch
of BATCH random token ids (labels: the last id mod 10), in `tandem train --all-params` and in the
same torch.nn model with the ONNX file's initializers loaded into it. The batch is the whole
training set, so each epoch is one step over the same samples (the shuffle does not change a
mean loss). Prints the loss of each step in both and, per parameter, how far Tandem's trained
value is from PyTorch's relative to how far PyTorch moved it; exits 1 when the worst exceeds
--tolerance (default 1e-3 for SGD, 5e-2 for Adam: see the option). Needs Debian's python3-torch and python3-onnx.

Usage: scripts/check-gpt-train-torch.py [--shared ../shared] [--steps 3] [--optimizer sgd|adam]
                                        [--lr 0.05] [--batch 32] [--tandem build/tools/tandem]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import numpy_helper

here = os.path.dirname(os.path.abspath(__file__))


def write_set(path, ids, labels):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(ids, "input").SerializeToString())
    with open(os.path.join(path, "input_1.pb"), "wb") as f:
        f.write(numpy_helper.from_array(labels, "labels").SerializeToString())


def load_initializers(model, inits):
    """The ONNX initializers into the torch model: by name where the export kept it, and the
    exporter's transposed Linear weights (onnx::MatMul_*, in graph order) into the Linear
    layers in module order."""
    named = dict(model.named_parameters())
    matmuls = [n for n in inits if n.startswith("onnx::MatMul_")]
    linears = [n for n, p in named.items() if n.endswith(".weight") and p.dim() == 2 and
               not n.startswith(("tok.", "pos."))]
    if len(matmuls) != len(linears):
        sys.exit(f"{len(matmuls)} MatMul initializers for {len(linears)} Linear weights")
    which = {}
    with torch.no_grad():
        for n, v in inits.items():
            if n in named:
                named[n].copy_(torch.from_numpy(v))
                which[n] = n
        for onnx_name, torch_name in zip(matmuls, linears):
            named[torch_name].copy_(torch.from_numpy(inits[onnx_name]).t())
            which[onnx_name] = torch_name
    missing = set(named) - set(which.values())
    if missing:
        sys.exit(f"torch parameters with no initializer: {sorted(missing)}")
    return which


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(here, "..", "..", "shared"))
    ap.add_argument("--tandem", default=os.path.join(here, "..", "build", "tools", "tandem"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    # Adam divides each gradient by its own running RMS, so an element whose gradient is
    # rounding-sized still moves by about lr, in whichever direction its rounding says: the
    # worst element of a trained matrix differs by a few percent of its update there.
    ap.add_argument("--tolerance", type=float, help="default 1e-3 for sgd, 5e-2 for adam")
    a = ap.parse_args()
    if a.tolerance is None:
        a.tolerance = 1e-3 if a.optimizer == "sgd" else 5e-2
    onnx_path = os.path.join(a.shared, "models", "gpt_like", "model.onnx")
    sys.path.insert(0, os.path.join(a.shared, "zoo"))
    import make_zoo  # noqa: E402  (the GptLike definition the ONNX file was exported from)

    torch.manual_seed(7)
    ids = torch.randint(0, 1000, (a.batch, 64), dtype=torch.int64)
    labels = ids[:, -1] % 10
    inits = {t.name: numpy_helper.to_array(t).copy() for t in onnx.load(onnx_path).graph.initializer}

    model = make_zoo.GptLike()
    which = load_initializers(model, inits)
    model.train()
    params = list(model.parameters())
    opt = (torch.optim.SGD(params, lr=a.lr) if a.optimizer == "sgd"
           else torch.optim.Adam(params, lr=a.lr))
    torch_losses = []
    for _ in range(a.steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(ids), labels)
        loss.backward()
        opt.step()
        torch_losses.append(loss.item())
    named = dict(model.named_parameters())

    with tempfile.TemporaryDirectory() as tmp:
        for split in ("train", "test"):
            write_set(os.path.join(tmp, split, "test_data_set_0"), ids.numpy(), labels.numpy())
        out = os.path.join(tmp, "trained.onnx")
        cmd = [a.tandem, "train", onnx_path, "--data", "onnx:" + tmp, "--batch", str(a.batch),
               "--epochs", str(a.steps), "--optimizer", a.optimizer, "--lr", str(a.lr),
               "--all-params", "--threads", str(a.threads), "--no-progress", "-o", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"tandem train failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        tandem_losses = [float(x) for x in re.findall(r"epoch \d+: 1 steps, loss ([0-9.]+)", r.stdout + r.stderr)]
        trained = {t.name: numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}

    print(f"{a.optimizer} lr {a.lr}, batch {a.batch}, {a.steps} steps")
    for k, (t, p) in enumerate(zip(tandem_losses, torch_losses)):
        print(f"  step {k + 1}: loss tandem {t:.6f}  torch {p:.6f}")
    if len(tandem_losses) != a.steps:
        sys.exit(f"expected {a.steps} epoch lines from tandem train, got {len(tandem_losses)}")
    worst, worst_name = 0.0, ""
    for onnx_name, torch_name in which.items():
        ref = named[torch_name].detach().numpy()
        if onnx_name.startswith("onnx::MatMul_"):
            ref = ref.T
        moved = np.abs(ref - inits[onnx_name]).max()
        diff = np.abs(trained[onnx_name] - ref).max()
        rel = diff / max(moved, 1e-12)
        if rel > worst:
            worst, worst_name = rel, f"{onnx_name} ({torch_name}: moved {moved:.3g}, apart {diff:.3g})"
    print(f"  parameters: {len(which)}; worst |tandem - torch| / |torch update|: {worst:.2e} at {worst_name}")
    loss_gap = max(abs(t - p) / max(abs(p), 1e-12) for t, p in zip(tandem_losses, torch_losses))
    print(f"  worst relative loss gap: {loss_gap:.2e}")
    if worst > a.tolerance or loss_gap > a.tolerance:
        print(f"FAIL: above {a.tolerance}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())

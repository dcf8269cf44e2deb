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

With --lm the same GPT is a language model: it returns every position's logits [N, 64, 1000]
(scripts/bench/gpt_lm.py: make_zoo's GptLike with that forward, exported as make_zoo exports), the
labels are the next token at every position [N, 64] (the last position's: the first id), and
the loss is PyTorch's cross_entropy(logits.view(-1, V), labels.view(-1)), the mean over every
position (tandem train's default --class-axis -1). --lm --pad pads the batch as a language
model's batch of sequences of different lengths is padded: sequence i keeps a random length in
[16, 64], the ids after it are 0 and their labels -100 (PyTorch's ignore_index; `tandem train
--ignore-index -100`), the loss the mean over the labels kept (the causal mask keeps the pads
out of every kept position).

Usage: scripts/check-gpt-train-torch.py [--shared ../shared] [--steps 3] [--optimizer sgd|adam]
                                        [--lr 0.05] [--batch 32] [--lm [--pad]]
                                        [--tandem build/tools/tandem]
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
    ap.add_argument("--lm", action="store_true",
                    help="a language model: every position's logits, the next token as its label")
    ap.add_argument("--pad", action="store_true",
                    help="with --lm: sequences of random lengths, padded; labels -100 after each")
    # Adam divides each gradient by its own running RMS, so an element whose gradient is
    # rounding-sized still moves by about lr, in whichever direction its rounding says: the
    # worst element of a trained matrix differs by a few percent of its update there.
    ap.add_argument("--tolerance", type=float, help="default 1e-3 for sgd, 5e-2 for adam")
    a = ap.parse_args()
    if a.pad and not a.lm:
        ap.error("--pad needs --lm")
    if a.tolerance is None:
        a.tolerance = 1e-3 if a.optimizer == "sgd" else 5e-2
    onnx_path = os.path.join(a.shared, "models", "gpt_like", "model.onnx")
    sys.path.insert(0, os.path.join(a.shared, "zoo"))
    import make_zoo  # noqa: E402  (the GptLike definition the ONNX file was exported from)

    torch.manual_seed(7)
    ids = torch.randint(0, 1000, (a.batch, 64), dtype=torch.int64)
    labels = torch.roll(ids, -1, dims=1) if a.lm else ids[:, -1] % 10
    if a.pad:
        lengths = torch.randint(16, 65, (a.batch,))
        after = torch.arange(64)[None, :] >= lengths[:, None]
        ids[after] = 0
        labels = torch.roll(ids, -1, dims=1)
        labels[torch.arange(64)[None, :] >= lengths[:, None] - 1] = -100

    sys.path.insert(0, os.path.join(here, "bench"))
    from gpt_lm import GptLm, export_lm  # noqa: E402

    tmp_dir = tempfile.TemporaryDirectory()
    if a.lm:
        onnx_path = os.path.join(tmp_dir.name, "gpt_lm.onnx")
        export_lm(onnx_path)
    inits = {t.name: numpy_helper.to_array(t).copy() for t in onnx.load(onnx_path).graph.initializer}

    model = GptLm() if a.lm else make_zoo.GptLike()
    which = load_initializers(model, inits)
    model.train()
    params = list(model.parameters())
    opt = (torch.optim.SGD(params, lr=a.lr) if a.optimizer == "sgd"
           else torch.optim.Adam(params, lr=a.lr))
    torch_losses = []
    for _ in range(a.steps):
        opt.zero_grad()
        logits = model(ids)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                 ignore_index=-100)
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
        if a.pad:
            cmd += ["--ignore-index", "-100"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"tandem train failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        tandem_losses = [float(x) for x in re.findall(r"epoch \d+: 1 steps, loss ([0-9.]+)", r.stdout + r.stderr)]
        trained = {t.name: numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}

    tmp_dir.cleanup()
    print(f"{'language model, ' if a.lm else ''}{'padded (' + str(int((labels != -100).sum())) + ' labels kept of ' + str(labels.numel()) + '), ' if a.pad else ''}{a.optimizer} lr {a.lr}, batch {a.batch}, {a.steps} steps")
    for k, (t, p) in enumerate(zip(tandem_losses, torch_losses)):
        print(f"  step {k + 1}: loss tandem {t:.6f}  torch {p:.6f}")
    if len(tandem_losses) != a.steps:
        sys.exit(f"expected {a.steps} epoch lines from tandem train, got {len(tandem_losses)}")
    worst, worst_name = 0.0, "none"
    worst_raw, worst_raw_name = 0.0, ""
    for onnx_name, torch_name in which.items():
        ref = named[torch_name].detach().numpy()
        if onnx_name.startswith("onnx::MatMul_"):
            ref = ref.T
        moved = np.abs(ref - inits[onnx_name]).max()
        diff = np.abs(trained[onnx_name] - ref).max()
        # Rounding apart (4 ulps of the largest value) is no difference, however small the
        # update: the language model's SGD moves the embedding by about 150 ulps.
        ulps = 4 * float(np.spacing(np.float32(np.abs(ref).max())))
        rel = max(0.0, diff - ulps) / max(moved, 1e-12)
        if diff / max(moved, 1e-12) > worst_raw:
            worst_raw = diff / max(moved, 1e-12)
            worst_raw_name = f"{onnx_name} (moved {moved:.3g}, apart {diff:.3g}, 4 ulps {ulps:.3g})"
        if rel > worst:
            worst, worst_name = rel, f"{onnx_name} ({torch_name}: moved {moved:.3g}, apart {diff:.3g})"
    print(f"  parameters: {len(which)}; worst |tandem - torch| / |torch update|: {worst_raw:.2e} at {worst_raw_name}")
    print(f"  less 4 ulps of the parameter's largest value: {worst:.2e} at {worst_name}")
    loss_gap = max(abs(t - p) / max(abs(p), 1e-12) for t, p in zip(tandem_losses, torch_losses))
    print(f"  worst relative loss gap: {loss_gap:.2e}")
    if worst > a.tolerance or loss_gap > a.tolerance:
        print(f"FAIL: above {a.tolerance}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())

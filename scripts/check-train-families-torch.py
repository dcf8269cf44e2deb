#!/usr/bin/python3
"""Checks `tandem train` against PyTorch on model families nobody tuned the training for: each
torchvision classifier below is built with seed 0, its Dropouts replaced by identities and its
stochastic depth off (both random in training, and not the same random numbers on the two
sides), exported with torch.onnx's TrainingMode.TRAINING and do_constant_folding=False
(BatchNorms stay BatchNormalization nodes in training mode; a Linear's weight stays an
initializer behind its Transpose), then trained full-batch SGD on one fixed batch of BATCH
random images [BATCH, 3, SIZE, SIZE] with random labels in [0, 1000), by `tandem train` (its
default parameters, or every f32 initializer with --all-params) and by the torch model itself
(model.train(), torch.optim.SGD, cross_entropy), in float32 and in float64.

Each step is teacher-forced: Tandem runs STEPS one-step runs, each from the last one's -o model,
and torch takes one step from the same values (initializers are matched to torch parameters and
buffers by name, then by value, a matrix also by its transpose, so no names are assumed). A
tensor's score is (|tandem - torch f64| - 4 ulps of its largest value x sqrt(size)) over the
larger of --tolerance x |the update| and --noise x |torch f32 - torch f64|, in L2 norms; every
tensor (parameters and BatchNorm running statistics) and each step's loss must score at most 1.
(Comparing each side over its own steps measures chaos, not gradients: a 1e-5 relative rounding
difference in one step's first-convolution update moved torch f64's own next update of
ShuffleNet's last blocks by 11%. The noise term covers float32 rounding flipping a ReLU6 or ReLU
mask, which moves one channel by a whole gradient term.) The one STEPS-step run's losses must be
the chained runs' (within 1e-3 of the loss or 2e-4: a step that lost what the last one wrote is
further off; its parameters are as far from theirs as reshuffling the batch makes them). Prints
per family each step's losses, the worst tensor, and the torch parameters Tandem did not train
(its default set is narrower than PyTorch's: e.g. ConvNeXt's layer_scale, ViT's class_token;
--all-params trains them). Exits 1 when a family fails or cannot train, 0 when all pass, 77
without torch. Needs Debian's python3-torch, python3-torchvision and python3-onnx.

  families (default: all): resnet18 mobilenet_v2 mobilenet_v3_small efficientnet_b0
  shufflenet_v2_x0_5 squeezenet1_1 mnasnet0_5 regnet_x_400mf googlenet densenet121
  convnext_tiny swin_t vit

Usage: scripts/check-train-families-torch.py [FAMILY...] [--steps 2] [--lr 0.01] [--batch 8]
           [--size 64] [--opset 17] [--all-params] [--tolerance 5e-2] [--noise 4] [--threads 2]
           [--keep DIR] [--tandem build/tools/tandem]
"""
import argparse
import copy
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

try:
    import numpy as np
    import onnx
    import torch
    import torchvision.models as M
    from onnx import numpy_helper
except ImportError as e:  # exit 77: ctest's skip (e2e.train_families_torch)
    print(f"SKIP: {e.name} is missing: apt-get install python3-torch python3-torchvision python3-onnx")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))

FAMILIES = {
    "resnet18": lambda s: M.resnet18(),
    "mobilenet_v2": lambda s: M.mobilenet_v2(),
    "mobilenet_v3_small": lambda s: M.mobilenet_v3_small(),
    "efficientnet_b0": lambda s: M.efficientnet_b0(),
    "shufflenet_v2_x0_5": lambda s: M.shufflenet_v2_x0_5(),
    "squeezenet1_1": lambda s: M.squeezenet1_1(),
    "mnasnet0_5": lambda s: M.mnasnet0_5(),
    "regnet_x_400mf": lambda s: M.regnet_x_400mf(),
    "googlenet": lambda s: M.googlenet(aux_logits=False, init_weights=True),
    "densenet121": lambda s: M.densenet121(),
    "convnext_tiny": lambda s: M.convnext_tiny(),
    "swin_t": lambda s: M.swin_t(),
    # A small ViT at the check's image size: patch 16, 2 layers, width 192, 3 heads.
    "vit": lambda s: M.VisionTransformer(image_size=s, patch_size=16, num_layers=2, num_heads=3,
                                         hidden_dim=192, mlp_dim=768),
}


def without_randomness(model):
    """Dropouts become identities and stochastic depth is off: both draw random numbers in
    training, which Tandem and torch would draw differently."""
    for parent in model.modules():
        for name, child in parent.named_children():
            if isinstance(child, torch.nn.Dropout):
                setattr(parent, name, torch.nn.Identity())
            elif type(child).__name__ == "StochasticDepth":
                child.p = 0.0
    return model


def match_by_value(inits, tensors):
    """ONNX initializer name -> (torch name, transposed): by name where the export kept it and
    the value is the same, then each other initializer to the first torch tensor not yet taken
    whose value is exactly its own (or, for a matrix, its transpose's). A BatchNorm's scale of
    ones matched to another BatchNorm's is no harm: they start equal, and their updates differ
    only if the two are told apart by name."""
    which = {n: (n, False) for n, v in inits.items()
             if n in tensors and v.dtype == np.float32 and np.array_equal(tensors[n], v)}
    taken = {t for t, _ in which.values()}
    by_shape = {}
    for name, t in tensors.items():
        if name not in taken:
            by_shape.setdefault(tuple(t.shape), []).append(name)
    for n, v in inits.items():
        if v.dtype != np.float32 or n in which:
            continue
        for transposed, shape in ((False, v.shape), (True, v.shape[::-1] if v.ndim == 2 else None)):
            if shape is None:
                continue
            for name in by_shape.get(tuple(shape), []):
                ref = tensors[name]
                if np.array_equal(ref.T if transposed else ref, v):
                    which[n] = (name, transposed)
                    by_shape[tuple(shape)].remove(name)
                    break
            if n in which:
                break
    return which


def write_set(path, x, y):
    os.makedirs(path, exist_ok=True)
    for k, (a, name) in enumerate(((x, "x"), (y, "y"))):
        with open(os.path.join(path, "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(a, name).SerializeToString())


def tandem_train(a, model_path, data, epochs, out):
    """`tandem train` for `epochs` full-batch SGD steps: (losses, trained initializers, seconds)
    or (None, the error, seconds)."""
    cmd = [a.tandem, "train", model_path, "--data", "onnx:" + data, "--batch", str(a.batch),
           "--epochs", str(epochs), "--optimizer", "sgd", "--lr", str(a.lr),
           "--threads", str(a.threads), "--no-progress", "-o", out]
    if a.all_params:
        cmd.append("--all-params")
    start = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.time() - start
    if r.returncode != 0:
        return None, f"tandem train failed ({r.returncode}): {(r.stdout + r.stderr).strip()[-600:]}", seconds
    losses = [float(v) for v in re.findall(r"epoch \d+: 1 steps, loss ([0-9.eE+-]+|nan|inf)", r.stdout + r.stderr)]
    if len(losses) != epochs:
        return None, f"expected {epochs} epoch lines from tandem train, got {len(losses)}", seconds
    return losses, {t.name: numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}, seconds


def check(family, a, work):
    torch.manual_seed(0)
    model = without_randomness(FAMILIES[family](a.size))
    x = torch.randn(a.batch, 3, a.size, a.size)
    y = torch.randint(0, 1000, (a.batch,))
    path = os.path.join(work, family + ".onnx")
    model.train()
    # The export runs the model once in training mode (BatchNorm's running statistics move),
    # so what it writes, not the model as built, is where both sides start.
    torch.onnx.export(model, (x,), path, opset_version=a.opset, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING, input_names=["x"])
    model.train()
    inits = {t.name: numpy_helper.to_array(t).copy() for t in onnx.load(path).graph.initializer}
    state = {n: t.detach().clone().numpy() for n, t in model.state_dict().items() if t.dtype == torch.float32}
    which = match_by_value(inits, state)
    params = {n for n, _ in model.named_parameters()}
    unmatched = sorted(params - {t for t, _ in which.values()})
    if unmatched:
        print(f"{family}: FAIL: torch parameters with no ONNX initializer of the same value (folded at "
              f"export?): " + ", ".join(unmatched[:6]))
        return False

    def torch_step(start, dtype):
        """One SGD step of the torch model (in `dtype`) from the initializer values `start`:
        (loss, the updated tensors by ONNX name)."""
        m = copy.deepcopy(model).to(dtype)
        sd = m.state_dict()
        for onnx_name, (torch_name, transposed) in which.items():
            v = start[onnx_name].T if transposed else start[onnx_name]
            sd[torch_name] = torch.from_numpy(np.ascontiguousarray(v)).to(dtype)
        m.load_state_dict(sd)
        m.train()
        opt = torch.optim.SGD(m.parameters(), lr=a.lr)
        loss = torch.nn.functional.cross_entropy(m(x.to(dtype)), y)
        loss.backward()
        opt.step()
        sd = m.state_dict()
        return loss.item(), {o: (sd[t].T if tr else sd[t]).detach().numpy() for o, (t, tr) in which.items()}

    data = os.path.join(work, family + "-data")
    for split in ("train", "test"):
        write_set(os.path.join(data, split, "test_data_set_0"), x.numpy(), y.numpy())
    # The run of STEPS steps, then the same steps one run each, each from the last one's model.
    run_losses, run_trained, seconds = tandem_train(a, path, data, a.steps, os.path.join(work, family + "-trained.onnx"))
    if run_losses is None:
        print(f"{family}: FAIL: {run_trained}")
        return False

    # Each step is compared from the same start on both sides (Tandem's previous step): a deep
    # net at a small batch is chaotic over steps (float32 rounding of one step's update of the
    # first convolution, 1e-5 of it, moved ShuffleNet's next update of its last blocks by 10%
    # in torch's own float64), so steps compared from their own starts would measure the
    # chaos, not the gradients. A tensor fails when Tandem's step is further from torch's
    # float64 step (the L2 norm of the difference) than both --tolerance of the update's norm
    # and --noise times torch's own float32 step's distance, plus 4 ulps of its largest value
    # per element: a wrong gradient is off by about its whole update, while float32 rounding
    # is off by 1e-5 of it, except where it flips a mask: a ReLU6 input of -7e-6 in float64
    # came out -1.5e-5 in torch's float32 and above 0 in Tandem's, which moved MobileNetV2's
    # last BatchNorm bias by a whole gradient term in one channel of 1280 (2% of that
    # channel's update, 5e-4 of the tensor's).
    worst, worst_at, compared, loss_score = 0.0, "none", 0, 0.0
    untrained, scores, lines, chained_run_losses = set(), [], [], []
    start, start_path = inits, path
    for k in range(a.steps):
        out = os.path.join(work, f"{family}-step{k + 1}.onnx")
        losses, trained, _ = tandem_train(a, start_path, data, 1, out)
        if losses is None:
            print(f"{family}: FAIL: step {k + 1} alone: {trained}")
            return False
        chained_run_losses.append(losses[0])
        loss32, ref32 = torch_step(start, torch.float32)
        loss64, ref64 = torch_step(start, torch.float64)
        lines.append(f"  step {k + 1}: loss tandem {losses[0]:.4f} (in the {a.steps}-step run "
                     f"{run_losses[k]:.4f})  torch {loss32:.6f}  torch f64 {loss64:.6f}")
        # The losses likewise, at the 4 decimals tandem train prints.
        loss_score = max(loss_score, max(0.0, abs(losses[0] - loss64) - 5e-5) /
                         max(a.tolerance * abs(loss64), a.noise * abs(loss32 - loss64), 1e-30))
        for onnx_name, (torch_name, _) in which.items():
            got, want = trained[onnx_name], ref64[onnx_name]
            l2 = lambda v: float(np.sqrt(np.sum(np.square(v, dtype=np.float64))))
            moved = l2(want - start[onnx_name])
            ulps = 4 * float(np.spacing(np.float32(np.abs(want).max()))) * np.sqrt(want.size)
            if np.array_equal(got, start[onnx_name]) and moved > ulps:
                untrained.add(torch_name)
                continue
            compared += k == 0
            diff, torch_diff = l2(got - want), l2(ref32[onnx_name] - want)
            score = max(0.0, diff - ulps) / max(a.tolerance * moved, a.noise * torch_diff, 1e-30)
            # How much of the distance one element holds: all of it where a mask flipped.
            share = float(np.abs(got - want).max()) ** 2 / max(diff * diff, 1e-300)
            scores.append((score, f"step {k + 1} {torch_name}: update {moved:.3g}, tandem {diff:.3g} "
                                  f"({share:.0%} in one element) and torch f32 {torch_diff:.3g} from "
                                  f"torch f64 (L2)"))
            if score > worst:
                worst, worst_at = scores[-1]
        start, start_path = trained, out
    # The STEPS-step run against the chained runs: each of its steps starts from what its last
    # step wrote, so its losses are theirs unless a step lost that (a parameter, a running
    # statistic). Its parameters are compared for the record only: each epoch reshuffles the
    # batch, and the summation order's rounding, amplified as above, moved MobileNetV2's at
    # batch 4, lr 0.05 by 1.2-1.3 of the last update's largest element whichever seeds were
    # compared (1 and 2, or either and the chained runs'), while the losses agreed to 1e-4.
    chained_losses = max(abs(r - c) / max(2e-4, 1e-3 * abs(c)) for r, c in zip(run_losses, chained_run_losses))

    def chained_gap(o):  # each element's gap less 4 ulps of its value, over the largest update
        gap = np.maximum(np.abs(run_trained[o] - start[o]) - 4 * np.spacing(np.abs(start[o])), 0)
        return float(gap.max()) / max(float(np.abs(start[o] - inits[o]).max()), 1e-30)
    chained = max(chained_gap(o) for o in which if o not in untrained)
    ok = worst <= 1 and loss_score <= 1 and chained_losses <= 1
    print(f"{family}: {'PASS' if ok else 'FAIL'}: {compared} tensors compared (parameters and "
          f"running statistics; torch has {len(params)} parameters), tandem train {seconds:.1f} s")
    for line in lines:
        print(line)
    print(f"  worst distance from torch f64 over the allowed (<= 1 passes): {worst:.3g} ({worst_at}); "
          f"losses {loss_score:.3g}; the {a.steps}-step run's losses from the chained steps' "
          f"{chained_losses:.3g} (<= 1 passes; 1e-3 of the loss or 2e-4), its parameters {chained:.3g} "
          f"of the last update")
    failing = sorted((t for t in scores if t[0] > 1), reverse=True)
    if len(failing) > 1:
        print(f"  {len(failing)} tensors fail; the next: " +
              "; ".join(f"{sc:.3g} ({at})" for sc, at in failing[1:6]))
    if untrained:
        print(f"  torch parameters Tandem left as they were ({len(untrained)}, see tandem train's note; "
              f"--all-params trains them): " + ", ".join(sorted(untrained)[:6]) +
              (" ..." if len(untrained) > 6 else ""))
    return ok


def main():
    warnings.filterwarnings("ignore")  # torch.onnx's export warnings, one per module
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="*", help="default: all (%s)" % " ".join(FAMILIES))
    ap.add_argument("--tandem", default=os.path.join(here, "..", "build", "tools", "tandem"))
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=64, help="image height and width (a multiple of 16)")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", metavar="DIR",
                    help="write the exported models, data and trained models here and keep them")
    ap.add_argument("--all-params", action="store_true", help="tandem train --all-params")
    ap.add_argument("--tolerance", type=float, default=5e-2,
                    help="allowed distance from torch's float64 step, relative to the update (L2 norms)")
    ap.add_argument("--noise", type=float, default=4,
                    help="or this many times torch float32's own distance from its float64 step")
    a = ap.parse_args()
    for f in a.families:
        if f not in FAMILIES:
            ap.error(f"unknown family '{f}' (known: {' '.join(FAMILIES)})")
    if a.size % 16 or a.size < 32:
        ap.error("--size must be a multiple of 16, at least 32")
    print(f"SGD lr {a.lr}, batch {a.batch} of [3, {a.size}, {a.size}], {a.steps} steps, opset {a.opset}, "
          f"torch {torch.__version__} on {torch.get_num_threads()} threads")
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        work = a.keep or tmp
        os.makedirs(work, exist_ok=True)
        for f in a.families or list(FAMILIES):
            if not check(f, a, work):
                failed.append(f)
    print(f"{len(a.families or FAMILIES) - len(failed)} of {len(a.families or FAMILIES)} families pass"
          + (": failed " + " ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

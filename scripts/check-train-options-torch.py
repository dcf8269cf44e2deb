#!/usr/bin/python3
"""Checks `tandem train`'s RMSprop, Adagrad, label smoothing, class weights, --freeze and --params
against PyTorch itself: torch.optim.RMSprop, torch.optim.Adagrad, cross_entropy(label_smoothing=...,
weight=...) and requires_grad=False (the unit tests,
tests/unit/compiler/training_optimizer_test.cpp, check them against references written there;
this runs the real thing). A Linear-ReLU-Linear classifier (20 -> 32 -> 5) with seed 0 is
exported without constant folding, trained STEPS full-batch steps on 16 random samples by
`tandem train` (f32, lr 1e-2) and by the torch model in float64 from the same initial values,
for each configuration below; every parameter must end within --tolerance of its update (max
|tandem - torch| over max |torch's update|), and a frozen one (requires_grad=False in torch)
must come back bit for bit as it was. The ignore-index case labels every third sample -100. Exits 1 on a failure, 77 without torch. Needs Debian's python3-torch and python3-onnx.

  rmsprop; rmsprop --momentum 0.9 --centered --alpha 0.9 --weight-decay 0.1; adagrad;
  adagrad --lr-decay 0.3 --initial-accumulator 0.2 --weight-decay 0.1;
  sgd --label-smoothing 0.1; adam --label-smoothing 0.2 --ignore-index -100;
  sgd --class-weights 1,2,0.5,3,0 (alone, with --label-smoothing 0.3, and with
  --label-smoothing 0.1 --ignore-index -100); sgd --momentum 0.9 --weight-decay 0.1 --freeze
  '^0\\.' (the first Linear frozen); adam --params '^2\\.weight$' (the last Linear's weight alone)

Usage: scripts/check-train-options-torch.py [--steps 4] [--tolerance 1e-3] [--tandem build/tools/tandem]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import warnings

try:
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper
except ImportError as e:
    print(f"SKIP: {e.name} is missing: apt-get install python3-torch python3-onnx")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
WEIGHTS = torch.tensor([1, 2, 0.5, 3, 0], dtype=torch.float64)
# (optimizer, tandem train flags, torch.optim keyword arguments, cross_entropy keyword arguments[,
# the regex of the parameters torch trains (the others requires_grad=False); all when absent])
CASES = [
    ("rmsprop", [], {}, {}),
    ("rmsprop", ["--momentum", "0.9", "--centered", "--alpha", "0.9", "--weight-decay", "0.1"],
     dict(momentum=0.9, centered=True, alpha=0.9, weight_decay=0.1), {}),
    ("adagrad", [], {}, {}),
    ("adagrad", ["--lr-decay", "0.3", "--initial-accumulator", "0.2", "--weight-decay", "0.1"],
     dict(lr_decay=0.3, initial_accumulator_value=0.2, weight_decay=0.1), {}),
    ("sgd", ["--label-smoothing", "0.1"], {}, dict(label_smoothing=0.1)),
    ("adam", ["--label-smoothing", "0.2", "--ignore-index", "-100"], {},
     dict(label_smoothing=0.2, ignore_index=-100)),
    ("sgd", ["--class-weights", "1,2,0.5,3,0"], {}, dict(weight=WEIGHTS)),
    ("sgd", ["--class-weights", "1,2,0.5,3,0", "--label-smoothing", "0.3"], {},
     dict(weight=WEIGHTS, label_smoothing=0.3)),
    ("sgd", ["--class-weights", "1,2,0.5,3,0", "--label-smoothing", "0.1", "--ignore-index", "-100"], {},
     dict(weight=WEIGHTS, label_smoothing=0.1, ignore_index=-100)),
    ("sgd", ["--momentum", "0.9", "--weight-decay", "0.1", "--freeze", r"^0\."],
     dict(momentum=0.9, weight_decay=0.1), {}, r"^2\."),
    ("adam", ["--params", r"^2\.weight$"], {}, {}, r"^2\.weight$"),
]
OPTIMIZERS = {"rmsprop": torch.optim.RMSprop, "adagrad": torch.optim.Adagrad, "sgd": torch.optim.SGD,
              "adam": torch.optim.Adam}


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))


def main():
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--tolerance", type=float, default=1e-3)
    ap.add_argument("--tandem", default=os.path.join(here, "..", "build", "tools", "tandem"))
    a = ap.parse_args()
    torch.manual_seed(0)
    model = mlp()
    x, y = torch.randn(16, 20), torch.randint(0, 5, (16,))
    y_ignored = y.clone()
    y_ignored[::3] = -100
    failed = 0
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "mlp.onnx")
        torch.onnx.export(model, (x,), path, input_names=["x"], dynamic_axes={"x": {0: "N"}},
                          do_constant_folding=False)
        for tag, labels in (("data", y), ("data-ignored", y_ignored)):
            for split in ("train", "test"):
                d = os.path.join(work, tag, split, "test_data_set_0")
                os.makedirs(d)
                for k, (v, name) in enumerate(((x.numpy(), "x"), (labels.numpy(), "y"))):
                    with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
                        f.write(numpy_helper.from_array(v, name).SerializeToString())
        inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
        for opt, flags, kwargs, loss_kwargs, *trained in CASES:
            trains = re.compile(trained[0] if trained else "")
            ignored = "ignore_index" in loss_kwargs
            labels = y_ignored if ignored else y
            out = os.path.join(work, "trained.onnx")
            data = os.path.join(work, "data-ignored" if ignored else "data")
            r = subprocess.run([a.tandem, "train", path, "--data", "onnx:" + data, "--lr", "1e-2",
                                "--batch", "16", "--epochs", str(a.steps), "--optimizer", opt,
                                "--threads", "1", "--no-progress", "-o", out] + flags,
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL: {opt} {' '.join(flags)}: tandem train: {(r.stdout + r.stderr).strip()[-400:]}")
                failed += 1
                continue
            got = {t.name: numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}
            ref = mlp().double()
            ref.load_state_dict({k: torch.from_numpy(inits[k]).double() for k in ref.state_dict()})
            for k, p in ref.named_parameters():
                p.requires_grad_(bool(trains.search(k)))
            optim = OPTIMIZERS[opt]([p for p in ref.parameters() if p.requires_grad], lr=1e-2, **kwargs)
            for _ in range(a.steps):
                optim.zero_grad()
                torch.nn.functional.cross_entropy(ref(x.double()), labels, **loss_kwargs).backward()
                optim.step()
            worst, at = 0.0, ""
            for k, v in ref.state_dict().items():
                want = v.numpy()
                if not trains.search(k):  # frozen: the initializer as it was
                    if not np.array_equal(got[k], inits[k]):
                        worst, at = float("inf"), k + " (frozen, changed)"
                    continue
                gap = float(np.abs(got[k] - want).max()) / max(float(np.abs(want - inits[k]).max()), 1e-30)
                if gap > worst:
                    worst, at = gap, k
            ok = worst <= a.tolerance
            failed += not ok
            print(f"{'ok' if ok else 'FAIL'}: {opt} {' '.join(flags)}: {a.steps} steps, worst "
                  f"|tandem - torch f64| / |update| {worst:.2e} ({at})")
    print(f"torch {torch.__version__}: {len(CASES) - failed} of {len(CASES)} pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

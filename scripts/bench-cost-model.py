#!/usr/bin/env python3
"""How well the placer's cost model predicts this host: per model and batch, the median and worst
|estimated - measured| / measured over the CPU steps of the plan (the placement log's per-op
estimates, summed over each fused group, against `tandem-run --step-times`, median of several
profiled runs). Not a test: takes a minute or more per model.

usage: scripts/bench-cost-model.py [--build build] [--threads 1] [--runs 5] [--warmup 20]
                                   [--profile P.json] [--batches 1,32] [--no-timing-cache] MODEL_DIR...
A MODEL_DIR holds model.onnx (and test_data_set_K with its inputs, used when present so integer
inputs are real; random inputs otherwise). --profile passes a `tandem calibrate` profile to the
compiler; the kernel timing cache (`tandem tune`) is used as the compiler finds it, unless
--no-timing-cache (the compile then runs with TANDEM_TUNING=off: model figures only; the runs
still choose their kernels by measurement).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(" ".join(cmd) + " failed:\n" + p.stderr[-2000:])
    return p.stdout


def step_estimates(log):
    """Estimated seconds per step name: an op's own, or summed into its fused group's step."""
    est = {}
    for op in log["ops"]:
        if op.get("device") != "cpu" and not str(op.get("device", "")).startswith("cpu"):
            continue
        sec = op.get("estimated_seconds", {}).get(op["device"])
        if sec is None:
            continue
        fused = op.get("fused_in")
        step = fused.rsplit(" [", 1)[0] if fused else op["name"]
        est[step] = est.get(step, 0.0) + sec
    return est


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5, help="profiled runs per plan (median per step)")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--warmup", type=int, default=20, help="untimed runs before each profiled run")
    ap.add_argument("--profile", default="")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every step")
    ap.add_argument("--no-timing-cache", action="store_true",
                    help="the compiler ignores the kernel timing cache (TANDEM_TUNING=off)")
    a = ap.parse_args()
    tandem = os.path.join(a.build, "tools", "tandem")
    # Runs before each profiled one, so the steps are timed warm, as `tandem tune` times them
    # and as repeated runs meet them: after 3 runs mnist_cnn's 9216x128 Gemm at batch 1 still
    # read part of its 4.7 MB of weights from DRAM (74 us; 47 us after 50 runs).
    warm = ["--warmup", str(a.warmup), "--iterations", "3"]
    tandem_run = os.path.join(a.build, "tools", "tandem-run")
    isa = "?"
    for line in run([tandem, "devices"]).splitlines():
        if line.strip().startswith("isa"):
            isa = line.split()[-1]
    print(f"host: {cpu_name()}; ISA in use {isa}; threads {a.threads}; "
          f"{a.runs} profiled runs per plan; profile {a.profile or 'built-in'}; "
          f"timing cache {'ignored' if a.no_timing_cache else 'used'}")
    # The compiler prices the live CPU for OMP_NUM_THREADS threads, the count the runs use.
    compile_env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    if a.no_timing_cache:
        compile_env["TANDEM_TUNING"] = "off"
    print(f"{'model':20} {'batch':>5} {'steps':>5} {'median err':>10} {'worst err':>9}  worst step")
    all_errs = []
    work = tempfile.mkdtemp()
    for d in a.models:
        name = os.path.basename(d.rstrip("/"))
        for b in [int(x) for x in a.batches.split(",")]:
            plan = os.path.join(work, f"{name}.b{b}.tplan")
            cmd = [tandem, "compile", os.path.join(d, "model.onnx"), "-o", plan, "--dim", f"N={b}",
                   "--log-placement=json", "--target", "cpu"]
            if a.profile:
                cmd += ["--profile", a.profile]
            try:
                log = json.loads(run(cmd, compile_env))
            except (RuntimeError, json.JSONDecodeError) as e:
                print(f"{name:20} {b:>5}  compile failed: {str(e)[:200]}")
                continue
            est = step_estimates(log)
            ds = os.path.join(d, "test_data_set_" + ("0" if b == 1 else "1"))
            inputs = ["--inputs", ds] if os.path.isfile(os.path.join(ds, "input_0.pb")) else ["--random"]
            times = {}
            try:
                for _ in range(a.runs):
                    rep = json.loads(run([tandem_run, "run", plan, *inputs, "--step-times", "--json",
                                          "--threads", str(a.threads), *warm]))
                    for s in rep["steps"]:
                        if s["device"].startswith("cpu"):
                            times.setdefault(s["name"], []).append(s["ms"] * 1e-3)
            except RuntimeError as e:
                # A data set of another batch: fall back to random inputs of the plan's types.
                if inputs[0] == "--inputs":
                    times = {}
                    for _ in range(a.runs):
                        rep = json.loads(run([tandem_run, "run", plan, "--random", "--step-times",
                                              "--json", "--threads", str(a.threads), *warm]))
                        for s in rep["steps"]:
                            if s["device"].startswith("cpu"):
                                times.setdefault(s["name"], []).append(s["ms"] * 1e-3)
                else:
                    raise e
            errs = []
            worst = (0.0, "")
            for step, ts in times.items():
                m = statistics.median(ts)
                if step not in est or m <= 0:
                    continue
                e = abs(est[step] - m) / m
                errs.append(e)
                if a.verbose:
                    print(f"    {step:50} est {est[step]*1e6:10.1f} us  measured {m*1e6:10.1f} us  {e:6.0%}")
                if e > worst[0]:
                    worst = (e, f"{step} est {est[step]*1e6:.1f} us, measured {m*1e6:.1f} us")
            if not errs:
                print(f"{name:20} {b:>5}  no CPU step with an estimate")
                continue
            all_errs += errs
            print(f"{name:20} {b:>5} {len(errs):>5} {statistics.median(errs):>9.0%} {worst[0]:>9.0%}  {worst[1]}")
    if all_errs:
        print(f"all steps: {len(all_errs)}, median error {statistics.median(all_errs):.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

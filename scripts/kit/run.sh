#!/usr/bin/env bash
# Runs a GPU kit (made by scripts/gpu-kit.sh) on a machine with an NVIDIA GPU and no build tools:
# every gpu test, compute-sanitizer memcheck and racecheck over them, the GPU examples, every plan
# with tandem-run (--expect at batch 1; a median-latency table model x batch x policy), and
# tandem-run calibrate. Logs and one summary.json go to $OUT (default ./kit-out).
#   bash kit/run.sh [--budget S] [--no-sanitizers] [--no-tests] [--no-plans] [--no-calibrate] [--no-bench]
# --budget S (or KIT_BUDGET): start no check once S seconds have passed (nor one with under
# KIT_MIN_CHECK, default 5, seconds left; a running one is cut at the budget, a timeout); the
# checks run in priority order (libraries, gpu tests, the plans checked against references made
# where the kit was built, the batch-1 model plans, memcheck, examples, timing plans, PyTorch
# peers, NVRTC loads, racecheck, calibrate), and those not started are listed as skipped.
# Exit status: 0 every check passed, 1 one failed or timed out (a gpu test that skips for want
# of a GPU fails too), 3 none failed but the budget skipped some.
# Env: KIT_WORK (where kit.tar.xz unpacks, default /tmp/tandem-kit), KIT_TIMEOUT (seconds per
# command, default 240), KIT_ITERATIONS (timed runs per plan, default 20 at batch 1, 10 above).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/kit-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
sanitizers=1 tests=1 plans=1 calibrate=1 bench=1 budget=${KIT_BUDGET:-0}
while [ $# -gt 0 ]; do
  a=$1
  case $a in
    --budget) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] ||
                { echo "run.sh: --budget needs a whole number of seconds" >&2; exit 2; }
              budget=$2; shift ;;
    --no-sanitizers) sanitizers=0 ;; --no-tests) tests=0; sanitizers=0 ;;
    --no-plans) plans=0 ;; --no-calibrate) calibrate=0 ;; --no-bench) bench=0 ;;
    *) echo "run.sh: unknown option $a" >&2; exit 2 ;;
  esac
  shift
done
[[ $budget =~ ^[0-9]+$ ]] || { echo "run.sh: KIT_BUDGET must be a whole number of seconds" >&2; exit 2; }
timeout_s=${KIT_TIMEOUT:-240}

# 1. The payload: packed (kit.tar.xz, to stay under the carry limit) or already unpacked.
root=$here
if [ -f "$here/kit.tar.xz" ]; then
  root=${KIT_WORK:-/tmp/tandem-kit}
  rm -rf "$root" && mkdir -p "$root" && tar -xJf "$here/kit.tar.xz" -C "$root" ||
    { echo "run.sh: cannot unpack $here/kit.tar.xz" >&2; exit 1; }
fi
[ -x "$root/bin/tandem-run" ] || { echo "run.sh: no bin/tandem-run in $root" >&2; exit 1; }

# 2. CUDA libraries of this machine (the kit carries none of them): the toolkit's, then the
# PyTorch venv's wheels (cuDNN, cuBLAS, NVRTC).
cuda=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
         /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib \
         /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib; do
  [ -d "$d" ] && cuda="$cuda:$d"
done
export LD_LIBRARY_PATH="${cuda#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The kit's libstdc++/libgcc_s only when this machine's are older than the build machine's.
if ! "$root/bin/tandem-run" --help >/dev/null 2>&1; then
  export LD_LIBRARY_PATH="$root/lib/fallback:$LD_LIBRARY_PATH"
fi
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" > "$OUT/env.log"
nvidia-smi >> "$OUT/env.log" 2>&1
"$root/bin/tandem-run" --help >/dev/null 2>&1 || true

results="$OUT/checks.tsv"
: > "$results"
failed=0 skipped=0 t_start=0  # the budget counts from the start, unpacking included
# The time a command may take: KIT_TIMEOUT, or what is left of --budget if less; empty once the
# budget has under KIT_MIN_CHECK seconds (default 5) left, and the check is skipped.
command_timeout() {
  [ "$budget" -gt 0 ] || { echo "$timeout_s"; return; }
  local left=$((budget - (SECONDS - t_start)))
  [ $left -ge "${KIT_MIN_CHECK:-5}" ] || return 0
  [ $left -lt "$timeout_s" ] && echo $left || echo "$timeout_s"
}
# check NAME LOG -- cmd...: runs with the timeout, records pass/fail/timeout (or skipped, past
# the budget) and the seconds.
check() {
  local name=$1 log=$2; shift 3
  local t0=$SECONDS status t
  t=$(command_timeout)
  if [ -z "$t" ]; then
    skipped=$((skipped + 1))
    printf '%s\tskipped\t0\t\n' "$name" >> "$results"
    return 0
  fi
  timeout "$t" "$@" > "$log" 2>&1
  local code=$?
  if [ $code = 0 ]; then status=pass; elif [ $code = 124 ]; then status=timeout; else status=fail; fi
  # A gpu test that found no GPU skipped every case: on a kit machine that is a failure.
  if [ $status = pass ] && grep -q "SKIPPED: no CUDA device" "$log"; then status=fail; fi
  [ $status = pass ] || failed=$((failed + 1))
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - t0))" "${log#$OUT/}" >> "$results"
  printf '%-60s %s (%ss)\n' "$name" "$status" "$((SECONDS - t0))"
}
# measure NAME LOG -- cmd...: as check, but recorded in measures.tsv and never failing the kit.
measures="$OUT/measures.tsv"
: > "$measures"
measure() {
  local name=$1 log=$2; shift 3
  local t0=$SECONDS status t
  t=$(command_timeout)
  if [ -z "$t" ]; then
    skipped=$((skipped + 1))
    printf '%s\tskipped\t0\t\n' "$name" >> "$measures"
    return 0
  fi
  timeout "$t" "$@" > "$log" 2>&1
  local code=$?
  if [ $code = 0 ]; then status=ok; elif [ $code = 124 ]; then status=timeout; else status=error; fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - t0))" "${log#$OUT/}" >> "$measures"
  printf '%-60s %s (%ss, measurement)\n' "$name" "$status" "$((SECONDS - t0))"
}
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
mkdir -p "$OUT/ldd" "$OUT/tests" "$OUT/bench" "$OUT/plans" "$OUT/nvrtc" "$OUT/peers"

# 3. Every binary resolves its libraries (the kit's, glibc, this machine's CUDA).
ldd_checks() {
  for b in "$root"/bin/* "$root"/bin/tests/* "$root"/bin/examples/*; do
    [ -f "$b" ] || continue
    check "ldd $(basename "$b")" "$OUT/ldd/$(basename "$b").log" -- \
      bash -c 'ldd "$1"; ! ldd "$1" | grep -q "not found"' _ "$b"
  done
}

# 4. The gpu tests; under compute-sanitizer TOOL (memcheck: out-of-bounds and misaligned
# accesses; racecheck: shared-memory hazards) when given one.
gpu_tests() {
  local tool=${1:-}
  for t in "$root"/bin/tests/*; do
    [ -x "$t" ] || continue
    n=$(basename "$t")
    if [ -z "$tool" ]; then check "test $n" "$OUT/tests/$n.log" -- "$t"
    else check "$tool $n" "$OUT/tests/$n.$tool.log" -- "$sanitizer" --tool "$tool" --error-exitcode 99 "$t"
    fi
  done
}

# 4b. Plans compiled and checked where the kit was made.
kit_plan_tests() {
  # The CUDA fusion test (its compile half ran where the kit was made): the cuda:0 plan against
  # the CPU-only plan's output computed there, twice, and no step may fall back to the CPU.
  f=$root/bench/cuda_fusion
  if [ -f "$f/gpu.tplan" ]; then
    check "test cuda_fusion_gpu_test (plan)" "$OUT/tests/cuda_fusion.json" -- bash -c \
      'out=$("$1" run "$2/gpu.tplan" --inputs "$2/data" --expect "$2/data" --atol 1e-4 --rtol 1e-4 \
             --iterations 2 --json) || { echo "$out"; exit 1; }
       echo "$out"; ! grep -q "is not available" <<<"$out"' _ "$root/bin/tandem-run" "$f"
  fi
  # A training step (resident variables) cross-compiled for cpu,cuda:0=h100: 3 runs on one
  # batch must give the loss the CPU plan gave at its 3rd step (computed where the kit was made).
  f=$root/bench/training_step
  if [ -f "$f/gpu.tplan" ]; then
    check "test training step (plan)" "$OUT/tests/training_step.json" -- bash -c \
      'out=$("$1" run "$2/gpu.tplan" --inputs "$2/data" --expect "$2/data" --atol 1e-4 --rtol 1e-4 \
             --iterations 3 --warmup 0 --json) || { echo "$out"; exit 1; }
       echo "$out"; ! grep -q "is not available" <<<"$out"' _ "$root/bin/tandem-run" "$f"
  fi
}

# 4c. Examples; a benchmark's runtime-only build (NAME_run) times the plans in bench/NAME.
examples() {
  for e in "$root"/bin/examples/*; do
    [ -x "$e" ] || continue
    n=$(basename "$e")
    if [ -d "$root/bench/${n%_run}" ]; then
      [ $bench = 1 ] || continue
      check "example $n" "$OUT/tests/$n.log" -- "$e" --plans "$root/bench/${n%_run}" --json "$OUT/bench/${n%_run}.json"
    else
      check "example $n" "$OUT/tests/$n.log" -- "$e"
    fi
  done
}

# 5. Plans (plans/MODEL/bBATCH-POLICY.tplan; MODEL/data holds test_data_set_0): WHICH=1, the
# batch-1 plans against the model's reference outputs; WHICH=rest, larger batches on random
# inputs, for timing.
model_plans() {
  for p in "$root"/plans/*/*.tplan; do
    [ -f "$p" ] || continue
    m=$(basename "$(dirname "$p")") f=$(basename "$p" .tplan)
    b=${f%%-*}; b=${b#b}
    if [ "$b" = 1 ] && [ -d "$(dirname "$p")/data" ]; then
      [ "$1" = 1 ] || continue
      args=(--inputs "$(dirname "$p")/data" --expect "$(dirname "$p")/data" --iterations "${KIT_ITERATIONS:-20}")
    else
      [ "$1" = rest ] || continue
      args=(--random --iterations "${KIT_ITERATIONS:-10}")
    fi
    # stdout is the JSON report; notes and errors go to a .stderr beside it.
    check "plan $m/$f" "$OUT/plans/$m.$f.json" -- bash -c 'e=$1; shift; "$@" 2> "$e"' _ \
      "$OUT/plans/$m.$f.stderr" "$root/bin/tandem-run" run "$p" "${args[@]}" --json
  done
}

# 5b. NVRTC: each model's all-GPU batch-1 plan loaded with an empty kernel cache (cold: NVRTC
# compiles the plan's generated kernels) and again with the cache that load filled (cached: the
# image is read back), 3 times each; tandem-run's load_ms (CUDA context, weights upload and
# cuBLASLt/cuDNN setup are in both, so cold - cached is the compile). CPU kernel tuning is off.
nvrtc_loads() {
  for p in "$root"/plans/*/b1-gpu.tplan "$root"/bench/cuda_fusion/gpu.tplan; do
    [ -f "$p" ] || continue
    m=$(basename "$(dirname "$p")")
    for i in 1 2 3; do
      cache=$(mktemp -d)
      for phase in cold cached; do
        measure "nvrtc $m $phase $i" "$OUT/nvrtc/$m.$phase.$i.json" -- env TANDEM_NVRTC_CACHE="$cache" \
          TANDEM_TUNING=off bash -c '"$@" 2> /dev/null' _ "$root/bin/tandem-run" run "$p" --random --json
      done
      ls "$cache" > "$OUT/nvrtc/$m.cache.$i.txt"
      rm -rf "$cache"
    done
  done
}

# 5c. PyTorch eager peers (FP32, TF32 off; torch_peers.py says what is timed on each side), with
# the same ONNX weights read from the kit's weights files, and Tandem's cost and gpu plans timed
# with as many runs right after.
py=${KIT_TORCH_PYTHON:-/opt/torch/.venv/bin/python}
torch_peers() {
  local runs=${KIT_PEER_RUNS:-30}
  for mb in resnet18:32 mnist_cnn:128; do
    m=${mb%:*} b=${mb#*:} d=$root/plans/${mb%:*}
    [ -f "$d/torch.json" ] || continue
    if [ ! -x "$py" ]; then echo "skip: PyTorch peer of $m: no $py (KIT_TORCH_PYTHON)"; continue; fi
    measure "torch $m b$b" "$OUT/peers/$m.b$b.torch.json" -- bash -c 'e=$1; shift; "$@" 2> "$e"' _ \
      "$OUT/peers/$m.b$b.torch.stderr" "$py" "$root/torch_peers.py" run --model "$m" --index "$d/torch.json" \
      --weights "$d/$m.weights" --data "$d/data" --batch "$b" --runs "$runs"
    for pol in cost gpu; do
      [ -f "$d/b$b-$pol.tplan" ] || continue
      measure "tandem $m b$b $pol" "$OUT/peers/$m.b$b.$pol.json" -- bash -c 'e=$1; shift; "$@" 2> "$e"' _ \
        "$OUT/peers/$m.b$b.$pol.stderr" "$root/bin/tandem-run" run "$d/b$b-$pol.tplan" --random \
        --iterations "$runs" --warmup 10 --json
    done
  done
}

# In priority order, so that a --budget keeps what matters most: libraries, the gpu tests, the
# plans checked against references made here, memcheck, the examples and benchmarks, the timing
# plans, the PyTorch peers, NVRTC loads, racecheck, and the GPU half of calibration last.
ldd_checks
if [ $tests = 1 ]; then gpu_tests; kit_plan_tests; fi
[ $plans = 1 ] && model_plans 1
[ $sanitizers = 1 ] && gpu_tests memcheck
[ $tests = 1 ] && examples
[ $plans = 1 ] && model_plans rest
[ $bench = 1 ] && torch_peers
[ $bench = 1 ] && nvrtc_loads
[ $sanitizers = 1 ] && gpu_tests racecheck
[ $calibrate = 1 ] && check "calibrate" "$OUT/calibrate.log" -- "$root/bin/tandem-run" calibrate -o "$OUT/gpu-profile.json" --seconds 10

# 7. One summary: every check, and the latency table (median ms) model x batch x policy.
python3 - "$OUT" "$budget" "$SECONDS" <<'PY'
import json, os, sys
out = sys.argv[1]
checks, latency = [], {}
for line in open(os.path.join(out, "checks.tsv")):
    name, status, secs, log = line.rstrip("\n").split("\t")
    checks.append({"name": name, "status": status, "seconds": int(secs), "log": log})
    if name.startswith("plan ") and status in ("pass", "fail"):
        try:
            j = json.load(open(os.path.join(out, log)))
        except Exception:
            continue
        model, f = name[5:].split("/")
        batch, policy = f.split("-", 1)
        latency.setdefault(model, {}).setdefault(batch[1:], {})[policy] = {
            "median_ms": j["latency_ms"]["median"], "p90_ms": j["latency_ms"]["p90"],
            "pass": j.get("pass"), "devices": {d["name"]: d["peak_bytes"] for d in j["devices"]}}
failed = [c["name"] for c in checks if c["status"] not in ("pass", "skipped")]
skipped = [c["name"] for c in checks if c["status"] == "skipped"]

def load(rel):
    try:
        return json.load(open(os.path.join(out, rel)))
    except Exception:
        return None

def median(v):
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2 if v else None

# Measurements against the GPU issue's bars: reported, never failing the kit.
targets, summary = [], {"checks": checks, "failed": failed, "skipped": skipped,
                        "budget_s": int(sys.argv[2]), "seconds": int(sys.argv[3]), "latency": latency}
def target(name, value, bar, higher_is_better):
    ok = value is not None and (value >= bar if higher_is_better else value <= bar)
    targets.append({"name": name, "value": value, "bar": ("≥ " if higher_is_better else "≤ ") + str(bar),
                    "status": "pass" if ok else "fail"})
g = load("bench/gpu_gemm_vs_cublas.json")
if g:
    summary["matmul_vs_cublaslt"] = {str(r["n"]): r["vs_cublaslt"] for r in g["sizes"]}
    summary["matmul_vs_cublas"] = {str(r["n"]): r["vs_cublas"] for r in g["sizes"]}
    for r in g["sizes"]:
        target("matmul n=%d vs cuBLASLt (throughput fraction)" % r["n"], r["vs_cublaslt"], 0.90, True)
e = load("bench/gpu_elementwise_bandwidth.json")
if e:
    summary["elementwise_vs_d2d"] = e["vs_d2d"]
    summary["elementwise"] = e
    target("fused element-wise chain vs D2D copy bandwidth", e["vs_d2d"], 0.80, True)
nvrtc = {}
for f in sorted(os.listdir(os.path.join(out, "nvrtc"))) if os.path.isdir(os.path.join(out, "nvrtc")) else []:
    parts = f.split(".")
    if f.endswith(".json") and len(parts) == 4:
        j = load("nvrtc/" + f)
        if j and "load_ms" in j:
            nvrtc.setdefault(parts[0], {}).setdefault(parts[1], []).append(j["load_ms"])
summary["nvrtc"] = {m: {"cold_ms": median(v.get("cold", [])), "cached_ms": median(v.get("cached", [])),
                        "compile_ms": (median(v["cold"]) - median(v["cached"])) if v.get("cold") and v.get("cached") else None,
                        "loads": v,
                        # 0: the cold load compiled nothing (no generated kernel, or no GPU)
                        "cache_files": len(open(os.path.join(out, "nvrtc", m + ".cache.1.txt")).read().split())}
                   for m, v in nvrtc.items()}
torch_r = {}
for mb in ("resnet18.b32", "mnist_cnn.b128"):
    t = load("peers/%s.torch.json" % mb)
    if not t:
        continue
    m = mb.split(".")[0]
    # The like-for-like torch network: the ONNX graph (ResNet-18's BatchNorm folded, as exported).
    peer = t["variants"].get("folded") or t["variants"].get("plain")
    r = {"batch": t["batch"], "torch_with_copies_ms": peer["with_copies_ms"], "torch_resident_ms": peer["resident_ms"],
         "torch_weights_check": t["pass"], "torch": t["torch"], "variants": t["variants"]}
    for pol in ("cost", "gpu"):
        j = load("peers/%s.%s.json" % (mb, pol))
        if j:
            r["tandem_%s_ms" % pol] = j["latency_ms"]["median"]
            r["ratio_%s" % pol] = j["latency_ms"]["median"] / peer["with_copies_ms"]
    torch_r[m] = r
    for pol in ("cost", "gpu"):
        if "ratio_" + pol in r:
            target("%s batch %d: tandem --placement %s / torch eager (with copies)" % (m, t["batch"], pol),
                   r["ratio_" + pol], 1.0, False)
summary["torch"] = torch_r
summary["targets"] = targets
summary["measures"] = [dict(zip(("name", "status", "seconds", "log"), l.rstrip("\n").split("\t")))
                       for l in open(os.path.join(out, "measures.tsv"))]
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
policies = sorted({p for m in latency.values() for b in m.values() for p in b})
with open(os.path.join(out, "latency.txt"), "w") as t:
    t.write("median latency, ms (tandem-run; PASS/FAIL = --expect at batch 1)\n")
    t.write("%-10s %6s " % ("model", "batch") + "".join("%14s" % p for p in policies) + "\n")
    for m in sorted(latency):
        for b in sorted(latency[m], key=int):
            row = latency[m][b]
            cell = lambda p: ("%.3f%s" % (row[p]["median_ms"], {True: " ok", False: " FAIL", None: ""}[row[p]["pass"]])) if p in row else "-"
            t.write("%-10s %6s " % (m, b) + "".join("%14s" % cell(p) for p in policies) + "\n")
print(open(os.path.join(out, "latency.txt")).read())
for t in targets:
    print("target %-70s %8.3f %s  %s" % (t["name"], t["value"] if t["value"] is not None else float("nan"), t["bar"], t["status"]))
for m, v in summary["nvrtc"].items():
    print("nvrtc %-12s load cold %s ms, cached %s ms (%d cached images)" % (m, v["cold_ms"], v["cached_ms"], v["cache_files"]))
skipped_measures = [m["name"] for m in summary["measures"] if m["status"] == "skipped"]
print("%d checks, %d not passed%s" % (len(checks), len(failed), (": " + ", ".join(failed)) if failed else ""))
if skipped or skipped_measures:
    print("budget %d s spent: %d checks and %d measurements not started: %s" % (
        summary["budget_s"], len(skipped), len(skipped_measures), ", ".join(skipped + skipped_measures)))
PY
[ $failed = 0 ] || exit 1
[ $skipped = 0 ] || exit 3

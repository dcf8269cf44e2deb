#!/usr/bin/env bash
# Runs a GPU kit (made by scripts/gpu-kit.sh) on a machine with an NVIDIA GPU and no build tools:
# every gpu test, compute-sanitizer memcheck and racecheck over them, the GPU examples, every plan
# with tandem-run (--expect at batch 1; a median-latency table model x batch x policy), and
# tandem-run calibrate. Logs and one summary.json go to $OUT (default ./kit-out). Exits 1 when
# any check fails (a gpu test that skips for want of a GPU fails too).
#   bash kit/run.sh [--no-sanitizers] [--no-tests] [--no-plans] [--no-calibrate]
# Env: KIT_WORK (where kit.tar.xz unpacks, default /tmp/tandem-kit), KIT_TIMEOUT (seconds per
# command, default 240), KIT_ITERATIONS (timed runs per plan, default 20 at batch 1, 10 above).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/kit-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
sanitizers=1 tests=1 plans=1 calibrate=1
for a in "$@"; do
  case $a in
    --no-sanitizers) sanitizers=0 ;; --no-tests) tests=0; sanitizers=0 ;;
    --no-plans) plans=0 ;; --no-calibrate) calibrate=0 ;;
    *) echo "run.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
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
failed=0
# check NAME LOG -- cmd...: runs with the timeout, records pass/fail/timeout and the seconds.
check() {
  local name=$1 log=$2; shift 3
  local t0=$SECONDS status
  timeout "$timeout_s" "$@" > "$log" 2>&1
  local code=$?
  if [ $code = 0 ]; then status=pass; elif [ $code = 124 ]; then status=timeout; else status=fail; fi
  # A gpu test that found no GPU skipped every case: on a kit machine that is a failure.
  if [ $status = pass ] && grep -q "SKIPPED: no CUDA device" "$log"; then status=fail; fi
  [ $status = pass ] || failed=$((failed + 1))
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - t0))" "${log#$OUT/}" >> "$results"
  printf '%-60s %s (%ss)\n' "$name" "$status" "$((SECONDS - t0))"
}

# 3. Every binary resolves its libraries (the kit's, glibc, this machine's CUDA).
mkdir -p "$OUT/ldd"
for b in "$root"/bin/* "$root"/bin/tests/* "$root"/bin/examples/*; do
  [ -f "$b" ] || continue
  check "ldd $(basename "$b")" "$OUT/ldd/$(basename "$b").log" -- \
    bash -c 'ldd "$1"; ! ldd "$1" | grep -q "not found"' _ "$b"
done

# 4. gpu tests, then under compute-sanitizer (memcheck: out-of-bounds and misaligned accesses;
# racecheck: shared-memory hazards), then the examples.
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ $tests = 1 ]; then
  mkdir -p "$OUT/tests"
  for t in "$root"/bin/tests/*; do
    [ -x "$t" ] || continue
    n=$(basename "$t")
    check "test $n" "$OUT/tests/$n.log" -- "$t"
    if [ $sanitizers = 1 ]; then
      check "memcheck $n" "$OUT/tests/$n.memcheck.log" -- "$sanitizer" --tool memcheck --error-exitcode 99 "$t"
      check "racecheck $n" "$OUT/tests/$n.racecheck.log" -- "$sanitizer" --tool racecheck --error-exitcode 99 "$t"
    fi
  done
  for e in "$root"/bin/examples/*; do
    [ -x "$e" ] || continue
    check "example $(basename "$e")" "$OUT/tests/$(basename "$e").log" -- "$e"
  done
fi

# 5. Every plan: batch 1 against the model's reference outputs, larger batches on random inputs
# for timing. Plans are plans/MODEL/bBATCH-POLICY.tplan; MODEL/data holds test_data_set_0.
if [ $plans = 1 ]; then
  mkdir -p "$OUT/plans"
  for p in "$root"/plans/*/*.tplan; do
    [ -f "$p" ] || continue
    m=$(basename "$(dirname "$p")") f=$(basename "$p" .tplan)
    b=${f%%-*}; b=${b#b}
    if [ "$b" = 1 ] && [ -d "$(dirname "$p")/data" ]; then
      args=(--inputs "$(dirname "$p")/data" --expect "$(dirname "$p")/data" --iterations "${KIT_ITERATIONS:-20}")
    else
      args=(--random --iterations "${KIT_ITERATIONS:-10}")
    fi
    # stdout is the JSON report; notes and errors go to a .stderr beside it.
    check "plan $m/$f" "$OUT/plans/$m.$f.json" -- bash -c 'e=$1; shift; "$@" 2> "$e"' _ \
      "$OUT/plans/$m.$f.stderr" "$root/bin/tandem-run" run "$p" "${args[@]}" --json
  done
fi

# 6. The GPU half of calibration.
if [ $calibrate = 1 ]; then
  check "calibrate" "$OUT/calibrate.log" -- "$root/bin/tandem-run" calibrate -o "$OUT/gpu-profile.json" --seconds 10
fi

# 7. One summary: every check, and the latency table (median ms) model x batch x policy.
python3 - "$OUT" <<'PY'
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
failed = [c["name"] for c in checks if c["status"] != "pass"]
json.dump({"checks": checks, "failed": failed, "latency": latency}, open(os.path.join(out, "summary.json"), "w"), indent=1)
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
print("%d checks, %d not passed%s" % (len(checks), len(failed), (": " + ", ".join(failed)) if failed else ""))
PY
[ $failed = 0 ]

#!/usr/bin/env bash
# e2e: tandem-run, the runtime-only runner: help and exit codes, no MLIR/LLVM in its ldd, and
# plans compiled by `tandem compile` run with --inputs/--expect (PASS, and FAIL at zero tolerance)
# and --json.
set -uo pipefail
tandem=$1 run=$2
models=${3:-}  # ../shared/models (the model checks are skipped when absent)
fails=0
check() {  # check EXPECTED_CODE REGEX -- cmd...
  local want=$1 regex=$2; shift 3
  out=$("$@" 2>&1); code=$?
  if [ "$code" != "$want" ] || ! grep -qE -- "$regex" <<<"$out"; then
    echo "FAIL: $* -> exit $code (want $want), output:"; echo "$out" | head -20; fails=$((fails+1))
  else
    echo "ok: $*"
  fi
}
check 0 "Usage|usage" -- "$run" --help
for c in run calibrate; do check 0 "Usage|usage" -- "$run" $c --help; done
check 2 "usage error" -- "$run"
check 2 "usage error" -- "$run" frobnicate
check 2 "usage error: .*--bogus" -- "$run" run x.tplan --bogus
check 2 "usage error" -- "$run" run x.tplan --iterations 0
check 2 "usage error" -- "$run" run x.tplan --inputs a --random
check 2 "usage error" -- "$run" calibrate
check 1 "tandem-run: error: /nonexistent/p.tplan: cannot open plan file" -- "$run" run /nonexistent/p.tplan
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "not a plan" > "$work/junk.tplan"
check 1 "junk.tplan: not a valid Tandem plan" -- "$run" run "$work/junk.tplan"

# The point of the tool: it runs where MLIR and LLVM are not installed.
if ldd "$run" | grep -E "libMLIR|libLLVM"; then
  echo "FAIL: tandem-run links MLIR/LLVM"; fails=$((fails+1))
else
  echo "ok: ldd tandem-run has no libMLIR/libLLVM"
fi

# Without a GPU, calibrate says why and fails; with one it writes a profile with cuda:0.
if "$tandem" devices | grep -q '^cuda:0 '; then
  check 0 "wrote" -- "$run" calibrate -o "$work/gpu.json" --seconds 2
  python3 -c "import json,sys; p=json.load(open(sys.argv[1])); assert 'cuda:0' in p['devices'], p" "$work/gpu.json" ||
    { echo "FAIL: profile without cuda:0"; fails=$((fails+1)); }
else
  check 1 "tandem-run: error: no GPU to calibrate: .*(no CUDA|backend not built)" -- "$run" calibrate -o "$work/gpu.json" --seconds 1
  [ ! -e "$work/gpu.json" ] || { echo "FAIL: calibrate without a GPU left a file"; fails=$((fails+1)); }
fi

for m in mnist_cnn mlp; do
  dir=$models/$m
  if [ -z "$models" ] || [ ! -f "$dir/model.onnx" ]; then echo "skip: $m (no $dir)"; continue; fi
  ds=$dir/test_data_set_0
  check 0 "wrote" -- "$tandem" compile "$dir/model.onnx" -o "$work/$m.tplan"
  check 0 "^PASS$" -- "$run" run "$work/$m.tplan" --inputs "$ds" --expect "$ds"
  # Zero tolerance: the outputs differ from PyTorch's in the last bits, so this must FAIL.
  check 1 "^FAIL$" -- "$run" run "$work/$m.tplan" --inputs "$ds" --expect "$ds" --atol 0 --rtol 0
  check 1 "has 1 outputs|no output_0.pb" -- "$run" run "$work/$m.tplan" --inputs "$ds" --expect "$work"
  "$run" run "$work/$m.tplan" --inputs "$ds" --expect "$ds" --iterations 5 --json --step-times \
    > "$work/$m.json" 2>/dev/null
  code=$?
  if [ $code = 0 ] && python3 - "$work/$m.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
lat = j["latency_ms"]
assert lat["min"] <= lat["median"] <= lat["p90"] <= lat["max"], lat
assert len(j["runs_ms"]) == 5 and j["iterations"] == 5, j
assert j["pass"] is True and j["outputs"][0]["pass"] is True, j
assert j["outputs"][0]["shape"] == [1, 10] and j["outputs"][0]["max_abs_err"] < 1e-4, j
assert [d["name"] for d in j["devices"]] == ["cpu"] and j["devices"][0]["peak_bytes"] > 0, j
assert len(j["steps"]) > 0 and all(s["ms"] >= 0 for s in j["steps"]), j
assert j["step_runs"] == 5, j  # --step-times: as many profiled runs as --iterations
assert 0 < j["load_ms"] < 60000, j  # the plan's load, timed apart from the runs
PY
  then echo "ok: $m --json"; else echo "FAIL: $m --json (exit $code)"; cat "$work/$m.json" | head -30; fails=$((fails+1)); fi
done
echo "$fails failed"
[ "$fails" = 0 ]

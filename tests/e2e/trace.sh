#!/usr/bin/env bash
# e2e: --trace of `tandem run`, `tandem-run run` and `tandem bench` writes a Chrome trace that is
# valid JSON with the standard fields, has every step and copy of the plan exactly once per timed
# run (checked against the plan's own step list from --step-times --json), names its lanes, and
# fails before running on an unwritable path. mnist_cnn with a cpu,cpu:1 split: two devices.
set -uo pipefail
tandem=$1 run=$2 models=${3:-}
model=$models/mnist_cnn
[ -f "$model/model.onnx" ] || { echo "SKIP: $model/model.onnx absent"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
split=(--target cpu,cpu:1 --pin /net/net.4/MaxPool=cpu:1 --threads 1 --tuning off)

# check_trace TRACE STEPS_JSON RUNS: the trace against the step list of a --json report.
check_trace() {
  python3 - "$@" <<'PY'
import json, sys
trace, report, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
j = json.load(open(trace))
plan = json.load(open(report))["steps"]
ev = j["traceEvents"]
for e in ev:
    for k in ("ph", "pid", "tid", "name"):
        assert k in e, f"event without {k}: {e}"
procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
X = [e for e in ev if e["ph"] == "X"]
for e in X:
    assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0, e
    assert e["pid"] in procs and (e["pid"], e["tid"]) in threads, f"unnamed lane: {e}"
run_ev = [e for e in X if e["cat"] == "run"]
assert len(run_ev) == runs, f"{len(run_ev)} run events, want {runs}"
seen = {}
for e in X:
    if e["cat"] == "run":
        continue
    a = e["args"]
    key = (a["run"], a["step"])
    assert key not in seen, f"step twice: {e}"
    seen[key] = e
    p = plan[a["step"]]
    assert (a["node"], a["op_type"], a["device"], a["impl"]) == (p["name"], p["op_type"], p["device"], p["impl"]), (a, p)
    for side in ("inputs", "outputs"):
        for t in a[side]:
            n = 4
            for d in t["shape"]:
                n *= d
            assert t["dtype"] == "f32" and t["bytes"] == n, t
    assert a["output_bytes"] == sum(t["bytes"] for t in a["outputs"]), a
    if a["op_type"] == "Copy":
        assert e["cat"] == "copy" and a["bytes"] == a["output_bytes"] > 0, e
    r = run_ev[a["run"]]
    assert r["ts"] <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"] + 1e-3, (r, e)
want = {(r, s) for r in range(runs) for s in range(len(plan))}
assert set(seen) == want, f"missing {sorted(want - set(seen))[:5]}"
copies = [p for p in plan if p["op_type"] == "Copy"]
lanes = {procs[e["pid"]] + "/" + threads[(e["pid"], e["tid"])] for e in seen.values()}
assert copies and {"cpu/compute", "cpu:1/compute"} <= lanes, (copies, lanes)
first = next(e for e in seen.values() if e["args"]["step"] == 0)
print(f"ok: {trace}: {runs} runs x {len(plan)} steps ({len(copies)} copies) on lanes {sorted(lanes)}")
print("  e.g. " + json.dumps(first))
PY
}
ok() { if [ "$1" = 0 ]; then echo "ok: $2"; else echo "FAIL: $2"; fails=$((fails+1)); fi; }

# grep reads all of the help: grep -q may exit at the match while --help still writes, and with
# pipefail the writer's SIGPIPE would fail the check.
"$tandem" run --help | grep -- "--trace" >/dev/null ; ok $? "tandem run --help names --trace"
"$tandem" bench --help | grep -- "--trace" >/dev/null ; ok $? "tandem bench --help names --trace"
"$run" run --help | grep -- "--trace" >/dev/null ; ok $? "tandem-run run --help names --trace"

# tandem run: 3 timed runs traced, the step list from the same invocation's --step-times.
"$tandem" run "$model/model.onnx" "${split[@]}" --iterations 3 --warmup 1 --step-times --json \
    --trace "$work/run.json" > "$work/run_report.json" 2>"$work/err"
ok $? "tandem run --trace (exit 0)"
check_trace "$work/run.json" "$work/run_report.json" 3; ok $? "tandem run trace"

# tandem-run on the compiled plan.
"$tandem" compile "$model/model.onnx" --target cpu,cpu:1 --pin /net/net.4/MaxPool=cpu:1 \
    -o "$work/m.tplan" >/dev/null 2>&1
ok $? "tandem compile the split plan"
"$run" run "$work/m.tplan" --threads 1 --tuning off --iterations 2 --step-times --json \
    --trace "$work/tr.json" > "$work/tr_report.json" 2>"$work/err"
ok $? "tandem-run run --trace (exit 0)"
check_trace "$work/tr.json" "$work/tr_report.json" 2; ok $? "tandem-run run trace"

# tandem bench: at most 20 traced runs per configuration; here 3 runs of one.
"$tandem" bench "$model" --threads 1 --min-runs 3 --min-sec 0 --warmup 0 --data-sets 0 --tuning off \
    --trace "$work/bench.json" > "$work/bench.out" 2>"$work/err"
ok $? "tandem bench --trace (exit 0)"
python3 - "$work/bench.json" "$work/bench.out" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
line = json.loads(open(sys.argv[2]).read().splitlines()[0])
runs = [e for e in j["traceEvents"] if e.get("cat") == "run"]
steps = [e for e in j["traceEvents"] if e["ph"] == "X" and e.get("cat") != "run"]
assert len(runs) == line["runs"] == 3 and line["trace"] == sys.argv[1], (len(runs), line)
per_run = len(steps) // 3
assert per_run > 0 and len(steps) == 3 * per_run, len(steps)
assert all("data set 0 threads 1 run" in r["name"] for r in runs), runs
PY
ok $? "tandem bench trace: 3 run events, the same steps in each"

# An unwritable path fails before any run, with the path in the message and no file left.
out=$("$tandem" run "$model/model.onnx" --trace /nonexistent-dir/t.json 2>&1); code=$?
[ "$code" = 1 ] && grep -q "/nonexistent-dir/t.json" <<<"$out" && ! grep -q "^latency" <<<"$out"
ok $? "tandem run --trace /nonexistent-dir/t.json: exit $code before running"

echo "$fails failures"
[ "$fails" = 0 ]

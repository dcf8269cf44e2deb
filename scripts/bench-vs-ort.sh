#!/usr/bin/env bash
# Times Tandem and ONNX Runtime (../shared/peers/ort_bench.js, --opt all) alternately on the same
# models, data sets (batch 1 and 32) and thread counts, and prints Tandem/ORT latency ratios
# measured in the same run. Not a test: takes minutes.
# usage: scripts/bench-vs-ort.sh [--rounds R] [--threads "1 2"] [--cap-avx2] [MODEL_DIR...]
# --cap-avx2 (or TANDEM_MAX_CPU_ISA=avx2 in the environment): both sides on AVX2 code, on a host
#   with AVX-512: Tandem and oneDNN capped by their switches, ONNX Runtime by a copy whose MLAS
#   is capped (scripts/bench/ort-cap-avx2.py; ORT has no switch of its own).
# BUILD_DIR=build-x uses an already built tree instead of building build/.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=2 threads="1 2" cap=
[ "${TANDEM_MAX_CPU_ISA:-}" = avx2 ] && cap=avx2
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2;;
    --threads) threads=$2; shift 2;;
    --cap-avx2) cap=avx2; shift;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0;;
    *) break;;
  esac
done
models=()
# Model directories only (a shell glob such as models/* also names README.md): others are
# skipped with a line, not an error halfway through the run.
for m in "$@"; do
  if [ -f "$m/model.onnx" ]; then models+=("$m"); else echo "skipping $m: no model.onnx there" >&2; fi
done
[ $# -eq 0 ] && models=(../shared/models/mnist_cnn ../shared/models/mnist_cnn_bn_keepbn ../shared/models/mlp ../shared/models/resnet18)
[ ${#models[@]} -eq 0 ] && { echo "bench-vs-ort.sh: none of the arguments is a model directory" >&2; exit 2; }
build=${BUILD_DIR:-build}
[ "$build" = build ] && bash scripts/build.sh >/dev/null
ORT_DIR=${ORT_DIR:-/tmp/ort}
if [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  echo "installing onnxruntime-node into $ORT_DIR (npm)" >&2
  mkdir -p "$ORT_DIR" && (cd "$ORT_DIR" && npm init -y >/dev/null &&
    ONNXRUNTIME_NODE_INSTALL=skip npm install --silent onnxruntime-node@1.30.0 onnx-proto@8.0.1 >/dev/null)
fi
peer_dir=$ORT_DIR peer_note=
if [ "$cap" = avx2 ]; then
  export TANDEM_MAX_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2
  if grep -qw avx512f /proc/cpuinfo; then
    # A fair AVX2 comparison needs the peer on AVX2 code as well.
    peer_dir=$ORT_DIR-avx2
    python3 scripts/bench/ort-cap-avx2.py "$ORT_DIR" "$peer_dir" >&2
    peer_note=", MLAS capped to AVX2 by scripts/bench/ort-cap-avx2.py"
  fi
fi
out=$(mktemp)
# Figures without their host are rumours: name the CPU, its widest vector ISA, the ISA oneDNN
# and Tandem use (TANDEM_MAX_CPU_ISA caps it) and the cores.
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
hw=$(grep -qw avx512f /proc/cpuinfo && echo avx512f || (grep -qw avx2 /proc/cpuinfo && echo avx2 || echo sse))
used=$("$build"/tools/tandem devices | awk '$1 == "isa" {print $2; exit}')
echo "host: $cpu; hardware ISA $hw; Tandem/oneDNN ISA $used${TANDEM_MAX_CPU_ISA:+ (TANDEM_MAX_CPU_ISA=$TANDEM_MAX_CPU_ISA)}; $(nproc) cores"
echo "peer: ONNX Runtime $(node -e "console.log(require('$ORT_DIR/node_modules/onnxruntime-node/package.json').version)" 2>/dev/null || echo '?') (--opt all$peer_note)"
for r in $(seq "$rounds"); do
  for m in "${models[@]}"; do
    for t in $threads; do
      "$build"/tools/tandem bench "$m" --threads "$t" --min-runs 20 --min-sec 2 | sed "s/^/tandem\t/" >>"$out"
      NODE_PATH=$peer_dir/node_modules node ../shared/peers/ort_bench.js --threads "$t" --min-runs 20 \
        --min-sec 2 --opt all "$m" | sed "s/^/ort\t/" >>"$out"
    done
  done
done
python3 - "$out" <<'PY'
import json, sys, statistics, os
rows = {}
for line in open(sys.argv[1]):
    who, js = line.rstrip("\n").split("\t", 1)
    j = json.loads(js)
    key = (os.path.basename(j["model"].rstrip("/")), j["batch"], j["threads"])
    rows.setdefault(key, {}).setdefault(who, []).append(j["median_ms"])
print(f"{'model':22} {'batch':>5} {'thr':>3} {'tandem ms':>10} {'ort ms':>10} {'ratio':>6}")
worst = 0
for key in sorted(rows):
    r = rows[key]
    if "tandem" not in r or "ort" not in r: continue
    # Ratio per round (each pair measured back to back), then the median over rounds.
    ratios = [a / b for a, b in zip(r["tandem"], r["ort"])]
    ratio = statistics.median(ratios); worst = max(worst, ratio)
    print(f"{key[0]:22} {key[1]:>5} {key[2]:>3} {statistics.median(r['tandem']):>10.3f} "
          f"{statistics.median(r['ort']):>10.3f} {ratio:>6.2f}")
print(f"worst ratio: {worst:.2f}")
PY
rm -f "$out"

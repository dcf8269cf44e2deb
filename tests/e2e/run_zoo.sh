#!/usr/bin/env bash
# slow e2e: every model of a zoo directory (../shared/zoo/make_zoo.py DIR writes one) against its
# PyTorch reference, on every data set it has (batch 1 and 32), through a plan file and fused.
# usage: run_zoo.sh TANDEM [ZOO_DIR]   (default: $TANDEM_ZOO)
# Exits 77 (ctest: skipped) with the reason when no zoo directory is given or it holds no model.
set -uo pipefail
tandem=$1 zoo=${2:-${TANDEM_ZOO:-}}
if [ -z "$zoo" ] || ! ls "$zoo"/*/model.onnx >/dev/null 2>&1; then
  echo "SKIP: no zoo: set TANDEM_ZOO=DIR after /usr/bin/python3 ../shared/zoo/make_zoo.py DIR"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0 runs=0
for model in "$zoo"/*/model.onnx; do
  dir=$(dirname "$model") name=$(basename "$(dirname "$model")")
  for ds in "$dir"/test_data_set_*; do
    [ -f "$ds/input_0.pb" ] || continue
    runs=$((runs+1))
    plan="$work/$name.$(basename "$ds").tplan"
    # The batch comes from the data set's inputs when running the ONNX file; a plan needs --dim.
    n=$(python3 - "$ds/input_0.pb" <<'PY' 2>/dev/null || echo 1
import sys
from onnx import TensorProto  # python3-onnx, present wherever make_zoo.py ran
t = TensorProto(); t.ParseFromString(open(sys.argv[1], "rb").read()); print(t.dims[0])
PY
)
    if out=$("$tandem" compile "$model" -o "$plan" --dim N="$n" 2>&1) &&
       out=$("$tandem" run "$plan" --inputs "$ds" --expect "$ds" --atol 1e-4 --rtol 1e-3 2>&1); then
      echo "ok: $name $(basename "$ds") (batch $n): $(grep -m1 -o 'max_abs_err.*' <<<"$out")"
    else
      echo "FAIL: $name $(basename "$ds") (batch $n):"; echo "$out" | tail -15; fails=$((fails+1))
    fi
  done
done
echo "$((runs-fails)) passed, $fails failed"
[ "$fails" = 0 ]

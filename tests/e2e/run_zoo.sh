#!/usr/bin/env bash
# slow e2e: every model of a zoo directory (../shared/zoo/make_zoo.py DIR writes one) against its
# PyTorch reference, on every data set it has (batch 1 and 32), compiled with fusion.
# usage: run_zoo.sh TANDEM [ZOO_DIR]   (default: $TANDEM_ZOO)
# Exits 77 (ctest: skipped) with the reason when no zoo directory is given or it holds no model.
set -uo pipefail
tandem=$1 zoo=${2:-${TANDEM_ZOO:-}}
if [ -z "$zoo" ] || ! ls "$zoo"/*/model.onnx >/dev/null 2>&1; then
  echo "SKIP: no zoo: set TANDEM_ZOO=DIR after /usr/bin/python3 ../shared/zoo/make_zoo.py DIR"
  exit 77
fi
fails=0 runs=0
for model in "$zoo"/*/model.onnx; do
  dir=$(dirname "$model") name=$(basename "$(dirname "$model")")
  for ds in "$dir"/test_data_set_*; do
    [ -f "$ds/input_0.pb" ] || continue
    runs=$((runs+1))
    # The ONNX path binds the batch from the data set's inputs (batch 1 and 32).
    if out=$("$tandem" run "$model" --inputs "$ds" --expect "$ds" --atol 1e-4 --rtol 1e-3 2>&1); then
      echo "ok: $name $(basename "$ds"): $(grep -m1 -o 'f32\[[0-9,]*\].*max_abs_err.*' <<<"$out")"
    else
      echo "FAIL: $name $(basename "$ds"):"; echo "$out" | tail -15; fails=$((fails+1))
    fi
  done
done
echo "$((runs-fails)) passed, $fails failed"
[ "$fails" = 0 ]

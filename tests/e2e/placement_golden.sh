#!/usr/bin/env bash
# Golden placement logs: every model of ../shared/models at batch 1 and 32, cross-compiled for
# an H100 beside the CPU it ships with (cpu=xeon-8480, a built-in spec, so the result does not
# depend on the machine running the test), must give exactly the checked-in text log.
# Usage: placement_golden.sh TANDEM MODELS_DIR GOLDEN_DIR
# TANDEM_UPDATE_GOLDEN=1 rewrites the golden files instead of comparing (review the diff).
# Exit 0 pass, 1 a log differs, 77 skip (../shared/models absent).
set -euo pipefail
tandem=$1 models=$2 golden=$3
target="cpu=xeon-8480,cuda:0=h100"
if [ ! -d "$models" ]; then
  echo "SKIPPED: $models not found (../shared is not beside the checkout)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for model in mnist_cnn mnist_cnn_bn_keepbn mlp resnet18; do
  for batch in 1 32; do
    name=$model.b$batch.txt
    "$tandem" compile "$models/$model/model.onnx" --dim N=$batch --target "$target" \
      --log-placement=text -o "$work/plan" >"$work/$name" 2>"$work/stderr" || {
      echo "FAIL: $model batch $batch: compile failed"; cat "$work/stderr"; status=1; continue; }
    if [ "${TANDEM_UPDATE_GOLDEN:-0}" = 1 ]; then
      cp "$work/$name" "$golden/$name"
      echo "updated $golden/$name"
    elif diff -u "$golden/$name" "$work/$name"; then
      echo "PASS: $model batch $batch"
    else
      echo "FAIL: $model batch $batch: placement log differs from $golden/$name (above)"
      status=1
    fi
  done
done
exit $status

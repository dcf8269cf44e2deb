#!/usr/bin/env bash
# e2e: real models through the importer's opset 18-25 path (frontend/NewerOpsets.h). The shared
# PyTorch exports (opset 13-17) are rewritten as opsets 21 and 25 spell them (upgrade_opset:
# ReduceMean's axes become an input, ...) and must give their test data's outputs as the
# originals do. Exits 77 (skip) without ../shared/models.
set -euo pipefail
tandem=$1 upgrade=$2 models=$3 work=$4
if [ ! -d "$models" ]; then echo "skip: $models not found"; exit 77; fi
mkdir -p "$work"
for m in gpt_like mnist_cnn resnet18; do
  for opset in 21 25; do
    [ -f "$models/$m/model.onnx" ] || { echo "skip: $models/$m"; continue; }
    "$upgrade" "$models/$m/model.onnx" "$work/${m}_$opset.onnx" "$opset"
    echo "== $m at opset $opset"
    "$tandem" run "$work/${m}_$opset.onnx" --inputs "$models/$m/test_data_set_0" \
      --expect "$models/$m/test_data_set_0"
  done
done

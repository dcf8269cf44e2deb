#!/usr/bin/env bash
# Copies the model files scripts/bench-gpu.sh needs (resnet18, mnist_cnn: model.onnx only, about
# 50 MB) from ../shared/models (or $1) into gpu-carry/models, an ignored folder small enough to
# carry to a GPU machine that does not receive ../shared.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${1:-../shared/models}
for m in resnet18 mnist_cnn; do
  mkdir -p "gpu-carry/models/$m"
  cp "$src/$m/model.onnx" "gpu-carry/models/$m/model.onnx"
done
du -sh gpu-carry

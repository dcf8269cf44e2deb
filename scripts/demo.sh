#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, then compiles and runs real ONNX
# models (../shared/models and ONNX's own test models), checking outputs against the references,
# printing latency and the placement log; ends with the GraphBuilder MNIST example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
T=build/tools/tandem
SHARED=../shared/models
ONNX_DATA=/usr/share/libonnx-testdata/data

echo; echo "== Devices =="; $T devices

status=0
run_model() {  # dir data_set log?
  local dir=$1 k=$2 log=${3:-}
  echo; echo "== $(basename "$dir") test_data_set_$k =="
  $T run "$dir/model.onnx" --inputs "$dir/test_data_set_$k" --expect "$dir/test_data_set_$k" \
     --iterations 10 ${log:+--log-placement} || status=1
}

if [ -d "$SHARED" ]; then
  for m in mnist_cnn mnist_cnn_bn_keepbn mlp resnet18; do
    run_model "$SHARED/$m" 0 log   # batch 1, with the placement log
    run_model "$SHARED/$m" 1       # batch 32
  done
else
  echo "note: $SHARED not found; skipping the shared models (they sit beside the checkout in CI)"
fi

for t in pytorch-converted/test_Conv2d_groups node/test_gemm_default_matrix_bias; do
  run_model "$ONNX_DATA/$t" 0 log
done

echo; echo "== GraphBuilder example: Keras MNIST CNN, 100 Adam steps on Fashion-MNIST =="
build/examples/mnist_graph_builder --epochs 1 --max-steps 100 || status=1

# A short real training run: the MLP (784-128-10) for 300 Adam steps of batch 128 (0.64 of an
# epoch) on Fashion-MNIST, then its test accuracy; the trained model runs in `tandem run`.
echo; echo "== tandem train: MLP, 300 Adam steps on Fashion-MNIST =="
trained=$(mktemp --suffix=.onnx)
$T train tests/e2e/models/fmnist_mlp.onnx --data fashion-mnist --optimizer adam --lr 1e-3 \
   --epochs 1 --batch 128 --max-steps 300 --seed 1 -o "$trained" || status=1
$T run "$trained" --dim N=1 > /dev/null || status=1
rm -f "$trained"
exit $status

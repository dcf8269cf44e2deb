#!/usr/bin/env bash
# e2e: `tandem train` on Fashion-MNIST: an MLP (models/fmnist_mlp.onnx, untrained, from
# examples/make_fmnist_models.py) trained 300 Adam steps of batch 128 must reach >= 75% test
# accuracy (chance is 10%; measured ~82%), and the written model must run in `tandem run` with
# the trained weights (its logits differ from the untrained model's). Skipped without the data.
set -uo pipefail
tandem=$1 models=$2 data=${3:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$data/train-images-idx3-ubyte.gz" ] || [ ! -f "$data/t10k-labels-idx1-ubyte.gz" ]; then
  echo "skip: no Fashion-MNIST IDX files in $data (Debian package dataset-fashion-mnist)"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$("$tandem" train "$models/fmnist_mlp.onnx" --data "fashion-mnist:$data" --optimizer adam \
      --lr 1e-3 --epochs 1 --batch 128 --max-steps 300 --seed 1 --threads 2 \
      -o "$work/trained.onnx" 2>&1)
code=$?
echo "$out"
[ "$code" = 0 ] || { echo "FAIL: tandem train exit $code"; exit 1; }
acc=$(grep -oE 'test accuracy [0-9.]+' <<<"$out" | awk '{print $3}')
awk -v a="$acc" 'BEGIN { exit !(a >= 0.75) }' || { echo "FAIL: test accuracy $acc < 0.75"; exit 1; }
echo "ok: test accuracy $acc >= 0.75"
[ -f "$work/trained.onnx" ] || { echo "FAIL: no trained.onnx"; exit 1; }
# The trained model runs and computes something else than the untrained one on the same
# (seeded random) input: the logits' checksums differ.
sum_of() {
  "$tandem" run "$1" --dim N=2 --json --tuning off 2>/dev/null | grep -oE '"checksum": [-0-9.e+]+' | head -1
}
t=$(sum_of "$work/trained.onnx") u=$(sum_of "$models/fmnist_mlp.onnx")
[ -n "$t" ] && [ -n "$u" ] || { echo "FAIL: tandem run on the trained model"; "$tandem" run "$work/trained.onnx" --dim N=2; exit 1; }
[ "$t" != "$u" ] || { echo "FAIL: the written model's logits equal the untrained model's ($t)"; exit 1; }
echo "ok: tandem run on the trained model ($t; untrained $u)"

# Checkpoints: 2 epochs of 30 steps in one go, and the same run stopped after epoch 1 and
# resumed from its checkpoint, write byte-identical models.
run() { "$tandem" train "$models/fmnist_mlp.onnx" --data "fashion-mnist:$data" --batch 64 \
          --max-steps 30 --seed 3 --threads 2 --no-progress "$@" 2>&1; }
run --epochs 2 -o "$work/straight.onnx" > /dev/null || { echo "FAIL: straight run"; exit 1; }
run --epochs 1 --checkpoint-dir "$work/ckpt" > /dev/null || { echo "FAIL: first epoch"; exit 1; }
[ -f "$work/ckpt/latest" ] && [ -f "$work/ckpt/ckpt-30.tckpt" ] || { echo "FAIL: no checkpoint"; ls "$work/ckpt"; exit 1; }
out=$(run --epochs 2 --checkpoint-dir "$work/ckpt" --resume -o "$work/resumed.onnx")
grep -q "resumed from .*step 30, epoch 2" <<<"$out" || { echo "FAIL: not resumed: $out"; exit 1; }
cmp -s "$work/straight.onnx" "$work/resumed.onnx" || { echo "FAIL: resumed model differs"; exit 1; }
echo "ok: resumed run is byte-identical to the uninterrupted one"
# A checkpoint of other variables (Adam's moments, which plain SGD has not) is refused.
out=$(run --epochs 2 --optimizer sgd --checkpoint-dir "$work/ckpt" --resume)
[ $? = 1 ] && grep -q "fingerprint" <<<"$out" || { echo "FAIL: foreign checkpoint accepted: $out"; exit 1; }
echo "ok: a checkpoint of other variables is refused"

# BatchNorm trains as PyTorch's model.train() (models/fmnist_bncnn.onnx, from
# make_fmnist_models.py bncnn): 150 Adam steps reach >= 80% test accuracy (measured 83%) with
# the evaluation normalising by the running statistics the steps updated; --trace writes the
# first 20 steps, each a run event, with the training-mode BatchNormalization among their ops.
out=$("$tandem" train "$models/fmnist_bncnn.onnx" --data "fashion-mnist:$data" --optimizer adam \
      --lr 1e-3 --batch 128 --max-steps 150 --seed 1 --threads 2 --no-progress \
      --trace "$work/train_trace.json" -o "$work/bncnn.onnx" 2>&1)
code=$?
echo "$out" | tail -2
[ "$code" = 0 ] || { echo "FAIL: tandem train (bncnn) exit $code"; exit 1; }
acc=$(grep -oE 'test accuracy [0-9.]+' <<<"$out" | awk '{print $3}')
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || { echo "FAIL: bncnn test accuracy $acc < 0.80"; exit 1; }
echo "ok: bncnn test accuracy $acc >= 0.80"
python3 - "$work/train_trace.json" <<'PY' || { echo "FAIL: the training trace"; exit 1; }
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
runs = [e["name"] for e in ev if e["ph"] == "X" and e.get("cat") == "run"]
assert runs == [f"training step {i}" for i in range(1, 21)], runs
ops = {e["args"]["op_type"] for e in ev if e["ph"] == "X" and e.get("cat") == "op"}
assert {"BatchNormalization", "Conv", "ConvTranspose", "MaxPoolGrad"} <= ops, ops
print(f"ok: the trace has training steps 1-20 and {len(ops)} op types")
PY
out=$("$tandem" train "$models/fmnist_bncnn.onnx" --data "fashion-mnist:$data" --batch 64 \
      --max-steps 5 --threads 2 --no-progress --freeze-batchnorm 2>&1) ||
  { echo "FAIL: --freeze-batchnorm: $out"; exit 1; }
echo "ok: --freeze-batchnorm trains"
# The running statistics are checkpointed with the rest: a resumed run writes the same model.
bn() { "$tandem" train "$models/fmnist_bncnn.onnx" --data "fashion-mnist:$data" --batch 64 \
         --max-steps 20 --seed 3 --threads 2 --no-progress "$@" 2>&1; }
bn --epochs 2 -o "$work/bn_straight.onnx" > /dev/null || { echo "FAIL: bncnn straight run"; exit 1; }
bn --epochs 1 --checkpoint-dir "$work/bnckpt" > /dev/null || { echo "FAIL: bncnn first epoch"; exit 1; }
bn --epochs 2 --checkpoint-dir "$work/bnckpt" --resume -o "$work/bn_resumed.onnx" > /dev/null ||
  { echo "FAIL: bncnn resumed run"; exit 1; }
cmp -s "$work/bn_straight.onnx" "$work/bn_resumed.onnx" || { echo "FAIL: resumed bncnn differs"; exit 1; }
echo "ok: a resumed bncnn run (running statistics in the checkpoint) is byte-identical"

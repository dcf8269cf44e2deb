#!/usr/bin/env bash
# e2e: examples/mnist_graph_builder builds the Keras MNIST CNN with the GraphBuilder and trains
# it with the Trainer: 100 Adam steps of batch 128 must reach >= 70% Fashion-MNIST test accuracy
# (chance is 10%; measured 82.5%), and the prediction table names classes. Skipped without the
# data.
set -uo pipefail
example=$1 data=${2:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$data/train-images-idx3-ubyte.gz" ] || [ ! -f "$data/t10k-labels-idx1-ubyte.gz" ]; then
  echo "skip: no Fashion-MNIST IDX files in $data (Debian package dataset-fashion-mnist)"; exit 77
fi
out=$("$example" --epochs 1 --max-steps 100 --threads 2 --data "$data" 2>&1)
code=$?
echo "$out"
[ "$code" = 0 ] || { echo "FAIL: mnist_graph_builder exit $code"; exit 1; }
acc=$(grep -oE '^test accuracy [0-9.]+' <<<"$out" | awk '{print $3}')
[ -n "$acc" ] || { echo "FAIL: no 'test accuracy' line"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.70) }' || { echo "FAIL: test accuracy $acc < 0.70"; exit 1; }
echo "ok: test accuracy $acc >= 0.70"
# The first test image is an ankle boot (label 9); 10 rows follow the table's header.
rows=$(grep -cE '^[0-9]+ +.*(right|wrong)$' <<<"$out")
[ "$rows" = 10 ] || { echo "FAIL: $rows prediction rows, expected 10"; exit 1; }
grep -qE '^0 +.* Ankle boot +(right|wrong)$' <<<"$out" || { echo "FAIL: image 0's label is not 'Ankle boot'"; exit 1; }
# A bad flag is refused with the usage.
"$example" --epochs 0 >/dev/null 2>&1; [ $? = 2 ] || { echo "FAIL: --epochs 0 accepted"; exit 1; }
echo "ok: prediction table and flag check"

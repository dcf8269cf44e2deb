#!/usr/bin/env bash
# Checks a model written by `tandem train -o` in ONNX Runtime: Tandem runs it on the first
# COUNT Fashion-MNIST test images and writes its logits as output_0.pb, then ONNX Runtime
# (../shared/peers/ort_bench.js, onnxruntime-node: see ../shared/peers/README.md for its
# one-time set-up in /tmp/ort) runs the same file on the same inputs and reports the largest
# absolute difference; the check passes at <= 1e-4. Also prints both runtimes' accuracy on
# those images (argmax of the logits against the labels).
#
#   scripts/check-trained-export.sh TRAINED.onnx [--count 256] [--build DIR] [--peers DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: check-trained-export.sh TRAINED.onnx [--count N]}
shift
count=256 build=build peers=../shared/peers
while [ $# -gt 0 ]; do
  case $1 in
    --count) count=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
ort=${ORT_NODE_MODULES:-/tmp/ort/node_modules}
[ -d "$ort/onnxruntime-node" ] || { echo "no onnxruntime-node in $ort (see $peers/README.md)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/m/test_data_set_0"
cp "$model" "$work/m/model.onnx"
# The inputs: the first COUNT test images in the model's input layout, and their labels.
/usr/bin/python3 - "$work/m" "$count" <<'PY'
import gzip, sys
import numpy as np, onnx
from onnx import numpy_helper
d, n = sys.argv[1], int(sys.argv[2])
m = onnx.load(f"{d}/model.onnx")
inits = {t.name for t in m.graph.initializer}
inp = [i for i in m.graph.input if i.name not in inits][0]
rank = len(inp.type.tensor_type.shape.dim)
with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f:
    x = np.frombuffer(f.read(), np.uint8, offset=16)[: n * 784].astype(np.float32) / 255
with gzip.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz") as f:
    y = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
x = x.reshape((n, 1, 28, 28) if rank == 4 else (n, 784))
t = numpy_helper.from_array(x, inp.name)
open(f"{d}/test_data_set_0/input_0.pb", "wb").write(t.SerializeToString())
np.save(f"{d}/labels.npy", y)
PY
"$build"/tools/tandem run "$work/m/model.onnx" --dim N="$count" --inputs "$work/m/test_data_set_0" \
    --save-outputs "$work/m/test_data_set_0" --tuning off > /dev/null
acc=$(/usr/bin/python3 - "$work/m" <<'PY'
import sys, numpy as np, onnx
from onnx import numpy_helper
d = sys.argv[1]
t = onnx.TensorProto(); t.ParseFromString(open(f"{d}/test_data_set_0/output_0.pb", "rb").read())
print(f"{(numpy_helper.to_array(t).argmax(1) == np.load(f'{d}/labels.npy')).mean():.4f}")
PY
)
out=$(NODE_PATH="$ort" node "$peers/ort_bench.js" --threads 1 --min-runs 1 --min-sec 0 --warmup 0 "$work/m")
err=$(grep -oE '"max_abs_err(or)?": *[-0-9.e+]+' <<<"$out" | head -1 | awk -F: '{print $2}' | tr -d ' ')
echo "tandem accuracy on $count test images: $acc"
echo "onnxruntime vs tandem logits: max abs difference ${err:-?} (ort_bench: $out)"
awk -v e="${err:-1}" 'BEGIN { exit !(e <= 1e-4) }' && echo "PASS" || { echo "FAIL"; exit 1; }

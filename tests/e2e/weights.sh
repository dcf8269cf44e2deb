#!/usr/bin/env bash
# e2e: plans sharing one weights file (tandem compile --weights): two plans of mnist_cnn (other
# placement, other batch) store its constants once, both run with --expect PASS from tandem and
# tandem-run, and a missing or corrupt weights file is exit 1 with the file named.
set -uo pipefail
tandem=$1 run=$2 models=${3:-}
dir=$models/mnist_cnn
if [ -z "$models" ] || [ ! -f "$dir/model.onnx" ]; then echo "skip: no $dir"; exit 77; fi
fails=0
check() {  # check EXPECTED_CODE REGEX -- cmd...
  local want=$1 regex=$2; shift 3
  out=$("$@" 2>&1); code=$?
  if [ "$code" != "$want" ] || ! grep -qE -- "$regex" <<<"$out"; then
    echo "FAIL: $* -> exit $code (want $want), output:"; echo "$out" | head -20; fails=$((fails+1))
  else
    echo "ok: $*"
  fi
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/plans"
w=$work/mnist.weights
check 0 "weights .*: 6 constants \([0-9]+ bytes\) referenced, 6 new blobs" -- \
  "$tandem" compile "$dir/model.onnx" -o "$work/plans/b1.tplan" --weights "$w"
size1=$(stat -c %s "$w")
check 0 "weights .*: 6 constants .* referenced, 0 new blobs \(0 bytes\)" -- \
  "$tandem" compile "$dir/model.onnx" -o "$work/plans/b32-greedy.tplan" --weights "$w" \
  --dim N=32 --target cpu,cuda:0=h100 --placement greedy
size2=$(stat -c %s "$w")
[ "$size1" = "$size2" ] && echo "ok: weights file unchanged by the second plan ($size1 bytes)" ||
  { echo "FAIL: weights file grew from $size1 to $size2 bytes"; fails=$((fails+1)); }
# mnist_cnn has 1.2 M parameters (4.8 MB): all of it is in the weights file, not the plans.
[ "$size1" -gt 4700000 ] || { echo "FAIL: weights file of $size1 bytes is too small"; fails=$((fails+1)); }
for p in b1 b32-greedy; do
  s=$(stat -c %s "$work/plans/$p.tplan")
  [ "$s" -lt 100000 ] && echo "ok: $p.tplan is $s bytes" || { echo "FAIL: $p.tplan is $s bytes"; fails=$((fails+1)); }
done
check 0 "^PASS$" -- "$run" run "$work/plans/b1.tplan" --inputs "$dir/test_data_set_0" --expect "$dir/test_data_set_0"
check 0 "^PASS$" -- "$run" run "$work/plans/b32-greedy.tplan" --inputs "$dir/test_data_set_1" --expect "$dir/test_data_set_1"
check 0 "^PASS$" -- "$tandem" run "$work/plans/b1.tplan" --inputs "$dir/test_data_set_0" --expect "$dir/test_data_set_0"
# The plan names the file relative to itself ("../mnist.weights"), not to the directory it
# was compiled from: a renamed plans folder still finds it, from any working directory.
mv "$work/plans" "$work/moved"
cd /
check 0 "^PASS$" -- "$run" run "$work/moved/b1.tplan" --inputs "$dir/test_data_set_0" --expect "$dir/test_data_set_0"
# A flipped byte in the middle of the file: the hash check names the file and the value.
python3 - "$w" <<'PY'
import sys
f = open(sys.argv[1], "r+b"); f.seek(2_000_000); b = f.read(1); f.seek(2_000_000); f.write(bytes([b[0] ^ 0xff]))
PY
check 1 "tandem-run: error: .*b1.tplan: .*mnist.weights: value '.*': content does not match its SHA-256" -- \
  "$run" run "$work/moved/b1.tplan" --random
truncate -s 1000000 "$w"
check 1 "mnist.weights: (value '.*': bytes .* are outside the file|weights file index is outside)" -- \
  "$run" run "$work/moved/b1.tplan" --random
rm -f "$w"
check 1 "mnist.weights: cannot open weights file \(No such file or directory\), needed by value" -- \
  "$run" run "$work/moved/b1.tplan" --random
check 1 "mnist.weights: cannot open weights file" -- "$tandem" run "$work/moved/b1.tplan" --random
echo "$fails failed"
[ "$fails" = 0 ]

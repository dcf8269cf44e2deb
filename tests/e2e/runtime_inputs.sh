#!/usr/bin/env bash
# e2e: `tandem run --inputs` folds only inputs that reach a shape operand into the plan. Token
# ids feeding an embedding Gather stay run-time inputs (folded, they made the whole model a
# constant: gpt_like "ran" in 0.002 ms), and the outputs still match the reference.
# usage: runtime_inputs.sh TANDEM SHARED_MODELS_DIR E2E_MODELS_DIR
set -uo pipefail
tandem=$1 shared=$2 committed=$3
fails=0
check() {  # check REGEX... -- cmd...: exit 0 and every REGEX in the output
  local regexes=()
  while [ "$1" != "--" ]; do regexes+=("$1"); shift; done
  shift
  out=$("$@" 2>&1); code=$?
  for r in "${regexes[@]}"; do
    if [ "$code" != 0 ] || ! grep -qE -- "$r" <<<"$out"; then
      echo "FAIL: $* -> exit $code, no match for '$r'; output:"; echo "$out" | head -20
      fails=$((fails+1)); return
    fi
  done
  if grep -q "is a constant of the plan" <<<"$out" && [ "${allow_folded:-0}" = 0 ]; then
    echo "FAIL: $*: folded an input:"; grep "constant of the plan" <<<"$out"; fails=$((fails+1)); return
  fi
  echo "ok: $*"
}
run() {  # run MODEL_DIR K [flags]
  local d=$1 k=$2; shift 2
  echo "$tandem" run "$d/model.onnx" --inputs "$d/test_data_set_$k" --expect "$d/test_data_set_$k" "$@"
}
bert=$committed/bert_post_norm
check "^run-time inputs: input_ids i64\[1,8\], padding_mask bool\[1,8\]$" "^PASS$" -- $(run $bert 0)
check "^run-time inputs: input_ids i64\[32,8\], padding_mask bool\[32,8\]$" "^PASS$" -- $(run $bert 1 --no-fuse)
# Reshape's shape fed as an integer input is the one kind that is folded.
reshape=/usr/share/libonnx-testdata/data/node/test_reshape_reordered_all_dims
if [ -f $reshape/model.onnx ]; then
  allow_folded=1 check "input 'shape' is a constant of the plan" "^run-time inputs: data f32\[2,3,4\]$" "^PASS$" -- $(run $reshape 0)
fi
gpt=$shared/gpt_like
if [ -f $gpt/model.onnx ]; then
  check "^run-time inputs: input i64\[1,64\]$" "^PASS$" -- $(run $gpt 0)
else
  echo "skip: $gpt/model.onnx not found (../shared is absent beside the checkout)"
fi
[ $fails = 0 ] || { echo "$fails failed"; exit 1; }

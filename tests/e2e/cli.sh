#!/usr/bin/env bash
# e2e: the CLI's non-model commands and usage errors: help on every command, exit codes.
set -uo pipefail
tandem=$1
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
for c in devices kernels compile run bench calibrate; do check 0 "Usage|usage" -- "$tandem" $c --help; done
check 0 "Usage|usage" -- "$tandem" --help
check 0 "cpu \(cpu\)" -- "$tandem" devices
check 0 "isa" -- "$tandem" devices
check 0 "\"kind\": \"cpu\"" -- "$tandem" devices --json
check 0 "^Conv +cpu +dnnl" -- "$tandem" kernels
check 0 "^Erf +cpu +ref" -- "$tandem" kernels
check 2 "usage error" -- "$tandem" frobnicate
check 2 "usage error" -- "$tandem" compile
check 2 "usage error" -- "$tandem" run model.onnx --iterations 0
check 2 "usage error" -- "$tandem" run model.onnx --inputs a --random
check 2 "--dim expects" -- "$tandem" compile x.onnx -o y.tplan --dim N
check 1 "cannot open" -- "$tandem" compile /nonexistent/model.onnx -o /tmp/never.tplan
echo "$fails failed"
[ "$fails" = 0 ]

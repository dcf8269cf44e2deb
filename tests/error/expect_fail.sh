#!/usr/bin/env bash
# Must-fail check: runs a command, requires an exact exit code, an error message matching REGEX,
# exactly one "error:" line, and that no stray temporary/partial file is left at CHECK_ABSENT.
# usage: expect_fail.sh CODE REGEX CHECK_ABSENT|- -- cmd...
set -uo pipefail
want=$1 regex=$2 absent=$3; shift 4
out=$("$@" 2>&1); code=$?
echo "$out"
if [ "$code" != "$want" ]; then echo "FAIL: exit code $code, want $want"; exit 1; fi
if ! grep -qE -- "$regex" <<<"$out"; then echo "FAIL: message does not match /$regex/"; exit 1; fi
if grep -qiE "segmentation|abort|terminate called|core dumped" <<<"$out"; then echo "FAIL: crashed"; exit 1; fi
if [ "$absent" != "-" ]; then
  if ls "$absent"* >/dev/null 2>&1; then echo "FAIL: left a file at $absent*"; exit 1; fi
fi
echo "ok"

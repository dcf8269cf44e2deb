#!/usr/bin/env bash
# e2e: compile a real model to a plan file, run the plan on a reference data set, check outputs.
# usage: run_model.sh TANDEM MODEL_DIR DATA_SET_INDEX WORKDIR (data set 0: batch 1, 1: batch 32)
# Exits 77 (ctest: skipped) with a printed reason when the shared models are absent.
set -euo pipefail
tandem=$1 dir=$2 k=$3 work=$4
if [ ! -f "$dir/model.onnx" ]; then
  echo "SKIP: $dir/model.onnx not found (../shared is absent beside the checkout)"
  exit 77
fi
name=$(basename "$dir")
mkdir -p "$work"
batch=$([ "$k" = 0 ] && echo 1 || echo 32)
plan="$work/$name.b$batch.tplan"
rm -f "$plan"
out=$("$tandem" compile "$dir/model.onnx" -o "$plan" --dim N=$batch --log-placement 2>&1)
echo "$out"
test -s "$plan"
# Fusion report: resnet18's 49 ONNX nodes run as 24 kernels (20 convs with their Relu / residual
# Add / Relu epilogues, MaxPool, GlobalAveragePool, Flatten, Gemm).
if [ "$name" = resnet18 ]; then
  grep -q "cpu: 49 kernels before fusion, 24 after" <<<"$out"
fi
"$tandem" run "$plan" --inputs "$dir/test_data_set_$k" --expect "$dir/test_data_set_$k" --atol 1e-4 --rtol 1e-3
# The ONNX path (compile in-process) must agree too.
"$tandem" run "$dir/model.onnx" --inputs "$dir/test_data_set_$k" --expect "$dir/test_data_set_$k" --threads 1
# And without fusion (one kernel per op, plain layouts): the same outputs.
"$tandem" run "$dir/model.onnx" --dim N=$batch --inputs "$dir/test_data_set_$k" --expect "$dir/test_data_set_$k" --no-fuse

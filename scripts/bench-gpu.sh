#!/usr/bin/env bash
# The GPU benchmarks of issue 4 item 8, in one go, on a CUDA build (default build-gpu/, as
# scripts/test-gpu.sh leaves it; TANDEM_GPU_BUILD_DIR overrides):
#   1. ResNet-18 at batch 32: Tandem (--placement gpu) vs PyTorch eager, TF32 off and default
#   2. Tandem's GEMM vs bare cuBLAS (examples/gpu_gemm_vs_cublas)
#   3. an elementwise chain vs cudaMemcpy D2D bandwidth (examples/gpu_elementwise_bandwidth)
#   4. mnist_cnn at batch 1 and 128: --placement cpu, gpu and cost, with the cost model's estimates
# A part whose prerequisite is missing (no GPU, no models, no PyTorch) prints why and is skipped;
# a part that fails makes the script exit 1 at the end. Models: $TANDEM_MODELS, else
# ../shared/models, else ./gpu-carry/models (scripts/bench/carry-models.sh fills it).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${TANDEM_GPU_BUILD_DIR:-build-gpu}
tandem=$build/tools/tandem
runs=${TANDEM_BENCH_RUNS:-30}
failed=()
skip() { echo "skip: $*"; }
fail() { echo "FAILED: $*" >&2; failed+=("$1"); }

if [ -n "${TANDEM_MODELS:-}" ]; then models=$TANDEM_MODELS
elif [ -d ../shared/models ]; then models=../shared/models
else models=gpu-carry/models; fi

if [ ! -x "$tandem" ]; then
  skip "all parts: no $tandem (build with -DTANDEM_ENABLE_CUDA=ON into $build first)"
  exit 0
fi
# The same visibility check as scripts/test-gpu.sh.
if ! "$tandem" devices | grep -q '^cuda:0 '; then
  skip "all parts: no CUDA device is visible to tandem:"
  "$tandem" devices | grep '^note:' | sed 's/^/  /'
  exit 0
fi

# Median latency (ms) from `tandem run` output on stdin.
latency() { sed -n 's/^latency: median \([0-9.]*\) ms.*/\1/p'; }

echo "== 1. ResNet-18, batch 32: Tandem vs PyTorch eager (same GPU)"
resnet=$models/resnet18/model.onnx
if [ ! -f "$resnet" ]; then
  skip "ResNet-18: no $resnet"
else
  tout=$("$tandem" run "$resnet" --dim N=32 --random --iterations "$runs" --placement gpu 2>&1)
  if [ $? -ne 0 ]; then fail resnet18 "tandem run: $tout"; else
    t_ms=$(echo "$tout" | latency)
    echo "tandem (--placement gpu, FP32, no TF32; one run = input upload + net + logits download): median $t_ms ms"
    if ! python3 -c 'import torch' 2>/dev/null; then
      skip "PyTorch side: python3 cannot import torch"
    else
      for tf32 in off default; do
        j=$(python3 scripts/bench/torch_resnet18.py --batch 32 --runs "$runs" --tf32 "$tf32")
        rc=$?
        if [ $rc -eq 2 ]; then skip "PyTorch side (see the reason above)"; break; fi
        if [ $rc -ne 0 ]; then fail resnet18 "torch_resnet18.py --tf32 $tf32 exited $rc"; continue; fi
        echo "$j"
        T_MS=$t_ms J=$j python3 - <<'PY'
import json, os
j, t = json.loads(os.environ["J"]), float(os.environ["T_MS"])
print(f"  torch tf32={j['tf32']} ({j['source']}, cudnn.allow_tf32={j['cudnn_allow_tf32']}): "
      f"input resident {j['median_ms']:.3f} ms, with copies {j['median_ms_with_copies']:.3f} ms; "
      f"tandem/torch {t / j['median_ms_with_copies']:.2f}x with copies on both sides, "
      f"{t / j['median_ms']:.2f}x against resident input")
PY
      done
    fi
  fi
fi

echo "== 2. GEMM: Tandem vs bare cuBLAS"
if [ ! -x "$build/examples/gpu_gemm_vs_cublas" ]; then skip "GEMM: no $build/examples/gpu_gemm_vs_cublas"
else "$build/examples/gpu_gemm_vs_cublas" || fail gemm "gpu_gemm_vs_cublas exited $?"; fi

echo "== 3. Elementwise chain vs device copy bandwidth"
if [ ! -x "$build/examples/gpu_elementwise_bandwidth" ]; then skip "elementwise: no $build/examples/gpu_elementwise_bandwidth"
else "$build/examples/gpu_elementwise_bandwidth" || fail elementwise "gpu_elementwise_bandwidth exited $?"; fi

echo "== 4. mnist_cnn: where the cost plan lands between all-CPU and all-GPU"
mnist=$models/mnist_cnn/model.onnx
if [ ! -f "$mnist" ]; then
  skip "mnist_cnn: no $mnist"
else
  for batch in 1 128; do
    declare -A ms=()
    for p in cpu gpu cost; do
      out=$("$tandem" run "$mnist" --dim N=$batch --random --iterations 100 --placement $p --log-placement 2>&1)
      if [ $? -ne 0 ]; then fail mnist "batch $batch --placement $p: $out"; continue 2; fi
      ms[$p]=$(echo "$out" | latency)
      echo "batch $batch --placement $p: median ${ms[$p]} ms"
      echo "$out" | grep -E '^(summary|estimated time):' | sed 's/^/    /'
    done
    python3 - "${ms[cpu]}" "${ms[gpu]}" "${ms[cost]}" "$batch" <<'PY'
import sys
cpu, gpu, cost, b = map(float, sys.argv[1:])
lo, hi = min(cpu, gpu), max(cpu, gpu)
where = (f"{(cost - lo) / (hi - lo):.2f} of the way from the faster ({'cpu' if cpu <= gpu else 'gpu'}) "
         f"to the slower" if hi > lo else "cpu and gpu tie")
print(f"  batch {int(b)}: cost plan {cost:.3f} ms vs all-cpu {cpu:.3f} ms, all-gpu {gpu:.3f} ms: "
      f"{'better than both' if cost < lo else where}")
PY
  done
fi

if [ ${#failed[@]} -gt 0 ]; then echo "bench-gpu.sh: failed parts: ${failed[*]}" >&2; exit 1; fi
echo "bench-gpu.sh: done"

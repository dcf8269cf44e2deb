#!/usr/bin/env bash
# e2e: a reduced GPU kit (scripts/gpu-kit.sh --quick: mnist_cnn, policy cpu, batch 1, unpacked)
# is self-contained: with a clean environment every kit binary resolves its libraries from the
# kit or the system's glibc (only CUDA's own libraries may be missing on a machine without
# them), and the kit's tandem-run passes the plan's --expect check. The benchmark examples'
# runtime-only builds (*_run) are in it with their plans, link no MLIR/LLVM and, with a clean
# environment, start and read their plans (here, without a GPU, they skip with exit 0).
set -uo pipefail
src=$1 build=$2 models=${3:-}
if [ -z "$models" ] || [ ! -f "$models/mnist_cnn/model.onnx" ]; then echo "skip: no models"; exit 77; fi
command -v patchelf >/dev/null || { echo "skip: no patchelf (scripts/deps.sh)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
TANDEM_MODELS=$models bash "$src/scripts/gpu-kit.sh" --quick --build "$build" --out "$work/kit" --no-pack ||
  { echo "FAIL: gpu-kit.sh --quick"; exit 1; }
kit=$work/kit
for f in run.sh bin/tandem-run plans/mnist_cnn/b1-cpu.tplan plans/mnist_cnn/mnist_cnn.weights \
         plans/mnist_cnn/data/input_0.pb lib/libdnnl.so.2 lib/libprotobuf.so.32 \
         bin/examples/gpu_gemm_vs_cublas_run bin/examples/gpu_elementwise_bandwidth_run \
         bench/gpu_gemm_vs_cublas/manifest.txt bench/gpu_elementwise_bandwidth/chain.tplan \
         bench/cuda_fusion/gpu.tplan bench/cuda_fusion/data/output_0.pb torch_peers.py; do
  [ -e "$kit/$f" ] && echo "ok: kit has $f" || { echo "FAIL: kit lacks $f"; fails=$((fails+1)); }
done
for b in "$kit"/bin/* "$kit"/bin/tests/* "$kit"/bin/examples/* "$kit"/lib/*.so*; do
  [ -f "$b" ] || continue
  out=$(env -i /usr/bin/ldd "$b" 2>&1)
  bad=$(grep "not found" <<<"$out" | grep -vE "^\s*lib(cuda|cudnn[a-z_]*|cublas|cublasLt|nvrtc)\.so" || true)
  # Found libraries come from the kit, or are glibc's, the C++ runtime's (the kit has them in
  # lib/fallback for older machines) or CUDA's (where this machine has them).
  foreign=$(awk '/=> \// {print $1, $3}' <<<"$out" | grep -vE " $kit/(bin/(tests/|examples/)?\.\./(\.\./)?)?lib/" |
            grep -vE "^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so" |
            grep -vE "^lib(cuda|cudnn[a-z_]*|cublas|cublasLt|nvrtc)\.so" || true)
  if [ -n "$bad$foreign" ]; then
    echo "FAIL: $b: missing: ${bad:-none}; from outside the kit: ${foreign:-none}"; fails=$((fails+1))
  else
    echo "ok: $(basename "$b") resolves from the kit"
  fi
done
for n in gpu_gemm_vs_cublas gpu_elementwise_bandwidth; do
  b=$kit/bin/examples/${n}_run
  [ -x "$b" ] || continue
  if env -i /usr/bin/ldd "$b" | grep -qE 'libMLIR|libLLVM'; then echo "FAIL: ${n}_run links MLIR/LLVM"; fails=$((fails+1)); fi
  # Clean environment; CUDA's libraries from where this machine has them (the kit carries none).
  out=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib "$b" --plans "$kit/bench/$n" 2>&1)
  code=$?
  if [ $code = 0 ] && grep -qE "skipped: no CUDA device|GFLOP/s|GB/s" <<<"$out"; then echo "ok: ${n}_run --plans runs from the kit"
  else echo "FAIL: ${n}_run --plans (exit $code): $out"; fails=$((fails+1)); fi
  out=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib "$b" --plans "$work/none" 2>&1)
  [ $? = 1 ] && grep -q "manifest.txt" <<<"$out" && echo "ok: ${n}_run names a missing manifest" ||
    { echo "FAIL: ${n}_run --plans on a missing dir: $out"; fails=$((fails+1)); }
done
out=$(env -i PATH=/usr/bin:/bin "$kit/bin/tandem-run" run "$kit/plans/mnist_cnn/b1-cpu.tplan" \
      --inputs "$kit/plans/mnist_cnn/data" --expect "$kit/plans/mnist_cnn/data" 2>&1)
grep -q "^PASS$" <<<"$out" && echo "ok: kit tandem-run PASS" || { echo "FAIL: kit tandem-run:"; echo "$out"; fails=$((fails+1)); }
# run.sh --budget: past it no check starts; the skipped ones are listed in priority order (gpu
# tests, then the batch-1 plans, memcheck, examples, racecheck, calibrate last) and the exit
# status is 3 (none failed, some skipped).
OUT=$work/budget bash "$kit/run.sh" --budget 1 > "$work/budget.log" 2>&1
code=$?
order=$(cut -f1,2 "$work/budget/checks.tsv" 2>/dev/null | awk -F'\t' '$2 == "skipped" {split($1, w, " "); print w[1]}' | uniq | tr '\n' ' ')
if [ $code = 3 ] && [ "$order" = "ldd test plan memcheck example racecheck calibrate " ] &&
   python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(not (s["skipped"] and not s["failed"] and s["budget_s"] == 1))' \
     "$work/budget/summary.json"; then
  echo "ok: run.sh --budget 1 skips every check, in priority order ($order), exit 3"
else
  echo "FAIL: run.sh --budget 1: exit $code, order '$order'"; cat "$work/budget.log"; fails=$((fails+1))
fi
out=$(bash "$kit/run.sh" --budget soon 2>&1)
[ $? = 2 ] && grep -q "whole number of seconds" <<<"$out" && echo "ok: run.sh --budget soon is refused" ||
  { echo "FAIL: run.sh --budget soon: $out"; fails=$((fails+1)); }
echo "$fails failed"
[ "$fails" = 0 ]

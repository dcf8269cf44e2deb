#!/usr/bin/env bash
# Builds a self-contained GPU kit: what a lent GPU machine (no compiler, no MLIR, no registry)
# needs to run Tandem's GPU checks, made here where the build is. One kit carries tandem-run,
# the gpu test binaries and GPU examples that do not link MLIR/LLVM (the benchmark examples'
# runtime-only *_run builds among them), plans compiled for cpu,cuda:0=h100 under every
# placement policy and batch, each model's constants once (one weights file per model, tandem
# compile --weights), the benchmark examples' plans (bench/NAME, from NAME --write-plans) and
# the CUDA fusion test's plan with its CPU reference (bench/cuda_fusion), the PyTorch peers'
# script with each model's weight index (plans/MODEL/torch.json, scripts/kit/torch_peers.py
# index; needs python3-onnx), the shared libraries the lent machine lacks
# (not glibc, not CUDA's: kit/run.sh finds those there) under lib/ with RPATH $ORIGIN/../lib,
# and run.sh. Packed as kit.tar.xz + run.sh so that what is carried stays under the limit.
#
#   scripts/gpu-kit.sh                 kit/ (tests, examples, mnist_cnn, mlp, gpt_like) and
#                                      kit-resnet18/ (resnet18's plans only: its 47 MB of
#                                      weights do not fit beside the rest)
#   scripts/gpu-kit.sh --quick --out DIR --no-pack    mnist_cnn, policy cpu, batch 1 (the test)
#   options: --build DIR (default build), --out DIR, --models "a b", --policies "a b",
#            --batches "1 32", --no-tests, --no-pack, --limit-mib N (default 60)
# Then, on the lent machine: carry the kit folder and run `bash kit/run.sh` (README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=build out="" models="" policies="cost cpu gpu greedy ort" batches="1 32 128"
tests=1 pack=1 quick=0 limit_mib=60
models_dir=${TANDEM_MODELS:-$src/../shared/models}
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift ;; --out) out=$2; shift ;; --models) models=$2; shift ;;
    --policies) policies=$2; shift ;; --batches) batches=$2; shift ;;
    --no-tests) tests=0 ;; --no-pack) pack=0 ;; --limit-mib) limit_mib=$2; shift ;;
    --quick) quick=1 ;;
    *) echo "gpu-kit.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$out" ] && [ -z "$models" ] && [ $quick = 0 ]; then
  # The default: two kits, each under the limit (see the header).
  "$0" --build "$build" --out kit --models "mnist_cnn mlp gpt_like" --policies "$policies" \
       --batches "$batches" --limit-mib "$limit_mib" $([ $pack = 1 ] || echo --no-pack)
  "$0" --build "$build" --out kit-resnet18 --models resnet18 --policies "$policies" \
       --batches "$batches" --no-tests --limit-mib "$limit_mib" $([ $pack = 1 ] || echo --no-pack)
  exit 0
fi
if [ $quick = 1 ]; then
  models=${models:-mnist_cnn} policies=cpu batches=1
fi
out=${out:-kit}
[ -n "$models" ] || { echo "gpu-kit.sh: --models is empty" >&2; exit 2; }
command -v patchelf >/dev/null || { echo "gpu-kit.sh: needs patchelf (scripts/deps.sh installs it)" >&2; exit 1; }
[ -f "$build/build.ninja" ] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

# 1. Binaries: tandem (to compile the plans here), tandem-run, gpu tests (ctest -L gpu) and
# examples (gpu_*). Those linking MLIR/LLVM stay out: those libraries are ~195 MB.
gpu_tests=() examples=()
if [ $tests = 1 ]; then
  # ctest names them gpu.NAME; the target is NAME (tests/unit/runtime) or unit_NAME (tests/unit/passes and the other in-process compile tests).
  targets=$(ninja -C "$build" -t targets all | grep -oE '^[A-Za-z0-9_]+:' | tr -d :)
  for n in $(ctest --test-dir "$build" -L gpu -N | sed -n 's/^ *Test *#[0-9]*: gpu\.//p'); do
    for t in "$n" "unit_$n"; do grep -qx "$t" <<<"$targets" && { gpu_tests+=("$t"); break; }; done
  done
  mapfile -t examples < <(grep -E '^gpu_[a-z0-9_]+$' <<<"$targets" | sort -u)
fi
find_bin() { find "$build" -type f -name "$1" -perm -u+x | head -1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
manifest="$stage/MANIFEST.txt"
echo "Tandem GPU kit, built $(date -u +%FT%TZ) from $(git rev-parse --short HEAD) on $(uname -n)" > "$manifest"
# Decided from the link line, before building them.
runtime_only() {
  if ninja -C "$build" -t commands "$1" | tail -1 | grep -qE 'libMLIR|libLLVM'; then
    echo "left out: $1 (links MLIR/LLVM, ~195 MB of libraries; run it with scripts/test-gpu.sh where Tandem builds)" | tee -a "$manifest" >&2
    return 1
  fi
}
keep=() writers=()
for t in "${gpu_tests[@]}" "${examples[@]}"; do runtime_only "$t" && keep+=("$t"); done
# Left out, but run here: the benchmark examples (and the CUDA fusion test) write the plans
# their runtime-only halves (and tandem-run) time and check there.
if [ $tests = 1 ]; then
  for t in gpu_gemm_vs_cublas gpu_elementwise_bandwidth unit_cuda_fusion_gpu_test unit_trainer_test; do
    grep -qx "$t" <<<"$targets" && writers+=("$t")
  done
fi
cmake --build "$build" -j2 --target tandem tandem-run "${keep[@]}" "${writers[@]}" >/dev/null

mkdir -p "$stage/bin/tests" "$stage/bin/examples" "$stage/lib/fallback" "$stage/plans"
add_bin() {  # add_bin PATH DEST_DIR RPATH_TO_LIB
  cp "$1" "$2/" && strip --strip-unneeded "$2/$(basename "$1")"
  patchelf --set-rpath "\$ORIGIN/$3" "$2/$(basename "$1")"
  echo "binary: ${2#$stage/}/$(basename "$1")" >> "$manifest"
}
add_bin "$build/tools/tandem-run" "$stage/bin" ../lib
for t in "${keep[@]}"; do
  if [[ $t == gpu_* ]]; then add_bin "$(find_bin "$t")" "$stage/bin/examples" ../../lib
  else add_bin "$(find_bin "$t")" "$stage/bin/tests" ../../lib; fi
done

# 1b. Plans of the left-out GPU programs, compiled here for cpu,cuda:0=h100 (no GPU needed).
for t in "${writers[@]}"; do
  case $t in
    unit_cuda_fusion_gpu_test)
      d=$stage/bench/cuda_fusion
      TANDEM_KIT_PLANS="$d" "$(find_bin "$t")" --gtest_filter=CudaFusionPlan.WritesKitPlans \
        > "$stage/writer.log" 2>&1 && [ -f "$d/gpu.tplan" ] ;;
    unit_trainer_test)
      d=$stage/bench/training_step
      TANDEM_KIT_PLANS="$d" "$(find_bin "$t")" --gtest_filter=TrainingStepKitPlan.WritesKitPlans \
        > "$stage/writer.log" 2>&1 && [ -f "$d/gpu.tplan" ] ;;
    *) d=$stage/bench/$t; "$(find_bin "$t")" --write-plans "$d" > "$stage/writer.log" 2>&1 ;;
  esac || { cat "$stage/writer.log" >&2; echo "gpu-kit.sh: $t could not write its plans" >&2; exit 1; }
  echo "plans: ${d#$stage/} (from $t): $(du -sb "$d" | cut -f1) bytes" >> "$manifest"
done
rm -f "$stage/writer.log"

# 2. Shared libraries: everything the binaries resolve here except glibc and CUDA's (the lent
# machine has its own, matched to its driver); libstdc++/libgcc_s in lib/fallback, used only
# where the machine's are older (run.sh decides).
system_re='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil)\.so'
cuda_re='^lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nvrtc[a-z-]*|nvJitLink|nvidia-[a-z-]*)\.so'
for f in "$stage"/bin/tandem-run "$stage"/bin/tests/* "$stage"/bin/examples/*; do
  [ -f "$f" ] || continue
  ldd "$f" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ $name =~ $system_re ]] || [[ $name =~ $cuda_re ]]; then continue; fi
  dest="$stage/lib"
  [[ $name =~ ^lib(stdc\+\+|gcc_s)\.so ]] && dest="$stage/lib/fallback"
  cp -L "$path" "$dest/$name"
  chmod u+w "$dest/$name"
  patchelf --set-rpath '$ORIGIN' "$dest/$name"
  echo "library: ${dest#$stage/}/$name (from $path)" >> "$manifest"
done

# 3. Plans: every model x batch x policy for cpu,cuda:0=h100; constants in one weights file per
# model; test_data_set_0 (batch 1) as the reference data.
tandem=$build/tools/tandem
for m in $models; do
  dir=$models_dir/$m
  [ -f "$dir/model.onnx" ] || { echo "gpu-kit.sh: no $dir/model.onnx" >&2; exit 1; }
  mkdir -p "$stage/plans/$m/data"
  cp "$dir"/test_data_set_0/*.pb "$stage/plans/$m/data/"
  for b in $batches; do
    for p in $policies; do
      "$tandem" compile "$dir/model.onnx" -o "$stage/plans/$m/b$b-$p.tplan" --target cpu,cuda:0=h100 \
        --placement "$p" --dim "N=$b" --weights "$stage/plans/$m/$m.weights" 2> "$stage/compile.log" ||
        { cat "$stage/compile.log" >&2; exit 1; }
    done
  done
  # The PyTorch peers' map from ONNX initializers to this weights file (torch has no onnx there).
  if [ "$m" = resnet18 ] || [ "$m" = mnist_cnn ]; then
    py=python3
    # libonnx-testdata's test data alone makes 'onnx' a namespace package: ask for what is used.
    python3 -c 'import onnx.numpy_helper' 2>/dev/null || py=/usr/bin/python3  # Debian's python3-onnx
    if "$py" -c 'import onnx.numpy_helper' 2>/dev/null; then
      "$py" scripts/kit/torch_peers.py index "$dir" "$stage/plans/$m/$m.weights" "$stage/plans/$m/torch.json" >/dev/null ||
        { echo "gpu-kit.sh: torch_peers.py index $m failed" >&2; exit 1; }
    else
      echo "note: no torch.json for $m (python3 cannot import onnx): run.sh skips its PyTorch peer" | tee -a "$manifest" >&2
    fi
  fi
  echo "plans: $m: $(ls "$stage/plans/$m"/*.tplan | wc -l) plans, $(du -cb "$stage/plans/$m"/*.tplan | tail -1 | cut -f1) bytes; weights $(stat -c %s "$stage/plans/$m/$m.weights") bytes" | tee -a "$manifest"
done
rm -f "$stage/compile.log"

# 4. The kit folder: run.sh beside the packed payload (or the payload itself with --no-pack).
rm -rf "$out" && mkdir -p "$out"
cp scripts/kit/run.sh "$out/run.sh"
cp scripts/kit/torch_peers.py "$stage/torch_peers.py"
if [ $pack = 1 ]; then
  tar -C "$stage" -cf - . | xz -T2 -6 > "$out/kit.tar.xz"
  cp "$manifest" "$out/"
else
  cp -a "$stage"/. "$out/"
fi
bytes=$(du -sb "$out" | cut -f1)
printf 'gpu-kit.sh: %s: %.1f MiB as carried (payload %.1f MiB unpacked); limit %s MiB\n' "$out" \
  "$(echo "$bytes / 1048576" | bc -l)" "$(echo "$(du -sb "$stage" | cut -f1) / 1048576" | bc -l)" "$limit_mib"
# The limit is on what travels: the packed kit (--no-pack is for local use and tests).
if [ $pack = 1 ] && [ "$bytes" -gt $((limit_mib * 1048576)) ]; then
  echo "gpu-kit.sh: $out is over $limit_mib MiB" >&2; exit 1
fi

#!/usr/bin/env bash
# Builds and runs one libFuzzer target (tests/fuzz) for SECONDS:
#   scripts/fuzz.sh onnx|plan|tensor SECONDS [-- extra libFuzzer args]
# onnx: model bytes -> import -> compile (CPU target); plan: plan bytes -> load -> one run with
# zero inputs (runtime only); tensor: tensor-file bytes -> the `--inputs` reader.
# Installs clang-19 and its compiler-rt (Debian) when missing, configures build-fuzz with clang-19
# (-DTANDEM_FUZZ=ON: ASan + UBSan + coverage), seeds build-fuzz/corpus/TARGET from ONNX's test
# data (/usr/share/libonnx-testdata), ../shared/models and, for plans, plans compiled from those
# models by the normal build's tandem (build/, configured like scripts/build.sh). New corpus
# entries stay in build-fuzz/corpus/TARGET between runs; crashes, leaks and timeouts are written
# to build-fuzz/crashes/TARGET/ and make the script exit non-zero. Reproduce one with
#   build-fuzz/tests/fuzz/fuzz_TARGET build-fuzz/crashes/TARGET/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh onnx|plan|tensor SECONDS [-- libFuzzer args]}
seconds=${2:?usage: scripts/fuzz.sh onnx|plan|tensor SECONDS [-- libFuzzer args]}
shift 2
[ "${1:-}" = "--" ] && shift
case "$target" in onnx|plan|tensor) ;; *) echo "fuzz.sh: unknown target '$target' (onnx, plan, tensor)" >&2; exit 2 ;; esac

bash scripts/deps.sh clang-19 libclang-rt-19-dev

if [ ! -f build-fuzz/build.ninja ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-19 \
    -DCMAKE_CXX_COMPILER=clang++-19 -DTANDEM_FUZZ=ON -DTANDEM_ENABLE_CUDA=OFF >/dev/null
fi
cmake --build build-fuzz -j "$(nproc)" --target "fuzz_$target"

onnx_data=/usr/share/libonnx-testdata/data
shared=../shared/models
corpus=build-fuzz/corpus/$target
crashes=build-fuzz/crashes/$target
seeds=build-fuzz/seeds/$target
mkdir -p "$corpus" "$crashes" "$seeds"
# Seeds go to their own directory, read-only to the fuzzer, so the corpus it grows stays small.
# Inputs over 4 MiB are left out: libFuzzer mutates big inputs slowly and finds little in them.
seed_files() {  # NAME-PATTERN: ONNX test data and the shared models' files of that name
  { find "$onnx_data" -name "$1" -size -4M 2>/dev/null
    [ -d "$shared" ] && find -L "$shared" -name "$1" -size -4M 2>/dev/null; } | sort
}
if [ -z "$(ls -A "$seeds")" ]; then
  echo "== seeding $seeds"
  case "$target" in
    onnx)
      seed_files model.onnx | while read -r f; do cp "$f" "$seeds/$(echo "$f" | md5sum | cut -c1-16).onnx"; done ;;
    tensor)
      { seed_files 'input_*.pb'; seed_files 'output_*.pb'; } |
        while read -r f; do cp "$f" "$seeds/$(echo "$f" | md5sum | cut -c1-16).pb"; done ;;
    plan)
      # Plans are made here, never committed: the plan format moves with the compiler.
      if [ ! -f build/build.ninja ]; then
        cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
      fi
      cmake --build build -j "$(nproc)" --target tandem
      # Every 4th ONNX node test (about 270 plans, one per op family) and the shared models
      # small enough to mutate; models tandem refuses are skipped.
      seed_files model.onnx | awk 'NR % 4 == 1' | while read -r f; do
        build/tools/tandem compile "$f" --target cpu -o "$seeds/$(echo "$f" | md5sum | cut -c1-16).tplan" \
          >/dev/null 2>&1 || true
      done ;;
  esac
  echo "   $(ls "$seeds" | wc -l) seeds"
fi

# Sanitizer reports abort; a 2^40-byte request is an error return, not a report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "== fuzz_$target for ${seconds}s (corpus $corpus, crashes in $crashes)"
exec "build-fuzz/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$crashes/" "$@" "$corpus" "$seeds"

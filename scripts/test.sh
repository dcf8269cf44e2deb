#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every test except the `gpu`
# and `slow` labels. On a host with AVX-512 the suite runs a second time capped to AVX2
# (TANDEM_MAX_CPU_ISA, which also caps oneDNN), so both kernel paths are tested where possible.
# Exits non-zero on any failure.
#
# scripts/test.sh --sanitize address,undefined [CTEST ARGS...]  (or --sanitize thread) builds a
# RelWithDebInfo tree with -fsanitize=LIST into its own directory (build-asan, build-tsan) and
# runs the tests there; any sanitizer report fails the test that triggered it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sanitize" ]; then
  san=${2:?--sanitize needs a list: address,undefined or thread}; shift 2
  case "$san" in
    thread) dir=build-tsan; extra=libomp-19-dev ;;
    *) dir=build-asan; extra= ;;
  esac
  bash scripts/deps.sh $extra
  flags="-fsanitize=$san -fno-omit-frame-pointer -fno-sanitize-recover=all"
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="$flags" \
      -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=$san" \
      -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=$san" >/dev/null
  fi
  cmake --build "$dir" -j "$(nproc)"
  cd "$dir"
  # Leak checking stays on; oneDNN's JIT and OpenMP's pools are process-lifetime by design.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1}
  if [ "$san" = thread ]; then
    # GCC's libgomp is not instrumented, so TSan cannot see its barriers and reports every
    # read after an OpenMP region's join as a race. LLVM's OpenMP runtime implements the same
    # GOMP_* entry points and, with its Archer tool, tells TSan about every fork, join,
    # barrier and task, so the OpenMP regions (ours and oneDNN's) are checked, not excluded.
    omp=/usr/lib/llvm-19/lib
    export LD_PRELOAD="$omp/libomp.so.5${LD_PRELOAD:+:$LD_PRELOAD}"
    export OMP_TOOL_LIBRARIES="$omp/libarcher.so"
    # libomp's own internals (its lock initialisation on another thread) are not instrumented
    # either; Archer asks for this so that TSan skips them (reports in our code still count).
    TSAN_OPTIONS="$TSAN_OPTIONS ignore_noninstrumented_modules=1"
    echo "   (OpenMP: LLVM's libomp with the Archer TSan annotations, in place of libgomp)"
  fi
  echo "== tests under -fsanitize=$san in $dir"
  # Left out here, run by the plain suite: the Python tests load the instrumented module into
  # Debian's uninstrumented python3 (the sanitizer runtime must come first), and the package
  # consumers link the installed libraries without the sanitizer's runtime flags.
  echo "   (not run under sanitizers: unit.python, e2e.python_models, install.consumers)"
  exec ctest --output-on-failure -LE 'gpu|slow' -E '^(unit\.python|e2e\.python_models|install\.consumers)$' \
    -j "$(nproc)" "$@"
fi
bash scripts/build.sh
cd build
isa=$(grep -m1 -ow 'avx512f' /proc/cpuinfo || true)
echo "== tests on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') (${isa:-no avx512f}; $(nproc) cores)"
ctest --output-on-failure -LE 'gpu|slow' -j "$(nproc)" "$@"
if [ -n "$isa" ]; then
  echo "== the same tests capped to AVX2 (TANDEM_MAX_CPU_ISA=avx2, ONEDNN_MAX_CPU_ISA=AVX2)"
  TANDEM_MAX_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 ctest --output-on-failure -LE 'gpu|slow' -j "$(nproc)" "$@"
fi

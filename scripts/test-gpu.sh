#!/usr/bin/env bash
# Every GPU check in one command, for a machine with an NVIDIA GPU and the CUDA toolkit (with
# cuDNN): installs missing Debian packages (scripts/deps.sh, nothing else), configures and builds
# with the CUDA backend into build-gpu/, checks a GPU is visible, runs every `gpu` test, the rest
# of the suite with the GPU present, then the GPU benchmarks. Exits non-zero on any failure,
# including a GPU that cannot be seen (every gpu test would otherwise just skip).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=${TANDEM_GPU_BUILD_DIR:-build-gpu}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_ENABLE_CUDA=ON
grep -q '^TANDEM_ENABLE_CUDA:BOOL=ON' "$build/CMakeCache.txt" ||
  { echo "test-gpu.sh: the CUDA toolkit or cuDNN was not found; cannot build the CUDA backend" >&2; exit 1; }
cmake --build "$build" -j "$(nproc)"

echo "== devices"
"$build/tools/tandem" devices
"$build/tools/tandem" devices | grep -q '^cuda:0 ' ||
  { echo "test-gpu.sh: no CUDA device is visible to tandem (see the note above)" >&2; exit 1; }

echo "== gpu tests"
ctest --test-dir "$build" -L gpu --output-on-failure
echo "== the rest of the suite, with a GPU present"
ctest --test-dir "$build" -LE 'gpu|slow' --output-on-failure -j "$(nproc)"

echo "== gpu benchmarks"
"$build/examples/gpu_matmul_sweep"
"$build/examples/gpu_fetch_every_step"
echo "== item-8 benchmarks (scripts/bench-gpu.sh)"
TANDEM_GPU_BUILD_DIR="$build" bash scripts/bench-gpu.sh

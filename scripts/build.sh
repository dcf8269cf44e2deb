#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds Tandem into build/ (Ninja, ccache).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
jobs=$(nproc)
# Each MLIR-including file takes ~1 GB to compile; keep -j within memory on small machines.
cmake --build build -j "$jobs" "$@"

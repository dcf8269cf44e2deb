#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every test except the `gpu`
# and `slow` labels. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure -LE 'gpu|slow' -j "$(nproc)" "$@"

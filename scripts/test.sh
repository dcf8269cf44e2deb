#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every test except the `gpu`
# and `slow` labels. On a host with AVX-512 the suite runs a second time capped to AVX2
# (TANDEM_MAX_CPU_ISA, which also caps oneDNN), so both kernel paths are tested where possible.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
isa=$(grep -m1 -ow 'avx512f' /proc/cpuinfo || true)
echo "== tests on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') (${isa:-no avx512f}; $(nproc) cores)"
ctest --output-on-failure -LE 'gpu|slow' -j "$(nproc)" "$@"
if [ -n "$isa" ]; then
  echo "== the same tests capped to AVX2 (TANDEM_MAX_CPU_ISA=avx2, ONEDNN_MAX_CPU_ISA=AVX2)"
  TANDEM_MAX_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 ctest --output-on-failure -LE 'gpu|slow' -j "$(nproc)" "$@"
fi

#!/usr/bin/env bash
# Compile-time scaling of the pipeline (issue 15: passes must stay linear): generates Relu chains
# and random element-wise DAGs (examples/make_scaling_models.cpp) and prints `tandem compile`
# wall times with fusion on and off. A measurement, not a test.
#   scripts/bench/compile-scaling.sh [BUILD_DIR] [SIZES...]   (default: build 10000 100000 1000000)
set -euo pipefail
build=${1:-build}; shift || true
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(10000 100000 1000000)
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
printf "%-6s %9s %10s %10s\n" kind ops fuse_s no_fuse_s
for kind in chain dag; do
  for n in "${sizes[@]}"; do
    model=$("$build/examples/make_scaling_models" "$dir" "$kind" "$n")
    # Seconds of one compile, or "failed" (a failed compile is not a time).
    t() {
      local s e; s=$(date +%s.%N)
      "$build/tools/tandem" compile "$model" -o "$dir/p.tplan" "$@" >/dev/null 2>&1 || { echo failed; return; }
      e=$(date +%s.%N); printf "%.2f" "$(echo "$e - $s" | bc)"
    }
    printf "%-6s %9d %10s %10s\n" "$kind" "$n" "$(t)" "$(t --no-fuse)"
    rm -f "$model" "$dir/p.tplan"
  done
done

#!/usr/bin/env bash
# Installs the Debian packages Tandem builds and runs with; idempotent and quiet when all are there.
# scripts/deps.sh [PACKAGE...] also installs the given packages (the fuzz and sanitizer scripts'
# extras: clang-19, compiler-rt, LLVM's OpenMP runtime).
set -euo pipefail
PKGS=(cmake ninja-build ccache g++ pkg-config
      llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
      libdnnl-dev ocl-icd-opencl-dev
      libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
      libgtest-dev libgmock-dev libbenchmark-dev libboost-graph-dev
      nlohmann-json3-dev libcli11-dev libglpk-dev libssl-dev patchelf
      dataset-fashion-mnist python3 python3-dev python3-numpy pybind11-dev zlib1g-dev "$@")
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "tandem: installing missing Debian packages: ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# install: `cmake --install` into a temporary prefix, then two consumers of it built from
# tests/install: with find_package(Tandem CONFIG) (runtime_consumer on Tandem::runtime,
# compiler_consumer on Tandem::compiler) and with pkg-config (tandem-runtime.pc, tandem.pc).
# runtime_consumer runs a plan `tandem compile` made from ONNX's test_relu; compiler_consumer
# compiles test_relu in-process and matches its reference output. Where the build has the Python
# module, the installed one is imported and runs test_relu.
set -uo pipefail
src=$1 build=$2 tandem=$3
relu=/usr/share/libonnx-testdata/data/node/test_relu
[ -f "$relu/model.onnx" ] || { echo "SKIP: $relu absent (Debian libonnx-testdata)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
ok() { if [ "$1" = 0 ]; then echo "ok: $2"; else echo "FAIL: $2"; fails=$((fails+1)); fi; }
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
ok $? "cmake --install into $prefix"
for f in include/tandem/runtime/Executable.h include/tandem/compiler/Plan.pb.h \
         include/tandem/compiler/Compiler.h include/tandem/compiler/TandemOps.h.inc \
         include/tandem/frontend/GraphBuilder.h include/tandem/frontend/OnnxImporter.h \
         include/tandem/tools/driver/Driver.h lib/libtandem_runtime.a lib/libtandem_compiler.a \
         lib/cmake/Tandem/TandemConfig.cmake lib/cmake/Tandem/TandemConfigVersion.cmake \
         lib/cmake/Tandem/TandemTargets.cmake lib/pkgconfig/tandem.pc lib/pkgconfig/tandem-runtime.pc; do
  [ -f "$prefix/$f" ]; ok $? "installed $f"
done
"$tandem" compile "$relu/model.onnx" -o "$work/relu.tplan" > /dev/null 2>&1
ok $? "tandem compile test_relu"

# 1. find_package(Tandem CONFIG).
cmake -S "$src/tests/install" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release > "$work/cmake.log" 2>&1 &&
  cmake --build "$work/cmake" -j2 > "$work/cmake-build.log" 2>&1
code=$?; [ $code = 0 ] || tail -30 "$work/cmake.log" "$work/cmake-build.log"
ok $code "find_package(Tandem CONFIG) consumers configure and build"
"$work/cmake/runtime_consumer" "$work/relu.tplan" | grep -q "60 elements, relu ok, sum 108.75"
ok $? "runtime_consumer (Tandem::runtime) runs the plan: y = max(x, 0), sum 108.75"
"$work/cmake/compiler_consumer" "$relu" | grep -q "1 outputs match the reference"
ok $? "compiler_consumer (Tandem::compiler) compiles test_relu in-process and matches"
if ldd "$work/cmake/runtime_consumer" | grep -E "libMLIR|libLLVM"; then
  ok 1 "Tandem::runtime pulls in MLIR/LLVM"
else
  ok 0 "Tandem::runtime links no MLIR/LLVM"
fi

# 2. pkg-config, relocatable (${pcfiledir}), no CMake involved.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion tandem)" = "$(pkg-config --modversion tandem-runtime)" ]
ok $? "pkg-config knows tandem and tandem-runtime ($(pkg-config --modversion tandem))"
c++ -std=c++17 -O1 "$src/tests/install/runtime_consumer.cpp" \
    $(pkg-config --cflags --libs tandem-runtime) -o "$work/runtime_pc" &&
  "$work/runtime_pc" "$work/relu.tplan" | grep -q "60 elements, relu ok, sum 108.75"
ok $? "runtime_consumer built with pkg-config tandem-runtime runs the plan"
c++ -std=c++17 -O1 "$src/tests/install/compiler_consumer.cpp" \
    $(pkg-config --cflags --libs tandem) -o "$work/compiler_pc" &&
  "$work/compiler_pc" "$relu" | grep -q "1 outputs match the reference"
ok $? "compiler_consumer built with pkg-config tandem compiles and matches"

# 3. The Python module, where the build has one: imported from the prefix, it compiles and runs
#    test_relu (its RPATH finds libMLIR outside the prefix).
mod=$(find "$prefix" -name 'tandem*.so' -path '*dist-packages*' | head -1)
if [ -n "$mod" ]; then
  PYTHONPATH=$(dirname "$mod") /usr/bin/python3 - "$relu" <<'PY'
import sys, numpy as np, tandem
plan = tandem.compile(sys.argv[1] + "/model.onnx")
x = np.linspace(-2, 2, 60, dtype=np.float32).reshape(plan.inputs[0].shape)
y = list(plan.run({plan.inputs[0].name: x}).values())[0]
assert np.array_equal(y, np.maximum(x, 0)), y
PY
  ok $? "installed Python module (${mod#$prefix/}) compiles and runs test_relu"
fi

echo "$fails failures"
[ "$fails" = 0 ]

#!/usr/bin/env python3
"""Copies an onnxruntime-node install and caps its MLAS kernels to AVX2, for a fair AVX2 peer.

usage: scripts/bench/ort-cap-avx2.py SRC_DIR DST_DIR
  SRC_DIR: a directory with node_modules/onnxruntime-node (what bench-vs-ort.sh installs)
  DST_DIR: written anew; the copy whose libonnxruntime.so.1 is patched

Why: on a host with AVX-512, scripts/test.sh and bench-vs-ort.sh can cap Tandem and oneDNN to
AVX2 (TANDEM_MAX_CPU_ISA=avx2, ONEDNN_MAX_CPU_ISA=AVX2), but ONNX Runtime has no such switch:
MLAS (its CPU GEMM, convolution and activation kernels) chooses AVX-512 code when CPUID reports
AVX512F and XGETBV reports the AVX-512 register state (XCR0 bits 5-7) enabled by the OS. A host
without CPUID faulting cannot hide the CPUID bit, so this script patches MLAS's platform setup,
the one place that reads XCR0 for that choice: right after its XGETBV, the instruction
`mov %eax,%eax` (89 c0) becomes `and $0x1f,%al` (24 1f), which clears bits 5-7 of the XCR0 value
MLAS sees. MLAS then sets up exactly as on an AVX2 + FMA host (its AVX-512 test is
`(xcr0 & 0xE0) == 0xE0`); nothing else in the library changes (the patched bytes are the same
length, and the instruction's upper-half zeroing is already done by XGETBV's 32-bit writes).

The byte signature (XGETBV, then the 20 bytes of MLAS's XCR0 handling in the 1.30 x86-64 build)
must occur exactly once, or the script stops with an error and writes nothing usable: another
ORT build needs its signature checked by hand (objdump -d, look for xgetbv).

Errors: exit 2 with a message when the package or the signature is not found.
"""
import os
import shutil
import sys

SIGNATURE = bytes.fromhex("0f01d0" "89c0" "48c1e220" "4809c2" "48f7d0" "4989d0" "a806")
PATCH_OFFSET = 3          # the `mov %eax,%eax` after XGETBV
PATCH = bytes.fromhex("241f")  # and $0x1f,%al


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    src, dst = sys.argv[1], sys.argv[2]
    pkg = os.path.join(src, "node_modules", "onnxruntime-node")
    if not os.path.isdir(pkg):
        print(f"ort-cap-avx2: {pkg} not found (install onnxruntime-node there first)", file=sys.stderr)
        return 2
    lib_rel = os.path.join("node_modules", "onnxruntime-node", "bin", "napi-v6", "linux", "x64",
                           "libonnxruntime.so.1")
    data = open(os.path.join(src, lib_rel), "rb").read()
    hits = []
    start = data.find(SIGNATURE)
    while start >= 0:
        hits.append(start)
        start = data.find(SIGNATURE, start + 1)
    if len(hits) != 1:
        print(f"ort-cap-avx2: MLAS's XCR0 check found {len(hits)} times in {lib_rel} (expected 1); "
              "this ONNX Runtime build needs its signature checked by hand", file=sys.stderr)
        return 2
    at = hits[0] + PATCH_OFFSET
    patched = data[:at] + PATCH + data[at + len(PATCH):]
    tmp = dst + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, symlinks=True)
    lib = os.path.join(tmp, lib_rel)
    os.chmod(lib, 0o755)
    with open(lib, "wb") as f:
        f.write(patched)
    shutil.rmtree(dst, ignore_errors=True)
    os.rename(tmp, dst)
    print(f"ort-cap-avx2: {dst}: MLAS capped to AVX2 (patched file offset {at:#x})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

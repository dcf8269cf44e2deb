"""The BLAS Debian's PyTorch runs its matrix products (nn.Linear) on, for the peer scripts.

Debian's python3-torch links the system libblas.so.3; with only libblas3 installed that is
netlib's reference BLAS, several times slower than OpenBLAS, which would flatter Tandem.
"""
import os
import sys


def blas():
    """The BLAS library's path; warns on stderr when it is the reference one."""
    path = os.path.realpath("/etc/alternatives/libblas.so.3-x86_64-linux-gnu")
    if "/blas/libblas.so" in path:
        print("warning: PyTorch uses the reference BLAS; for a fair comparison: "
              "apt-get install libopenblas0-pthread", file=sys.stderr)
    return path

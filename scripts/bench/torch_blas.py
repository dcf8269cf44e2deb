"""The BLAS Debian's PyTorch runs its matrix products (nn.Linear) on, for the peer scripts.

Debian's python3-torch links the system libblas.so.3; with only libblas3 installed that is
netlib's reference BLAS, several times slower than OpenBLAS, which would flatter Tandem.
"""
import ctypes
import os
import sys


def blas():
    """The BLAS library's path; warns on stderr when it is the reference one."""
    path = os.path.realpath("/etc/alternatives/libblas.so.3-x86_64-linux-gnu")
    if "/blas/libblas.so" in path:
        print("warning: PyTorch uses the reference BLAS; for a fair comparison: "
              "apt-get install libopenblas0-pthread", file=sys.stderr)
    return path


def set_threads(torch, threads, blas_threads=None):
    """torch.set_num_threads(threads) and OpenBLAS's own pool to blas_threads (default: threads).

    torch.set_num_threads does not reach Debian's OpenBLAS, whose pthreads pool is as large as
    the machine (or OPENBLAS_NUM_THREADS): a "1 thread" PyTorch run multiplied its matrices on
    every core, and at 2 threads OpenBLAS's spinning workers competed with PyTorch's OpenMP
    ones. Returns a description for the report line."""
    torch.set_num_threads(threads)
    blas_threads = threads if blas_threads is None else blas_threads
    path = blas()
    try:
        lib = ctypes.CDLL(path)
        lib.openblas_set_num_threads(ctypes.c_int(blas_threads))
        return f"torch threads {threads}, OpenBLAS threads {lib.openblas_get_num_threads()}"
    except (OSError, AttributeError):
        return f"torch threads {threads} (BLAS {os.path.basename(path)}: thread count not set)"

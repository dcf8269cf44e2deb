#!/usr/bin/env bash
# Training speed against PyTorch on this machine: the Keras MNIST CNN on Fashion-MNIST, Adam
# (eps 1e-7, as the peer), batch 128, a window of --max-steps steps per run, Tandem (`tandem
# train`) and PyTorch (../shared/peers/torch_train_fmnist.py) alternated in the same run at each
# thread count. Prints the host, then per thread count each run's images/s and the median
# ratio Tandem time / PyTorch time (< 1: Tandem is faster; the issue's goal is <= 0.8).
#
#   scripts/bench-train-vs-torch.sh [--rounds R (3)] [--threads "1 2"] [--max-steps N (100)]
#                                   [--build DIR (build)] [--peers DIR (../shared/peers)]
#
# Needs /usr/bin/python3 with torch and onnx (Debian's python3-torch, python3-onnx) and the
# Fashion-MNIST IDX files (dataset-fashion-mnist). Run it on a quiet machine: the ratio is only
# meaningful when nothing else competes for the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 threads="1 2" steps=100 build=build peers=../shared/peers
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --max-steps) steps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -f "$peers/torch_train_fmnist.py" ] || { echo "no $peers/torch_train_fmnist.py" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 examples/make_fmnist_models.py "$work" cnn >/dev/null
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
hw=$(grep -qw avx512f /proc/cpuinfo && echo avx512f || (grep -qw avx2 /proc/cpuinfo && echo avx2 || echo sse))
used=$("$build"/tools/tandem devices | awk '$1 == "isa" {print $2; exit}')
echo "host: $cpu; hardware ISA $hw; Tandem/oneDNN ISA $used; $(nproc) cores; $(python3 -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || /usr/bin/python3 -c 'import torch; print("torch", torch.__version__)')"
# Debian's PyTorch does its matrix products (nn.Linear, the Dense layers) through the system
# BLAS: with only libblas3 installed that is the reference BLAS, several times slower than
# OpenBLAS, which would flatter Tandem.
blas=$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || echo unknown)
echo "PyTorch's BLAS: $blas (OPENBLAS_NUM_THREADS = the thread count)"
case $blas in
  */blas/libblas.so.3*) echo "warning: that is the reference BLAS; for a fair comparison: apt-get install libopenblas0-pthread" >&2 ;;
esac
echo "model: Keras MNIST CNN (make_fmnist_models.py), Adam lr 1e-3 eps 1e-7, batch 128, $steps steps per run"
for t in $threads; do
  ratios=()
  for r in $(seq "$rounds"); do
    tan=$("$build"/tools/tandem train "$work/fmnist_cnn.onnx" --data fashion-mnist --optimizer adam \
            --lr 1e-3 --eps 1e-7 --epochs 1 --batch 128 --max-steps "$steps" --seed "$r" \
            --threads "$t" --no-progress 2>&1 | grep -oE "[0-9.]+ (images|samples)/s" | awk '{print $1}')
    # torch.set_num_threads does not reach OpenBLAS's own pool (as large as the machine):
    # without this a "1 thread" PyTorch run multiplies on every core.
    tor=$(OPENBLAS_NUM_THREADS=$t /usr/bin/python3 "$peers/torch_train_fmnist.py" --epochs 1 --threads "$t" --batch 128 \
            --max-steps "$steps" | grep -oE '"images_per_s": [0-9.]+' | awk '{print $2}')
    ratio=$(awk -v a="$tan" -v b="$tor" 'BEGIN { printf "%.3f", b / a }')
    ratios+=("$ratio")
    echo "threads $t round $r: tandem $tan img/s, pytorch $tor img/s, time ratio $ratio"
  done
  med=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
  echo "threads $t: median Tandem/PyTorch epoch-time ratio $med"
done

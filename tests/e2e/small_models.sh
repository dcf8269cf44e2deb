#!/usr/bin/env bash
# e2e: the small models of models/make_models.py (issue 16) against their references with
# `tandem run --expect`: an f16 CNN and an f16 MLP, the same two in bf16 (ops without f16/bf16
# kernels run in f32 between Casts, --tandem-legalize-f16, both rounding modes), a 2-layer bidirectional LSTM, and an int8 QLinearConv ->
# QLinearMatMul model, a QDQ convolution pair (qdq_conv), QDQ matrix products (qdq_linear), a residual conv over a plain residual (hswish_residual), ops of opsets 18-25 (opset18_ops, opset21_ops, opset23_ops, opset24_ops, opset19_resize, opset21_blocked, opset23_attention, opset25_attention, opset23_llama), a model of local functions (local_functions), weight-only quantized products (weight_only) and ONNX Runtime's MatMulNBits (matmul_nbits, matmul_nbits_more), nn.EmbeddingBag as torch.onnx writes it (embedding_bag), and the control-flow models of models/make_control_flow.py
# (dyn_detect: a dynamic region, on two input sets of different output sizes). Each also runs
# without fusion. Exits non-zero on any mismatch.
set -euo pipefail
tandem=$1 dir=$2
run() {  # run MODEL ATOL RTOL [FLAG...]
  local m=$1 atol=$2 rtol=$3
  shift 3
  for fuse in "" --no-fuse; do
    echo "== $m $fuse $*"
    "$tandem" run "$dir/$m/model.onnx" --inputs "$dir/$m/test_data_set_0" \
      --expect "$dir/$m/test_data_set_0" --atol "$atol" --rtol "$rtol" $fuse "$@"
  done
}
# f16: the reference is f32 arithmetic on the same f16 weights and inputs, rounded to f16 once.
# By default Tandem keeps f32 between its f32-computed ops and rounds at the outputs (f32
# islands); with --f16-rounding per-op the model rounds to f16 after each of its 5-14 ops, as
# ONNX defines. Outputs are |y| < 4, where an f16 step is at most 2^-9 (2e-3): rtol 1e-2 allows
# about 5 steps, atol 4e-3 two steps at |y| ~ 2 for outputs near zero that come from larger
# rounded intermediates. Measured per-op: 4.9e-4 (CNN) and 2.0e-3 (MLP) max abs error, one step
# each.
run f16_cnn 4e-3 1e-2
run f16_mlp 4e-3 1e-2
run f16_cnn 4e-3 1e-2 --f16-rounding per-op
run f16_mlp 4e-3 1e-2 --f16-rounding per-op
# bf16: the same networks in bfloat16 (8 significant bits: a step is 2^-8 relative, 1.6e-2 at
# |y| in [2, 4)); the reference is f32 arithmetic on the bf16 weights and inputs, rounded to bf16
# once. Outputs |y| < 3.3: rtol 2e-2 allows about 5 steps, atol 3e-2 two steps at |y| ~ 2 for
# outputs near zero. PyTorch's own bf16 run of these networks is 3.9e-3 (CNN) and 2.3e-2 (MLP)
# max abs from this reference, inside the tolerance.
run bf16_cnn 3e-2 2e-2
run bf16_mlp 3e-2 2e-2
run bf16_mlp 3e-2 2e-2 --f16-rounding per-op
# Opsets 18-25 (models/make_newer_opsets.py): Reduce*-18 with axes inputs and
# noop_with_empty_axes, Split-18's num_outputs, Pad-18's axes, AveragePool-19 / Resize-18 /
# QuantizeLinear-21 / Cast-19 with their new attributes at defaults, DFT-20, GridSample-20,
# Pad-19 wrap, and the new ops Gelu-20, Mish-18, GroupNormalization-18/-21, RMSNormalization-23,
# Swish-24, Bitwise*-18, CenterCropPad-18, AffineGrid-20, Col2Im-18, DeformConv-19,
# RotaryEmbedding-23, TensorScatter-24 and Attention-23/-25 (GQA, past/present cache, causal
# offsets, bool/float/short masks, a fully masked row, softcap, nonpad_kv_seqlen, windows, the
# four qk_matmul_output modes); numpy references in f64 (the rotary ones in f32, as ONNX's),
# one f32 rounding (9.5e-7 measured, DeformConv's sums of 18 products).
run opset18_ops 1e-6 1e-5
run opset21_ops 1e-6 1e-5
run opset23_ops 1e-6 1e-5
run opset24_ops 1e-6 1e-5
# Resize-18's antialias (linear and cubic, with exclude_outside) and axes, -19's
# half_pixel_symmetric, against a port of ONNX's reference (4.8e-7 measured).
run opset19_resize 1e-6 1e-5
# Blocked quantization (opset 21): INT4 / UINT4 weights (widened to 8 bits at import) with
# per-block scales and zero points, a last block narrower than the others, and a blocked QDQ of
# the activations (exact); f32 products of 64 terms (1.4e-6 measured).
run opset21_blocked 1e-5 1e-4
run opset23_attention 1e-6 1e-5
run opset25_attention 1e-6 1e-5
# Two Llama-style decoder layers at opset 23 (RMSNormalization, RotaryEmbedding with
# position_ids, GQA Attention on a past cache, SiLU-gated MLP): f32 products of 64-128 terms
# chained through 14 MatMuls, 1.6e-6 measured.
run opset23_llama 1e-5 1e-4
# Model-local functions (ModelProto.functions, as exporters write modules): a function calling
# another, attribute references given and not, a Constant in a body; inlined at import.
run local_functions 1e-6 1e-5
# LSTM in f32 against PyTorch eager: 7 steps of 2 layers, summation order differs (2e-8 measured).
run lstm 1e-5 1e-4
# int8: the reference follows the ONNX equations with ONNX Runtime's requantization rounding,
# so the quantized values agree exactly and the dequantized output to the last bit.
run int8_qlinear 0 0
# QDQ (models/make_models.py qdq_conv): the two convolutions run as int8 QLinearConv
# (--tandem-fuse-qdq; |W_q| <= 64 and u8 x, so every x86-64 CPU has an exact int8 kernel for
# them) and, with --no-qdq-fusion, in f32 as written. The reference is the QDQ graph in f64: an
# f32 or integer sum may round a value near a tie the other way, one step of y's scale (0.03);
# a wrong bias, scale or zero point is several steps off. Measured: exact here.
run qdq_conv 0.03 0
run qdq_conv 0.03 0 --no-qdq-fusion
echo "== qdq_conv: the fusion happened"
"$tandem" run "$dir/qdq_conv/model.onnx" --inputs "$dir/qdq_conv/test_data_set_0" 2>&1 >/dev/null |
  grep -F "2 convolution(s) in QDQ form"
# QDQ matrix products (models/make_models.py qdq_linear): ONNX Runtime's MatMul -> QuantizeLinear
# (QLinearMatMul), PyTorch QAT's transposed-weight MatMul + bias Add + Relu and ONNX Runtime's
# Gemm with an i32 bias (QLinearMatMulBias), against the QDQ graph in f64: one step of y's scale
# (0.02) at most, as qdq_conv. Measured: exact here, fused and as written.
run qdq_linear 0.02 0
run qdq_linear 0.02 0 --no-qdq-fusion
echo "== qdq_linear: the fusion happened"
"$tandem" run "$dir/qdq_linear/model.onnx" --inputs "$dir/qdq_linear/test_data_set_0" 2>&1 >/dev/null |
  grep -F "3 matrix product(s) in QDQ form"
# Weight-only quantization (models/make_newer_opsets.py weight_only): int8 per column with a bias
# Add, uint8 with zero points far from its values through Gemm's transB, blocked uint4 with zero
# points on 40 rows (the timed variants), int8 through Transpose; and blocks along N, which stay
# folded to f32. The reference is f64 over the dequantized weights: f32 products of 64 terms
# (2.9e-6 measured), fused as DequantizeMatMul and as written.
run weight_only 1e-5 1e-4
run weight_only 1e-5 1e-4 --no-qdq-fusion
echo "== weight_only: the fusion happened"
"$tandem" run "$dir/weight_only/model.onnx" --inputs "$dir/weight_only/test_data_set_0" 2>&1 >/dev/null |
  grep -E "4 matrix product\(s\) of weight-only quantized weights (\(DequantizeLinear|run on weights dequantized)"
# ONNX Runtime's MatMulNBits (models/make_newer_opsets.py matmul_nbits: 4 bits with packed zero
# points, 4 bits on a ragged last block with the default zero point and a bias, 8 bits),
# imported as DequantizeMatMul; f64 references over the dequantized weights (6e-7 measured;
# ONNX Runtime 1.30 itself 1e-6).
run matmul_nbits 1e-5 1e-4
# matmul_nbits_more: 2 bits, g_idx (act-order: rows sorted by group at import, A's columns
# gathered), g_idx of the blocks as they are with a bias, and f16 A, scales and bias (f32
# between Casts). 4.3e-6 max abs measured on the 2-bit product (scales up to 0.3), 0 on the f16
# one; rtol 1e-3 allows the f16 output one rounding step (2^-10 relative) where another host's
# f32 sums round the other way. y5, y6 and y7: accuracy_level 4, the int8-activation path (2-,
# 4- and 8-bit weights), against x quantized per row and block as it does (4.8e-7 measured; the
# f32 products are 2.2e-2 and 2.4e-2 away). ONNX Runtime 1.30 matches y1, y3 and y5-y7 to 1e-6;
# with g_idx it leaves packed zero points out (8 in their place: measured), so its y2 differs.
# accuracy_level 4 allows int8 activations: on a host without AVX2 + FMA (or capped below it)
# y5-y7 stay f32, 2.4e-2 at most from their int8 references, which 5e-2 allows there.
case "${TANDEM_MAX_CPU_ISA:-}" in sse41|SSE41|avx|AVX) cap=below ;; *) cap= ;; esac
int8=
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && [ -z "$cap" ] && int8=yes
if [ -n "$int8" ]; then run matmul_nbits_more 1e-5 1e-3; else run matmul_nbits_more 5e-2 1e-3; fi
# --int8-activations: 'all' makes weight_only's four products quantize their activations too
# (0.025-0.16 measured from the exact references, on outputs up to 16: the per-column ones take
# A per row over all of K; atol 0.1 + rtol 2e-2 allowed), 'none' keeps matmul_nbits_more's
# accuracy_level-4 products f32 (y5-y7 then 2.4e-2 at most from their int8 references). The
# int8 kernel needs AVX2 + FMA: counted only where the host has them uncapped.
run weight_only 0.1 2e-2 --int8-activations all
run matmul_nbits_more 5e-2 1e-3 --int8-activations none
int8_steps() {  # int8_steps MODEL [FLAG...]: steps on the int8 kernel
  local m=$1
  shift
  "$tandem" run "$dir/$m/model.onnx" --inputs "$dir/$m/test_data_set_0" --step-times "$@" 2>&1 |
    grep -c 'dequant_gemm_int8' || true
}
if [ -n "$int8" ]; then
  echo "== --int8-activations: steps on the int8 kernel"
  [ "$(int8_steps matmul_nbits_more)" = 3 ] || { echo "matmul_nbits_more: want 3 int8 steps"; exit 1; }
  [ "$(int8_steps matmul_nbits_more --int8-activations none)" = 0 ] ||
    { echo "matmul_nbits_more --int8-activations none: want 0 int8 steps"; exit 1; }
  [ "$(int8_steps weight_only)" = 0 ] || { echo "weight_only: want 0 int8 steps"; exit 1; }
  [ "$(int8_steps weight_only --int8-activations all)" = 4 ] ||
    { echo "weight_only --int8-activations all: want 4 int8 steps"; exit 1; }
  echo "ok"
fi
# A residual conv writing the host's blocked layout over a plain residual (LR-ASPP's MobileNetV3
# blocks): f32 against PyTorch eager, 2.4e-7 max abs measured.
run hswish_residual 1e-5 1e-4
# Control flow (models/make_control_flow.py): If with differently shaped branches on a constant
# condition and on a run-time one, a Loop its body's condition ends early (with an If inside), a
# reverse Scan over axis 1; every body reads an outer value. Same f32 arithmetic: exact.
run cf_if 0 0
run cf_loop_exit 0 0
run cf_scan_reverse 0 0
# Loops of run-time shapes (models/make_control_flow.py cf_loop_dynamic): a trip count from
# NonZero's count with a body reading a run-time-shaped value, a loop-carried value grown by
# Concat, a while loop stacking scan outputs; eager bodies inside a DynamicRegion. Set 1 has no
# positive value (zero iterations, empty outputs). Same f32 arithmetic: exact.
for set in 0 1; do
  echo "== cf_loop_dynamic set $set"
  "$tandem" run "$dir/cf_loop_dynamic/model.onnx" --inputs "$dir/cf_loop_dynamic/test_data_set_$set" \
    --expect "$dir/cf_loop_dynamic/test_data_set_$set" --atol 0 --rtol 0
done
# EmbeddingBag as torch.onnx exports it (models/make_control_flow.py cf_embedding_bag): a Loop
# over 40 bags of ids (one empty), which the importer makes one EmbeddingBag op; cf_bag_loop,
# the same with keepdims 1, stays a Loop slicing a different range of ids each iteration, the
# eager body's Slice kept once for every range of a length. f32 sums of up to 4 rows against
# numpy's f32.
run cf_embedding_bag 1e-6 1e-6
run cf_bag_loop 1e-6 1e-6
# Four nn.EmbeddingBag exported by torch.onnx (models/make_models.py embedding_bag): sum with
# per-sample weights and an empty bag, mean, max with include_last_offset, fixed-size bags of
# 2-D ids; against PyTorch eager (9.5e-7 measured: sums of up to 5 weighted rows, |y| < 8).
run embedding_bag 1e-5 1e-5
echo "== embedding_bag: the Loops became EmbeddingBag ops"
"$tandem" run "$dir/embedding_bag/model.onnx" --inputs "$dir/embedding_bag/test_data_set_0" 2>&1 >/dev/null |
  grep -F "4 Loop(s) over bags as torch.onnx writes nn.EmbeddingBag"
# A detector's post-processing (models/make_control_flow.py dyn_detect): NonZero, TopK of a
# computed K, an If running NonMaxSuppression, all in one DynamicRegion. Set 0 keeps 3 boxes, set
# 1 none (empty outputs). Sigmoid in f32 against numpy's f64 rounded: 1 ulp (6e-8) measured.
for set in 0 1; do
  for fuse in "" --no-fuse; do
    echo "== dyn_detect set $set $fuse"
    "$tandem" run "$dir/dyn_detect/model.onnx" --inputs "$dir/dyn_detect/test_data_set_$set" \
      --expect "$dir/dyn_detect/test_data_set_$set" --atol 1e-6 --rtol 1e-5 $fuse
  done
done

#!/usr/bin/env bash
# e2e: the CLI's non-model commands and usage errors: help on every command, exit codes.
set -uo pipefail
tandem=$1
models=${2:-}  # ../shared/models, for the checks that need a real model (skipped when absent)
fails=0
# fastest_chosen OUTPUT STEP: in `tandem tune`'s line for STEP ("v1 T unit  v2 T unit  -> vK"),
# the chosen variant vK has the smallest time.
fastest_chosen() {
  grep -m1 -- "$2" <<<"$1" | awk '{
    best = ""; bt = 1e300
    for (i = 1; i < NF; ++i) {
      if ($i == "->") { chosen = $(i + 1); break }
      if ($(i + 1) ~ /^[0-9.]+$/ && ($(i + 2) == "us" || $(i + 2) == "ms" || $(i + 2) == "s")) {
        t = $(i + 1) * ($(i + 2) == "ms" ? 1e3 : $(i + 2) == "s" ? 1e6 : 1)
        if (t < bt) { bt = t; best = $i }
      }
    }
    exit !(best != "" && best == chosen)
  }'
}
check() {  # check EXPECTED_CODE REGEX -- cmd...
  local want=$1 regex=$2; shift 3
  out=$("$@" 2>&1); code=$?
  if [ "$code" != "$want" ] || ! grep -qE -- "$regex" <<<"$out"; then
    echo "FAIL: $* -> exit $code (want $want), output:"; echo "$out" | head -20; fails=$((fails+1))
  else
    echo "ok: $*"
  fi
}
for c in devices kernels compile run bench calibrate tune train; do check 0 "Usage|usage" -- "$tandem" $c --help; done
check 2 "fashion-mnist\[:DIR\] or onnx:DIR" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --data mnist
check 1 "train-images-idx3-ubyte.gz: cannot open" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --data fashion-mnist:/nonexistent
check 2 "--resume and --checkpoint-every need --checkpoint-dir" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --resume
# --save-outputs writes output_K.pb that --expect then accepts (the same model, inputs and seed).
saved=$(mktemp -d)
check 0 "output 0" -- "$tandem" run "$(dirname "$0")/models/fmnist_mlp.onnx" --dim N=3 --save-outputs "$saved/out"
check 0 "PASS" -- "$tandem" run "$(dirname "$0")/models/fmnist_mlp.onnx" --dim N=3 --expect "$saved/out"
rm -rf "$saved"
# A model directory in the ONNX test layout: DIR/model.onnx, with --inputs and --expect from
# DIR/test_data_set_0 (a note says so); --random keeps random inputs and compares nothing; a
# directory without model.onnx is an error naming it.
dyn="$(dirname "$0")/models/dyn_detect"
check 0 "running model.onnx with --inputs and --expect .*test_data_set_0" -- "$tandem" run "$dyn"
check 0 "^PASS" -- "$tandem" run "$dyn"
check 0 "max_abs_err" -- "$tandem" run "$dyn" --expect "$dyn/test_data_set_1" --inputs "$dyn/test_data_set_1"
out=$("$tandem" run "$dyn" --random 2>&1); code=$?
if [ "$code" = 0 ] && ! grep -q "max_abs_err\|note: .*running model.onnx" <<<"$out"; then echo "ok: run DIR --random checks nothing"
else echo "FAIL: run DIR --random -> exit $code:"; echo "$out" | head; fails=$((fails+1)); fi
check 1 "a directory without model.onnx" -- "$tandem" run "$(dirname "$0")/golden"
check 2 "usage error: --loss: bogus not in \{cross-entropy,nll\}" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --loss bogus
check 0 "outputs logits.*or nll.*outputs log-probabilities" -- "$tandem" train --help
check 2 "--nesterov requires a momentum > 0 and zero dampening" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --optimizer sgd --nesterov
check 2 "--lr -1: must be >= 0" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --lr -1
check 2 "--beta1 applies to --optimizer adam and adamw only" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --optimizer sgd --beta1 0.5
check 2 "--alpha applies to --optimizer rmsprop only" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --optimizer adam --alpha 0.9
check 2 "--lr-decay applies to --optimizer adagrad only" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --optimizer rmsprop --lr-decay 0.1
check 2 "--momentum applies to --optimizer sgd and rmsprop only" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --optimizer adagrad --momentum 0.9
check 2 "--initial-accumulator -1: must be >= 0" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --optimizer adagrad --initial-accumulator -1
check 0 "rmsprop \(torch.optim.RMSprop\) or adagrad" -- "$tandem" train --help
check 2 "--label-smoothing 2: must be in \[0, 1\]" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --label-smoothing 2
check 2 "--label-smoothing applies to --loss cross-entropy" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --loss nll --label-smoothing 0.1
check 1 "2 class weights for 10 classes" -- "$tandem" train "$(dirname "$0")/models/fmnist_mlp.onnx" --class-weights 1,2 --data fashion-mnist --max-steps 1
check 0 "Usage|usage" -- "$tandem" --help
check 0 "cpu \(cpu\)" -- "$tandem" devices
check 0 "isa" -- "$tandem" devices
check 0 "\"kind\": \"cpu\"" -- "$tandem" devices --json
check 0 "^Conv +cpu +dnnl" -- "$tandem" kernels
check 0 "^Erf +cpu +ref" -- "$tandem" kernels
check 2 "usage error" -- "$tandem" frobnicate
check 2 "usage error" -- "$tandem" compile
check 2 "usage error" -- "$tandem" run model.onnx --iterations 0
check 2 "usage error" -- "$tandem" run model.onnx --inputs a --random
check 2 "--dim expects" -- "$tandem" compile x.onnx -o y.tplan --dim N
check 1 "cannot open" -- "$tandem" compile /nonexistent/model.onnx -o /tmp/never.tplan
relu=/usr/share/libonnx-testdata/data/node/test_relu/model.onnx
work=$(mktemp -d)
check 0 "digraph placement" -- "$tandem" compile $relu -o $work/a.tplan --log-placement=dot
check 0 "\"reason\": \"only-kernel\"" -- "$tandem" compile $relu -o $work/a.tplan --log-placement=json --target cpu
check 0 "estimated time: plan \(cost\)" -- "$tandem" compile $relu -o $work/a.tplan --log-placement
check 0 "time: tandem-place .* s .*%" -- "$tandem" compile $relu -o $work/a.tplan --time-passes
check 0 "time: total" -- "$tandem" compile $relu -o $work/a.tplan --time-passes --verify-each-pass
check 0 "candidates: cpu .*cuda:0" -- "$tandem" compile $relu -o $work/a.tplan --target cpu,cuda:0=h100 --log-placement
check 0 "policy\(greedy\)" -- "$tandem" compile $relu -o $work/a.tplan --target cpu,cuda:0=h100 --placement greedy --log-placement
check 2 "--target: .*unknown GPU model 'v100'" -- "$tandem" compile $relu -o $work/a.tplan --target cpu,cuda:0=v100
check 2 "usage error" -- "$tandem" compile $relu -o $work/a.tplan --placement fastest
check 0 "PASS" -- "$tandem" run $relu --inputs ${relu%/model.onnx}/test_data_set_0 --expect ${relu%/model.onnx}/test_data_set_0 --target cpu,cpu:1
# A plan for cuda:0 runs there when a GPU is live, else on the CPU with one note saying why.
if "$tandem" devices | grep -q '^cuda:0 '; then
  check 0 "PASS" -- "$tandem" run $relu --inputs ${relu%/model.onnx}/test_data_set_0 --expect ${relu%/model.onnx}/test_data_set_0 --target cpu,cuda:0=h100 --placement gpu
  check 0 "peak memory: .*cuda:0 [1-9]" -- "$tandem" run $relu --random --target cpu,cuda:0=h100 --placement gpu --gpu-memory-fraction 0.5
else
  check 0 "note: (cuda: backend not built|cuda: no CUDA)" -- "$tandem" devices
  check 0 "cuda:0 is not available \((this build has no CUDA backend|no CUDA driver: .*|no CUDA device.*)\): its steps run on the CPU" -- "$tandem" run $relu --inputs ${relu%/model.onnx}/test_data_set_0 --expect ${relu%/model.onnx}/test_data_set_0 --target cpu,cuda:0=h100 --placement gpu
fi
check 0 "^Conv +cuda +cudnn|^Conv +cpu +ref" -- "$tandem" kernels --op Conv
check 2 "--winograd: 4x4 not in" -- "$tandem" run $relu --random --winograd 4x4
check 2 "--tuning: fastest not in" -- "$tandem" run $relu --random --tuning fastest
check 2 "--dim expects NAME=V1,V2" -- "$tandem" tune $relu --dim N
# --winograd picks the algorithm of mnist_cnn's 32 -> 64 3x3 convolution. Winograd runs on the
# 8-channel-blocked layout of oneDNN's AVX2 convolution, so the checks cap the ISA at AVX2: the
# same on AVX2 and AVX-512 hosts (where oneDNN would otherwise pick brgconv on nhwc).
mnist=$models/mnist_cnn
if [ -n "$models" ] && [ -f "$mnist/model.onnx" ] && grep -qw avx2 /proc/cpuinfo; then
  ds=$mnist/test_data_set_1
  capped=(env TANDEM_MAX_CPU_ISA=avx2 "$tandem")
  check 0 "isa +avx2$" -- "${capped[@]}" devices
  check 0 "net.2/Conv .*avx2:winograd_4x4_3x3" -- "${capped[@]}" run $mnist/model.onnx --inputs $ds --step-times --tuning off
  check 0 "net.2/Conv .*avx2:winograd_2x2_3x3" -- "${capped[@]}" run $mnist/model.onnx --inputs $ds --step-times --winograd 2x2 --tuning off
  check 0 "net.2/Conv .*dnnl:jit:avx2" -- "${capped[@]}" run $mnist/model.onnx --inputs $ds --step-times --winograd off --tuning off
  # Kernel choice by measurement (a private cache file): tune measures the three variants of the
  # 3x3 convolution, a second tune reads them back; runs from the cache still match PyTorch;
  # --winograd off leaves oneDNN alone whatever the cache says; a corrupt cache is a note.
  tc=(env TANDEM_MAX_CPU_ISA=avx2 TANDEM_TUNING_CACHE=$work/timings.json "$tandem")
  # The variant chosen is the fastest measured (which one wins depends on the host and the
  # build: under a sanitizer oneDNN's JIT code, not instrumented, beats Tandem's Winograd).
  # A step of 64 KiB or more of weights in a plan larger than L2 is timed with them cold.
  check 0 "net.2/Conv.*dnnl [0-9.]+ .s  winograd2x2 [0-9.]+ .s  winograd4x4 [0-9.]+ .s  -> [a-z0-9]+ \(measured(, weights cold)?\)" -- "${tc[@]}" tune $mnist --dim N=32
  fastest_chosen "$out" "net.2/Conv" || { echo "FAIL: tune did not choose the fastest variant of net.2/Conv"; fails=$((fails+1)); }
  check 0 "net.2/Conv.*-> [a-z0-9]+ \(cached\)" -- "${tc[@]}" tune $mnist --dim N=32
  fastest_chosen "$out" "net.2/Conv" || { echo "FAIL: the cached choice of net.2/Conv is not the fastest"; fails=$((fails+1)); }
  # Tune also times every step of the plan in place (7 steps of 7 distinct ops after fusion)
  # and the placer then reads them: MaxPool, which has no variants, and Relu, fused into a
  # measured Conv, are priced from measurements.
  check 0 "step times of the plan \(median of [0-9]+ profiled runs\): 7 op keys recorded" -- "${tc[@]}" tune $mnist --dim N=32
  check 0 "net.4/MaxPool \(MaxPool\): cpu .* cpu [0-9.]+.s \(measured\)" -- env TANDEM_TUNING=measure "${tc[@]}" compile $mnist/model.onnx --dim N=32 --target cpu --log-placement=text -o $work/m.tplan
  check 0 "net.3/Relu \(Relu\): cpu .* cpu 0us \(in a measured group\)" -- env TANDEM_TUNING=measure "${tc[@]}" compile $mnist/model.onnx --dim N=32 --target cpu --log-placement=text -o $work/m.tplan
  check 0 "PASS" -- "${tc[@]}" run $mnist/model.onnx --inputs $ds --expect $ds --tuning cached --threads 1
  check 0 "net.2/Conv .*dnnl:jit:avx2" -- "${tc[@]}" run $mnist/model.onnx --inputs $ds --step-times --winograd off --tuning measure --threads 1
  echo "{ not json" > $work/bad.json
  check 0 "note: kernel timing cache .*bad.json ignored \(not valid JSON\)" -- env TANDEM_TUNING_CACHE=$work/bad.json "$tandem" run $mnist/model.onnx --random --tuning measure
  check 0 "PASS" -- "${capped[@]}" run $mnist/model.onnx --inputs $ds --expect $ds --winograd off
  check 0 "PASS" -- "${capped[@]}" run $mnist/model.onnx --inputs $ds --expect $ds --winograd 2x2
  # Uncapped, the host's own choice must still match the reference.
  check 0 "PASS" -- "$tandem" run $mnist/model.onnx --inputs $ds --expect $ds
else
  echo "skip: --winograd on mnist_cnn (needs $mnist and an AVX2 CPU)"
fi
# A transformer's projections: PyTorch exports Linear on 3-D input as Add(bias, MatMul) and the
# residual as Add(x, proj). Both Adds run inside the MatMul's measured step (post-ops
# bias+sum), so the placer prices them at nothing more, whichever operand the product is.
gpt=$models/gpt_like
if [ -n "$models" ] && [ -f "$gpt/model.onnx" ]; then
  tg=(env TANDEM_TUNING_CACHE=$work/timings-gpt.json "$tandem")
  check 0 "op keys recorded for the placer" -- "${tg[@]}" tune $gpt --dim N=1
  check 0 "blocks.0/proj/Add \(Add\): cpu .* cpu 0us \(in a measured group\)" -- env TANDEM_TUNING=measure "${tg[@]}" compile $gpt/model.onnx --dim N=1 --target cpu --log-placement=text -o $work/g.tplan
  check 0 "blocks.0/Add_1 \(Add\): cpu .* cpu 0us \(in a measured group\)" -- env TANDEM_TUNING=measure "${tg[@]}" compile $gpt/model.onnx --dim N=1 --target cpu --log-placement=text -o $work/g.tplan
fi
check 0 "TANDEM_MAX_CPU_ISA=bogus is not one of" -- env TANDEM_MAX_CPU_ISA=bogus "$tandem" devices
rm -rf "$work"
echo "$fails failed"
[ "$fails" = 0 ]

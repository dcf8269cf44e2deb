#!/usr/bin/python3
"""Writes the small PyTorch TransformerEncoder models the e2e tests run, in the ONNX backend-test
layout (the files are committed, so the tests need no torch):

  DIR/NAME/model.onnx                        opset 13, dynamic batch axis "N"
  DIR/NAME/test_data_set_0/input_K.pb ...    batch 1
  DIR/NAME/test_data_set_0/output_0.pb       PyTorch eager fp32 output
  DIR/NAME/test_data_set_1/...               batch 32

Models (random weights, fixed seed; d_model 32, 2 heads, FFN 64, 2 layers, sequence 8):
  bert_post_norm  BERT-style: int64 token ids [N,8] and a bool key padding mask [N,8] (True =
                  padding; the last tokens of the later rows) -> token + position embeddings,
                  LayerNorm, nn.TransformerEncoder post-norm (norm_first=False), LayerNorm eps
                  1e-12, GELU (erf) -> hidden states [N,8,32]
  prenorm_causal  f32 embeddings [N,8,32] -> nn.TransformerEncoder pre-norm (norm_first=True),
                  eps 1e-6, GELU (tanh), a causal attention mask (constant, -inf above the
                  diagonal) and a final LayerNorm -> [N,8,32]
  encoder_nomask  f32 embeddings [N,8,32] -> nn.TransformerEncoder with its defaults (post-norm,
                  eps 1e-5, ReLU), attention without any mask -> [N,8,32]

At opset 13 PyTorch writes LayerNorm out as ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul,
Add, and GELU as Div, Erf, Add, Mul, Mul (erf) or Pow, Mul, Add, Mul, Tanh, Add, Mul, Mul (tanh).

Usage (Debian's python3-torch and python3-onnx):
  /usr/bin/python3 make_transformer.py DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn

SEED = 1234
D, HEADS, FF, LAYERS, SEQ, VOCAB = 32, 2, 64, 2, 8, 100


def encoder(norm_first, eps, activation, final_norm):
    layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, activation=activation,
                                       layer_norm_eps=eps, batch_first=True, norm_first=norm_first)
    norm = nn.LayerNorm(D, eps=eps) if final_norm else None
    # enable_nested_tensor=False: the nested-tensor fast path has no ONNX export.
    return nn.TransformerEncoder(layer, LAYERS, norm=norm, enable_nested_tensor=False)


def randomize_norms(model):
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            nn.init.uniform_(m.weight, 0.8, 1.2)
            nn.init.uniform_(m.bias, -0.1, 0.1)


class BertPostNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(SEQ, D)
        self.ln = nn.LayerNorm(D, eps=1e-12)
        self.enc = encoder(False, 1e-12, "gelu", final_norm=False)
        self.register_buffer("pos_ids", torch.arange(SEQ).unsqueeze(0), persistent=False)
        randomize_norms(self)

    def forward(self, ids, pad):
        x = self.ln(self.tok(ids) + self.pos(self.pos_ids))
        return self.enc(x, src_key_padding_mask=pad)


class PreNormCausal(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = encoder(True, 1e-6, nn.GELU(approximate="tanh"), final_norm=True)
        self.register_buffer("mask", torch.triu(torch.full((SEQ, SEQ), float("-inf")), 1),
                             persistent=False)
        randomize_norms(self)

    def forward(self, x):
        return self.enc(x, mask=self.mask)


class EncoderNoMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = encoder(False, 1e-5, "relu", final_norm=False)
        randomize_norms(self)

    def forward(self, x):
        return self.enc(x)


def bert_inputs(n):
    ids = torch.randint(0, VOCAB, (n, SEQ), dtype=torch.int64)
    # Row r pads its last r % 4 tokens (never all of them: a fully masked row is NaN in PyTorch).
    pad = torch.zeros(n, SEQ, dtype=torch.bool)
    for r in range(n):
        if r % 4:
            pad[r, SEQ - r % 4:] = True
    return (ids, pad)


MODELS = {
    "bert_post_norm": (BertPostNorm, bert_inputs, ["input_ids", "padding_mask"]),
    "prenorm_causal": (PreNormCausal, lambda n: (torch.randn(n, SEQ, D),), ["x"]),
    "encoder_nomask": (EncoderNoMask, lambda n: (torch.randn(n, SEQ, D),), ["x"]),
}
BATCHES = [1, 32]


def write(out, name):
    cls, make_inputs, input_names = MODELS[name]
    torch.manual_seed(SEED)
    model = cls().eval()
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    torch.manual_seed(SEED + 1)
    example = make_inputs(2)
    dynamic = {n: {0: "N"} for n in input_names + ["output"]}
    torch.onnx.export(model, example, path, opset_version=13, input_names=input_names,
                      output_names=["output"], dynamic_axes=dynamic, do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    for k, b in enumerate(BATCHES):
        torch.manual_seed(SEED + 100 + b)
        xs = make_inputs(b)
        # Grad enabled: PyTorch's fused encoder fast path (inference only) would be used under
        # no_grad; the reference is the same decomposed path the exporter traced.
        y = model(*xs).detach()
        t = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(t, exist_ok=True)
        for i, (x, n) in enumerate(zip(xs, input_names)):
            with open(os.path.join(t, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(x.numpy(), n).SerializeToString())
        with open(os.path.join(t, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y.numpy().astype(np.float32), "output").SerializeToString())
    ops = sorted({n.op_type for n in m.graph.node})
    print(f"{name:16s} {os.path.getsize(path) / 1e3:7.1f} kB nodes={len(m.graph.node):4d} ops={','.join(ops)}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    torch.set_num_threads(1)
    for name in MODELS:
        write(sys.argv[1], name)


if __name__ == "__main__":
    main()

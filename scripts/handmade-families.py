#!/usr/bin/python3
"""Writes hand-built model families that neither ../shared nor scripts/more-families.py covers
(architectures from outside torchvision, written here in PyTorch), in the ONNX backend-test
layout (OUT/NAME/model.onnx, OUT/NAME/test_data_set_0/{input,output}_K.pb, PyTorch eager fp32
reference, random weights, seed 0, BatchNorms calibrated on the input as more-families.py does):

  gcn             graph convolution over an edge list (i64 [2, E] input): degree by scatter-add,
                  messages gathered by source and summed into targets (ScatterElements
                  reduction "add", opset 16), then an attention-weighted layer (GAT-style
                  softmax over each node's incoming edges, also by scatter-add)
  dlrm            recommendation: bottom MLP over dense features, 6 embedding tables (Gather)
                  and one EmbeddingBag (sum over bags given by offsets: a Loop), pairwise dot
                  interactions (batched MatMul, lower triangle by Gather), top MLP, Sigmoid
  moe             mixture-of-experts transformer block: router Softmax, TopK (k = 2),
                  renormalised gates scattered into [T, E] (ScatterElements), 4 SwiGLU experts
  conformer       speech Conformer (2 blocks, width 144): Conv2d subsampling, half-step
                  feed-forwards (SiLU), self-attention, convolution module (GLU, depthwise
                  Conv1d k = 15, BatchNorm1d)
  tcn             temporal convolutional network: dilated causal Conv1d (left Pad, dilation
                  1..8) with weight normalisation and residuals, over [1, 8, 500]
  pointnet        point-cloud classifier: input and feature transform nets (Conv1d, ReduceMax
                  over points, a learned matrix plus the identity, batched MatMul), [2, 3, 1024]
  vae             convolutional VAE: encoder to mean / log-variance, reparameterisation with the
                  noise as an input, ConvTranspose2d decoder, Sigmoid
  t5_encoder      T5-style encoder (2 layers): RMS LayerNorm, relative-position buckets computed
                  in the graph from the sequence length (Range, Abs, Log, Min, Where, Cast),
                  which is a dynamic dim of the ids input
  mamba           selective state-space model (2 Mamba blocks): causal depthwise Conv1d,
                  Softplus, the scan as CumSum of log-decays and a masked Exp, RMSNorm
  wav2vec         raw-audio encoder: Conv1d feature extractor (GroupNorm with one group per
                  channel, GELU), grouped positional Conv1d (k = 128, 16 groups), 2 transformer
                  layers, over [1, 16000]
  yolo            a YOLO-style detector (320x320): Conv-BN-SiLU, C2f blocks (Split, Concat),
                  SPPF (chained MaxPools), nearest Upsample FPN, box decoding with grids (Pow,
                  Sigmoid), three scales concatenated
  unet            2-D U-Net (1 channel, 128x128): ConvTranspose2d upsampling, skip Concats
  nerf            NeRF MLP over 4,096 rays: Sin/Cos positional encoding of 10 frequencies, 8
                  layers of width 256 with a skip Concat, density and colour heads
  detr            DETR-style detector: ResNet-18 trunk at 256x256, sine positional encoding,
                  nn.Transformer with 50 learned queries, class Softmax and box Sigmoid
  clip_text       CLIP text tower: causal mask, 4 layers, end-of-text pooling by ArgMax and
                  index Gather, projection, L2 normalisation
  ft_transformer  tabular FT-Transformer: numeric feature tokens (broadcast Mul/Add), categorical
                  embeddings with per-column offsets, a CLS token by Expand + Concat

Usage (Debian's python3-torch, python3-torchvision, python3-onnx):
  /usr/bin/python3 scripts/handmade-families.py OUT [NAME ...]
then, e.g.:  tandem run OUT/NAME/model.onnx --inputs OUT/NAME/test_data_set_0 --expect OUT/NAME/test_data_set_0
             scripts/bench-vs-ort.sh OUT/NAME/ ...
"""
import importlib.util
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

_spec = importlib.util.spec_from_file_location(
    "more_families", os.path.join(os.path.dirname(os.path.abspath(__file__)), "more-families.py"))
mf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mf)


class GCN(nn.Module):
    def __init__(self, n, f=32, h=64, c=7):
        super().__init__()
        self.n = n
        self.lin1 = nn.Linear(f, h)
        self.lin2 = nn.Linear(h, h)
        self.att_src = nn.Parameter(torch.randn(h) * 0.1)
        self.att_dst = nn.Parameter(torch.randn(h) * 0.1)
        self.out = nn.Linear(h, c)

    def forward(self, x, edges):
        src, dst = edges[0], edges[1]
        ones = torch.ones(src.shape[0])
        deg = torch.zeros(self.n).scatter_add(0, dst, ones) + 1.0
        norm = deg.pow(-0.5)
        h = self.lin1(x)
        msg = h[src] * (norm[src] * norm[dst]).unsqueeze(1)
        agg = torch.zeros(self.n, h.shape[1]).scatter_add(0, dst.unsqueeze(1).expand(-1, h.shape[1]), msg)
        h = F.relu(agg + h * (norm * norm).unsqueeze(1))
        # GAT-style attention: e_ij = exp(leaky_relu(a.h_i + b.h_j)), normalised per target.
        g = self.lin2(h)
        score = torch.exp(F.leaky_relu((g * self.att_src).sum(1)[src] + (g * self.att_dst).sum(1)[dst], 0.2))
        denom = torch.zeros(self.n).scatter_add(0, dst, score) + 1e-6
        alpha = (score / denom[dst]).unsqueeze(1)
        agg = torch.zeros(self.n, g.shape[1]).scatter_add(0, dst.unsqueeze(1).expand(-1, g.shape[1]), g[src] * alpha)
        return F.log_softmax(self.out(F.elu(agg)), dim=1)


def gcn():
    n, e = 200, 800
    g = torch.Generator().manual_seed(3)
    edges = torch.randint(0, n, (2, e), generator=g)
    return GCN(n), [torch.randn(n, 32), edges], 16


class DLRM(nn.Module):
    def __init__(self, tables=6, rows=1000, d=16):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(13, 64), nn.ReLU(), nn.Linear(64, d), nn.ReLU())
        self.emb = nn.ModuleList(nn.Embedding(rows, d) for _ in range(tables))
        self.bag = nn.EmbeddingBag(rows, d, mode="sum")
        f = tables + 2
        li, lj = torch.tril_indices(f, f, offset=-1)
        self.register_buffer("pairs", li * f + lj)
        self.top = nn.Sequential(nn.Linear(d + len(li), 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, dense, sparse, bag_ids, bag_offsets):
        x = self.bottom(dense)
        feats = [x] + [e(sparse[:, k]) for k, e in enumerate(self.emb)] + [self.bag(bag_ids, bag_offsets)]
        t = torch.stack(feats, dim=1)
        z = torch.bmm(t, t.transpose(1, 2)).flatten(1)[:, self.pairs]
        return torch.sigmoid(self.top(torch.cat([x, z], dim=1)))


def dlrm():
    b = 64
    g = torch.Generator().manual_seed(4)
    lengths = torch.randint(1, 5, (b,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    ids = torch.randint(0, 1000, (int(lengths.sum()),), generator=g)
    return DLRM(), [torch.randn(b, 13), torch.randint(0, 1000, (b, 6), generator=g), ids, offsets], 13


class MoEBlock(nn.Module):
    def __init__(self, d=128, experts=4, hidden=256, heads=4):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.router = nn.Linear(d, experts, bias=False)
        nn.init.normal_(self.router.weight, std=0.5)
        self.w1 = nn.ModuleList(nn.Linear(d, hidden, bias=False) for _ in range(experts))
        self.w3 = nn.ModuleList(nn.Linear(d, hidden, bias=False) for _ in range(experts))
        self.w2 = nn.ModuleList(nn.Linear(hidden, d, bias=False) for _ in range(experts))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        h = self.norm2(x).flatten(0, 1)
        probs = torch.softmax(self.router(h), dim=-1)
        top, idx = torch.topk(probs, 2, dim=-1)
        top = top / top.sum(-1, keepdim=True)
        gates = torch.zeros_like(probs).scatter(1, idx, top)
        y = 0
        for e in range(len(self.w1)):
            y = y + gates[:, e:e + 1] * self.w2[e](F.silu(self.w1[e](h)) * self.w3[e](h))
        return x + y.view_as(x)


class MoE(nn.Module):
    def __init__(self, vocab=500, d=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(MoEBlock(d), MoEBlock(d))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(self.blocks(self.emb(ids)))


def moe():
    return MoE(), [torch.randint(0, 500, (1, 32))], 14


class ConformerBlock(nn.Module):
    def __init__(self, d=144, heads=4, kernel=15):
        super().__init__()
        self.ff1 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))
        self.ff2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))
        self.attn_norm = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.conv_norm = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.pw2 = nn.Conv1d(d, d, 1)
        self.out_norm = nn.LayerNorm(d)

    def forward(self, x):
        x = x + 0.5 * self.ff1(x)
        h = self.attn_norm(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        h = self.conv_norm(x).transpose(1, 2)
        h = self.pw2(F.silu(self.bn(self.dw(F.glu(self.pw1(h), dim=1)))))
        x = x + h.transpose(1, 2)
        x = x + 0.5 * self.ff2(x)
        return self.out_norm(x)


class Conformer(nn.Module):
    def __init__(self, feats=80, d=144, vocab=128):
        super().__init__()
        self.sub = nn.Sequential(nn.Conv2d(1, d, 3, 2), nn.ReLU(), nn.Conv2d(d, d, 3, 2), nn.ReLU())
        self.proj = nn.Linear(d * (((feats - 1) // 2 - 1) // 2), d)
        self.blocks = nn.Sequential(ConformerBlock(d), ConformerBlock(d))
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        h = self.sub(x.unsqueeze(1))
        b, c, t, f = h.shape
        h = self.proj(h.permute(0, 2, 1, 3).reshape(b, t, c * f))
        return F.log_softmax(self.head(self.blocks(h)), dim=-1)


def conformer():
    return Conformer(), [torch.randn(1, 100, 80)], 14


class TCN(nn.Module):
    def __init__(self, cin=8, ch=64, levels=4, kernel=3, classes=10):
        super().__init__()
        self.layers = nn.ModuleList()
        self.downs = nn.ModuleList()
        c = cin
        for k in range(levels):
            conv = nn.utils.weight_norm(nn.Conv1d(c, ch, kernel, dilation=2 ** k))
            self.layers.append(conv)
            self.downs.append(nn.Conv1d(c, ch, 1) if c != ch else nn.Identity())
            c = ch
        self.kernel = kernel
        self.head = nn.Linear(ch, classes)

    def forward(self, x):
        for k, (conv, down) in enumerate(zip(self.layers, self.downs)):
            h = F.relu(conv(F.pad(x, ((self.kernel - 1) * 2 ** k, 0))))
            x = F.relu(h + down(x))
        return self.head(x[:, :, -1])


def tcn():
    return TCN(), [torch.randn(1, 8, 500)], 13


class TNet(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.convs = nn.Sequential(nn.Conv1d(k, 64, 1), nn.BatchNorm1d(64), nn.ReLU(),
                                   nn.Conv1d(64, 128, 1), nn.BatchNorm1d(128), nn.ReLU(),
                                   nn.Conv1d(128, 512, 1), nn.BatchNorm1d(512), nn.ReLU())
        self.fc = nn.Sequential(nn.Linear(512, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, k * k))

    def forward(self, x):
        m = self.fc(torch.max(self.convs(x), 2)[0]).view(-1, self.k, self.k)
        return m + torch.eye(self.k)


class PointNet(nn.Module):
    def __init__(self, classes=16):
        super().__init__()
        self.t3, self.t64 = TNet(3), TNet(64)
        self.conv1 = nn.Sequential(nn.Conv1d(3, 64, 1), nn.BatchNorm1d(64), nn.ReLU())
        self.conv2 = nn.Sequential(nn.Conv1d(64, 128, 1), nn.BatchNorm1d(128), nn.ReLU(),
                                   nn.Conv1d(128, 512, 1), nn.BatchNorm1d(512))
        self.head = nn.Sequential(nn.Linear(512, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, classes))

    def forward(self, pts):
        x = torch.bmm(pts.transpose(1, 2), self.t3(pts)).transpose(1, 2)
        x = self.conv1(x)
        t = self.t64(x)
        x = torch.bmm(x.transpose(1, 2), t).transpose(1, 2)
        x = torch.max(self.conv2(x), 2)[0]
        return F.log_softmax(self.head(x), dim=1), t


def pointnet():
    return PointNet(), [torch.randn(2, 3, 1024)], 13


class VAE(nn.Module):
    def __init__(self, z=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 32, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(32, 64, 4, 2, 1),
                                 nn.BatchNorm2d(64), nn.LeakyReLU(0.2), nn.Conv2d(64, 128, 4, 2, 1),
                                 nn.BatchNorm2d(128), nn.LeakyReLU(0.2))
        self.mu, self.logvar = nn.Linear(128 * 8 * 8, z), nn.Linear(128 * 8 * 8, z)
        self.dec_in = nn.Linear(z, 128 * 8 * 8)
        self.dec = nn.Sequential(nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.ReLU(),
                                 nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.BatchNorm2d(32), nn.ReLU(),
                                 nn.ConvTranspose2d(32, 3, 4, 2, 1), nn.Sigmoid())

    def forward(self, x, eps):
        h = self.enc(x).flatten(1)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.exp(0.5 * logvar) * eps
        return self.dec(self.dec_in(z).view(-1, 128, 8, 8)), mu, logvar


def vae():
    return VAE(), [torch.rand(1, 3, 64, 64), torch.randn(1, 32)], 13


class T5Layer(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = T5Norm(d), T5Norm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.wi, self.wo = nn.Linear(d, ff, bias=False), nn.Linear(ff, d, bias=False)

    def forward(self, x, bias):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) + bias, dim=-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.wo(F.relu(self.wi(self.n2(x))))


class T5Norm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(d))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


class T5Encoder(nn.Module):
    def __init__(self, vocab=600, d=128, heads=4, ff=512, buckets=32, max_distance=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rel = nn.Embedding(buckets, heads)
        self.buckets, self.max_distance = buckets, max_distance
        self.layers = nn.ModuleList(T5Layer(d, heads, ff) for _ in range(2))
        self.norm = T5Norm(d)

    def bucket(self, rel):
        # Bidirectional buckets as in T5: half for each sign, exact below max_exact, log-spaced up
        # to max_distance.
        n = self.buckets // 2
        out = (rel > 0).long() * n
        rel = rel.abs()
        max_exact = n // 2
        large = max_exact + (torch.log(rel.float() / max_exact) / math.log(self.max_distance / max_exact)
                             * (n - max_exact)).long()
        large = torch.min(large, torch.full_like(large, n - 1))
        return out + torch.where(rel < max_exact, rel, large)

    def forward(self, ids):
        t = ids.shape[1]
        pos = torch.arange(t)
        bias = self.rel(self.bucket(pos[None, :] - pos[:, None])).permute(2, 0, 1).unsqueeze(0)
        x = self.emb(ids)
        for layer in self.layers:
            x = layer(x, bias)
        return self.norm(x)


def t5_encoder():
    return (T5Encoder(), [torch.randint(0, 600, (1, 48))], 14,
            {"input_names": ["ids"], "dynamic_axes": {"ids": {1: "seq"}}})


class MambaBlock(nn.Module):
    def __init__(self, d=64, inner=128, state=16, conv=4):
        super().__init__()
        self.inner, self.state = inner, state
        self.norm = T5Norm(d)
        self.in_proj = nn.Linear(d, 2 * inner, bias=False)
        self.conv = nn.Conv1d(inner, inner, conv, groups=inner, padding=conv - 1)
        self.x_proj = nn.Linear(inner, 8 + 2 * state, bias=False)
        self.dt_proj = nn.Linear(8, inner)
        self.a_log = nn.Parameter(torch.log(torch.arange(1, state + 1).float()).repeat(inner, 1))
        self.d = nn.Parameter(torch.ones(inner))
        self.out_proj = nn.Linear(inner, d, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        xz = self.in_proj(self.norm(x))
        u, z = xz[..., :self.inner], xz[..., self.inner:]
        u = F.silu(self.conv(u.transpose(1, 2))[..., :t].transpose(1, 2))
        dbc = self.x_proj(u)
        dt = F.softplus(self.dt_proj(dbc[..., :8]))                      # [b, t, inner]
        bm, cm = dbc[..., 8:8 + self.state], dbc[..., 8 + self.state:]   # [b, t, state]
        a = -torch.exp(self.a_log)                                       # [inner, state]
        s = torch.cumsum(dt.unsqueeze(-1) * a, dim=1)                    # [b, t, inner, state]
        # h_t = sum_{r <= t} exp(s_t - s_r) dt_r B_r u_r; decays above the diagonal are masked
        # before the Exp (they would overflow).
        diff = s.unsqueeze(2) - s.unsqueeze(1)                           # [b, t, r, inner, state]
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool)).view(1, t, t, 1, 1)
        decay = torch.exp(torch.where(causal, diff, torch.full_like(diff, -1e4)))
        drive = (dt * u).unsqueeze(-1) * bm.unsqueeze(2)                 # [b, r, inner, state]
        h = (decay * drive.unsqueeze(1)).sum(2)                          # [b, t, inner, state]
        y = (h * cm.unsqueeze(2)).sum(-1) + self.d * u
        return x + self.out_proj(y * F.silu(z))


class Mamba(nn.Module):
    def __init__(self, vocab=500, d=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(MambaBlock(d), MambaBlock(d))
        self.norm = T5Norm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        return self.head(self.norm(self.blocks(self.emb(ids))))


def mamba():
    return Mamba(), [torch.randint(0, 500, (1, 32))], 14


class Wav2Vec(nn.Module):
    def __init__(self, d=256, heads=4):
        super().__init__()
        layers = [nn.Conv1d(1, 256, 10, 5, bias=False), nn.GroupNorm(256, 256), nn.GELU()]
        for k, s in ((3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)):
            layers += [nn.Conv1d(256, 256, k, s, bias=False), nn.GELU()]
        self.features = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(256)
        self.proj = nn.Linear(256, d)
        self.pos = nn.utils.weight_norm(nn.Conv1d(d, d, 128, padding=64, groups=16), dim=2)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)

    def forward(self, audio):
        h = self.proj(self.norm(self.features(audio.unsqueeze(1)).transpose(1, 2)))
        p = F.gelu(self.pos(h.transpose(1, 2))[..., :-1]).transpose(1, 2)
        return self.encoder(h + p)


def wav2vec():
    return Wav2Vec(), [torch.randn(1, 16000)], 14


def cbs(cin, cout, k=3, s=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class C2f(nn.Module):
    def __init__(self, cin, cout, n=1):
        super().__init__()
        self.c = cout // 2
        self.cv1 = cbs(cin, 2 * self.c, 1)
        self.m = nn.ModuleList(nn.Sequential(cbs(self.c, self.c), cbs(self.c, self.c)) for _ in range(n))
        self.cv2 = cbs((2 + n) * self.c, cout, 1)

    def forward(self, x):
        y = list(self.cv1(x).split((self.c, self.c), 1))
        for m in self.m:
            y.append(y[-1] + m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.cv1, self.cv2 = cbs(c, c // 2, 1), cbs(2 * c, c, 1)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], 1))


class Yolo(nn.Module):
    def __init__(self, classes=80, anchors=3):
        super().__init__()
        self.stem = nn.Sequential(cbs(3, 16, 3, 2), cbs(16, 32, 3, 2), C2f(32, 32))
        self.p3 = nn.Sequential(cbs(32, 64, 3, 2), C2f(64, 64, 2))
        self.p4 = nn.Sequential(cbs(64, 128, 3, 2), C2f(128, 128, 2))
        self.p5 = nn.Sequential(cbs(128, 256, 3, 2), C2f(256, 256), SPPF(256))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.td4, self.td3 = C2f(384, 128), C2f(192, 64)
        self.na, self.no = anchors, classes + 5
        self.heads = nn.ModuleList(nn.Conv2d(c, anchors * self.no, 1) for c in (64, 128, 256))
        self.register_buffer("anchor_wh", torch.tensor([[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119],
                                                        [116, 90, 156, 198, 373, 326]]).float().view(3, 1, 3, 1, 1, 2))

    def forward(self, x):
        x = self.stem(x)
        p3 = self.p3(x)
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        t4 = self.td4(torch.cat([self.up(p5), p4], 1))
        t3 = self.td3(torch.cat([self.up(t4), p3], 1))
        out = []
        for k, (feat, stride) in enumerate(((t3, 8), (t4, 16), (p5, 32))):
            b, _, h, w = feat.shape
            y = self.heads[k](feat).view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
            gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
            grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2).float()
            xy = (y[..., :2] * 2 - 0.5 + grid) * stride
            wh = (y[..., 2:4] * 2) ** 2 * self.anchor_wh[k]
            out.append(torch.cat((xy, wh, y[..., 4:]), -1).view(b, -1, self.no))
        return torch.cat(out, 1)


def yolo():
    return Yolo(), [mf.scene().unsqueeze(0)], 13


class UNet(nn.Module):
    def __init__(self, cin=1, base=16, levels=4):
        super().__init__()

        def block(a, b):
            return nn.Sequential(nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU(),
                                 nn.Conv2d(b, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU())
        chans = [base * 2 ** k for k in range(levels)]
        self.down = nn.ModuleList()
        c = cin
        for ch in chans:
            self.down.append(block(c, ch))
            c = ch
        self.mid = block(c, 2 * c)
        self.ups, self.dec = nn.ModuleList(), nn.ModuleList()
        c = 2 * c
        for ch in reversed(chans):
            self.ups.append(nn.ConvTranspose2d(c, ch, 2, 2))
            self.dec.append(block(2 * ch, ch))
            c = ch
        self.out = nn.Conv2d(c, 1, 1)

    def forward(self, x):
        skips = []
        for d in self.down:
            x = d(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.mid(x)
        for up, dec, skip in zip(self.ups, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], 1))
        return torch.sigmoid(self.out(x))


def unet():
    return UNet(), [mf.scene(128)[:1].unsqueeze(0)], 13


class NeRF(nn.Module):
    def __init__(self, freqs=10, dir_freqs=4, width=256):
        super().__init__()
        self.register_buffer("bands", 2.0 ** torch.arange(freqs).float() * math.pi)
        self.register_buffer("dir_bands", 2.0 ** torch.arange(dir_freqs).float() * math.pi)
        cin = 3 + 6 * freqs
        self.layers = nn.ModuleList([nn.Linear(cin, width)] + [nn.Linear(width, width) for _ in range(3)]
                                    + [nn.Linear(width + cin, width)] + [nn.Linear(width, width) for _ in range(3)])
        self.sigma = nn.Linear(width, 1)
        self.feat = nn.Linear(width, width)
        self.rgb = nn.Sequential(nn.Linear(width + 3 + 6 * dir_freqs, width // 2), nn.ReLU(),
                                 nn.Linear(width // 2, 3), nn.Sigmoid())

    @staticmethod
    def encode(x, bands):
        xb = (x.unsqueeze(-1) * bands).flatten(1)
        return torch.cat([x, torch.sin(xb), torch.cos(xb)], -1)

    def forward(self, pts, dirs):
        e = self.encode(pts, self.bands)
        h = e
        for k, layer in enumerate(self.layers):
            if k == 4:
                h = torch.cat([h, e], -1)
            h = F.relu(layer(h))
        rgb = self.rgb(torch.cat([self.feat(h), self.encode(dirs, self.dir_bands)], -1))
        return F.relu(self.sigma(h)), rgb


def nerf():
    d = torch.randn(4096, 3)
    return NeRF(), [torch.rand(4096, 3) * 2 - 1, d / d.norm(dim=1, keepdim=True)], 13


class DETR(nn.Module):
    def __init__(self, d=128, queries=50, classes=92):
        super().__init__()
        r = torchvision.models.resnet18()
        self.backbone = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2, r.layer3, r.layer4)
        self.proj = nn.Conv2d(512, d, 1)
        self.transformer = nn.Transformer(d, 4, 2, 2, 4 * d, dropout=0.0, batch_first=True)
        self.queries = nn.Parameter(torch.randn(1, queries, d))
        self.cls = nn.Linear(d, classes)
        self.box = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 4))
        self.d = d

    def sine(self, h, w):
        half = self.d // 4
        dim_t = 10000 ** (torch.arange(half).float() / half)
        y = torch.arange(h).float()[:, None, None] / h * 2 * math.pi / dim_t
        x = torch.arange(w).float()[None, :, None] / w * 2 * math.pi / dim_t
        return torch.cat([y.sin().expand(h, w, half), y.cos().expand(h, w, half),
                          x.sin().expand(h, w, half), x.cos().expand(h, w, half)], -1).view(1, h * w, self.d)

    def forward(self, img):
        f = self.proj(self.backbone(img))
        b, d, h, w = f.shape
        src = f.flatten(2).transpose(1, 2) + self.sine(h, w)
        hs = self.transformer(src, self.queries.expand(b, -1, -1))
        return torch.softmax(self.cls(hs), -1), torch.sigmoid(self.box(hs))


def detr():
    return DETR(), [mf.scene(256).unsqueeze(0)], 14


class ClipText(nn.Module):
    def __init__(self, vocab=1000, ctx=32, d=256, heads=4, layers=4, embed=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(ctx, d) * 0.01)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.register_buffer("mask", torch.full((ctx, ctx), float("-inf")).triu(1))
        self.norm = nn.LayerNorm(d)
        self.proj = nn.Parameter(torch.randn(d, embed) / math.sqrt(d))

    def forward(self, ids):
        x = self.encoder(self.tok(ids) + self.pos, mask=self.mask)
        x = self.norm(x)
        x = x[torch.arange(x.shape[0]), ids.argmax(dim=-1)] @ self.proj
        return x / x.norm(dim=-1, keepdim=True)


def clip_text():
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(1, 998, (2, 32), generator=g)
    ids[0, 20] = 999                 # end-of-text: the largest id, as in CLIP's tokenizer
    ids[1, 9] = 999
    return ClipText(), [ids], 14


class FTTransformer(nn.Module):
    def __init__(self, numeric=8, cards=(10, 25, 7, 100), d=64, heads=4, layers=2):
        super().__init__()
        self.w = nn.Parameter(torch.randn(numeric, d) * 0.3)
        self.b = nn.Parameter(torch.randn(numeric, d) * 0.1)
        self.register_buffer("offsets", torch.tensor([0] + list(cards[:-1])).cumsum(0))
        self.cat = nn.Embedding(sum(cards), d)
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Sequential(nn.LayerNorm(d), nn.ReLU(), nn.Linear(d, 3))

    def forward(self, num, cat):
        tokens = torch.cat([self.cls.expand(num.shape[0], -1, -1), num.unsqueeze(-1) * self.w + self.b,
                            self.cat(cat + self.offsets)], 1)
        return self.head(self.encoder(tokens)[:, 0])


def ft_transformer():
    g = torch.Generator().manual_seed(6)
    cat = torch.stack([torch.randint(0, c, (32,), generator=g) for c in (10, 25, 7, 100)], 1)
    return FTTransformer(), [torch.randn(32, 8), cat], 14


FAMILIES = {
    "gcn": gcn,
    "dlrm": dlrm,
    "moe": moe,
    "conformer": conformer,
    "tcn": tcn,
    "pointnet": pointnet,
    "vae": vae,
    "t5_encoder": t5_encoder,
    "mamba": mamba,
    "wav2vec": wav2vec,
    "yolo": yolo,
    "unet": unet,
    "nerf": nerf,
    "detr": detr,
    "clip_text": clip_text,
    "ft_transformer": ft_transformer,
}


def main():
    mf.main(FAMILIES, __doc__, "handmade-families.py", prepare=None)


if __name__ == "__main__":
    main()

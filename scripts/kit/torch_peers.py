#!/usr/bin/env python3
"""PyTorch eager peers of the GPU kit's plans (ResNet-18, mnist_cnn), with the models' ONNX weights.

Two commands, because the lent GPU machine's PyTorch venv has no onnx and the kit cannot carry a
model's weights twice (resnet18's 47 MB random weights barely compress):

  index MODEL_DIR WEIGHTS OUT.json   (here, where scripts/gpu-kit.sh runs: needs python3-onnx)
      Maps each ONNX initializer to the torch parameter it becomes and to its blob in the kit's
      Tandem weights file (WEIGHTS, runtime/WeightsFile.h: SHA-256 over dtype, rank, dims and
      bytes), so torch reads the very bytes Tandem uploads. Initializers the weights file does not
      hold verbatim (under 256 bytes: they stay inline in the plans) go into OUT.json as base64.
  run --model M --index F --weights W --data DIR --batch B   (there, with /opt/torch/.venv/bin/python)
      Builds the model in plain torch.nn (torchvision's ResNet-18 module names; no torchvision
      needed), loads the weights, checks batch 1 against DIR/output_0.pb (PyTorch 1.13's eager
      output the ONNX file was exported with), then times batch B. Prints one JSON object.

What one timed iteration is, on each side (both FP32, TF32 off: torch.backends.cuda.matmul.
allow_tf32 = torch.backends.cudnn.allow_tf32 = False; Tandem never uses TF32):
  torch ("with_copies_ms"): t0; y = model(x_host.to("cuda")); y.cpu(); t1. The input is a
      pageable host tensor, `y.cpu()` waits for the forward and copies the output back.
  Tandem (tandem-run's latency_ms): Executable::run: the input from host memory to the device,
      every step, the output back to host memory, one synchronisation.
  Also reported: torch with the input already on the GPU ("resident_ms", ended by
  torch.cuda.synchronize()), PyTorch's usual benchmark setting.
Medians of --runs after --warmup untimed iterations, under torch.inference_mode(), cudnn.benchmark
off (PyTorch's default). ResNet-18's ONNX graph has BatchNorm folded into the convolutions by the
exporter: variant "folded" (Conv with bias, no BatchNorm: the graph Tandem runs) and variant "bn"
(torchvision's layout, Conv without bias + BatchNorm set to the identity plus the bias: what a
PyTorch user runs) are both timed. Exit 2 (with the reason) when torch or CUDA is missing.
"""
import argparse
import base64
import hashlib
import json
import struct
import sys
import time

# ONNX TensorProto.DataType codes this script knows.
ONNX_DTYPES = {1: "float32", 7: "int64"}


def blob_key(dtype_code, dims, data):
    """runtime/WeightsFile.h's constantKey: SHA-256 over dtype (i32 LE), rank (i32 LE), dims, bytes."""
    h = hashlib.sha256()
    h.update(struct.pack("<ii", dtype_code, len(dims)))
    for d in dims:
        h.update(struct.pack("<q", d))
    h.update(data)
    return h.hexdigest()


def weights_index(path):
    """The weights file's index: hex key -> (offset, bytes). Checks the TNDMWTS1 header."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:8] != b"TNDMWTS1":
            raise SystemExit(f"torch_peers.py: {path}: not a Tandem weights file")
        offset, count = struct.unpack("<QQ", head[8:24])
        f.seek(offset)
        raw = f.read(count * 48)
    if len(raw) != count * 48:
        raise SystemExit(f"torch_peers.py: {path}: truncated index")
    return {raw[i:i + 32].hex(): struct.unpack("<QQ", raw[i + 32:i + 48]) for i in range(0, len(raw), 48)}


# ---- index (here, with onnx) --------------------------------------------------------------------

def full_module_names(onnx_model):
    """ResNet-18's node names give only the last two path parts; the full module path."""
    out = {}
    for n in onnx_model.graph.node:
        if n.op_type in ("Conv", "Gemm"):
            # "/layer2/layer2.0/downsample/downsample.0/Conv" -> "layer2.0.downsample.0": a part
            # that extends the previous one by ".k" replaces it (Sequential children).
            path = []
            for p in n.name.strip("/").split("/")[:-1]:
                if path and p.startswith(path[-1] + "."):
                    path[-1] = p
                else:
                    path.append(p)
            out[n.input[1]] = ".".join(path)
            if len(n.input) > 2:
                out[n.input[2]] = ".".join(path)
    return out


def make_index(model_dir, weights, out_path):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(model_dir + "/model.onnx")
    model = model_dir.rstrip("/").split("/")[-1]
    have = weights_index(weights)
    modules = full_module_names(m) if model == "resnet18" else {}
    entries, inline_bytes = {}, 0
    for init in m.graph.initializer:
        a = numpy_helper.to_array(init)
        code = init.data_type
        if code not in ONNX_DTYPES:
            raise SystemExit(f"torch_peers.py: {init.name}: dtype {code} not handled")
        data = a.astype(ONNX_DTYPES[code]).tobytes()
        dims = list(a.shape)
        if model == "resnet18":
            role = "weight" if a.ndim > 1 else "bias"
            name = modules[init.name] + "." + role
        else:
            name = init.name
        e = {"onnx": init.name, "dtype": ONNX_DTYPES[code], "shape": dims}
        key = blob_key(code, dims, data)
        if key in have:
            e["key"] = key
        else:  # small constants stay inline in the plans, not in the weights file
            e["base64"] = base64.b64encode(data).decode()
            inline_bytes += len(data)
        entries[name] = e
    json.dump({"model": model, "weights_file": weights.split("/")[-1], "tensors": entries},
              open(out_path, "w"), indent=0)
    print(f"torch_peers.py: {out_path}: {len(entries)} tensors, "
          f"{sum('key' in e for e in entries.values())} from the weights file, {inline_bytes} bytes inline")


# ---- run (there, with torch only) ---------------------------------------------------------------

def read_tensor_pb(path):
    """A serialized ONNX TensorProto (dims, data_type, raw_data or float_data) -> (dtype, dims, bytes)."""
    buf = open(path, "rb").read()
    i, dims, code, raw, floats = 0, [], 1, None, []

    def varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    while i < len(buf):
        tag = varint()
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            v = varint()
            if field == 1:
                dims.append(v)
            elif field == 2:
                code = v
        elif wire == 2:
            n = varint()
            chunk = buf[i:i + n]
            i += n
            if field == 1:  # packed dims
                j = 0
                while j < len(chunk):
                    v, shift = 0, 0
                    while True:
                        b = chunk[j]
                        j += 1
                        v |= (b & 0x7F) << shift
                        shift += 7
                        if b < 0x80:
                            break
                    dims.append(v)
            elif field == 9:
                raw = chunk
            elif field == 4:
                floats.append(chunk)
        elif wire == 5:
            if field == 4:
                floats.append(buf[i:i + 4])
            i += 4
        elif wire == 1:
            i += 8
        else:
            raise SystemExit(f"torch_peers.py: {path}: unexpected protobuf wire type {wire}")
    data = raw if raw is not None else b"".join(floats)
    return ONNX_DTYPES.get(code, "float32"), dims, data


def build(torch, nn, model, variant):
    if model == "mnist_cnn":
        class Mnist(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                                         nn.MaxPool2d(2), nn.Identity(), nn.Flatten(), nn.Linear(9216, 128),
                                         nn.ReLU(), nn.Identity(), nn.Linear(128, 10), nn.Softmax(dim=1))

            def forward(self, x):
                return self.net(x)
        return Mnist()
    folded = variant == "folded"

    def bn(c):
        return nn.Identity() if folded else nn.BatchNorm2d(c)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=folded)
            self.bn1 = bn(cout)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=folded)
            self.bn2 = bn(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=folded), bn(cout))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return self.relu(y + (self.downsample(x) if self.downsample is not None else x))

    class ResNet18(nn.Module):  # torchvision.models.resnet18's module names and forward
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=folded)
            self.bn1 = bn(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            cin = 64
            for i, (cout, stride) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)]):
                setattr(self, f"layer{i + 1}", nn.Sequential(Block(cin, cout, stride), Block(cout, cout, 1)))
                cin = cout
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, 1000)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))
    return ResNet18()


def load_weights(torch, net, index, weights, variant):
    """Copies the index's tensors (from the weights file, checked against their SHA-256 keys) into
    `net`. Variant "bn": a Conv's ONNX bias becomes its BatchNorm's bias, the BatchNorm otherwise
    the identity (weight 1, mean 0, var 1 - eps)."""
    blobs = weights_index(weights)
    state = {}
    with open(weights, "rb") as f:
        for name, e in index["tensors"].items():
            if "key" in e:
                off, n = blobs[e["key"]]
                f.seek(off)
                data = f.read(n)
                code = {v: k for k, v in ONNX_DTYPES.items()}[e["dtype"]]
                if blob_key(code, e["shape"], data) != e["key"]:
                    raise SystemExit(f"torch_peers.py: {weights}: blob of {name} does not match its key")
            else:
                data = base64.b64decode(e["base64"])
            t = torch.frombuffer(bytearray(data), dtype=getattr(torch, e["dtype"])).reshape(e["shape"])
            state[name] = t
    if variant == "bn":
        params = dict(net.named_modules())
        for name in list(state):
            module, role = name.rsplit(".", 1)
            if role == "bias" and isinstance(params.get(module), torch.nn.Conv2d):
                bn_name = module.replace("conv", "bn") if "downsample" not in module else module[:-1] + "1"
                b = params[bn_name]
                state[bn_name + ".bias"] = state.pop(name)
                state[bn_name + ".weight"] = torch.ones_like(b.weight)
                state[bn_name + ".running_mean"] = torch.zeros_like(b.running_mean)
                state[bn_name + ".running_var"] = torch.full_like(b.running_var, 1 - b.eps)
                state[bn_name + ".num_batches_tracked"] = b.num_batches_tracked
    net.load_state_dict(state, strict=True)
    return net


def run(a):
    try:
        import torch
        import torch.nn as nn
    except ImportError as e:
        print(f"torch_peers.py: no PyTorch ({e})", file=sys.stderr)
        return 2
    device = "cpu" if a.cpu else "cuda"
    if not a.cpu and not torch.cuda.is_available():
        print("torch_peers.py: PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    index = json.load(open(a.index))
    dtype, dims, data = read_tensor_pb(a.data + "/input_0.pb")
    x1 = torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(dims)
    _, odims, odata = read_tensor_pb(a.data + "/output_0.pb")
    want = torch.frombuffer(bytearray(odata), dtype=torch.float32).reshape(odims)
    variants = ["folded", "bn"] if a.model == "resnet18" else ["plain"]
    result = {"runtime": "torch", "model": a.model, "batch": a.batch, "runs": a.runs, "warmup": a.warmup,
              "torch": torch.__version__, "device": torch.cuda.get_device_name(0) if not a.cpu else "cpu",
              "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
              "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32, "variants": {}}
    ok = True
    for v in variants:
        net = load_weights(torch, build(torch, nn, a.model, v), index, a.weights, v).eval().to(device)
        with torch.inference_mode():
            got = net(x1.to(device)).cpu()
        err = (got - want).abs().max().item()
        tol = 1e-4 + 1e-3 * want.abs().max().item()
        ok &= err <= tol
        host = torch.rand(a.batch, *dims[1:])
        dev = host.to(device)

        def timed(fn):
            with torch.inference_mode():
                for _ in range(a.warmup):
                    fn()
                if not a.cpu:
                    torch.cuda.synchronize()
                t = []
                for _ in range(a.runs):
                    t0 = time.perf_counter()
                    fn()
                    if not a.cpu:
                        torch.cuda.synchronize()
                    t.append(time.perf_counter() - t0)
            t.sort()
            return t[len(t) // 2] * 1e3

        result["variants"][v] = {
            "batch1_max_abs_err": err, "batch1_pass": err <= tol,
            "with_copies_ms": round(timed(lambda: net(host.to(device)).cpu()), 4),
            "resident_ms": round(timed(lambda: net(dev)), 4)}
    result["pass"] = bool(ok)
    print(json.dumps(result))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ix = sub.add_parser("index")
    ix.add_argument("model_dir")
    ix.add_argument("weights")
    ix.add_argument("out")
    r = sub.add_parser("run")
    r.add_argument("--model", choices=["resnet18", "mnist_cnn"], required=True)
    r.add_argument("--index", required=True)
    r.add_argument("--weights", required=True)
    r.add_argument("--data", required=True, help="test_data_set_0 (batch 1): input_0.pb, output_0.pb")
    r.add_argument("--batch", type=int, default=32)
    r.add_argument("--runs", type=int, default=30)
    r.add_argument("--warmup", type=int, default=10)
    r.add_argument("--cpu", action="store_true", help="run on the CPU (to test the weight mapping without a GPU)")
    a = ap.parse_args()
    if a.cmd == "index":
        make_index(a.model_dir, a.weights, a.out)
        return 0
    return run(a)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Tests of the `tandem` Python module (tools/python/TandemModule.cpp).

    PYTHONPATH=build/tools/python TANDEM_CLI=build/tools/tandem \\
        python3 tests/python/test_tandem.py -v Unit      # the small model in models/, errors
    ... TANDEM_SHARED_MODELS=../shared/models python3 tests/python/test_tandem.py -v Models

Unit runs everywhere. Models compiles ../shared/models/{mlp,mnist_cnn,resnet18,gpt_like} and
checks the outputs against the expected ones and against `tandem run --json` (exit 77, ctest's
skip, with the reason printed, when that directory is absent).
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import unittest

import numpy as np

import tandem

HERE = os.path.dirname(os.path.abspath(__file__))
ALL_DTYPES = os.path.join(HERE, "models", "all_dtypes.onnx")
CLI = os.environ.get("TANDEM_CLI", "")
SHARED = os.environ.get("TANDEM_SHARED_MODELS", os.path.join(HERE, "..", "..", "..", "shared", "models"))
NUMERIC = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64,
           "u8": np.uint8, "i8": np.int8}


def all_dtypes_feeds():
    feeds = {f"x_{n}": (np.arange(6).reshape(2, 3) * 7 + 1).astype(t) for n, t in NUMERIC.items()}
    feeds["a_bool"] = np.array([[True, False, True], [False, False, True]])
    feeds["b_bool"] = np.array([[True, True, False], [False, True, True]])
    return feeds


def cli_json(*args):
    """`tandem ARGS --json`: the report object, the whole of stdout (the "run-time inputs"
    line goes to stderr then)."""
    out = subprocess.run([CLI, *args, "--json"], check=True, capture_output=True, text=True,
                         env=dict(os.environ)).stdout
    return json.loads(out)


class Unit(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plan = tandem.compile(ALL_DTYPES, target="cpu", threads=1)
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_version(self):
        self.assertRegex(tandem.__version__, r"^\d+\.\d+\.\d+$")

    def test_devices_match_cli(self):
        devs = tandem.devices()
        self.assertEqual(devs[0]["name"], "cpu")
        self.assertEqual(devs[0]["kind"], "cpu")
        self.assertIn("cores", devs[0]["properties"])
        if CLI:
            cli = json.loads(subprocess.run([CLI, "devices", "--json"], check=True,
                                            capture_output=True, text=True).stdout)
            self.assertEqual([(d["name"], d["kind"], sorted(d["properties"])) for d in devs],
                             [(d["name"], d["kind"], sorted(d["properties"])) for d in cli])

    def test_inputs_outputs(self):
        ins = self.plan.inputs
        self.assertEqual([i.name for i in ins], [f"x_{n}" for n in NUMERIC] + ["a_bool", "b_bool"])
        self.assertEqual([i.dtype for i in ins],
                         [np.dtype(t) for t in NUMERIC.values()] + [np.dtype(bool)] * 2)
        self.assertTrue(all(i.shape == (2, 3) for i in ins))
        self.assertEqual([o.name for o in self.plan.outputs], [f"y_{n}" for n in NUMERIC] + ["y_bool"])
        self.assertEqual(self.plan.outputs[-1].dtype, np.dtype(bool))
        self.assertIn("x_f32", repr(ins[0]))

    def test_run_every_dtype(self):
        feeds = all_dtypes_feeds()
        out = self.plan.run(feeds)
        self.assertEqual(sorted(out), sorted(o.name for o in self.plan.outputs))
        for n, t in NUMERIC.items():
            y = out[f"y_{n}"]
            self.assertEqual(y.dtype, np.dtype(t), n)
            self.assertEqual(y.shape, (2, 3))
            # u8/i8 wrap as ONNX's Add does: 36 + 36 = 72, fine; the values are exact.
            np.testing.assert_array_equal(y, feeds[f"x_{n}"] + feeds[f"x_{n}"], err_msg=n)
        np.testing.assert_array_equal(out["y_bool"], feeds["a_bool"] == feeds["b_bool"])
        self.assertEqual(out["y_bool"].dtype, np.dtype(bool))

    def test_outputs_own_the_runtime_buffer(self):
        y = self.plan.run(all_dtypes_feeds())["y_f32"]
        # Zero-copy: the array's base is the capsule holding the runtime's tensor.
        self.assertFalse(y.flags.owndata)
        self.assertEqual(type(y.base).__name__, "PyCapsule")
        self.assertTrue(y.flags.writeable and y.flags.c_contiguous)
        y[0, 0] = 5  # the buffer is the array's alone: the next run is unaffected
        self.assertEqual(self.plan.run(all_dtypes_feeds())["y_f32"][0, 0], 2)

    def test_list_and_ort_style(self):
        feeds = all_dtypes_feeds()
        by_name = self.plan.run(feeds)
        as_list = [feeds[i.name] for i in self.plan.inputs]
        by_pos = self.plan.run(as_list)
        for k in by_name:
            np.testing.assert_array_equal(by_pos[k], by_name[k])
        every = self.plan.run(None, feeds)
        self.assertIsInstance(every, list)
        self.assertEqual(len(every), 7)
        np.testing.assert_array_equal(every[3], by_name["y_i64"])
        (only,) = self.plan.run(["y_i8"], feeds)
        np.testing.assert_array_equal(only, by_name["y_i8"])

    def test_other_layouts_and_sequences(self):
        feeds = all_dtypes_feeds()
        want = self.plan.run(feeds)["y_f32"]
        f_order = np.asfortranarray(feeds["x_f32"])
        self.assertFalse(f_order.flags.c_contiguous)
        strided = np.zeros((2, 6), np.float32)[:, ::2]
        strided[...] = feeds["x_f32"]
        for x in (f_order, strided, feeds["x_f32"].tolist()):
            got = self.plan.run({**feeds, "x_f32": x})["y_f32"]
            np.testing.assert_array_equal(got, want)
        # A read-only array is read in place too.
        ro = feeds["x_f32"].copy()
        ro.flags.writeable = False
        np.testing.assert_array_equal(self.plan.run({**feeds, "x_f32": ro})["y_f32"], want)

    def test_input_errors(self):
        feeds = all_dtypes_feeds()
        with self.assertRaisesRegex(ValueError, r"unknown input 'nope' \(the plan's inputs: x_f32, "):
            self.plan.run({**feeds, "nope": feeds["x_f32"]})
        missing = dict(feeds)
        del missing["x_i32"]
        with self.assertRaisesRegex(ValueError, r"missing input 'x_i32'"):
            self.plan.run(missing)
        with self.assertRaisesRegex(TypeError, r"input 'x_f32': expected f32\[2,3\], got f64\[2,3\]"):
            self.plan.run({**feeds, "x_f32": feeds["x_f64"]})
        with self.assertRaisesRegex(TypeError, r"input 'x_f32': dtype float16 is not supported"):
            self.plan.run({**feeds, "x_f32": feeds["x_f32"].astype(np.float16)})
        with self.assertRaisesRegex(TypeError, r"input 'x_f32': dtype >f4 is not supported"):
            self.plan.run({**feeds, "x_f32": feeds["x_f32"].astype(">f4")})
        with self.assertRaisesRegex(ValueError, r"input 'x_f32': expected f32\[2,3\], got f32\[3,2\]"):
            self.plan.run({**feeds, "x_f32": feeds["x_f32"].T.copy()})
        with self.assertRaisesRegex(ValueError, r"expected 8 inputs \(x_f32, .*\), got 2"):
            self.plan.run([feeds["x_f32"], feeds["x_f64"]])
        with self.assertRaisesRegex(TypeError, r"feeds must be a dict"):
            self.plan.run(42)
        with self.assertRaisesRegex(TypeError, r"run\(\) takes \(feeds\) or \(output_names, feeds\)"):
            self.plan.run(None, feeds, 1)
        with self.assertRaisesRegex(ValueError, r"unknown output 'z'"):
            self.plan.run(["z"], feeds)

    def test_compile_and_load_errors(self):
        missing = os.path.join(self.tmp.name, "absent.onnx")
        with self.assertRaises(FileNotFoundError):
            tandem.compile(missing)
        with self.assertRaises(FileNotFoundError):
            tandem.load(os.path.join(self.tmp.name, "absent.tplan"))
        with self.assertRaisesRegex(ValueError, r"placement: unknown policy 'fast'"):
            tandem.compile(ALL_DTYPES, placement="fast")
        with self.assertRaisesRegex(ValueError, r"^target: "):
            tandem.compile(ALL_DTYPES, target="cpu,tpu:0")
        with self.assertRaisesRegex(ValueError, r"pins: unknown device 'abacus'"):
            tandem.compile(ALL_DTYPES, pins={"add_f32": "abacus"})
        with self.assertRaisesRegex(ValueError, r"dims: 'N' must be >= 0"):
            tandem.compile(ALL_DTYPES, dims={"N": -1})
        with self.assertRaises(TypeError):
            tandem.compile(ALL_DTYPES, dims={"N": "many"})
        garbage = os.path.join(self.tmp.name, "garbage.onnx")
        with open(garbage, "w") as f:
            f.write("not a model\n")
        with self.assertRaisesRegex(tandem.Error, "garbage.onnx"):
            tandem.compile(garbage)
        self.assertTrue(issubclass(tandem.Error, RuntimeError))
        with self.assertRaisesRegex(tandem.Error, r"not a valid Tandem plan"):
            tandem.load(garbage)
        with self.assertRaises(OSError):
            self.plan.save(os.path.join(self.tmp.name, "no", "such", "dir", "p.tplan"))

    def test_placement_log_and_pins(self):
        plan = tandem.compile(ALL_DTYPES, target="cpu", pins={"add_f32": "CPU:0"})
        text = plan.placement_log()
        self.assertIn("add_f32 (Add): cpu [pinned]", text)
        self.assertIn("add_f64 (Add): cpu [only-kernel]", text)
        log = json.loads(plan.placement_log("json"))
        self.assertEqual(sorted(o["name"] for o in log["ops"]),
                         sorted(["add_" + n for n in NUMERIC] + ["equal_bool"]))
        self.assertTrue(plan.placement_log("dot").lstrip().startswith("digraph"))
        with self.assertRaisesRegex(ValueError, r"format must be 'text', 'json' or 'dot'"):
            plan.placement_log("xml")

    def test_save_load_round_trip(self):
        path = os.path.join(self.tmp.name, "all_dtypes.tplan")
        self.plan.save(path)
        loaded = tandem.load(path, threads=1)
        self.assertEqual([(i.name, i.dtype, i.shape) for i in loaded.inputs],
                         [(i.name, i.dtype, i.shape) for i in self.plan.inputs])
        feeds = all_dtypes_feeds()
        a, b = self.plan.run(feeds), loaded.run(feeds)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
        self.assertEqual(json.loads(loaded.placement_log("json")),
                         json.loads(self.plan.placement_log("json")))
        with self.assertRaisesRegex(ValueError, r"keeps only the JSON log"):
            loaded.placement_log("text")
        if CLI:  # `tandem run` reads the file (random inputs: it loads and runs)
            report = cli_json("run", path, "--random")
            self.assertEqual(sorted(o["name"] for o in report["outputs"]),
                             sorted(o.name for o in self.plan.outputs))

    def test_save_reads_constants_again(self):
        # A Plan keeps no copy of its constants: save() compiles the model again (or reads the
        # .tplan again) and writes only the plan that runs. weights_a/b differ in one weight.
        import shutil
        models = os.path.join(HERE, "models")
        src = os.path.join(self.tmp.name, "weights.onnx")
        shutil.copyfile(os.path.join(models, "weights_a.onnx"), src)
        plan = tandem.compile(src, target="cpu", threads=1)
        x = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
        want = x @ np.array([0.5 * i - 2.0 for i in range(11)] + [1.0], np.float32).reshape(4, 3) \
            + np.array([0.25, -0.5, 1.0], np.float32)
        np.testing.assert_allclose(plan.run({"x": x})["y"], want, rtol=1e-6)
        first = os.path.join(self.tmp.name, "w1.tplan")
        plan.save(first)
        np.testing.assert_allclose(tandem.load(first, threads=1).run({"x": x})["y"], want, rtol=1e-6)

        refused = os.path.join(self.tmp.name, "refused.tplan")
        shutil.copyfile(os.path.join(models, "weights_b.onnx"), src)  # one weight changed
        with self.assertRaisesRegex(tandem.Error, r"no longer gives the plan that runs"):
            plan.save(refused)
        shutil.copyfile(ALL_DTYPES, src)  # another graph
        with self.assertRaisesRegex(tandem.Error, r"no longer gives the plan that runs"):
            plan.save(refused)
        os.remove(src)
        with self.assertRaisesRegex(tandem.Error, r"reads them again from '.*weights.onnx'"):
            plan.save(refused)
        self.assertFalse(os.path.exists(refused))
        shutil.copyfile(os.path.join(models, "weights_a.onnx"), src)  # the source back: saves
        second = os.path.join(self.tmp.name, "w2.tplan")
        plan.save(second)
        with open(first, "rb") as a, open(second, "rb") as b:
            self.assertEqual(a.read(), b.read())

        # A loaded plan reads its .tplan again: the same bytes, or an error once it is gone.
        loaded = tandem.load(first, threads=1)
        third = os.path.join(self.tmp.name, "w3.tplan")
        loaded.save(third)
        with open(first, "rb") as a, open(third, "rb") as b:
            self.assertEqual(a.read(), b.read())
        os.remove(first)
        with self.assertRaisesRegex(tandem.Error, r"reads them again from '.*w1.tplan'"):
            loaded.save(refused)
        self.assertFalse(os.path.exists(refused))
        np.testing.assert_allclose(loaded.run({"x": x})["y"], want, rtol=1e-6)  # still runs

    def test_read_tensor(self):
        path = os.path.join(self.tmp.name, "missing.pb")
        with self.assertRaises(FileNotFoundError):
            tandem.read_tensor(path)


    def test_qdq_fusion_and_f16_rounding_options(self):
        # tests/e2e/models/qdq_conv: two convolutions in QDQ form; fused (the default) they run
        # as int8 QLinearConv and the plan's notes say so; qdq_fusion=False keeps them f32. Both
        # within one quantization step (0.03) of the QDQ graph's f64 reference.
        d = os.path.join(HERE, "..", "e2e", "models", "qdq_conv")
        x = tandem.read_tensor(os.path.join(d, "test_data_set_0", "input_0.pb"))
        want = tandem.read_tensor(os.path.join(d, "test_data_set_0", "output_0.pb"))
        path = os.path.join(d, "model.onnx")
        fused = tandem.compile(path, target="cpu", threads=1)
        plain = tandem.compile(path, target="cpu", threads=1, qdq_fusion=False)
        self.assertTrue(any("2 convolution(s) in QDQ form" in n for n in fused.notes), fused.notes)
        self.assertFalse(any("QDQ form" in n for n in plain.notes), plain.notes)
        self.assertIn("QLinearConv", fused.placement_log("text"))
        self.assertNotIn("QLinearConv", plain.placement_log("text"))
        for plan in (fused, plain):
            y = plan.run({"x": x})["y"]
            np.testing.assert_allclose(y, want, atol=0.03, rtol=0)
        with self.assertRaises(ValueError):
            tandem.compile(path, f16_rounding="sometimes")

    def test_int8_activations_option(self):
        # tests/e2e/models/weight_only: int8_activations="all" lets its 4-bit product (y3)
        # quantize its activations (the plan's notes say so; 2.5e-2 from the exact reference),
        # the default ("model": the model asks for none) and "none" keep every product exact.
        d = os.path.join(HERE, "..", "e2e", "models", "weight_only")
        data = os.path.join(d, "test_data_set_0")
        x = tandem.read_tensor(os.path.join(data, "input_0.pb"))
        x2 = tandem.read_tensor(os.path.join(data, "input_1.pb"))
        want = tandem.read_tensor(os.path.join(data, "output_2.pb"))
        path = os.path.join(d, "model.onnx")
        exact = tandem.compile(path, target="cpu", threads=1)
        int8 = tandem.compile(path, target="cpu", threads=1, int8_activations="all")
        with self.assertRaises(ValueError):
            tandem.compile(path, int8_activations="some")
        if any("no fast kernel for DequantizeMatMul" in n for n in exact.notes):
            self.skipTest("this CPU has no AVX2 + FMA (or TANDEM_MAX_CPU_ISA caps it): the "
                          "weight-only products fold to f32")
        self.assertFalse(any("accuracy_level 4" in n for n in exact.notes), exact.notes)
        self.assertTrue(any("accuracy_level 4 (--int8-activations all)" in n for n in int8.notes),
                        int8.notes)
        np.testing.assert_allclose(exact.run({"x": x, "x2": x2})["y3"], want, atol=1e-5, rtol=0)
        np.testing.assert_allclose(int8.run({"x": x, "x2": x2})["y3"], want, atol=5e-2, rtol=0)


class Models(unittest.TestCase):
    MODELS = ["mlp", "mnist_cnn", "resnet18", "gpt_like"]

    def check_model(self, name):
        d = os.path.join(SHARED, name)
        data = os.path.join(d, "test_data_set_0")
        x = tandem.read_tensor(os.path.join(data, "input_0.pb"))
        want = tandem.read_tensor(os.path.join(data, "output_0.pb"))
        try:  # the same tensors through the onnx package, where it is installed
            import onnx
            from onnx import numpy_helper
            np.testing.assert_array_equal(
                numpy_helper.to_array(onnx.load_tensor(os.path.join(data, "input_0.pb"))), x)
        except ImportError:
            pass
        plan = tandem.compile(os.path.join(d, "model.onnx"), dims={"N": x.shape[0]}, threads=1)
        self.assertEqual(plan.inputs[0].shape, x.shape)
        self.assertEqual(plan.inputs[0].dtype, x.dtype)
        out = plan.run({plan.inputs[0].name: x})[plan.outputs[0].name]
        # The CLI's default tolerances (tandem run --expect): |a-b| <= 1e-4 + 1e-3 |b|.
        np.testing.assert_allclose(out, want, atol=1e-4, rtol=1e-3)
        checksum = float(np.sum(out, dtype=np.float64))
        if CLI:
            # Same model and inputs, one thread each side: the CLI's plan is the same plan.
            report = cli_json("run", os.path.join(d, "model.onnx"), "--inputs", data, "--threads", "1")
            self.assertTrue(math.isclose(report["outputs"][0]["checksum"], checksum,
                                         rel_tol=1e-6, abs_tol=1e-6),
                            f"{name}: CLI {report['outputs'][0]['checksum']} vs Python {checksum}")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, name + ".tplan")
            plan.save(path)
            again = tandem.load(path, threads=1).run([x])[plan.outputs[0].name]
            np.testing.assert_array_equal(again, out)
            if CLI:
                report = cli_json("run", path, "--inputs", data, "--threads", "1")
                self.assertTrue(math.isclose(report["outputs"][0]["checksum"], checksum,
                                             rel_tol=1e-6, abs_tol=1e-6))
        print(f"  {name}: {plan.inputs[0].dtype}{list(x.shape)} -> {list(out.shape)}, "
              f"max |err| {float(np.max(np.abs(out.astype(np.float64) - want))):.2e}, "
              f"checksum {checksum:.6f}", file=sys.stderr)
        return plan, x, out

    def test_mlp_concurrent_runs(self):
        plan, x, out = self.check_model("mlp")
        feeds = {plan.inputs[0].name: x}
        results, errors = [], []

        def worker():
            try:
                for _ in range(20):
                    results.append(plan.run(feeds)[plan.outputs[0].name])
            except Exception as e:  # surfaced below
                errors.append(e)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 80)
        for r in results:  # one plan, one thread count: bit-identical (Executable::run)
            np.testing.assert_array_equal(r, out)

    def test_mlp_fuse_flag(self):
        model = os.path.join(SHARED, "mlp", "model.onnx")
        counts = []
        for fuse in (True, False):
            log = tandem.compile(model, target="cpu", fuse=fuse).placement_log()
            line = next(l for l in log.splitlines() if l.startswith("kernels before -> after fusion"))
            before, after = re.search(r"cpu (\d+) -> (\d+)", line).groups()
            counts.append((int(before), int(after)))
        self.assertLess(counts[0][1], counts[0][0])  # fused: MatMul+Add+Relu become one kernel
        self.assertEqual(counts[1][1], counts[1][0])  # fuse=False: one kernel per op

    def test_mlp_dims_and_shapes(self):
        model = os.path.join(SHARED, "mlp", "model.onnx")
        one = tandem.compile(model, target="cpu", threads=1)  # N unbound: 1, with a note
        self.assertEqual(one.inputs[0].shape, (1, 784))
        self.assertTrue(any("'N'" in n for n in one.notes), one.notes)
        three = tandem.compile(model, target="cpu", dims={"N": 3}, threads=1)
        self.assertEqual(three.inputs[0].shape, (3, 784))
        self.assertEqual(three.outputs[0].shape, (3, 10))
        x = np.random.default_rng(0).random((3, 784), dtype=np.float32)
        batch = three.run([x])["output"]
        rows = np.concatenate([one.run([x[i:i + 1]])["output"] for i in range(3)])
        np.testing.assert_allclose(batch, rows, atol=1e-6, rtol=1e-5)
        two = tandem.compile(model, target="cpu", dims={"N": 3}, shapes={"input": (2, 784)})
        self.assertEqual(two.inputs[0].shape, (2, 784))  # shapes win over dims

    def test_mnist_cnn(self):
        self.check_model("mnist_cnn")

    def test_resnet18(self):
        self.check_model("resnet18")

    def test_gpt_like(self):
        self.check_model("gpt_like")


if __name__ == "__main__":
    if "Models" in sys.argv[1:] and not all(
            os.path.exists(os.path.join(SHARED, m, "model.onnx")) for m in Models.MODELS):
        print(f"SKIP: the shared models are absent ({os.path.abspath(SHARED)}: "
              f"../shared is not beside the checkout)")
        sys.exit(77)
    unittest.main()

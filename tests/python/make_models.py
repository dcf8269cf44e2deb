#!/usr/bin/env python3
"""Writes the small models of test_tandem.py into models/ (python3-onnx).

all_dtypes.onnx: one graph input per Tandem dtype, shape [2, 3]: y_<t> = Add(x_<t>, x_<t>) for
the numeric ones, y_bool = Equal(a_bool, b_bool), so every dtype goes in and comes out of a plan.
weights_a.onnx, weights_b.onnx: y = MatMul(x [1, 4], W [4, 3]) + b [3], the same graph with
W's last element 1.0 in a and 2.0 in b (Plan.save's check that the constants it reads again are
the ones the plan runs with).
"""
import os

import onnx
from onnx import TensorProto, helper

NUMERIC = [("f32", TensorProto.FLOAT), ("f64", TensorProto.DOUBLE), ("i32", TensorProto.INT32),
           ("i64", TensorProto.INT64), ("u8", TensorProto.UINT8), ("i8", TensorProto.INT8)]

inputs, outputs, nodes = [], [], []
for name, code in NUMERIC:
    inputs.append(helper.make_tensor_value_info(f"x_{name}", code, [2, 3]))
    outputs.append(helper.make_tensor_value_info(f"y_{name}", code, [2, 3]))
    nodes.append(helper.make_node("Add", [f"x_{name}", f"x_{name}"], [f"y_{name}"], name=f"add_{name}"))
inputs += [helper.make_tensor_value_info(n, TensorProto.BOOL, [2, 3]) for n in ("a_bool", "b_bool")]
outputs.append(helper.make_tensor_value_info("y_bool", TensorProto.BOOL, [2, 3]))
nodes.append(helper.make_node("Equal", ["a_bool", "b_bool"], ["y_bool"], name="equal_bool"))

graph = helper.make_graph(nodes, "all_dtypes", inputs, outputs)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="tandem tests/python/make_models.py")
model.ir_version = 8
onnx.checker.check_model(model)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "all_dtypes.onnx")
onnx.save(model, out)
print("wrote", out)

for suffix, last in (("a", 1.0), ("b", 2.0)):
    w = [0.5 * i - 2.0 for i in range(11)] + [last]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"], name="matmul"),
         helper.make_node("Add", ["xw", "b"], ["y"], name="bias")],
        "weights", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        initializer=[helper.make_tensor("W", TensorProto.FLOAT, [4, 3], w),
                     helper.make_tensor("b", TensorProto.FLOAT, [3], [0.25, -0.5, 1.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="tandem tests/python/make_models.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", f"weights_{suffix}.onnx")
    onnx.save(model, out)
    print("wrote", out)

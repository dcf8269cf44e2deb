#!/usr/bin/env python3
"""Writes the control-flow e2e models (issue 16) with numpy references next to them:
cf_if (an If whose branches have different output shapes on a constant condition, and an If on
a run-time condition whose branches read an outer value), cf_loop_exit (a Loop whose body's
condition ends it before its trip count, reading an outer value, with an If inside) and
cf_scan_reverse (a Scan over axis 1 in reverse with an outer value in its body), and dyn_detect
(a detector's post-processing: NonZero over a score threshold, TopK with a K computed from the
candidates' count, an If whose branches read those run-time-shaped values, NonMaxSuppression
inside it; two input sets, the second with no candidate, so its outputs are empty), and
cf_loop_dynamic (Loops whose shapes are known only at run time: a trip count from NonZero's
count with a body reading a run-time-shaped value, a loop-carried value that grows each
iteration by Concat as torch.cat exports it, and a while loop stacking scan outputs; two input
sets, the second with no positive value, so the first Loop runs zero times), and cf_embedding_bag
(nn.EmbeddingBag(mode="sum") as torch.onnx exports it: a Loop over the bags whose body slices
the ids between two offsets, gathers the weight rows and sums them; 40 bags, one of them empty;
the importer makes it one EmbeddingBag op) and cf_bag_loop (the same Loop with ReduceSum's
keepdims 1 and a Reshape after it, a form the importer leaves a Loop: its eager body's Slice
sees a different range and length each iteration, more than it keeps kernels for).
usage: /usr/bin/python3 make_control_flow.py [OUT_DIR]  (default: next to this file)"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
F, B, I = TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64


def save(name, graph, inputs, outputs):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    d = os.path.join(OUT, name, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(OUT, name, "model.onnx"))
    for k, (vi, v) in enumerate(zip(graph.input, inputs)):
        onnx.save_tensor(numpy_helper.from_array(v, vi.name), os.path.join(d, f"input_{k}.pb"))
    for k, (vi, v) in enumerate(zip(graph.output, outputs)):
        onnx.save_tensor(numpy_helper.from_array(v, vi.name), os.path.join(d, f"output_{k}.pb"))


def save_sets(name, graph, sets):
    """`name` with several test data sets: sets is a list of (inputs, outputs)."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    for k, (inputs, outputs) in enumerate(sets):
        d = os.path.join(OUT, name, f"test_data_set_{k}")
        os.makedirs(d, exist_ok=True)
        for j, (vi, v) in enumerate(zip(graph.input, inputs)):
            onnx.save_tensor(numpy_helper.from_array(v, vi.name), os.path.join(d, f"input_{j}.pb"))
        for j, (vi, v) in enumerate(zip(graph.output, outputs)):
            onnx.save_tensor(numpy_helper.from_array(v, vi.name), os.path.join(d, f"output_{j}.pb"))
    onnx.save(model, os.path.join(OUT, name, "model.onnx"))


def cf_if():
    # pick: cond is a constant true, so the plan takes then_branch's [8]; else_branch's is [2].
    then_b = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["t"], axis=0)], "then",
                               [], [helper.make_tensor_value_info("t", F, [8])])
    else_b = helper.make_graph(
        [helper.make_node("Constant", [], ["s0"], value=helper.make_tensor("s0v", I, [1], [0])),
         helper.make_node("Constant", [], ["s1"], value=helper.make_tensor("s1v", I, [1], [2])),
         helper.make_node("Slice", ["x", "s0", "s1"], ["e"])],
        "else", [], [helper.make_tensor_value_info("e", F, [2])])
    # choose: the run-time condition c; both branches read the outer x.
    then2 = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["t2"])], "then2", [],
                              [helper.make_tensor_value_info("t2", F, [4])])
    else2 = helper.make_graph([helper.make_node("Neg", ["x"], ["e2"])], "else2", [],
                              [helper.make_tensor_value_info("e2", F, [4])])
    nodes = [
        helper.make_node("Constant", [], ["yes"], value=helper.make_tensor("yesv", B, [], [True])),
        helper.make_node("If", ["yes"], ["y1"], name="pick", then_branch=then_b, else_branch=else_b),
        helper.make_node("If", ["c"], ["y2"], name="choose", then_branch=then2, else_branch=else2),
    ]
    g = helper.make_graph(nodes, "cf_if",
                          [helper.make_tensor_value_info("x", F, [4]),
                           helper.make_tensor_value_info("c", B, [])],
                          [helper.make_tensor_value_info("y1", F, [8]),
                           helper.make_tensor_value_info("y2", F, [4])])
    x = np.array([1.5, -2.0, 3.0, 0.25], np.float32)
    c = np.array(False)
    save("cf_if", g, [x, c], [np.concatenate([x, x]), -x])


def cf_loop_exit():
    # v doubles until sum(v) >= limit (an outer value), at most M = 10 times; an If inside adds
    # one on odd iterations.
    odd_then = helper.make_graph([helper.make_node("Add", ["d", "one"], ["o1"])], "odd", [],
                                 [helper.make_tensor_value_info("o1", F, [2])])
    odd_else = helper.make_graph([helper.make_node("Identity", ["d"], ["o2"])], "even", [],
                                 [helper.make_tensor_value_info("o2", F, [2])])
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["two"], value=helper.make_tensor("twov", F, [], [2.0])),
         helper.make_node("Constant", [], ["one"], value=helper.make_tensor("onev", F, [], [1.0])),
         helper.make_node("Constant", [], ["i2"], value=helper.make_tensor("i2v", I, [], [2])),
         helper.make_node("Constant", [], ["i1"], value=helper.make_tensor("i1v", I, [], [1])),
         helper.make_node("Mul", ["v", "two"], ["d"]),
         helper.make_node("Mod", ["i", "i2"], ["r"]),
         helper.make_node("Equal", ["r", "i1"], ["odd"]),
         helper.make_node("If", ["odd"], ["v_out"], name="odd_step", then_branch=odd_then,
                          else_branch=odd_else),
         helper.make_node("ReduceSum", ["v_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["c_out"])],
        "body",
        [helper.make_tensor_value_info("i", I, []), helper.make_tensor_value_info("c", B, []),
         helper.make_tensor_value_info("v", F, [2])],
        [helper.make_tensor_value_info("c_out", B, []),
         helper.make_tensor_value_info("v_out", F, [2])])
    nodes = [
        helper.make_node("Constant", [], ["m"], value=helper.make_tensor("mv", I, [], [10])),
        helper.make_node("Constant", [], ["go"], value=helper.make_tensor("gov", B, [], [True])),
        helper.make_node("Loop", ["m", "go", "v0"], ["v_final"], name="grow", body=body),
    ]
    g = helper.make_graph(nodes, "cf_loop_exit",
                          [helper.make_tensor_value_info("v0", F, [2]),
                           helper.make_tensor_value_info("limit", F, [])],
                          [helper.make_tensor_value_info("v_final", F, [2])])
    v0 = np.array([1.0, 2.0], np.float32)
    limit = np.array(100.0, np.float32)
    v, i = v0.copy(), 0
    while i < 10:
        v = v * 2 + (1 if i % 2 == 1 else 0)
        i += 1
        if not v.sum() < limit:
            break
    assert i < 10, i  # the condition, not M, ends it
    save("cf_loop_exit", g, [v0, limit], [v.astype(np.float32)])


def cf_scan_reverse():
    # Over xs[:, t] for t = 2, 1, 0: s = s * 0.5 + next * w (w outer); stacks each s.
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["h"], value=helper.make_tensor("hv", F, [], [0.5])),
         helper.make_node("Mul", ["s", "h"], ["sh"]),
         helper.make_node("Mul", ["nx", "w"], ["nw"]),
         helper.make_node("Add", ["sh", "nw"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["scan_out"])],
        "body",
        [helper.make_tensor_value_info("s", F, [2]), helper.make_tensor_value_info("nx", F, [2])],
        [helper.make_tensor_value_info("s_out", F, [2]),
         helper.make_tensor_value_info("scan_out", F, [2])])
    nodes = [helper.make_node("Scan", ["init", "xs"], ["final", "all"], name="rscan", body=body,
                              num_scan_inputs=1, scan_input_axes=[1], scan_input_directions=[1])]
    g = helper.make_graph(nodes, "cf_scan_reverse",
                          [helper.make_tensor_value_info("init", F, [2]),
                           helper.make_tensor_value_info("xs", F, [2, 3]),
                           helper.make_tensor_value_info("w", F, [2])],
                          [helper.make_tensor_value_info("final", F, [2]),
                           helper.make_tensor_value_info("all", F, [3, 2])])
    init = np.array([1.0, -1.0], np.float32)
    xs = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    w = np.array([2.0, -0.5], np.float32)
    s, outs = init.copy(), []
    for t in (2, 1, 0):
        s = s * 0.5 + xs[:, t] * w
        outs.append(s)
    save("cf_scan_reverse", g, [init, xs, w], [s, np.stack(outs).astype(np.float32)])


def iou(a, b):
    y1, x1 = max(a[0], b[0]), max(a[1], b[1])
    y2, x2 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, y2 - y1) * max(0.0, x2 - x1)
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])
    return inter / (area(a) + area(b) - inter)


def dyn_detect():
    # Everything after NonZero has shapes known only at run time (a DynamicRegion).
    empty = helper.make_tensor("emptyv", I, [0], [])
    then_b = helper.make_graph([helper.make_node("Constant", [], ["none"], value=empty)], "no_boxes",
                               [], [helper.make_tensor_value_info("none", I, [0])])
    else_b = helper.make_graph(
        [helper.make_node("Unsqueeze", ["top_boxes", "ax0"], ["nb"]),
         helper.make_node("Unsqueeze", ["top_scores", "ax0"], ["ns1"]),
         helper.make_node("Unsqueeze", ["ns1", "ax0"], ["ns"]),
         helper.make_node("NonMaxSuppression", ["nb", "ns", "max_out", "iou"], ["sel"]),
         helper.make_node("Gather", ["sel", "two"], ["k2"], axis=1),
         helper.make_node("Squeeze", ["k2", "ax1"], ["kept"])],
        "nms", [], [helper.make_tensor_value_info("kept", I, ["k"])])
    c = lambda name, dt, dims, vals: helper.make_node(
        "Constant", [], [name], value=helper.make_tensor(name + "v", dt, dims, vals))
    nodes = [
        c("ax0", I, [1], [0]), c("ax1", I, [1], [1]), c("two", I, [1], [2]), c("five", I, [1], [5]),
        c("thr", F, [], [0.3]), c("max_out", I, [1], [10]), c("iou", F, [1], [0.5]),
        c("zero", I, [], [0]),
        helper.make_node("Sigmoid", ["logits"], ["prob"]),
        helper.make_node("Squeeze", ["prob", "ax0"], ["p"]),
        helper.make_node("Squeeze", ["boxes", "ax0"], ["b"]),
        helper.make_node("Greater", ["p", "thr"], ["keep"]),
        helper.make_node("NonZero", ["keep"], ["nz"], name="candidates"),
        helper.make_node("Squeeze", ["nz", "ax0"], ["idx"]),
        helper.make_node("Gather", ["b", "idx"], ["cand_boxes"]),
        helper.make_node("Gather", ["p", "idx"], ["cand_scores"]),
        helper.make_node("Shape", ["cand_scores"], ["n"]),
        helper.make_node("Min", ["n", "five"], ["k"]),
        helper.make_node("TopK", ["cand_scores", "k"], ["top_scores", "top_idx"], name="best"),
        helper.make_node("Gather", ["cand_boxes", "top_idx"], ["top_boxes"]),
        helper.make_node("Size", ["cand_scores"], ["count"]),
        helper.make_node("Equal", ["count", "zero"], ["nothing"]),
        helper.make_node("If", ["nothing"], ["kept"], name="batched_nms", then_branch=then_b,
                         else_branch=else_b),
        helper.make_node("Gather", ["top_boxes", "kept"], ["det_boxes"]),
        helper.make_node("Gather", ["top_scores", "kept"], ["det_scores"]),
    ]
    g = helper.make_graph(nodes, "dyn_detect",
                          [helper.make_tensor_value_info("boxes", F, [1, 8, 4]),
                           helper.make_tensor_value_info("logits", F, [1, 8])],
                          [helper.make_tensor_value_info("det_boxes", F, ["d", 4]),
                           helper.make_tensor_value_info("det_scores", F, ["d"]),
                           helper.make_tensor_value_info("prob", F, [1, 8])])
    rng = np.random.RandomState(7)
    corner = rng.uniform(0, 8, size=(8, 2)).astype(np.float32)
    corner[1] = corner[0] + 0.2  # boxes 0 and 1 overlap: NMS drops one
    size = rng.uniform(1, 3, size=(8, 2)).astype(np.float32)
    size[1] = size[0]
    boxes = np.concatenate([corner, corner + size], axis=1)[None].astype(np.float32)
    sets = [np.array([[2.0, 1.5, -3.0, 0.5, 1.0, -1.0, 2.5, 0.1]], np.float32),  # 6 candidates
            np.full((1, 8), -4.0, np.float32)]                                  # none
    results = []
    for logits in sets:
        prob = (1 / (1 + np.exp(-logits.astype(np.float64)))).astype(np.float32)
        p = prob[0]
        idx = np.nonzero(p > np.float32(0.3))[0]
        order = idx[np.argsort(-p[idx], kind="stable")][:5]
        kept = []
        for i in order:
            if all(iou(boxes[0, i], boxes[0, j]) <= 0.5 for j in kept):
                kept.append(i)
        kept = np.array(kept, np.int64)
        results.append([boxes[0, kept].reshape(-1, 4), p[kept], prob])
    save_sets("dyn_detect", g, [([boxes, logits], outs) for logits, outs in zip(sets, results)])


def cf_loop_dynamic():
    c = lambda name, dt, dims, vals: helper.make_node(
        "Constant", [], [name], value=helper.make_tensor(name + "v", dt, dims, vals))
    anyf = lambda name, rank: helper.make_tensor_value_info(name, F, [None] * rank)
    # pick: over the n positive values of x (vals, [n]: a capture of run-time shape), iteration i
    # appends the row [v, v * v] to acc (from [0, 2]) and stacks 10 * v.
    pick = helper.make_graph(
        [c("a0", I, [1], [0]), c("ten", F, [], [10.0]),
         helper.make_node("Gather", ["vals", "i"], ["v"]),
         helper.make_node("Mul", ["v", "v"], ["vv"]),
         helper.make_node("Unsqueeze", ["v", "a0"], ["v1"]),
         helper.make_node("Unsqueeze", ["vv", "a0"], ["vv1"]),
         helper.make_node("Concat", ["v1", "vv1"], ["row"], axis=0),
         helper.make_node("Unsqueeze", ["row", "a0"], ["row1"]),
         helper.make_node("Concat", ["acc", "row1"], ["acc_out"], axis=0),
         helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Mul", ["v", "ten"], ["tens"])],
        "pick_body",
        [helper.make_tensor_value_info("i", I, []), helper.make_tensor_value_info("c", B, []), anyf("acc", 2)],
        [helper.make_tensor_value_info("c_out", B, []), anyf("acc_out", 2), anyf("tens", 0)])
    # grow: static operands, but the carried s grows [0] -> [3] (i as a float each iteration).
    grow = helper.make_graph(
        [c("g0", I, [1], [0]),
         helper.make_node("Cast", ["gi"], ["fi"], to=F),
         helper.make_node("Unsqueeze", ["fi", "g0"], ["fi1"]),
         helper.make_node("Concat", ["gs", "fi1"], ["gs_out"], axis=0),
         helper.make_node("Identity", ["gc"], ["gc_out"])],
        "grow_body",
        [helper.make_tensor_value_info("gi", I, []), helper.make_tensor_value_info("gc", B, []), anyf("gs", 1)],
        [helper.make_tensor_value_info("gc_out", B, []), anyf("gs_out", 1)])
    # double: no trip count; w doubles while sum(w) < 50, each value stacked (a scan output of
    # a length the body's condition decides).
    double = helper.make_graph(
        [c("two", F, [], [2.0]), c("fifty", F, [], [50.0]),
         helper.make_node("Mul", ["w", "two"], ["w_out"]),
         helper.make_node("ReduceSum", ["w_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "fifty"], ["dc_out"]),
         helper.make_node("Identity", ["w_out"], ["w_scan"])],
        "double_body",
        [helper.make_tensor_value_info("di", I, []), helper.make_tensor_value_info("dc", B, []),
         helper.make_tensor_value_info("w", F, [2])],
        [helper.make_tensor_value_info("dc_out", B, []), helper.make_tensor_value_info("w_out", F, [2]),
         helper.make_tensor_value_info("w_scan", F, [2])])
    nodes = [
        c("zero", F, [], [0.0]), c("ax0", I, [1], [0]), c("yes", B, [], [True]), c("three", I, [], [3]),
        helper.make_node("Constant", [], ["acc0"], value=helper.make_tensor("acc0v", F, [0, 2], [])),
        helper.make_node("Constant", [], ["gs0"], value=helper.make_tensor("gs0v", F, [0], [])),
        helper.make_node("Greater", ["x", "zero"], ["keep"]),
        helper.make_node("NonZero", ["keep"], ["nz"], name="positives"),
        helper.make_node("Squeeze", ["nz", "ax0"], ["idx"]),
        helper.make_node("Gather", ["x", "idx"], ["vals"]),
        helper.make_node("Size", ["vals"], ["count"]),
        helper.make_node("Loop", ["count", "yes", "acc0"], ["rows", "tens_all"], name="pick", body=pick),
        helper.make_node("Loop", ["three", "yes", "gs0"], ["counted"], name="grow", body=grow),
        helper.make_node("Loop", ["", "yes", "w0"], ["w_final", "w_all"], name="double", body=double),
    ]
    g = helper.make_graph(nodes, "cf_loop_dynamic",
                          [helper.make_tensor_value_info("x", F, [6]), helper.make_tensor_value_info("w0", F, [2])],
                          [helper.make_tensor_value_info("rows", F, ["n", 2]),
                           helper.make_tensor_value_info("tens_all", F, ["n"]),
                           helper.make_tensor_value_info("counted", F, [3]),
                           helper.make_tensor_value_info("w_final", F, [2]),
                           helper.make_tensor_value_info("w_all", F, ["k", 2])])
    sets = [(np.array([1.5, -2.0, 3.0, 0.5, -1.0, 0.0], np.float32), np.array([1.0, 2.0], np.float32)),
            (np.array([-1.5, -2.0, 0.0, -0.5, -1.0, -3.0], np.float32), np.array([20.0, 40.0], np.float32))]
    data = []
    for x, w0 in sets:
        vals = x[x > 0]
        rows = np.stack([vals, vals * vals], axis=1).reshape(-1, 2).astype(np.float32)
        w, ws = w0.copy(), []
        while True:  # a while loop: the body runs at least once
            w = w * 2
            ws.append(w)
            if not w.sum() < 50:
                break
        data.append(([x, w0], [rows, (vals * 10).astype(np.float32), np.arange(3, dtype=np.float32), w,
                               np.stack(ws).astype(np.float32)]))
    save_sets("cf_loop_dynamic", g, data)


def cf_embedding_bag(keepdims=0):
    c = lambda name, dt, dims, vals: helper.make_node(
        "Constant", [], [name], value=helper.make_tensor(name + "v", dt, dims, vals))
    rows, dim, bags = 50, 8, 40
    rng = np.random.default_rng(7)
    weight = rng.standard_normal((rows, dim)).astype(np.float32)
    lengths = np.array([(3 * b + 1) % 5 for b in range(bags)], np.int64)  # 0..4, bag 3 is empty
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    ids = rng.integers(0, rows, int(lengths.sum())).astype(np.int64)
    # Body i: ids[starts[i] : ends[i]] -> Gather(weight) -> ReduceSum over axis 0 (zeros when
    # empty), as torch.onnx writes EmbeddingBag's Loop.
    body = helper.make_graph(
        [c("b0", I, [1], [0]),
         helper.make_node("Gather", ["starts", "bi"], ["s"], axis=0),
         helper.make_node("Gather", ["ends", "bi"], ["e"], axis=0),
         helper.make_node("Unsqueeze", ["s", "b0"], ["s1"]),
         helper.make_node("Unsqueeze", ["e", "b0"], ["e1"]),
         helper.make_node("Slice", ["ids", "s1", "e1", "b0"], ["bag_ids"]),
         helper.make_node("Gather", ["weight", "bag_ids"], ["bag_rows"], axis=0),
         helper.make_node("ReduceSum", ["bag_rows", "b0"], ["bag_sum"], keepdims=keepdims),
         helper.make_node("Identity", ["bc"], ["bc_out"])],
        "bag_body",
        [helper.make_tensor_value_info("bi", I, []), helper.make_tensor_value_info("bc", B, [])],
        [helper.make_tensor_value_info("bc_out", B, []),
         helper.make_tensor_value_info("bag_sum", F, [1, dim] if keepdims else [dim])])
    nodes = [
        c("yes", B, [], [True]), c("one", I, [1], [1]), c("big", I, [1], [1 << 62]), c("a0", I, [1], [0]),
        helper.make_node("Shape", ["ids"], ["n"]),
        helper.make_node("Slice", ["offsets", "one", "big", "a0"], ["rest"]),
        helper.make_node("Concat", ["rest", "n"], ["ends"], axis=0),
        helper.make_node("Identity", ["offsets"], ["starts"]),
        helper.make_node("Shape", ["offsets"], ["nb"]),
        helper.make_node("Squeeze", ["nb", "a0"], ["count"]),
        helper.make_node("Loop", ["count", "yes"], ["stacked" if keepdims else "bagged"], name="bag",
                         body=body),
    ]
    if keepdims:  # [bags, 1, dim] -> [bags, dim]
        nodes += [c("flat", I, [2], [bags, dim]), helper.make_node("Reshape", ["stacked", "flat"], ["bagged"])]
    name = "cf_bag_loop" if keepdims else "cf_embedding_bag"
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("ids", I, [len(ids)]),
                           helper.make_tensor_value_info("offsets", I, [bags])],
                          [helper.make_tensor_value_info("bagged", F, [bags, dim])],
                          [numpy_helper.from_array(weight, "weight")])
    want = np.stack([weight[ids[o:o + n]].sum(0) if n else np.zeros(dim, np.float32)
                     for o, n in zip(offsets, lengths)]).astype(np.float32)
    save(name, g, [ids, offsets], [want])


cf_if()
cf_loop_exit()
cf_scan_reverse()
dyn_detect()
cf_loop_dynamic()
cf_embedding_bag()
cf_embedding_bag(keepdims=1)

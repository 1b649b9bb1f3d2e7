"""Map loops run op by op with same-shaped items batched (``runtime/execution/map_batching.py``): the outputs
are bit-identical to the step-by-step run (which these tests get by turning batching off), the
errors are the step-by-step run's, and ops whose batched form could differ run per item."""

from __future__ import annotations

import io
import time
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from apis.tensorflow.core.framework import graph_pb2
from runtime import Graph, Session, dtypes, errors
from runtime.execution import map_batching, map_loops
from runtime.execution.plan import Plan, Step
from runtime.kernels import load_all
from tests.runtime.onnx.test_loops import const, function, node

KERNELS = load_all()  # the whole registry: these tests call kernels by op type

F, I32, V, B, S, U8 = (
    dtypes.DT_FLOAT,
    dtypes.DT_INT32,
    dtypes.DT_VARIANT,
    dtypes.DT_BOOL,
    dtypes.DT_STRING,
    dtypes.DT_UINT8,
)
ARGS = [("c", I32), ("m", I32), ("t", I32), ("out", V), ("seq", V), ("n", I32)]
SIDE = 4


def _typed(n, **types):
    for key, value in types.items():
        n.attr[key].type = value
    return n


def image_map_graph() -> Graph:
    """``tf.map_fn`` decoding PNGs and resizing each to SIDE x SIDE, as ``tf.image.resize`` does."""
    cond = function(
        "cond",
        ARGS,
        [("ok", B, "and:z:0")],
        [
            node("less", "Less", "c", "m", T=I32),
            node("less_1", "Less", "t", "n", T=I32),
            node("and", "LogicalAnd", "less:z:0", "less_1:z:0"),
        ],
    )
    squeeze = node("squeeze", "Squeeze", "resize:resized_images:0", T=F)
    squeeze.attr["squeeze_dims"].list.i.append(0)
    body_nodes = [
        const("shape", [-1]),
        node("x_t", "TensorListGetItem", "seq", "t", "shape:output:0", element_dtype=S),
        node("decode", "DecodePng", "x_t:item:0", channels=3, dtype=U8),
        _typed(node("cast", "Cast", "decode:image:0"), SrcT=U8, DstT=F),
        const("scale", 255.0, np.float32),
        node("div", "RealDiv", "cast:y:0", "scale:output:0", T=F),
        const("dim", 0),
        node("expand", "ExpandDims", "div:z:0", "dim:output:0", T=F),
        const("size", [SIDE, SIDE]),
        node("resize", "ResizeBilinear", "expand:output:0", "size:output:0", T=F, half_pixel_centers=True),
        squeeze,
        node("write", "TensorListSetItem", "out", "t", "squeeze:output:0", element_dtype=F),
        const("one", 1),
        node("t_next", "AddV2", "t", "one:output:0", T=I32),
        node("c_next", "AddV2", "c", "one:output:0", T=I32),
    ]
    rets = [
        ("c_out", I32, "c_next:z:0"),
        ("m_out", I32, "m"),
        ("t_out", I32, "t_next:z:0"),
        ("out_out", V, "write:output_handle:0"),
        ("seq_out", V, "seq"),
        ("n_out", I32, "n"),
    ]
    graph_def = graph_pb2.GraphDef()
    graph_def.node.extend(
        [
            node("x", "Placeholder", dtype=S),
            node("n", "Placeholder", dtype=I32),
            const("zero", 0),
            const("row", []),
            const("elem", [SIDE, SIDE, 3]),
            node("seq", "TensorListFromTensor", "x", "row", element_dtype=S, shape_type=I32),
            node("reserve", "TensorListReserve", "elem", "n", element_dtype=F, shape_type=I32),
            node("loop", "While", "zero", "n", "zero", "reserve", "seq", "n", T=[I32, I32, I32, V, V, I32]),
            node("stack", "TensorListStack", "loop:3", "elem", element_dtype=F),
        ]
    )
    loop = graph_def.node[7]
    loop.attr["cond"].func.name, loop.attr["body"].func.name = "cond", "body"
    graph_def.library.function.extend([cond, function("body", ARGS, rets, body_nodes)])
    return Graph.from_graph_def(graph_def)


def _png(height: int, width: int, seed: int, mode: str = "RGB") -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(buffer, format="PNG")
    return buffer.getvalue()


# Same-sized images (two groups of several), a grey one, 1-pixel and upscaled ones, all mixed.
IMAGES = [
    _png(5, 7, 0),
    _png(3, 3, 1),
    _png(5, 7, 2),
    _png(1, 1, 3),
    _png(5, 7, 4, "L"),
    _png(3, 3, 5),
    _png(9, 2, 6),
    _png(5, 7, 7),
]


def run(images, monkeypatch, batched: bool):
    """The stacked items, the loop's counter, and how many batched kernel calls ran."""
    calls = []
    real = map_batching._batched_call

    def spy(op_type, call, inputs, groups, steps):
        calls.append(op_type)
        return real(op_type, call, inputs, groups, steps)

    monkeypatch.setattr(map_batching, "_batched_call", spy)
    if not batched:
        monkeypatch.setattr(map_batching, "run_items", lambda *args, **kwargs: None)
    feeds = {"x:0": np.array(images, object), "n:0": len(images)}
    try:
        with Session(graph=image_map_graph()) as session:
            return session.run(["stack:0", "loop:2"], feeds), calls
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("picks", [(0, 2), (0, 2, 7), tuple(range(8)), (1, 5, 0, 3, 4, 6, 2, 7, 1, 5)])
def test_batched_images_equal_the_step_by_step_run_bit_for_bit(picks, monkeypatch):
    images, count = [IMAGES[i] for i in picks], len(picks)
    want, _ = run(images, monkeypatch, batched=False)
    got, calls = run(images, monkeypatch, batched=True)
    assert {"Cast", "RealDiv", "ExpandDims", "ResizeBilinear", "Squeeze"} <= set(calls)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(b, a, strict=True)
    assert got[0].shape == (count, SIDE, SIDE, 3) and got[0].flags.c_contiguous


def test_steps_run_a_chunk_at_a_time(monkeypatch):
    images = [IMAGES[i] for i in (0, 2, 1, 5, 7, 2, 0, 4, 3, 1)]
    want, _ = run(images, monkeypatch, batched=False)
    monkeypatch.setattr(map_loops, "STEPS_IN_FLIGHT", 3)  # run() undoes it
    got, calls = run(images, monkeypatch, batched=True)
    assert calls.count("Squeeze") == 3  # per chunk of 3 steps; the last step runs alone
    np.testing.assert_array_equal(got[0], want[0], strict=True)


def test_all_different_sizes_run_item_by_item_until_resized(monkeypatch):
    images = [IMAGES[i] for i in (0, 1, 3, 6)]
    want, _ = run(images, monkeypatch, batched=False)
    got, calls = run(images, monkeypatch, batched=True)
    assert calls == ["Squeeze"]  # resized, every item has one shape
    np.testing.assert_array_equal(got[0], want[0], strict=True)


def test_a_failing_item_raises_the_step_by_step_error(monkeypatch):
    """Item 5 is no PNG: the batched run gives up and the loop fails at step 5, as written."""
    images = [*IMAGES[:5], b"not a png", *IMAGES[5:]]
    raised = []
    for batched in (False, True):
        with pytest.raises(errors.InvalidArgumentError) as info:
            run(images, monkeypatch, batched)
        raised.append(info.value.message)
    assert raised[0] == raised[1] and "decode" in raised[0]


# -- run_items on hand-made plans -------------------------------------------------------------


def plan_of(*steps, feeds=(1, 2), fetch=3, slots=8) -> Plan:
    """Steps given as (op type, call, input slots, output slot)."""
    made = tuple(
        Step(call, ins, False, out, (), False, ins, SimpleNamespace(type=op), 0)
        for op, call, ins, out in steps
    )
    return Plan(made, slots, tuple(feeds), (fetch,), (False,))


def step_by_step(plan: Plan, feeds: list, steps: int) -> list:
    results = []
    for step in range(steps):
        vals = [None] * plan.num_slots
        for slot, value in zip(plan.feed_slots, feeds):
            vals[slot] = value.value if isinstance(value, map_batching._Shared) else value[step]
        for s in plan.steps:
            vals[s.outputs] = s.call(*[vals[i] for i in s.inputs])
        results.append(tuple(vals[slot] for slot in plan.fetch_slots))
    return results


MUL = KERNELS["Mul"].fn


def _items(shapes, seed=0):
    r = np.random.default_rng(seed)
    return [r.standard_normal(shape).astype(np.float32) for shape in shapes]


@pytest.mark.parametrize(
    ("shapes", "other"),
    [
        ([(3,)] * 4, np.float32(1.5)),  # a scalar: batched
        ([(2, 3)] * 3 + [(4, 3)] * 2, np.arange(3, dtype=np.float32)),  # a row: batched per group
        ([(3,)] * 4, np.ones((2, 3), np.float32)),  # more dimensions than an item: per item
        ([(1,)] * 3, np.arange(4, dtype=np.float32)),  # an item broadcast against it
    ],
)
def test_elementwise_ops_broadcast_as_each_item_does(shapes, other):
    plan = plan_of(("Mul", MUL, (1, 2), 3))
    feeds = [_items(shapes), map_batching.shared(other)]
    got = map_batching.run_items(plan, feeds, len(shapes))
    for (a,), (b,) in zip(step_by_step(plan, feeds, len(shapes)), got):
        np.testing.assert_array_equal(b, a, strict=True)


def test_two_varying_operands_of_different_shapes_run_per_item():
    plan = plan_of(("Mul", MUL, (1, 2), 3))
    feeds = [_items([(2, 3)] * 3), _items([(3,)] * 3, seed=1)]
    got = map_batching.run_items(plan, feeds, 3)
    for (a,), (b,) in zip(step_by_step(plan, feeds, 3), got):
        np.testing.assert_array_equal(b, a, strict=True)


def test_kernel_failures_dead_values_and_deadlines_give_up():
    def fails_on_the_third(x):
        if x[0] == 3:
            raise ValueError("three")
        return x

    items = [np.full(2, i, np.float32) for i in range(5)]
    failing = plan_of(("Tanh", fails_on_the_third, (1,), 3), feeds=(1,))  # an op run per item
    assert map_batching.run_items(failing, [items], 5) is None
    deadly = plan_of(("Switch", KERNELS["Identity"].fn, (1,), 3), feeds=(1,))
    assert map_batching.run_items(deadly, [items], 5) is None
    fine = plan_of(("Neg", KERNELS["Neg"].fn, (1,), 3), feeds=(1,))
    assert map_batching.run_items(fine, [items], 5, deadline=time.monotonic() - 1) is None
    got = map_batching.run_items(fine, [items], 5, deadline=time.monotonic() + 60)
    assert [float(g[0][0]) for g in got] == [-0.0, -1.0, -2.0, -3.0, -4.0]


def test_image_models_batches_give_the_step_by_step_outputs(monkeypatch):
    """The oracle's decode -> resize -> conv SavedModel, each case's images repeated: the same
    features bit for bit with batching on or off (TF's own outputs: tests/runtime/test_image_ops.py)."""
    from loader import load_saved_model
    from tests.runtime.test_image_ops import _case_tensor, _manifest

    manifest = _manifest()
    bundle = load_saved_model(manifest["export_path"], {"serve"}, delegation=False)
    try:
        for case in manifest["cases"]:
            signature = bundle.signature_defs[case["signature"]]
            feeds = {
                signature.inputs[k].name: np.tile(_case_tensor(manifest, p), 4)
                for k, p in case["inputs"].items()
            }
            fetches = [signature.outputs[k].name for k in sorted(case["outputs"])]
            got = bundle.session.run(fetches, feeds)
            monkeypatch.setattr(map_batching, "run_items", lambda *args, **kwargs: None)
            want = bundle.session.run(fetches, feeds)
            monkeypatch.undo()
            for a, b in zip(want, got):
                np.testing.assert_array_equal(b, a, strict=True, err_msg=case["signature"])
    finally:
        bundle.close()

"""GraphDefs and SavedModels made by TensorFlow for the runtime's Session tests; op signatures.

Unlike the other builder modules this one declares no ``@model``: its cases are Session runs
(fetch structures, feeds, errors, variables) rather than signature calls. Both halves live here:

- TF side (oracle venv ``VENV``), imported lazily::

    <oracle python> -m tests.oracle.builders.session_graphs graphs OUT_DIR
    <oracle python> -m tests.oracle.builders.session_graphs op-signatures > runtime/op_signatures.py
    <oracle python> -m tests.oracle.builders.session_graphs op-attrs > runtime/op_attrs.py

- test side (main venv, stdlib only): ``session_cases()`` returns the directory of built cases,
  building them first when this file changed (one TF subprocess, a few seconds).

``OUT_DIR/cases.json`` maps a case name to ``{"graph": file, "kind": "graph_def" |
"saved_model", "runs": [run, ...]}``; the runs of a case share one Session, in order. A run is
``{"fetches": spec, "feeds": {name: tensor file}, "result": spec | null, "error": {"type",
"message"} | null}``. A fetch spec is JSON: a name string, ``{"list": [...]}``,
``{"tuple": [...]}``, ``{"dict": {key: spec}}``, ``{"namedtuple": [type name, {field: spec}]}``;
a result spec is the same with each value ``{"tensor": file}`` or null (an operation).
Tensor files are ``tf.make_tensor_proto`` TensorProtos.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

VENV = "tf221"

Pair = collections.namedtuple("Pair", ["first", "second"])

# ----------------------------------------------------------------------------------------------
# Test side (main venv): stdlib only.


def session_cases() -> Path:
    """The built cases for this file's current content; builds them when stale.

    Raises RuntimeError when the oracle venv is missing: the tests fail rather than skip.
    """
    from tests.oracle import REPO_ROOT, cache_dir, oracle_dir
    from tests.oracle.venvs import pins, venv_python

    python = venv_python(oracle_dir(), VENV)
    if not python.exists():
        raise RuntimeError(f"oracle venv {VENV} is missing ({python}): run `python -m tests.oracle build`")
    digest = hashlib.sha256(Path(__file__).read_bytes() + pins(VENV).encode()).hexdigest()[:16]
    out = cache_dir() / ".session_graphs" / digest
    if not (out / "cases.json").is_file():
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        result = subprocess.run(
            [str(python), "-m", "tests.oracle.builders.session_graphs", "graphs", str(tmp)],
            cwd=REPO_ROOT,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"},
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"building session graphs failed:\n{result.stderr[-4000:]}")
        try:
            tmp.rename(out)
        except OSError:  # built concurrently by another test process
            shutil.rmtree(tmp, ignore_errors=True)
        for stale in out.parent.iterdir():  # builds of earlier versions of this file
            if stale.name != out.name and not stale.name.startswith(f"{out.name}.tmp"):
                shutil.rmtree(stale, ignore_errors=True)
    return out


def read_case(name: str) -> tuple[Path, dict]:
    """(directory, case) of a built case (see the module docstring for its format)."""
    out = session_cases()
    return out, json.loads((out / "cases.json").read_text())[name]


def fetch_structure(spec):
    """A fetch spec as a fetch structure of names (namedtuples are ``Pair``)."""
    if isinstance(spec, str):
        return spec
    ((kind, body),) = spec.items()
    if kind == "list":
        return [fetch_structure(s) for s in body]
    if kind == "tuple":
        return tuple(fetch_structure(s) for s in body)
    if kind == "dict":
        return {k: fetch_structure(s) for k, s in body.items()}
    _, fields = body
    return Pair(**{k: fetch_structure(s) for k, s in fields.items()})


def result_structure(spec, read_tensor):
    """A recorded result spec with each ``{"tensor": file}`` replaced by ``read_tensor(file)``."""
    if spec is None:
        return None
    ((kind, body),) = spec.items()
    if kind == "tensor":
        return read_tensor(body)
    if kind in ("list", "tuple"):
        items = [result_structure(s, read_tensor) for s in body]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: result_structure(s, read_tensor) for k, s in body.items()}
    _, fields = body
    return Pair(**{k: result_structure(s, read_tensor) for k, s in fields.items()})


# ----------------------------------------------------------------------------------------------
# TF side (oracle venv).


class _Writer:
    """Writes tensors and cases into the output directory."""

    def __init__(self, out: Path):
        self.out = out
        self.cases: dict[str, dict] = {}
        self.count = 0

    def tensor(self, value, dtype=None) -> str:
        import tensorflow as tf

        self.count += 1
        name = f"t{self.count}.pb"
        (self.out / name).write_bytes(tf.make_tensor_proto(value, dtype=dtype).SerializeToString())
        return name

    def result(self, value):
        if value is None:
            return None
        if isinstance(value, dict):
            return {"dict": {k: self.result(v) for k, v in value.items()}}
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return {
                "namedtuple": [
                    type(value).__name__,
                    {k: self.result(v) for k, v in value._asdict().items()},
                ]
            }
        if isinstance(value, tuple):
            return {"tuple": [self.result(v) for v in value]}
        if isinstance(value, list):
            return {"list": [self.result(v) for v in value]}
        return {"tensor": self.tensor(value)}

    def case(self, name: str, graph_file: str, kind: str, sess, runs: list) -> None:
        recorded = []
        for fetches, feeds in runs:
            entry = {"fetches": fetches, "feeds": {}, "result": None, "error": None}
            feed_dict = {}
            for key, value in (feeds or {}).items():
                # Python values stay JSON: TF converts them differently from arrays.
                plain = isinstance(value, (int, float, list))
                entry["feeds"][key] = {"json": value} if plain else {"tensor": self.tensor(value)}
                feed_dict[key] = value
            try:
                value = sess.run(fetch_structure(fetches), feed_dict)
                entry["result"] = self.result(value)
            except Exception as e:  # noqa: BLE001 - the error is the expectation
                text = str(e)
                if hasattr(e, "message"):
                    text = e.message.split("\n\nOriginal stack trace")[0]
                    text = text.split("\nNode: ")[-1].split("\n", 1)[-1] if "\nNode: " in text else text
                    text = text.removeprefix("Graph execution error:\n\n")
                entry["error"] = {"type": type(e).__name__, "message": text}
            recorded.append(entry)
        self.cases[name] = {"graph": graph_file, "kind": kind, "runs": recorded}


def _graph_file(w: _Writer, graph, name: str) -> str:
    import tensorflow as tf

    meta = tf.compat.v1.train.export_meta_graph(graph=graph)
    (w.out / f"{name}.pb").write_bytes(meta.SerializeToString())
    return f"{name}.pb"


def _basics(w: _Writer) -> None:
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 1], name="x")
        y = tf.identity(x * 2.0 + 1.0, name="y")
        tf.add(y, tf.constant(10.0), name="z")
        v1.placeholder(tf.string, [], name="s")
        v1.placeholder(tf.int32, name="n")
        tf.identity(v1.placeholder_with_default(tf.constant([1, 2]), [2], name="pwd"), name="pwd_out")
        pa = v1.placeholder(tf.float32, None, name="pa")
        tf.add(pa, tf.constant([1.0, 2.0, 3.0]), name="bad_add")
        tf.concat([x, x * 3.0], axis=1, name="cat")
        tf.split(tf.constant([1, 2, 3, 4]), 2, name="split")
        v1.py_func(lambda a: a, [x], tf.float32, name="pyfunc")
    _lookups(w, g)
    xv = np.array([[1.0], [2.0]], np.float32)
    dict_spec = {"dict": {"a": {"tuple": ["y:0", "z:0"]}, "b": "y", "c": {"list": []}}}
    with v1.Session(graph=g) as sess:
        w.case(
            "basics",
            _graph_file(w, g, "basics"),
            "meta_graph",
            sess,
            [
                ("y:0", {"x:0": xv}),
                (
                    {
                        "list": [
                            "y:0",
                            dict_spec,
                            {"namedtuple": ["Pair", {"first": "z:0", "second": "y"}]},
                        ]
                    },
                    {"x:0": xv},
                ),
                ({"tuple": ["y:0", "y:0"]}, {"x:0": xv}),
                ("y:0", {"y:0": np.array([[5.0]], np.float32)}),
                ("y:0", None),
                ("y:0", {"x:0": np.zeros(3, np.float32)}),
                ("y:0", {"x:0": 3.0}),
                ("s:0", None),
                ("n:0", None),
                ("n:0", {"n:0": 2**40}),
                ("n:0", {"n:0": [[1, 2]]}),
                ("s:0", {"s:0": b"abc"}),
                ("pwd_out:0", None),
                ("pwd_out:0", {"pwd:0": np.array([7, 8], np.int32)}),
                ("cat:0", {"x:0": xv}),
                ({"list": ["split:1", "split:0"]}, None),
                ("bad_add:0", {"pa:0": np.array([1.0, 2.0], np.float32)}),
                ("y:0", {"x": xv}),
                ("y:0", {"nope:0": xv}),
                ("nope:0", None),
                ("nope", None),
                ("y:3", {"x:0": xv}),
                ({"list": []}, None),
            ],
        )


def _variables(w: _Writer) -> None:
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        v = v1.Variable([1.0, 2.0], name="v", use_resource=False)
        rv = v1.Variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], name="rv", use_resource=True)
        counter = v1.Variable(0, name="counter", use_resource=True)
        tf.identity(v1.is_variable_initialized(v), name="v_init")
        tf.identity(rv.is_initialized(), name="rv_init")
        tf.identity(rv.sparse_read([2, 0]), name="gathered")
        v1.assign_add(v, [10.0, 20.0], name="v_add")
        v1.assign_sub(v, [1.0, 1.0], name="v_sub")
        rv.assign_add(tf.ones([3, 2]), name="rv_add", read_value=False)
        inc = counter.assign_add(1, read_value=False)
        x = v1.placeholder(tf.float32, [None], name="x")
        with tf.control_dependencies([inc]):
            tf.identity(x, name="x_after_inc")
        tf.identity(counter.read_value(), name="count")
        v1.global_variables_initializer()
    init = "init"
    with v1.Session(graph=g) as sess:
        w.case(
            "variables",
            _graph_file(w, g, "variables"),
            "meta_graph",
            sess,
            [
                ("v:0", None),
                ("v/read:0", None),
                ("rv/Read/ReadVariableOp:0", None),
                ({"list": ["v_init:0", "rv_init:0"]}, None),
                (init, None),
                ({"list": ["v_init:0", "rv_init:0"]}, None),
                ("v_add:0", None),
                ("v_sub:0", None),
                ("v:0", None),
                ("rv_add", None),
                ("rv/Read/ReadVariableOp:0", None),
                ("gathered:0", None),
                ("x_after_inc:0", {"x:0": np.array([1.0], np.float32)}),
                ("x_after_inc:0", {"x:0": np.array([2.0], np.float32)}),
                ("count:0", None),
            ],
        )


def _defun(w: _Writer) -> None:
    """TF1 ``Defun`` functions: call nodes whose op type is the function's name."""
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.framework import function

    v1 = tf.compat.v1

    @function.Defun(tf.float32, tf.float32)
    def inner(a, b):
        return a * b, a + b

    @function.Defun(tf.float32)
    def outer(a):
        p, s = inner(a, a)
        return p - s

    @function.Defun(tf.float32)
    def failing(a):
        return tf.gather(a, [7])

    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None], name="x")
        tf.identity(outer(x), name="y")
        p, s = inner(x, x + 1.0)
        tf.identity(s, name="s")
        tf.identity(failing(x), name="bad")
    xv = np.array([1.0, 2.0, 3.0], np.float32)
    with v1.Session(graph=g) as sess:
        w.case(
            "defun",
            _graph_file(w, g, "defun"),
            "meta_graph",
            sess,
            [("y:0", {"x:0": xv}), ("s:0", {"x:0": xv}), ("bad:0", {"x:0": xv})],
        )


def _cond_v1(w: _Writer) -> None:
    """tf.compat.v1.cond with control flow v1: Switch, Merge and dead branches."""
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    v1.disable_control_flow_v2()
    try:
        g = tf.Graph()
        with g.as_default():
            x = v1.placeholder(tf.float32, [None], name="x")
            p = v1.placeholder(tf.bool, [], name="p")
            tf.identity(v1.cond(p, lambda: x * 2.0, lambda: x + 100.0), name="y")
            inner = v1.cond(p, lambda: v1.cond(p, lambda: x - 1.0, lambda: x), lambda: x * 0.0)
            tf.identity(inner, name="nested")
    finally:
        v1.enable_control_flow_v2()
    xv = np.array([1.0, 2.0], np.float32)
    with v1.Session(graph=g) as sess:
        w.case(
            "cond_v1",
            _graph_file(w, g, "cond_v1"),
            "meta_graph",
            sess,
            [
                ("y:0", {"x:0": xv, "p:0": True}),
                ("y:0", {"x:0": xv, "p:0": False}),
                ({"list": ["nested:0", "y:0"]}, {"x:0": xv, "p:0": True}),
                ("nested:0", {"x:0": xv, "p:0": False}),
            ],
        )


def _saved_models(w: _Writer) -> None:
    """TF2 exports: signatures reached through StatefulPartitionedCall, nested functions."""
    import numpy as np
    import tensorflow as tf

    class Module(tf.Module):
        def __init__(self):
            self.w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
            self.b = tf.Variable([0.5, -0.5], name="b")

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
        def serve(self, x):
            return {
                "y": self.dense(x),
                "n": tf.shape(x)[0],
                "parts": tf.concat(tf.split(x, 3, axis=1), 0),
            }

        @tf.function
        def dense(self, x):
            return tf.nn.relu(tf.matmul(x, self.w) + self.b)

    class Control(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
        def serve(self, x):
            positive = tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: -x)
            _, total = tf.while_loop(
                lambda i, acc: i < 3, lambda i, acc: (i + 1, acc + x), (tf.constant(0), x)
            )
            return {"cond": positive, "loop": total}

    control = Control()
    _saved_model(
        w,
        "tf_control",
        control,
        {"serving_default": control.serve},
        np.array([1.0, -3.0], np.float32),
    )

    module = Module()
    _saved_model(
        w,
        "tf_module",
        module,
        {"serving_default": module.serve},
        np.array([[1, 2, 3], [-4, 0, 1]], np.float32),
    )

    inputs = tf.keras.Input((4,), name="feat")
    hidden = tf.keras.layers.Dense(
        8, activation="relu", kernel_initializer=tf.keras.initializers.GlorotUniform(seed=1)
    )(inputs)
    out = tf.keras.layers.Dense(
        2, activation="softmax", kernel_initializer=tf.keras.initializers.GlorotUniform(seed=2)
    )(hidden)
    keras_model = tf.keras.Model(inputs, out)
    path = w.out / "keras_mlp"
    keras_model.export(str(path))
    _record_signature(w, "keras_mlp", np.arange(8, dtype=np.float32).reshape(2, 4) / 8)


def _saved_model(w: _Writer, name: str, module, signatures: dict, x) -> None:
    import tensorflow as tf

    tf.saved_model.save(module, str(w.out / name), signatures=signatures)
    _record_signature(w, name, x)


def _record_signature(w: _Writer, name: str, x) -> None:
    """Runs serving_default through TF1's loader, as TF Serving would, and records it."""
    import tensorflow as tf

    v1 = tf.compat.v1
    with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
        meta = v1.saved_model.loader.load(sess, ["serve"], str(w.out / name))
        signature = meta.signature_def["serving_default"]
        (input_info,) = signature.inputs.values()
        fetches = {"dict": {k: info.name for k, info in signature.outputs.items()}}
        runs = [(fetches, {input_info.name: x})]
        w.case(name, name, "saved_model", sess, runs)


LOOKUPS = [
    ("get_tensor_by_name", "y:1"),
    ("get_tensor_by_name", "nope:0"),
    ("get_tensor_by_name", "y"),
    ("get_tensor_by_name", "nope"),
    ("get_tensor_by_name", "y:a"),
    ("get_tensor_by_name", "y:0:1"),
    ("get_tensor_by_name", 3),
    ("get_operation_by_name", "nope"),
    ("get_operation_by_name", "y:0"),
    ("get_operation_by_name", 3),
    ("as_graph_element", "nope"),
    ("as_graph_element", 3),
]

# (dtype name, shape): tf.make_tensor_proto of np.arange(size) cast to the dtype (strings: the
# decimal digits as bytes; bool: odd elements), so the test side can rebuild the value.
TENSOR_PROTOS = [
    (dtype, shape)
    for dtype in (
        "float32",
        "float64",
        "float16",
        "bfloat16",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
        "complex64",
        "complex128",
        "string",
    )
    for shape in ((), (2, 3), (0, 4))
]


def _tensor_protos(w: _Writer) -> None:
    import numpy as np
    import tensorflow as tf

    records = []
    for dtype, shape in TENSOR_PROTOS:
        value = tensor_value(np, dtype, shape)
        w.count += 1
        name = f"t{w.count}.pb"
        proto = tf.make_tensor_proto(value, dtype=tf.as_dtype(dtype))
        (w.out / name).write_bytes(proto.SerializeToString())
        records.append({"dtype": dtype, "shape": list(shape), "file": name})
    w.cases["tensor_protos"] = {"graph": None, "kind": "tensors", "runs": records}


def tensor_value(np, dtype: str, shape: tuple):
    """The value of a TENSOR_PROTOS entry (``np`` passed in: this module imports no numpy)."""
    size = int(np.prod(shape)) if shape else 1
    flat = np.arange(size) + 1
    if dtype == "string":
        return np.array([str(i).encode() for i in flat], dtype=object).reshape(shape)
    if dtype == "bool":
        return (flat % 2 == 1).reshape(shape)
    if dtype == "bfloat16":
        import ml_dtypes

        return (flat / 4).astype(ml_dtypes.bfloat16).reshape(shape)
    if dtype.startswith("complex"):
        return (flat + 1j * flat / 2).astype(dtype).reshape(shape)
    return (flat / 4 if dtype.startswith("float") else flat).astype(dtype).reshape(shape)


def _lookups(w: _Writer, graph) -> None:
    records = []
    for method, arg in LOOKUPS:
        try:
            getattr(graph, method)(arg)
            records.append({"method": method, "arg": arg, "error": None})
        except Exception as e:  # noqa: BLE001 - the error is the expectation
            records.append(
                {
                    "method": method,
                    "arg": arg,
                    "error": {"type": type(e).__name__, "message": str(e)},
                }
            )
    w.cases["lookups"] = {"graph": "basics.pb", "kind": "lookups", "runs": records}


def build_graphs(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    w = _Writer(out)
    for build in (_basics, _variables, _defun, _cond_v1, _saved_models, _tensor_protos):
        build(w)
    (out / "cases.json").write_text(json.dumps(w.cases, indent=1))


def _arg_spec(arg) -> str:
    text = ("&" if arg.is_ref else "") + arg.name
    if arg.number_attr:
        text += "*" + arg.number_attr
    if arg.type_list_attr:
        return text + "+" + arg.type_list_attr
    return text + (f":{arg.type_attr}" if arg.type_attr else f":={arg.type}")


def op_signatures() -> str:
    """``runtime/op_signatures.py``: every registered TF op's input and output args."""
    import tensorflow as tf
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as c_api

    ops = op_def_pb2.OpList()
    ops.ParseFromString(bytes(c_api.TF_GetBuffer(c_api.TF_GetAllOpList())))
    lines = [
        '"""Input and output args of every TensorFlow op: generated, do not edit.',
        "",
        f"Made from TensorFlow {tf.__version__}'s op registry by",
        "``<oracle python> -m tests.oracle.builders.session_graphs op-signatures``.",
        "",
        "``SIGNATURES[op] = 'inputs->outputs'``, comma-separated args: ``name`` one tensor,",
        "``name*N`` a list whose length is int attr N, ``name+T`` a list whose length and types are",
        "those of type-list attr T; ``:T`` names the arg's type attr, ``:=1`` is a fixed DataType;",
        "a leading ``&`` marks a reference (TF1 ref variable) arg.",
        '"""',
        "",
        "SIGNATURES: dict[str, str] = {",
    ]
    for op in sorted(ops.op, key=lambda o: o.name):
        inputs = ",".join(_arg_spec(a) for a in op.input_arg)
        outputs = ",".join(_arg_spec(a) for a in op.output_arg)
        lines.append(f'    "{op.name}": "{inputs}->{outputs}",')
    lines.append("}")
    return "\n".join(lines) + "\n"


def op_attrs() -> str:
    """``runtime/op_attrs.py``: the attrs of every registered TF op that have no default."""
    import tensorflow as tf
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as c_api

    ops = op_def_pb2.OpList()
    ops.ParseFromString(bytes(c_api.TF_GetBuffer(c_api.TF_GetAllOpList())))
    lines = [
        '"""Attrs without a default, of every TensorFlow op that has any: generated, do not edit.',
        "",
        f"Made from TensorFlow {tf.__version__}'s op registry by",
        "``<oracle python> -m tests.oracle.builders.session_graphs op-attrs``.",
        "",
        "``REQUIRED_ATTRS[op] = 'a,b'``: a NodeDef of the op lacking one of them is refused, as",
        'TF\'s ``ValidateNodeDef`` refuses it ("NodeDef missing attr ...").',
        '"""',
        "",
        "REQUIRED_ATTRS: dict[str, str] = {",
    ]
    for op in sorted(ops.op, key=lambda o: o.name):
        required = [a.name for a in op.attr if not a.HasField("default_value")]
        if required:
            lines.append(f'    "{op.name}": "{",".join(required)}",')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["op-signatures"]:
        sys.stdout.write(op_signatures())
        return 0
    if argv[:1] == ["op-attrs"]:
        sys.stdout.write(op_attrs())
        return 0
    if argv[:1] == ["graphs"] and len(argv) == 2:
        build_graphs(Path(argv[1]))
        return 0
    raise SystemExit(f"usage: session_graphs {{graphs OUT_DIR | op-signatures | op-attrs}}, got {argv}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

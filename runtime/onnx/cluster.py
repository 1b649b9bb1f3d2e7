"""The ``_OrtCluster`` kernel: one fused cluster run by onnxruntime, validated against numpy.

A ``ClusterRunner`` owns, per signature of input dtypes and ranks, one converted ONNX model and
one ``onnxruntime.InferenceSession`` (compiled on the first run with that signature: ranks and
dtypes then are the real ones). The first run of each signature also runs the cluster's ops with
the native kernels on the same inputs and compares; on a conversion failure or a mismatch the
whole cluster drops back to the native kernels for good, and the reason goes to the log and to
the model's ``DelegationReport``. A cluster holding whole While loops runs, natively, its
``native_subgraph``: the loops' bodies delegated as for loops that never convert whole (see
``rewrite.add_loop_fallbacks``). Where TF's kernels would raise an error (or compute what ONNX
does not), the converted model says so in its guard output: that run goes native, so the error
is TF's own. InferenceSession.run is thread-safe, so one session per
signature serves every thread; compiling takes the runner's lock.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import weakref
from collections.abc import Callable

import numpy as np
import onnxruntime as ort

from apis.tensorflow.core.framework import graph_pb2
from runtime import dtypes, errors
from runtime.execution.function import FunctionLibraryRuntime
from runtime.execution.gc_pause import gc_paused
from runtime.execution.interpreter import fetched, run_plan
from runtime.execution.planner import build_plan
from runtime.graph.graph import Graph, Operation
from runtime.kernels.registry import kernel
from runtime.kernels.resources import ResourceMgr
from runtime.onnx import options as options_lib
from runtime.onnx import text_table
from runtime.onnx.interface import CLUSTER_OP, Signature, declared_shapes
from runtime.onnx.session_runs import NO_PLAN_RUN, Unguarded, contiguous, fast_run, guarded, picked_run
from runtime.tensor_util import conforms, shape_from_proto

logger = logging.getLogger(__name__)

_NATIVE = object()  # a compiled entry meaning "run natively"
_TOLERANCE = {np.dtype(np.float16): (1e-2, 1e-2), np.dtype(np.float64): (1e-7, 1e-9)}


class ClusterRunner:
    """Runs one cluster; see the module docstring for compilation, validation and fallback."""

    def __init__(
        self,
        name: str,
        subgraph: bytes,
        input_names: list[str],
        output_names: list[str],
        options: options_lib.DelegationOptions,
        device: str = "",
        report=None,
        flops: float | None = None,
        native_subgraph: bytes = b"",
        constants: tuple[list[str], list[str], object] | None = None,
        cache=None,
        heavy_ops: int = 0,
    ):
        """``flops`` and ``heavy_ops`` (its matmuls and convolutions) size its thread pool.
        ``constants``: (placeholders of the subgraph, the ops of the Session's graph whose values
        they take, the ``ClusterConstants`` that knows those values), for weights read by name.
        ``cache``: the ``ClusterCache`` converted models are read from and written to."""
        self.name = name
        self._cache = cache
        self._subgraph_digest = (
            hashlib.sha256(subgraph + b"\0" + native_subgraph).hexdigest() if cache else ""
        )
        self._graph_def = graph_pb2.GraphDef.FromString(subgraph)
        # What runs natively (validation, fallback): the same ops, loops with delegated bodies.
        self._native_def = (
            graph_pb2.GraphDef.FromString(native_subgraph) if native_subgraph else self._graph_def
        )
        self._inputs = input_names
        self._outputs = output_names
        self._feed_names = [f"input_{i}" for i in range(len(input_names))]  # convert_subgraph's names
        self._fetch_names = [f"output_{i}" for i in range(len(output_names))]
        self._options = options
        self._device = device
        self._report = report
        self._flops, self._heavy_ops = flops, heavy_ops
        self._compiled: dict[tuple, object] = {}  # ((dtype, ndim) per input) -> session | _NATIVE
        self._signatures: dict[tuple, Signature] = {}  # the same keys -> what each was compiled for
        # The hot path's table: ((dtype, ndim) per input) -> the compiled session's run, for
        # signatures that compiled and validated (never filled once the cluster is native only).
        self._runs: dict[tuple, object] = {}
        self._single = len(output_names) == 1
        self._last: tuple = (None, -1, None)  # (dtype, ndim, run) of _run_one's previous call
        self._last_two: tuple = (None, -1, None, -1, None)  # _run_two's: (dtype, ndim) twice, run
        # What a plan step calls: the one- or two-input hot path where it applies.
        self.run = {1: self._run_one, 2: self._run_two}.get(len(input_names), self.__call__)
        self._native_plan = None
        self._native_only = False
        self._lock = threading.Lock()
        self._closed = False
        self.providers: list[str] = []
        self._constant_inputs, self._constant_names, self._constants = constants or ([], [], None)
        self._static_shapes = _static_shapes(self._graph_def, input_names)

    def __call__(self, *inputs):
        # The hot path: non-empty ndarrays of a signature already compiled (onnxruntime copies
        # arrays that are not C-contiguous itself). One and two inputs take the unrolled
        # ``_run_one`` and ``_run_two``.
        key = []
        for x in inputs:
            if type(x) is not np.ndarray or not x.size:
                return self._call_slow(inputs)
            key.append((x.dtype, x.ndim))
        run = self._runs.get(tuple(key))
        if run is None:
            return self._call_slow(inputs)
        try:
            outputs = run(self._fetch_names, dict(zip(self._feed_names, inputs)), None)
        except Exception as exc:  # noqa: BLE001 - see _failed
            return self._failed(inputs, exc)
        return outputs[0] if self._single else outputs

    def _run_one(self, x):
        """``__call__`` for one input, unrolled (a small model's whole run is ~5 us), trying
        the signature of the previous call first."""
        if type(x) is not np.ndarray or not x.size:
            return self._call_slow((x,))
        dtype, ndim, run = self._last
        if x.dtype is not dtype or x.ndim != ndim:
            run = self._runs.get(((x.dtype, x.ndim),))
            if run is None:
                return self._call_slow((x,))
            self._last = (x.dtype, x.ndim, run)  # one tuple: threads see old or new, never half
        try:
            outputs = run(self._fetch_names, {"input_0": x}, None)
        except Exception as exc:  # noqa: BLE001 - see _failed
            return self._failed([x], exc)
        return outputs[0] if self._single else outputs

    def _run_two(self, x, y):
        """``_run_one`` for two inputs: a dict literal and two checks cost a third of the
        general path's loop, and ``dict(zip(...))``."""
        if type(x) is not np.ndarray or type(y) is not np.ndarray or not x.size or not y.size:
            return self._call_slow((x, y))
        x_dtype, x_ndim, y_dtype, y_ndim, run = self._last_two
        if x.dtype is not x_dtype or x.ndim != x_ndim or y.dtype is not y_dtype or y.ndim != y_ndim:
            run = self._runs.get(((x.dtype, x.ndim), (y.dtype, y.ndim)))
            if run is None:
                return self._call_slow((x, y))
            self._last_two = (x.dtype, x.ndim, y.dtype, y.ndim, run)
        try:
            outputs = run(self._fetch_names, {"input_0": x, "input_1": y}, None)
        except Exception as exc:  # noqa: BLE001 - see _failed
            return self._failed([x, y], exc)
        return outputs[0] if self._single else outputs

    def plan_run(self, args: tuple[int, ...], picks: tuple[int, ...], general: Callable) -> Callable:
        """The whole run of a plan that is this one-input cluster alone (``interpreter.direct_call``):
        feed values in (``args``: which feed is the input), fetched outputs out (``picks``: which
        outputs, in fetch order). One frame over onnxruntime's binding, which returns the picked
        outputs in fetch order, for the input signature last seen: about 0.5 us less than
        ``general`` (the plan's own direct call, over ``run``), which answers everything else:
        a new signature (compiled and validated there), a native run, a failure, a scalar output."""
        if len(args) != 1 or len(set(picks)) != len(picks):
            return general
        (position,) = args
        names = [self._fetch_names[i] for i in picks]
        cell = [NO_PLAN_RUN]  # [(dtype, ndim, *picked_run)]: one tuple, swapped whole
        learned: dict[tuple, tuple] = {}  # (dtype, ndim) -> (its session, what ``cell`` holds)
        ndarray = np.ndarray

        def learn(feed_values):
            """``general``'s run; then, if its signature compiled and validated (``_runs`` is
            filled after ``_compiled``), that signature's run becomes the fast one (again where
            it was compiled again: ``_undeclared``)."""
            outputs = general(feed_values)
            x = feed_values[position]
            if type(x) is ndarray and x.size:
                signature = (x.dtype, x.ndim)
                if (signature,) in self._runs:
                    session = self._compiled[(signature,)]
                    entry = learned.get(signature)
                    if entry is None or entry[0] is not session:
                        entry = learned[signature] = (
                            session,
                            (*signature, *picked_run(session, names, picks)),
                        )
                    cell[0] = entry[1]
            return outputs

        def plan_run(feed_values):
            x = feed_values[position]
            dtype, ndim, run, fetches, guarded = cell[0]
            if type(x) is not ndarray or x.dtype is not dtype or x.ndim != ndim or not x.size:
                return learn(feed_values)
            if self._native_only:  # the cluster fell back (another signature failed validation)
                return general(feed_values)
            try:
                outputs = run(fetches, {"input_0": x}, None)
            except Exception:  # noqa: BLE001 - any failure: ``general`` answers (TF's error, or native)
                return learn(feed_values)
            if guarded and outputs.pop() < 0:  # TF's kernels answer these inputs
                return general(feed_values)
            index = 0
            for value in outputs:  # as ``fetched``: 0-d arrays become numpy scalars, as TF's are
                if type(value) is not ndarray:
                    outputs[index] = fetched(value, False, index)
                elif not value.ndim:
                    outputs[index] = value[()]
                index += 1
            return outputs

        return plan_run

    def _failed(self, inputs: list, exc: Exception):
        """The outputs of a run onnxruntime did not answer: a failed guard (TF's kernels raise
        its error, or compute what ONNX does not), or any other failure (an index out of range,
        a batch onnxruntime rejects)."""
        if isinstance(exc, Unguarded):
            return self._result(self._run_native(inputs))
        return self._after_failure(inputs, exc)

    def _after_failure(self, inputs, exc: Exception):
        """The native run of inputs onnxruntime failed on: TF's error where the input is bad (no
        warning: a bad request is the client's), else its outputs and a warning. Inputs that
        break the static shapes declared to onnxruntime compile their signature again instead."""
        undeclared = self._undeclared(inputs)
        if undeclared is not None:
            return self._result(undeclared)
        outputs = self._run_native(inputs)
        logger.warning("onnxruntime cluster %s failed on this run, ran natively: %s", self.name, exc)
        return self._result(outputs)

    def close(self) -> None:
        """Drops the onnxruntime sessions (their weights, arenas and thread pools) now, not when
        the cyclic collector next reaches the graph that holds this runner: a version unloaded
        gives its memory back at once. Later calls raise."""
        with self._lock:
            self._closed = True
            self._compiled, self._runs, self._signatures = {}, {}, {}
            self._last, self._last_two = (None, -1, None), (None, -1, None, -1, None)
            self._native_plan, self._constants = None, None

    def _call_slow(self, inputs):
        """A first run of a signature (compile and validate), a native run, or inputs that are
        not all ndarrays."""
        if self._closed:
            raise RuntimeError(f"Attempted to use a closed Session (cluster {self.name})")
        inputs = [x if type(x) is np.ndarray else np.asarray(x) for x in inputs]
        key = tuple([(x.dtype, x.ndim) for x in inputs])
        entry = self._compiled.get(key)
        if entry is None or entry is _NATIVE or self._native_only:
            return self._first_or_native(key, entry, inputs)
        if any(not x.size for x in inputs):  # onnxruntime's kernels disagree with TF's on empties
            return self._result(self._run_native(inputs))
        return self(*inputs)

    def _first_or_native(self, key: tuple, entry, inputs: list):
        """The first run of an input signature (compile and validate), or a native run."""
        if entry is None:
            if any(x.size == 0 for x in inputs):  # never compile or validate on empty tensors
                return self._result(self._run_native(inputs))
            with self._lock:
                entry = self._compiled.get(key)
                if entry is None:
                    signature = Signature(
                        tuple(dtypes.from_numpy(x.dtype) for x in inputs),
                        tuple(x.ndim for x in inputs),
                        declared_shapes(self._static_shapes, inputs),
                    )
                    return self._result(self._install(key, signature, inputs))
            if entry is not _NATIVE and not self._native_only:
                return self._call_slow(inputs)
        return self._result(self._run_native(inputs))

    def _install(self, key: tuple, signature: Signature, inputs: list) -> list:
        """Compiles ``signature`` for the inputs of ``key`` (under the lock), makes it the hot
        path's, and returns this first run's outputs."""
        with gc_paused():  # (converting allocates much and frees little)
            entry, results = self._compile(signature, inputs)
        self._compiled[key], self._signatures[key] = entry, signature
        if entry is not _NATIVE and not self._native_only:
            self._runs[key] = fast_run(entry, self._fetch_names)
        return results

    def _undeclared(self, inputs: list) -> list | None:
        """The outputs of inputs whose shapes break the static shapes their signature was
        compiled with (TF's C++ Session runs them: it does not check feeds against static
        shapes), compiled again with no dims declared; None for any other inputs."""
        key = tuple([(x.dtype, x.ndim) for x in inputs])
        with self._lock:
            signature = self._signatures.get(key)
            if signature is None or all(conforms(s, x.shape) for s, x in zip(signature.shapes, inputs)):
                return None
            logger.info("onnxruntime cluster %s: an input breaks its static shape; compiled again", self.name)
            results = self._install(key, Signature(signature.dtypes, signature.ranks), inputs)
            self._last, self._last_two = (None, -1, None), (None, -1, None, -1, None)
            return results

    def _result(self, outputs):
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _compile(self, signature: Signature, inputs) -> tuple[object, list]:
        """The session for ``signature`` (or _NATIVE) and this first run's outputs: from the
        cluster cache where it holds this signature (neither converted nor validated again),
        else converted and validated against the native kernels (then written to the cache)."""
        providers = options_lib.providers(self._options, self._device)
        cpu_only = all(p == "CPUExecutionProvider" for p in providers)  # its Gather checks bounds
        block = options_lib.channel_block(self._options, providers)
        key = (
            self._cache_key(signature, providers, block)
            if self._cache is not None and not self._native_only
            else None
        )
        stored = self._cache.stored_model(key) if key is not None else None
        if stored is not None:
            compiled = self._from_cache(stored, providers, inputs)
            if compiled is not None:
                return compiled
        native = self._run_native(inputs) if self._options.validate or self._native_only else None
        if self._native_only:
            return _NATIVE, native
        # Converting imports the converters (and onnx): a start from the cache never does.
        from runtime.onnx.converters import convert_cluster

        try:
            constants = dict(zip(self._constant_inputs, self._constant_values()))
            converted = convert_cluster(
                self._graph_def, self._inputs, self._outputs, signature, cpu_only, constants, block
            )
            # Weights used as they are: onnxruntime shares the variables' arrays, no copy (on
            # the CPU; a GPU session copies every weight to the device anyway).
            shared = {
                name: placeholder
                for name, array in converted.large.items()
                for placeholder, value in constants.items()
                if array is value and cpu_only
            }
            del constants
            if key is not None:  # (where the cache will keep them: serialized once)
                self._cache.place_weights(key, converted.model, converted.large)
            data, large = converted.model.SerializeToString(), converted.large
            del converted
            session = self._session(data, providers, {name: large[name] for name in shared}, large)
        except Exception as exc:  # noqa: BLE001 - any failure to convert or compile means native
            return self._fall_back(f"not converted: {type(exc).__name__}: {exc}", native, inputs)
        try:
            ours = self._first_run(session, inputs)
        except Exception as exc:  # noqa: BLE001 - a bad input raises TF's error here (compiled again next time)
            native = native if native is not None else self._run_native(inputs)
            return self._fall_back(f"not converted: {type(exc).__name__}: {exc}", native, inputs)
        if guarded(session) and ours.pop() < 0:  # these inputs are TF's kernels' to answer
            return session, native if native is not None else self._run_native(inputs)
        if native is not None:
            with np.errstate(all="ignore"):
                problem = self._mismatch(ours, native)
            if problem is not None:
                return self._fall_back(f"validation failed: {problem}", native, inputs)
            if key is not None:  # converted and validated: what the next start reads
                meta = {"cluster": self.name, "shared": shared}
                self._cache.write_model(key, data, large, meta)
        return session, ours

    def _session(
        self,
        model: bytes | str,
        providers: list[str],
        shared: dict[str, np.ndarray],
        held_out: dict[str, np.ndarray] | None = None,
    ) -> ort.InferenceSession:
        """A session of the model in ``model`` (bytes, or the path of a file). ``held_out``: its
        initializers that are in no file (``Converted.large``), which onnxruntime copies;
        ``shared``: those it uses in place (prepacking aside), never copied, never read from a
        file: arrays the session keeps alive."""
        so = options_lib.session_options(self._options, self._flops, self._heavy_ops)
        values = {name: ort.OrtValue.ortvalue_from_numpy(array) for name, array in (held_out or {}).items()}
        if values:
            so.add_external_initializers(list(values), list(values.values()))
        for name, array in shared.items():
            if name not in values:
                values[name] = ort.OrtValue.ortvalue_from_numpy(array)
            so.add_initializer(name, values[name])
        session = ort.InferenceSession(model, so, providers=providers)
        session.shared_initializers = ([values[name] for name in shared], list(shared.values()))
        # What it was given to copy (``runtime.footprint``): the model and the initializers not shared.
        copied = sum(array.nbytes for name, array in (held_out or {}).items() if name not in shared)
        session.held_bytes = copied + (len(model) if isinstance(model, bytes) else _file_size(model))
        session.text_tables = text_table.tables_of_session(session)  # (what ``fast_run`` reads)
        self.providers = session.get_providers()
        return session

    def _first_run(self, session: ort.InferenceSession, inputs) -> list:
        ours = session.run(None, {f"input_{i}": contiguous(x) for i, x in enumerate(inputs)})
        for i, (table, axis) in session.text_tables.items():
            ours[i] = text_table.take(table, ours[i], axis)
        return ours

    def _from_cache(self, stored, providers: list[str], inputs) -> tuple[object, list] | None:
        """The cached model's session and first outputs, or None where it fails (then it is
        converted again). Its weights used as they are come from the Session's variables."""
        try:
            shared = self._shared_weights(stored.meta.get("shared", {}))
            session = self._session(str(stored.path), providers, shared)
            ours = self._first_run(session, inputs)
        except Exception as exc:  # noqa: BLE001 - a bad input fails here too: the general path answers
            logger.info("onnxruntime cluster %s: cached model not used: %s", self.name, exc)
            return None
        if guarded(session) and ours.pop() < 0:
            return session, self._run_native(inputs)
        return session, ours

    def _shared_weights(self, shared: dict) -> dict[str, np.ndarray]:
        """Initializer -> its value, for the ``shared`` a cache entry names (initializer ->
        the placeholder of the weight it is)."""
        op_of = dict(zip(self._constant_inputs, self._constant_names))
        names = [op_of[placeholder] for placeholder in shared.values()]
        values = self._constants.values(names) if names else []
        return {name: np.ascontiguousarray(v) for name, v in zip(shared, values)}

    def _cache_key(self, signature: Signature, providers: list[str], block: int) -> str:
        """What this cluster's converted model depends on beyond the model and the converter."""
        return self._cache.key(
            "onnx",
            self._subgraph_digest,
            self._inputs,
            self._outputs,
            self._constant_names,
            list(signature.dtypes),
            list(signature.ranks),
            [None if s is None else list(s) for s in signature.shapes],
            providers,
            [self._options.validate, self._options.rtol, self._options.atol],
            block,
        )

    def _fall_back(self, why: str, native, inputs) -> tuple[object, list]:
        self._native_only = True
        self._runs = {}
        self._last, self._last_two = (None, -1, None), (None, -1, None, -1, None)
        logger.warning("onnxruntime cluster %s runs natively from now on: %s", self.name, why)
        if self._report is not None:
            self._report.record_fallback(self.name, why)
        return _NATIVE, native if native is not None else self._run_native(inputs)

    def _mismatch(self, ours: list, native: list) -> str | None:
        for index, (a, b) in enumerate(zip(ours, native)):
            a, b = np.asarray(a), np.asarray(b)
            where = f"output {index} ({self._outputs[index]})"
            if a.dtype != b.dtype or a.shape != b.shape:
                return f"{where}: {a.dtype}{list(a.shape)} vs native {b.dtype}{list(b.shape)}"
            if b.dtype.kind == "f":
                rtol, atol = _TOLERANCE.get(b.dtype, (self._options.rtol, self._options.atol))
                scale = max(1.0, float(np.nanmax(np.abs(b), initial=0.0)))
                close = np.isclose(a, b, rtol=rtol, atol=atol * scale, equal_nan=True)
                if not close.all():
                    worst = float(np.nanmax(np.abs(a.astype(np.float64) - b)))
                    return f"{where}: max abs difference {worst:.3g}"
            elif not np.array_equal(a, b):
                return f"{where}: values differ"
        return None

    def _constant_values(self) -> list[np.ndarray]:
        return self._constants.values(self._constant_names) if self._constant_names else []

    def _run_native(self, inputs) -> list:
        if self._native_plan is None:
            graph = Graph()  # (derived: the cluster's own nodes, checked where the model was read)
            graph.import_graph_def(self._native_def, derived=True)
            feeds = [graph.get_tensor_by_name(f"{n}:0") for n in [*self._inputs, *self._constant_inputs]]
            fetches = [graph.get_tensor_by_name(t) for t in self._outputs]
            resources, functions = None, None
            if graph.functions:  # a While's cond and body: they hold no resources (see delegate)
                resources = ResourceMgr()
                functions = FunctionLibraryRuntime(graph.functions, resources)
            self._native_plan = build_plan(feeds, fetches, (), resources, functions)
        with np.errstate(all="ignore"):  # the kernel is registered quiet: runs skip np.errstate
            try:
                values = [*inputs, *self._constant_values()]
                return [np.asarray(v) for v in run_plan(self._native_plan, values)]
            except errors.OpError as exc:  # TF's error names the model's node, not the cluster
                exc.names_the_model_node = True
                raise


_RUNNERS: weakref.WeakKeyDictionary[Operation, ClusterRunner] = weakref.WeakKeyDictionary()
_RUNNERS_LOCK = threading.Lock()
# Per delegation key (every cluster node carries it): its options, report, (weakly: the Session
# owns them) cluster constants and cluster cache, for runners attached late (in function bodies).
_CONTEXTS: dict[str, tuple] = {}
_KEYED: dict[str, weakref.WeakSet] = {}  # delegation key -> the runners made for it


def _static_shapes(graph_def: graph_pb2.GraphDef, input_names: list[str]) -> list[tuple | None]:
    """TF's static shape of each cluster input (its Placeholder's ``_output_shapes``, which
    partitioning records), None where unknown."""
    placeholders = {n.name: n for n in graph_def.node if n.op == "Placeholder"}
    shapes = []
    for name in input_names:
        node = placeholders.get(name)
        recorded = (
            node.attr["_output_shapes"].list.shape
            if node is not None and "_output_shapes" in node.attr
            else []
        )
        shapes.append(shape_from_proto(recorded[0]) if recorded else None)
    return shapes


def register_context(
    key: str, options: options_lib.DelegationOptions, report, constants=None, cache=None
) -> None:
    with _RUNNERS_LOCK:
        _CONTEXTS[key] = (options, report, weakref.ref(constants) if constants is not None else None, cache)
        _KEYED.setdefault(key, weakref.WeakSet())


def release(key: str) -> None:
    """The delegation ``key`` is done with (its Session closed): its context is forgotten and
    every runner made for it closed (``ClusterRunner.close``)."""
    with _RUNNERS_LOCK:
        _CONTEXTS.pop(key, None)
        runners = list(_KEYED.pop(key, ()))
    for runner in runners:
        runner.close()


def attach(
    op: Operation, options: options_lib.DelegationOptions, report=None, constants=None, cache=None
) -> ClusterRunner:
    """The runner of cluster node ``op``, created from its attrs with ``options``; ``constants``:
    the ``ClusterConstants`` answering for its weights read by name (``constant_names``);
    ``cache``: the ``ClusterCache`` its converted models are kept in (None: none)."""
    attr = op.node_def.attr
    named = None
    if "constant_names" in attr:
        named = (
            [n.decode() for n in attr["constant_inputs"].list.s],
            [n.decode() for n in attr["constant_names"].list.s],
            constants,
        )
    runner = ClusterRunner(
        op.name,
        attr["subgraph"].s,
        [n.decode() for n in attr["input_names"].list.s],
        [n.decode() for n in attr["output_names"].list.s],
        options,
        attr["device"].s.decode() if "device" in attr else "",
        report,
        attr["flops"].f if "flops" in attr else None,
        attr["native_subgraph"].s if "native_subgraph" in attr else b"",
        named,
        cache,
        attr["heavy_ops"].i if "heavy_ops" in attr else 0,
    )
    key = attr["key"].s.decode() if "key" in attr else ""
    with _RUNNERS_LOCK:
        _RUNNERS[op] = runner
        keyed = _KEYED.get(key)
        if keyed is not None:
            keyed.add(runner)
    return runner


def runner_of(op: Operation) -> ClusterRunner | None:
    return _RUNNERS.get(op)


@kernel(CLUSTER_OP, quiet=True, per_node=True)
def ort_cluster(*, ctx) -> ClusterRunner:
    """What each run of the node calls with the cluster's inputs: its runner's ``run``."""
    return _runner_for(ctx).run


def _runner_for(ctx) -> ClusterRunner:
    runner = _RUNNERS.get(ctx.op)
    if runner is None:  # in a function body (instantiated late), or a fused GraphDef imported anew
        attr = ctx.op.node_def.attr
        key = attr["key"].s.decode() if "key" in attr else ""
        context = _CONTEXTS.get(key, (options_lib.DelegationOptions(), None, None, None))
        options, report, constants, cache = context
        with _RUNNERS_LOCK:
            runner = _RUNNERS.get(ctx.op)
        runner = runner or attach(ctx.op, options, report, constants() if constants else None, cache)
    return runner


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0

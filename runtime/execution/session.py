"""``Session``: ``tf.compat.v1.Session.run`` over a ``runtime.Graph``, with TF's semantics and texts.

``run(fetches, feed_dict)`` accepts every fetch structure TF does (``runtime/execution/fetches.py``), feeds
keyed by Tensor or name, converts feeds to the tensor's dtype and checks their shapes as TF's
Python session does, and returns a fed tensor's feed when it is fetched. Each distinct
(feeds, fetches, targets) gets a ``Plan`` (``runtime/execution/plan.py``) built once and cached; a run is
then one pass of the interpreter loop over that plan.

Thread-safety: ``run`` may be called from many threads at once; plans are immutable and shared,
each run owns its values, resources lock themselves. ``close`` makes later runs fail and drops
the Session's resources (variables).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from apis.tensorflow.core.protobuf import config_pb2
from runtime import dtypes, errors
from runtime.execution import fp_errors
from runtime.execution.fetches import FetchMapper
from runtime.execution.function import FunctionLibraryRuntime
from runtime.execution.interpreter import RUN_STATE, fetched_values, instrument, run_plan, run_simple
from runtime.execution.native_fallback import NativeFallback
from runtime.execution.plan import Plan
from runtime.execution.planner import build_plan
from runtime.graph.device import LOCAL_CPU
from runtime.graph.graph import Graph, Operation, Tensor, get_default_graph
from runtime.kernels.resources import ResourceMgr
from runtime.tensor_util import as_bytes_array, conforms

_MAX_PLANS = 256


@dataclass(frozen=True)
class DeviceAttributes:
    """What ``Session.list_devices`` returns per device (TF's ``_DeviceAttributes``)."""

    name: str
    device_type: str
    memory_limit_bytes: int
    incarnation: int = 0


logger = logging.getLogger(__name__)


class Session:
    """Runs a Graph's ops; owns the resources (variables) those ops create."""

    def __init__(
        self,
        target: str = "",
        graph: Graph | None = None,
        config: config_pb2.ConfigProto | None = None,
        *,
        check_feed_shapes: bool = True,
    ):
        """``check_feed_shapes=False`` gives the C++ Session's feed semantics (what TF Serving
        runs): a feed's shape is not checked against its placeholder's static shape."""
        if target:
            raise errors.UnimplementedError(None, None, f"Session target {target!r}: only '' runs")
        self._graph = graph if graph is not None else get_default_graph()
        self._config = config if config is not None else config_pb2.ConfigProto()
        self._default_timeout_ms = self._config.operation_timeout_in_ms  # read once, not per run
        self._resources = ResourceMgr()
        self._functions = FunctionLibraryRuntime(self._graph.functions, self._resources)
        self._plans: dict[tuple, Plan] = {}
        self._plans_version = self._graph.version
        self._lock = threading.Lock()
        self._closed = False
        self._on_close: list[Callable[[], None]] = []
        self._check_feed_shapes = check_feed_shapes
        self.delegation_report = None  # set by runtime.onnx.delegate: what runs in onnxruntime
        self.cluster_constants = None  # set by delegate(): the weights its clusters read by name
        self._fallback: NativeFallback | None = None  # set with a rewritten graph (_replace_graph)

    # -- properties ----------------------------------------------------------------------------
    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def graph_def(self):
        return self._graph.as_graph_def()

    @property
    def sess_str(self) -> str:
        return ""

    @property
    def resources(self) -> ResourceMgr:
        return self._resources

    def list_devices(self) -> list[DeviceAttributes]:
        return [DeviceAttributes(LOCAL_CPU, "CPU", 268435456)]

    # -- run -------------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs what ``fetches`` need; returns values in the structure of ``fetches``."""
        self._check_open()
        mapper = FetchMapper(self._graph, fetches)
        feed_tensors, feed_values = self._convert_feeds(feed_dict)
        values = self._run(
            feed_tensors, feed_values, mapper.tensors, mapper.operations, options, run_metadata
        )
        return mapper.build(values)

    def make_callable(
        self, fetches, feed_list: Sequence | None = None, accept_options: bool = False
    ) -> Callable:
        """A function of the ``feed_list`` values running ``fetches``; resolves names once."""
        mapper = FetchMapper(self._graph, fetches)
        feed_tensors = tuple(self._feed_tensor(k) for k in (feed_list or ()))
        feed_dtypes = tuple(t.dtype for t in feed_tensors)
        key = (feed_tensors, tuple(mapper.tensors), tuple(mapper.operations))
        # An ndarray of exactly the feed's (non-string) dtype is fed as it is, when shapes are
        # not checked: the common case of a server, which decodes requests to those dtypes.
        check_shapes = self._check_feed_shapes
        exact = tuple(None if check_shapes else _exact_numpy_dtype(d) for d in feed_dtypes)

        count = len(feed_tensors)
        build = None if mapper.flat else mapper.build  # flat: the run's fresh list is the result

        def callable_(*feed_args, options=None, run_metadata=None, timeout_ms=0):
            # timeout_ms (beyond TF): RunOptions(timeout_in_ms=timeout_ms) without building one,
            # for a server's per-request deadlines; ``options`` wins where both are given.
            if len(feed_args) != count:
                raise TypeError(f"Expected {count} feed arguments, got {len(feed_args)}")
            if (options is not None or run_metadata is not None) and not accept_options:
                raise TypeError("options and run_metadata need accept_options=True")
            if self._closed:
                self._check_open()
            values = feed_args  # copied only where a feed needs converting
            i = 0
            for v in feed_args:  # a plain loop: half a comprehension's cost, paid per request
                if type(v) is not np.ndarray or v.dtype is not exact[i]:
                    if values is feed_args:
                        values = list(feed_args)
                    values[i] = _feed_value(feed_tensors[i], feed_dtypes[i], v, check_shapes)
                i += 1
            plan = self._plans.get(key)
            if plan is None or self._plans_version != self._graph._version:  # (not the property: per run)
                plan = self._plan(key)
            try:
                if plan.quiet and plan.direct is not None and (run_metadata is None or options is None):
                    # A fully delegated model: one call. A timeout has nothing to interrupt (run_plan
                    # checks it between steps) and the call reads no run state; no trace is asked.
                    results = plan.direct(values)
                elif plan.simple_run and options is None:  # a server's small native model
                    results = run_simple(plan, values, timeout_ms or self._default_timeout_ms)
                else:
                    results = self._run_plan(plan, values, options, run_metadata, timeout_ms)
            except Exception as exc:
                if self._fallback is None:
                    raise
                results = self._recover(key, values, exc, options, run_metadata, timeout_ms)
            return results if build is None else build(results)

        return callable_

    def _run(
        self,
        feeds: Sequence[Tensor],
        feed_values: list,
        fetches: Sequence[Tensor],
        targets: Sequence[Operation],
        options,
        run_metadata,
    ) -> list:
        key = (tuple(feeds), tuple(fetches), tuple(targets))
        try:
            return self._run_plan(self._plan(key), feed_values, options, run_metadata)
        except Exception as exc:
            if self._fallback is None:
                raise
            return self._recover(key, feed_values, exc, options, run_metadata)

    def _recover(self, key: tuple, feed_values, exc: Exception, options, run_metadata, timeout_ms: int = 0):
        """A delegated run that raised ``exc``, answered by the graph delegation rewrote
        (``native_fallback.py``); the plan of ``key`` is built again, on that graph, if it answers."""

        def run_native(native_key: tuple) -> list:
            plan = build_plan(*native_key, self._resources, self._fallback.functions)
            return self._run_plan(plan, feed_values, options, run_metadata, timeout_ms)

        results = self._fallback.recover(key, exc, run_native)
        with self._lock:
            self._plans.pop(key, None)
        return results

    def _run_plan(self, plan: Plan, feed_values: list, options, run_metadata, timeout_ms: int = 0) -> list:
        if options is None:
            timeout_ms, tracing = timeout_ms or self._default_timeout_ms, False
        else:
            timeout_ms = options.timeout_in_ms or self._default_timeout_ms
            tracing = run_metadata is not None and options.trace_level > 0
        if timeout_ms <= 0 and not tracing:
            direct = plan.direct  # one call returning fetched values: a fully delegated model
            if direct is None and plan.simple is not None:
                return run_simple(plan, feed_values)
            if plan.quiet:  # no numpy math: numpy's error state is not read
                if direct is not None:
                    return direct(feed_values)
                values = run_plan(plan, feed_values)
            else:
                token = fp_errors.ignore()  # TF's kernels give inf and nan without warnings
                try:
                    if direct is not None:
                        return direct(feed_values)
                    values = run_plan(plan, feed_values)
                finally:
                    fp_errors.restore(token)
        elif plan.simple_run and not tracing:  # no step reads the run state: they check the deadline
            return run_simple(plan, feed_values, timeout_ms)
        else:
            deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
            trace: list | None = [] if tracing else None
            token, ignored = RUN_STATE.set((deadline, trace)), fp_errors.ignore()
            try:
                steps = instrument(plan, trace) if trace is not None else None
                values = run_plan(plan, feed_values, steps, deadline)
            finally:
                fp_errors.restore(ignored)
                RUN_STATE.reset(token)
            if trace is not None:
                _write_step_stats(run_metadata, trace)
        return fetched_values(plan, values)

    def plan(self, feeds: Sequence[Tensor], fetches: Sequence[Tensor], targets: Sequence[Operation]) -> Plan:
        """The cached Plan for (feeds, fetches, targets), built on first use."""
        return self._plan((tuple(feeds), tuple(fetches), tuple(targets)))

    def _plan(self, key: tuple[tuple[Tensor, ...], tuple[Tensor, ...], tuple[Operation, ...]]) -> Plan:
        plan = self._plans.get(key)
        if plan is not None and self._plans_version == self._graph.version:
            return plan
        fallback = self._fallback
        if fallback is not None and fallback.is_native(key):  # the rewrite broke it: the original's
            plan = build_plan(*fallback.native_key(key), self._resources, fallback.functions)
        else:
            plan = build_plan(*key, self._resources, self._functions)
        with self._lock:
            if self._plans_version != self._graph.version or len(self._plans) >= _MAX_PLANS:
                self._plans = {}
                self._plans_version = self._graph.version
            self._plans[key] = plan
        return plan

    def _replace_graph(
        self,
        graph: Graph,
        on_fallback: Callable[[str, str], None] | None = None,
        original: Callable[[], Graph] | None = None,
    ) -> None:
        """Runs ``graph`` (delegation's rewrite, same tensor names) from now on; plans are rebuilt.
        The graph it replaces answers the runs ``graph`` fails (``native_fallback.py``): kept, or
        imported again by ``original()`` when first needed; ``on_fallback(signature, why)`` is
        told of each signature moved back to it."""
        with self._lock:
            if self._fallback is None and original is None:  # (the replaced graph's own runtime)
                functions = self._functions
                self._fallback = NativeFallback(self._graph, lambda _: functions, on_fallback)
            elif self._fallback is None:  # (nothing here may hold the replaced graph)
                resources = self._resources
                runtime = lambda native: FunctionLibraryRuntime(native.functions, resources)  # noqa: E731
                self._fallback = NativeFallback(original, runtime, on_fallback)
            if graph.functions is not self._graph.functions:  # a library with rewritten bodies
                self._functions = FunctionLibraryRuntime(graph.functions, self._resources)
            self._graph = graph
            self._plans = {}
            self._plans_version = graph.version

    # -- feeds ------------------------------------------------------------------------------
    def _feed_tensor(self, key) -> Tensor:
        try:
            return self._graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
        except (TypeError, ValueError, KeyError) as e:
            raise TypeError(f"Cannot interpret feed_dict key as Tensor: {e.args[0]}") from None

    def _convert_feeds(self, feed_dict) -> tuple[tuple[Tensor, ...], list]:
        if not feed_dict:
            return (), []
        tensors, values = [], []
        for key, value in feed_dict.items():
            tensor = self._feed_tensor(key)
            tensors.append(tensor)
            values.append(_feed_value(tensor, tensor.dtype, value, self._check_feed_shapes))
        return tuple(tensors), values

    # -- lifetime ---------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")

    def close(self) -> None:
        """Later runs raise RuntimeError; variables and other resources are dropped, and what
        ``on_close`` registered runs (once)."""
        self._closed = True
        self._resources.clear()
        with self._lock:
            self._plans = {}
            callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # noqa: BLE001 - a failing release must not stop the others
                logger.exception("A Session close callback raised")

    def on_close(self, callback: Callable[[], None]) -> None:
        """``callback()`` runs when the Session closes: what a layer above attached to it (the
        delegation's onnxruntime sessions) is released then, not when the collector finds it."""
        with self._lock:
            self._on_close.append(callback)

    def __enter__(self) -> Session:
        self._default = self.as_default()
        self._default.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self._default.__exit__(*exc_info)
        self.close()

    @contextlib.contextmanager
    def as_default(self) -> Iterator[Session]:
        """Makes this the default session (and its graph the default graph) in this thread."""
        stack = _default_sessions()
        stack.append(self)
        try:
            with self._graph.as_default():
                yield self
        finally:
            stack.pop()


_local = threading.local()


def _default_sessions() -> list[Session]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def get_default_session() -> Session | None:
    stack = _default_sessions()
    return stack[-1] if stack else None


def _feed_value(tensor: Tensor, dtype: int | None, value, check_shape: bool = True) -> np.ndarray:
    """A feed of ``tensor`` (whose ``dtype`` the caller looked up) converted as TF's Session.run
    converts it, with TF's errors."""
    if isinstance(value, (Tensor, Operation)):
        raise TypeError(
            "The value of a feed cannot be a tf.Tensor object. Acceptable feed values include "
            "Python scalars, strings, lists, numpy ndarrays, or TensorHandles."
        )
    if dtype is not None and not (isinstance(dtype, int) and dtypes.is_supported(dtype)):
        op = tensor.op  # a malformed dtype attr, which TF's import would have refused
        raise errors.InvalidArgumentError(
            op.node_def,
            op,
            f"Cannot feed {tensor.name}: its type {dtype!r} is no DataType\n\t [[{{{{node {op.name}}}}}]]",
        )
    if dtype is None:
        array = np.asarray(value)
    else:
        np_dtype = dtypes.as_numpy_dtype(dtype)
        if isinstance(value, int) and not isinstance(value, bool):
            _check_int_feed(value, np_dtype)
        array = np.asarray(value, dtype=np_dtype)
        if dtypes.base_dtype(dtype) == dtypes.DT_STRING:
            array = as_bytes_array(array)  # TF's kernels see bytes
    if check_shape and not conforms(tensor.shape, array.shape):
        raise ValueError(
            f"Cannot feed value of shape {array.shape} for Tensor {tensor.name}, which has shape "
            f"{_shape_str(tensor.shape)}"
        )
    return array


def _exact_numpy_dtype(dtype: int | None) -> np.dtype | None:
    """The numpy dtype a feed of ``dtype`` is converted to, where conversion is the identity
    (not strings, which become bytes arrays); None otherwise."""
    if dtype is None or dtypes.base_dtype(dtype) == dtypes.DT_STRING:
        return None
    try:
        return dtypes.as_numpy_dtype(dtype)
    except KeyError:
        return None


def _shape_str(shape: tuple) -> str:
    return str(tuple(shape))


def _check_int_feed(value: int, np_dtype: np.dtype) -> None:
    try:
        ok = np_dtype != np.dtype(object) and np_dtype.type(value) == value
    except (OverflowError, TypeError, ValueError):
        ok = False
    if not ok:
        shown = "object" if np_dtype == np.dtype(object) else f"numpy.{np_dtype.type.__name__}"
        raise TypeError(
            f"Type of feed value {value} with type {type(value)} is not compatible with Tensor "
            f"type <class '{shown}'>. Try explicitly setting the type of the feed tensor to a "
            "larger type (e.g. int64)."
        )


def _write_step_stats(run_metadata, trace: list) -> None:
    device_stats = run_metadata.step_stats.dev_stats.add(device=LOCAL_CPU)
    for op, start_us, micros in trace:
        stats = device_stats.node_stats.add(
            node_name=op.name,
            all_start_micros=start_us,
            op_start_rel_micros=0,
            op_end_rel_micros=micros,
            all_end_rel_micros=micros,
            timeline_label=f"{op.name} = {op.type}()",
        )
        stats.scheduled_micros = start_us

"""TF Serving's ``TfLiteSession`` over LiteRT's interpreter: a Session whose ``run`` feeds and
fetches the primary subgraph's tensors by name.

A pool of ``--num_tflite_pools`` interpreters (one thread each, as TF Serving builds them) serves
the runs: a run takes an interpreter (waiting while all are busy), resizes each input whose shape
or size differs from the request's, copies the inputs in, invokes, copies the outputs out, and
gives the interpreter back. With ``--num_tflite_interpreters_per_pool`` above 1, runs go through
the session's own batch scheduler (``serving.inference.tflite.batching``), as TF Serving's does.

Thread-safe: an interpreter is used by one run at a time, and LiteRT's ``invoke`` releases the
GIL, so runs on different interpreters proceed in parallel. ``close`` drops the interpreters.
"""

from __future__ import annotations

import logging
import math
import queue
from collections.abc import Callable, Sequence

import numpy as np

from runtime import errors
from serving.inference.tflite.batching import INITIAL_BATCH_SIZE, TfLiteBatchScheduler
from serving.inference.tflite.model import TfLiteModel, resolve

logger = logging.getLogger(__name__)


class InterpreterWrapper:
    """One LiteRT interpreter and the shapes its inputs were last allocated for. Not
    thread-safe: the pool hands it to one run at a time."""

    def __init__(self, interpreter) -> None:
        self.interpreter = interpreter
        self.shapes = {d["index"]: tuple(d["shape"]) for d in interpreter.get_input_details()}
        self.names = {d["index"]: d["name"] for d in interpreter.get_input_details()}
        self.itemsizes = {d["index"]: np.dtype(d["dtype"]).itemsize for d in interpreter.get_input_details()}

    def invoke(self, indices: Sequence[int], values: Sequence[np.ndarray], outputs: Sequence[int]) -> list:
        """``SetInputAndInvokeMiniBatch`` then the outputs' copies, with TF Serving's errors."""
        interpreter = self.interpreter
        for index, value in zip(indices, values, strict=True):
            if value.shape != self.shapes[index]:
                self._resize(index, value)
        try:
            for index, value in zip(indices, values, strict=True):
                interpreter.set_tensor(index, value)
        except ValueError as e:  # (a dtype the signature's TensorInfo did not say)
            raise errors.InvalidArgumentError(None, None, str(e).strip()) from None
        try:
            interpreter.invoke()
        except (RuntimeError, ValueError) as e:
            logger.error("TF Lite invoke failed: %s", e)
            raise errors.InternalError(None, None, "Failed to invoke TfLite interpreter") from None
        return [_as_served(interpreter.get_tensor(index)) for index in outputs]

    def _resize(self, index: int, value: np.ndarray) -> None:
        interpreter = self.interpreter
        old = math.prod(self.shapes[index]) * self.itemsizes[index]
        self.shapes[index] = ()  # unknown until allocated: a failure resizes again next time
        try:
            interpreter.resize_tensor_input(index, value.shape)
        except (RuntimeError, ValueError) as e:
            logger.error("TF Lite resize failed: %s", e)
            raise errors.InternalError(
                None,
                None,
                f"Failed to resize input tensor: {self.names[index]} from {old} to {value.nbytes} bytes.",
            ) from None
        try:
            interpreter.allocate_tensors()
        except (RuntimeError, ValueError) as e:
            logger.error("TF Lite AllocateTensors failed for input shape %s: %s", value.shape, e)
            raise errors.InternalError(None, None, "Failed to allocate tensors") from None
        self.shapes[index] = value.shape


def _as_served(value: np.ndarray) -> np.ndarray:
    """An output as the request path encodes it: strings as an object array of bytes."""
    if value.dtype.kind in "SU":
        out = np.empty(value.shape, object)
        out.reshape(-1)[:] = [bytes(v) for v in value.reshape(-1)]
        return out
    return value


class InterpreterPool:
    """``TfLiteInterpreterPool``: ``get`` blocks until an interpreter is free; ``put`` returns it."""

    def __init__(self, wrappers: list[InterpreterWrapper]) -> None:
        self._free: queue.LifoQueue[InterpreterWrapper] = queue.LifoQueue()
        for wrapper in wrappers:
            self._free.put(wrapper)
        self.size = len(wrappers)

    def get(self) -> InterpreterWrapper:
        return self._free.get()

    def put(self, wrapper: InterpreterWrapper) -> None:
        self._free.put(wrapper)


class TfLiteSession:
    """The Session of a TF Lite version: ``run`` and ``make_callable`` as the request path calls
    a Session (``options`` and ``timeout_ms`` bound only the time a run waits in the session's
    batch queue, as in TF Serving). Thread-safe; ``close`` ends the batch threads."""

    def __init__(
        self, model: TfLiteModel, pool: InterpreterPool, interpreters_per_pool: int, batch_size: int
    ):
        self.model = model
        self._pool = pool
        self._scheduler: TfLiteBatchScheduler | None = None
        if interpreters_per_pool > 1:
            default_batch = (INITIAL_BATCH_SIZE + interpreters_per_pool - 1) // interpreters_per_pool
            self._scheduler = TfLiteBatchScheduler(
                self._run,
                num_batch_threads=pool.size,
                max_execution_batch_size=batch_size if batch_size > 1 else default_batch,
                max_enqueued_batches=pool.size * 100,
            )

    def run(self, fetches, feed_dict: dict, options=None) -> list:
        names = list(feed_dict)
        call = self.make_callable(list(fetches), names)
        return call(*(feed_dict[name] for name in names), options=options)

    def make_callable(self, fetches: Sequence[str], feeds: Sequence[str], accept_options: bool = True):
        """``call(*values, options=None, timeout_ms=0)``: the names resolved once, TF Serving's
        INTERNAL for a name the primary subgraph lacks."""
        feed_indices = [_input_index(self.model, name) for name in feeds]
        fetch_indices = [_output_index(self.model, name) for name in fetches]
        order = sorted(range(len(feed_indices)), key=feed_indices.__getitem__)  # tensor index order
        indices = [feed_indices[i] for i in order]
        if len(set(indices)) != len(indices):  # TF Serving's map keeps one value per tensor: the last
            last = {feed_indices[i]: i for i in range(len(feed_indices))}
            order = [last[index] for index in sorted(last)]
            indices = sorted(last)

        def call(*values, options=None, timeout_ms: int = 0) -> list:
            arrays = [np.ascontiguousarray(values[i]) for i in order]
            if self._scheduler is not None:
                if options is not None and options.timeout_in_ms:
                    timeout_ms = options.timeout_in_ms
                return self._scheduler.schedule(indices, arrays, fetch_indices, timeout_ms)
            return self._run(indices, arrays, fetch_indices)

        return call

    def _run(self, indices: list[int], values: list[np.ndarray], outputs: list[int]) -> list:
        wrapper = self._pool.get()
        try:
            return wrapper.invoke(indices, values, outputs)
        finally:
            self._pool.put(wrapper)

    def close(self) -> None:
        if self._scheduler is not None:
            self._scheduler.stop()


def _input_index(model: TfLiteModel, name: str) -> int:
    index = resolve(model.inputs, name)
    if index is None:
        raise errors.InternalError(
            None, None, f"Unknown tensor '{name}'.\n\tMissing input TFLite tensor: {name}"
        )
    return index


def _output_index(model: TfLiteModel, name: str) -> int:
    index = resolve(model.outputs, name)
    if index is None:
        raise errors.InternalError(
            None, None, f"Missing output TFLite tensor: {name}: Unknown tensor '{name}'."
        )
    return index


def create_pool(
    model_bytes: bytes, size: int, interpreter_factory: Callable[..., object], first=None
) -> InterpreterPool:
    """``CreateTfLiteInterpreterPool``: ``size`` interpreters of one thread, tensors allocated
    (``first``, an interpreter already built from ``model_bytes``, among them)."""
    wrappers = []
    for n in range(max(1, size)):
        if n == 0 and first is not None:
            allocate(first)
            wrappers.append(InterpreterWrapper(first))
            continue
        try:
            interpreter = interpreter_factory(model_content=model_bytes, num_threads=1)
        except (RuntimeError, ValueError) as e:
            logger.error("LiteRT could not build an interpreter: %s", e)
            raise errors.InternalError(
                None, None, "Failed to create a TFLite interpreter with the given model"
            ) from None
        allocate(interpreter)
        wrappers.append(InterpreterWrapper(interpreter))
    return InterpreterPool(wrappers)


def allocate(interpreter) -> None:
    """``AllocateTensors`` at creation, with TF Serving's text; an op LiteRT lacks is named."""
    try:
        interpreter.allocate_tensors()
    except (RuntimeError, ValueError) as e:
        text = str(e)
        logger.error("LiteRT could not allocate the model's tensors: %s", text)
        if "unresolved custom op" in text:
            op = text.split("unresolved custom op:", 1)[1].split()[0].rstrip(".")
            raise errors.UnimplementedError(
                None,
                None,
                f"Failed to allocate tensors: the model uses custom op {op}, which LiteRT's "
                "interpreter does not have",
            ) from None
        raise errors.InternalError(None, None, "Failed to allocate tensors") from None

"""Batch tasks: one Run() call waiting in a queue, and the pieces a large one is cut into.

A task is answered once, by ``finish`` (its outputs) or ``fail`` (an error), on whichever
thread ran its batch; its caller blocks in ``wait`` on a lock of its own (a plain lock, the
cheapest thing Python can block on and be woken from), so that no caller ever waits on a lock
that others hold while a batch runs.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence

from serving.batching import batch_forming

_allocate_lock = threading.Lock


class BatchTask:
    """One Run() call waiting in a queue: its inputs (in the queue's input order), its size
    (rows, dimension 0) and deadline (``time.monotonic()`` seconds; None: none). Answered once
    by ``finish`` or ``fail``; the caller blocks in ``wait`` on a lock of its own."""

    __slots__ = ("inputs", "size", "enqueued", "deadline", "outputs", "error", "answered", "_done")

    def __init__(self, inputs: Sequence, size: int, enqueued: float, deadline: float | None) -> None:
        self.inputs, self.size, self.enqueued, self.deadline = inputs, size, enqueued, deadline
        self.outputs: list | None = None
        self.error: BaseException | None = None
        self.answered = False
        self._done = _allocate_lock()
        self._done.acquire()

    def finish(self, outputs: list) -> None:
        self.outputs, self.answered = outputs, True
        self._done.release()

    def fail(self, error: BaseException) -> None:
        self.error, self.answered = error, True
        self._done.release()

    def wait(self) -> list:
        """The task's outputs, once answered; its error raised otherwise (a copy per task: one
        exception raised in many threads would pile their tracebacks onto each other)."""
        self._done.acquire()
        if self.error is not None:
            raise _fresh(self.error)
        return self.outputs


class _Piece(BatchTask):
    """A piece of a split task: answers its ``SplitTask`` instead of a caller."""

    __slots__ = ("_parent", "_index")

    def __init__(self, inputs, size, parent: SplitTask, index: int) -> None:
        super().__init__(inputs, size, parent.enqueued, parent.deadline)
        self._parent, self._index = parent, index

    def finish(self, outputs: list) -> None:
        self.answered = True
        self._parent.piece_done(self._index, outputs, None)

    def fail(self, error: BaseException) -> None:
        self.answered = True
        self._parent.piece_done(self._index, None, error)


class SplitTask(BatchTask):
    """A task cut into pieces (``enable_large_batch_splitting``): answered when its last piece
    is, with the pieces' outputs concatenated, or the first error a piece met."""

    __slots__ = ("pieces", "_results", "_left", "_lock")

    def __init__(self, task: BatchTask, sizes: Sequence[int]) -> None:
        super().__init__(task.inputs, task.size, task.enqueued, task.deadline)
        self._results: list = [None] * len(sizes)
        self._left = len(sizes)
        self._lock = _allocate_lock()
        inputs = batch_forming.slice_inputs(task.inputs, sizes)
        self.pieces = [_Piece(inputs[i], size, self, i) for i, size in enumerate(sizes)]

    def piece_done(self, index: int, outputs: list | None, error: BaseException | None) -> None:
        with self._lock:
            self._results[index] = outputs
            if error is not None and self.error is None:
                self.error = error
            self._left -= 1
            last = self._left == 0
        if last:
            if self.error is None:
                try:
                    self.outputs = batch_forming.concat_outputs(self._results)
                except Exception as e:  # noqa: BLE001 - the caller gets it, as any batch error
                    self.error = e
            self.answered = True
            self._done.release()


def _fresh(error: BaseException) -> BaseException:
    try:
        return copy.copy(error)
    except Exception:  # noqa: BLE001 - an exception that cannot be copied is raised as it is
        return error

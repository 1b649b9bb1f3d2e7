"""TF1 dataflow control flow: Switch/Merge with dead tensors, and the ops of while loop frames.

Switch sends its input to one output and marks the other ``DEAD``; the Session skips every op fed
a dead tensor (its outputs are dead too) until a Merge, which ``accepts_dead`` and forwards the
one live input. While loops (Enter, Exit, NextIteration, LoopCond) are frames: ``runtime/execution/frames.py``
turns each into one step that runs the loop body's plan per iteration, feeding Enter outputs and
the NextIteration back edges itself. Their kernels here only forward a value: Exit and LoopCond
run inside a frame's plan; Enter and NextIteration are registered so plans resolve them.
"""

from __future__ import annotations

import numpy as np

from runtime import errors
from runtime.kernels.registry import DEAD, kernel


@kernel("Switch", "RefSwitch")
def switch(data, pred):
    return (DEAD, data) if bool(np.asarray(pred)) else (data, DEAD)


@kernel("Merge", "RefMerge", accepts_dead=True)
def merge(inputs):
    for index, value in enumerate(inputs):
        if value is not DEAD:
            return value, np.int32(index)
    return DEAD, DEAD


@kernel("Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration")
def frame_edge(data):
    return data


@kernel("LoopCond")
def loop_cond(input):
    return input


@kernel("ControlTrigger", accepts_dead=True)
def control_trigger():
    """Runs even when its control inputs are dead, and its control output is live (as in TF)."""
    return None


def _element(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, (np.floating, float)):
        text = str(value)
        return text[:-2] if text.endswith(".0") else text
    return str(value)


def _summarize(value, summarize: int) -> str:
    """A tensor as TF's ``Tensor::SummarizeValue`` prints it: nested brackets per dimension,
    the first ``summarize`` values (all when negative), "..." where values were left out."""
    array = np.asarray(value)
    flat = array.reshape(-1)
    limit = flat.size if summarize < 0 else min(summarize, flat.size)
    if array.ndim == 0:
        return _element(flat[0]) if limit else "..."
    out: list[str] = []
    index = 0

    def dim(axis: int) -> None:
        nonlocal index
        if index >= limit:
            return
        if axis == array.ndim - 1:
            for i in range(array.shape[axis]):
                if index >= limit:
                    if axis != 0:
                        out.append("...")
                    return
                out.append((" " if i else "") + _element(flat[index]))
                index += 1
            return
        for _ in range(array.shape[axis]):
            opened = index < limit
            if opened:
                out.append("[")
            dim(axis + 1)
            if index < limit or opened:
                out.append("]")

    dim(0)
    return "".join(out) + ("..." if flat.size > limit else "")


@kernel("Assert", stateful=True)
def assert_(condition, data, *, summarize=3):
    """``tf.debugging.Assert`` (Python's control_flow_assert): InvalidArgument when false."""
    if not bool(np.asarray(condition)):
        shown = " ".join(f"[{_summarize(d, summarize)}]" for d in data)
        raise errors.InvalidArgumentError(None, None, f"assertion failed: {shown}")
    return None

"""TF1 dataflow control flow: Switch/Merge with dead tensors, and the ops of while loop frames.

Switch sends its input to one output and marks the other ``DEAD``; the Session skips every op fed
a dead tensor (its outputs are dead too) until a Merge, which ``accepts_dead`` and forwards the
one live input. While loops (Enter, Exit, NextIteration, LoopCond) are frames: ``runtime/frames.py``
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


def _summarize(value, summarize: int) -> str:
    """A tensor as TF's Assert prints it: its first ``summarize`` values (all when negative)."""
    flat = np.asarray(value).reshape(-1)
    shown = flat if summarize < 0 else flat[:summarize]
    text = " ".join(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in shown)
    return text + ("..." if len(shown) < flat.size else "")


@kernel("Assert", stateful=True)
def assert_(condition, data, *, summarize=3):
    """``tf.debugging.Assert`` (Python's control_flow_assert): InvalidArgument when false."""
    if not bool(np.asarray(condition)):
        shown = " ".join(f"[{_summarize(d, summarize)}]" for d in data)
        raise errors.InvalidArgumentError(None, None, f"assertion failed: {shown}")
    return None

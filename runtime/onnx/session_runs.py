"""Running a cluster's onnxruntime session with as little Python as possible (``ClusterRunner``'s
hot paths): the binding's run without ``InferenceSession.run``'s wrapper, the guard output
checked, strings of text tables taken (``text_table.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnxruntime as ort

from runtime.onnx import text_table
from runtime.onnx.interface import GUARD


def fast_run(session: ort.InferenceSession, fetch_names: list[str], outputs: Sequence[int] | None = None):
    """``session.run`` minus its Python wrapper (``binding_run``). A guarded model's run also
    fetches its guard and raises ``Unguarded`` where it fails; an output of positions in a table
    of text comes back as the table's strings there (``text_table.py``). ``outputs``: which of the
    model's outputs ``fetch_names`` name (default: all, in order)."""
    run = binding_run(session)
    text_tables = getattr(session, "text_tables", {})
    indices = range(len(fetch_names)) if outputs is None else outputs
    tables = [(i, text_tables[index]) for i, index in enumerate(indices) if index in text_tables]
    has_guard = guarded(session)
    if not has_guard and not tables:
        return run
    names = [*fetch_names, GUARD] if has_guard else fetch_names
    take = text_table.take

    def checked(_fetch_names, feeds, options):
        outputs = run(names, feeds, options)
        if has_guard and outputs.pop() < 0:
            raise Unguarded
        for i, (table, axis) in tables:
            outputs[i] = take(table, outputs[i], axis)
        return outputs

    return checked


def binding_run(session: ort.InferenceSession):
    """``session.run`` minus its Python wrapper (which checks feed names, ours by construction,
    and retries a failed GPU run on the CPU): about 1 us a call, a sixth of a small model's run.
    A CUDA session keeps the wrapper for its retry."""
    binding = getattr(session, "_sess", None)
    if binding is not None and session.get_providers() == ["CPUExecutionProvider"]:
        return binding.run
    return session.run


def picked_run(session: ort.InferenceSession, names: list[str], picks: tuple[int, ...]) -> tuple:
    """(run, fetch names, guarded) for ``ClusterRunner.plan_run``: the binding's run, which checks
    the guard inline (one frame less than ``fast_run``'s), unless outputs come from text tables."""
    if getattr(session, "text_tables", None):
        return fast_run(session, names, picks), names, False
    if guarded(session):
        return binding_run(session), [*names, GUARD], True
    return binding_run(session), names, False


NO_PLAN_RUN = (None, -1, None, None, False)  # what ``plan_run`` runs before it learns a signature


class Unguarded(Exception):
    """A guard of the converted model failed on this input (``converter.Builder.guard``)."""


def guarded(session: ort.InferenceSession) -> bool:
    outputs = session.get_outputs()
    return bool(outputs) and outputs[-1].name == GUARD


def contiguous(x) -> np.ndarray:
    array = np.asarray(x)  # 0-d stays 0-d (np.ascontiguousarray would make it 1-d)
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)

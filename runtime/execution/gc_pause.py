"""``gc_paused()``: no cyclic garbage collection while a model is built.

Loading and delegating a model allocates a few hundred thousand Python objects (protos, graph
ops, plans) that live as long as the model: each collection the allocations trigger walks all of
them and frees next to nothing, about a quarter of a load's time. Collection is paused inside the
block and resumed (where it was enabled) when the last of the blocks open in any thread ends.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()

"""Index range checks the gather, scatter and variable kernels share.

A module of its own so that a kernel module needing only these (``resource_variable_ops``, which
every start from a SavedModel imports) does not import the indexing kernels, and with them the
array and math kernels.
"""

from __future__ import annotations

import numpy as np

SMALL = 32  # at most this many elements, checks run on Python lists: numpy's per-call cost dominates


def in_range(indices: np.ndarray, limit: int) -> bool:
    """Whether every index is in [0, limit)."""
    if indices.size <= SMALL:
        flat = indices.ravel().tolist()
        return not flat or (min(flat) >= 0 and max(flat) < limit)
    return bool(indices.min() >= 0) and bool(indices.max() < limit)

"""TF1 control flow (``tf.compat.v1.cond``'s Switch/Merge): dead tensors, no frames yet.

Switch sends its input to one output and marks the other ``DEAD``; the Session skips every op fed
a dead tensor (its outputs are dead too) until a Merge, which ``accepts_dead`` and forwards the
one live input. While loops (Enter/Exit/NextIteration frames) are not supported yet.
"""

from __future__ import annotations

import numpy as np

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

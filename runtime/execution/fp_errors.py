"""numpy's floating-point error handling while TF's kernels run: ignored, as TF gives inf and nan
without a word.

``np.errstate(all="ignore")`` builds that state anew on every entry, about 1 us, paid on every
run. numpy 2 keeps the state in a context variable, so a run sets a state built once here and
resets it; numpy 1 keeps it per thread, where ``np.seterr`` sets and restores it.
"""

from __future__ import annotations

import functools

import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar
except ImportError:  # numpy 1
    _extobj_contextvar = None

if _extobj_contextvar is not None:
    with np.errstate(all="ignore"):
        _IGNORED = _extobj_contextvar.get()

    # The context variable's own methods: no Python frame per call.
    ignore = functools.partial(_extobj_contextvar.set, _IGNORED)
    ignore.__doc__ = "Ignore floating-point errors in this context; returns what ``restore`` takes."
    restore = _extobj_contextvar.reset

else:

    def ignore():
        """Ignore floating-point errors in this thread; returns what ``restore`` takes."""
        return np.seterr(all="ignore")

    def restore(token) -> None:
        np.seterr(**token)

"""The bytes a loaded model holds: its arrays (variables, constants, their converted forms) and
what its onnxruntime sessions copied, found by walking the objects reachable from it.

A walk, not bookkeeping: every place that keeps an array (variable stores, constant caches,
plans, delegation) would otherwise have to report it, and one that did not would go unseen.
The walk follows ``gc.get_referents`` from the root and does not enter what is shared by the
whole process (modules, classes, a function's globals) or another Session (another model's). Counted once each, by identity:

- a numpy array that owns its memory (a view counts through its base), and ``bytes`` or
  ``bytearray`` of ``MIN_BYTES`` or more;
- an onnxruntime session's ``held_bytes`` (``runtime.onnx.cluster`` sets it: the serialized
  model and the initializers it copied; its arenas and prepacked weights are not visible).
"""

from __future__ import annotations

import gc
import mmap
import types
from typing import NamedTuple

import numpy as np

MIN_BYTES = 4096
_OPAQUE = (
    types.ModuleType,
    type,
    types.FunctionType,  # (entered for its closure and defaults only)
    types.BuiltinFunctionType,
    types.CodeType,
    types.FrameType,
    types.MethodWrapperType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
)
_SKIPPED = (*_OPAQUE, str, int, float, bool, type(None))
MAX_OBJECTS = 5_000_000  # a bound on the walk, whatever the root reaches


class Footprint(NamedTuple):
    arrays: int  # bytes of numpy arrays and large bytes objects
    onnxruntime: int  # bytes onnxruntime sessions were given (as far as they can be measured)

    @property
    def total(self) -> int:
        return self.arrays + self.onnxruntime


def footprint(root, stop_types: tuple[type, ...] = (), allow: tuple = ()) -> Footprint:
    """The bytes held by what ``root`` reaches, not entering instances of ``stop_types``
    other than ``root`` and the objects in ``allow``."""
    allowed = {id(a) for a in allow}
    seen, counted = {id(root)}, set()
    stack = [root]
    arrays = ort = visited = 0
    while stack and visited < MAX_OBJECTS:
        obj = stack.pop()
        visited += 1
        if isinstance(obj, np.ndarray):
            owner = obj
            while isinstance(owner.base, np.ndarray):
                owner = owner.base
            if owner.base is None:  # owns its memory
                if id(owner) not in counted:
                    counted.add(id(owner))
                    arrays += owner.nbytes
                    if owner.dtype.hasobject:
                        stack.extend(x for x in owner.flat if id(x) not in seen and not seen.add(id(x)))
            elif id(owner.base) not in seen:  # a view of a buffer: counted as that buffer
                seen.add(id(owner.base))
                stack.append(owner.base)
            continue
        if isinstance(obj, bytes | bytearray | mmap.mmap):
            if len(obj) >= MIN_BYTES:
                arrays += len(obj)
            continue
        if isinstance(obj, types.FunctionType):  # what it closes over, never its globals
            refs = [obj.__closure__, obj.__defaults__, obj.__kwdefaults__]
            stack.extend(r for r in refs if r is not None and id(r) not in seen and not seen.add(id(r)))
            continue
        if type(obj).__name__ == "InferenceSession":
            held = getattr(obj, "__dict__", {}).get("held_bytes", 0)
            ort += held if isinstance(held, int) else 0
        for ref in gc.get_referents(obj):
            if id(ref) in seen:
                continue
            if isinstance(ref, _SKIPPED) and type(ref) is not types.FunctionType:
                continue
            if stop_types and isinstance(ref, stop_types) and id(ref) not in allowed:
                continue
            seen.add(id(ref))
            stack.append(ref)
    return Footprint(arrays, ort)

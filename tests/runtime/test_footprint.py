"""runtime.footprint: the bytes a loaded model holds, by walking what it reaches."""

from __future__ import annotations

import numpy as np

from runtime.footprint import MIN_BYTES, footprint

KIB = 1024


class Holder:
    def __init__(self, **values):
        self.__dict__.update(values)


class InferenceSession:  # what runtime.onnx.cluster marks: held_bytes, per instance
    def __init__(self, held):
        self.held_bytes = held


GLOBAL_ARRAY = np.zeros(1000 * KIB, np.uint8)


def test_arrays_once_each_views_through_their_base_and_large_bytes():
    a = np.zeros(100 * KIB, np.uint8)
    data = bytes(64 * KIB)
    root = Holder(a=a, again=a, view=a[10:20], nested=[{"x": (a.reshape(-1, 1024),)}], data=data)
    root.small = b"x" * (MIN_BYTES - 1)
    root.over_bytes = np.frombuffer(data, np.uint8)  # a view of the bytes: counted as them, once
    assert footprint(root).arrays == 100 * KIB + 64 * KIB


def test_closures_count_but_globals_modules_and_classes_do_not():
    captured = np.ones(10 * KIB, np.uint8)

    def kernel():
        return captured.sum() + GLOBAL_ARRAY.sum()

    root = Holder(kernel=kernel, module=np, cls=Holder)
    assert footprint(root).arrays == 10 * KIB


def test_onnxruntime_sessions_and_object_arrays():
    strings = np.array([b"a" * (8 * KIB), b"b" * (8 * KIB)], object)
    root = Holder(runner=Holder(sessions=[InferenceSession(5000), InferenceSession(7000)]), table=strings)
    held = footprint(root)
    assert held.onnxruntime == 12000
    assert held.arrays == strings.nbytes + 16 * KIB
    assert held.total == held.arrays + held.onnxruntime


def test_another_session_is_not_entered_unless_allowed():
    other = Holder(weights=np.zeros(50 * KIB, np.uint8))
    mine = Holder(weights=np.zeros(20 * KIB, np.uint8))
    root = Holder(session=mine, scheduler=Holder(queues=[other, mine]))
    assert footprint(root).arrays == 70 * KIB
    assert footprint(root, stop_types=(Holder,), allow=(mine,)).arrays == 20 * KIB

"""The execution engine: ``Session``, the plans it builds and the loop that runs them.

``session.py`` (``tf.compat.v1.Session``) caches a ``Plan`` per (feeds, fetches, targets):
``planner.py`` prunes and orders the graph and builds flat plans (``plan.py``: kernels resolved,
steps laid out) or, for TF1 while loops, frame by frame (``frames.py``); ``interpreter.py`` runs a
plan. Library functions run through ``function.py``, ``map_fn``-shaped loops item by item
(``map_loops.py``, ``map_batching.py``). Beside them: fetch structures (``fetches.py``), the
graph a delegated Session keeps to answer the runs its rewrite fails (``native_fallback.py``),
numpy's error state during runs (``fp_errors.py``), which signatures can run at all
(``signature_check.py``) and no garbage collection while a model is built (``gc_pause.py``).

May import: ``runtime.graph``, ``runtime.kernels`` and what they may import. Never ``runtime.onnx``:
whoever asks for delegation (the loader) hands the Session to ``runtime.onnx.delegate``, which
rewrites its graph; so onnxruntime loads only where a model delegates.
"""

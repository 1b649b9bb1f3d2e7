"""Servable: one loaded version of a model, how it is loaded, and the states it goes through.

A ``Servable`` returned by ``ServerCore.servable_handle`` is a handle: while it is referenced
(or until its ``with`` block ends) the manager will not unload that version, exactly like TF
Serving's ``ServableHandle``. The bundle is shared and read-only; it is safe to use from many
threads at once.
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from runtime import errors
from serving import metrics


class ServableId(NamedTuple):
    name: str
    version: int

    def __str__(self) -> str:
        return f"{{name: {self.name} version: {self.version}}}"


class ManagerState(enum.IntEnum):
    """``ServableState::ManagerState``; values are ``ModelVersionStatus.State``'s."""

    START = 10
    LOADING = 20
    AVAILABLE = 30
    UNLOADING = 40
    END = 50


class Servable:
    """A loaded model version: ``bundle`` is a ``loader.SavedModelBundle``; ``cache`` holds
    what request paths derive from it once per version.

    ``with servable: ...`` releases the pin at the end of the block; otherwise the pin is
    released when the last reference goes away. A plain slotted class: one is made per request.
    """

    __slots__ = ("name", "version", "bundle", "_release", "cache")

    def __init__(self, name: str, version: int, bundle: Any, _release: Any = None, cache: dict | None = None):
        self.name = name
        self.version = version
        self.bundle = bundle
        self._release = _release
        # What request paths derive from the bundle (e.g. ``predict.PredictSignature``), built on
        # first use; the manager gives every handle to one version the same dict.
        self.cache = {} if cache is None else cache

    @property
    def id(self) -> ServableId:
        return ServableId(self.name, self.version)

    def __repr__(self) -> str:
        return f"Servable(name={self.name!r}, version={self.version})"

    def __enter__(self) -> Servable:
        return self

    def __exit__(self, *exc) -> None:
        if self._release is not None:
            self._release()

    def unpin(self) -> None:
        """What the end of a ``with`` block on this servable does."""
        self.__exit__(None, None, None)


def fingerprint(path: str) -> tuple:
    """What a version directory holds (names, sizes, mtimes): changes while it is written."""
    entries = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            entries.append((os.path.relpath(full, path), st.st_size, st.st_mtime_ns))
    return tuple(entries)


def session_config(options) -> Any:
    """The Session ConfigProto the flags ask for (TF Serving's thread-count rules)."""
    from apis.tensorflow.core.protobuf import config_pb2

    intra, inter, both = (
        options.tensorflow_intra_op_parallelism,
        options.tensorflow_inter_op_parallelism,
        options.tensorflow_session_parallelism,
    )
    if intra > 0 and inter > 0 and both > 0:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Either configure server_options.tensorflow_session_parallelism or "
            "(server_options.tensorflow_intra_op_parallelism, server_options.tensorflow_inter_op_parallelism) "
            "separately. You cannot configure all.",
        )
    config = config_pb2.ConfigProto()
    if intra > 0 or inter > 0:
        config.intra_op_parallelism_threads, config.inter_op_parallelism_threads = intra, inter
    else:
        config.intra_op_parallelism_threads = config.inter_op_parallelism_threads = both
    config.gpu_options.per_process_gpu_memory_fraction = options.per_process_gpu_memory_fraction
    return config


def blas_threads(options) -> int:
    """The numpy kernels' BLAS threads: TF's intra-op parallelism where a flag sets it, else one
    (requests run concurrently, each in its own thread; ``runtime/kernels/blas.py`` says what a shared
    BLAS pool costs them)."""
    return options.tensorflow_intra_op_parallelism or options.tensorflow_session_parallelism or 1


def saved_model_load_fn(options, batching=None) -> Callable[[str, ServableId], Any]:
    """Loads a version directory with ``loader.load_saved_model`` and the flags' tags; with
    ``batching`` (a ``serving.batching.bundle.Batching``), its Session is wrapped for batching
    before anything runs on it (warmup included), as TF Serving's bundle factory does."""
    tags = set(options.saved_model_tag_set)
    config = session_config(options)
    delegation = options.onnx_delegation
    cache = options.onnx_cluster_cache_dir or None

    def load(export_dir: str, servable_id: ServableId) -> Any:
        from loader import load_saved_model  # the loader is imported only when a model loads

        start = time.monotonic()
        try:
            bundle = load_saved_model(
                export_dir, tags=tags, session_config=config, delegation=delegation, cluster_cache=cache
            )
        except BaseException:
            metrics.load_attempt_count.labels(export_dir, "fail").inc()  # TF's loader metrics
            raise
        metrics.load_attempt_count.labels(export_dir, "success").inc()
        metrics.load_latency.labels(export_dir).inc(int((time.monotonic() - start) * 1e6))
        if batching is not None:
            try:
                batching.wrap(bundle, export_dir, servable_id)
            except BaseException:
                bundle.close()
                raise
        return bundle

    return load


def warmup_fn(options) -> Callable[[Servable], None] | None:
    """What warms a loaded version up before it serves: its warmup file replayed
    (``serving.warmup``) with ``--enable_model_warmup``; None without."""
    if not options.enable_model_warmup:
        return None
    iterations = options.num_request_iterations_for_warmup

    def warm_up(servable: Servable) -> None:
        from serving.warmup import run_warmup  # the request path, imported when a model loads

        run_warmup(servable, servable.bundle.export_dir, iterations)

    return warm_up

"""SavedModel bundles as the flags ask for them: what ``ServerCore`` hands the manager to load
and warm up a version (TF Serving's ``SavedModelBundleFactory``): the loader with the flags'
tags, Session config and delegation (or, with ``--prefer_tflite_model``, a version's
``model.tflite`` through LiteRT), batching wrapped around the Session before anything runs on
it, and warmup replayed from the version's assets.extra.

Here, not in ``serving.lifecycle``: the lifecycle loads whatever its load function returns and
knows nothing of SavedModels, Sessions or the request path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from runtime import errors
from serving.inference import tflite
from serving.inference.warmup import run_warmup
from serving.lifecycle.servable import Servable, ServableId
from serving.observability import metrics


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
    """Loads a version directory with ``loader.load_saved_model`` and the flags' tags, or, with
    ``--prefer_tflite_model`` and a ``model.tflite`` in it, as TF Lite (``serving.inference.tflite``)
    as TF Serving's bundle factory does; with ``batching`` (a ``serving.batching.bundle.Batching``),
    its Session is wrapped for batching before anything runs on it (warmup included)."""
    load_saved_model = _saved_model_loader(options)
    prefer_tflite = options.prefer_tflite_model or options.use_tflite_model
    pools, per_pool = options.num_tflite_pools, options.num_tflite_interpreters_per_pool

    def load(export_dir: str, servable_id: ServableId) -> Any:
        if prefer_tflite and tflite.tflite_model_found(export_dir):
            bundle = tflite.load_tflite_bundle(export_dir, pools, per_pool)  # (not TF's loader metrics)
        else:
            bundle = load_saved_model(export_dir)
        if batching is not None:
            try:
                batching.wrap(bundle, export_dir, servable_id)
            except BaseException:
                bundle.close()
                raise
        return bundle

    return load


def _saved_model_loader(options) -> Callable[[str], Any]:
    """``loader.load_saved_model`` with the flags' tags, Session config and delegation, counted
    in TF's SavedModel loader metrics."""
    tags = set(options.saved_model_tag_set)
    config = session_config(options)
    delegation = options.onnx_delegation
    cache = options.onnx_cluster_cache_dir or None

    def load(export_dir: str) -> Any:
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
        return bundle

    return load


def warmup_fn(options) -> Callable[[Servable], None] | None:
    """What warms a loaded version up before it serves: its warmup file replayed
    (``serving.inference.warmup``) with ``--enable_model_warmup``; None without."""
    if not options.enable_model_warmup:
        return None
    iterations = options.num_request_iterations_for_warmup

    def warm_up(servable: Servable) -> None:
        run_warmup(servable, servable.bundle.export_dir, iterations)

    return warm_up

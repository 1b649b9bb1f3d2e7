"""``delegate(session)``: rewrite a loaded Session's graph once so that clusters run in onnxruntime.

Steps 1-4 (``rewrite.py``, where each is described) give the fused graph: calls inlined and TF1
control flow raised, the served region, read-only variables frozen into constants, then clusters
proposed and fused into a new GraphDef. Step 5, here: a ``ClusterRunner`` per cluster node; the
Session runs the new graph from then on, and the original graph answers any run the new one fails
(``runtime/execution/native_fallback.py``; each such signature then stays on it, in the report).

The report (``DelegationReport``) is returned, kept on the Session and logged. With a
``ClusterCache``, steps 1-4 are read from it when it holds them, and written to it when not.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
from collections.abc import Iterable

from runtime.graph.graph import Graph
from runtime.onnx import cluster as cluster_lib
from runtime.onnx.cluster_cache import ClusterCache, cached_plan, store_plan
from runtime.onnx.cluster_constants import ClusterConstants
from runtime.onnx.interface import CLUSTER_OP, signature_pairs
from runtime.onnx.options import DelegationOptions, uses_gpu
from runtime.onnx.report import DelegationReport

logger = logging.getLogger(__name__)

_KEYS = itertools.count()


def delegate(
    session,
    options: DelegationOptions | None = None,
    signatures: Iterable | None = None,
    cache: ClusterCache | None = None,
    original=None,
):
    """Rewrites ``session``'s graph (see the module docstring); returns the DelegationReport.

    ``signatures``: what will be run, as (feed names, fetch names) pairs (see ``served_region``).
    ``cache``: where the rewritten graph and its converted clusters are kept between processes
    (``cluster_cache.py``): a hit skips steps 1-4, and each cluster's conversion and validation.
    ``original``: what imports the graph again for the runs the rewrite fails (None: it is kept).
    """
    if getattr(session, "delegation_report", None) is not None:
        return session.delegation_report  # once per Session: the graph is already rewritten
    options = (options or DelegationOptions()).with_config(getattr(session, "_config", None))
    if not options.enabled:
        report = DelegationReport(enabled=False)
        session.delegation_report = report
        return report
    key = f"delegation-{next(_KEYS)}"
    plan_key = cache.key("plan", _plan_parts(options, signatures)) if cache is not None else None
    planned = cached_plan(cache, plan_key, session.graph.functions, key) if cache is not None else None
    if planned is not None:
        fused_def, library, report = planned
        constants = ClusterConstants(session)  # computed in the Session when a cluster needs them
    else:
        from runtime.onnx import rewrite  # (with the converters, and onnx: a cache hit needs neither)

        try:
            fused_def, library, report, frozen = rewrite.rewrite(session, options, signatures, key)
        except Exception as exc:  # noqa: BLE001 - an optimisation that fails leaves the model native
            return _native(session, f"the rewrite failed: {type(exc).__name__}: {exc}")
        constants = ClusterConstants(session, rewrite.named_constants(fused_def, frozen))
        if cache is not None:
            store_plan(cache, plan_key, fused_def, library, session.graph.functions, report)
    _install(session, fused_def, library, report, constants, options, key, cache, reimport=original)
    logger.info("%s", report.summary())
    return report


def _native(session, why: str) -> DelegationReport:
    """Every op stays on the numpy kernels: said once in the log and in the report."""
    logger.warning("onnxruntime delegation: every op runs natively: %s", why)
    report = DelegationReport(enabled=False)
    report.record_fallback("graph", why)
    session.delegation_report = report
    return report


def _plan_parts(options: DelegationOptions, signatures) -> list:
    """What a delegated graph depends on besides the model and the converter."""
    return [
        dataclasses.asdict(options),
        uses_gpu(options),
        signature_pairs(signatures) if signatures else None,
    ]


def _install(session, fused_def, library, report, constants, options, key: str, cache, reimport) -> None:
    """Step 5: the Session runs the fused graph, a runner per cluster. The graph is imported as
    derived (names and inputs checked, not each node against its op) whether rewritten here or
    read from the cache: a cached plan is the bytes a rewrite by this converter version wrote for
    this model (its key), whole (its crc32c), and the cache directory is as trusted as the
    model's (``cluster_cache.py``). Its nodes' full checks cost a start from the cache 6 ms."""
    original = session.graph
    fused = Graph(functions=library)
    fused.import_graph_def(fused_def, derived=True)
    _copy_collections(original, fused)
    if original.finalized:
        fused.finalize()
    cluster_lib.register_context(key, options, report, constants, cache)
    for op in fused.get_operations():
        if op.type == CLUSTER_OP:
            cluster_lib.attach(op, options, report, constants, cache)
    session._replace_graph(fused, report.record_fallback, reimport)  # (the original answers what it fails)
    session.on_close(functools.partial(cluster_lib.release, key))  # its onnxruntime sessions, at once
    session.cluster_constants = constants  # (the runners' and the context's are weak)
    session.delegation_report = report


def _copy_collections(source: Graph, target: Graph) -> None:
    for key in source.get_all_collection_keys():
        items = []
        for item in source.get_collection(key):
            name = getattr(item, "name", None)
            if name is not None and hasattr(item, "graph"):
                try:
                    item = target.as_graph_element(name)
                except (KeyError, ValueError):
                    continue
            items.append(item)
        target.get_collection_ref(key).extend(items)

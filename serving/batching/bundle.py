"""``--enable_batching`` for a server: TF Serving's ``SavedModelBundleFactory`` with batching.

``Batching`` is built once per server from its options: it reads the batching parameters
(``--batching_parameters_file``), starts the one ``SharedBatchScheduler`` every model shares,
and, as each servable version loads, wraps the bundle's Session in a ``BatchingSession``
(``wrap``) with that version's parameters (``--enable_per_model_batching_parameters``: its own
``batching_params.pbtxt``), logging the parameters in force. Warmup requests, replayed after the
wrap, go through the same Session. ``stop(grace_seconds)`` drains the scheduler at shutdown.
"""

from __future__ import annotations

import logging

from serving.batching import parameters
from serving.batching.scheduler import SharedBatchScheduler
from serving.batching.session import BatchingSession, tensor_signature
from serving.batching.stats import ExportedQueueStats
from serving.observability import metrics
from serving.options import ServerOptions, schedulable_cpus

logger = logging.getLogger(__name__)


class Batching:
    """The server's batch scheduler and the batching parameters servables get. Thread-safe."""

    def __init__(self, options: ServerOptions) -> None:
        self._common = parameters.server_batching_parameters(options.batching_parameters_file)
        self._per_model = options.enable_per_model_batching_parameters
        self._adaptive = options.adaptive_batch_timeout
        self.scheduler_options = parameters.scheduler_options(self._common, schedulable_cpus())
        pool = self.scheduler_options.thread_pool_name
        self.scheduler = SharedBatchScheduler(
            self.scheduler_options, lambda name, model: ExportedQueueStats(name, model, pool)
        )
        metrics.add_queue_depth_source(self._queue_depths)
        logger.info(
            "Batching: %d batch thread(s) in pool %s shared by every model",
            self.scheduler_options.num_batch_threads,
            self.scheduler_options.thread_pool_name,
        )

    def wrap(self, bundle, export_dir: str, servable_id) -> None:
        """Wraps ``bundle.session`` for batching with the version's parameters (none: left as
        it is). Raises TF Serving's INVALID_ARGUMENT for parameters it refuses; the load fails."""
        params = parameters.per_model_batching_parameters(export_dir, self._common, self._per_model)
        if params is None:
            logger.info(
                "Servable %s: no %s in its directory; its requests are not batched",
                servable_id,
                parameters.BATCHING_PARAMS_FILENAME,
            )
            return
        options = parameters.queue_options(params, adaptive_batch_timeout=self._adaptive)
        logger.info("Wrapping session to perform batch processing")
        logger.info(
            "Batching parameters of servable %s: %s",
            servable_id,
            parameters.describe(options, self.scheduler_options),
        )
        keys = [
            tensor_signature(
                (info.name for info in signature.inputs.values()),
                (info.name for info in signature.outputs.values()),
            )
            for signature in _signature_defs(bundle).values()
        ]
        bundle.session = BatchingSession(
            bundle.session, self.scheduler, options, keys, str(servable_id), servable_id.name
        )

    def _queue_depths(self):
        """(model, queue, tasks waiting) of every queue, for the depth gauge at scrape time."""
        return [(q.stats.model_name, q.stats.name, q.num_enqueued_tasks()) for q in self.scheduler.queues()]

    def stop(self, grace_seconds: float) -> bool:
        """Runs the queued tasks (up to ``grace_seconds``) and ends the batch threads."""
        return self.scheduler.stop(grace_seconds)


def create_batching(options: ServerOptions) -> Batching | None:
    """The server's ``Batching`` where ``--enable_batching`` asks for it."""
    return Batching(options) if options.enable_batching else None


def _signature_defs(bundle):
    defs = getattr(bundle, "signature_defs", None)
    return defs if defs is not None else bundle.meta_graph_def.signature_def

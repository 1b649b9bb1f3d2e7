"""Request batching: TF Serving's ``BatchingSession`` over TF's ``SharedBatchScheduler``.

- ``parameters``: ``BatchingParameters`` read from their files, TF's defaults and checks;
- ``batch_forming``: pure functions that merge tasks into a batch, pad and split it;
- ``tasks``: a Run() call waiting in a queue, and the pieces a large one is cut into;
- ``scheduler``: the shared scheduler and its queues (the threads live here);
- ``adaptive``: our adaptive batch timeout (``--adaptive_batch_timeout``);
- ``stats``: per-queue totals, the hooks monitoring builds on;
- ``session``: ``BatchingSession``, a Session whose calls are batched;
- ``bundle``: ``Batching``, what ``--enable_batching`` builds for a server and applies to each
  servable version as it loads.

Above inference in ``serving``'s layers (it wraps the Session the bundles load): may import
``runtime``, ``apis``, ``serving.inference``, ``serving.lifecycle`` (``model_config``), resources
and observability; never a front end, never grpc.
"""

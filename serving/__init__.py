"""TF Serving's model server, without TensorFlow: ``model_server`` / ``python -m serving``.

Its parts, top to bottom (each package says what it owns and may import; the import-linter
contracts in pyproject.toml hold them):

- the process: ``cli`` (flags) -> ``options``, ``supervisor`` (``--num_workers``), ``server``
  (both ports, start and shutdown), ``server_core`` (ServerCore), ``monitoring``,
  ``worker_pool``;
- the front ends: ``grpc_api`` and ``rest_api``;
- ``open_inference``: the Open Inference Protocol (KServe V2) without a transport, which both
  front ends speak beside TF Serving's API;
- ``batching``: TF Serving's batching session;
- ``inference``: Predict, Classify, Regress, ... on a loaded SavedModel, and the request
  functions every transport calls;
- ``lifecycle``: model config, version source, policy, manager, model status, readiness;
- ``resources``: the heap, each version's memory, bytes in flight, the drain;
- the vocabulary every part speaks: ``observability`` (metrics, request log), ``errors``
  (transport statuses), ``options``.

``saved_model_cli`` is a tool of its own over loader and runtime.
Importing this package imports nothing heavy (no grpc).
"""

__version__ = "0.1.0"

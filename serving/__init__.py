"""TF Serving's model server, without TensorFlow: ``model_server`` / ``python -m serving``.

One module per TF Serving concept: ``cli`` (flags) -> ``options`` -> ``server`` (gRPC),
``model_config`` (ModelServerConfig), ``source`` (file-system version discovery), ``policy``
(availability-preserving load/unload decisions), ``manager`` (ServerCore and the
AspiredVersionsManager; servable handles pin a version), ``model_service``, ``health``, and
the request path (``grpc_service``, ``predict``, ``classify``, ...); ``supervisor`` runs
``--num_workers`` server processes sharing the ports.

Importing this package imports nothing heavy (no grpc).
"""

__version__ = "0.1.0"

"""tensorflow.serving.ModelService: GetModelStatus and HandleReloadConfigRequest.

Thin over ``ServerCore``: states come from the manager's state monitor, reloads go through
``ServerCore.reload_config``. Errors leave through ``serving.errors.grpc_method`` with TF
Serving's codes and texts. Stateless; safe for any number of concurrent calls.
"""

from __future__ import annotations

import logging

from apis.tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    status_pb2,
)
from runtime import errors as op_errors
from serving import errors, memory_budget

logger = logging.getLogger(__name__)


def to_status_proto(error: op_errors.OpError | None) -> status_pb2.StatusProto:
    """TF Serving's ``ToStatusProto``: the code, and the message only when not OK."""
    status = status_pb2.StatusProto()
    if error is not None:
        status.error_code = error.code
        status.error_message = error.message
    return status


def get_model_status(core, request) -> get_model_status_pb2.GetModelStatusResponse:
    if not request.HasField("model_spec"):
        raise op_errors.InvalidArgumentError(None, None, "Missing ModelSpec")
    spec = request.model_spec
    version = spec.version.value if spec.HasField("version") else None
    response = get_model_status_pb2.GetModelStatusResponse()
    for state in core.model_status(spec.name, version):
        status = response.model_version_status.add()
        status.version = state.version
        status.state = int(state.state)
        status.status.CopyFrom(to_status_proto(state.error))
        if not state.resident:  # ours: with a memory budget, AVAILABLE but not loaded yet
            status.status.error_message = memory_budget.NOT_RESIDENT
    return response


def handle_reload_config_request(
    core, request
) -> tuple[model_management_pb2.ReloadConfigResponse, op_errors.OpError | None]:
    config = request.config
    error: op_errors.OpError | None = None
    if config.WhichOneof("config") == "model_config_list":
        for index, model in enumerate(config.model_config_list.config):
            logger.info(
                "\nConfig entry\n\tindex : %d\n\tpath : %s\n\tname : %s\n\tplatform : %s",
                index,
                model.base_path,
                model.name,
                model.model_platform,
            )
        try:
            core.reload_config(config)
        except Exception as e:  # every failure is answered with a status, never raised into grpc
            error = errors.as_op_error(e)
    else:
        error = op_errors.InvalidArgumentError(
            None,
            None,
            "ServerModelConfig type not supported by HandleReloadConfigRequest. Only ModelConfigList is "
            "currently supported",
        )
    if error is not None:
        logger.error("ReloadConfig failed: %s", error.message)
    response = model_management_pb2.ReloadConfigResponse()
    response.status.CopyFrom(to_status_proto(error))
    for name in request.metric_names:  # no metrics registry yet: every increase is 0
        response.metric.add(name=name, int64_value_increase=0)
    return response, error


class ModelServiceServicer(model_service_pb2_grpc.ModelServiceServicer):
    """ModelService backed by a ``ServerCore``."""

    def __init__(self, core) -> None:
        self._core = core

    @errors.grpc_method
    def GetModelStatus(self, request, context):  # noqa: N802 - gRPC method names
        return get_model_status(self._core, request)

    def HandleReloadConfigRequest(self, request, context):  # noqa: N802
        # TF Serving answers with both: the StatusProto in the response and the same gRPC status.
        response, error = handle_reload_config_request(self._core, request)
        if error is not None:
            context.set_code(errors.grpc_code(error.code))
            context.set_details(errors.truncate(error.message))
        return response

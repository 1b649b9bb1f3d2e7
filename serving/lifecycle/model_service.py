"""tensorflow.serving.ModelService without a transport: GetModelStatus and
HandleReloadConfigRequest.

Thin over ``ServerCore``: states come from the manager's state monitor, reloads go through
``ServerCore.reload_config``. gRPC's servicer (``serving.grpc_api.services``) and REST's
``GET /v1/models/...`` call these. Stateless; safe for any number of concurrent calls.
"""

from __future__ import annotations

import logging

from apis.tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    status_pb2,
)
from runtime import errors as op_errors
from serving import errors
from serving.lifecycle import memory_budget

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

"""PredictionService.GetModelMetadata without a transport: TF Serving's ``get_model_metadata_impl``.

The only metadata field is "signature_def": every SignatureDef of the servable's MetaGraphDef,
as a SignatureDefMap packed in an ``Any`` under that key. The response's model_spec names the
servable (name and version, no signature).
"""

from __future__ import annotations

from apis.tensorflow_serving.apis import get_model_metadata_pb2
from runtime import errors
from serving.inference import signatures

SIGNATURE_DEF = "signature_def"


def get_model_metadata(
    core, request: get_model_metadata_pb2.GetModelMetadataRequest, deadline: float | None = None
) -> get_model_metadata_pb2.GetModelMetadataResponse:
    """Answer one GetModelMetadataRequest (``deadline`` is accepted for symmetry; nothing runs)."""
    if not request.HasField("model_spec"):
        raise errors.InvalidArgumentError(None, None, "Missing ModelSpec")
    validate(request)
    response = get_model_metadata_pb2.GetModelMetadataResponse()
    with signatures.servable(core, request.model_spec, deadline) as servable:
        signature_def_map = get_model_metadata_pb2.SignatureDefMap()
        for key, signature in _all_signature_defs(servable).items():
            signature_def_map.signature_def[key].CopyFrom(signature)
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
    response.metadata[SIGNATURE_DEF].Pack(signature_def_map)
    return response


def validate(request: get_model_metadata_pb2.GetModelMetadataRequest) -> None:
    """``ValidateGetModelMetadataRequest``."""
    if not request.metadata_field:
        raise errors.InvalidArgumentError(
            None, None, "GetModelMetadataRequest must specify at least one metadata_field"
        )
    for field in request.metadata_field:
        if field != SIGNATURE_DEF:
            raise errors.InvalidArgumentError(None, None, f"Metadata field {field} is not supported")


def _all_signature_defs(servable):
    # The MetaGraphDef's own map, as TF Serving reads it (TF2's "__saved_model_init_op" included).
    meta_graph_def = getattr(servable.bundle, "meta_graph_def", None)
    if meta_graph_def is not None:
        return meta_graph_def.signature_def
    return signatures.signature_defs(servable)

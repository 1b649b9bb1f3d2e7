"""V2's health, readiness and metadata, read from the ServerCore and ``Readiness``.

Live: the process answers. Ready: what ``/readyz`` and gRPC health say (``Readiness``: serving,
and every configured model has an available version). A model is ready while the version asked
for (else any) is available; a model or version the server does not know is NOT_FOUND.
Metadata comes from the signature a request would use (``serving_default``): its input and
output keys, their V2 datatypes and shapes (-1 for a dimension of any size, ``[-1]`` for a
tensor of any rank); versions are the versions served, as strings; the platform is
``tensorflow_savedmodel``, or ``tensorflow_lite`` for a version served from its ``model.tflite``.
"""

from __future__ import annotations

import dataclasses

import serving
from apis.tensorflow_serving.apis import model_pb2
from runtime import errors
from serving.inference import signatures
from serving.open_inference import datatypes
from serving.open_inference.infer import version_number

SERVER_NAME = "savedmodel-server"
EXTENSIONS = ("binary_tensor_data",)
PLATFORM = "tensorflow_savedmodel"  # a bundle may name its own (``platform``: TF Lite's)


@dataclasses.dataclass
class TensorMetadata:
    name: str
    datatype: str
    shape: list[int]


@dataclasses.dataclass
class ModelMetadata:
    name: str
    versions: list[str]
    platform: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]


def server_metadata() -> tuple[str, str, tuple[str, ...]]:
    """(name, version, extensions)."""
    return SERVER_NAME, serving.__version__, EXTENSIONS


def server_ready(readiness) -> bool:
    return readiness is not None and readiness.reason() is None


def model_ready(core, name: str, version: str) -> bool:
    """Whether ``name`` (at ``version``, else any version) takes requests; NOT_FOUND for a
    model or version the server has never had."""
    number = version_number(version, name)
    core.model_status(name, number)  # NOT_FOUND for a model or version never seen
    available = core.manager.available_versions(name)
    return number in available if number is not None else bool(available)


def model_metadata(core, name: str, version: str, deadline: float | None = None) -> ModelMetadata:
    """The metadata of ``name`` (its version ``version``, else the latest)."""
    spec = _model_spec(name, version)
    with signatures.servable(core, spec, deadline) as servable:
        platform = getattr(servable.bundle, "platform", PLATFORM)
        signature = signatures.signature_defs(servable).get(signatures.DEFAULT_SERVING_SIGNATURE_DEF_KEY)
        if signature is None:
            raise errors.FailedPreconditionError(
                None,
                None,
                f'Serving signature key "{signatures.DEFAULT_SERVING_SIGNATURE_DEF_KEY}" not found.',
            )
        inputs = [_tensor(key, signature.inputs[key]) for key in sorted(signature.inputs)]
        outputs = [_tensor(key, signature.outputs[key]) for key in sorted(signature.outputs)]
    versions = [str(v) for v in sorted(core.manager.available_versions(name))]
    return ModelMetadata(name, versions, platform, inputs, outputs)


def _model_spec(name: str, version: str):
    spec = model_pb2.ModelSpec(name=name)
    number = version_number(version, name)
    if number is not None:
        spec.version.value = number
    return spec


def _tensor(key: str, info) -> TensorMetadata:
    shape = info.tensor_shape
    dims = [-1] if shape.unknown_rank else [d.size if d.size >= 0 else -1 for d in shape.dim]
    return TensorMetadata(key, datatypes.metadata_datatype(info.dtype), dims)

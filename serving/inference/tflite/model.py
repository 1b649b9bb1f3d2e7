"""A ``model.tflite`` as TF Serving reads it (``tflite_session.cc``): the primary subgraph's input
and output tensors, and the SignatureDefs it serves.

The file is a TF Lite flatbuffer (``schema.fbs``, identifier ``TFL3``)::

    Model
      subgraphs[0]            the primary subgraph: the only one TF Serving runs
        tensors[i]            name, type (schema TensorType), shape (1 where the size is free)
        inputs, outputs       tensor indices
      buffers[b]              raw bytes
      metadata[m]             name, buffer; "signature_defs_metadata" holds a flexbuffer map
                              of signature key -> serialized tensorflow.SignatureDef

The SignatureDefs served are those of ``signature_defs_metadata``, each tensor name matched to a
primary-subgraph tensor (exactly, else without its ``:N``, as early converters named them); a
model without them gets one ``serving_default`` of every input and output tensor, keyed by name
without ``:N``, method ``tensorflow/serving/predict``. The model's own TF Lite signatures (what
TF2's converter writes) are not read, as in TF Serving. Errors are TF Serving's, codes and texts.
"""

from __future__ import annotations

import dataclasses

from apis.tensorflow.core.framework import types_pb2
from apis.tensorflow.core.protobuf import meta_graph_pb2
from runtime import errors

SIGNATURE_DEFS_METADATA = "signature_defs_metadata"
PREDICT_METHOD_NAME = "tensorflow/serving/predict"
DEFAULT_SIGNATURE = "serving_default"

# schema TensorType -> TfLiteType (c/common.h), the number TF Serving's errors print.
_TFLITE_TYPES = (1, 10, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)
# TfLiteType -> TF DataType: the types TF Serving serves; any other fails the load.
_TF_TYPES = {
    0: types_pb2.DT_INVALID,
    1: types_pb2.DT_FLOAT,
    2: types_pb2.DT_INT32,
    3: types_pb2.DT_UINT8,
    4: types_pb2.DT_INT64,
    5: types_pb2.DT_STRING,
    6: types_pb2.DT_BOOL,
    7: types_pb2.DT_INT16,
    8: types_pb2.DT_COMPLEX64,
    9: types_pb2.DT_INT8,
}


@dataclasses.dataclass(frozen=True)
class TfLiteModel:
    """What a loaded ``model.tflite`` serves: tensor name -> primary-subgraph index, for inputs
    and outputs, and the SignatureDefs (read only after construction)."""

    inputs: dict[str, int]
    outputs: dict[str, int]
    signature_defs: dict[str, meta_graph_pb2.SignatureDef]
    batch_size: int = -1  # ``GetModelBatchSize``: dim 0 of the only input, -1 with several


def read_model(model_bytes: bytes) -> TfLiteModel:
    """The tensors and SignatureDefs of a flatbuffer the interpreter has already verified."""
    from ai_edge_litert import schema_py_generated as schema  # (the extra; imported on load only)

    model = schema.Model.GetRootAsModel(model_bytes, 0)
    subgraph = model.Subgraphs(0)
    inputs = _tensor_infos(subgraph, subgraph.InputsAsNumpy(), "Input")
    outputs = _tensor_infos(subgraph, subgraph.OutputsAsNumpy(), "Output")
    stored = _stored_signature_defs(model)
    if stored:
        for key in sorted(stored):
            _fix_names(stored[key], inputs, outputs)
        signature_defs = stored
    else:
        signature_defs = {DEFAULT_SIGNATURE: _generated_signature(inputs, outputs)}
    batch_size = -1
    if len(inputs) == 1:
        ((info, _),) = inputs.values()
        batch_size = info.tensor_shape.dim[0].size if info.tensor_shape.dim else -1
    return TfLiteModel(
        {name: index for name, (_, index) in inputs.items()},
        {name: index for name, (_, index) in outputs.items()},
        signature_defs,
        batch_size,
    )


def legacy_name(name: str) -> str:
    """``TfToTfLiteLegacyTensorName``: a TF tensor name without ``:N``."""
    return name.split(":", 1)[0]


def resolve(tensors: dict[str, int], name: str) -> int | None:
    """``FixTfLiteTensorName``: the index of ``name``, or of its legacy name; None for neither."""
    index = tensors.get(name)
    return index if index is not None else tensors.get(legacy_name(name))


def _tensor_infos(subgraph, indices, kind: str) -> dict[str, tuple[meta_graph_pb2.TensorInfo, int]]:
    """``GetTensorInfoMap``: name -> (TensorInfo of the tensor as built, its index)."""
    infos: dict[str, tuple[meta_graph_pb2.TensorInfo, int]] = {}
    for index in (int(i) for i in indices):
        tensor = subgraph.Tensors(index)
        raw_name = tensor.Name()
        if raw_name is None:
            raise errors.InternalError(None, None, f"{kind} name missing for tensor index: {index}")
        name = raw_name.decode()
        info = meta_graph_pb2.TensorInfo(name=name, dtype=_tf_type(tensor.Type()))
        for size in tensor.ShapeAsNumpy() if tensor.ShapeLength() else ():
            info.tensor_shape.dim.add().size = int(size)
        if name in infos:
            raise errors.AlreadyExistsError(None, None, f"{kind} tensor name: {name} has multiple indices")
        infos[name] = (info, index)
    return infos


def _tf_type(schema_type: int) -> int:
    tflite_type = _TFLITE_TYPES[schema_type] if schema_type < len(_TFLITE_TYPES) else schema_type + 1
    tf_type = _TF_TYPES.get(tflite_type)
    if tf_type is None:
        raise errors.InternalError(None, None, f"Unknown TfLite type: {tflite_type}")
    return tf_type


def _stored_signature_defs(model) -> dict[str, meta_graph_pb2.SignatureDef]:
    """``tflite::GetSignatureDefMap``: the SignatureDefs of the metadata, or {} without them."""
    from flatbuffers import flexbuffers

    found: dict[str, meta_graph_pb2.SignatureDef] = {}
    for i in range(model.MetadataLength()):
        metadata = model.Metadata(i)
        if metadata.Name() != SIGNATURE_DEFS_METADATA.encode():
            continue
        try:
            data = model.Buffers(metadata.Buffer()).DataAsNumpy().tobytes()
            root = flexbuffers.GetRoot(bytearray(data)).AsMap
            serialized = {key.AsKey: value.AsStringBytes for key, value in zip(root.Keys, root.Values)}
        except Exception as e:  # noqa: BLE001 - any malformed buffer is TF Serving's one status
            raise _invalid(f"Error reading signature def map: {e}") from None
        found = {}
        for key, value in serialized.items():
            try:
                found[key] = meta_graph_pb2.SignatureDef.FromString(value)
            except Exception:  # noqa: BLE001 - protobuf's DecodeError, whatever its class
                raise _invalid("Cannot parse signature def found in flatbuffer.") from None
    return found


def _invalid(reason: str) -> errors.OpError:
    return errors.InvalidArgumentError(None, None, f"Invalid SignatureDefs found in TfLite model: {reason}")


def _fix_names(signature: meta_graph_pb2.SignatureDef, inputs, outputs) -> None:
    """Each TensorInfo's name made a primary-subgraph tensor's (TF Serving's texts otherwise)."""
    for kind, infos, tensors in (("input", signature.inputs, inputs), ("output", signature.outputs, outputs)):
        for alias in sorted(infos):
            info = infos[alias]
            if info.name in tensors:
                continue
            if legacy_name(info.name) not in tensors:
                raise errors.InternalError(
                    None,
                    None,
                    f"Unknown tensor '{info.name}'.\n\tSignature {kind} {alias} references an unknown tensor",
                )
            info.name = legacy_name(info.name)


def _generated_signature(inputs, outputs) -> meta_graph_pb2.SignatureDef:
    """The ``serving_default`` TF Serving builds for a model without SignatureDefs (names that
    agree without ``:N`` keep the last tensor's, in name order, as its map does)."""
    signature = meta_graph_pb2.SignatureDef(method_name=PREDICT_METHOD_NAME)
    for target, infos in ((signature.inputs, inputs), (signature.outputs, outputs)):
        for name in sorted(infos):
            target[legacy_name(name)].CopyFrom(infos[name][0])
    return signature

"""The reference server's model lifecycle and inference: TF Serving's request path over TensorFlow.

Servables are loaded as TF Serving's ``SavedModelBundle`` is: the ``tf.compat.v1`` loader into a
Session of their own, run by tensor names from the SignatureDefs. One function per RPC takes the
request proto and returns the response proto, with TF Serving's checks in TF Serving's order and
its status codes and texts (``predict_util.cc``, ``classifier.cc``, ``regressor.cc``,
``multi_inference.cc``, ``get_model_metadata_impl.cc``, ``get_model_status_impl.cc``). Both front
ends (``server.py``'s gRPC, ``rest_api.py``) call these functions and nothing else.

Imports TensorFlow and ``tensorflow_serving.apis`` (the oracle venv), never the package under test.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import grpc  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import types_pb2  # noqa: E402
from tensorflow.python.client import pywrap_tf_session  # noqa: E402
from tensorflow_serving.apis import (  # noqa: E402
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_pb2,
    predict_pb2,
    regression_pb2,
)

logger = logging.getLogger("tfs_reference.inference")
C = grpc.StatusCode
DEFAULT_SIGNATURE = "serving_default"
CLASSIFY, REGRESS = "tensorflow/serving/classify", "tensorflow/serving/regress"
GRPC_CODES = {code.value[0]: code for code in grpc.StatusCode}  # tf.errors' codes are gRPC's


class ServingError(Exception):
    """A failed request: the canonical code TF Serving answers with and its message."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def invalid(message: str) -> ServingError:
    return ServingError(C.INVALID_ARGUMENT, message)


# ---------------------------------------------------------------------------------------------
# Lifecycle: one Session per version, all loaded at start and kept until exit.


@dataclass
class Servable:
    """One loaded version (TF Serving's SavedModelBundle). ``Session.run`` is thread-safe."""

    name: str
    version: int
    session: tf.compat.v1.Session
    signature_def: dict[str, tf.compat.v1.SignatureDef]

    def run(self, feeds: dict[str, np.ndarray], fetches: list[str], timeout: float | None) -> list:
        """Runs by tensor names, as TF Serving's C++ ``Session::Run`` does. Python's ``Session.run``
        would cast feeds to the placeholder's dtype and check shapes; TF Serving does neither, so
        a wrong dtype fails inside TF ("Expects arg[0] to be float but int32 is provided")."""
        graph = self.session.graph
        try:
            feed = {graph.get_tensor_by_name(n)._as_tf_output(): v for n, v in feeds.items()}
            fetch = [graph.get_tensor_by_name(n)._as_tf_output() for n in fetches]
        except (KeyError, ValueError) as e:
            raise invalid(str(e)) from None
        timeout_ms = 0 if timeout is None else max(1, int(timeout * 1000))
        options = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms).SerializeToString()
        buffer = pywrap_tf_session.TF_NewBufferFromString(options)
        try:
            return self.session._call_tf_sessionrun(buffer, feed, fetch, [], None)
        except tf.errors.OpError as e:
            raise ServingError(GRPC_CODES.get(e.error_code, C.UNKNOWN), e.message) from None
        finally:
            pywrap_tf_session.TF_DeleteBuffer(buffer)


def load_servable(name: str, version: int, path: str) -> Servable:
    """The ``tf.compat.v1`` loader, as TF Serving's LoadSavedModel: TF1 and TF2 exports alike,
    variables restored and init ops run, every SignatureDef kept (``__saved_model_init_op`` too)."""
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph)
    with graph.as_default():
        meta_graph_def = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
    return Servable(name, version, session, dict(meta_graph_def.signature_def))


class ServerCore:
    """Servables by name and version, and version labels; read-only after construction."""

    def __init__(self, servables: dict[str, dict[int, Servable]], labels: dict[str, dict[str, int]]):
        self.servables, self.labels = servables, labels
        for name, by_label in labels.items():
            for version in by_label.values():
                if version not in servables.get(name, {}):
                    raise SystemExit(
                        f"Request to assign label to version {version} of model {name}, "
                        "which is not currently available for inference"
                    )

    def servable(self, model_spec) -> Servable:
        """ServerCore::ServableRequestFromModelSpec, then the manager's handle lookup."""
        name = model_spec.name
        if not name:
            raise invalid("ModelSpec has no name specified.")
        versions = self.servables.get(name, {})
        choice = model_spec.WhichOneof("version_choice")
        if choice == "version_label":
            version = self.labels.get(name, {}).get(model_spec.version_label)
            if version is None:
                raise invalid(f"Unrecognized servable version label: {model_spec.version_label}")
            request = f"Specific({name}, {version})"
        elif choice == "version":
            version, request = model_spec.version.value, f"Specific({name}, {model_spec.version.value})"
        else:
            version, request = max(versions, default=None), f"Latest({name})"
        if version not in versions:
            raise ServingError(C.NOT_FOUND, f"Servable not found for request: {request}")
        return versions[version]


def load_core(models: dict[str, str], labels: dict[str, dict[str, int]]) -> ServerCore:
    servables: dict[str, dict[int, Servable]] = {}
    for name, base_path in models.items():
        dirs = [d for d in os.listdir(base_path) if d.isdigit() and os.path.isdir(os.path.join(base_path, d))]
        if not dirs:
            raise SystemExit(f"no numeric version directory under {base_path}")
        servables[name] = {int(d): load_servable(name, int(d), os.path.join(base_path, d)) for d in dirs}
        logger.info("loaded %s versions %s", name, sorted(servables[name]))
    return ServerCore(servables, labels)


# ---------------------------------------------------------------------------------------------
# Inference: one function per RPC, taking the request proto and returning the response proto.

# Tensor::AsProtoField's typed fields: TF Serving answers Predict with those, not tensor_content
_PROTO_FIELDS = {d.as_datatype_enum: f for d, f in [
    (tf.float32, "float_val"), (tf.float64, "double_val"), (tf.int32, "int_val"), (tf.int16, "int_val"),
    (tf.int8, "int_val"), (tf.uint8, "int_val"), (tf.uint16, "int_val"), (tf.int64, "int64_val"),
    (tf.bool, "bool_val"), (tf.uint32, "uint32_val"), (tf.uint64, "uint64_val"), (tf.float16, "half_val"),
    (tf.bfloat16, "half_val"), (tf.complex64, "scomplex_val"), (tf.complex128, "dcomplex_val"),
]}  # fmt: skip


def as_proto_field(value: np.ndarray):
    """``tf.make_tensor_proto``, with numeric values moved from tensor_content to the typed field."""
    proto = tf.make_tensor_proto(value)
    field = _PROTO_FIELDS.get(proto.dtype)
    if field and proto.tensor_content:
        flat = value.ravel()
        if field == "half_val":
            flat = flat.view(np.uint16)
        elif value.dtype.kind == "c":
            flat = flat.view(flat.real.dtype)
        proto.ClearField("tensor_content")
        getattr(proto, field).extend(flat.tolist())
    return proto


def _spec_of(request):
    if not request.HasField("model_spec"):
        raise invalid("Missing ModelSpec")
    return request.model_spec


def _set_model_spec(target, name: str, version: int, signature_name: str | None) -> None:
    """util.cc's MakeModelSpec: an empty signature name is answered as "serving_default"."""
    target.name = name
    if signature_name is not None:
        target.signature_name = signature_name or DEFAULT_SIGNATURE
    target.version.value = version


def _type_name(dtype) -> str:
    """DataType_Name: "DT_FLOAT"."""
    return types_pb2.DataType.Name(tf.as_dtype(dtype).as_datatype_enum)


def _keys(mapping) -> str:
    return ",".join(sorted(mapping))


def _input_values(signature, request) -> dict[str, np.ndarray]:
    """predict_util.cc's VerifyRequestInputsSize and saved_model's GetInputValues."""
    n_request, n_signature = len(request.inputs), len(signature.inputs)
    if n_request > n_signature or (n_request < n_signature and not signature.defaults):
        raise invalid(
            f"input size does not match signature: {n_request}!={n_signature} len({{{_keys(request.inputs)}}}) "
            f"!= len({{{_keys(signature.inputs)}}}). Sent extra: {{{_keys(set(request.inputs) - set(signature.inputs))}}}. "
            f"Missing but required: {{{_keys(set(signature.inputs) - set(request.inputs))}}}."
        )
    feeds, seen = {}, set()
    for alias, info in signature.inputs.items():
        if alias in request.inputs:
            proto = request.inputs[alias]
            seen.add(alias)
        elif alias in signature.defaults:
            proto = signature.defaults[alias]
        else:
            raise invalid(
                f"Signature input alias: {alias}(feed name: {info.name}) not found in request and no default "
                f"value provided. Inputs expected to be in the request {{{_keys(request.inputs)}}}, or default "
                f"input alias set: {_keys(signature.defaults)}"
            )
        try:
            feeds[info.name] = tf.make_ndarray(proto)
        except Exception:  # noqa: BLE001 - Tensor::FromProto's false
            raise invalid(f"tensor parsing error: {alias}") from None
    if request.inputs and len(seen) != len(request.inputs):
        raise invalid(
            f"Inputs contains invalid name. Used request inputs: {_keys(seen)}, request input: {_keys(request.inputs)}"
        )
    return feeds


def _output_aliases(signature, output_filter) -> list[str]:
    aliases: list[str] = []
    for alias in output_filter:
        if alias not in signature.outputs:
            raise invalid(
                f"output tensor alias not found in signature: {alias} Outputs expected to be in the set "
                f"{{{_keys(signature.outputs)}}}."
            )
        if alias in aliases:
            raise invalid(f"duplicate output tensor alias: {alias}")
        aliases.append(alias)
    return aliases or list(signature.outputs)


def predict(core: ServerCore, request, timeout: float | None = None):
    servable = core.servable(_spec_of(request))
    signature_name = request.model_spec.signature_name or DEFAULT_SIGNATURE
    signature = servable.signature_def.get(signature_name)
    if signature is None:
        raise ServingError(C.FAILED_PRECONDITION, f'Serving signature key "{signature_name}" not found.')
    response = predict_pb2.PredictResponse()
    _set_model_spec(response.model_spec, request.model_spec.name, servable.version, signature_name)
    feeds = _input_values(signature, request)
    aliases = _output_aliases(signature, request.output_filter)
    values = servable.run(feeds, [signature.outputs[a].name for a in aliases], timeout)
    for alias, value in zip(aliases, values):
        response.outputs[alias].CopyFrom(as_proto_field(value))
    return response


def _examples_tensor(input_proto) -> np.ndarray:
    """util.cc's InputToSerializedExampleTensor: the context's bytes are prepended to each example's,
    which protobuf parses as a merge (example features win)."""
    kind = input_proto.WhichOneof("kind")
    if kind == "example_list":
        examples = [e.SerializeToString() for e in input_proto.example_list.examples]
    elif kind == "example_list_with_context":
        with_context = input_proto.example_list_with_context
        context = with_context.context.SerializeToString()
        examples = [context + e.SerializeToString() for e in with_context.examples]
    else:
        examples = []
    if not examples:
        raise invalid("Input is empty.")
    return np.array(examples, dtype=object)


def _task_signature(servable: Servable, model_spec, method: str):
    """Get{Classification,Regression}SignatureDef; TF Serving checks the shape of the signature, not
    its method_name (the method-name check is off by default)."""
    signature_name = model_spec.signature_name or DEFAULT_SIGNATURE
    signature = servable.signature_def.get(signature_name)
    if signature is None:
        raise invalid(f"No signature was found with the name: {signature_name}")
    return signature, *_task_tensors(signature, method)


def _task_tensors(signature, method: str) -> tuple[str, list[str]]:
    """Pre{Classification,Regression}: the input tensor name and the output tensor names."""
    if len(signature.inputs) != 1:
        raise invalid("Expected one input Tensor.")
    if method == CLASSIFY and len(signature.outputs) not in (1, 2):
        raise invalid(f"Expected one or two output Tensors, found {len(signature.outputs)}")
    if method == REGRESS and len(signature.outputs) != 1:
        raise invalid("Expected one output Tensor.")
    what = "classification" if method == CLASSIFY else "regression"
    if "inputs" not in signature.inputs:
        raise invalid(f"No {what} inputs found in SignatureDef: {signature}")
    keys = ("classes", "scores") if method == CLASSIFY else ("outputs",)
    outputs = [signature.outputs[k].name for k in keys if k in signature.outputs]
    if not outputs and method == CLASSIFY:
        raise invalid(
            'Expected classification signature outputs to contain at least one of "classes" or "scores". '
            f"Signature was: {signature}"
        )
    if not outputs:
        raise invalid(f"No regression outputs found in SignatureDef: {signature}")
    return signature.inputs["inputs"].name, outputs


def _classification_result(signature, n: int, values: dict[str, np.ndarray], result) -> None:
    classes = values.get(signature.outputs["classes"].name) if "classes" in signature.outputs else None
    scores = values.get(signature.outputs["scores"].name) if "scores" in signature.outputs else None
    for what, tensor, dtype in (("classes", classes, tf.string), ("scores", scores, tf.float32)):
        if tensor is None:
            continue
        if tensor.ndim != 2:
            raise invalid(f"Expected Tensor shape: [batch_size num_classes] but got {list(tensor.shape)}")
        if tf.as_dtype(tensor.dtype) != dtype:
            raise invalid(f"Expected {what} Tensor of {_type_name(dtype)}. Got: {_type_name(tensor.dtype)}")
        if tensor.shape[0] != n:
            raise invalid(f"Expected {what} output batch size of {n}. Got: {tensor.shape[0]}")
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise invalid(
            f"Tensors class and score should match in dim_size(1). Got {classes.shape[1]} vs. {scores.shape[1]}"
        )
    num_classes = (classes if classes is not None else scores).shape[1]
    for i in range(n):
        classifications = result.classifications.add()
        for c in range(num_classes):
            cl = classifications.classes.add()
            if classes is not None:
                cl.label = classes[i, c].decode("utf-8", "replace")
            if scores is not None:
                cl.score = scores[i, c]


def _regression_result(signature, n: int, values: dict[str, np.ndarray], result) -> None:
    tensor = values[signature.outputs["outputs"].name]
    if not (tensor.ndim == 1 or (tensor.ndim == 2 and tensor.shape[1] == 1)):
        raise invalid(
            f"Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got {list(tensor.shape)}"
        )
    if tensor.shape[0] != n:
        raise invalid(f"Input batch size did not match output batch size: {n} vs. {tensor.shape[0]}")
    if tensor.dtype != np.float32:
        raise invalid(f"Expected output Tensor of DT_FLOAT.  Got: {_type_name(tensor.dtype)}")
    for value in tensor.ravel():
        result.regressions.add(value=value)


def _run_task(core: ServerCore, request, method: str, response, timeout: float | None):
    servable = core.servable(_spec_of(request))
    signature, input_name, output_names = _task_signature(servable, request.model_spec, method)
    examples = _examples_tensor(request.input)
    values = dict(zip(output_names, servable.run({input_name: examples}, output_names, timeout)))
    _set_model_spec(
        response.model_spec, request.model_spec.name, servable.version, request.model_spec.signature_name
    )
    (_classification_result if method == CLASSIFY else _regression_result)(
        signature, len(examples), values, response.result
    )
    return response


def classify(core: ServerCore, request, timeout: float | None = None):
    return _run_task(core, request, CLASSIFY, classification_pb2.ClassificationResponse(), timeout)


def regress(core: ServerCore, request, timeout: float | None = None):
    return _run_task(core, request, REGRESS, regression_pb2.RegressionResponse(), timeout)


def multi_inference(core: ServerCore, request, timeout: float | None = None):
    """multi_inference.cc: every task on the same model and input, in one Session run."""
    servable = core.servable(request.tasks[0].model_spec if request.tasks else model_pb2.ModelSpec())
    tasks, names, inputs, outputs = [], set(), set(), set()
    for task in request.tasks:
        if not task.model_spec.name:
            raise invalid("Found ModelSpec with an empty model name.")
        if task.model_spec.name != request.tasks[0].model_spec.name:
            raise invalid("All ModelSpecs in a MultiInferenceRequest must access the same model name.")
        name = task.model_spec.signature_name or DEFAULT_SIGNATURE
        if name in names:
            raise invalid(f"Duplicate evaluation of signature: {name}")
        names.add(name)
        if name not in servable.signature_def:
            raise invalid(f"Requested signature not found in model graph: {name}")
        if task.method_name not in (CLASSIFY, REGRESS):
            raise ServingError(C.UNIMPLEMENTED, f"Unsupported signature method_name: {task.method_name}")
        input_name, output_names = _task_tensors(servable.signature_def[name], task.method_name)
        inputs.add(input_name)
        outputs.update(output_names)
        tasks.append((task, servable.signature_def[name]))
    examples = _examples_tensor(request.input)
    fetches = sorted(outputs)
    values = dict(zip(fetches, servable.run(dict.fromkeys(inputs, examples), fetches, timeout)))
    response = inference_pb2.MultiInferenceResponse()
    for task, signature in tasks:
        result = response.results.add()
        if task.method_name == CLASSIFY:
            _classification_result(signature, len(examples), values, result.classification_result)
        else:
            _regression_result(signature, len(examples), values, result.regression_result)
        _set_model_spec(
            result.model_spec, task.model_spec.name, servable.version, task.model_spec.signature_name
        )
    return response


def get_model_metadata(core: ServerCore, request, timeout: float | None = None):
    model_spec = _spec_of(request)
    if not request.metadata_field:
        raise invalid("GetModelMetadataRequest must specify at least one metadata_field")
    for field in request.metadata_field:
        if field != "signature_def":
            raise invalid(f"Metadata field {field} is not supported")
    servable = core.servable(model_spec)
    signature_def_map = get_model_metadata_pb2.SignatureDefMap()
    for key, signature in servable.signature_def.items():
        signature_def_map.signature_def[key].CopyFrom(signature)
    response = get_model_metadata_pb2.GetModelMetadataResponse()
    _set_model_spec(response.model_spec, servable.name, servable.version, None)
    response.metadata["signature_def"].Pack(signature_def_map)
    return response


def get_model_status(core: ServerCore, request, timeout: float | None = None):
    """get_model_status_impl.cc: a version label is ignored (all versions, newest first)."""
    model_spec = _spec_of(request)
    versions = core.servables.get(model_spec.name, {})
    if model_spec.HasField("version"):
        if model_spec.version.value not in versions:
            raise ServingError(
                C.NOT_FOUND, f"Could not find version {model_spec.version.value} of model {model_spec.name}"
            )
        chosen = [model_spec.version.value]
    elif not versions:
        raise ServingError(C.NOT_FOUND, f"Could not find any versions of model {model_spec.name}")
    else:
        chosen = sorted(versions, reverse=True)
    response = get_model_status_pb2.GetModelStatusResponse()
    for version in chosen:
        status = response.model_version_status.add(version=version)
        status.state = get_model_status_pb2.ModelVersionStatus.AVAILABLE
        status.status.SetInParent()  # ToStatusProto(OK): set, so JSON prints error_code "OK"
    return response

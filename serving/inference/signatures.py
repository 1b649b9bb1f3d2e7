"""SignatureDef constants and the lookups every inference API shares.

Names and texts are TensorFlow's (``signature_constants``) and TF Serving's (``util.cc``:
``MakeModelSpec``). Also the servable pin every API takes for the length of one request, and the
request path Classify and Regress share (``serve_examples``, ``get_signature``, ``run_examples``):
TF Serving's ``classifier.cc`` and ``regressor.cc`` are one pattern that differs only in the
signature's expected outputs and their post-processing.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence

import numpy as np
from google.protobuf import text_format

from apis.tensorflow.core.framework import types_pb2
from apis.tensorflow.core.protobuf import config_pb2, meta_graph_pb2
from apis.tensorflow_serving.apis import input_pb2, model_pb2
from runtime import dtypes, errors
from serving.observability import metrics

logger = logging.getLogger(__name__)

DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"

PREDICT_METHOD_NAME = "tensorflow/serving/predict"
CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"
REGRESS_METHOD_NAME = "tensorflow/serving/regress"

CLASSIFY_INPUTS = "inputs"
CLASSIFY_OUTPUT_CLASSES = "classes"
CLASSIFY_OUTPUT_SCORES = "scores"
REGRESS_INPUTS = "inputs"
REGRESS_OUTPUTS = "outputs"


def signature_name(model_spec: model_pb2.ModelSpec) -> str:
    """The requested signature: ``model_spec.signature_name`` or "serving_default"."""
    return model_spec.signature_name or DEFAULT_SERVING_SIGNATURE_DEF_KEY


def set_model_spec(out: model_pb2.ModelSpec, name: str, signature: str | None, version: int | None) -> None:
    """TF Serving's ``MakeModelSpec``: name, the signature name (empty -> "serving_default"), version."""
    out.Clear()
    out.name = name
    if signature is not None:
        out.signature_name = signature or DEFAULT_SERVING_SIGNATURE_DEF_KEY
    if version is not None:
        out.version.value = version


def method_name_check(core) -> bool:
    """``--enable_signature_method_name_check`` (off by default, as in TF Serving)."""
    options = getattr(core, "options", None)
    return bool(getattr(options, "enable_signature_method_name_check", False))


def serialize_as_tensor_content(core) -> bool:
    """``--enable_serialization_as_tensor_content``: Predict outputs in tensor_content."""
    options = getattr(core, "options", None)
    return bool(getattr(options, "enable_serialization_as_tensor_content", False))


def servable(core, model_spec: model_pb2.ModelSpec, deadline: float | None = None):
    """The servable for ``model_spec``, for ``with signatures.servable(...) as s``: the block
    pins that version (``ServerCore.pinned``; ``deadline``: how long it may wait for a load)."""
    return core.pinned(model_spec, deadline)


def debug_string(message) -> str:
    """A proto as C++ ``DebugString`` prints it (text format, two-space indent)."""
    return text_format.MessageToString(message)


def shape_debug_string(shape: tuple[int, ...]) -> str:
    """``TensorShape::DebugString``: "[2,3]", "[]" for a scalar."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def dtype_enum_name(dtype: int) -> str:
    """``DataType_Name``: "DT_FLOAT"."""
    try:
        return types_pb2.DataType.Name(dtype)
    except ValueError:
        return str(dtype)


def signature_defs(servable) -> dict[str, meta_graph_pb2.SignatureDef]:
    """The signatures of a servable's bundle (loader.SavedModelBundle)."""
    bundle = servable.bundle
    defs = getattr(bundle, "signature_defs", None)
    if defs is None:
        defs = bundle.meta_graph_def.signature_def
    return defs


def check_available(servable, name: str) -> None:
    """UNIMPLEMENTED, with the text found at load, for a signature that needs ops this server
    cannot run (loader's signature check); other signatures of the model serve normally."""
    check = getattr(servable.bundle, "check_signature", None)
    if check is not None:
        check(name)


def serve_examples(core, request, deadline: float | None, run: Callable):
    """A Classify or Regress request on the servable its model_spec names, pinned for the call:
    ``run(servable, request, run_options, method_name_check=...)``, which returns the response."""
    if not request.HasField("model_spec"):
        raise errors.InvalidArgumentError(None, None, "Missing ModelSpec")
    with servable(core, request.model_spec, deadline) as pinned:
        return run(pinned, request, run_options(deadline), method_name_check=method_name_check(core))


def get_signature(
    signature_defs, model_spec: model_pb2.ModelSpec, check: Callable[[meta_graph_pb2.SignatureDef], object]
) -> meta_graph_pb2.SignatureDef:
    """``GetClassificationSignatureDef`` / ``GetRegressionSignatureDef``: the requested signature,
    passed to ``check`` (which raises what is wrong with it)."""
    name = signature_name(model_spec)
    signature = signature_defs.get(name)
    if signature is None:
        raise errors.InvalidArgumentError(None, None, f"No signature was found with the name: {name}")
    check(signature)
    return signature


def check_method_name(signature: meta_graph_pb2.SignatureDef, method_name: str, kind: str) -> None:
    """The ``--enable_signature_method_name_check`` check; ``kind`` ("classification",
    "regression") words the error as TF Serving does."""
    if signature.method_name != method_name:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Expected {kind} signature method_name to be {method_name}. Was: {signature.method_name}",
        )


def run_examples(
    servable,
    request,
    response,
    signature: meta_graph_pb2.SignatureDef,
    inputs_key: str,
    pre_process: Callable[..., tuple[str, list[str]]],
    post_process: Callable[..., None],
    options: config_pb2.RunOptions | None,
    *,
    method_name_check: bool,
):
    """``RunClassify`` / ``RunRegress`` once the signature is found: the request's serialized
    tf.Examples fed to the signature's ``inputs_key`` input, its outputs (``pre_process``) fetched
    and turned into ``response.result`` (``post_process``); returns ``response``."""
    check_available(servable, signature_name(request.model_spec))
    set_model_spec(
        response.model_spec,
        request.model_spec.name,
        request.model_spec.signature_name,
        servable.version,
    )
    input_name, output_names = pre_process(signature, method_name_check=method_name_check)
    examples = serialized_examples(request.input)
    check_feed_dtypes([(signature.inputs[inputs_key].dtype, dtypes.DT_STRING)])
    start = time.perf_counter()
    outputs = run_session(servable.bundle.session, output_names, {input_name: examples}, options)
    api = "Classify" if response.DESCRIPTOR.name == "ClassificationResponse" else "Regress"
    metrics.runtime_done(request.model_spec.name, api, time.perf_counter() - start)
    post_process(signature, len(examples), output_names, outputs, response.result)
    return response


_NO_TIMEOUT_MS = 2**31 - 1  # TF Serving's DeadlineToTimeoutMillis saturates here


def run_options(deadline: float | None) -> config_pb2.RunOptions | None:
    """RunOptions for one request: the time left before its deadline (seconds) becomes
    ``timeout_in_ms``, as TF Serving's ``--enforce_session_run_timeout`` does (``timeout_ms``)."""
    timeout = timeout_ms(deadline)
    return _timeout_options(timeout) if timeout else None  # None: the Session's default, no timeout


def timeout_ms(deadline: float | None) -> int:
    """A request's session timeout: the time left before its deadline (seconds), in ms. A
    deadline already passed still gets 1 ms, so the Session fails fast instead of running
    unbounded. grpc reports a call without a deadline as ~infinite time left: that is no
    timeout (0), as in TF."""
    if deadline is None or deadline >= _NO_TIMEOUT_S:
        return 0
    return max(1, int(deadline * 1000))


_NO_TIMEOUT_S = _NO_TIMEOUT_MS / 1000


@functools.lru_cache(maxsize=256)  # a client's deadlines repeat: its timeout less a few ms
def _timeout_options(timeout_ms: int) -> config_pb2.RunOptions:
    """RunOptions with ``timeout_in_ms``, shared by the requests with that time left: read only."""
    options = config_pb2.RunOptions()
    options.timeout_in_ms = timeout_ms
    return options


def serialized_examples(input_: input_pb2.Input) -> np.ndarray:
    """TF Serving's ``InputToSerializedExampleTensor``: a 1-D string tensor of serialized
    tf.Examples. With ``example_list_with_context`` each element is the context's bytes followed
    by the example's, which parses as the example merged over the context (the example's
    features win), exactly as TF Serving feeds it."""
    kind = input_.WhichOneof("kind")
    if kind == "example_list":
        examples, prefix = input_.example_list.examples, b""
    elif kind == "example_list_with_context":
        examples = input_.example_list_with_context.examples
        prefix = input_.example_list_with_context.context.SerializeToString()
    else:
        examples, prefix = (), b""
    if not len(examples):
        raise errors.InvalidArgumentError(None, None, "Input is empty.")
    out = np.empty(len(examples), object)
    out[:] = [prefix + example.SerializeToString() for example in examples]
    return out


def check_feed_dtypes(expected_and_fed: list[tuple[int, int]]) -> None:
    """The dtype check TF's Session makes on feeds, with its text: "Expects arg[i] to be float but
    int32 is provided" (INVALID_ARGUMENT). ``expected_and_fed`` is in feed order; an expected
    DT_INVALID (no dtype in the TensorInfo) is not checked."""
    for index, (expected, fed) in enumerate(expected_and_fed):
        if expected != fed and expected != dtypes.DT_INVALID and dtypes.base_dtype(expected) != fed:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Expects arg[{index}] to be {dtypes.name(expected)} but {dtypes.name(fed)} is provided",
            )


def run_session(session, fetches: list[str], feeds: dict, options: config_pb2.RunOptions | None):
    """``session.run`` for a request: a ValueError or TypeError raised while feeding (say, a feed
    shape the graph cannot take) is the request's fault, so it is INVALID_ARGUMENT, not INTERNAL."""
    try:
        return session.run(fetches, feeds, options=options)
    except (ValueError, TypeError) as e:
        raise refused_feeds(e) from e


def session_callable(session, feeds: Sequence[str], fetches: Sequence[str]) -> Callable[..., list]:
    """``fetches`` with ``feeds`` (tensor names) fed, as ``call(*feed_values, options=...)``
    (or ``timeout_ms=...``: RunOptions of only a timeout; ``options`` wins where both are given):
    ``session.run``'s results and errors, where a ValueError or TypeError is the request's fault
    (callers raise ``refused_feeds`` of it, as ``run_session`` does). Where the Session offers
    ``make_callable``, names are resolved and the plan found once, not per request."""
    fetches = list(fetches)
    refusal = fetch_refusal(session, fetches)
    if refusal is not None:

        def refuse(*_, **__) -> list:
            raise refusal

        return refuse
    if hasattr(session, "make_callable") and len(set(feeds)) == len(feeds):
        try:
            return session.make_callable(fetches, list(feeds), accept_options=True)
        except Exception:  # noqa: BLE001 - a name the graph lacks: each run reports it, as run_session
            pass

    def run(*feed_values, options: config_pb2.RunOptions | None = None, timeout_ms: int = 0) -> list:
        if timeout_ms and options is None:
            options = _timeout_options(timeout_ms)
        return session.run(fetches, dict(zip(feeds, feed_values, strict=True)), options=options)

    return run


def fetch_refusal(session, fetches: Sequence[str]) -> errors.OpError | None:
    """What TF's C++ Session answers for a fetch naming an output its node lacks, as TF Serving
    fetches every TensorInfo name as a tensor: a signature such as ``__saved_model_init_op``,
    whose output names a NoOp, answers OUT_OF_RANGE. (Our Session, like TF's Python one, would
    run such a name as a target and return None.)"""
    graph = getattr(session, "graph", None)
    if not hasattr(graph, "get_operation_by_name"):  # (a stand-in Session)
        return None
    for name in fetches:
        op_name, _, index = name.partition(":")
        try:
            op = graph.get_operation_by_name(op_name)
        except (KeyError, ValueError):
            continue  # the run reports it
        output = int(index) if index.isdigit() else 0
        if output >= op.num_outputs:
            return errors.OutOfRangeError(
                None,
                None,
                f"Node '{op.name}' (type: '{op.type}', num of outputs: {op.num_outputs}) "
                f"does not have output {output}",
            )
    return None


def refused_feeds(e: Exception) -> errors.InvalidArgumentError:
    logger.debug("Session.run refused the request's feeds: %s", e)
    return errors.InvalidArgumentError(None, None, str(e))

"""PredictionService.Predict without a transport: TF Serving's ``predict_impl`` + ``predict_util``.

A request names a signature (default "serving_default") and feeds its inputs by alias; the
Session runs the aliased tensors and the response carries every signature output (or those in
``output_filter``) encoded as ``Tensor::AsProtoField`` does. Checks, their order, codes and texts
are TF Serving's; the dtype check that TF's Session makes on feeds ("Expects arg[i] ...") is made
here, before anything runs.

One path, top to bottom: ``answer`` pins the servable, ``run`` resolves the signature
(``predict_signature``), reads the inputs, runs them and returns a ``PredictOutputs``, which each
transport encodes as it sends: gRPC as wire bytes (``predict_wire``), REST and V2 as arrays
(``predict_outputs``), warmup and tests as a message (``predict``). Reading the inputs has one
shortcut (``PredictSignature.plain_outputs``, the request that sends exactly the signature's
inputs as ``tensor_content``: views of its bytes, no checks to make); anything else, and any
doubt, takes the checked path (``pre_process``), which gives the same result or TF Serving's error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from apis.tensorflow.core.framework import types_pb2
from apis.tensorflow.core.protobuf import config_pb2, meta_graph_pb2
from apis.tensorflow_serving.apis import model_pb2, predict_pb2
from runtime import errors, wire
from serving.inference import signatures, tensor_codec
from serving.observability import access_log, metrics, tracing


def predict(core, request: predict_pb2.PredictRequest, deadline: float | None = None):
    """Run one PredictRequest against the servable ``core`` resolves; returns a PredictResponse."""
    return answer(core, request, deadline).message()


def predict_wire(core, request: predict_pb2.PredictRequest, deadline: float | None = None) -> bytes:
    """``predict`` as the serialized PredictResponse, what gRPC sends: assembled as wire bytes,
    never built as a message nor serialized."""
    outputs = answer(core, request, deadline)
    access_log.note_version(outputs.version)  # (the bytes do not say it to the access log)
    if tracing.TRACER is None:
        return outputs.wire()
    with tracing.span("encode"):
        return outputs.wire()


def predict_outputs(core, request: predict_pb2.PredictRequest, deadline: float | None = None):
    """``predict`` as its outputs' arrays (``PredictOutputs``), what REST and V2 write."""
    return answer(core, request, deadline)


def answer(core, request: predict_pb2.PredictRequest, deadline: float | None) -> PredictOutputs:
    """``predict``'s answer before any encoding, on the servable pinned for the call."""
    spec = request.model_spec
    if not spec.name and not request.HasField("model_spec"):  # (a name means a model_spec)
        raise errors.InvalidArgumentError(None, None, "Missing ModelSpec")
    servable = core.pinned(spec, deadline)
    try:  # (what ``with`` does, without two calls per request)
        return run(
            servable,
            request,
            signatures.timeout_ms(deadline),
            method_name_check=signatures.method_name_check(core),
            as_tensor_content=signatures.serialize_as_tensor_content(core),
        )
    finally:
        servable.unpin()


def run_predict(
    servable,
    request: predict_pb2.PredictRequest,
    run_options: config_pb2.RunOptions | None = None,
    *,
    method_name_check: bool = False,
    as_tensor_content: bool = False,
) -> predict_pb2.PredictResponse:
    """TF Serving's ``RunPredict`` on a pinned servable."""
    timeout = run_options.timeout_in_ms if run_options is not None else 0
    outputs = run(
        servable,
        request,
        timeout,
        method_name_check=method_name_check,
        as_tensor_content=as_tensor_content,
        run_options=run_options,
    )
    return outputs.message()


def run(
    servable,
    request: predict_pb2.PredictRequest,
    timeout_ms: int,
    *,
    method_name_check: bool,
    as_tensor_content: bool,
    run_options: config_pb2.RunOptions | None = None,
) -> PredictOutputs:
    """The request run on a pinned servable: its signature resolved, its inputs read (the
    shortcut, else the checked path), the Session run; ``timeout_ms``: the Session's timeout
    (0: none) unless ``run_options`` are given."""
    name = signatures.signature_name(request.model_spec)
    signature = predict_signature(servable, name)
    model_name = request.model_spec.name
    values, aliases = None, signature.output_aliases
    if not request.output_filter and (signature.method_name_ok or not method_name_check):
        values = signature.plain_outputs(request.inputs, model_name, timeout_ms, run_options)
    if values is None:
        feed_values, fetches, aliases = pre_process(signature, request, method_name_check=method_name_check)
        start = _clock()
        with tracing.span("Session run"):
            values = signature.run(fetches, feed_values, run_options, timeout_ms)
        metrics.runtime_done(model_name, "Predict", _clock() - start)
    if len(values) != len(aliases):
        raise errors.UnknownError(None, None, "Predict internal error")
    return PredictOutputs(signature, model_name, servable.version, aliases, values, as_tensor_content)


class PredictOutputs:
    """One Predict's answer before a transport encodes it: the outputs' aliases and values (the
    Session's arrays), and what the response's model_spec says. Each encoding gives what TF
    Serving's PredictResponse holds: ``message`` (``PostProcessPredictionResult``), ``wire`` (its
    serialization, assembled as bytes where every output is sent), ``arrays`` (its TensorProtos'
    arrays, without building them)."""

    __slots__ = ("signature", "model_name", "version", "aliases", "values", "as_tensor_content")

    def __init__(self, signature, model_name, version, aliases, values, as_tensor_content):
        self.signature: PredictSignature = signature
        self.model_name: str = model_name
        self.version: int = version
        self.aliases: tuple[str, ...] = aliases
        self.values: list = values
        self.as_tensor_content: bool = as_tensor_content

    def message(self) -> predict_pb2.PredictResponse:
        response = predict_pb2.PredictResponse()
        signatures.set_model_spec(response.model_spec, self.model_name, self.signature.name, self.version)
        encode = tensor_codec.encode_content_into if self.as_tensor_content else tensor_codec.encode_into
        dtypes = self.signature.output_dtypes
        for alias, value in zip(self.aliases, self.values, strict=True):
            encode(response.outputs[alias], value, dtypes[alias])
        return response

    def wire(self) -> bytes:
        if self.aliases is self.signature.output_aliases:
            return self.signature.response_bytes(
                self.model_name, self.version, self.values, self.as_tensor_content
            )
        return self.message().SerializeToString()

    def arrays(self) -> dict[str, tuple[np.ndarray, int]]:
        """alias -> (array, TF dtype), as ``tensor_codec.decode`` would read the response's."""
        dtypes = self.signature.output_dtypes
        return {
            alias: tensor_codec.as_sent(value, dtypes[alias])
            for alias, value in zip(self.aliases, self.values, strict=True)
        }


class PredictSignature:
    """What Predict needs of one SignatureDef, resolved once per servable version: the inputs in
    the order TF feeds them (sorted aliases) with their tensor names and dtypes, every output
    (sorted aliases, what a request without ``output_filter`` fetches), and a Session callable
    per fetch list (``signatures.session_callable``).

    Thread-safe: everything is read-only after construction except the callable cache, which
    requests fill concurrently (a race builds a callable twice, harmlessly).
    """

    _MAX_CALLABLES = 64  # distinct output_filter lists cached; more are served uncached
    _MAX_SHAPES = 256  # output shapes whose response prefix is kept, per output

    def __init__(
        self,
        signature: meta_graph_pb2.SignatureDef,
        session,
        name: str = signatures.DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    ):
        self.signature = signature
        self._session = session
        self.name = name
        self.input_aliases = tuple(sorted(signature.inputs))
        self.input_names = tuple(signature.inputs[alias].name for alias in self.input_aliases)
        self.input_dtypes = tuple(signature.inputs[alias].dtype for alias in self.input_aliases)
        self.output_aliases = tuple(sorted(signature.outputs))
        self.output_names = tuple(signature.outputs[alias].name for alias in self.output_aliases)
        self.output_dtypes = {alias: info.dtype for alias, info in signature.outputs.items()}
        self.method_name_ok = signature.method_name in _METHOD_NAMES
        self._callables: dict[tuple[str, ...], Callable[..., list]] = {}
        self._plain_inputs = tuple(
            (alias, dtype, raw, 0 if raw is None else raw.itemsize)
            for alias, dtype, raw in zip(
                self.input_aliases, self.input_dtypes, map(_raw_dtype, self.input_dtypes)
            )
        )
        self._input_count = len(self._plain_inputs)
        self._run_all = signatures.session_callable(session, self.input_names, self.output_names)
        self._callables[self.output_names] = self._run_all
        # PredictResponse.outputs map entries up to the TensorProto: key (alias), value's tag.
        self._entry_heads = tuple(
            _OUTPUT_KEY_TAG + wire.varint(len(key)) + key + _OUTPUT_VALUE_TAG
            for key in (alias.encode() for alias in self.output_aliases)
        )
        self._output_dtype_list = tuple(self.output_dtypes[alias] for alias in self.output_aliases)
        # Per output, the numpy dtype whose arrays ``response_bytes`` sends as their own bytes,
        # and per encoding (fields, tensor_content) the entry prefix of each shape seen.
        self._raw_dtypes = tuple(_raw_dtype(dtype) for dtype in self._output_dtype_list)
        self._prefixes = tuple(
            tuple(
                None if raw is None or tensor_codec.raw_values_prefix(dtype, (), content) is None else {}
                for dtype, raw in zip(self._output_dtype_list, self._raw_dtypes)
            )
            for content in (False, True)
        )
        self._model_specs: dict[tuple[str, int], bytes] = {}  # (model name, version) -> field bytes

    def plain_outputs(self, inputs, model_name: str, timeout_ms: int, options=None) -> list | None:
        """The Session's outputs for a request that sends exactly the signature's inputs, each
        of its dtype and well formed, and asks for every output; None for any other request,
        which the checked path serves (with the same result, or TF Serving's error).
        ``timeout_ms``: the Session's timeout (``signatures.timeout_ms``; 0: none), unless
        RunOptions are given."""
        if len(inputs) != self._input_count:
            return None
        values = []
        for alias, dtype, np_dtype, itemsize in self._plain_inputs:
            proto = inputs.get(alias)
            if proto is None or proto.dtype != dtype:
                return None
            value = None if np_dtype is None else tensor_codec.content_view(proto, np_dtype, itemsize)
            if value is None:
                try:
                    value = tensor_codec.decode(proto)
                except tensor_codec.TensorProtoError:
                    return None
            values.append(value)
        start = _clock()
        try:
            if tracing.TRACER is None:
                outputs = self._run_all(*values, options=options, timeout_ms=timeout_ms)
            else:
                with tracing.span("Session run"):
                    outputs = self._run_all(*values, options=options, timeout_ms=timeout_ms)
        except (ValueError, TypeError) as e:
            raise signatures.refused_feeds(e) from e
        metrics.runtime_done(model_name, "Predict", _clock() - start)
        return outputs

    def response_bytes(self, model_name: str, version: int, outputs: list, as_tensor_content: bool) -> bytes:
        """The serialized PredictResponse of every output, assembled as wire bytes: what
        ``PredictOutputs.message`` builds field by field. An output of its
        signature dtype whose values are their own bytes on the wire is its cached prefix
        (per shape) and ``tobytes()``."""
        if len(outputs) != len(self._entry_heads):
            raise errors.UnknownError(None, None, "Predict internal error")
        spec = self._model_specs.get((model_name, version))
        if spec is None:
            spec = self._model_spec_bytes(model_name, version)
        prefixes = self._prefixes[as_tensor_content]
        if len(outputs) == 1:  # the common response, without a list to join
            value, cache = outputs[0], prefixes[0]
            if cache is not None and type(value) is np.ndarray and value.dtype is self._raw_dtypes[0]:
                prefix = cache.get(value.shape)
                if prefix is None:
                    prefix = self._entry_prefix(0, value.shape, as_tensor_content)
                return prefix + value.tobytes() + spec
        parts = []
        for index, value in enumerate(outputs):
            cache = prefixes[index]
            if cache is not None and type(value) is np.ndarray and value.dtype is self._raw_dtypes[index]:
                prefix = cache.get(value.shape)
                if prefix is None:
                    prefix = self._entry_prefix(index, value.shape, as_tensor_content)
                parts.append(prefix)
                parts.append(value.tobytes())
            else:
                parts.append(self._entry(index, value, as_tensor_content))
        parts.append(spec)
        return b"".join(parts)

    def _model_spec_bytes(self, model_name: str, version: int) -> bytes:
        """PredictResponse.model_spec's field, kept per (model name, version)."""
        message = model_pb2.ModelSpec()
        signatures.set_model_spec(message, model_name, self.name, version)
        body = message.SerializeToString()
        return self._model_specs.setdefault(
            (model_name, version), _MODEL_SPEC_TAG + wire.varint(len(body)) + body
        )

    def _entry(self, index: int, value, as_tensor_content: bool) -> bytes:
        """PredictResponse.outputs' entry for output ``index``: its alias and TensorProto."""
        encode = tensor_codec.content_bytes if as_tensor_content else tensor_codec.field_bytes
        tensor = encode(value, self._output_dtype_list[index])
        entry = self._entry_heads[index] + wire.varint(len(tensor)) + tensor
        return _OUTPUTS_TAG + wire.varint(len(entry)) + entry

    def _entry_prefix(self, index: int, shape: tuple[int, ...], as_tensor_content: bool) -> bytes:
        """``_entry`` of an array of ``shape`` up to its values' bytes, kept for the next one."""
        varint = wire.varint
        dtype = self._output_dtype_list[index]
        tensor = tensor_codec.raw_values_prefix(dtype, shape, as_tensor_content)
        tensor_size = len(tensor) + math.prod(shape) * self._raw_dtypes[index].itemsize
        entry_head = self._entry_heads[index] + varint(tensor_size)
        prefix = _OUTPUTS_TAG + varint(len(entry_head) + tensor_size) + entry_head + tensor
        cache = self._prefixes[as_tensor_content][index]
        if len(cache) < self._MAX_SHAPES:
            cache[shape] = prefix
        return prefix

    def run(self, fetches: tuple[str, ...], feed_values: list, run_options, timeout_ms: int = 0) -> list:
        """``fetches`` with the signature's inputs fed ``feed_values`` (``signatures.run_session``;
        ``timeout_ms`` as ``plain_outputs`` takes it)."""
        call = self._callables.get(fetches)
        if call is None:
            call = signatures.session_callable(self._session, self.input_names, fetches)
            if len(self._callables) < self._MAX_CALLABLES:
                self._callables[fetches] = call
        try:
            return call(*feed_values, options=run_options, timeout_ms=timeout_ms)
        except (ValueError, TypeError) as e:
            raise signatures.refused_feeds(e) from e


def _raw_dtype(dtype: int) -> np.dtype | None:
    """The numpy dtype of a signature's numeric dtype, as requests and responses carry it."""
    return None if dtype == types_pb2.DT_STRING else tensor_codec.numpy_dtype(dtype)


def predict_signature(servable, name: str) -> PredictSignature:
    """The servable's signature ``name`` as a PredictSignature, built on its first request and
    kept in the servable's per-version cache; FAILED_PRECONDITION if there is none,
    UNIMPLEMENTED if it needs ops this server cannot run (``signatures.check_available``)."""
    key = (PredictSignature, name)
    prepared = servable.cache.get(key)
    if prepared is None:
        signature = signatures.signature_defs(servable).get(name)
        if signature is None:
            raise errors.FailedPreconditionError(None, None, f'Serving signature key "{name}" not found.')
        signatures.check_available(servable, name)  # (static: kept once it passes)
        prepared = servable.cache.setdefault(key, PredictSignature(signature, servable.bundle.session, name))
    return prepared


def pre_process(
    signature: PredictSignature,
    request: predict_pb2.PredictRequest,
    *,
    method_name_check: bool = False,
) -> tuple[list[np.ndarray], tuple[str, ...], tuple[str, ...]]:
    """``PreProcessPrediction``: feed values in the signature's input order, fetched tensor
    names, their aliases."""
    if method_name_check:
        _verify_method_name(signature.signature)
    _verify_inputs_size(signature.signature, request)
    feed_values, fed_dtypes = _input_values(signature, request)
    fetches, aliases = _outputs(signature, request)
    if fed_dtypes != signature.input_dtypes:  # TF's Session checks feeds once the run starts
        signatures.check_feed_dtypes(list(zip(signature.input_dtypes, fed_dtypes, strict=True)))
    return feed_values, fetches, aliases


_clock = time.perf_counter
_METHOD_NAMES = (
    signatures.PREDICT_METHOD_NAME,
    signatures.CLASSIFY_METHOD_NAME,
    signatures.REGRESS_METHOD_NAME,
)
# Wire keys: PredictResponse.outputs (1) and model_spec (2); a map
# entry's key (1) and value (2).
_OUTPUTS_TAG, _MODEL_SPEC_TAG = wire.key(1, wire.LENGTH_DELIMITED), wire.key(2, wire.LENGTH_DELIMITED)
_OUTPUT_KEY_TAG, _OUTPUT_VALUE_TAG = wire.key(1, wire.LENGTH_DELIMITED), wire.key(2, wire.LENGTH_DELIMITED)


def _verify_method_name(signature: meta_graph_pb2.SignatureDef) -> None:
    allowed = _METHOD_NAMES
    if signature.method_name not in allowed:
        raise errors.InternalError(
            None,
            None,
            "Expected prediction signature method_name to be one of {"
            + ", ".join(allowed)
            + f"}}. Was: {signature.method_name}",
        )


def _verify_inputs_size(signature: meta_graph_pb2.SignatureDef, request) -> None:
    sent, expected = len(request.inputs), len(signature.inputs)
    if sent > expected or (sent < expected and not signature.defaults):
        request_inputs = set(request.inputs)
        signature_inputs = set(signature.inputs)
        raise errors.InvalidArgumentError(
            None,
            None,
            f"input size does not match signature: {sent}!={expected} "
            f"len({{{_join(request_inputs)}}}) != len({{{_join(signature_inputs)}}}). "
            f"Sent extra: {{{_join(request_inputs - signature_inputs)}}}. "
            f"Missing but required: {{{_join(signature_inputs - request_inputs)}}}.",
        )


def _input_values(signature: PredictSignature, request) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """TF's ``saved_model::GetInputValues``: feed values in the signature's input order, and the
    dtypes fed, in the same order, for the Session's check."""
    inputs, defaults = request.inputs, signature.signature.defaults
    values: list[np.ndarray] = []
    fed_dtypes: list[int] = []
    used = 0
    for alias, name in zip(signature.input_aliases, signature.input_names):
        if alias in inputs:
            proto = inputs[alias]
            used += 1
        elif alias in defaults:
            proto = defaults[alias]
        else:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Signature input alias: {alias}(feed name: {name}) not found in "
                f"request and no default value provided. Inputs expected to be in the request "
                f"{{{_join(inputs)}}}, or default input alias set: "
                f"{_join(defaults)}",
            )
        try:
            values.append(tensor_codec.decode(proto))
        except tensor_codec.TensorProtoError:
            raise errors.InvalidArgumentError(None, None, f"tensor parsing error: {alias}") from None
        fed_dtypes.append(proto.dtype)
    if inputs and used != len(inputs):
        seen = [alias for alias in signature.input_aliases if alias in inputs]
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Inputs contains invalid name. Used request inputs: {_join(seen)}, "
            f"request input: {_join(inputs)}",
        )
    return values, tuple(fed_dtypes)


def _outputs(signature: PredictSignature, request) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if not request.output_filter:
        return signature.output_names, signature.output_aliases
    fetches: list[str] = []
    aliases: list[str] = []
    for alias in request.output_filter:
        tensor_info = signature.signature.outputs.get(alias)
        if tensor_info is None:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"output tensor alias not found in signature: {alias} Outputs expected to be in "
                f"the set {{{_join(signature.signature.outputs)}}}.",
            )
        if alias in aliases:
            raise errors.InvalidArgumentError(None, None, f"duplicate output tensor alias: {alias}")
        fetches.append(tensor_info.name)
        aliases.append(alias)
    return tuple(fetches), tuple(aliases)


def _join(names) -> str:
    """``absl::StrJoin`` over a ``std::set``: sorted, comma-separated."""
    return ",".join(sorted(names))

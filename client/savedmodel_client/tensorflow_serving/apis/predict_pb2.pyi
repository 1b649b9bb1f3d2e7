from savedmodel_client.tensorflow.core.framework import tensor_pb2 as _tensor_pb2
from savedmodel_client.tensorflow_serving.apis import model_pb2 as _model_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PredictRequest(_message.Message):
    __slots__ = ("model_spec", "inputs", "output_filter", "predict_streamed_options", "client_id", "request_options")
    class RequestOptions(_message.Message):
        __slots__ = ("client_id", "deterministic_mode", "return_additional_arrays_from_prefill", "return_stoptokens", "return_all_stoptokens", "max_cache_length", "handshake")
        class DeterministicMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
            __slots__ = ()
            DETERMINISTIC_MODE_UNSPECIFIED: _ClassVar[PredictRequest.RequestOptions.DeterministicMode]
            FIXED_DECODER_SLOT: _ClassVar[PredictRequest.RequestOptions.DeterministicMode]
        DETERMINISTIC_MODE_UNSPECIFIED: PredictRequest.RequestOptions.DeterministicMode
        FIXED_DECODER_SLOT: PredictRequest.RequestOptions.DeterministicMode
        class Handshake(_message.Message):
            __slots__ = ("estimated_payload_bytes",)
            ESTIMATED_PAYLOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
            estimated_payload_bytes: int
            def __init__(self, estimated_payload_bytes: _Optional[int] = ...) -> None: ...
        CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
        DETERMINISTIC_MODE_FIELD_NUMBER: _ClassVar[int]
        RETURN_ADDITIONAL_ARRAYS_FROM_PREFILL_FIELD_NUMBER: _ClassVar[int]
        RETURN_STOPTOKENS_FIELD_NUMBER: _ClassVar[int]
        RETURN_ALL_STOPTOKENS_FIELD_NUMBER: _ClassVar[int]
        MAX_CACHE_LENGTH_FIELD_NUMBER: _ClassVar[int]
        HANDSHAKE_FIELD_NUMBER: _ClassVar[int]
        client_id: bytes
        deterministic_mode: PredictRequest.RequestOptions.DeterministicMode
        return_additional_arrays_from_prefill: bool
        return_stoptokens: _containers.RepeatedScalarFieldContainer[int]
        return_all_stoptokens: bool
        max_cache_length: int
        handshake: PredictRequest.RequestOptions.Handshake
        def __init__(self, client_id: _Optional[bytes] = ..., deterministic_mode: _Optional[_Union[PredictRequest.RequestOptions.DeterministicMode, str]] = ..., return_additional_arrays_from_prefill: _Optional[bool] = ..., return_stoptokens: _Optional[_Iterable[int]] = ..., return_all_stoptokens: _Optional[bool] = ..., max_cache_length: _Optional[int] = ..., handshake: _Optional[_Union[PredictRequest.RequestOptions.Handshake, _Mapping]] = ...) -> None: ...
    class InputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _tensor_pb2.TensorProto
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ...) -> None: ...
    MODEL_SPEC_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FILTER_FIELD_NUMBER: _ClassVar[int]
    PREDICT_STREAMED_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    model_spec: _model_pb2.ModelSpec
    inputs: _containers.MessageMap[str, _tensor_pb2.TensorProto]
    output_filter: _containers.RepeatedScalarFieldContainer[str]
    predict_streamed_options: PredictStreamedOptions
    client_id: bytes
    request_options: PredictRequest.RequestOptions
    def __init__(self, model_spec: _Optional[_Union[_model_pb2.ModelSpec, _Mapping]] = ..., inputs: _Optional[_Mapping[str, _tensor_pb2.TensorProto]] = ..., output_filter: _Optional[_Iterable[str]] = ..., predict_streamed_options: _Optional[_Union[PredictStreamedOptions, _Mapping]] = ..., client_id: _Optional[bytes] = ..., request_options: _Optional[_Union[PredictRequest.RequestOptions, _Mapping]] = ...) -> None: ...

class PredictStreamedOptions(_message.Message):
    __slots__ = ("request_state", "split_dimensions", "return_single_response")
    class RequestState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NONE: _ClassVar[PredictStreamedOptions.RequestState]
        SPLIT: _ClassVar[PredictStreamedOptions.RequestState]
        END_SPLIT: _ClassVar[PredictStreamedOptions.RequestState]
        CANCEL: _ClassVar[PredictStreamedOptions.RequestState]
    NONE: PredictStreamedOptions.RequestState
    SPLIT: PredictStreamedOptions.RequestState
    END_SPLIT: PredictStreamedOptions.RequestState
    CANCEL: PredictStreamedOptions.RequestState
    class SplitDimensionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    REQUEST_STATE_FIELD_NUMBER: _ClassVar[int]
    SPLIT_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    RETURN_SINGLE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    request_state: PredictStreamedOptions.RequestState
    split_dimensions: _containers.ScalarMap[str, int]
    return_single_response: bool
    def __init__(self, request_state: _Optional[_Union[PredictStreamedOptions.RequestState, str]] = ..., split_dimensions: _Optional[_Mapping[str, int]] = ..., return_single_response: _Optional[bool] = ...) -> None: ...

class PredictResponse(_message.Message):
    __slots__ = ("model_spec", "outputs")
    class OutputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _tensor_pb2.TensorProto
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ...) -> None: ...
    MODEL_SPEC_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    model_spec: _model_pb2.ModelSpec
    outputs: _containers.MessageMap[str, _tensor_pb2.TensorProto]
    def __init__(self, model_spec: _Optional[_Union[_model_pb2.ModelSpec, _Mapping]] = ..., outputs: _Optional[_Mapping[str, _tensor_pb2.TensorProto]] = ...) -> None: ...

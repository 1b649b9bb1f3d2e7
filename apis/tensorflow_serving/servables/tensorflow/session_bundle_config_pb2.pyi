from google.protobuf import wrappers_pb2 as _wrappers_pb2
from apis.tensorflow.core.protobuf import config_pb2 as _config_pb2
from apis.tensorflow.core.protobuf import named_tensor_pb2 as _named_tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModelWarmupOptions(_message.Message):
    __slots__ = ("num_request_iterations", "num_model_warmup_threads", "model_name", "model_version", "enable_all_batch_sizes_warmup")
    NUM_REQUEST_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    NUM_MODEL_WARMUP_THREADS_FIELD_NUMBER: _ClassVar[int]
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    ENABLE_ALL_BATCH_SIZES_WARMUP_FIELD_NUMBER: _ClassVar[int]
    num_request_iterations: _wrappers_pb2.Int32Value
    num_model_warmup_threads: _wrappers_pb2.Int32Value
    model_name: str
    model_version: int
    enable_all_batch_sizes_warmup: bool
    def __init__(self, num_request_iterations: _Optional[_Union[_wrappers_pb2.Int32Value, _Mapping]] = ..., num_model_warmup_threads: _Optional[_Union[_wrappers_pb2.Int32Value, _Mapping]] = ..., model_name: _Optional[str] = ..., model_version: _Optional[int] = ..., enable_all_batch_sizes_warmup: _Optional[bool] = ...) -> None: ...

class SessionBundleConfig(_message.Message):
    __slots__ = ("session_target", "session_config", "batching_parameters", "in_graph_batching_parameters", "session_run_load_threadpool_index", "experimental_transient_ram_bytes_during_load", "saved_model_tags", "experimental_fixed_input_tensors", "enable_model_warmup", "model_warmup_options", "enable_session_metadata", "remove_unused_fields_from_bundle_metagraph", "prefer_tflite_model", "resource_estimation_uses_validation_result", "num_tflite_interpreters", "num_tflite_interpreters_per_pool", "num_tflite_pools", "wrap_session_with_no_threading_params", "enable_per_model_batching_params", "enable_saved_model_config", "mixed_precision")
    SESSION_TARGET_FIELD_NUMBER: _ClassVar[int]
    SESSION_CONFIG_FIELD_NUMBER: _ClassVar[int]
    BATCHING_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    IN_GRAPH_BATCHING_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    SESSION_RUN_LOAD_THREADPOOL_INDEX_FIELD_NUMBER: _ClassVar[int]
    EXPERIMENTAL_TRANSIENT_RAM_BYTES_DURING_LOAD_FIELD_NUMBER: _ClassVar[int]
    SAVED_MODEL_TAGS_FIELD_NUMBER: _ClassVar[int]
    EXPERIMENTAL_FIXED_INPUT_TENSORS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_MODEL_WARMUP_FIELD_NUMBER: _ClassVar[int]
    MODEL_WARMUP_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_SESSION_METADATA_FIELD_NUMBER: _ClassVar[int]
    REMOVE_UNUSED_FIELDS_FROM_BUNDLE_METAGRAPH_FIELD_NUMBER: _ClassVar[int]
    PREFER_TFLITE_MODEL_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ESTIMATION_USES_VALIDATION_RESULT_FIELD_NUMBER: _ClassVar[int]
    NUM_TFLITE_INTERPRETERS_FIELD_NUMBER: _ClassVar[int]
    NUM_TFLITE_INTERPRETERS_PER_POOL_FIELD_NUMBER: _ClassVar[int]
    NUM_TFLITE_POOLS_FIELD_NUMBER: _ClassVar[int]
    WRAP_SESSION_WITH_NO_THREADING_PARAMS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_PER_MODEL_BATCHING_PARAMS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_SAVED_MODEL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    MIXED_PRECISION_FIELD_NUMBER: _ClassVar[int]
    session_target: str
    session_config: _config_pb2.ConfigProto
    batching_parameters: BatchingParameters
    in_graph_batching_parameters: _config_pb2.BatchingOptions
    session_run_load_threadpool_index: _wrappers_pb2.Int32Value
    experimental_transient_ram_bytes_during_load: int
    saved_model_tags: _containers.RepeatedScalarFieldContainer[str]
    experimental_fixed_input_tensors: _containers.RepeatedCompositeFieldContainer[_named_tensor_pb2.NamedTensorProto]
    enable_model_warmup: bool
    model_warmup_options: ModelWarmupOptions
    enable_session_metadata: bool
    remove_unused_fields_from_bundle_metagraph: bool
    prefer_tflite_model: bool
    resource_estimation_uses_validation_result: bool
    num_tflite_interpreters: int
    num_tflite_interpreters_per_pool: int
    num_tflite_pools: int
    wrap_session_with_no_threading_params: bool
    enable_per_model_batching_params: bool
    enable_saved_model_config: bool
    mixed_precision: str
    def __init__(self, session_target: _Optional[str] = ..., session_config: _Optional[_Union[_config_pb2.ConfigProto, _Mapping]] = ..., batching_parameters: _Optional[_Union[BatchingParameters, _Mapping]] = ..., in_graph_batching_parameters: _Optional[_Union[_config_pb2.BatchingOptions, _Mapping]] = ..., session_run_load_threadpool_index: _Optional[_Union[_wrappers_pb2.Int32Value, _Mapping]] = ..., experimental_transient_ram_bytes_during_load: _Optional[int] = ..., saved_model_tags: _Optional[_Iterable[str]] = ..., experimental_fixed_input_tensors: _Optional[_Iterable[_Union[_named_tensor_pb2.NamedTensorProto, _Mapping]]] = ..., enable_model_warmup: _Optional[bool] = ..., model_warmup_options: _Optional[_Union[ModelWarmupOptions, _Mapping]] = ..., enable_session_metadata: _Optional[bool] = ..., remove_unused_fields_from_bundle_metagraph: _Optional[bool] = ..., prefer_tflite_model: _Optional[bool] = ..., resource_estimation_uses_validation_result: _Optional[bool] = ..., num_tflite_interpreters: _Optional[int] = ..., num_tflite_interpreters_per_pool: _Optional[int] = ..., num_tflite_pools: _Optional[int] = ..., wrap_session_with_no_threading_params: _Optional[bool] = ..., enable_per_model_batching_params: _Optional[bool] = ..., enable_saved_model_config: _Optional[bool] = ..., mixed_precision: _Optional[str] = ...) -> None: ...

class BatchingParameters(_message.Message):
    __slots__ = ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads", "thread_pool_name", "enable_large_batch_splitting", "max_execution_batch_size", "allowed_batch_sizes", "pad_variable_length_inputs")
    MAX_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    BATCH_TIMEOUT_MICROS_FIELD_NUMBER: _ClassVar[int]
    MAX_ENQUEUED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    NUM_BATCH_THREADS_FIELD_NUMBER: _ClassVar[int]
    THREAD_POOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ENABLE_LARGE_BATCH_SPLITTING_FIELD_NUMBER: _ClassVar[int]
    MAX_EXECUTION_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_BATCH_SIZES_FIELD_NUMBER: _ClassVar[int]
    PAD_VARIABLE_LENGTH_INPUTS_FIELD_NUMBER: _ClassVar[int]
    max_batch_size: _wrappers_pb2.Int64Value
    batch_timeout_micros: _wrappers_pb2.Int64Value
    max_enqueued_batches: _wrappers_pb2.Int64Value
    num_batch_threads: _wrappers_pb2.Int64Value
    thread_pool_name: _wrappers_pb2.StringValue
    enable_large_batch_splitting: _wrappers_pb2.BoolValue
    max_execution_batch_size: _wrappers_pb2.Int64Value
    allowed_batch_sizes: _containers.RepeatedScalarFieldContainer[int]
    pad_variable_length_inputs: bool
    def __init__(self, max_batch_size: _Optional[_Union[_wrappers_pb2.Int64Value, _Mapping]] = ..., batch_timeout_micros: _Optional[_Union[_wrappers_pb2.Int64Value, _Mapping]] = ..., max_enqueued_batches: _Optional[_Union[_wrappers_pb2.Int64Value, _Mapping]] = ..., num_batch_threads: _Optional[_Union[_wrappers_pb2.Int64Value, _Mapping]] = ..., thread_pool_name: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., enable_large_batch_splitting: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., max_execution_batch_size: _Optional[_Union[_wrappers_pb2.Int64Value, _Mapping]] = ..., allowed_batch_sizes: _Optional[_Iterable[int]] = ..., pad_variable_length_inputs: _Optional[bool] = ...) -> None: ...

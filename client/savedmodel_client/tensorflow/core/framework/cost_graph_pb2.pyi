from savedmodel_client.tensorflow.core.framework import tensor_shape_pb2 as _tensor_shape_pb2
from savedmodel_client.tensorflow.core.framework import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CostGraphDef(_message.Message):
    __slots__ = ("node", "cost")
    class Node(_message.Message):
        __slots__ = ("name", "device", "id", "input_info", "output_info", "temporary_memory_size", "persistent_memory_size", "host_temp_memory_size", "device_temp_memory_size", "device_persistent_memory_size", "compute_cost", "compute_time", "memory_time", "is_final", "control_input", "inaccurate")
        class InputInfo(_message.Message):
            __slots__ = ("preceding_node", "preceding_port")
            PRECEDING_NODE_FIELD_NUMBER: _ClassVar[int]
            PRECEDING_PORT_FIELD_NUMBER: _ClassVar[int]
            preceding_node: int
            preceding_port: int
            def __init__(self, preceding_node: _Optional[int] = ..., preceding_port: _Optional[int] = ...) -> None: ...
        class OutputInfo(_message.Message):
            __slots__ = ("size", "alias_input_port", "shape", "dtype")
            SIZE_FIELD_NUMBER: _ClassVar[int]
            ALIAS_INPUT_PORT_FIELD_NUMBER: _ClassVar[int]
            SHAPE_FIELD_NUMBER: _ClassVar[int]
            DTYPE_FIELD_NUMBER: _ClassVar[int]
            size: int
            alias_input_port: int
            shape: _tensor_shape_pb2.TensorShapeProto
            dtype: _types_pb2.DataType
            def __init__(self, size: _Optional[int] = ..., alias_input_port: _Optional[int] = ..., shape: _Optional[_Union[_tensor_shape_pb2.TensorShapeProto, _Mapping]] = ..., dtype: _Optional[_Union[_types_pb2.DataType, str]] = ...) -> None: ...
        NAME_FIELD_NUMBER: _ClassVar[int]
        DEVICE_FIELD_NUMBER: _ClassVar[int]
        ID_FIELD_NUMBER: _ClassVar[int]
        INPUT_INFO_FIELD_NUMBER: _ClassVar[int]
        OUTPUT_INFO_FIELD_NUMBER: _ClassVar[int]
        TEMPORARY_MEMORY_SIZE_FIELD_NUMBER: _ClassVar[int]
        PERSISTENT_MEMORY_SIZE_FIELD_NUMBER: _ClassVar[int]
        HOST_TEMP_MEMORY_SIZE_FIELD_NUMBER: _ClassVar[int]
        DEVICE_TEMP_MEMORY_SIZE_FIELD_NUMBER: _ClassVar[int]
        DEVICE_PERSISTENT_MEMORY_SIZE_FIELD_NUMBER: _ClassVar[int]
        COMPUTE_COST_FIELD_NUMBER: _ClassVar[int]
        COMPUTE_TIME_FIELD_NUMBER: _ClassVar[int]
        MEMORY_TIME_FIELD_NUMBER: _ClassVar[int]
        IS_FINAL_FIELD_NUMBER: _ClassVar[int]
        CONTROL_INPUT_FIELD_NUMBER: _ClassVar[int]
        INACCURATE_FIELD_NUMBER: _ClassVar[int]
        name: str
        device: str
        id: int
        input_info: _containers.RepeatedCompositeFieldContainer[CostGraphDef.Node.InputInfo]
        output_info: _containers.RepeatedCompositeFieldContainer[CostGraphDef.Node.OutputInfo]
        temporary_memory_size: int
        persistent_memory_size: int
        host_temp_memory_size: int
        device_temp_memory_size: int
        device_persistent_memory_size: int
        compute_cost: int
        compute_time: int
        memory_time: int
        is_final: bool
        control_input: _containers.RepeatedScalarFieldContainer[int]
        inaccurate: bool
        def __init__(self, name: _Optional[str] = ..., device: _Optional[str] = ..., id: _Optional[int] = ..., input_info: _Optional[_Iterable[_Union[CostGraphDef.Node.InputInfo, _Mapping]]] = ..., output_info: _Optional[_Iterable[_Union[CostGraphDef.Node.OutputInfo, _Mapping]]] = ..., temporary_memory_size: _Optional[int] = ..., persistent_memory_size: _Optional[int] = ..., host_temp_memory_size: _Optional[int] = ..., device_temp_memory_size: _Optional[int] = ..., device_persistent_memory_size: _Optional[int] = ..., compute_cost: _Optional[int] = ..., compute_time: _Optional[int] = ..., memory_time: _Optional[int] = ..., is_final: _Optional[bool] = ..., control_input: _Optional[_Iterable[int]] = ..., inaccurate: _Optional[bool] = ...) -> None: ...
    class AggregatedCost(_message.Message):
        __slots__ = ("cost", "dimension")
        COST_FIELD_NUMBER: _ClassVar[int]
        DIMENSION_FIELD_NUMBER: _ClassVar[int]
        cost: float
        dimension: str
        def __init__(self, cost: _Optional[float] = ..., dimension: _Optional[str] = ...) -> None: ...
    NODE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    node: _containers.RepeatedCompositeFieldContainer[CostGraphDef.Node]
    cost: _containers.RepeatedCompositeFieldContainer[CostGraphDef.AggregatedCost]
    def __init__(self, node: _Optional[_Iterable[_Union[CostGraphDef.Node, _Mapping]]] = ..., cost: _Optional[_Iterable[_Union[CostGraphDef.AggregatedCost, _Mapping]]] = ...) -> None: ...

from google.protobuf import any_pb2 as _any_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PlatformConfig(_message.Message):
    __slots__ = ("source_adapter_config",)
    SOURCE_ADAPTER_CONFIG_FIELD_NUMBER: _ClassVar[int]
    source_adapter_config: _any_pb2.Any
    def __init__(self, source_adapter_config: _Optional[_Union[_any_pb2.Any, _Mapping]] = ...) -> None: ...

class PlatformConfigMap(_message.Message):
    __slots__ = ("platform_configs",)
    class PlatformConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: PlatformConfig
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[PlatformConfig, _Mapping]] = ...) -> None: ...
    PLATFORM_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    platform_configs: _containers.MessageMap[str, PlatformConfig]
    def __init__(self, platform_configs: _Optional[_Mapping[str, PlatformConfig]] = ...) -> None: ...

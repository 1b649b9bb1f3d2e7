from savedmodel_client.tensorflow.core.protobuf import error_codes_pb2 as _error_codes_pb2
from savedmodel_client.xla.tsl.protobuf import error_codes_pb2 as _error_codes_pb2_1
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StatusProto(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: _error_codes_pb2_1.Code
    error_message: str
    def __init__(self, error_code: _Optional[_Union[_error_codes_pb2_1.Code, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class RPCOptions(_message.Message):
    __slots__ = ("use_rpc_for_inprocess_master", "compression_algorithm", "compression_level", "cache_rpc_response", "disable_session_connection_sharing", "num_channels_per_target")
    USE_RPC_FOR_INPROCESS_MASTER_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    CACHE_RPC_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    DISABLE_SESSION_CONNECTION_SHARING_FIELD_NUMBER: _ClassVar[int]
    NUM_CHANNELS_PER_TARGET_FIELD_NUMBER: _ClassVar[int]
    use_rpc_for_inprocess_master: bool
    compression_algorithm: str
    compression_level: int
    cache_rpc_response: bool
    disable_session_connection_sharing: bool
    num_channels_per_target: int
    def __init__(self, use_rpc_for_inprocess_master: _Optional[bool] = ..., compression_algorithm: _Optional[str] = ..., compression_level: _Optional[int] = ..., cache_rpc_response: _Optional[bool] = ..., disable_session_connection_sharing: _Optional[bool] = ..., num_channels_per_target: _Optional[int] = ...) -> None: ...

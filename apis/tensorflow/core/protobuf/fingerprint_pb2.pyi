from apis.tensorflow.core.framework import versions_pb2 as _versions_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FingerprintDef(_message.Message):
    __slots__ = ("saved_model_checksum", "graph_def_program_hash", "signature_def_hash", "saved_object_graph_hash", "checkpoint_hash", "uuid", "version")
    SAVED_MODEL_CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_PROGRAM_HASH_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_DEF_HASH_FIELD_NUMBER: _ClassVar[int]
    SAVED_OBJECT_GRAPH_HASH_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_HASH_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    saved_model_checksum: int
    graph_def_program_hash: int
    signature_def_hash: int
    saved_object_graph_hash: int
    checkpoint_hash: int
    uuid: str
    version: _versions_pb2.VersionDef
    def __init__(self, saved_model_checksum: _Optional[int] = ..., graph_def_program_hash: _Optional[int] = ..., signature_def_hash: _Optional[int] = ..., saved_object_graph_hash: _Optional[int] = ..., checkpoint_hash: _Optional[int] = ..., uuid: _Optional[str] = ..., version: _Optional[_Union[_versions_pb2.VersionDef, _Mapping]] = ...) -> None: ...

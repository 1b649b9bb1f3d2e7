from savedmodel_client.xla.tsl.protobuf import rpc_options_pb2 as _rpc_options_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar
from savedmodel_client.xla.tsl.protobuf.rpc_options_pb2 import RPCOptions as RPCOptions

DESCRIPTOR: _descriptor.FileDescriptor

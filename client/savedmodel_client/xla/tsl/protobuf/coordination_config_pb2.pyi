from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CoordinatedJob(_message.Message):
    __slots__ = ("name", "num_tasks")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    name: str
    num_tasks: int
    def __init__(self, name: _Optional[str] = ..., num_tasks: _Optional[int] = ...) -> None: ...

class CoordinationServiceConfig(_message.Message):
    __slots__ = ("service_type", "service_leader", "enable_health_check", "cluster_register_timeout_in_ms", "cluster_register_with_barrier", "heartbeat_timeout_in_ms", "coordinated_job_list", "shutdown_barrier_timeout_in_ms", "agent_destruction_without_shutdown", "recoverable_jobs", "allow_new_incarnation_to_reconnect", "force_disable", "poll_for_error_from_service_at_startup")
    SERVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_LEADER_FIELD_NUMBER: _ClassVar[int]
    ENABLE_HEALTH_CHECK_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_REGISTER_TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_REGISTER_WITH_BARRIER_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    COORDINATED_JOB_LIST_FIELD_NUMBER: _ClassVar[int]
    SHUTDOWN_BARRIER_TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    AGENT_DESTRUCTION_WITHOUT_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    RECOVERABLE_JOBS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_NEW_INCARNATION_TO_RECONNECT_FIELD_NUMBER: _ClassVar[int]
    FORCE_DISABLE_FIELD_NUMBER: _ClassVar[int]
    POLL_FOR_ERROR_FROM_SERVICE_AT_STARTUP_FIELD_NUMBER: _ClassVar[int]
    service_type: str
    service_leader: str
    enable_health_check: bool
    cluster_register_timeout_in_ms: int
    cluster_register_with_barrier: bool
    heartbeat_timeout_in_ms: int
    coordinated_job_list: _containers.RepeatedCompositeFieldContainer[CoordinatedJob]
    shutdown_barrier_timeout_in_ms: int
    agent_destruction_without_shutdown: bool
    recoverable_jobs: _containers.RepeatedScalarFieldContainer[str]
    allow_new_incarnation_to_reconnect: bool
    force_disable: bool
    poll_for_error_from_service_at_startup: bool
    def __init__(self, service_type: _Optional[str] = ..., service_leader: _Optional[str] = ..., enable_health_check: _Optional[bool] = ..., cluster_register_timeout_in_ms: _Optional[int] = ..., cluster_register_with_barrier: _Optional[bool] = ..., heartbeat_timeout_in_ms: _Optional[int] = ..., coordinated_job_list: _Optional[_Iterable[_Union[CoordinatedJob, _Mapping]]] = ..., shutdown_barrier_timeout_in_ms: _Optional[int] = ..., agent_destruction_without_shutdown: _Optional[bool] = ..., recoverable_jobs: _Optional[_Iterable[str]] = ..., allow_new_incarnation_to_reconnect: _Optional[bool] = ..., force_disable: _Optional[bool] = ..., poll_for_error_from_service_at_startup: _Optional[bool] = ...) -> None: ...

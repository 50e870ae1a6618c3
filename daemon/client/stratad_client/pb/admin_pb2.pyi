import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BackupRequest(_message.Message):
    __slots__ = ("destination",)
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    destination: str
    def __init__(self, destination: _Optional[str] = ...) -> None: ...

class BackupResponse(_message.Message):
    __slots__ = ("path", "stores", "size_bytes", "taken_at")
    PATH_FIELD_NUMBER: _ClassVar[int]
    STORES_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    TAKEN_AT_FIELD_NUMBER: _ClassVar[int]
    path: str
    stores: _containers.RepeatedScalarFieldContainer[str]
    size_bytes: int
    taken_at: _timestamp_pb2.Timestamp
    def __init__(self, path: _Optional[str] = ..., stores: _Optional[_Iterable[str]] = ..., size_bytes: _Optional[int] = ..., taken_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RebuildRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class RebuildResponse(_message.Message):
    __slots__ = ("episodes", "records_replayed", "vector_points", "graph_edges", "seconds")
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    RECORDS_REPLAYED_FIELD_NUMBER: _ClassVar[int]
    VECTOR_POINTS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_EDGES_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    episodes: int
    records_replayed: int
    vector_points: int
    graph_edges: int
    seconds: float
    def __init__(self, episodes: _Optional[int] = ..., records_replayed: _Optional[int] = ..., vector_points: _Optional[int] = ..., graph_edges: _Optional[int] = ..., seconds: _Optional[float] = ...) -> None: ...

class ExportRequest(_message.Message):
    __slots__ = ("user_id", "agent_id")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    agent_id: str
    def __init__(self, user_id: _Optional[str] = ..., agent_id: _Optional[str] = ...) -> None: ...

class TransferCounts(_message.Message):
    __slots__ = ("records", "bytes")
    class RecordsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    records: _containers.ScalarMap[str, int]
    bytes: int
    def __init__(self, records: _Optional[_Mapping[str, int]] = ..., bytes: _Optional[int] = ...) -> None: ...

class ExportChunk(_message.Message):
    __slots__ = ("data", "progress", "done")
    DATA_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    progress: TransferCounts
    done: bool
    def __init__(self, data: _Optional[bytes] = ..., progress: _Optional[_Union[TransferCounts, _Mapping]] = ..., done: _Optional[bool] = ...) -> None: ...

class ImportChunk(_message.Message):
    __slots__ = ("user_id", "data")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    data: bytes
    def __init__(self, user_id: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class ImportResponse(_message.Message):
    __slots__ = ("user_id", "read", "written", "skipped_forgotten", "sessions_skipped", "source_model", "model", "seconds", "skipped_expired")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FORGOTTEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    SOURCE_MODEL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_EXPIRED_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    read: TransferCounts
    written: TransferCounts
    skipped_forgotten: int
    sessions_skipped: int
    source_model: str
    model: str
    seconds: float
    skipped_expired: int
    def __init__(self, user_id: _Optional[str] = ..., read: _Optional[_Union[TransferCounts, _Mapping]] = ..., written: _Optional[_Union[TransferCounts, _Mapping]] = ..., skipped_forgotten: _Optional[int] = ..., sessions_skipped: _Optional[int] = ..., source_model: _Optional[str] = ..., model: _Optional[str] = ..., seconds: _Optional[float] = ..., skipped_expired: _Optional[int] = ...) -> None: ...

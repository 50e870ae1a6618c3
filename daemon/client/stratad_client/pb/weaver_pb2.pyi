import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from stratad_client.pb import memory_pb2 as _memory_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunNowRequest(_message.Message):
    __slots__ = ("episode_ids", "scope")
    EPISODE_IDS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    episode_ids: _containers.RepeatedScalarFieldContainer[str]
    scope: _memory_pb2.Scope
    def __init__(self, episode_ids: _Optional[_Iterable[str]] = ..., scope: _Optional[_Union[_memory_pb2.Scope, _Mapping]] = ...) -> None: ...

class RunProgress(_message.Message):
    __slots__ = ("run_id", "stage", "done", "total", "episode_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    stage: str
    done: int
    total: int
    episode_id: str
    def __init__(self, run_id: _Optional[str] = ..., stage: _Optional[str] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., episode_id: _Optional[str] = ...) -> None: ...

class RunReport(_message.Message):
    __slots__ = ("run_id", "ok", "episodes", "chunks", "summaries", "facts", "triplets", "superseded", "failures", "fallbacks", "llm_calls", "seconds", "started_at", "finished_at", "error", "profiles", "digests")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    TRIPLETS_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    FALLBACKS_FIELD_NUMBER: _ClassVar[int]
    LLM_CALLS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PROFILES_FIELD_NUMBER: _ClassVar[int]
    DIGESTS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    ok: bool
    episodes: int
    chunks: int
    summaries: int
    facts: int
    triplets: int
    superseded: int
    failures: int
    fallbacks: int
    llm_calls: int
    seconds: float
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    error: str
    profiles: int
    digests: int
    def __init__(self, run_id: _Optional[str] = ..., ok: _Optional[bool] = ..., episodes: _Optional[int] = ..., chunks: _Optional[int] = ..., summaries: _Optional[int] = ..., facts: _Optional[int] = ..., triplets: _Optional[int] = ..., superseded: _Optional[int] = ..., failures: _Optional[int] = ..., fallbacks: _Optional[int] = ..., llm_calls: _Optional[int] = ..., seconds: _Optional[float] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[str] = ..., profiles: _Optional[int] = ..., digests: _Optional[int] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ("progress", "report")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    progress: RunProgress
    report: RunReport
    def __init__(self, progress: _Optional[_Union[RunProgress, _Mapping]] = ..., report: _Optional[_Union[RunReport, _Mapping]] = ...) -> None: ...

class WeaverStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WeaverStatusResponse(_message.Message):
    __slots__ = ("running", "last_run", "next_run", "pending", "unindexed", "last_error", "pending_near_expiry", "extractor", "embedding_model", "embedding_ready", "tier3_error", "workers", "workers_note", "live_sessions_behind", "live_unindexed")
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    UNINDEXED_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    PENDING_NEAR_EXPIRY_FIELD_NUMBER: _ClassVar[int]
    EXTRACTOR_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_MODEL_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_READY_FIELD_NUMBER: _ClassVar[int]
    TIER3_ERROR_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_NOTE_FIELD_NUMBER: _ClassVar[int]
    LIVE_SESSIONS_BEHIND_FIELD_NUMBER: _ClassVar[int]
    LIVE_UNINDEXED_FIELD_NUMBER: _ClassVar[int]
    running: bool
    last_run: RunReport
    next_run: _timestamp_pb2.Timestamp
    pending: int
    unindexed: int
    last_error: str
    pending_near_expiry: int
    extractor: str
    embedding_model: str
    embedding_ready: bool
    tier3_error: str
    workers: _containers.RepeatedCompositeFieldContainer[Worker]
    workers_note: str
    live_sessions_behind: int
    live_unindexed: int
    def __init__(self, running: _Optional[bool] = ..., last_run: _Optional[_Union[RunReport, _Mapping]] = ..., next_run: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending: _Optional[int] = ..., unindexed: _Optional[int] = ..., last_error: _Optional[str] = ..., pending_near_expiry: _Optional[int] = ..., extractor: _Optional[str] = ..., embedding_model: _Optional[str] = ..., embedding_ready: _Optional[bool] = ..., tier3_error: _Optional[str] = ..., workers: _Optional[_Iterable[_Union[Worker, _Mapping]]] = ..., workers_note: _Optional[str] = ..., live_sessions_behind: _Optional[int] = ..., live_unindexed: _Optional[int] = ...) -> None: ...

class Worker(_message.Message):
    __slots__ = ("index", "pid", "alive", "busy", "restarts", "calls", "last_exit")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    LAST_EXIT_FIELD_NUMBER: _ClassVar[int]
    index: int
    pid: int
    alive: bool
    busy: bool
    restarts: int
    calls: int
    last_exit: str
    def __init__(self, index: _Optional[int] = ..., pid: _Optional[int] = ..., alive: _Optional[bool] = ..., busy: _Optional[bool] = ..., restarts: _Optional[int] = ..., calls: _Optional[int] = ..., last_exit: _Optional[str] = ...) -> None: ...

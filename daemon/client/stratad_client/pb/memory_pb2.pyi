import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_USER: _ClassVar[Role]
    ROLE_ASSISTANT: _ClassVar[Role]
    ROLE_SYSTEM: _ClassVar[Role]
    ROLE_TOOL: _ClassVar[Role]

class SessionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_STATE_UNSPECIFIED: _ClassVar[SessionState]
    SESSION_STATE_OPEN: _ClassVar[SessionState]
    SESSION_STATE_ENDED: _ClassVar[SessionState]

class EndReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    END_REASON_UNSPECIFIED: _ClassVar[EndReason]
    END_REASON_CLIENT: _ClassVar[EndReason]
    END_REASON_IDLE: _ClassVar[EndReason]
    END_REASON_CAPACITY: _ClassVar[EndReason]
    END_REASON_ROLLOVER: _ClassVar[EndReason]

class ConsolidationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSOLIDATION_STATE_UNSPECIFIED: _ClassVar[ConsolidationState]
    CONSOLIDATION_STATE_PENDING: _ClassVar[ConsolidationState]
    CONSOLIDATION_STATE_CONSOLIDATED: _ClassVar[ConsolidationState]
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
ROLE_ASSISTANT: Role
ROLE_SYSTEM: Role
ROLE_TOOL: Role
SESSION_STATE_UNSPECIFIED: SessionState
SESSION_STATE_OPEN: SessionState
SESSION_STATE_ENDED: SessionState
END_REASON_UNSPECIFIED: EndReason
END_REASON_CLIENT: EndReason
END_REASON_IDLE: EndReason
END_REASON_CAPACITY: EndReason
END_REASON_ROLLOVER: EndReason
CONSOLIDATION_STATE_UNSPECIFIED: ConsolidationState
CONSOLIDATION_STATE_PENDING: ConsolidationState
CONSOLIDATION_STATE_CONSOLIDATED: ConsolidationState

class Scope(_message.Message):
    __slots__ = ("user_id", "agent_id")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    agent_id: str
    def __init__(self, user_id: _Optional[str] = ..., agent_id: _Optional[str] = ...) -> None: ...

class TimeRange(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: _timestamp_pb2.Timestamp
    end: _timestamp_pb2.Timestamp
    def __init__(self, start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("name", "arguments")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    arguments: str
    def __init__(self, name: _Optional[str] = ..., arguments: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("role", "content", "name", "tool_call", "created_at", "message_id", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    role: Role
    content: str
    name: str
    tool_call: ToolCall
    created_at: _timestamp_pb2.Timestamp
    message_id: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., content: _Optional[str] = ..., name: _Optional[str] = ..., tool_call: _Optional[_Union[ToolCall, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., message_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class StoredMessage(_message.Message):
    __slots__ = ("seq", "message", "received_at", "tokens")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_AT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    seq: int
    message: Message
    received_at: _timestamp_pb2.Timestamp
    tokens: int
    def __init__(self, seq: _Optional[int] = ..., message: _Optional[_Union[Message, _Mapping]] = ..., received_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., tokens: _Optional[int] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("session_id", "scope", "message")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    scope: Scope
    message: Message
    def __init__(self, session_id: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., message: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("seq", "duplicate")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    seq: int
    duplicate: bool
    def __init__(self, seq: _Optional[int] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class AppendBatchRequest(_message.Message):
    __slots__ = ("session_id", "scope", "messages")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    scope: Scope
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, session_id: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class AppendBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AppendResponse]
    def __init__(self, results: _Optional[_Iterable[_Union[AppendResponse, _Mapping]]] = ...) -> None: ...

class GetWorkingMemoryRequest(_message.Message):
    __slots__ = ("session_id", "max_messages", "max_tokens", "scope")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    max_messages: int
    max_tokens: int
    scope: Scope
    def __init__(self, session_id: _Optional[str] = ..., max_messages: _Optional[int] = ..., max_tokens: _Optional[int] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ...) -> None: ...

class GetWorkingMemoryResponse(_message.Message):
    __slots__ = ("session_id", "scope", "state", "messages", "total_tokens", "log_messages")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LOG_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    scope: Scope
    state: SessionState
    messages: _containers.RepeatedCompositeFieldContainer[StoredMessage]
    total_tokens: int
    log_messages: int
    def __init__(self, session_id: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., state: _Optional[_Union[SessionState, str]] = ..., messages: _Optional[_Iterable[_Union[StoredMessage, _Mapping]]] = ..., total_tokens: _Optional[int] = ..., log_messages: _Optional[int] = ...) -> None: ...

class EndSessionRequest(_message.Message):
    __slots__ = ("session_id", "scope")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    scope: Scope
    def __init__(self, session_id: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ...) -> None: ...

class EndSessionResponse(_message.Message):
    __slots__ = ("episode_id", "message_count")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    message_count: int
    def __init__(self, episode_id: _Optional[str] = ..., message_count: _Optional[int] = ...) -> None: ...

class RemoveMessagesRequest(_message.Message):
    __slots__ = ("session_id", "scope", "last", "all")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    scope: Scope
    last: int
    all: bool
    def __init__(self, session_id: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., last: _Optional[int] = ..., all: _Optional[bool] = ...) -> None: ...

class RemoveMessagesResponse(_message.Message):
    __slots__ = ("removed", "log_messages", "state")
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    LOG_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    removed: _containers.RepeatedCompositeFieldContainer[StoredMessage]
    log_messages: int
    state: SessionState
    def __init__(self, removed: _Optional[_Iterable[_Union[StoredMessage, _Mapping]]] = ..., log_messages: _Optional[int] = ..., state: _Optional[_Union[SessionState, str]] = ...) -> None: ...

class Episode(_message.Message):
    __slots__ = ("episode_id", "session_id", "scope", "started_at", "ended_at", "flushed_at", "expires_at", "message_count", "first_seq", "last_seq", "end_reason", "consolidation")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    FLUSHED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    END_REASON_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATION_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    session_id: str
    scope: Scope
    started_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    flushed_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    message_count: int
    first_seq: int
    last_seq: int
    end_reason: EndReason
    consolidation: ConsolidationState
    def __init__(self, episode_id: _Optional[str] = ..., session_id: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., flushed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., message_count: _Optional[int] = ..., first_seq: _Optional[int] = ..., last_seq: _Optional[int] = ..., end_reason: _Optional[_Union[EndReason, str]] = ..., consolidation: _Optional[_Union[ConsolidationState, str]] = ...) -> None: ...

class ListEpisodesRequest(_message.Message):
    __slots__ = ("scope", "time_range", "page_size", "page_token", "newest_first")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TIME_RANGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    scope: Scope
    time_range: TimeRange
    page_size: int
    page_token: str
    newest_first: bool
    def __init__(self, scope: _Optional[_Union[Scope, _Mapping]] = ..., time_range: _Optional[_Union[TimeRange, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., newest_first: _Optional[bool] = ...) -> None: ...

class ListEpisodesResponse(_message.Message):
    __slots__ = ("episodes", "next_page_token")
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    episodes: _containers.RepeatedCompositeFieldContainer[Episode]
    next_page_token: str
    def __init__(self, episodes: _Optional[_Iterable[_Union[Episode, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetEpisodeRequest(_message.Message):
    __slots__ = ("episode_id", "page_size", "page_token")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    page_size: int
    page_token: str
    def __init__(self, episode_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetEpisodeResponse(_message.Message):
    __slots__ = ("episode", "messages", "next_page_token")
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    episode: Episode
    messages: _containers.RepeatedCompositeFieldContainer[StoredMessage]
    next_page_token: str
    def __init__(self, episode: _Optional[_Union[Episode, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[StoredMessage, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WorkingMemoryStats(_message.Message):
    __slots__ = ("live_sessions", "window_messages", "log_messages", "unembedded_messages")
    LIVE_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    LOG_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    UNEMBEDDED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    live_sessions: int
    window_messages: int
    log_messages: int
    unembedded_messages: int
    def __init__(self, live_sessions: _Optional[int] = ..., window_messages: _Optional[int] = ..., log_messages: _Optional[int] = ..., unembedded_messages: _Optional[int] = ...) -> None: ...

class JournalStats(_message.Message):
    __slots__ = ("episodes", "pending_consolidation", "size_bytes", "pending_near_expiry", "unindexed")
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    PENDING_CONSOLIDATION_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PENDING_NEAR_EXPIRY_FIELD_NUMBER: _ClassVar[int]
    UNINDEXED_FIELD_NUMBER: _ClassVar[int]
    episodes: int
    pending_consolidation: int
    size_bytes: int
    pending_near_expiry: int
    unindexed: int
    def __init__(self, episodes: _Optional[int] = ..., pending_consolidation: _Optional[int] = ..., size_bytes: _Optional[int] = ..., pending_near_expiry: _Optional[int] = ..., unindexed: _Optional[int] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("working_memory", "journal", "uptime_seconds", "version", "state_size_bytes", "records")
    class RecordsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    WORKING_MEMORY_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    working_memory: WorkingMemoryStats
    journal: JournalStats
    uptime_seconds: float
    version: str
    state_size_bytes: int
    records: _containers.ScalarMap[str, int]
    def __init__(self, working_memory: _Optional[_Union[WorkingMemoryStats, _Mapping]] = ..., journal: _Optional[_Union[JournalStats, _Mapping]] = ..., uptime_seconds: _Optional[float] = ..., version: _Optional[str] = ..., state_size_bytes: _Optional[int] = ..., records: _Optional[_Mapping[str, int]] = ...) -> None: ...

class Source(_message.Message):
    __slots__ = ("session_id", "message_id", "metadata", "seq", "episode_id", "speaker", "created_at")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    SPEAKER_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    message_id: str
    metadata: _containers.ScalarMap[str, str]
    seq: int
    episode_id: str
    speaker: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, session_id: _Optional[str] = ..., message_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., seq: _Optional[int] = ..., episode_id: _Optional[str] = ..., speaker: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ChannelRank(_message.Message):
    __slots__ = ("channel", "rank", "score", "weight")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    channel: str
    rank: int
    score: float
    weight: float
    def __init__(self, channel: _Optional[str] = ..., rank: _Optional[int] = ..., score: _Optional[float] = ..., weight: _Optional[float] = ...) -> None: ...

class Explanation(_message.Message):
    __slots__ = ("channels", "fused", "superseded_factor", "recency_factor", "merged_ids", "rerank", "rerank_score", "kind_factor", "found_via", "accesses", "importance_factor")
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    FUSED_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FACTOR_FIELD_NUMBER: _ClassVar[int]
    RECENCY_FACTOR_FIELD_NUMBER: _ClassVar[int]
    MERGED_IDS_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    RERANK_SCORE_FIELD_NUMBER: _ClassVar[int]
    KIND_FACTOR_FIELD_NUMBER: _ClassVar[int]
    FOUND_VIA_FIELD_NUMBER: _ClassVar[int]
    ACCESSES_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FACTOR_FIELD_NUMBER: _ClassVar[int]
    channels: _containers.RepeatedCompositeFieldContainer[ChannelRank]
    fused: float
    superseded_factor: float
    recency_factor: float
    merged_ids: _containers.RepeatedScalarFieldContainer[str]
    rerank: str
    rerank_score: float
    kind_factor: float
    found_via: str
    accesses: int
    importance_factor: float
    def __init__(self, channels: _Optional[_Iterable[_Union[ChannelRank, _Mapping]]] = ..., fused: _Optional[float] = ..., superseded_factor: _Optional[float] = ..., recency_factor: _Optional[float] = ..., merged_ids: _Optional[_Iterable[str]] = ..., rerank: _Optional[str] = ..., rerank_score: _Optional[float] = ..., kind_factor: _Optional[float] = ..., found_via: _Optional[str] = ..., accesses: _Optional[int] = ..., importance_factor: _Optional[float] = ...) -> None: ...

class Hit(_message.Message):
    __slots__ = ("id", "kind", "text", "score", "created_at", "sources", "superseded", "valid_from", "valid_to", "episode_id", "session_id", "explanation", "attrs")
    class AttrsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    text: str
    score: float
    created_at: _timestamp_pb2.Timestamp
    sources: _containers.RepeatedCompositeFieldContainer[Source]
    superseded: bool
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    episode_id: str
    session_id: str
    explanation: Explanation
    attrs: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., text: _Optional[str] = ..., score: _Optional[float] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., sources: _Optional[_Iterable[_Union[Source, _Mapping]]] = ..., superseded: _Optional[bool] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., episode_id: _Optional[str] = ..., session_id: _Optional[str] = ..., explanation: _Optional[_Union[Explanation, _Mapping]] = ..., attrs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class StageTiming(_message.Message):
    __slots__ = ("stage", "ms")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    MS_FIELD_NUMBER: _ClassVar[int]
    stage: str
    ms: float
    def __init__(self, stage: _Optional[str] = ..., ms: _Optional[float] = ...) -> None: ...

class RecallRequest(_message.Message):
    __slots__ = ("query", "scope", "k", "kinds", "time_range", "channels", "rerank", "explain", "recipe", "thread", "exclude_session_ids")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    TIME_RANGE_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    RECIPE_FIELD_NUMBER: _ClassVar[int]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    query: str
    scope: Scope
    k: int
    kinds: _containers.RepeatedScalarFieldContainer[str]
    time_range: TimeRange
    channels: _containers.RepeatedScalarFieldContainer[str]
    rerank: str
    explain: bool
    recipe: str
    thread: str
    exclude_session_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, query: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., k: _Optional[int] = ..., kinds: _Optional[_Iterable[str]] = ..., time_range: _Optional[_Union[TimeRange, _Mapping]] = ..., channels: _Optional[_Iterable[str]] = ..., rerank: _Optional[str] = ..., explain: _Optional[bool] = ..., recipe: _Optional[str] = ..., thread: _Optional[str] = ..., exclude_session_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RecallResponse(_message.Message):
    __slots__ = ("hits", "timings", "rerank", "rerank_note", "degraded_channels", "cached")
    HITS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    RERANK_NOTE_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_CHANNELS_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[Hit]
    timings: _containers.RepeatedCompositeFieldContainer[StageTiming]
    rerank: str
    rerank_note: str
    degraded_channels: _containers.RepeatedScalarFieldContainer[str]
    cached: bool
    def __init__(self, hits: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ..., timings: _Optional[_Iterable[_Union[StageTiming, _Mapping]]] = ..., rerank: _Optional[str] = ..., rerank_note: _Optional[str] = ..., degraded_channels: _Optional[_Iterable[str]] = ..., cached: _Optional[bool] = ...) -> None: ...

class PackRequest(_message.Message):
    __slots__ = ("query", "scope", "max_tokens", "per_kind_caps", "time_range", "kinds", "recipe", "thread", "exclude_session_ids")
    class PerKindCapsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    QUERY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PER_KIND_CAPS_FIELD_NUMBER: _ClassVar[int]
    TIME_RANGE_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    RECIPE_FIELD_NUMBER: _ClassVar[int]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    query: str
    scope: Scope
    max_tokens: int
    per_kind_caps: _containers.ScalarMap[str, int]
    time_range: TimeRange
    kinds: _containers.RepeatedScalarFieldContainer[str]
    recipe: str
    thread: str
    exclude_session_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, query: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., max_tokens: _Optional[int] = ..., per_kind_caps: _Optional[_Mapping[str, int]] = ..., time_range: _Optional[_Union[TimeRange, _Mapping]] = ..., kinds: _Optional[_Iterable[str]] = ..., recipe: _Optional[str] = ..., thread: _Optional[str] = ..., exclude_session_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class PackItem(_message.Message):
    __slots__ = ("id", "kind", "text", "tokens", "sources", "created_at", "superseded")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    text: str
    tokens: int
    sources: _containers.RepeatedCompositeFieldContainer[Source]
    created_at: _timestamp_pb2.Timestamp
    superseded: bool
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., text: _Optional[str] = ..., tokens: _Optional[int] = ..., sources: _Optional[_Iterable[_Union[Source, _Mapping]]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., superseded: _Optional[bool] = ...) -> None: ...

class PackResponse(_message.Message):
    __slots__ = ("text", "tokens", "items", "timings", "degraded_channels")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_CHANNELS_FIELD_NUMBER: _ClassVar[int]
    text: str
    tokens: int
    items: _containers.RepeatedCompositeFieldContainer[PackItem]
    timings: _containers.RepeatedCompositeFieldContainer[StageTiming]
    degraded_channels: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, text: _Optional[str] = ..., tokens: _Optional[int] = ..., items: _Optional[_Iterable[_Union[PackItem, _Mapping]]] = ..., timings: _Optional[_Iterable[_Union[StageTiming, _Mapping]]] = ..., degraded_channels: _Optional[_Iterable[str]] = ...) -> None: ...

class GetNodeRequest(_message.Message):
    __slots__ = ("id", "scope")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: Scope
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ...) -> None: ...

class GetNodeResponse(_message.Message):
    __slots__ = ("node", "episode", "messages", "journal_expired", "children", "replaces", "replaced_by")
    NODE_FIELD_NUMBER: _ClassVar[int]
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_EXPIRED_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    REPLACES_FIELD_NUMBER: _ClassVar[int]
    REPLACED_BY_FIELD_NUMBER: _ClassVar[int]
    node: Hit
    episode: Episode
    messages: _containers.RepeatedCompositeFieldContainer[StoredMessage]
    journal_expired: bool
    children: _containers.RepeatedCompositeFieldContainer[Hit]
    replaces: _containers.RepeatedCompositeFieldContainer[Hit]
    replaced_by: _containers.RepeatedCompositeFieldContainer[Hit]
    def __init__(self, node: _Optional[_Union[Hit, _Mapping]] = ..., episode: _Optional[_Union[Episode, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[StoredMessage, _Mapping]]] = ..., journal_expired: _Optional[bool] = ..., children: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ..., replaces: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ..., replaced_by: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ...) -> None: ...

class ForgetRequest(_message.Message):
    __slots__ = ("scope", "episode_ids", "memory_ids")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    EPISODE_IDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    scope: Scope
    episode_ids: _containers.RepeatedScalarFieldContainer[str]
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, scope: _Optional[_Union[Scope, _Mapping]] = ..., episode_ids: _Optional[_Iterable[str]] = ..., memory_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ForgetResponse(_message.Message):
    __slots__ = ("sessions", "session_messages", "episodes", "episode_messages", "consolidation_records", "vector_points", "graph_edges", "graph_nodes", "cache_entries", "facts_restored", "documents", "anchors", "pins", "access_counts")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    SESSION_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    EPISODE_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATION_RECORDS_FIELD_NUMBER: _ClassVar[int]
    VECTOR_POINTS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_EDGES_FIELD_NUMBER: _ClassVar[int]
    GRAPH_NODES_FIELD_NUMBER: _ClassVar[int]
    CACHE_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    FACTS_RESTORED_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    ANCHORS_FIELD_NUMBER: _ClassVar[int]
    PINS_FIELD_NUMBER: _ClassVar[int]
    ACCESS_COUNTS_FIELD_NUMBER: _ClassVar[int]
    sessions: int
    session_messages: int
    episodes: int
    episode_messages: int
    consolidation_records: int
    vector_points: int
    graph_edges: int
    graph_nodes: int
    cache_entries: int
    facts_restored: int
    documents: int
    anchors: int
    pins: int
    access_counts: int
    def __init__(self, sessions: _Optional[int] = ..., session_messages: _Optional[int] = ..., episodes: _Optional[int] = ..., episode_messages: _Optional[int] = ..., consolidation_records: _Optional[int] = ..., vector_points: _Optional[int] = ..., graph_edges: _Optional[int] = ..., graph_nodes: _Optional[int] = ..., cache_entries: _Optional[int] = ..., facts_restored: _Optional[int] = ..., documents: _Optional[int] = ..., anchors: _Optional[int] = ..., pins: _Optional[int] = ..., access_counts: _Optional[int] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("scope", "namespace", "key", "text", "value", "created_at", "updated_at", "id")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    scope: Scope
    namespace: _containers.RepeatedScalarFieldContainer[str]
    key: str
    text: str
    value: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    id: str
    def __init__(self, scope: _Optional[_Union[Scope, _Mapping]] = ..., namespace: _Optional[_Iterable[str]] = ..., key: _Optional[str] = ..., text: _Optional[str] = ..., value: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[str] = ...) -> None: ...

class PutDocumentRequest(_message.Message):
    __slots__ = ("scope", "namespace", "key", "text", "value")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    scope: Scope
    namespace: _containers.RepeatedScalarFieldContainer[str]
    key: str
    text: str
    value: str
    def __init__(self, scope: _Optional[_Union[Scope, _Mapping]] = ..., namespace: _Optional[_Iterable[str]] = ..., key: _Optional[str] = ..., text: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class PutDocumentResponse(_message.Message):
    __slots__ = ("document", "created")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    document: Document
    created: bool
    def __init__(self, document: _Optional[_Union[Document, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class GetDocumentRequest(_message.Message):
    __slots__ = ("scope", "namespace", "key")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    scope: Scope
    namespace: _containers.RepeatedScalarFieldContainer[str]
    key: str
    def __init__(self, scope: _Optional[_Union[Scope, _Mapping]] = ..., namespace: _Optional[_Iterable[str]] = ..., key: _Optional[str] = ...) -> None: ...

class GetDocumentResponse(_message.Message):
    __slots__ = ("document",)
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    document: Document
    def __init__(self, document: _Optional[_Union[Document, _Mapping]] = ...) -> None: ...

class DeleteDocumentRequest(_message.Message):
    __slots__ = ("scope", "namespace", "key")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    scope: Scope
    namespace: _containers.RepeatedScalarFieldContainer[str]
    key: str
    def __init__(self, scope: _Optional[_Union[Scope, _Mapping]] = ..., namespace: _Optional[_Iterable[str]] = ..., key: _Optional[str] = ...) -> None: ...

class DeleteDocumentResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...

class ListDocumentsRequest(_message.Message):
    __slots__ = ("scope", "namespace_prefix", "page_size", "page_token")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scope: Scope
    namespace_prefix: _containers.RepeatedScalarFieldContainer[str]
    page_size: int
    page_token: str
    def __init__(self, scope: _Optional[_Union[Scope, _Mapping]] = ..., namespace_prefix: _Optional[_Iterable[str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListDocumentsResponse(_message.Message):
    __slots__ = ("documents", "next_page_token")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    next_page_token: str
    def __init__(self, documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SessionAnchor(_message.Message):
    __slots__ = ("session_id", "scope", "text", "updated_at")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    scope: Scope
    text: str
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, session_id: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., text: _Optional[str] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SetAnchorRequest(_message.Message):
    __slots__ = ("session_id", "scope", "text")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    scope: Scope
    text: str
    def __init__(self, session_id: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., text: _Optional[str] = ...) -> None: ...

class SetAnchorResponse(_message.Message):
    __slots__ = ("anchor", "replaced")
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    anchor: SessionAnchor
    replaced: bool
    def __init__(self, anchor: _Optional[_Union[SessionAnchor, _Mapping]] = ..., replaced: _Optional[bool] = ...) -> None: ...

class GetAnchorRequest(_message.Message):
    __slots__ = ("session_id", "scope")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    scope: Scope
    def __init__(self, session_id: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ...) -> None: ...

class GetAnchorResponse(_message.Message):
    __slots__ = ("anchor",)
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    anchor: SessionAnchor
    def __init__(self, anchor: _Optional[_Union[SessionAnchor, _Mapping]] = ...) -> None: ...

class PinMemoryRequest(_message.Message):
    __slots__ = ("scope", "memory_id", "pinned")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    scope: Scope
    memory_id: str
    pinned: bool
    def __init__(self, scope: _Optional[_Union[Scope, _Mapping]] = ..., memory_id: _Optional[str] = ..., pinned: _Optional[bool] = ...) -> None: ...

class PinMemoryResponse(_message.Message):
    __slots__ = ("pinned", "changed")
    PINNED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    pinned: bool
    changed: bool
    def __init__(self, pinned: _Optional[bool] = ..., changed: _Optional[bool] = ...) -> None: ...

class GetContextRequest(_message.Message):
    __slots__ = ("session_id", "max_tokens", "query", "scope", "per_kind_caps", "window_share", "kinds", "recipe", "explain", "story")
    class PerKindCapsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PER_KIND_CAPS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SHARE_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    RECIPE_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    STORY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    max_tokens: int
    query: str
    scope: Scope
    per_kind_caps: _containers.ScalarMap[str, int]
    window_share: float
    kinds: _containers.RepeatedScalarFieldContainer[str]
    recipe: str
    explain: bool
    story: bool
    def __init__(self, session_id: _Optional[str] = ..., max_tokens: _Optional[int] = ..., query: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., per_kind_caps: _Optional[_Mapping[str, int]] = ..., window_share: _Optional[float] = ..., kinds: _Optional[_Iterable[str]] = ..., recipe: _Optional[str] = ..., explain: _Optional[bool] = ..., story: _Optional[bool] = ...) -> None: ...

class ContextItem(_message.Message):
    __slots__ = ("id", "kind", "text", "tokens", "sources", "created_at", "superseded", "pinned", "why", "explanation")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    text: str
    tokens: int
    sources: _containers.RepeatedCompositeFieldContainer[Source]
    created_at: _timestamp_pb2.Timestamp
    superseded: bool
    pinned: bool
    why: str
    explanation: Explanation
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., text: _Optional[str] = ..., tokens: _Optional[int] = ..., sources: _Optional[_Iterable[_Union[Source, _Mapping]]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., superseded: _Optional[bool] = ..., pinned: _Optional[bool] = ..., why: _Optional[str] = ..., explanation: _Optional[_Union[Explanation, _Mapping]] = ...) -> None: ...

class ContextDrop(_message.Message):
    __slots__ = ("id", "kind", "tokens", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    tokens: int
    reason: str
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., tokens: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class GetContextResponse(_message.Message):
    __slots__ = ("text", "tokens", "messages", "memories", "query", "anchor", "state", "dropped", "scope", "degraded_channels", "timings")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_CHANNELS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    text: str
    tokens: int
    messages: _containers.RepeatedCompositeFieldContainer[StoredMessage]
    memories: _containers.RepeatedCompositeFieldContainer[ContextItem]
    query: str
    anchor: SessionAnchor
    state: SessionState
    dropped: _containers.RepeatedCompositeFieldContainer[ContextDrop]
    scope: Scope
    degraded_channels: _containers.RepeatedScalarFieldContainer[str]
    timings: _containers.RepeatedCompositeFieldContainer[StageTiming]
    def __init__(self, text: _Optional[str] = ..., tokens: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[StoredMessage, _Mapping]]] = ..., memories: _Optional[_Iterable[_Union[ContextItem, _Mapping]]] = ..., query: _Optional[str] = ..., anchor: _Optional[_Union[SessionAnchor, _Mapping]] = ..., state: _Optional[_Union[SessionState, str]] = ..., dropped: _Optional[_Iterable[_Union[ContextDrop, _Mapping]]] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., degraded_channels: _Optional[_Iterable[str]] = ..., timings: _Optional[_Iterable[_Union[StageTiming, _Mapping]]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("scope", "cursor", "from_oldest", "types", "catch_up")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    FROM_OLDEST_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_FIELD_NUMBER: _ClassVar[int]
    scope: Scope
    cursor: str
    from_oldest: bool
    types: _containers.RepeatedScalarFieldContainer[str]
    catch_up: bool
    def __init__(self, scope: _Optional[_Union[Scope, _Mapping]] = ..., cursor: _Optional[str] = ..., from_oldest: _Optional[bool] = ..., types: _Optional[_Iterable[str]] = ..., catch_up: _Optional[bool] = ...) -> None: ...

class ChangeEvent(_message.Message):
    __slots__ = ("cursor", "type", "scope", "at", "session_id", "episode_id", "memory_id", "count", "attrs")
    class AttrsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    type: str
    scope: Scope
    at: _timestamp_pb2.Timestamp
    session_id: str
    episode_id: str
    memory_id: str
    count: int
    attrs: _containers.ScalarMap[str, str]
    def __init__(self, cursor: _Optional[str] = ..., type: _Optional[str] = ..., scope: _Optional[_Union[Scope, _Mapping]] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., session_id: _Optional[str] = ..., episode_id: _Optional[str] = ..., memory_id: _Optional[str] = ..., count: _Optional[int] = ..., attrs: _Optional[_Mapping[str, str]] = ...) -> None: ...

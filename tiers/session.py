"""A working-memory session: its record in the state store and its window, and the values
:class:`tiers.working.WorkingMemory` takes and returns.

A session's meta (``sessions`` column family) holds its scope, generation, next seq, log
length, last activity and whether it is open; its log and idempotency keys
(``log``, ``msgids``) start with :func:`key_prefix`. The window is in memory only: the newest
messages within :class:`WindowLimits`, rebuilt from the log at start-up.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tiers.records import Message, Scope, StoredMessage, pack, unpack
from tiers.tokens import count_tokens


@dataclass(frozen=True, slots=True)
class WindowLimits:
    max_messages: int = 50
    max_tokens: int = 4000
    idle_timeout_seconds: float = 1800.0
    max_sessions: int = 10_000
    max_log_messages: int = 2000


@dataclass(frozen=True, slots=True)
class AppendResult:
    seq: int
    duplicate: bool


@dataclass(frozen=True, slots=True)
class EndResult:
    session_id: str
    episode_id: str
    message_count: int
    reason: str


@dataclass(frozen=True, slots=True)
class WindowView:
    session_id: str
    scope: Scope
    open: bool
    messages: list[StoredMessage]
    total_tokens: int
    log_messages: int


@dataclass(frozen=True, slots=True)
class WorkingMemoryStats:
    live_sessions: int
    window_messages: int
    log_messages: int


@dataclass(slots=True)
class Session:
    session_id: str
    scope: Scope
    generation: int
    next_seq: int  # the seq the next message gets
    log_count: int  # messages in the open log
    last_active_us: int
    window: deque[StoredMessage] = field(default_factory=deque)
    window_tokens: int = 0

    def meta(self, is_open: bool) -> bytes:
        return pack(
            {
                "u": self.scope.user_id,
                "a": self.scope.agent_id,
                "g": self.generation,
                "n": self.next_seq,
                "c": self.log_count,
                "t": self.last_active_us,
                "o": is_open,
            }
        )

    @classmethod
    def from_meta(cls, session_id: str, raw: bytes) -> tuple[Session, bool]:
        d = unpack(raw)
        session = cls(session_id, Scope(d["u"], d["a"]), d["g"], d["n"], d["c"], d["t"])
        return session, d["o"]

    def push(self, message: StoredMessage, limits: WindowLimits) -> None:
        self.window.append(message)
        self.window_tokens += message.tokens
        while len(self.window) > 1 and (
            len(self.window) > limits.max_messages or self.window_tokens > limits.max_tokens
        ):
            self.window_tokens -= self.window.popleft().tokens


def key_prefix(session_id: str) -> bytes:
    """The prefix of a session's keys in the ``log`` and ``msgids`` column families."""
    return session_id.encode() + b"\x00"


def message_tokens(message: Message) -> int:
    tokens = count_tokens(message.content)
    if message.tool_call is not None:
        tokens += count_tokens(message.tool_call.name) + count_tokens(message.tool_call.arguments)
    return tokens

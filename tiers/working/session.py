"""A working-memory session: its record in the state store and its window, and the values
:class:`tiers.working.memory.WorkingMemory` takes and returns.

A session is named by its user and its session id (:class:`SessionKey`): the same session id
under two users is two sessions. Its meta (``sessions`` column family, key
:meth:`SessionKey.key`) holds its scope, generation, next seq, log length, last activity and
whether it is open; its log and idempotency keys (``log``, ``msgids``) start with
:meth:`SessionKey.prefix`. The window is in memory only: the newest messages within
:class:`WindowLimits`, rebuilt from the log at start-up.

Keys start with ``0x01``, then the session id, a NUL and the user id, so the users of one
session id are one prefix scan away (ids contain no control characters). Stores written before
sessions were per user keyed them by the session id alone; :mod:`tiers.working.migration`
moves them at start-up, and their sessions keep deriving episode ids the old way
(``legacy_ids``), so an interrupted flush is finished under the id it began with.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field

from tiers.core.records import Message, Scope, StoredMessage, episode_id_for, pack, unpack
from tiers.core.tokens import count_tokens
from tiers.rocks import RocksStore

SESSIONS_CF = "sessions"
OPEN_CF = "open"
LOG_CF = "log"
MSGIDS_CF = "msgids"
# The sessions by user (``user_id 0x00 session_id``, empty values), so that one user's are
# found without reading every user's metas; the key ``b""`` says it is complete.
SESSION_OWNERS_CF = "session_owners"
WORKING_CFS = (SESSIONS_CF, OPEN_CF, LOG_CF, MSGIDS_CF, SESSION_OWNERS_CF)  # tiers.schema
OWNERS_BUILT = b""


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
class RemoveResult:
    """What :meth:`tiers.working.memory.WorkingMemory.remove_last` took out of a session."""

    removed: list[StoredMessage]  # oldest first
    log_messages: int  # left in the open session's log
    open: bool  # False: the session is not open (it ended, or is now empty and closed)
    # Settled once the removed messages' Tier 3 points are deleted (the live index stage's
    # MessagesRemoved handler); None when nothing indexes live sessions.
    settled: Future[None] | None = None


@dataclass(frozen=True, slots=True)
class SessionKey:
    """A session's identity: its user and its session id."""

    user_id: str
    session_id: str

    def key(self) -> bytes:
        """The key of its meta (``sessions``) and its open mark (``open``)."""
        return users_prefix(self.session_id) + self.user_id.encode()

    def prefix(self) -> bytes:
        """The prefix of its keys in the ``log`` and ``msgids`` column families."""
        return self.key() + b"\x00"

    @classmethod
    def parse(cls, key: bytes) -> SessionKey:
        session_id, _, user_id = key[1:].partition(b"\x00")
        return cls(user_id.decode(), session_id.decode())


def owner_key(ref: SessionKey) -> bytes:
    """The session's entry in ``session_owners``: written with its first meta (an append
    that opens it, an import, the move of an old layout), never deleted, as its meta."""
    return ref.user_id.encode() + b"\x00" + ref.session_id.encode()


def sessions_of(state: RocksStore, user_id: str) -> list[SessionKey]:
    """The sessions of ``user_id`` (open and ended), in session id order."""
    prefix = user_id.encode() + b"\x00"
    return [
        SessionKey(user_id, key[len(prefix) :].decode())
        for key, _ in state.scan_prefix(SESSION_OWNERS_CF, prefix)
    ]


def users_prefix(session_id: str) -> bytes:
    """The prefix of the keys of every user's session named ``session_id``."""
    return b"\x01" + session_id.encode() + b"\x00"


@dataclass(frozen=True, slots=True)
class EndResult:
    session_id: str
    episode_id: str
    message_count: int
    reason: str
    user_id: str = ""


@dataclass(frozen=True, slots=True)
class LiveSession:
    """One generation of a live session, as the live index stage names it: its points carry
    ``episode_id``, the id of the episode it becomes when it ends."""

    scope: Scope
    session_id: str
    episode_id: str


@dataclass(frozen=True, slots=True)
class MessagesAppended:
    """Event of :attr:`tiers.working.memory.WorkingMemory.events`: messages up to
    ``last_seq`` are durable in a live session's log (published under the working-memory
    lock: a handler only takes note)."""

    session: LiveSession
    last_seq: int


@dataclass(frozen=True, slots=True)
class MessagesRemoved:
    """Event of :attr:`tiers.working.memory.WorkingMemory.events`: RemoveMessages took these
    seqs out of a live session's log (published under the working-memory lock)."""

    session: LiveSession
    seqs: tuple[int, ...]
    settled: Future[None]  # set by the handler once the messages' points are deleted


@dataclass(frozen=True, slots=True)
class SessionFlushed:
    """Event of :attr:`tiers.working.memory.WorkingMemory.events`: a session ended and its log
    is an episode in the journal (published under the working-memory lock)."""

    result: EndResult


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
    legacy_ids: bool = False  # written before per-user sessions: episode ids without the user

    @property
    def ref(self) -> SessionKey:
        return SessionKey(self.scope.user_id, self.session_id)

    def episode_id(self) -> str:
        """The id its current generation's episode gets (the same after a crash)."""
        user = None if self.legacy_ids else self.scope.user_id
        return episode_id_for(self.session_id, self.generation, user)

    def live(self) -> LiveSession:
        return LiveSession(self.scope, self.session_id, self.episode_id())

    def meta(self, is_open: bool) -> bytes:
        doc = {
            "u": self.scope.user_id,
            "a": self.scope.agent_id,
            "g": self.generation,
            "n": self.next_seq,
            "c": self.log_count,
            "t": self.last_active_us,
            "o": is_open,
        }
        if self.legacy_ids:
            doc["k"] = 1
        return pack(doc)

    @classmethod
    def from_meta(cls, session_id: str, raw: bytes) -> tuple[Session, bool]:
        d = unpack(raw)
        session = cls(session_id, Scope(d["u"], d["a"]), d["g"], d["n"], d["c"], d["t"])
        session.legacy_ids = bool(d.get("k"))
        return session, d["o"]

    def push(self, message: StoredMessage, limits: WindowLimits) -> None:
        self.window.append(message)
        self.window_tokens += message.tokens
        while len(self.window) > 1 and (
            len(self.window) > limits.max_messages or self.window_tokens > limits.max_tokens
        ):
            self.window_tokens -= self.window.popleft().tokens


def message_tokens(message: Message) -> int:
    tokens = count_tokens(message.content)
    if message.tool_call is not None:
        tokens += count_tokens(message.tool_call.name) + count_tokens(message.tool_call.arguments)
    return tokens


def mismatch(session_id: str) -> str:
    """The message of an append whose scope is not its session's."""
    return f"scope differs from the scope of session {session_id!r}, which its first message fixed"

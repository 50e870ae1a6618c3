"""``MemoryService.Watch``: the changes of a user's memory as the change log
(:mod:`tiers.changes.log`) records them, from a cursor, the stream open until the client
leaves or the daemon stops.

A stream reads a page of changes at a time (a short RocksDB scan, on the event loop) and
writes them one by one, so a slow client holds one page, no more: gRPC's flow control holds
the stream while the client does not read. A stream with nothing to send waits on
:class:`ChangeFeed`, which the change log wakes (on the writer's thread) when changes of the
stream's user become visible; no thread waits for it. When the daemon stops,
:meth:`ChangeFeed.close` ends every stream with UNAVAILABLE (resume from the last cursor)
instead of holding the shutdown for its grace. A client that falls so far behind that
retention removed changes after its cursor gets OUT_OF_RANGE
(:class:`tiers.changes.log.CursorExpired`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass

import grpc

from daemon.codec import convert
from daemon.codec import validation as check
from daemon.codec.status import InvalidArgument, Unavailable, rpc_stream
from daemon.services import tenancy
from daemon.settings.sections import LimitsSettings
from stratad_client.pb import memory_pb2 as pb
from tiers.changes.log import ChangeLog, ChangesVisible, Entry
from tiers.core.records import Scope

PAGE = 256  # changes read at a time
IDLE_SECONDS = 30.0  # a waiting stream looks again at least this often
_NAMED = ("session_id", "episode_id", "memory_id", "count")


@dataclass(frozen=True, slots=True)
class Ticket:
    """:meth:`ChangeFeed.listen`'s: :meth:`wait` returns once woken (or after a timeout)."""

    loop: asyncio.AbstractEventLoop
    event: asyncio.Event

    async def wait(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.event.wait(), timeout)


class ChangeFeed:
    """Wakes the streams waiting for a user's changes (on their event loops) when the change
    log has new ones of that user visible; :meth:`close` ends them all."""

    def __init__(self, changes: ChangeLog) -> None:
        self.changes = changes
        self._lock = threading.Lock()
        self._waiting: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self.closed = False
        self._unsubscribe = changes.events.subscribe(ChangesVisible, lambda e: self._wake(e.users))

    def _wake(self, users: Iterable[str] | None) -> None:
        """Wake the streams of ``users`` (None: every stream)."""
        with self._lock:
            chosen = self._waiting.keys() if users is None else users
            waiting = [w for user in chosen for w in self._waiting.get(user, ())]
        for loop, event in waiting:
            with contextlib.suppress(RuntimeError):  # its loop has closed: the stream is gone
                loop.call_soon_threadsafe(event.set)

    @contextlib.contextmanager
    def listen(self, user_id: str) -> Iterator[Ticket]:
        """A ticket that wakes when a change of ``user_id`` becomes visible from now on (or
        the feed closes): take it before reading, so that no change slips between the read
        and the wait."""
        ticket = Ticket(asyncio.get_running_loop(), asyncio.Event())
        entry = (ticket.loop, ticket.event)
        with self._lock:
            self._waiting.setdefault(user_id, set()).add(entry)
        if self.closed:
            ticket.event.set()
        try:
            yield ticket
        finally:
            with self._lock:
                left = self._waiting.get(user_id, set())
                left.discard(entry)
                if not left:
                    self._waiting.pop(user_id, None)

    @property
    def waiting(self) -> int:
        """How many streams wait now."""
        with self._lock:
            return sum(len(w) for w in self._waiting.values())

    def close(self) -> None:
        """End every stream (they end with UNAVAILABLE); idempotent."""
        self.closed = True
        self._unsubscribe()
        self._wake(None)


class WatchRpcs:
    """Watch."""

    def __init__(self, feed: ChangeFeed, limits: LimitsSettings) -> None:
        self._feed = feed
        self._changes = feed.changes
        self._limits = limits

    @rpc_stream
    async def Watch(
        self, request: pb.WatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ChangeEvent]:
        scope = tenancy.user_scope(
            check.scope(request.scope, self._limits), "Watch follows one user"
        )
        types = self._changes.types  # the tiers' and every kind's (tiers.schema.change_types)
        unknown = sorted(set(request.types) - set(types))
        if unknown:
            raise InvalidArgument(
                f"types: unknown change type {unknown[0]!r} (one of {', '.join(types)})"
            )
        wanted = set(request.types)
        after = self._start(scope, request)
        while True:
            with self._feed.listen(scope.user_id) as ticket:  # before the read: no change slips by
                # On the event loop, as an Append's write is: a page is a short scan, and a
                # worker thread's hand-off for each wake costs the appends more (benchmarks).
                page = self._changes.page(scope, after, PAGE)
                for entry in page.entries:
                    if not wanted or entry.change.type in wanted:
                        yield event_pb(entry)
                after = page.upto  # other users' changes are not read again
                if len(page.entries) == PAGE:
                    continue
                if request.catch_up:
                    return
                if self._feed.closed:
                    raise Unavailable(f"the daemon is stopping; watch again from cursor {after}")
                await ticket.wait(IDLE_SECONDS)

    def _start(self, scope: Scope, request: pb.WatchRequest) -> int:
        """The seq the stream reads after."""
        if not request.cursor:
            return self._changes.oldest(scope) if request.from_oldest else self._changes.visible
        if request.from_oldest:
            raise InvalidArgument("from_oldest is for a watch without a cursor")
        cursor = request.cursor
        if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 20:
            raise InvalidArgument(f"cursor {request.cursor[:40]!r} is not a Watch cursor")
        return int(request.cursor)


def event_pb(entry: Entry) -> pb.ChangeEvent:
    change = entry.change
    attrs = change.attrs
    event = pb.ChangeEvent(
        cursor=str(entry.seq),
        type=change.type,
        scope=convert.scope(change.scope),
        at=convert.timestamp(entry.at_us),
        session_id=str(attrs.get("session_id", "")),
        episode_id=str(attrs.get("episode_id", "")),
        memory_id=str(attrs.get("memory_id", "")),
        count=int(attrs.get("count", 0)),
    )
    for key, value in attrs.items():
        if key not in _NAMED:
            event.attrs[key] = _text(value)
    return event


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return json.dumps(list(value))  # a namespace: its labels, exactly
    return str(value)

"""The live index stage: a live session's messages recallable while the session lives.

Two speeds, both off the append path (an Append is one durable write):

1. **Staged, by its words, at once.** The stage's thread (:class:`weaver.jobs.live.LiveStage`)
   takes note of every append (:class:`~tiers.working.session.MessagesAppended`) and stages
   each new message's ``episode_turn`` point in Tier 3's pending points
   (:meth:`SemanticStore.stage`): the keyword channel finds it within milliseconds, before any
   model has run.
2. **Embedded, by its meaning, in small batches.** When ``weaver.live_batch_messages``
   messages of a session wait, or the oldest has waited ``weaver.live_batch_seconds``, the
   weaver's worker runs :meth:`LiveIndexer.index` (job ``IndexLive``): the new turns and the
   chunk windows whose turns all exist (:func:`weaver.episodes.windows`, not final) are
   embedded and written, replacing the staged points by the same ids, and the session's
   mark (:mod:`tiers.working.progress`) says how far it got.

Points carry the episode id the session gets when it ends, and their ids follow from scope,
session, seq and text, as the ended episode's do: when the session ends, the index of its
episode resumes after the mark (:meth:`weaver.index.Indexer.episode_points`), so nothing is
embedded twice and nothing is written twice; after a restart the stage stages again what is
past each mark and embeds it, by the same ids.

RemoveMessages (:class:`~tiers.working.session.MessagesRemoved`): the removed messages are
unstaged at once, and their stored points (turns, and chunks holding one) deleted and the
mark moved back before the RPC answers (:meth:`LiveIndexer.remove`); a crash before that is
made good at the next start (:meth:`LiveIndexer.recover`). Forget drops the live sessions of
its scope, tombstones their episodes and deletes their points, staged ones too. A batch
writes under :attr:`SemanticStore.write_lock` after checking that its messages are still as
it read them; staging takes no write lock (a consolidation step may hold it for a while):
it checks the same, and the tombstones, under the pending points' own lock, which Forget's
delete takes after writing its tombstones. So nothing removed or forgotten comes back.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tiers.core.records import StoredMessage
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint, PointFilter
from tiers.working.memory import WorkingMemory
from tiers.working.progress import LiveProgress, Progress
from tiers.working.session import LiveSession
from weaver.episodes import turns_of, windows
from weaver.extractors import EpisodeInput
from weaver.index import Indexer, first_at

# Messages of one session staged, or embedded, in one step at most (a job stays short).
STEP_MESSAGES = 128
# Texts one IndexLive job embeds at most (one call): sessions beyond wait for the next job.
STEP_TEXTS = 512
_ALL = 10_000_000


@dataclass(slots=True)
class _Live:
    """What the stage knows of one live session's generation (by its episode id)."""

    session: LiveSession
    last: int = 0  # the newest seq appended
    staged: int = 0  # the newest seq staged (or embedded)
    embedded: int = 0  # the newest seq embedded (its mark's turns_through)
    waiting_since: float | None = None  # when the oldest message not embedded was staged
    queued: bool = False  # an IndexLive job for it is in line
    removals: int = 0  # RemoveMessages so far: a step that read before one does not write


@dataclass(slots=True)
class _Step:
    """One live session's part of an IndexLive job."""

    session: LiveSession
    removals: int
    after: int  # the seq it read after
    limit: int
    seqs: list[int]  # the seqs it read
    points: list[MemoryPoint]
    moved: Progress  # the session's mark once they are written
    live: bool = True


@dataclass(frozen=True, slots=True)
class LiveBacklog:
    """Live sessions with messages not embedded yet, and those messages."""

    sessions: int
    messages: int


@dataclass(frozen=True, slots=True)
class LiveIndexResult:
    sessions: int
    points: int


@dataclass(frozen=True, eq=False, slots=True)
class LiveIndexer:
    """The live stage's state and steps. :meth:`appended`, :meth:`removed`, :meth:`ended` are
    called under the working memory's lock and only take note; :meth:`stage`,
    :meth:`remove` and :meth:`recover` run on the stage's thread, :meth:`index` on the
    weaver's worker. Raises what Tier 3 raises (EmbeddingUnavailable,
    VectorStoreUnavailable) and StoreUnavailable."""

    working: WorkingMemory
    progress: LiveProgress
    semantic: SemanticStore
    indexer: Indexer
    batch_messages: int
    batch_seconds: float
    clock: Callable[[], float] = time.monotonic
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _sessions: dict[str, _Live] = field(init=False, default_factory=dict)

    # -- taking note (any thread) ---------------------------------------------------------
    def appended(self, session: LiveSession, last_seq: int) -> None:
        with self._lock:
            live = self._sessions.setdefault(session.episode_id, _Live(session))
            live.last = max(live.last, last_seq)

    def removed(self, session: LiveSession, seqs: tuple[int, ...]) -> None:
        """Unstage the removed messages at once (their stored points: :meth:`remove`)."""
        gone = set(seqs)
        with self._lock:  # first: a staging step that read them now stages nothing
            live = self._sessions.get(session.episode_id)
            if live is not None:  # RemoveMessages takes the newest messages
                live.removals += 1
                live.staged = min(live.staged, min(gone) - 1)
                live.last = min(live.last, min(gone) - 1)
        flt = PointFilter(user_id=session.scope.user_id, episode_ids=(session.episode_id,))
        staged = self.semantic.pending.points(flt)
        self.semantic.pending.discard(p.id for p in staged if _holds(p, gone))

    def ended(self, episode_id: str) -> None:
        """The session ended (its episode's index does the rest)."""
        with self._lock:
            self._sessions.pop(episode_id, None)

    def backlog(self) -> LiveBacklog:
        with self._lock:
            behind = [v.last - v.embedded for v in self._sessions.values() if v.last > v.embedded]
        return LiveBacklog(len(behind), sum(behind))

    def due(self) -> tuple[list[str], float | None]:
        """The sessions whose batch is due now (each marked queued), and in how many seconds
        the next one falls due (None: none waits)."""
        now = self.clock()
        ready: list[str] = []
        soonest: float | None = None
        with self._lock:
            for episode_id, live in self._sessions.items():
                if live.queued or live.waiting_since is None or live.staged <= live.embedded:
                    continue
                left = live.waiting_since + self.batch_seconds - now
                if live.staged - live.embedded >= self.batch_messages or left <= 0:
                    live.queued = True
                    ready.append(episode_id)
                elif soonest is None or left < soonest:
                    soonest = left
        return ready, soonest

    def to_stage(self) -> bool:
        with self._lock:
            return any(v.staged < v.last for v in self._sessions.values())

    # -- the stage's thread -----------------------------------------------------------------
    def recover(self) -> None:
        """At start, once Tier 3 is open: every live session from its mark (what is past it
        is staged and embedded again, by the same ids), and the stored points of messages
        removed before a crash deleted."""
        for session in self.working.live_sessions():
            present = self.working.live(session, 0, _ALL)
            if not present:
                continue
            mark = self.progress.get(session.episode_id)
            if mark is not None:
                have = {m.seq for m in present}
                newest = max(present[-1].seq, mark.turns_through)
                gone = set(range(present[0].seq, newest + 1)) - have
                if gone:
                    with self.semantic.write_lock:
                        self._delete_stored(session, gone)
                    mark = self.progress.get(session.episode_id)
            done = present[0].seq - 1 if mark is None else mark.turns_through
            with self._lock:
                live = self._sessions.setdefault(session.episode_id, _Live(session))
                live.staged = live.embedded = done
                live.last = max(live.last, present[-1].seq)

    def stage(self) -> int:
        """Stage the new messages of every live session (a step each). Returns how many.
        No write lock: a step stages only if, under the pending points' lock, its session is
        still live and had no RemoveMessages since it read (:meth:`_unchanged`), and its
        episode is not forgotten (:meth:`SemanticStore.stage`)."""
        with self._lock:
            todo = [
                (v.session, v.staged, v.removals)
                for v in self._sessions.values()
                if v.staged < v.last
            ]
        staged = 0
        for session, after, removals in todo:
            messages = self.working.live(session, after, STEP_MESSAGES)
            if messages is None:
                self.ended(session.episode_id)
                continue
            episode = self._episode(session, messages)
            points = [self.indexer.point(episode, "episode_turn", [t]) for t in episode.turns]
            eid = session.episode_id
            still = functools.partial(self._unchanged, eid, removals)
            if len(self.semantic.stage(points, still)) < len(points) and not still():
                continue  # RemoveMessages or the end meanwhile: not staged, read again
            # (fewer staged while still live: forgotten memories, skipped for good)
            staged += len(points)
            with self._lock:
                live = self._sessions.get(eid)
                if live is not None and messages and live.removals == removals:
                    live.staged = max(live.staged, messages[-1].seq)
                    if live.waiting_since is None and live.staged > live.embedded:
                        live.waiting_since = self.clock()
        return staged

    def _unchanged(self, episode_id: str, removals: int) -> bool:
        """Whether the session is still live here with no RemoveMessages since ``removals``."""
        with self._lock:
            live = self._sessions.get(episode_id)
            return live is not None and live.removals == removals

    def remove(self, session: LiveSession, seqs: tuple[int, ...]) -> None:
        """Delete the stored points of removed messages and move the mark back."""
        with self.semantic.write_lock:
            self._delete_stored(session, set(seqs))

    def _delete_stored(self, session: LiveSession, gone: set[int]) -> None:
        """Under the write lock: the points of ``session`` holding a seq of ``gone`` out, and
        its mark moved back before them."""
        _embedder, vectors = self.semantic.wait_ready(timeout=None)
        user = session.scope.user_id
        flt = PointFilter(user_id=user, episode_ids=(session.episode_id,))
        stored = vectors.scroll(flt, _ALL) + self.semantic.pending.points(flt)
        doomed = [p for p in stored if _holds(p, gone)]
        if doomed:
            ids = tuple(dict.fromkeys(p.id for p in doomed))
            self.semantic.delete(PointFilter(user_id=user, ids=ids), {user})
        mark = self.progress.get(session.episode_id)
        if self.working.live(session, 0, 1) is None and not self.indexer.ended(session):
            self.ended(session.episode_id)  # every message removed: closed, with no episode
            if mark is not None:
                self.progress.delete([session.episode_id])
            return
        if mark is None:
            return
        through = min(mark.turns_through, min(gone) - 1)
        starts = [p.sources[0].seq for p in doomed if p.kind == "episode_chunk" and p.sources]
        chunk_from = min([mark.chunk_from, *starts]) if starts else mark.chunk_from
        covered = chunk_from if starts else mark.covered_from
        moved = replace(mark, turns_through=through, chunk_from=chunk_from, covered_from=covered)
        if moved != mark:
            self.progress.put(session.episode_id, moved, 0)
        with self._lock:
            live = self._sessions.get(session.episode_id)
            if live is not None:
                live.embedded = min(live.embedded, through)

    # -- the weaver's worker ---------------------------------------------------------------
    def index(
        self, episode_ids: list[str], stopping: threading.Event | None = None
    ) -> LiveIndexResult:
        """Embed and write a batch of each of these live sessions (at most
        :data:`STEP_MESSAGES` messages each, :data:`STEP_TEXTS` texts in all, in one
        embedding batch); one left behind is due again at once. Raises Stopped when
        ``stopping`` is set before the batch is all embedded: nothing is written, and the
        marks say what is embedded again after a restart."""
        with self._lock:  # due again if this job fails (after batch_seconds)
            found = [self._sessions[e] for e in episode_ids if e in self._sessions]
            for live in found:
                live.queued = False
            todo = [(live.session, live.removals) for live in found]
        self.semantic.wait_ready(timeout=None)
        steps: list[_Step] = []
        texts = 0
        for session, removals in todo:
            step = self._step(session, removals)
            if step is None:
                continue
            if steps and texts + len(step.points) > STEP_TEXTS:
                break  # the rest: the next job
            steps.append(step)
            texts += len(step.points)
        bare = [p for s in steps for p in s.points]
        vectors = iter(self.indexer.embed(bare, stopping))  # no lock
        for step in steps:
            step.points = [next(vectors) for _ in step.points]
        points = 0
        with self.semantic.write_lock:
            kept = [s for s in steps if self._still(s)]
            written = self.semantic.write([p for s in kept for p in s.points])
            counts = Counter(p.episode_id for p in written)
            for s in kept:
                if s.live or counts[s.session.episode_id]:
                    self.progress.put(s.session.episode_id, s.moved, counts[s.session.episode_id])
            points = len(written)
        now = self.clock()
        with self._lock:
            for s in kept:
                state = self._sessions.get(s.session.episode_id)
                if state is not None:
                    state.embedded = max(state.embedded, s.moved.turns_through)
                    state.waiting_since = now if state.staged > state.embedded else None
        return LiveIndexResult(len(kept), points)

    def _step(self, session: LiveSession, removals: int) -> _Step | None:
        """One session's batch: its new messages, their points and the mark after them."""
        mark = self.progress.get(session.episode_id) or Progress(session.scope, session.session_id)
        after = min(mark.chunk_from or 1, mark.turns_through + 1) - 1
        limit = STEP_MESSAGES + (mark.turns_through - after)
        messages = self.working.live(session, after, limit)
        if messages is None:  # ended (its episode's index does the rest), or forgotten
            self.ended(session.episode_id)
            return None
        if not messages or messages[-1].seq <= mark.turns_through:
            return None
        points, moved = self._batch(self._episode(session, messages), mark, messages[-1].seq)
        seqs = [m.seq for m in messages]
        return _Step(session, removals, after, limit, seqs, points, moved)

    def _still(self, step: _Step) -> bool:
        """Under the write lock: the step's messages are as it read them (no RemoveMessages
        since); ``step.live`` says whether the session still lives (if it ended, its
        episode's index comes after this job and resumes from the mark)."""
        now = self.working.live(step.session, step.after, step.limit)
        step.live = now is not None
        if now is None:
            return True  # ended: the episode holds them; forgotten: the tombstones drop them
        # Later appends may follow what it read; a removal takes the newest messages, so
        # it shows as a seq of the step's gone or replaced by a newer one.
        read = [m.seq for m in now][: len(step.seqs)]
        return read == step.seqs and self._unchanged(step.session.episode_id, step.removals)

    def _batch(
        self, episode: EpisodeInput, mark: Progress, last_seq: int
    ) -> tuple[list[MemoryPoint], Progress]:
        """The new turns' points and the windows complete so far, and the mark after them."""
        s = self.indexer.settings
        # (weaver.index_turns is required: the staged turns are what the batches replace)
        items = episode.turns
        first = first_at(items, mark.chunk_from)
        covered = first_at(items, mark.covered_from) - first if mark.covered_from else 0
        made = windows(
            items[first:],
            s.chunk_turns,
            s.chunk_overlap,
            s.chunk_max_tokens,
            covered=covered,
            final=False,
        )
        points = [self.indexer.point(episode, "episode_chunk", w) for w in made.windows]
        points += [
            self.indexer.point(episode, "episode_turn", [t])
            for t in items
            if t.seq > mark.turns_through
        ]
        moved = replace(mark, turns_through=last_seq)
        if made.windows:
            moved = replace(
                moved,
                chunk_from=items[first + made.start].seq,
                covered_from=items[first + made.covered].seq,
            )
        return points, moved

    def _episode(self, session: LiveSession, messages: list[StoredMessage]) -> EpisodeInput:
        turns = turns_of(messages, self.indexer.tool_text)
        return EpisodeInput(session.episode_id, session.session_id, session.scope, turns)


def _holds(point: MemoryPoint, seqs: set[int]) -> bool:
    return any(s.seq in seqs for s in point.sources)

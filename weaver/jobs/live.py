"""The live index stage's thread (:class:`LiveStage`, owned by
:class:`weaver.jobs.runner.Weaver`): the first, quick speed of :mod:`weaver.live`.

It wakes on every append (:class:`~tiers.working.session.MessagesAppended`), stages the new
messages for the keyword channel, and hands each session whose batch is due to the weaver's
worker as an :class:`~weaver.jobs.kinds.IndexLive` job (the second speed: embedding, which
shares the worker with the other index jobs so that Tier 3's index writes never race). On
RemoveMessages (:class:`~tiers.working.session.MessagesRemoved`) it deletes the removed
messages' points and settles the RPC's future. It runs below the event loop's priority, as
Recall does; it starts once Tier 3 is open (staged points are of no use before: Recall needs
Tier 3) and first recovers every live session from its mark (:meth:`LiveIndexer.recover`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from tiers.core.priority import RECALL_NICE, lower_this_thread
from tiers.semantic.store import SemanticStore
from tiers.working.session import LiveSession, MessagesAppended, MessagesRemoved
from weaver.live import LiveIndexer

log = logging.getLogger("strata.weaver")
# The pause after a step failed (Tier 3 refused a write), before the next.
RETRY_SECONDS = 1.0
# How often the thread looks whether Tier 3 has opened, before it starts.
READY_POLL_SECONDS = 0.1


@dataclass(eq=False, slots=True)
class LiveStage:
    live: LiveIndexer
    semantic: SemanticStore
    queue_batch: Callable[[], None]
    stopping: threading.Event
    _wake: threading.Condition = field(init=False, default_factory=threading.Condition)
    _removals: list[tuple[LiveSession, tuple[int, ...], Future[None]]] = field(
        init=False, default_factory=list
    )
    # sessions whose batch is due, for the next IndexLive job
    _ready: list[str] = field(init=False, default_factory=list)
    _thread: threading.Thread | None = field(init=False, default=None)

    # -- events (under the working memory's lock: take note, wake the thread) --------------
    def appended(self, event: MessagesAppended) -> None:
        self.live.appended(event.session, event.last_seq)
        self._notify()

    def removed(self, event: MessagesRemoved) -> None:
        self.live.removed(event.session, event.seqs)
        if not self.semantic.ready:  # nothing stored to delete yet: recover() checks
            event.settled.set_result(None)
            return
        with self._wake:
            self._removals.append((event.session, event.seqs, event.settled))
            self._wake.notify()

    def ended(self, episode_id: str) -> None:
        self.live.ended(episode_id)

    def take_ready(self) -> list[str]:
        """The sessions whose batch is due (the IndexLive job at hand takes them all)."""
        with self._wake:
            ready, self._ready = list(dict.fromkeys(self._ready)), []
        return ready

    def batch_done(self) -> None:
        """An IndexLive job ended: look again at what is due."""
        self._notify()

    def _notify(self) -> None:
        with self._wake:
            self._wake.notify()

    # -- control ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="weaver-live", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the step at hand (idempotent); what is not staged is staged again at
        the next start, from the logs."""
        self._notify()
        if self._thread is not None:
            self._thread.join(timeout)
        self._settle_all()

    # -- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        lower_this_thread(RECALL_NICE)  # below the event loop, beside Recall
        while not self.semantic.ready:  # a stop must not wait for the model
            if self.semantic.error is not None:  # Tier 3 failed to open: nothing to stage into
                log.warning(
                    "weaver.live_unavailable", extra={"fields": {"error": self.semantic.error}}
                )
                self._settle_all()
                return
            if self.stopping.wait(READY_POLL_SECONDS):
                return
        recovered = False
        while not self.stopping.is_set():
            try:
                if not recovered:
                    self.live.recover()
                    recovered = True
                self._step()
            except Exception as exc:  # a step must never kill the thread
                log.exception("weaver.live_failed", extra={"fields": {"error": str(exc)}})
                self.stopping.wait(RETRY_SECONDS)

    def _step(self) -> None:
        with self._wake:
            removals, self._removals = self._removals, []
        for session, seqs, settled in removals:
            try:
                self.live.remove(session, seqs)
                settled.set_result(None)
            except Exception as exc:
                settled.set_exception(exc)
        self.live.stage()
        ready, soonest = self.live.due()
        if ready:
            with self._wake:
                self._ready += ready
            self.queue_batch()
        with self._wake:
            if self._removals or self.live.to_stage() or self.stopping.is_set():
                return
            self._wake.wait(soonest)

    def _settle_all(self) -> None:
        with self._wake:
            removals, self._removals = self._removals, []
        for _session, _seqs, settled in removals:
            if not settled.done():
                settled.set_result(None)

"""A consolidation run as observers see it: the :class:`Run` a request returns (which
episodes, which scope), the :class:`Progress` events it publishes and the :class:`RunReport` it
ends with, which says the scopes whose profiles or digests could not be rewritten
(:func:`rewrites_failed`). Thread-safe: the weaver's worker publishes, any thread follows.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from tiers.core.records import Scope
from tiers.journal.stale import Part, Rewritten
from tiers.journal.store import PendingEpisode

ANY_SCOPE = Scope("")
log = logging.getLogger("strata.weaver")


@dataclass(slots=True)
class RunReport:
    run_id: str
    ok: bool = True
    episodes: int = 0
    chunks: int = 0
    summaries: int = 0
    facts: int = 0
    triplets: int = 0
    superseded: int = 0
    profiles: int = 0  # entity profiles written or rewritten
    digests: int = 0  # digests and story threads written or rewritten
    failures: int = 0
    fallbacks: int = 0
    llm_calls: int = 0
    seconds: float = 0.0
    started_at: float = 0.0
    finished_at: float = 0.0
    error: str = ""


@dataclass(frozen=True, slots=True)
class Progress:
    stage: str  # "queued", "index", "consolidate"
    done: int
    total: int
    episode_id: str = ""


@dataclass(slots=True)
class Run:
    """A requested consolidation run; thread-safe to follow from any thread."""

    run_id: str
    episode_ids: tuple[str, ...] = ()
    scope: Scope = ANY_SCOPE
    events: list[Progress] = field(default_factory=list)
    report: RunReport | None = None
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def publish(self, event: Progress) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def finish(self, report: RunReport) -> None:
        with self._cond:
            self.report = report
            self._cond.notify_all()

    def follow(self, seen: int, timeout: float) -> tuple[list[Progress], RunReport | None]:
        """Events after the first ``seen``, waiting up to ``timeout`` for something new."""
        with self._cond:
            if len(self.events) == seen and self.report is None:
                self._cond.wait(timeout)
            return self.events[seen:], self.report

    def wants(self, pending: PendingEpisode) -> bool:
        if self.episode_ids and pending.episode_id not in self.episode_ids:
            return False
        if self.scope.user_id and pending.user_id != self.scope.user_id:
            return False
        return not (self.scope.agent_id and pending.agent_id != self.scope.agent_id)


def logged(part: Part, rewritten: Rewritten) -> dict[Scope, Exception]:
    """Log each scope whose rewrite of ``part`` failed (``weaver.rewrite_failed``, with the
    traceback); returns them (:meth:`tiers.journal.stale.StaleScopes.rewrite`)."""
    for scope, exc in rewritten.failed.items():
        fields = {"part": part, "user_id": scope.user_id, "agent_id": scope.agent_id}
        log.warning("weaver.rewrite_failed", exc_info=exc, extra={"fields": fields})
    return rewritten.failed


def rewrites_failed(
    profiles: Mapping[Scope, Exception], digests: Mapping[Scope, Exception]
) -> tuple[int, str]:
    """How many scopes the last rewrites of their ``profiles`` and ``digests`` failed
    (:func:`logged`), and a sentence saying so with the first error ("" when none did)."""
    parts = [
        (part, scopes) for part, scopes in (("profiles", profiles), ("digests", digests)) if scopes
    ]
    if not parts:
        return 0, ""
    said = " and ".join(f"the {part} of {scopes_count(len(scopes))}" for part, scopes in parts)
    first = next(iter(parts[0][1].values()))
    count = sum(len(scopes) for _part, scopes in parts)
    return count, f"{said} could not be rewritten ({type(first).__name__}: {first})"


def scopes_count(n: int) -> str:
    """``n`` scopes, in words ("1 scope", "2 scopes")."""
    return f"{n} scope{'' if n == 1 else 's'}"

"""The kinds of job the weaver's worker runs, one frozen dataclass each, and :data:`Job`,
their union, which the worker handles with ``match`` (:class:`weaver.jobs.runner.Weaver`).

- :class:`IndexEpisodes`: stage 1 for ended sessions (:mod:`weaver.jobs.indexing`).
- :class:`IndexLive`: a batch of live sessions' messages (:mod:`weaver.live`).
- :class:`IndexDocuments`: the keyed documents marked unindexed, a batch per job.
- :class:`Consolidate`: a consolidation run (:mod:`weaver.jobs.runs`).
- :class:`Call`: a function run between other jobs, its result in a future (a rebuild).

Each kind has a ``kind``, the short name the log and ``last_error`` give it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, ClassVar, Never, NoReturn

from weaver.run import Run


@dataclass(frozen=True, slots=True)
class IndexEpisodes:
    """Index these ended sessions' episodes (those still marked unindexed)."""

    kind: ClassVar[str] = "index"
    episode_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IndexLive:
    """Embed a batch of each live session whose batch is due (:mod:`weaver.live`; the job
    takes them when it runs: one such job in line is enough)."""

    kind: ClassVar[str] = "live"


@dataclass(frozen=True, slots=True)
class IndexDocuments:
    """Index the keyed documents marked unindexed (one batch; the rest: another job)."""

    kind: ClassVar[str] = "documents"


@dataclass(frozen=True, slots=True)
class Consolidate:
    """Run this consolidation run."""

    kind: ClassVar[str] = "run"
    run: Run


@dataclass(frozen=True, slots=True)
class Call:
    """Run ``fn`` and settle ``future`` with its result or its exception."""

    kind: ClassVar[str] = "call"
    fn: Callable[[], Any]
    future: Future[Any]


Job = IndexEpisodes | IndexLive | IndexDocuments | Consolidate | Call
JOB_TYPES = (IndexEpisodes, IndexLive, IndexDocuments, Consolidate, Call)
JOB_KINDS = tuple(t.__name__ for t in JOB_TYPES)


class UnknownJob(TypeError):
    """Something that is not one of the weaver's jobs was queued or handed to the worker."""


def unknown(job: Never) -> NoReturn:
    """The ``case _`` of a ``match`` over :data:`Job`: mypy checks that no kind is left out,
    and a value of another type raises :class:`UnknownJob`."""
    raise UnknownJob(f"not a weaver job: {job!r} (the kinds: {', '.join(JOB_KINDS)})")

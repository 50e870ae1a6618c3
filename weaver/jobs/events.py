"""What the weaver tells its observers (the daemon's metrics), as typed events published on
its :class:`tiers.core.events.Events` (``Weaver.events``), from the worker thread.

- :class:`EpisodesIndexed`: an index job wrote ended sessions' chunks.
- :class:`RunFinished`: a consolidation run ended (its report; a failed run too), before
  the run's caller is handed the report.
"""

from __future__ import annotations

from dataclasses import dataclass

from weaver.run import RunReport


@dataclass(frozen=True, slots=True)
class EpisodesIndexed:
    episodes: int
    points: int
    seconds: float  # the job's time: reading the turns, embedding, writing the points


@dataclass(frozen=True, slots=True)
class RunFinished:
    report: RunReport

"""The graphs warmed at a start (:func:`warm_up`): the scopes' graphs loaded from their feature
files (:mod:`recall.graph.files`) before anyone asks, as a first query would load them.

After a restart, the users who were active before it are the likeliest to come back first,
and each one's first visit would load its graph from its file (a user of 6,678 memories:
27 ms of the visit at 1M points, ``docs/benchmarks.md``, 2026-12-07). So once Tier 3 has
opened, the files written last are loaded first, until the graphs kept hold the warm-up's
budget (``recall.graph_warm_mb``, within ``recall.graph_cache_mb``). The warm-up is the
daemon's own work: it runs on the graph build thread after the builds the queries asked for,
steps aside for the Recalls being served before each load, rests :data:`WARM_REST` times
each load (a load holds the interpreter, as the shards' opener's do), evicts nothing, and
the graphs it loads are the first out of the budget. A graph loaded so is its scope's file as
last saved, as a first query's load is: the scope's first query takes it and starts the
build that lists its memories behind it
(:meth:`recall.graph.memory.MemoryGraphs.get`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from tiers.core.records import Scope

log = logging.getLogger("strata.recall")

# The rest after each graph loaded, in the time the load took: as the shards' opener's
# (``tiers.semantic.vectors.shards.members.OPENER_REST``), a quarter of the interpreter at most
WARM_REST = 3.0


def warm_up(
    scopes: Iterable[Scope],
    load: Callable[[Scope], bool],
    held: Callable[[], int],
    budget: int,
    between: Callable[[], None],
) -> int:
    """Load the graph of each of ``scopes`` in turn (``load``: whether it was kept) while the
    graphs held take less than ``budget`` bytes (``held()``); ``between()`` before each load
    steps aside, and stops the warm-up by raising. Logs ``recall.graphs_warmed``; returns how
    many graphs were kept."""
    began, kept = time.perf_counter(), 0
    for scope in scopes:
        between()  # not within a rest share: the builds it runs are the queries'
        if held() >= budget:
            break
        step = time.perf_counter()
        kept += load(scope)
        time.sleep((time.perf_counter() - step) * WARM_REST)
    fields = {
        "graphs": kept,
        "held_mb": round(held() / 2**20, 1),
        "seconds": round(time.perf_counter() - began, 2),
    }
    log.info("recall.graphs_warmed", extra={"fields": fields})
    return kept

"""A query's channels run at once (:class:`Fanout`): the graph channel, the slow one, on a
thread of its own beside the others; for a scope its ``ahead`` names, the textual channels
(:class:`recall.Textual`: the keyword channel) started before the query is embedded, and
their search of the query without its speakers' names after them on the same thread; the
others on the query's thread. Each is timed, and a failing one is reported degraded while the
others answer."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

from recall import Channel, ChannelNotReady, Query, QueryContext, Textual
from tiers.core.priority import RECALL_NICE, lower_this_thread
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint

log = logging.getLogger("strata.recall")
Hits = list[tuple[MemoryPoint, float]]


class Fanout:
    """The channels of the engine's queries, run at once. ``threads``: the queries computed at
    once (a textual channel's thread each); ``ahead``: whether a query of the scope starts its
    textual channels' searches before its embedding (:meth:`ahead`); None: never."""

    def __init__(
        self,
        channels: Mapping[str, Channel],
        threads: int,
        ahead: Callable[[Scope], bool] | None = None,
    ) -> None:
        self._channels = channels
        self._ahead_of = ahead
        # The graph channel's searches, and the textual channels' ahead of the embedding: at
        # a request's priority (tiers.core.priority), idle and threadless until first used.
        self._graphs = ThreadPoolExecutor(2, "recall", lower_this_thread, (RECALL_NICE,))
        self._texts = ThreadPoolExecutor(threads, "recall-text", lower_this_thread, (RECALL_NICE,))

    def close(self) -> None:
        """Start no more searches on the threads: a query under way searches those it has not
        started on its own thread, and reports one still waiting for a thread as degraded.
        Idempotent."""
        self._graphs.shutdown(wait=False, cancel_futures=True)
        self._texts.shutdown(wait=False, cancel_futures=True)

    def ahead(
        self,
        query: Query,
        names: list[str],
        depth: int,
        timings: dict[str, float],
        neutral: Query | None = None,
    ) -> dict[str, Future[Hits]]:
        """The searches of the query's textual channels among ``names``, started on a thread
        of their own before the query is embedded, for a scope ``ahead`` names (the graph
        channel's :meth:`~recall.graph.channel.GraphChannel.walks_large`): the keyword
        channel's reads then run beside the model's call rather than after it, where they
        held the interpreter while the graph's walk waited for it. With ``neutral`` (the
        query without the names of its scope's speakers, :mod:`recall.cues.speakers`), each
        channel's search of it follows on the same thread, as ``<channel>:neutral``, rather
        than after the channels (:meth:`recall.cues.searches.CueSearches.searched`). Each
        times itself into ``timings``. None for any other scope, nor once closed: they then
        search after the embedding, as the others do (:meth:`run`).

        Only there: the model's call takes both cores of this machine (``embedding.threads``),
        so a search beside it slows it, and a small scope's search, a millisecond or two, costs
        the query more than it saves (a 200,000-point user at 1M: 2-5 ms sooner at p50; small
        users: 1-3 ms later, 2026-12-05)."""
        started: dict[str, Future[Hits]] = {}
        if self._ahead_of is None or not self._ahead_of(query.scope):
            return started
        for name in names:
            channel = self._channels.get(name)
            if not isinstance(channel, Textual):
                continue
            searches = {name: partial(channel.search_text, query, depth)}
            if neutral is not None:
                searches[f"{name}:neutral"] = partial(channel.search_text, neutral, depth)
            futures = {n: Future[Hits]() for n in searches}
            try:
                job = self._texts.submit(_in_turn, searches, futures, timings)
            except RuntimeError:  # closed
                break
            job.add_done_callback(partial(_cancel_unless_ran, futures))
            started.update(futures)
        return started

    def run(
        self,
        ctx: QueryContext,
        names: list[str],
        depth: int,
        timings: dict[str, float],
        started: Mapping[str, Future[Hits]],
    ) -> tuple[dict[str, Hits], list[str]]:
        """Each channel's hits, by name in the order of ``names``, and the names of those that
        failed; ``started``: searches already under way (:meth:`ahead`)."""
        results: dict[str, Hits] = {}
        degraded: list[str] = []
        searches = {n: partial(self._channels[n].search, ctx, depth) for n in names}
        futures = {n: f for n, f in started.items() if n in searches}  # not a cue's
        if "graph" in names and len(names) > 1:
            with contextlib.suppress(RuntimeError):  # closed: on the query's thread
                futures["graph"] = self._graphs.submit(_timed, "graph", searches["graph"], timings)
        for name in names:
            if name in futures:
                continue
            try:
                results[name] = _timed(name, searches[name], timings)
            except Exception as exc:
                _failed(name, exc, degraded)
        for name, future in futures.items():
            try:
                results[name] = future.result()
            except Exception as exc:
                _failed(name, exc, degraded)
        return {n: results[n] for n in names if n in results}, degraded


def drop(started: Mapping[str, Future[Hits]]) -> None:
    """Searches started ahead that the query no longer needs (its answer was cached, or its
    embedding failed): those not begun are cancelled, the others end unread."""
    for future in started.values():
        future.cancel()


def _in_turn(
    searches: Mapping[str, Callable[[], Hits]],
    futures: Mapping[str, Future[Hits]],
    timings: dict[str, float],
) -> None:
    """Run ``searches`` one after the other, each answering its future; one cancelled
    meanwhile (:func:`drop`) is skipped."""
    for name, search in searches.items():
        future = futures[name]
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(_timed(name, search, timings))
        except BaseException as exc:
            future.set_exception(exc)


def _cancel_unless_ran(futures: Mapping[str, Future[Hits]], job: Future[None]) -> None:
    """A job the closing pool cancelled before it ran leaves no future waiting for ever."""
    if job.cancelled():
        for future in futures.values():
            future.cancel()


def _failed(name: str, exc: Exception, degraded: list[str]) -> None:
    """A channel that failed (or is not ready for the scope) is reported degraded."""
    degraded.append(name)
    if not isinstance(exc, ChannelNotReady):  # not ready: no warning for every query
        log.warning("recall.channel_failed", extra={"fields": {"channel": name, "error": str(exc)}})


def _timed(name: str, search: Callable[[], Hits], timings: dict[str, float]) -> Hits:
    """``search()``, its time in ms put in ``timings[name]`` whether it answers or raises."""
    t = time.perf_counter()
    try:
        return search()
    finally:
        timings[name] = _ms(t)


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)

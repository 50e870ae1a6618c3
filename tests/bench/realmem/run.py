"""Session recall of ``stratad`` on RealMem, through the gRPC API, beside a plain BM25 reference.

Run as ``python -m tests.bench.realmem [--personas N] [--consolidate] [--set K=V ...]
[--json PATH] [--write-docs]``. Needs ``../shared/data/realmem/`` beside the checkout
(:mod:`tests.bench.realmem.data`).

A fresh daemon (``--set STRATA_...=value`` adds settings) lives the personas' conversations
as an agent would, one ``user_id`` per persona, session after session in the file's order:
``AppendBatch`` of the session's turns (role from the speaker, ``created_at`` the session's
time, metadata ``{"session": <session_uuid>}``), then ``EndSession``; the weaver's index stage
indexes each ended session within seconds (no consolidation run: "index only";
``--consolidate`` runs ``RunNow`` for the persona before each query, which costs about a
second per session). In a session holding queries, before each query turn the turns before it
are appended, the benchmark waits until every ended session is indexed (the ``unindexed`` mark
is written with the flush, so once ``EndSession`` has returned, ``unindexed == 0`` means the
session's points are in Tier 3), and then:

(a) ``Recall`` with the query turn's text, k = 50, ``time_range`` ending at the query's
    session: hits map to sessions through their sources (:mod:`tests.bench.realmem.metrics`);
(b) the query turn is appended and ``GetContext`` is asked for the live session (no query,
    1,500 tokens): the fraction of the gold sessions among its memories' sources;
(c) plain BM25 in this process over the turns of the sessions before the query's.

Then the rest of the session is appended and it ends. ``--report PATH`` prints (and with
``--write-docs`` records) the figures of an earlier ``--json`` run instead of running again.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from stratad_client import MemoryClient, message
from tests.bench.learned_fusion import FeatureLog
from tests.bench.locomo.context import CONTEXT_BUDGET
from tests.bench.locomo.metrics import latency, stage_timings
from tests.bench.realmem import metrics as m
from tests.bench.realmem.data import Dataset, Persona, Query, Session, load
from tests.bench.realmem.report import DOCS, render, write_docs
from tests.bench.support.daemon import command_line, machine_info, running_daemon
from tests.bench.support.recall_cli import add_common, finish, parse_settings
from tiers.core.records import Scope
from weaver.episodes import chunk
from weaver.extractors import EpisodeInput, Turn
from weaver.settings import WeaverSettings

K = 50
TIMEOUT = 120.0
POLL = (0.005, 0.1)  # seconds between two looks at the weaver's status: first, longest
BASE_SETTINGS = {
    # no scheduled run or optimize in the middle of the measurements (as for LoCoMo)
    "STRATA_WEAVER__INTERVAL_SECONDS": "86400",
    "STRATA_VECTORS__OPTIMIZE_INTERVAL_SECONDS": "86400",
    # one assistant turn of the files has 84,098 bytes (the default limit is 65,536)
    "STRATA_LIMITS__MAX_CONTENT_BYTES": "131072",
}
PHASES = ("append", "end", "wait", "consolidate", "recall", "context", "bm25")


class Replay:
    """One persona's sessions lived through the daemon, the queries asked on the way."""

    def __init__(
        self,
        client: MemoryClient,
        persona: Persona,
        consolidate: bool,
        features: FeatureLog | None = None,
    ) -> None:
        self.client = client
        self.features = features
        self.persona = persona
        self.consolidate = consolidate
        self.bm25 = m.BM25()
        self.by_session_id = {persona.session_id(s): s.uuid for s in persona.sessions}
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.records: list[dict[str, Any]] = []
        self.ended = 0
        self.own_hits = 0  # hits citing the query's own (live) session: should stay 0
        self.top10_kinds: dict[str, int] = {}
        self.stages: list[dict[str, float]] = []  # Recall's server-side stages, per query

    def timed(self, phase: str, call: Callable[[], Any]) -> Any:
        began = time.perf_counter()
        try:
            return call()
        finally:
            self.seconds[phase] += time.perf_counter() - began

    def run(self, progress: Callable[[dict[str, Any]], None]) -> None:
        for session in self.persona.sessions:
            self.session(session, progress)

    def session(self, session: Session, progress: Callable[[dict[str, Any]], None]) -> None:
        sid, user = self.persona.session_id(session), self.persona.user_id
        msgs = [
            message(
                t.text,
                t.role,
                created_at=session.turn_time(t),
                metadata={"session": session.uuid},
            )
            for t in session.turns
        ]
        done = 0  # turns appended
        for q in session.queries:
            before = sum(1 for t in session.turns if t.index < q.turn)
            self.append(sid, msgs[done:before])
            done = before
            self.ask(session, q)
            # (b) the query turn in the live session, then GetContext as the agent's next call
            self.append(sid, msgs[done : done + 1])
            done += 1
            self.context(sid, session, q)
            progress(self.records[-1])
        self.append(sid, msgs[done:])
        for t in session.turns:
            self.bm25.add(session.uuid, t.text)
        if msgs:
            self.timed("end", lambda: self.client.end_session(sid, user_id=user))
            self.ended += 1

    def append(self, sid: str, msgs: Sequence[Any]) -> None:
        if msgs:
            user = self.persona.user_id
            self.timed("append", lambda: self.client.append_batch(sid, msgs, user_id=user))

    def ask(self, session: Session, q: Query) -> None:
        began = time.perf_counter()
        self.timed("wait", self.wait_indexed)
        wait = time.perf_counter() - began
        if self.consolidate:
            self.timed("consolidate", self.run_weaver)
        began = time.perf_counter()
        response = self.client.recall(
            q.text,
            user_id=self.persona.user_id,
            k=K,
            end=session.at,
            explain=self.features is not None,
            # Its own session is live and recallable: the gold is earlier sessions.
            exclude_session_ids=[self.persona.session_id(session)],
            timeout=TIMEOUT,
        )
        recall_ms = (time.perf_counter() - began) * 1000.0
        self.seconds["recall"] += recall_ms / 1000.0
        groups = [[(s.metadata, s.session_id) for s in h.sources] for h in response.hits]
        if self.features is not None:  # the speakers are roles: a query names none of them
            keys = [m.sessions([g], "", self.by_session_id) for g in groups]
            self.features.add(
                self.persona.name, q.qid, q.text, (), response.hits, keys, q.gold, own=session.uuid
            )
        ranked = m.sessions(groups, session.uuid, self.by_session_id)
        self.own_hits += sum(
            session.uuid in m.sessions([g], "", self.by_session_id) for g in groups
        )
        for h in response.hits[:10]:
            self.top10_kinds[h.kind] = self.top10_kinds.get(h.kind, 0) + 1
        self.stages.append({t.stage: t.ms for t in response.timings})
        bm25 = self.timed("bm25", lambda: self.bm25.ranked_sessions(q.text))
        self.records.append(
            {
                "qid": q.qid,
                "gold": list(q.gold),
                "recall": ranked[:10],
                "bm25": bm25[:10],
                "scores": m.query_scores(ranked, q.gold),
                "bm25_scores": m.query_scores(bm25, q.gold),
                "hits": len(response.hits),
                "recall_ms": round(recall_ms, 2),
                "wait_ms": round(wait * 1000.0, 1),
            }
        )

    def context(self, sid: str, session: Session, q: Query) -> None:
        began = time.perf_counter()
        ctx = self.client.get_context(
            sid, CONTEXT_BUDGET, user_id=self.persona.user_id, timeout=TIMEOUT
        )
        ms = (time.perf_counter() - began) * 1000.0
        self.seconds["context"] += ms / 1000.0
        groups = [[(s.metadata, s.session_id) for s in i.sources] for i in ctx.memories]
        found = m.sessions(groups, session.uuid, self.by_session_id)
        self.records[-1].update(
            context=m.coverage(found, q.gold),
            context_sessions=found,
            context_memories=len(ctx.memories),
            context_tokens=ctx.tokens,
            context_ms=round(ms, 2),
        )

    def wait_indexed(self) -> None:
        def indexed() -> bool:
            status = self.client.admin.weaver_status()
            if status.tier3_error:
                raise RuntimeError(f"Tier 3 failed: {status.tier3_error}")
            return status.embedding_ready and status.unindexed == 0

        deadline = time.monotonic() + TIMEOUT
        pause = POLL[0]
        while not indexed():
            if time.monotonic() > deadline:
                raise TimeoutError(f"sessions still unindexed after {TIMEOUT:g} s")
            time.sleep(pause)
            pause = min(POLL[1], pause * 1.5)

    def run_weaver(self) -> None:
        for event in self.client.admin.run_weaver(user_id=self.persona.user_id, timeout=None):
            if event.WhichOneof("event") == "report" and event.report.error:
                raise RuntimeError(f"RunNow failed: {event.report.error}")


def index_texts(data: Dataset, settings: dict[str, str]) -> dict[str, int]:
    """The texts the index stage embeds for these sessions: turns, chunks, and the chunks
    that hold one turn (a turn past ``chunk_max_tokens`` stands alone, and is embedded twice)."""
    fields = ("chunk_turns", "chunk_overlap", "chunk_max_tokens", "index_turns")
    weaver = WeaverSettings.model_validate(
        {f: settings[k] for f in fields if (k := f"STRATA_WEAVER__{f.upper()}") in settings}
    )
    out = {"turns": 0, "chunks": 0, "one_turn_chunks": 0}
    for persona in data.personas:
        for s in persona.sessions:
            turns = [Turn(t.index + 1, t.role, t.role, t.text, 0) for t in s.turns]
            episode = EpisodeInput("", "", Scope(persona.user_id), turns)
            windows = chunk(
                episode, weaver.chunk_turns, weaver.chunk_overlap, weaver.chunk_max_tokens
            )
            out["turns"] += len(turns) if weaver.index_turns else 0
            out["chunks"] += len(windows)
            out["one_turn_chunks"] += sum(len(w) == 1 for w in windows)
    return out


# -- figures -----------------------------------------------------------------------------------
def summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean scores (in %) and latencies over ``records`` (one per query)."""

    def mean(values: Sequence[float]) -> float:
        return round(100.0 * statistics.fmean(values), 1) if values else float("nan")

    keys = [f"r@{k}" for k in m.KS] + [f"any@{m.ANY_K}"]
    return {
        "n": len(records),
        "recall": {k: mean([r["scores"][k] for r in records]) for k in keys},
        "bm25": {k: mean([r["bm25_scores"][k] for r in records]) for k in keys},
        "context": mean([r["context"] for r in records]),
        "recall_latency": latency([r["recall_ms"] for r in records]),
        "context_latency": latency([r["context_ms"] for r in records]),
        "context_tokens": round(statistics.fmean(r["context_tokens"] for r in records), 1),
        "context_memories": round(statistics.fmean(r["context_memories"] for r in records), 1),
    }


def evaluate(
    client: MemoryClient, data: Dataset, consolidate: bool, features: FeatureLog | None = None
) -> dict[str, Any]:
    total, done, r5 = data.queries, 0, 0.0
    per_persona: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    seconds = dict.fromkeys(PHASES, 0.0)
    checks: dict[str, Any] = {"own_hits": 0, "episodes": {}, "top10_kinds": {}}
    stages: list[dict[str, float]] = []
    t0 = time.perf_counter()

    def progress(record: dict[str, Any]) -> None:
        nonlocal done, r5
        done += 1
        r5 += record["scores"]["r@5"]
        if done % 50 == 0 or done == total:
            print(f"  {done}/{total} queries; R@5 so far {100 * r5 / done:.1f}", flush=True)

    for persona in data.personas:
        began = time.perf_counter()
        replay = Replay(client, persona, consolidate, features)
        replay.run(progress)
        replay.wait_indexed()
        episodes = sum(1 for _ in client.iter_episodes(user_id=persona.user_id))
        if episodes != replay.ended:
            raise RuntimeError(
                f"{persona.name}: {replay.ended} sessions ended, {episodes} episodes"
            )
        records += replay.records
        per_persona[persona.name] = {
            **summary(replay.records),
            "seconds": round(time.perf_counter() - began, 1),
        }
        for phase, s in replay.seconds.items():
            seconds[phase] += s
        checks["own_hits"] += replay.own_hits
        checks["episodes"][persona.name] = episodes
        stages += replay.stages
        for kind, n in replay.top10_kinds.items():
            checks["top10_kinds"][kind] = checks["top10_kinds"].get(kind, 0) + n
        print(f"  {persona.name}: {per_persona[persona.name]['seconds']:.0f} s", flush=True)
    timing = {p: round(s, 1) for p, s in seconds.items()}
    timing["total"] = round(time.perf_counter() - t0, 1)
    return {
        "personas": per_persona,
        "pooled": summary(records),
        "timing": timing,
        "checks": checks,
        "stages": stage_timings(stages),
        "per_query": records,
    }


# -- main --------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    data = load(personas=args.personas)
    settings = parse_settings(args.set, args.features)
    label = ", ".join(f"{k.removeprefix('STRATA_')}={v}" for k, v in settings.items())
    if args.consolidate:
        label = ", ".join(x for x in ("consolidated before each query", label) if x)
    params = {
        "label": args.label or label or "defaults (index only)",
        "settings": settings,
        "consolidate": args.consolidate,
        "personas": [p.name for p in data.personas],
        "sessions": data.sessions,
        "turns": data.turns,
        "queries": data.queries,
        "gold_sessions": sum(len(q.gold) for p in data.personas for s in p.sessions
                             for q in s.queries),
        "skipped_no_gold": data.total("skipped_no_gold"),
        "own_dropped": data.total("own_dropped"),
        "not_earlier": data.total("not_earlier"),
        "empty_turns": data.total("empty_turns"),
        "moved_sessions": {p.name: p.moved for p in data.personas if p.moved},
        "k": K,
        "budget": CONTEXT_BUDGET,
        "index_texts": index_texts(data, settings),
    }  # fmt: skip
    machine = machine_info()
    print(f"starting a fresh daemon ({params['label']})", flush=True)
    with (
        running_daemon({**BASE_SETTINGS, **settings}) as daemon,
        MemoryClient(daemon.address, timeout=TIMEOUT) as client,
    ):
        status = client.admin.weaver_status()
        params.update(model=status.embedding_model, extractor=status.extractor)
        print(
            f"  replaying {len(data.personas)} personas: {data.sessions} sessions, "
            f"{data.turns:,} turns, {data.queries} queries ...",
            flush=True,
        )
        log = FeatureLog("realmem") if args.features else None
        figures = evaluate(client, data, args.consolidate, log)
        if log is not None:
            log.write(args.features)
    return {"benchmark": "realmem_recall", "machine": machine, "params": params, **figures}


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.realmem", __doc__)
    parser.add_argument("--personas", type=int, default=0, help="only the first N personas")
    parser.add_argument(
        "--consolidate", action="store_true", help="RunNow for the persona before each query"
    )
    add_common(parser, DOCS)
    return finish(parser.parse_args(argv), run, render, write_docs)


if __name__ == "__main__":
    raise SystemExit(main())

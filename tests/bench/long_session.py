"""The long-session case: one live session of 2,000 LoCoMo turns, asked about while it lives.

Run as ``python -m tests.bench.long_session [--messages 2000] [--max-questions 150] [--every 250]
[--tokens 1000] [--settle 5] [--first-checkpoint] [--fixed-evidence] [--seed 0] [--set K=V ...]
[--json PATH]``. Needs ``../shared/data/locomo/`` beside the checkout.

1. A fresh daemon (consolidation and optimize out of the way; ``working_memory.max_log_messages``
   above the session's length, so the session is never flushed before its end) gets ONE
   session of one user: the turns of the LoCoMo conversations in order (the next conversation
   when one ends), one ``Append`` each, as ``locomo.py`` sends them (role user, speaker as
   ``name``, the session's date as ``created_at``), ``{"conv": ..., "dia_id": ...}`` as metadata
   and ``<conv>:<dia_id>`` as ``message_id`` (dia_ids repeat across conversations).
2. Questions: LoCoMo QA items (not adversarial) whose gold turns are all in the session. At a
   checkpoint every ``--every`` messages (and at the end) a question is due when all its gold
   turns were appended 100 to 1,900 messages before; each is asked once, at a random one of
   the checkpoints where it is due (``--first-checkpoint``: the first, which keeps every
   distance under ~350 + the gold's spread); ``--max-questions`` are kept (a seeded sample).
3. At a checkpoint with questions due: wait until the daemon says its live backlog is empty
   (a ``WeaverStatus`` integer field whose name holds "live", when there is one; else sleep
   ``--settle`` s), then ask each: ``Recall`` (k = 10), ``GetContext`` of the live session with
   the question as query and ``Pack``, both at ``--tokens``. Nothing ended the session.
4. ``EndSession``; once nothing is unindexed, the same questions again.

Scores: R@k is the fraction of a question's gold turns among the sources of the first k hits
(hits, not the de-duplicated turn list of ``locomo_metrics``); GetContext and Pack count a
question when a gold turn is among the sources of the block's memories (GetContext: its
``memories``, not its window).
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from stratad_client import MemoryClient
from stratad_client.pb import memory_pb2 as pb
from tests.bench.locomo.data import CATEGORIES, FIXES, LOCOMO, load, load_fixes
from tests.bench.locomo.metrics import table
from tests.bench.support.daemon import (
    command_line,
    latency_ms,
    machine_info,
    running_daemon,
    write_json,
)
from tests.bench.support.recall_cli import parse_settings
from tests.support import wait_until

MIN_GAP, MAX_GAP = 100, 1900  # messages between a gold turn and the question
KS = (5, 10)
USER = "long-session-user"
SESSION = "long-session"
TIMEOUT = 120.0
BUCKETS = ((100, 499), (500, 999), (1000, 1900))  # by the nearest gold turn's distance
BASE_SETTINGS = {
    "STRATA_WEAVER__INTERVAL_SECONDS": "86400",
    "STRATA_VECTORS__OPTIMIZE_INTERVAL_SECONDS": "86400",
}


@dataclass(frozen=True, slots=True)
class Msg:
    key: str  # "<conv>:<dia_id>"
    conv: str
    dia_id: str
    speaker: str
    text: str
    at: dt.datetime


@dataclass(frozen=True, slots=True)
class Probe:
    qid: str
    text: str
    category: int
    gold: tuple[str, ...]  # message keys
    checkpoint: int  # messages appended when it is asked
    nearest: int  # messages between the newest gold turn and the question
    farthest: int


def messages(n: int, fixed: bool) -> tuple[list[Msg], list[tuple[str, str, int, tuple[str, ...]]]]:
    """The session's first ``n`` turns and the questions (qid, text, category, gold keys) of
    the conversations they come from."""
    data = load(LOCOMO, fixes=load_fixes(FIXES) if fixed else {})
    msgs: list[Msg] = []
    questions = []
    for conv in data.conversations:
        if len(msgs) >= n:
            break
        for s in conv.sessions:
            for t in s.turns:
                key = f"{conv.sample_id}:{t.dia_id}"
                msgs.append(Msg(key, conv.sample_id, t.dia_id, t.speaker, t.text, s.started_at))
        questions += [
            (q.qid, q.text, q.category, tuple(f"{conv.sample_id}:{d}" for d in q.evidence))
            for q in conv.questions
        ]
    if len(msgs) < n:
        raise SystemExit(f"LoCoMo has only {len(msgs)} turns; ask for --messages {len(msgs)}")
    return msgs[:n], questions


def plan(
    msgs: Sequence[Msg],
    questions: Iterable[tuple[str, str, int, tuple[str, ...]]],
    every: int,
    max_questions: int,
    seed: int,
    first: bool = False,
) -> tuple[list[Probe], dict[str, int]]:
    """The probes, each at a checkpoint where all its gold turns are MIN_GAP to MAX_GAP
    messages back (a random one of them, or with ``first`` the first), at most
    ``max_questions`` of them (a seeded sample), and what was left out."""
    rng = random.Random(seed)
    position = {m.key: i for i, m in enumerate(msgs)}
    checkpoints = sorted({*range(every, len(msgs) + 1, every), len(msgs)})
    probes: list[Probe] = []
    skipped = {"adversarial": 0, "outside_session": 0, "never_due": 0}
    for qid, text, category, gold in questions:
        if category == 5:
            skipped["adversarial"] += 1
            continue
        if not gold or any(g not in position for g in gold):
            skipped["outside_session"] += 1
            continue
        lo, last = min(position[g] for g in gold), max(position[g] for g in gold)
        due = [c for c in checkpoints if c - last >= MIN_GAP and c - lo <= MAX_GAP]
        if not due:
            skipped["never_due"] += 1
            continue
        at = due[0] if first else rng.choice(due)
        probes.append(Probe(qid, text, category, gold, at, at - last, at - lo))
    skipped["not_sampled"] = max(0, len(probes) - max_questions)
    if len(probes) > max_questions:
        probes = rng.sample(probes, max_questions)
    return sorted(probes, key=lambda p: (p.checkpoint, p.qid)), skipped


def source_keys(sources: Iterable[pb.Source]) -> set[str]:
    out = set()
    for s in sources:
        conv, dia = s.metadata.get("conv", ""), s.metadata.get("dia_id", "")
        out.add(f"{conv}:{dia}" if conv and dia else s.message_id)
    return out


def live_backlog(client: MemoryClient) -> tuple[str, int] | None:
    """The daemon's live backlog as (field, value): WeaverStatus's ``live_unindexed``, else
    its first integer field named "live..." (None: it has none)."""
    status = client.admin.weaver_status()
    names = [f.name for f in status.DESCRIPTOR.fields if f.name.startswith("live")]
    for name in sorted(names, key=lambda n: n != "live_unindexed"):
        if isinstance(value := getattr(status, name, None), int):
            return name, value
    return None


def settle(client: MemoryClient, settle_seconds: float) -> float | None:
    """Seconds until the live backlog is empty (None: no such field; slept instead)."""
    t0 = time.perf_counter()
    if live_backlog(client) is None:
        time.sleep(settle_seconds)
        return None

    def empty() -> bool:
        backlog = live_backlog(client)
        return backlog is None or backlog[1] == 0

    wait_until(empty, 1800, "for the live backlog", interval=0.1)
    return time.perf_counter() - t0


def ask(client: MemoryClient, p: Probe, tokens: int) -> dict[str, Any]:
    """One question: Recall, GetContext (of the session, the question as query) and Pack."""
    gold = set(p.gold)
    hits = client.recall(p.text, user_id=USER, k=max(KS), timeout=TIMEOUT).hits
    row: dict[str, Any] = {"qid": p.qid, "nearest": p.nearest, "farthest": p.farthest}
    row["hits"] = len(hits)
    row["session_hits"] = sum(any(s.session_id == SESSION for s in h.sources) for h in hits)
    for k in KS:
        row[f"r@{k}"] = len(gold & source_keys(s for h in hits[:k] for s in h.sources)) / len(gold)
    ctx = client.get_context(SESSION, tokens, query=p.text, user_id=USER, timeout=TIMEOUT)
    packed = client.pack(p.text, user_id=USER, max_tokens=tokens, timeout=TIMEOUT)
    ctx_keys = source_keys(s for m in ctx.memories for s in m.sources)
    row["context"] = float(bool(gold & ctx_keys))
    wide = client.get_context(SESSION, 2 * tokens, query=p.text, user_id=USER, timeout=TIMEOUT)
    row["context2"] = float(bool(gold & source_keys(s for m in wide.memories for s in m.sources)))
    row["pack"] = float(bool(gold & source_keys(s for i in packed.items for s in i.sources)))
    row["context_memories"], row["context_tokens"] = len(ctx.memories), ctx.tokens
    return row


def mean(rows: Sequence[dict[str, Any]], key: str) -> float:
    return round(100 * statistics.fmean(r[key] for r in rows), 1) if rows else float("nan")


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(rows)}
    out.update({k: mean(rows, k) for k in ("r@5", "r@10", "context", "context2", "pack")})
    out["by_distance"] = {}
    for lo, hi in BUCKETS:
        sub = [r for r in rows if lo <= r["nearest"] <= hi]
        out["by_distance"][f"{lo}-{hi}"] = {"n": len(sub), "r@10": mean(sub, "r@10")}
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    msgs, questions = messages(args.messages, args.fixed_evidence)
    first, n_max = args.first_checkpoint, args.max_questions
    probes, skipped = plan(msgs, questions, args.every, n_max, args.seed, first)
    due = {c: [p for p in probes if p.checkpoint == c] for c in {p.checkpoint for p in probes}}
    settings = {
        **BASE_SETTINGS,
        "STRATA_WORKING_MEMORY__MAX_LOG_MESSAGES": str(2 * len(msgs) + 1000),
        **parse_settings(args.set),
    }
    machine = machine_info()
    convs = list(dict.fromkeys(m.conv for m in msgs))
    print(
        f"{len(msgs)} turns of {', '.join(convs)}; {len(probes)} questions at {len(due)} "
        f"checkpoints; left out {skipped}",
        flush=True,
    )
    live: list[dict[str, Any]] = []
    append_ms: list[float] = []
    settled: list[float] = []
    t_start = time.perf_counter()
    with (
        running_daemon(settings) as daemon,
        MemoryClient(daemon.address, timeout=TIMEOUT) as client,
    ):
        wait_until(lambda: client.admin.weaver_status().embedding_ready, 900, "for the model")
        ready = time.perf_counter() - t_start
        backlog_field = field[0] if (field := live_backlog(client)) else None
        print(f"  model ready after {ready:.1f} s; live backlog field: {backlog_field}", flush=True)
        for n, m in enumerate(msgs, 1):
            t0 = time.perf_counter()
            client.append(
                SESSION,
                m.text,
                user_id=USER,
                name=m.speaker,
                created_at=m.at,
                message_id=m.key,
                metadata={"conv": m.conv, "dia_id": m.dia_id},
            )
            append_ms.append((time.perf_counter() - t0) * 1000)
            if n not in due:
                continue
            waited = settle(client, args.settle)
            if waited is not None:
                settled.append(waited)
            live += [ask(client, p, args.tokens) for p in due[n]]
            r10 = mean(live, "r@10")
            print(
                f"  {n} messages: {len(due[n])} questions asked live; R@10 so far {r10}", flush=True
            )
        appended_s = sum(append_ms) / 1000
        episodes_before = sum(1 for _ in client.iter_episodes(user_id=USER))
        t0 = time.perf_counter()
        client.end_session(SESSION, user_id=USER)

        def indexed() -> bool:
            status = client.admin.weaver_status()
            if status.tier3_error or status.last_error:
                raise RuntimeError(f"Tier 3 / weaver: {status.tier3_error or status.last_error}")
            return status.unindexed == 0 and any(True for _ in client.iter_episodes(user_id=USER))

        wait_until(indexed, 1800, "for the ended session to be indexed", interval=0.2)
        index_s = time.perf_counter() - t0
        print(f"  ended; indexed after {index_s:.1f} s; asking again", flush=True)
        ended = [ask(client, p, args.tokens) for p in probes]
    return {
        "benchmark": "long_session",
        "machine": machine,
        "params": {
            "messages": len(msgs),
            "conversations": convs,
            "questions": len(probes),
            "skipped": skipped,
            "every": args.every,
            "tokens": args.tokens,
            "settle": args.settle,
            "fixed_evidence": args.fixed_evidence,
            "seed": args.seed,
            "first_checkpoint": args.first_checkpoint,
            "settings": settings,
            "categories": {
                CATEGORIES[c]: sum(p.category == c for p in probes)
                for c in sorted({p.category for p in probes})
            },
        },
        "timings": {
            "model_ready_s": round(ready, 1),
            "append_total_s": round(appended_s, 2),
            **latency_ms(append_ms, prefix="append_"),
            "live_backlog_field": backlog_field,
            "live_backlog_empty_s": [round(s, 2) for s in settled] or None,
            "ended_indexed_s": round(index_s, 1),
            "total_s": round(time.perf_counter() - t_start, 1),
        },
        "checks": {
            "episodes_before_end": episodes_before,
            "live_session_hits": sum(r["session_hits"] for r in live),
            "ended_session_hits": sum(r["session_hits"] for r in ended),
        },
        "live": summary(live),
        "ended": summary(ended),
        "per_question": {"live": live, "ended": ended},
    }


def render(res: dict[str, Any]) -> str:
    p, t, c, m = res["params"], res["timings"], res["checks"], res["machine"]
    tok = p["tokens"]
    rows = [
        [label, s["n"], s["r@5"], s["r@10"], s["context"], s["context2"], s["pack"]]
        for key, label, s in (
            ("live", "live (session open)", res["live"]),
            ("ended", "after EndSession, indexed", res["ended"]),
        )
    ]
    header = ["asked", "questions", "R@5", "R@10", f"GetContext@{tok}", f"GetContext@{2 * tok}"]
    header.append(f"Pack@{tok}")
    lv, en = res["live"]["by_distance"], res["ended"]["by_distance"]
    buckets = [[f"gold {k} msgs back", lv[k]["n"], lv[k]["r@10"], en[k]["r@10"]] for k in lv]
    backlog = t["live_backlog_empty_s"]
    if backlog:
        waited = f"{statistics.fmean(backlog):.1f} s mean, {max(backlog):.1f} s max"
        waited += f" ({t['live_backlog_field']})"
    else:
        waited = f"n/a (no live backlog field; slept {p['settle']:g} s per checkpoint)"
    timings = [
        ["model ready", f"{t['model_ready_s']} s after start"],
        [
            "appends",
            f"{p['messages']} in {t['append_total_s']} s (p50 {t['append_p50_ms']} ms, "
            f"p99 {t['append_p99_ms']} ms, max {t['append_max_ms']} ms)",
        ],
        ["live backlog empty", waited],
        ["ended session indexed", f"{t['ended_indexed_s']} s after EndSession"],
        ["episodes before EndSession", str(c["episodes_before_end"])],
        ["whole run", f"{t['total_s']} s"],
    ]
    return "\n".join(
        [
            f"### Long session: {p['messages']} messages of {', '.join(p['conversations'])} in "
            f"one live session, {p['questions']} questions ({MIN_GAP}-{MAX_GAP} messages back)",
            "",
            f"{m['date_utc']}; {m['cpu']}, {m['cores']} cores; load {m['load_average']}; "
            f"categories {p['categories']}",
            "",
            table(header, rows, markdown=True),
            "",
            table(["R@10 by distance", "questions", "live", "ended"], buckets, markdown=True),
            "",
            table(["timing", ""], timings, markdown=True),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.long_session", __doc__)
    parser.add_argument("--messages", type=int, default=2000, help="session length (2000)")
    parser.add_argument("--max-questions", type=int, default=150, help="at most (150)")
    parser.add_argument("--every", type=int, default=250, help="checkpoint interval (250)")
    parser.add_argument("--tokens", type=int, default=1000, help="GetContext/Pack budget (1000)")
    parser.add_argument(
        "--settle", type=float, default=5.0, help="s to wait per checkpoint without a live field"
    )
    parser.add_argument("--fixed-evidence", action="store_true", help="apply the audit's fixes")
    parser.add_argument("--seed", type=int, default=0, help="of the question sample (0)")
    parser.add_argument(
        "--first-checkpoint", action="store_true", help="ask at the first due checkpoint"
    )
    parser.add_argument("--set", action="append", default=[], metavar="K=V", help="a setting")
    args = parser.parse_args(argv)
    res = run(args)
    write_json(args.json, res, indent=1)
    print()
    print(render(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Probes of live sessions for the fleet benchmark (``python -m tests.bench.fleet``,
``--probe-every N``): how soon a message of a session still going on is findable.

Every ~N turns an agent appends, as an ordinary user message of its session, a probe: a fact
of :data:`PAIRS` with a made-up word of its own (letters only) as the fact's name. From the
Append's ack an outside prober (:class:`LiveProber`, a thread of the driver; its calls are not
in the agents' figures) recalls

* the word (keyword channel) every :data:`EXACT_EVERY` s until a hit's sources cite the
  message (its session and seq, or its message id), giving up after :data:`EXACT_GIVE_UP` s;
* the fact's paraphrase, which shares no content word with it (vector channel), at once when
  the user's Watch says the message is embedded (``session.indexed`` through its seq, or
  ``episode.indexed`` of its session), then every :data:`MEANING_EVERY` s, and every
  :data:`MEANING_FALLBACK` s meanwhile (in case Watch were wrong), giving up after
  :data:`MEANING_GIVE_UP` s. The lag is the Recall's that found it: Watch only says when to
  look.

Each kind has its own :data:`CONCURRENCY` calls at most at once. A first prober polled the
meaning every second with one gate for both: the ~100 probes waiting for their meaning kept
the exact polls queued for seconds (a lag of the prober, not of the daemon), and their
Recalls loaded the daemon more than the agents' own did. A lag is measured to the poll that
found it, so it is an upper bound, by at most the interval in force.

It also samples the weaver's backlog (``unindexed``: ended episodes and documents;
``live_unindexed``: messages of live sessions not embedded yet) every :data:`BACKLOG_EVERY` s.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from multiprocessing.queues import Queue
from typing import Any

from stratad_client import AsyncMemoryClient, StrataClientError
from tests.bench.support.daemon import percentile

CONCURRENCY = 6
EXACT_EVERY, EXACT_GIVE_UP, EXACT_TARGET = 0.15, 10.0, 2.0
MEANING_EVERY, MEANING_FALLBACK, MEANING_GIVE_UP, MEANING_TARGET = 1.0, 10.0, 60.0, 30.0
INDEXED = ("session.indexed", "episode.indexed")
BACKLOG_EVERY = 5.0
CALL_TIMEOUT = 30.0
BACKLOGS = ("unindexed", "live_unindexed", "live_sessions_behind")

# (fact with {w} for the probe's word, a question about it sharing no content word with it)
PAIRS: tuple[tuple[str, str], ...] = (
    ("My sister {w} had her cello recital moved to the Tuesday after next.",
     "When is the family member's music performance?"),
    ("{w} adopted a three-legged greyhound from the shelter last weekend.",
     "Which pet did someone recently take home?"),
    ("Our landlord {w} is raising the rent by two hundred dollars in March.",
     "How much more will housing cost this spring?"),
    ("Coach {w} says the swim team practices at six every morning now.",
     "What time do athletes train in the pool daily?"),
    ("I broke my left wrist skateboarding, according to Doctor {w}.",
     "Which bone injury happened while riding on wheels?"),
    ("{w} is allergic to peanuts, so the bakery order must skip them.",
     "What food sensitivity does this person have?"),
    ("The flight to Lisbon with {w} leaves at dawn on Friday.",
     "When does the trip to Portugal's capital depart?"),
    ("{w} finally repaired the leaking kitchen faucet yesterday.",
     "Who fixed the dripping sink tap?"),
    ("My nephew {w} graduated from nursing school with honors.",
     "Which relative finished medical training?"),
    ("{w} planted tomatoes and basil along the back fence.",
     "What vegetables and herbs are growing in the garden?"),
    ("The quarterly budget review with {w} was postponed until autumn.",
     "When will the financial meeting happen?"),
    ("{w} sold the old red pickup truck to a neighbor for cash.",
     "What vehicle got traded away?"),
    ("Grandpa {w} turns ninety on the fourteenth of July.",
     "How old will the elderly relative be on his birthday?"),
    ("{w} is learning Japanese by watching cartoons every night.",
     "Which foreign language is someone studying?"),
    ("The wedding of {w} will take place in a lighthouse by the sea.",
     "Where is the marriage ceremony being held?"),
    ("{w} ran the city marathon in just under four hours.",
     "How long did the long-distance race take?"),
)  # fmt: skip
_STOP = frozenset(
    re.findall(
        r"[a-z]+",
        "a an the to of in on at by for from with and or so is are was were be been being will "
        "do does did has have had my our her his him its this that what when where which who "
        "how i me",
    )
)


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` less stop words, crudely stemmed."""
    words = re.findall(r"[a-z]+", text.lower().replace("{w}", ""))
    return {re.sub(r"(ing|ed|es|s)$", "", w) for w in words if w not in _STOP}


assert all(not content_words(f) & content_words(q) for f, q in PAIRS), "a pair shares a word"


def spell(n: int) -> str:
    letters = "bcdfghjklmnpqrstvwxz"
    word = ""
    while True:
        word = letters[n % 20] + word
        n //= 20
        if not n:
            return word


@dataclass(frozen=True, slots=True)
class Probe:
    user: str
    session_id: str
    seq: int
    message_id: str
    word: str
    question: str
    long: bool  # in a long session
    acked: float  # monotonic, when the Append returned


def probe_message(agent: int, k: int) -> tuple[str, str, str]:
    """The ``k``-th probe of ``agent``: its text, its word, and the paraphrase."""
    order = sorted(range(len(PAIRS)), key=lambda i: (i * 7 + agent * 5) % len(PAIRS))
    fact, question = PAIRS[order[k % len(PAIRS)]]
    word = f"zo{spell(agent)}i{spell(k)}rax"
    return fact.format(w=word.capitalize()), word, question


class Probing:
    """An agent's probes (in a ``long`` session or not): one every ~``every`` turns (0:
    none), those appended after the warm-up put on ``out`` for the prober."""

    def __init__(self, agent: int, long: bool, every: int, out: Queue[Any] | None) -> None:
        self.agent, self.long, self.every, self.out, self.made = agent, long, every, out, 0
        self.rng = random.Random(f"probe-{agent}")  # the agent's own rng is left as it was
        self.countdown = self.gap() if every else 0

    def gap(self) -> int:
        spread = self.every // 3
        return self.rng.randint(max(1, self.every - spread), self.every + spread)

    def due(self, last: bool) -> bool:
        """Whether this turn is a probe (never a short session's last turn: its marker's)."""
        if not self.every:
            return False
        self.countdown -= 1
        if self.countdown > 0 or last:
            return False
        self.countdown = self.gap()
        return True

    async def append(
        self, c: AsyncMemoryClient, user: str, sid: str, speaker: str, tally: Any
    ) -> None:
        """Append the next probe, an ordinary user message, timed by ``tally`` (the agent's
        :class:`~tests.bench.fleet.Tally`)."""
        text, word, question = probe_message(self.agent, self.made)
        self.made += 1
        mid = f"probe-{word}"
        call = c.append(sid, text, role="user", user_id=user, name=speaker, message_id=mid)
        began = time.monotonic()
        ack = await tally.timed("Append", call)
        if ack is not None and began >= tally.measure_from and self.out is not None:
            probe = Probe(user, sid, ack.seq, mid, word, question, self.long, time.monotonic())
            self.out.put(probe)


def cites(hits: Any, p: Probe) -> bool:
    return any(
        s.message_id == p.message_id or (s.session_id == p.session_id and s.seq == p.seq)
        for h in hits
        for s in h.sources
    )


class LiveProber(threading.Thread):
    """Probes what comes in on ``probes`` until :meth:`finish`, samples the backlog."""

    def __init__(self, address: str, probes: Queue[Any], t0: float) -> None:
        super().__init__(daemon=True)
        self.address, self.probes, self.t0 = address, probes, t0
        self.results: list[tuple[Probe, float | None, float | None]] = []
        self.backlog: list[dict[str, float]] = []
        self.errors: Counter[str] = Counter()
        self._done = threading.Event()
        self._through: dict[tuple[str, str], float] = {}  # (user, session): embedded through
        self._news: asyncio.Condition | None = None  # notified on each Watch event
        self._watches: dict[str, asyncio.Task[None]] = {}

    def finish(self) -> None:
        self._done.set()
        self.join()

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        gates = {k: asyncio.Semaphore(CONCURRENCY) for k in ("keyword", "vector")}
        self._news = asyncio.Condition()
        async with AsyncMemoryClient(self.address, timeout=CALL_TIMEOUT) as c:
            sampling = asyncio.create_task(self._sample(c))
            tasks: set[asyncio.Task[None]] = set()
            while True:
                try:
                    p = self.probes.get_nowait()
                except queue.Empty:
                    if self._done.is_set():
                        break
                    await asyncio.sleep(0.05)
                    continue
                if p.user not in self._watches:
                    self._watches[p.user] = asyncio.create_task(self._watch(c, p.user))
                tasks.add(asyncio.create_task(self._probe(c, gates, p)))
            await asyncio.gather(*tasks)
            sampling.cancel()
            for w in self._watches.values():
                w.cancel()
            await self._status(c)

    async def _probe(
        self, c: AsyncMemoryClient, gates: dict[str, asyncio.Semaphore], p: Probe
    ) -> None:
        exact, meaning = await asyncio.gather(
            self._poll(c, gates["keyword"], p, p.word, "keyword", EXACT_EVERY, EXACT_GIVE_UP),
            self._poll(
                c, gates["vector"], p, p.question, "vector", MEANING_EVERY, MEANING_GIVE_UP,
                embedded=True,
            ),
        )  # fmt: skip
        self.results.append((p, exact, meaning))

    async def _poll(
        self, c: AsyncMemoryClient, gate: asyncio.Semaphore, p: Probe, query: str,
        channel: str, every: float, give_up: float, embedded: bool = False,
    ) -> float | None:  # fmt: skip
        """Recall ``query`` until a hit cites the probe: every ``every`` s (with ``embedded``:
        from when Watch says the probe is embedded, every MEANING_FALLBACK s before)."""
        while True:
            hits: Any = ()
            async with gate:
                try:
                    hits = (await c.recall(query, user_id=p.user, k=10, channels=[channel])).hits
                except StrataClientError as exc:
                    self.errors[f"Recall {channel} {exc.code.name}"] += 1
            lag = time.monotonic() - p.acked
            if cites(hits, p):
                return lag
            if lag >= give_up:
                return None
            if not embedded or self._embedded(p):
                await asyncio.sleep(every)
                continue
            assert self._news is not None
            async with self._news:
                left = min(MEANING_FALLBACK, give_up - lag)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._news.wait_for(lambda: self._embedded(p)), left)

    def _embedded(self, p: Probe) -> bool:
        return self._through.get((p.user, p.session_id), 0) >= p.seq

    async def _watch(self, c: AsyncMemoryClient, user: str) -> None:
        """Take note of how far the user's sessions are embedded (from the oldest change kept:
        none is missed before the first probe's Watch starts)."""
        assert self._news is not None
        try:
            async for e in c.watch(user_id=user, from_oldest=True, types=INDEXED, timeout=None):
                through = float(e.attrs["through_seq"]) if e.type == "session.indexed" else 1e18
                key = (user, e.session_id)
                async with self._news:
                    self._through[key] = max(self._through.get(key, 0), through)
                    self._news.notify_all()
        except StrataClientError as exc:
            self.errors[f"Watch {exc.code.name}"] += 1

    async def _sample(self, c: AsyncMemoryClient) -> None:
        while True:
            await self._status(c)
            await asyncio.sleep(BACKLOG_EVERY)

    async def _status(self, c: AsyncMemoryClient) -> None:
        try:
            st = await c.admin.weaver_status()
        except StrataClientError as exc:
            self.errors[f"WeaverStatus {exc.code.name}"] += 1
            return
        row = {"s": round(time.monotonic() - self.t0, 1)}
        self.backlog.append(row | {k: int(getattr(st, k)) for k in BACKLOGS})


# -- figures -------------------------------------------------------------------------------


def _lags(values: list[float | None]) -> dict[str, Any]:
    found = sorted(v for v in values if v is not None)
    ranked = found + [float("inf")] * (len(values) - len(found))

    def r(v: float) -> float | None:
        return round(v, 2) if v != float("inf") and v == v else None

    return {
        "found_pct": round(100 * len(found) / len(values), 1) if values else None,
        "p50_s": r(percentile(ranked, 50)),
        "p95_s": r(percentile(ranked, 95)),
        "max_s": r(found[-1]) if found else None,
    }


def summarize(prober: LiveProber, warmup: float, agents_end: float) -> dict[str, Any]:
    """The probes' lags by kind of session, and the backlog over the measured window
    (``warmup``..``agents_end``, seconds since the start) and after it."""
    groups: dict[str, Any] = {}
    for name, long in (("long", True), ("short", False)):
        rows = [r for r in prober.results if r[0].long is long]
        groups[name] = {
            "probes": len(rows),
            "exact": _lags([r[1] for r in rows]),
            "meaning": _lags([r[2] for r in rows]),
        }
    window = [b for b in prober.backlog if warmup <= b["s"] <= agents_end] or prober.backlog
    backlog = {
        k: {
            "max": max((b[k] for b in window), default=None),
            "start": window[0][k] if window else None,
            "mid": window[len(window) // 2][k] if window else None,
            "end": window[-1][k] if window else None,
            "after": prober.backlog[-1][k] if prober.backlog else None,
        }
        for k in BACKLOGS
    }
    return {
        "groups": groups,
        "backlog": backlog,
        "backlog_samples": prober.backlog,
        "prober_errors": dict(prober.errors),
    }


def bounded(series: dict[str, Any], slack: float) -> bool:
    """Not growing: the window's end at most its middle's plus a quarter, plus ``slack``."""
    return series["end"] is not None and series["end"] <= 1.25 * series["mid"] + slack


def live_meets(live: dict[str, Any], agents: int) -> bool:
    ok = all(
        g["exact"]["p95_s"] is not None
        and g["exact"]["p95_s"] <= EXACT_TARGET
        and g["meaning"]["p95_s"] is not None
        and g["meaning"]["p95_s"] <= MEANING_TARGET
        for g in live["groups"].values()
        if g["probes"]
    )
    b = live["backlog"]
    return (
        ok
        and bounded(b["live_unindexed"], 2 * agents)
        and bounded(b["unindexed"], agents)
        and not live["prober_errors"]
    )


def report_lines(results: list[dict[str, Any]]) -> list[str]:
    if not any(r.get("live") for r in results):
        return []
    lines = [
        "",
        f"  Live probes (exact words: keyword channel, target p95 <= {EXACT_TARGET:g} s; "
        f"meaning: a paraphrase, vector channel, target p95 <= {MEANING_TARGET:g} s; "
        "lags from the Append's ack; backlog max (start / mid / end of the window; after)",
        "  agents | long share | sessions | probes | exact found / p50 / p95 / max s | "
        "meaning found / p50 / p95 / max s | live_unindexed | unindexed | prober errors | live met",
    ]

    def lag(d: dict[str, Any]) -> str:
        return f"{d['found_pct']} % / {d['p50_s']} / {d['p95_s']} / {d['max_s']}"

    def back(d: dict[str, Any]) -> str:
        return f"{d['max']} ({d['start']} / {d['mid']} / {d['end']}; {d['after']})"

    for r in results:
        live = r.get("live")
        if not live:
            continue
        b, errs = live["backlog"], sum(live["prober_errors"].values())
        for name, g in live["groups"].items():
            lines.append(
                f"  {r['agents']:>6} | {r['long_share']:g} | {name} | {g['probes']} | "
                f"{lag(g['exact'])} | {lag(g['meaning'])} | {back(b['live_unindexed'])} | "
                f"{back(b['unindexed'])} | {errs} | "
                f"{'yes' if live_meets(live, r['agents']) else 'no'}"
            )
    return lines

"""Evidence recall of ``stratad`` on LoCoMo, through the gRPC API, with baselines and ablations.

Run as ``python -m tests.bench.locomo [--fixed-evidence] [--conversations N] [--set K=V ...]
[--json PATH] [--write-docs]``. Needs ``../shared/data/locomo/`` beside the checkout.

1. A fresh daemon (``--set STRATA_...=value`` adds settings) is fed as an agent would: one
   ``user_id`` per conversation, one session per LoCoMo session (``AppendBatch`` of its turns,
   speaker as ``name``, the session's date as ``created_at``, ``{"dia_id": ...}`` as metadata,
   then ``EndSession``), then one ``RunNow`` (consolidation), until nothing is left unindexed
   or pending.
2. Every question with gold evidence is asked of every configuration (``Recall``, k = 50, all
   configurations in turn per question, so load hits them alike), of ``Pack`` at four token
   budgets, and of ``GetContext`` in context mode (:mod:`tests.bench.locomo.context`: the
   question alone in a new session, no query, 1,500 tokens). Hits map to LoCoMo turn ids
   through their sources' metadata (:mod:`tests.bench.locomo.metrics`).
3. Configurations (``--skip KEY`` leaves one out): ``bm25`` and ``dense`` (one channel over
   the raw chunks in the channel's own order: recipe ``plain``, without the speaker-neutral
   search or answers first),
   ``full`` (the default recipe), ``no_<channel>`` for each channel of the recipe
   (``with_<channel>`` at weight 1 for one it leaves out), ``chunks`` (all the recipe's
   channels, without the weaver's outputs), ``rerank`` (the local reranker), and a row
   ``recipe_<name>`` per named recipe set with ``--set STRATA_RECALL__RECIPES__<NAME>__<FIELD>=
   value`` (names of letters and digits).

``--report PATH`` prints (and with ``--write-docs`` records) the figures of an earlier
``--json`` run instead of running again.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from recall.cues.speakers import mentioned
from recall.recipe import RecallSettings
from stratad_client import MemoryClient, message
from tests.bench.learned_fusion import FeatureLog
from tests.bench.locomo import digests as locomo_digests
from tests.bench.locomo import metrics as m
from tests.bench.locomo.context import CONTEXT_BUDGET, ContextMode
from tests.bench.locomo.data import FIXES, LOCOMO, Conversation, load, load_fixes
from tests.bench.locomo.report import DOCS, render, write_docs
from tests.bench.support.daemon import command_line, machine_info, running_daemon
from tests.bench.support.recall_cli import add_common, finish, parse_settings
from tests.support import wait_until
from tiers.core.records import Scope
from tiers.semantic.graph import normalize
from tiers.semantic.vectors import KINDS
from weaver.episodes import chunk
from weaver.extractors import EpisodeInput, Turn
from weaver.settings import WeaverSettings

K = 50
BUDGETS = (500, 1000, 1500, 2000)
CHANNELS = ("vector", "keyword", "graph")
INDEX_KINDS = ("episode_chunk", "episode_turn")
WARMUP_QUERIES = 5
TIMEOUT = 120.0
PLAIN = "plain"  # the baselines' recipe: the query as asked, the channel's own order, no cues
BASE_SETTINGS = {  # no scheduled run or optimize in the middle of the measurements
    "STRATA_WEAVER__INTERVAL_SECONDS": "86400",
    "STRATA_VECTORS__OPTIMIZE_INTERVAL_SECONDS": "86400",
    f"STRATA_RECALL__RECIPES__{PLAIN.upper()}__SPEAKER_NEUTRAL": "false",
    f"STRATA_RECALL__RECIPES__{PLAIN.upper()}__ANSWERS_FIRST": "false",
    f"STRATA_RECALL__RECIPES__{PLAIN.upper()}__LEARNED_FUSION": "",
    f"STRATA_RECALL__RECIPES__{PLAIN.upper()}__TIME_CUES": "0",
}
_RECIPE = re.compile(r"STRATA_RECALL__RECIPES__([A-Z0-9]+)__([A-Z_]+)")


@dataclass(frozen=True, slots=True)
class Config:
    key: str
    label: str
    channels: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    rerank: str = ""
    recipe: str = ""


def configs(settings: dict[str, str]) -> list[Config]:
    """The rows: baselines, the full system, its ablations, then one per named recipe."""
    defaults = RecallSettings()
    weights = {
        c: float(
            settings.get(f"STRATA_RECALL__{c.upper()}_WEIGHT", getattr(defaults, f"{c}_weight"))
        )
        for c in CHANNELS
    }
    active = tuple(c for c in CHANNELS if weights[c] > 0)
    out = [
        Config("bm25", "BM25 only (keyword, chunks)", ("keyword",), ("episode_chunk",), "", PLAIN),
        Config("dense", "dense only (vector, chunks)", ("vector",), ("episode_chunk",), "", PLAIN),
        Config("full", "full system (default recipe)"),
    ]
    for c in CHANNELS:  # a channel the recipe leaves out joins at weight 1 (the API's rule)
        if c not in active:
            out.append(Config(f"with_{c}", f"full + {c} (weight 1)", (*active, c)))
        elif len(active) > 1:
            out.append(Config(f"no_{c}", f"full - {c}", tuple(x for x in active if x != c)))
    for kind in KINDS:  # what each Tier 3 kind adds
        out.append(
            Config(f"no_{kind}", f"full - {kind}", kinds=tuple(k for k in KINDS if k != kind))
        )
    out.append(Config("index", "full, index points only (no weaver outputs)", kinds=INDEX_KINDS))
    out.append(Config("rerank", "full + local rerank", rerank="local"))
    recipes: dict[str, list[str]] = {}
    for key, value in settings.items():
        if match := _RECIPE.fullmatch(key.upper()):
            recipes.setdefault(match[1].lower(), []).append(f"{match[2].lower()}={value}")
    out += [
        Config(f"recipe_{r}", f"recipe {r}: {', '.join(fields)}", recipe=r)
        for r, fields in recipes.items()
    ]
    return out


def default_recipe(settings: dict[str, str]) -> str:
    """The daemon's default recipe: the code's defaults with the ``--set`` values on top."""
    fields = ["vector_weight", "keyword_weight", "graph_weight", "rrf_k", "depth", "kinds"]
    fields += ["kind_weights", "merge_sources", "per_message", "order_sources", "mmr_lambda"]
    fields += ["speaker_neutral", "time_cues", "answers_first", "learned_fusion", "rerank"]
    defaults = RecallSettings()
    values = {f: settings.get(f"STRATA_RECALL__{f.upper()}", getattr(defaults, f)) for f in fields}
    return ", ".join(
        f"{f} {json.dumps(v) if isinstance(v, list) else v}" for f, v in values.items()
    )


def chunk_count(conversations: Sequence[Conversation], weaver: WeaverSettings) -> int:
    """How many ``episode_chunk`` points the index stage makes of these sessions."""
    n = 0
    for conv in conversations:
        for s in conv.sessions:
            turns = [Turn(i, t.speaker, "user", t.text, 0) for i, t in enumerate(s.turns, 1)]
            episode = EpisodeInput("", "", Scope(conv.user_id), turns)
            n += len(
                chunk(episode, weaver.chunk_turns, weaver.chunk_overlap, weaver.chunk_max_tokens)
            )
    return n


# -- ingest ------------------------------------------------------------------------------------
def ingest(client: MemoryClient, conversations: Sequence[Conversation]) -> dict[str, Any]:
    t0 = time.perf_counter()
    for conv in conversations:
        for session in conv.sessions:
            msgs = [
                message(
                    t.text,
                    "user",
                    name=t.speaker,
                    created_at=session.started_at,
                    metadata={"dia_id": t.dia_id},
                )
                for t in session.turns
            ]
            session_id = conv.session_id(session)
            client.append_batch(session_id, msgs, user_id=conv.user_id)
            client.end_session(session_id)
    appended = time.perf_counter() - t0
    print(f"  appended in {appended:.1f} s; consolidating ...", flush=True)
    report: Any = None
    for event in client.admin.run_weaver(timeout=None):
        if event.WhichOneof("event") == "report":
            report = event.report
    if report is None:
        raise RuntimeError("RunNow ended without a report")

    def settled() -> bool:
        status = client.admin.weaver_status()
        if status.unindexed == 0 and status.pending == 0 and not status.running:
            return True
        if status.last_error:
            raise RuntimeError(f"the weaver failed: {status.last_error}")
        return False

    wait_until(settled, 24 * 3600, "for the weaver to finish", interval=0.5)
    status = client.admin.weaver_status()  # the model and extractor that did the work
    fields = ("episodes", "chunks", "summaries", "facts", "triplets", "failures", "seconds")
    out: dict[str, Any] = {f: getattr(report, f) for f in fields}
    out.update(
        append_seconds=round(appended, 1),
        total_seconds=round(time.perf_counter() - t0, 1),
        error=report.error,
        model=status.embedding_model,
        extractor=status.extractor,
    )
    return out


# -- questions ---------------------------------------------------------------------------------
def ask(
    client: MemoryClient, cfg: Config, query: str, user_id: str, explain: bool = False
) -> tuple[Any, float]:
    t0 = time.perf_counter()
    response = client.recall(
        query,
        user_id=user_id,
        k=K,
        kinds=cfg.kinds,
        channels=cfg.channels,
        rerank=cfg.rerank,
        recipe=cfg.recipe,
        explain=explain,
        timeout=TIMEOUT,
    )
    return response, (time.perf_counter() - t0) * 1000.0


def evaluate(
    client: MemoryClient,
    conversations: Sequence[Conversation],
    cfgs: Sequence[Config],
    features: FeatureLog | None = None,
) -> dict[str, Any]:
    """Every question to every configuration, Pack and GetContext; with ``features``, the
    full system's hits' learned-fusion features recorded there."""
    first = conversations[0]
    for cfg in cfgs:  # warm-up: first calls load caches (entity names, the reranker, ...)
        for q in first.questions[:WARMUP_QUERIES]:
            ask(client, cfg, q.text, first.user_id)
    rows: dict[str, list[tuple[int, dict[str, float]]]] = {c.key: [] for c in cfgs}
    lat: dict[str, list[float]] = {c.key: [] for c in cfgs}
    kinds: dict[str, dict[str, int]] = {c.key: {} for c in cfgs}
    short: dict[str, int] = {c.key: 0 for c in cfgs}
    stages: list[dict[str, float]] = []
    pack_rows: dict[int, list[tuple[int, dict[str, float]]]] = {b: [] for b in BUDGETS}
    pack_size: dict[int, list[tuple[int, int]]] = {b: [] for b in BUDGETS}
    context = ContextMode()
    per_question: dict[str, dict[str, list[str]]] = {}
    total = sum(len(c.questions) for c in conversations)
    done = 0
    for conv in conversations:
        speakers = {normalize(t.speaker) for s in conv.sessions for t in s.turns}
        for q in conv.questions:
            per_question[q.qid] = {"gold": list(q.evidence)}
            for cfg in cfgs:
                record = features is not None and cfg.key == "full"
                response, ms = ask(client, cfg, q.text, conv.user_id, explain=record)
                ranked = m.dia_ids([s.metadata for s in h.sources] for h in response.hits)
                if record and features is not None:
                    keys = [m.dia_ids([[s.metadata for s in h.sources]]) for h in response.hits]
                    named = mentioned(q.text, speakers)
                    features.add(
                        conv.sample_id, q.qid, q.text, named, response.hits, keys, q.evidence,
                        category=q.category,
                    )  # fmt: skip
                rows[cfg.key].append((q.category, m.question_scores(ranked, q.evidence)))
                lat[cfg.key].append(ms)
                short[cfg.key] += len(ranked) < max(m.KS)
                for h in response.hits[:10]:
                    kinds[cfg.key][h.kind] = kinds[cfg.key].get(h.kind, 0) + 1
                if cfg.key == "full":
                    stages.append({t.stage: t.ms for t in response.timings})
                per_question[q.qid][cfg.key] = ranked[: max(m.KS)]
            for budget in BUDGETS:
                packed = client.pack(q.text, user_id=conv.user_id, max_tokens=budget)
                found = m.dia_ids([s.metadata for s in i.sources] for i in packed.items)
                score = {"recall": m.coverage(found, q.evidence)}
                pack_rows[budget].append((q.category, score))
                pack_size[budget].append((len(packed.items), packed.tokens))
                if budget == CONTEXT_BUDGET:
                    context.pack_by_conv.setdefault(conv.user_id, []).append(score["recall"])
            context.ask(client, conv.user_id, q.qid, q.text, q.category, q.evidence)
            done += 1
            if done % 100 == 0 or done == total:
                shown = "full" if "full" in rows else cfgs[0].key  # --skip full
                r10 = m.by_category(rows[shown])["overall"]["r@10"]
                print(f"  {done}/{total} questions; {shown} R@10 so far {r10:.1f}", flush=True)
    results = []
    for cfg in cfgs:
        n = max(1, len(lat[cfg.key]))
        results.append(
            {
                **asdict(cfg),
                "scores": m.by_category(rows[cfg.key]),
                "latency": m.latency(lat[cfg.key]),
                "top10_kinds": {k: round(v / n, 2) for k, v in sorted(kinds[cfg.key].items())},
                "short_lists": short[cfg.key],
            }
        )
    pack = {
        str(b): {
            "scores": m.by_category(pack_rows[b]),
            "items": round(sum(i for i, _ in pack_size[b]) / max(1, len(pack_size[b])), 1),
            "tokens": round(sum(t for _, t in pack_size[b]) / max(1, len(pack_size[b])), 1),
        }
        for b in BUDGETS
    }
    return {
        "configs": results,
        "stages": m.stage_timings(stages),
        "pack": pack,
        "context": context.report(),
        "per_question": per_question,
    }


# -- main --------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    fixes = load_fixes(FIXES) if args.fixed_evidence else {}
    data = load(LOCOMO, fixes=fixes, conversations=args.conversations)
    settings = parse_settings(args.set, args.features)
    weaver = WeaverSettings(
        chunk_turns=int(settings.get("STRATA_WEAVER__CHUNK_TURNS", 3)),
        chunk_overlap=int(settings.get("STRATA_WEAVER__CHUNK_OVERLAP", 1)),
        chunk_max_tokens=int(settings.get("STRATA_WEAVER__CHUNK_MAX_TOKENS", 200)),
    )
    label = ", ".join(f"{k.removeprefix('STRATA_')}={v}" for k, v in settings.items())
    params = {
        "label": args.label or label or "defaults",
        "settings": settings,
        "fixed_evidence": args.fixed_evidence,
        "conversations": len(data.conversations),
        "sessions": data.sessions,
        "turns": data.turns,
        "questions": data.questions,
        "skipped": data.skipped_no_evidence,
        "unresolved": data.unresolved_ids,
        "fixes_applied": data.fixes_applied,
        "k": K,
        "chunk_turns": weaver.chunk_turns,
        "chunk_overlap": weaver.chunk_overlap,
        "chunks": chunk_count(data.conversations, weaver),
        "index_turns": weaver.index_turns,
        "recipe": default_recipe(settings),
    }
    machine = machine_info()
    cfgs = [c for c in configs(settings) if c.key not in args.skip]
    print(f"starting a fresh daemon ({params['label']})", flush=True)
    with (
        running_daemon({**BASE_SETTINGS, **settings}) as daemon,
        MemoryClient(daemon.address, timeout=TIMEOUT) as client,
    ):
        print(f"  ingesting {data.sessions} sessions, {data.turns} turns ...", flush=True)
        ingest_figures = ingest(client, data.conversations)
        digest_figures = locomo_digests.measure(client, data.conversations)
        print(f"  digests: {json.dumps(digest_figures)}", flush=True)
        print(f"  asking {data.questions} questions x {len(cfgs)} configs + Pack ...", flush=True)
        log = FeatureLog("locomo") if args.features else None
        figures = evaluate(client, data.conversations, cfgs, log)
        if log is not None:
            log.write(args.features)
    return {
        "benchmark": "locomo_recall",
        "machine": machine,
        "params": params,
        "ingest": ingest_figures,
        "digests": digest_figures,
        **figures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.locomo", __doc__)
    parser.add_argument(
        "--fixed-evidence", action="store_true", help="apply evidence_fixes_dev.json"
    )
    parser.add_argument(
        "--conversations", type=int, default=0, help="only the first N conversations"
    )
    parser.add_argument(
        "--skip", action="append", default=[], metavar="KEY", help="leave out a configuration"
    )
    add_common(parser, DOCS)
    return finish(parser.parse_args(argv), run, render, write_docs)


if __name__ == "__main__":
    raise SystemExit(main())

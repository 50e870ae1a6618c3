"""Throughput of the Memory Weaver on LoCoMo: raw embedding, the index stage, consolidation.

Run as ``python -m tests.bench.weaver``. Needs the LoCoMo file of the shared data
beside the checkout (``../shared/data/locomo/locomo_dev.json``). Measures, in this order:

1. **Raw embedding**: every LoCoMo turn as ``"Speaker: text"`` (plus ``" [shares a photo of
   <caption>]"`` when the turn has one) through ``encode_documents`` of the daemon's model, in
   batches of the embedding batch size, at the daemon's thread setting and at 2 threads, after
   a warm-up batch; the median of ``--repeats`` runs. The same for the texts the index stage
   actually embeds (``weaver.chunk_turns``-turn windows with ``weaver.chunk_overlap`` turns of
   overlap), so the cost of chunking can be told from the cost of the pipeline.
2. **Index stage in process**: the stores of ``daemon/app.py`` in a temporary directory, the
   journal loaded with every LoCoMo session as an ended episode first, then
   ``Indexer.index(all episode ids)`` alone: one embedding batch, BM25 vectors, the upsert and
   the journal marks, with nothing else running.
3. **Index stage through the daemon**: a fresh ``stratad`` (scheduled consolidation and
   optimize pushed out to an hour), a warm-up session indexed first, then every LoCoMo session
   as one session (``AppendBatch`` of its turns, then ``EndSession``), one ``user_id`` per
   conversation. The interval runs from the first ``EndSession`` until
   ``WeaverStatus.unindexed`` is 0 (polled every 50 ms); ingest goes on during the first part
   of it, since the indexer starts with the first ended session.
4. **Consolidation** with the local back-end: ``RunNow`` over those episodes in the same daemon;
   the figures come from the run's report (``seconds``, ``episodes``, ``facts``).

Target (printed, not asserted): the index stage through the daemon at >= 80 % of the raw
embedding throughput of the turns at the daemon's thread setting.

Parts 1 and 2 are in :mod:`tests.bench.weaver.in_process`, 3 and 4 in
:mod:`tests.bench.weaver.daemon`, the sessions they feed in :mod:`tests.bench.weaver.inputs`;
this module runs them and prints the report.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from pathlib import Path
from typing import Any

from tests.bench.support.daemon import command_line, format_machine, machine_info, write_figures
from tests.bench.weaver.daemon import through_daemon
from tests.bench.weaver.in_process import index_in_process, raw_embedding
from tests.bench.weaver.inputs import chunk_texts, locomo_sessions
from tiers.settings import EmbeddingSettings
from weaver.settings import WeaverSettings

TARGET_RATIO = 0.8


# -- report ------------------------------------------------------------------------------------
def _mark(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(machine: dict[str, Any], params: dict[str, Any], results: dict[str, Any]) -> str:
    raw = results["raw_embedding"]
    base = next(r for r in raw if r["kind"] == "turns" and r["threads"] == params["threads"])
    lines = [
        "Strata weaver throughput on LoCoMo (locomo_dev.json)",
        format_machine(machine),
        f"model      {params['model']} ({params['backend']}), batch size {params['batch_size']}, "
        f"daemon threads {params['threads']}",
        f"data       {params['sessions']} sessions, {params['turns']} turns; chunks of "
        f"{params['chunk_turns']} turns, overlap {params['chunk_overlap']}: "
        f"{params['chunks']} chunks",
        "",
        f"Raw embedding (encode_documents, median of {params['repeats']} runs after a warm-up)",
        f"  {'texts':<7} {'threads':>7} {'count':>6} {'seconds':>8} {'texts/s':>8} "
        f"{'range':>13} {'turns/s':>8}",
    ]
    for r in raw:
        rng = f"{r['worst_texts_per_s']:.0f}-{r['best_texts_per_s']:.0f}"
        lines.append(
            f"  {r['kind']:<7} {r['threads']:>7} {r['texts']:>6} {r['seconds']:>8.2f} "
            f"{r['texts_per_s']:>8.1f} {rng:>13} {r['turns_per_s']:>8.1f}"
        )
    lines.append("  (turns/s: LoCoMo turns covered per second; a chunk covers 3 turns, 1 shared)")
    target = TARGET_RATIO * base["turns_per_s"]
    lines += ["", "Index stage (turns of all episodes / seconds)"]
    ip = results.get("index_in_process")
    if ip is not None:
        lines.append(
            f"  in process, Indexer.index(all {ip['episodes']} episodes) alone: "
            f"{ip['seconds']:.2f} s = {ip['turns_per_s']:.1f} turns/s "
            f"({ip['points_per_s']:.1f} points/s), {ip['turns_per_s'] / base['turns_per_s']:.0%} "
            f"of raw; embedding {ip['embed_seconds']:.2f} s, the rest "
            f"{ip['other_seconds']:.2f} s; torch threads {ip['torch_threads_seen']}"
        )
    d = results.get("daemon")
    if d is not None:
        ix = d["index"]
        lines += [
            f"  through the daemon: first EndSession -> unindexed == 0: "
            f"{ix['interval_seconds']:.2f} s = {ix['turns_per_s']:.1f} turns/s, "
            f"{ix['turns_per_s'] / base['turns_per_s']:.0%} of raw   "
            f"target >= {target:.0f} turns/s: {_mark(ix['turns_per_s'] >= target)}",
            f"    ingest (AppendBatch + EndSession per session, during the interval): "
            f"{ix['ingest_seconds']:.2f} s; indexing went on {ix['after_ingest_seconds']:.2f} s "
            f"after the last EndSession; daemon CPU {ix['daemon_cpu_percent']:.0f}% of one core",
        ]
        c = d["consolidation"]
        lines += [
            "",
            "Consolidation, local back-end (RunNow over the LoCoMo episodes, from its report)",
            f"  {c['episodes']} episodes in {c['seconds']:.2f} s = "
            f"{c['episodes_per_min']:.1f} episodes/min; {c['facts']} facts = "
            f"{c['facts_per_s']:.1f} facts/s; {c['summaries']} summaries, {c['triplets']} "
            f"triplets, {c['superseded']} superseded, {c['failures']} failures",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.weaver", __doc__)
    defaults = EmbeddingSettings()
    parser.add_argument("--backend", choices=("torch", "onnx-int8"), default=defaults.backend)
    parser.add_argument(
        "--threads",
        type=int,
        default=defaults.threads,
        help=f"the daemon's embedding.threads (default {defaults.threads})",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per raw embedding figure (default 3)"
    )
    parser.add_argument(
        "--sessions", type=int, default=0, help="only the first N LoCoMo sessions (default all)"
    )
    parser.add_argument("--no-daemon", action="store_true", help="skip the daemon measurement")
    parser.add_argument(
        "--no-in-process", action="store_true", help="skip the in-process index measurement"
    )
    args = parser.parse_args(argv)

    sessions = locomo_sessions(args.sessions)
    embedding = defaults.model_copy(update={"backend": args.backend})
    weaver = WeaverSettings()
    machine = machine_info()
    thread_settings = sorted({args.threads, 2})
    params = {
        "model": embedding.model,
        "backend": embedding.backend,
        "batch_size": embedding.batch_size,
        "threads": args.threads,
        "repeats": args.repeats,
        "sessions": len(sessions),
        "turns": sum(len(s.turns) for _, s in sessions),
        "chunks": len(chunk_texts(sessions, weaver)),
        "chunk_turns": weaver.chunk_turns,
        "chunk_overlap": weaver.chunk_overlap,
        "chunk_max_tokens": weaver.chunk_max_tokens,
    }
    results: dict[str, Any] = {"phases": {}}

    def phase(name: str) -> None:
        """When each part started, and the load then: to match against other work."""
        results["phases"][name] = {
            "started_utc": dt.datetime.now(dt.UTC).strftime("%H:%M:%S"),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }

    with tempfile.TemporaryDirectory(prefix="strata-bench-models-") as models:
        print("raw embedding", flush=True)
        phase("raw_embedding")
        results["raw_embedding"] = raw_embedding(
            sessions, embedding, weaver, thread_settings, args.repeats, Path(models)
        )
        if not args.no_in_process:
            print("index stage in process", flush=True)
            phase("index_in_process")
            results["index_in_process"] = index_in_process(
                sessions, embedding, weaver, args.threads, Path(models)
            )
    if not args.no_daemon:
        print("index stage and consolidation through a fresh daemon", flush=True)
        phase("daemon")
        results["daemon"] = through_daemon(sessions, embedding, args.threads)

    print()
    print(report(machine, params, results))
    targets = {"index_vs_raw_turns_per_s": TARGET_RATIO}
    write_figures(args.json, "weaver_throughput", machine, params, results, targets)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

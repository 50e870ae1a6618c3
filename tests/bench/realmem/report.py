"""The printed tables of the RealMem recall benchmark (:mod:`tests.bench.realmem`), plain for
the terminal or Markdown for ``docs/benchmarks.md``, from the figures of one run."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

from tests.bench.locomo.metrics import table
from tests.bench.support.daemon import format_machine
from tests.support import ROOT

DOCS = ROOT / "docs" / "benchmarks.md"
MODULE = "tests.bench.realmem"
AFTER = "tests.bench.locomo"  # the section this one follows (LoCoMo retrieval)
DOCS_HEADING = f"## RealMem retrieval (`make bench-recall`: `python -m {MODULE}`)"
DOCS_INTRO = (
    "Session recall on the five RealMem personas of ../shared (user <-> assistant "
    "conversations about long-running projects; the labels are the sessions the generator's "
    "assistant used) through the gRPC API: every session appended and ended in the file's "
    "order as an agent would, the weaver indexing each within seconds; before each query turn, "
    "once the ended sessions are indexed, Recall (k = 50, the query turn's text, time range "
    "ending at its session) and GetContext of the live session (the query turn appended, no "
    "query, 1,500 tokens). A hit counts for the RealMem sessions of its sources, distinct, in "
    "rank order, the query's own session left out; R@k is the fraction of the gold sessions "
    "among the first k, any@5 the share of queries with a gold session among the first 5. "
    "BM25 is the plain reference of ../shared/README.md computed by the benchmark."
)
# ../shared/README.md: plain Okapi BM25 per turn over the sessions before the query.
REFERENCE = {"r@5": 48.5, "r@10": 62.3, "any@5": 58.4}
HEADER = [
    "persona", "queries", "R@5", "R@10", "any@5", "GetContext", "BM25 R@5", "BM25 R@10",
    "BM25 any@5", "Recall p50 ms", "GetContext p50 ms",
]  # fmt: skip


def _row(name: str, s: dict[str, Any]) -> list[Any]:
    r, b = s["recall"], s["bm25"]
    return [
        name, s["n"], r["r@5"], r["r@10"], r["any@5"], s["context"], b["r@5"], b["r@10"],
        b["any@5"], s["recall_latency"]["p50_ms"], s["context_latency"]["p50_ms"],
    ]  # fmt: skip


def render(res: dict[str, Any], markdown: bool) -> str:
    p, t, c = res["params"], res["timing"], res["checks"]
    setting_text = ", ".join(f"`{k}={v}`" for k, v in p["settings"].items()) or "defaults"
    moved = ", ".join(f"{n} of {who}" for who, n in p["moved_sessions"].items()) or "none"
    facts = (
        f"{len(p['personas'])} persona{'s' if len(p['personas']) > 1 else ''}, "
        f"{p['sessions']:,} sessions, {p['turns']:,} turns "
        f"({p['empty_turns']} empty ones left out); {p['queries']} queries with "
        f"{p['gold_sessions']:,} gold sessions ({p['skipped_no_gold']} skipped without gold, "
        f"{p['own_dropped']} naming their own session, dropped from the gold); sessions dated "
        f"before the one before them, moved after it: {moved}; Recall k = {p['k']}, GetContext "
        f"{p['budget']:,} tokens"
    )
    mode = "RunNow before each query" if p["consolidate"] else "index only, no RunNow"
    phases = ", ".join(
        f"{ph} {t[ph]:.0f} s" for ph in ("append", "end", "wait", "consolidate", "recall",
                                         "context", "bm25") if t.get(ph)
    )  # fmt: skip
    run = f"{t['total']:.0f} s ({phases})"
    if "index_texts" in p:
        x = p["index_texts"]
        texts = x["turns"] + x["chunks"]
        run += (
            f"; the index stage embeds {texts:,} texts ({x['turns']:,} turns, {x['chunks']:,} "
            f"chunks, {x['one_turn_chunks']:,} of them a single turn past the chunk's token "
            f"limit), {texts / max(1.0, t['wait']):.1f} per second waited"
        )
    kinds = c["top10_kinds"]
    n = max(1, res["pooled"]["n"])
    mix = ", ".join(f"{k} {v / n:.1f}" for k, v in sorted(kinds.items()))
    check = (
        f"episodes per persona as sessions ended: {sum(c['episodes'].values()):,}; hits citing "
        f"the live session: {c['own_hits']}; top-10 kinds per query: {mix}"
    )
    m = res["machine"]
    if markdown:
        lines = [
            f"### {m['date_utc']}: {p['label']}",
            "",
            textwrap.fill(
                f"{m['cpu']}, {m['cores']} cores, Python {m['python']}; load average "
                f"{m['load_average'][0]:.2f} at the start. Model {p['model']}, {mode}. Daemon "
                f"settings: {setting_text}. Data: {facts}. Run: {run}. Checks: {check}.",
                width=95,
                break_on_hyphens=False,
            ),
            "",
        ]
    else:
        lines = [
            "Strata session recall on RealMem (../shared/data/realmem), through the gRPC API",
            format_machine(m),
            f"model      {p['model']} ({mode})",
            f"settings   {setting_text.replace('`', '')}",
            *textwrap.wrap(f"data       {facts}", 95, subsequent_indent=" " * 11),
            *textwrap.wrap(f"run        {run}", 95, subsequent_indent=" " * 11),
            *textwrap.wrap(f"checks     {check}", 95, subsequent_indent=" " * 11),
            "",
        ]
    rows = [_row(name, s) for name, s in res["personas"].items()]
    rows.append(_row("pooled (all queries)", res["pooled"]))
    blank = [""] * 5
    rows.append(["BM25, ../shared/README.md (5 personas)", *blank, *REFERENCE.values(), "", ""])
    title = (
        "Session recall (% of gold sessions among the first k distinct sessions; any@5: % of "
        "queries with one in the first 5; GetContext: % of gold sessions among its memories):"
    )
    note = (
        "Latency client-side, per call. BM25: plain Okapi BM25 over the turns before the "
        "query's session, computed by the benchmark, beside the README's figure."
    )
    if markdown:
        lines += [textwrap.fill(title, 95), "", table(HEADER, rows, markdown=True), ""]
        lines.append(textwrap.fill(note, 95))
    else:
        lines += [title, table(HEADER, rows), textwrap.indent(textwrap.fill(note, 93), "  ")]
    pooled = res["pooled"]
    closing = (
        f"GetContext used {pooled['context_tokens']:.0f} tokens and held "
        f"{pooled['context_memories']:.1f} memories on average."
    )
    if res.get("stages"):
        stages = ", ".join(
            f"{name} {v['mean_ms']:.1f} / {v['p50_ms']:.1f}" for name, v in res["stages"].items()
        )
        closing += f" Recall's server-side stages (mean / p50 ms): {stages}."
    lines += ["", textwrap.fill(closing, 95)]
    return "\n".join(lines).rstrip() + "\n"


def _section_end(lines: list[str], start: int) -> int:
    """The line after section ``start``'s last non-blank line."""
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end


def write_docs(res: dict[str, Any], path: Path = DOCS) -> None:
    """Add this run's tables as a subsection at the end of the RealMem section; without one,
    the section is made right after the LoCoMo retrieval section (or at the end of the file).
    Nothing else in the file changes."""
    lines = path.read_text().rstrip("\n").split("\n")
    block = render(res, markdown=True).rstrip("\n").split("\n")

    def heading(module: str) -> int | None:
        command = re.compile(rf"python -m {re.escape(module)}[ `]")
        found = (i for i, x in enumerate(lines) if x.startswith("## ") and command.search(x))
        return next(found, None)

    start = heading(MODULE)
    if start is not None:
        end = _section_end(lines, start)
        new = ["", *block]
    else:
        after = heading(AFTER)
        end = len(lines) if after is None else _section_end(lines, after)
        new = ["", DOCS_HEADING, "", *textwrap.wrap(DOCS_INTRO, 95), "", *block]
    lines[end:end] = [*new, *([""] if end < len(lines) else [])]
    path.write_text("\n".join(lines) + "\n")
    print(f"appended to {path}")

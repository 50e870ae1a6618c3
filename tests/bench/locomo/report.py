"""The printed tables of the LoCoMo recall benchmark (:mod:`tests.bench.locomo`), plain for the
terminal or Markdown for ``docs/benchmarks.md``, from the figures of one run."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from tests.bench.locomo import metrics as m
from tests.bench.locomo.data import CATEGORIES
from tests.bench.support.daemon import format_machine
from tests.support import ROOT

DOCS = ROOT / "docs" / "benchmarks.md"
MODULE = "tests.bench.locomo"
DOCS_HEADING = f"## LoCoMo retrieval (`make bench-recall`: `python -m {MODULE} --fixed-evidence`)"
DOCS_INTRO = (
    "Evidence recall on the LoCoMo dev split through the gRPC API: every session appended and "
    "consolidated as an agent would, then every question asked with Recall (k = 50) and Pack; "
    "a hit counts for the LoCoMo turns of its sources, flattened in rank order."
)
# The README of ../shared: plain Okapi BM25, one document per turn.
REFERENCE = "plain BM25 per turn (shared/README): R@5 53.2, R@10 60.6, R@25 67.9, multi-hop 27.6"
TARGETS = {"r@5": 75.0, "r@10": 85.0, "multi-hop r@10": 60.0}


TOP10_KINDS = ("episode_chunk", "episode_turn", "summary", "fact", "profile")
HEADER = ["configuration", "R@1", "R@5", "R@10", "R@25", "multi-hop R@10", "nDCG@10"]


def _row(c: dict[str, Any]) -> list[Any]:
    s, o = c["scores"], c["scores"]["overall"]
    kinds = c["top10_kinds"]
    mix = "/".join(f"{kinds.get(k, 0.0):.1f}" for k in TOP10_KINDS)
    return [
        c["label"].partition(": ")[0],
        o["r@1"],
        o["r@5"],
        o["r@10"],
        o["r@25"],
        s.get("multi-hop", {}).get("r@10", float("nan")),
        o["ndcg@10"],
        c["latency"]["p50_ms"],
        c["latency"]["p95_ms"],
        mix,
    ]


def targets(res: dict[str, Any]) -> list[str]:
    by_key = {c["key"]: c["scores"] for c in res["configs"]}
    full = by_key["full"]
    overall = full["overall"]
    checks = [
        (f"R@5 >= {TARGETS['r@5']:g}", overall["r@5"], overall["r@5"] >= TARGETS["r@5"]),
        (f"R@10 >= {TARGETS['r@10']:g}", overall["r@10"], overall["r@10"] >= TARGETS["r@10"]),
    ]
    if "multi-hop" in full:
        mh, goal = full["multi-hop"]["r@10"], TARGETS["multi-hop r@10"]
        checks.append((f"multi-hop R@10 > {goal:g}", mh, mh > goal))
    out = [f"{name}: {value:.1f} {'met' if ok else 'MISSED'}" for name, value, ok in checks]
    metrics = ("r@1", "r@5", "r@10", "r@25", "ndcg@10")
    for base in (b for b in ("bm25", "dense") if b in by_key):  # unless --skip left it out
        lost = [x for x in metrics if overall[x] <= by_key[base]["overall"][x]]
        verdict = "met" if not lost else "MISSED at " + ", ".join(lost)
        out.append(f"full system beats {base} on R@1/5/10/25 and nDCG@10: {verdict}")
    return out


def render(res: dict[str, Any], markdown: bool) -> str:
    p, ing = res["params"], res["ingest"]
    own = {k: v for k, v in p["settings"].items() if "__RECIPES__" not in k}
    setting_text = ", ".join(f"`{k}={v}`" for k, v in own.items()) or "defaults"
    fixed = "with the audit's corrections" if p["fixed_evidence"] else "as published"
    facts = (
        f"{p['conversations']} conversations, {p['sessions']} sessions, {p['turns']:,} turns; "
        f"{p['questions']} questions with evidence {fixed} ({p['fixes_applied']} corrected, "
        f"{p['skipped']} skipped without resolvable evidence, {len(p['unresolved'])} ids "
        f"unresolved); Recall k = {p['k']}"
    )
    weaver = (
        f"{p['chunks']:,} chunks of {p['chunk_turns']} turns, overlap {p['chunk_overlap']}"
        f"{', and every turn alone' if p.get('index_turns') else ''} (indexed at EndSession); "
        "ingest "
        f"{ing['append_seconds']:.0f} s, then RunNow: {ing['episodes']} episodes, "
        f"{ing['summaries']} summaries, {ing['facts']:,} facts, "
        f"{ing['triplets']} triplets, {ing['failures']} failures in {ing['seconds']:.0f} s "
        f"({ing['extractor']} extractor)"
    )
    model = f"{ing['model']}"
    recipe = p.get("recipe", "not recorded")
    if markdown:
        lines = [
            f"### {res['machine']['date_utc']}: {p['label']}",
            "",
            textwrap.fill(
                f"{res['machine']['cpu']}, {res['machine']['cores']} cores, Python "
                f"{res['machine']['python']}; load average "
                f"{res['machine']['load_average'][0]:.2f} at the start. Model {model}. Daemon "
                f"settings: {setting_text}. Default recipe: {recipe}. Data: {facts}. "
                f"Weaver: {weaver}.",
                width=95,
                break_on_hyphens=False,
            ),
            "",
        ]
    else:
        lines = [
            "Strata evidence recall on LoCoMo (locomo_dev.json), through the gRPC API",
            format_machine(res["machine"]),
            f"model      {model}",
            f"settings   {setting_text.replace('`', '')}",
            f"recipe     {recipe}",
            f"data       {facts}",
            f"weaver     {weaver}",
            "",
        ]

    def add(title: str, header: list[str], rows: list[list[Any]], note: str = "") -> None:
        lines.extend([title, "", m.table(header, rows, markdown)] if markdown else [title])
        if not markdown:
            lines.append(m.table(header, rows))
        if note:
            wrapped = textwrap.fill(note, width=95, break_on_hyphens=False)
            lines.extend(["", wrapped] if markdown else [textwrap.indent(wrapped, "  ")])
        lines.append("")

    recipes = [c["label"] for c in res["configs"] if c["key"].startswith("recipe_")]
    add(
        "Evidence recall (% of gold turn ids among the first k turn ids), all questions:",
        [*HEADER, "p50 ms", "p95 ms", "top-10 chunk/turn/summary/fact/profile"],
        [_row(c) for c in res["configs"]],
        "; ".join([*recipes, f"reference, {REFERENCE}", "latency: client-side, per Recall."]),
    )
    by_key = {c["key"]: c["scores"] for c in res["configs"]}
    cats = [c for c in [*CATEGORIES.values(), "overall"] if c in by_key["full"]]
    add(
        "Full system by category (BM25 and dense R@10 beside it):",
        ["category", "n", "R@1", "R@5", "R@10", "R@25", "nDCG@10", "BM25 R@10", "dense R@10"],
        [
            [
                c,
                *(by_key["full"][c][x] for x in ("n", "r@1", "r@5", "r@10", "r@25", "ndcg@10")),
                *(by_key[k][c]["r@10"] if k in by_key else "skipped" for k in ("bm25", "dense")),
            ]
            for c in cats
        ],
    )
    add(
        "Pack (default recipe): % of gold turn ids among the packed items' sources:",
        ["budget (tokens)", "items", "tokens used", *cats],
        [
            [b, v["items"], v["tokens"], *(v["scores"][c]["recall"] for c in cats)]
            for b, v in res["pack"].items()
        ],
    )
    if "context" in res:
        ctx = res["context"]
        lat = ctx["latency"]
        add(
            f"GetContext, no query, {ctx['budget']} tokens (a new session holding the question):"
            " % of gold turn ids among the memories' sources, beside Pack at the same budget:",
            ["call", "tokens used", "p50 ms", "p95 ms", *cats],
            [
                ["GetContext", ctx["tokens"], lat["p50_ms"], lat["p95_ms"],
                 *(ctx["scores"][c]["recall"] for c in cats)],
                ["Pack", res["pack"][str(ctx["budget"])]["tokens"], "", "",
                 *(res["pack"][str(ctx["budget"])]["scores"][c]["recall"] for c in cats)],
            ],
        )  # fmt: skip
        add(
            "Each conversation held out (nothing in GetContext was tuned on the split):",
            ["conversation", "GetContext", "Pack"],
            [[u, v["context"], v["pack"]] for u, v in ctx["per_conversation"].items()],
        )
    add(
        "Server-side stages of the full system's Recall (ms):",
        ["stage", "requests", "mean", "p50"],
        [[s, v["n"], v["mean_ms"], v["p50_ms"]] for s, v in res["stages"].items()],
    )
    checks = targets(res)
    if markdown:
        lines.append(textwrap.fill("Targets: " + "; ".join(checks) + ".", width=95))
    else:
        lines += ["Targets", *(f"  {c}" for c in checks)]
    return "\n".join(lines).rstrip() + "\n"


def write_docs(res: dict[str, Any], path: Path = DOCS) -> None:
    """Add this run's tables as a subsection at the end of the LoCoMo section (created at the
    end of the file if there is none); nothing else in the file changes."""
    lines = path.read_text().rstrip("\n").split("\n")
    block = render(res, markdown=True).rstrip("\n").split("\n")
    start = next(
        (i for i, line in enumerate(lines) if line.startswith("## ") and MODULE in line), None
    )
    if start is None:
        lines += ["", DOCS_HEADING, "", *textwrap.wrap(DOCS_INTRO, 95), "", *block]
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
        )
        while end > start and not lines[end - 1].strip():
            end -= 1
        lines[end:end] = ["", *block, *([""] if end < len(lines) else [])]
    path.write_text("\n".join(lines) + "\n")
    print(f"appended to {path}")

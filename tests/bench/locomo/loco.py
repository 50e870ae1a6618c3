"""Leave-one-conversation-out for a setting chosen on the LoCoMo dev split.

Reads a ``python -m tests.bench.locomo --json`` result and the names of the rows that are
the candidates (the first is the shipped default, e.g. ``full``, then named recipes such as
``recipe_imp125``). For each conversation, the candidate with the best R@10 on the other
conversations (ties: the earlier candidate) is scored on the held-out one; the pooled
held-out figures are what the choice is worth on a conversation it never saw.

    python -m tests.bench.locomo.loco /tmp/bench.json full recipe_imp125 recipe_imp150
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.bench.locomo import metrics as m
from tests.bench.locomo.data import FIXES, LOCOMO, load, load_fixes
from tests.bench.support.daemon import command_line

MULTI_HOP = 1  # LoCoMo's category number of multi-hop questions


def conversation_of(qid: str) -> str:
    return qid.split("_qa")[0]


def scores(
    res: dict[str, Any], key: str, qids: Sequence[str], category: dict[str, int]
) -> dict[str, dict[str, float]]:
    rows = []
    for qid in qids:
        entry = res["per_question"][qid]
        rows.append((category[qid], m.question_scores(entry[key], entry["gold"])))
    return m.by_category(rows)


def loco(res: dict[str, Any], candidates: Sequence[str]) -> dict[str, Any]:
    data = load(LOCOMO, fixes=load_fixes(FIXES) if res["params"]["fixed_evidence"] else {})
    category = {q.qid: q.category for c in data.conversations for q in c.questions}
    qids = [q for q in res["per_question"] if q in category]
    convs = sorted({conversation_of(q) for q in qids})
    multi = m.CATEGORIES[MULTI_HOP]
    folds = []
    held_out: list[str] = []
    chosen_for: dict[str, str] = {}
    for conv in convs:
        train = [q for q in qids if conversation_of(q) != conv]
        best = max(
            candidates,
            key=lambda c: (
                scores(res, c, train, category)["overall"]["r@10"],
                -candidates.index(c),
            ),
        )
        test = [q for q in qids if conversation_of(q) == conv]
        s = scores(res, best, test, category)
        folds.append(
            {
                "conversation": conv,
                "chosen": best,
                "r@5": s["overall"]["r@5"],
                "r@10": s["overall"]["r@10"],
                "multi_hop_r@10": s.get(multi, {}).get("r@10", 0.0),
            }
        )
        chosen_for[conv] = best
        held_out += test
    pooled_rows = [
        (
            category[q],
            m.question_scores(
                res["per_question"][q][chosen_for[conversation_of(q)]],
                res["per_question"][q]["gold"],
            ),
        )
        for q in held_out
    ]
    pooled = m.by_category(pooled_rows)
    whole = {c: scores(res, c, qids, category) for c in candidates}
    return {"folds": folds, "pooled": pooled, "whole": whole}


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.locomo.loco", __doc__, figures=False)
    parser.add_argument("result", type=Path, help="a tests.bench.locomo --json result")
    parser.add_argument("candidates", nargs="+", help="row keys; the first is the default")
    args = parser.parse_args(argv)
    res = json.loads(args.result.read_text())
    out = loco(res, args.candidates)
    multi = m.CATEGORIES[MULTI_HOP]
    print("whole split (R@5 / R@10 / multi-hop R@10):")
    for c, s in out["whole"].items():
        o = s["overall"]
        print(f"  {c}: {o['r@5']} / {o['r@10']} / {s.get(multi, {}).get('r@10', 0.0)}")
    header = ["held-out conversation", "chosen on the others", "R@5", "R@10", "multi-hop R@10"]
    rows = [
        [f["conversation"], f["chosen"], f["r@5"], f["r@10"], f["multi_hop_r@10"]]
        for f in out["folds"]
    ]
    print(m.table(header, rows, markdown=True))
    p = out["pooled"]
    print(
        f"pooled held-out: R@5 {p['overall']['r@5']}, R@10 {p['overall']['r@10']}, "
        f"multi-hop R@10 {p.get(multi, {}).get('r@10', 0.0)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

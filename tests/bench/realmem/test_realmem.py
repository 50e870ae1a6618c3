"""The RealMem benchmark's reader and metrics (:mod:`tests.bench.realmem.data`,
:mod:`tests.bench.realmem.metrics`, :mod:`tests.bench.realmem.report`) on a tiny persona
written for this test: no daemon, no shared data."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from tests.bench.realmem import data as data
from tests.bench.realmem import metrics as m
from tests.bench.realmem import report as report


def turn(speaker: str, content: str, is_query: Any = False, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "content": content, "is_query": is_query, **extra}


def session(uuid: str, day: str, *turns: dict[str, Any]) -> dict[str, Any]:
    return {
        "session_identifier": f"Test:{uuid}",
        "session_uuid": uuid,
        "current_time": day,
        "dialogue_turns": list(turns),
        "extracted_memory": [],
    }


DOC = {
    "_metadata": {"person_name": "Tess"},
    "dialogues": [
        session(
            "aaa",
            "2025-12-20 (Saturday)",
            turn("User", "I am planning a trip to Lisbon in March."),
            turn("Assistant", "Lisbon in March is mild; pack a light jacket."),
        ),
        session(
            "bbb",
            "2025-12-20 (Saturday)",  # the same day: an hour after aaa
            turn("User", "My budget for the trip is 900 euros."),
            turn("Assistant", ""),  # empty: left out
        ),
        session(
            "ccc",
            "2025-12-19 (Friday)",  # dated before bbb: moved after it
            turn("User", "Hi again."),
            turn("Assistant", "Hello!"),
            # a string "True", its gold a list written as a string, naming its own session
            turn("User", "Remind me of my budget?", "True", query_id="Q-1"),
            turn("Assistant", "900 euros.", memory_session_uuids="['bbb', 'ccc', 'bbb']"),
            # a JSON boolean, its gold a list
            turn("User", "And when do I go?", True),
            turn("Assistant", "In March.", memory_session_uuids=["aaa"]),
            # its gold is its own session only: skipped
            turn("User", "What did I just say?", True),
            turn("Assistant", "Hi again.", memory_session_uuids="['ccc']"),
            # not a query: an Assistant turn's memories alone do not make one
            turn("User", "Thanks."),
            turn("Assistant", "Enjoy!", memory_session_uuids=["aaa"]),
        ),
    ],
}


@pytest.fixture(scope="module")
def persona() -> data.Persona:
    return data.read_persona("Tess", DOC)


def test_queries_and_their_gold(persona: data.Persona) -> None:
    last = persona.sessions[-1]
    assert [(q.turn, q.text, q.gold) for q in last.queries] == [
        (2, "Remind me of my budget?", ("bbb",)),
        (4, "And when do I go?", ("aaa",)),
    ]
    assert last.queries[0].query_id == "Q-1"
    assert last.queries[0].qid == "Tess/ccc/2"
    assert (persona.queries, persona.skipped_no_gold, persona.own_dropped) == (2, 1, 2)
    assert persona.not_earlier == 0
    assert all(not s.queries for s in persona.sessions[:2])


def test_turns_times_and_ids(persona: data.Persona) -> None:
    assert persona.empty_turns == 1
    assert [len(s.turns) for s in persona.sessions] == [2, 1, 10]
    assert [t.role for t in persona.sessions[0].turns] == ["user", "assistant"]
    day = dt.datetime(2025, 12, 20, tzinfo=dt.UTC) + data.DAY_START
    assert [s.at for s in persona.sessions] == [day, day + data.SESSION_GAP,
                                                day + 2 * data.SESSION_GAP]  # fmt: skip
    assert persona.moved == 1  # ccc; bbb shares aaa's day, which is no move
    last = persona.sessions[-1]
    assert last.turn_time(last.turns[3]) == last.at + dt.timedelta(seconds=3)
    assert persona.user_id == "realmem-Tess"
    assert persona.session_id(last) == "realmem-Tess-ccc"


def test_parse_uuids() -> None:
    assert data.parse_uuids("['a', 'b']") == ["a", "b"]
    assert data.parse_uuids(["a"]) == ["a"]
    assert data.parse_uuids("'a'") == ["a"]
    assert data.parse_uuids(None) == data.parse_uuids("") == []
    assert data.is_true("True") and data.is_true(True)
    assert not data.is_true("False") and not data.is_true(False)


def test_distinct_sessions_in_rank_order() -> None:
    hits = [
        [({"session": "live"}, "s-live")],  # the query's own session: left out
        [({"session": "b"}, "s-b"), ({"session": "a"}, "s-a")],
        [({}, "s-c")],  # no metadata: the session id's mapping
        [({"session": "b"}, "s-b")],  # seen already
        [({}, "unknown")],  # neither: nothing
        [({"session": "d"}, "s-d")],
    ]
    ranked = m.sessions(hits, "live", {"s-c": "c"})
    assert ranked == ["b", "a", "c", "d"]
    gold = ["a", "d", "z"]
    scores = m.query_scores(ranked, gold)
    assert scores == {"r@5": pytest.approx(2 / 3), "r@10": pytest.approx(2 / 3), "any@5": 1.0}
    assert m.query_scores(["b", "c"], gold)["any@5"] == 0.0
    assert m.coverage({"a", "q"}, gold) == pytest.approx(1 / 3)


def test_bm25_ranks_sessions() -> None:
    bm25 = m.BM25()
    assert bm25.ranked_sessions("anything") == []
    bm25.add("x", "The budget is 900 euros.")
    bm25.add("y", "Lisbon in March: a light jacket.")
    bm25.add("x", "Trams in Lisbon are old.")
    assert m.tokens("Lisbon's TRAMS, 900!") == ["lisbon's", "trams", "900"]
    assert bm25.ranked_sessions("what budget in euros") == ["x", "y"]
    assert bm25.ranked_sessions("Lisbon in March") == ["y", "x"]
    assert bm25.ranked_sessions("nothing matches") == []


def test_write_docs_places_the_section_after_locomo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "benchmarks.md"
    locomo = "## LoCoMo retrieval (`make bench-recall`: `python -m tests.bench.locomo --x`)"
    doc.write_text(f"# B\n\n{locomo}\n\n### run 1\n\ntext\n\n## Other\n\nmore\n")
    res = {"params": {}, "timing": {}}
    rendered = ["### run", "", "table"]
    monkeypatch.setattr(report, "render", lambda res, markdown: "\n".join(rendered) + "\n")
    report.write_docs(res, doc)
    rendered[0] = "### run 2"
    report.write_docs(res, doc)
    lines = doc.read_text().split("\n")
    at = {line: i for i, line in enumerate(lines)}
    assert at["text"] < at[report.DOCS_HEADING] < at["### run"] < at["### run 2"] < at["## Other"]
    assert doc.read_text().endswith("## Other\n\nmore\n")

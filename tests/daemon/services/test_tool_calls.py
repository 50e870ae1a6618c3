"""Tool calls are findable: a real daemon indexes an assistant's call-only message and the
tool's result (weaver.turn_text), Recall finds the call by what it did, GetNode returns the
stored messages unchanged, and consolidation and a rebuild cite the same text."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from stratad_client import MemoryClient, message
from tests.support import QUIET, wait_indexed
from tiers.core.tokens import count_tokens

pytestmark = pytest.mark.slow
WHEN = dt.datetime(2024, 4, 24, 9, 30, tzinfo=dt.UTC)
RESULT_TOKENS = 40  # weaver.tool_result_max_tokens here (the default is 100)
ARGS = {"from": "BER", "to": "JFK", "date": "2024-05-02"}
CALL = 'assistant called search_flights(from="BER", to="JFK", date="2024-05-02")'
RESULT = json.dumps(
    {
        "flights": [
            {
                "carrier": "Lufthansa",
                "flight": f"LH{400 + i}",
                "departs": f"2024-05-02T{8 + i:02d}:15",
                "price_eur": 420 + 37 * i,
                "stops": i % 2,
            }
            for i in range(12)
        ]
    },
    indent=2,
)


def trip(c: MemoryClient) -> str:
    """The flight search: ask, call (no content), result, answer (no New York in it)."""
    c.append_batch(
        "trip",
        [
            message(
                "Can you find me a flight from Berlin for the conference on May 2nd?",
                name="Alice",
                created_at=WHEN,
            ),
            message(
                role="assistant",
                tool_call=("search_flights", json.dumps(ARGS)),
                created_at=WHEN,
                message_id="call-1",
                metadata={"turn": "call"},
            ),
            message(RESULT, role="tool", name="search_flights", created_at=WHEN),
            message(
                "The cheapest is Lufthansa LH400 at 8:15 for 420 euros, nonstop.",
                role="assistant",
                created_at=WHEN,
            ),
        ],
        user_id="alice",
    )
    return c.end_session("trip").episode_id


def others(c: MemoryClient) -> None:
    for sid, turns in {
        "dentist": ["My dentist appointment is on Thursday at 9.", "Noted, Thursday at 9."],
        "lisbon": ["We took the train to Lisbon last summer.", "How was the ride?"],
        "hotel": ["Book me a hotel in Paris near the Louvre.", "Done: Hotel du Louvre."],
    }.items():
        c.append_batch(
            sid,
            [message(t, role=("user", "assistant")[i % 2]) for i, t in enumerate(turns)],
            user_id="alice",
        )
        c.end_session(sid)


@pytest.fixture
def daemon(start_daemon):
    d = start_daemon(weaver={**QUIET, "tool_result_max_tokens": RESULT_TOKENS})
    d.daemon.parts.semantic.wait_ready(120)
    return d


def call_hit(c: MemoryClient, query: str, **kw: object):
    r = c.recall(query, user_id="alice", k=3, **kw)
    return next((h for h in r.hits if CALL in h.text), None), r


def test_a_call_is_recalled_by_what_it_did_and_its_result_is_cut(daemon):
    with daemon.client() as c:
        others(c)
        trip(c)
        wait_indexed(c, timeout=30)

        for query in ("did we search flights to New York?", "Did we look up flights to JFK?"):
            hit, r = call_hit(c, query)
            assert hit is not None, (query, [h.text for h in r.hits])
            assert hit.kind == "episode_turn" and hit.text == f"assistant: {CALL}"
            [source] = hit.sources
            assert (source.session_id, source.seq) == ("trip", 2)
            assert (source.message_id, dict(source.metadata)) == ("call-1", {"turn": "call"})
        assert CALL in c.recall("flights to JFK", user_id="alice", k=3).hits[0].text

        # The call and its result share a chunk; the result reads as the call's, cut.
        r = c.recall("Lufthansa flight prices", user_id="alice", k=5, kinds=["episode_chunk"])
        together = [h for h in r.hits if {2, 3} <= {s.seq for s in h.sources}]
        assert together, [h.text for h in r.hits]
        lines = together[0].text.splitlines()
        assert f"assistant: {CALL}" in lines
        [result] = [line for line in lines if line.startswith("search_flights: ")]
        cut = result.removeprefix("search_flights: search_flights returned: ")
        assert cut.startswith('{ "flights": [ { "carrier": "Lufthansa", "flight": "LH400"')
        assert cut.endswith("…") and count_tokens(cut[:-1]) == RESULT_TOKENS
        assert "LH411" not in together[0].text and count_tokens(RESULT) > 5 * RESULT_TOKENS

        # GetNode gives the stored messages themselves: the call, the whole result.
        node = c.get_node(together[0].id, user_id="alice")
        by_seq = {m.seq: m.message for m in node.messages}
        assert by_seq[2].content == "" and by_seq[2].tool_call.name == "search_flights"
        assert json.loads(by_seq[2].tool_call.arguments) == ARGS
        assert by_seq[3].content == RESULT


def test_consolidation_and_rebuild_cite_the_same_turns(daemon):
    with daemon.client() as c:
        trip(c)
        wait_indexed(c, timeout=30)
        before, _ = call_hit(c, "did we search flights to New York?", kinds=["episode_turn"])
        assert before is not None
        report = list(c.admin.run_weaver())[-1].report
        assert report.ok and report.facts, report.error

        # The local extractor saw the same turns: a fact from the call cites its message.
        r = c.recall(
            "which flights did the assistant search?", user_id="alice", k=5, kinds=["fact"]
        )
        facts = [h for h in r.hits if "search_flights" in h.text]
        assert facts and [s.seq for s in facts[0].sources] == [2], [h.text for h in r.hits]

        # A rebuild renders with the daemon's settings: the same turn point, the same text.
        rebuilt = c.admin.rebuild("alice")
        assert rebuilt.episodes == 1
        after, _ = call_hit(c, "did we search flights to New York?", kinds=["episode_turn"])
        assert after is not None and (after.id, after.text) == (before.id, before.text)
        r = c.recall("Lufthansa flight prices", user_id="alice", k=5, kinds=["episode_turn"])
        [result] = [h for h in r.hits if [s.seq for s in h.sources] == [3]]
        assert result.text.endswith("…")
        assert count_tokens(result.text.rsplit("returned: ", 1)[1][:-1]) == RESULT_TOKENS

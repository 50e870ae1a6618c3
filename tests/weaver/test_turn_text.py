"""A message as the weaver's turn (weaver.turn_text), the turns of an episode with tool calls
(load_episode on a real journal) and their chunks (weaver.episodes.chunk)."""

from __future__ import annotations

import json
import random
from itertools import pairwise
from pathlib import Path

from tiers.core.records import Message, Scope, StoredMessage, ToolCall
from tiers.core.tokens import count_tokens, truncate_tokens
from tiers.journal.store import JOURNAL_CFS, Journal
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.working.memory import WorkingMemory
from tiers.working.session import WindowLimits
from weaver.episodes import chunk, chunk_text, load_episode, sources
from weaver.extractors import EpisodeInput, Turn
from weaver.settings import WeaverSettings
from weaver.turn_text import ToolText, turn_text

T0 = 1_714_000_000 * 1_000_000
BOUNDS = ToolText()


def stored(role: str, content: str = "", name: str = "", call: object = None) -> StoredMessage:
    tool_call = None
    if call is not None:
        tool_call = ToolCall(*call) if isinstance(call, tuple) else ToolCall("f", str(call))
    return StoredMessage(1, role, content, T0, T0, 0, name=name, tool_call=tool_call)


def call(arguments: str, name: str = "search_flights") -> StoredMessage:
    return stored("assistant", call=(name, arguments))


def test_a_call_reads_as_a_sentence_with_quoted_strings_and_compact_nested_values():
    args = json.dumps({"from": "BER", "to": "JFK", "date": "2024-05-02"})
    assert (
        turn_text(call(args), BOUNDS)
        == 'assistant called search_flights(from="BER", to="JFK", date="2024-05-02")'
    )
    nested = {
        "q": 'say "hi"\nthen go',
        "n": 2,
        "ok": True,
        "none": None,
        "pax": [{"age": 30}, {"age": 4}],
        "opts": {"class": "economy", "bags": 1},
        "bad key": "x",
        "ünï": "é",
    }
    assert turn_text(call(json.dumps(nested, indent=2)), ToolText(call_tokens=200)) == (
        'assistant called search_flights(q="say \\"hi\\"\\nthen go", n=2, ok=true, none=null, '
        'pax=[{"age":30},{"age":4}], opts={"class":"economy","bags":1}, "bad key"="x", ünï="é")'
    )


def test_a_call_with_other_arguments_and_a_named_speaker():
    assert turn_text(call(""), BOUNDS) == "assistant called search_flights()"
    assert turn_text(call("null"), BOUNDS) == "assistant called search_flights()"
    assert turn_text(call("{}"), BOUNDS) == "assistant called search_flights()"
    assert turn_text(call('["BER", 2]'), BOUNDS) == 'assistant called search_flights(["BER",2])'
    assert turn_text(call('"BER"'), BOUNDS) == 'assistant called search_flights("BER")'
    # Not JSON (the daemon refuses it, but a journal is not re-validated): kept, collapsed.
    assert turn_text(call("{from: BER,\n  to: JFK"), BOUNDS) == (
        "assistant called search_flights({from: BER, to: JFK)"
    )
    named = stored("assistant", name="Planner", call=("lookup", '{"id": 7}'))
    assert turn_text(named, BOUNDS) == "Planner called lookup(id=7)"


def test_long_arguments_are_cut_at_the_token_bound():
    args = {"from": "BER", "to": "JFK", "note": " ".join(f"word{i}" for i in range(200))}
    text = turn_text(call(json.dumps(args)), ToolText(call_tokens=20))
    assert text.startswith('assistant called search_flights(from="BER", to="JFK", note="word0 ')
    assert text.endswith("…)") and "word199" not in text
    inner = text[len("assistant called search_flights(") : -len("…)")]
    assert count_tokens(inner) == 20
    short = json.dumps({"to": "JFK"})
    assert turn_text(call(short), ToolText(call_tokens=5)) == (
        'assistant called search_flights(to="JFK")'  # exactly 5 tokens: nothing cut
    )


def test_content_and_a_call_keep_the_content_and_append_the_sentence():
    message = stored("assistant", "Let me look that up.", call=("search_flights", '{"to": "JFK"}'))
    assert turn_text(message, BOUNDS) == (
        'Let me look that up.\nassistant called search_flights(to="JFK")'
    )
    assert turn_text(stored("user", "Hello  there\n"), BOUNDS) == "Hello  there\n"  # as is


def test_a_tool_result_reads_as_the_calls_result_cut_at_its_bound():
    assert turn_text(stored("tool", '{"ok": true}', name="book"), BOUNDS) == (
        'book returned: {"ok": true}'
    )
    assert turn_text(stored("tool", "42"), BOUNDS) == "tool returned: 42"
    result = json.dumps({"flights": [{"flight": f"LH{400 + i}"} for i in range(100)]}, indent=2)
    assert count_tokens(result) > 500
    text = turn_text(stored("tool", result, name="search_flights"), ToolText(result_tokens=30))
    assert text.startswith('search_flights returned: { "flights": [ { "flight": "LH400" }')
    assert text.endswith("…") and "\n" not in text and "LH499" not in text
    assert count_tokens(text[len("search_flights returned: ") : -1]) == 30


def test_truncate_tokens_counts_as_count_tokens_does():
    assert truncate_tokens("a b c", 3) == ("a b c", False)
    assert truncate_tokens("a, b c", 2) == ("a,", True)
    assert truncate_tokens("  ", 0) == ("  ", False)
    text = "The quick brown fox jumps over the lazy dog, twice."
    for n in range(count_tokens(text) + 1):
        cut, more = truncate_tokens(text, n)
        assert count_tokens(cut) == n and text.startswith(cut) and more == (n < 12)


def test_the_bounds_default_to_the_settings_defaults():
    s = WeaverSettings()
    assert ToolText() == ToolText(s.tool_call_max_tokens, s.tool_result_max_tokens)


def test_load_episode_keeps_a_call_only_message_and_cuts_the_result(tmp_path: Path):
    state = RocksStore(tmp_path / "state", STATE_CFS)
    journal = Journal(RocksStore(tmp_path / "journal", JOURNAL_CFS, ttl_seconds=3600), state, 3600)
    wm = WorkingMemory(state, journal, WindowLimits())
    args = json.dumps({"from": "BER", "to": "JFK"})
    result = " ".join(f"row{i}" for i in range(300))
    wm.append(
        "s1",
        Scope("alice"),
        [
            Message("user", "Flights from Berlin, please.", name="Alice", created_at_us=T0),
            Message(
                "assistant",
                "",
                tool_call=ToolCall("search_flights", args),
                message_id="m-call",
                metadata={"k": "v"},
                created_at_us=T0 + 1,
            ),
            Message("tool", result, name="search_flights", created_at_us=T0 + 2),
            Message("assistant", "The cheapest is 420 euros.", created_at_us=T0 + 3),
        ],
    )
    eid = wm.end_session("s1").episode_id
    episode = load_episode(journal, eid, ToolText(result_tokens=10))
    assert [(t.seq, t.speaker, t.role, t.tool_call) for t in episode.turns] == [
        (1, "Alice", "user", ""),
        (2, "assistant", "assistant", "search_flights"),
        (3, "search_flights", "tool", ""),
        (4, "assistant", "assistant", ""),
    ]
    assert episode.turns[1].text == 'assistant called search_flights(from="BER", to="JFK")'
    assert (
        episode.turns[2].text
        == "search_flights returned: " + " ".join(f"row{i}" for i in range(10)) + "…"
    )
    [source] = sources(episode, [2], with_text=True)
    assert (source.seq, source.message_id, source.metadata) == (2, "m-call", {"k": "v"})
    assert source.text == episode.turns[1].text and source.role == "assistant"
    windows = chunk(episode, 3, 1, 200)
    assert [[t.seq for t in w] for w in windows] == [[1, 2, 3], [3, 4]]
    assert chunk_text(windows[0]).splitlines()[1:] == [
        'assistant: assistant called search_flights(from="BER", to="JFK")',
        "search_flights: " + episode.turns[2].text,
    ]
    # Without bounds, the settings' defaults: the result up to 100 tokens.
    assert load_episode(journal, eid).turns[2].text.endswith("row99…")
    state.close()


# -- chunks --------------------------------------------------------------------------------


def turn(seq: int, kind: str, tokens: int = 5) -> Turn:
    """``u`` a user's message, ``a`` an assistant's, ``c`` a tool call, ``r`` a result."""
    role = {"u": "user", "a": "assistant", "c": "assistant", "r": "tool"}[kind]
    text = " ".join(["w"] * tokens)
    return Turn(seq, role, role, text, T0 + seq, tool_call="f" if kind == "c" else "")


def episode(kinds: str, tokens: list[int] | None = None) -> EpisodeInput:
    sizes = tokens or [5] * len(kinds)
    turns = [turn(i + 1, k, n) for i, (k, n) in enumerate(zip(kinds, sizes, strict=True))]
    return EpisodeInput("e", "s", Scope("alice"), turns)


def seqs(windows: list[list[Turn]]) -> list[list[int]]:
    return [[t.seq for t in w] for w in windows]


def test_a_window_ends_before_a_call_rather_than_between_it_and_its_result():
    assert seqs(chunk(episode("uucra"), 3, 1, 200)) == [[1, 2], [2, 3, 4], [4, 5]]
    assert seqs(chunk(episode("ucra"), 2, 0, 200)) == [[1], [2, 3], [4]]
    # Two results of one call, and a call after a result.
    assert seqs(chunk(episode("uucrrcra"), 3, 1, 200)) == [[1, 2], [3, 4, 5], [5, 6, 7], [7, 8]]
    # By tokens: the call and its result fit only without the question before them.
    assert seqs(chunk(episode("ucra", [150, 30, 130, 5]), 3, 1, 200)) == [[1], [2, 3, 4]]
    # When they cannot fit together, the cut stays where the sizes put it.
    assert seqs(chunk(episode("cra", [100, 150, 5]), 3, 1, 200)) == [[1], [2, 3]]
    assert seqs(chunk(episode("ucrrr"), 2, 1, 200)) == [[1], [2, 3], [3, 4], [4, 5]]


def test_without_tool_turns_the_windows_are_as_before():
    def before(ep: EpisodeInput, turns: int, overlap: int, max_tokens: int) -> list[list[int]]:
        out: list[list[int]] = []
        start, items = 0, ep.turns
        while start < len(items):
            window, used = [], 0
            for t in items[start : start + turns]:
                cost = count_tokens(t.text) + 2
                if window and used + cost > max_tokens:
                    break
                window.append(t.seq)
                used += cost
            out.append(window)
            if start + len(window) >= len(items):
                break
            start += max(1, len(window) - overlap)
        return out

    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 12)
        ep = episode("".join(rng.choice("ua") for _ in range(n)), [rng.randint(1, 120)] * n)
        turns = rng.randint(1, 5)
        overlap = rng.randint(0, turns - 1)
        assert seqs(chunk(ep, turns, overlap, 200)) == before(ep, turns, overlap, 200)


def test_every_turn_is_chunked_and_calls_share_a_window_with_their_results_when_they_fit():
    rng = random.Random(11)
    for _ in range(500):
        n = rng.randint(1, 14)
        ep = episode("".join(rng.choice("uacrr") for _ in range(n)), None)
        ep = EpisodeInput(
            "e", "s", ep.scope, [turn(t.seq, _kind(t), rng.randint(1, 90)) for t in ep.turns]
        )
        turns = rng.randint(1, 5)
        overlap = rng.randint(0, turns - 1)
        windows = seqs(chunk(ep, turns, overlap, 200))
        assert sorted({s for w in windows for s in w}) == list(range(1, n + 1))
        assert all(w == list(range(w[0], w[-1] + 1)) and len(w) <= turns for w in windows)
        assert all(a[0] < b[0] for a, b in pairwise(windows))
        items = ep.turns
        for i in range(n - 1):
            c, r = items[i], items[i + 1]
            cost = count_tokens(c.text) + count_tokens(r.text) + 4
            if c.tool_call and r.role == "tool" and turns >= 2 and cost <= 200:
                assert any(c.seq in w and r.seq in w for w in windows), (windows, i)


def _kind(t: Turn) -> str:
    return "c" if t.tool_call else {"user": "u", "assistant": "a", "tool": "r"}[t.role]

"""GetContext's assembly (recall/context/assembly.py) on its own: the budget order, the shares, the
caps, no duplicates, the rendered block and the query rule. The RPC end to end is
tests/daemon/services/test_context.py."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from recall import Candidate
from recall.context.assembly import Budget, Pinned, assemble, formulate_query, message_line
from recall.pack import format_item
from tiers.core.records import Scope, StoredMessage, ToolCall
from tiers.core.tokens import count_tokens
from tiers.keyed.anchors import Anchor
from tiers.semantic.vectors import MemoryPoint, Source

DAY = 86_400_000_000
T0 = 1_714_000_000_000_000  # 2024-04-24
ALICE = Scope("alice")


def msg(seq: int, text: str, role: str = "user", name: str = "") -> StoredMessage:
    return StoredMessage(seq, role, text, T0 + seq * 60_000_000, T0, count_tokens(text), name)


def point(
    pid: str, text: str, kind: str = "fact", sources: list[tuple[str, int]] = ()
) -> Candidate:  # type: ignore[assignment]
    srcs = [Source(sid, seq, speaker="Alice", created_at_us=T0) for sid, seq in sources]
    return Candidate(
        MemoryPoint(pid, kind, text, ALICE, "", "", srcs or [Source("old", 1)], T0 - DAY, "test")
    )


WINDOW = [
    msg(1, "I am planning a trip to Japan with Kenji.", name="Alice"),
    msg(2, "Great, when do you want to go?", role="assistant"),
    msg(3, "In October, after Kenji's exam.", name="Alice"),
    msg(4, "Noted. Any cities in mind?", role="assistant"),
    msg(5, "Kyoto for sure. What did I say about food last time?", name="Alice"),
]
ANCHOR = Anchor("s1", ALICE, "Task: plan the Japan trip. Next: book flights.", T0 + DAY)
PINS = [Pinned(point("p1", "Alice is vegetarian."), "pinned for the user")]
HITS = [
    point("h1", "Alice loved the ramen in Tokyo.", "episode_turn", (("old", 2),)),
    point("h2", "Alice is allergic to peanuts.", "fact", (("old", 3),)),
    point("p1", "Alice is vegetarian."),  # pinned already
    point("h3", "Alice asked about vegan food in Osaka.", "summary", (("old", 4), ("old", 5))),
    point("h4", "Summary of another talk about Kyoto temples.", "summary", (("old", 6),)),
]


def budget(tokens: int, window_share: float = 0.5, caps: dict[str, int] | None = None) -> Budget:
    return Budget(tokens, window_share, 0.25, caps or {})


def test_the_block_has_its_sections_in_order_with_dates_and_speakers():
    ctx = assemble(budget(2000), "s1", ANCHOR, PINS, WINDOW, HITS)
    assert ctx.text.startswith("Session anchor (updated 2024-04-25 23:06 UTC):\nTask: plan")
    sections = [block.split("\n", 1)[0] for block in ctx.text.split("\n\n")]
    assert sections[1:] == ["Pinned:", "From memory:", "Conversation:"]
    assert "\n\nPinned:\n[fact · 2024-04-23] Alice is vegetarian.\n\nFrom memory:\n" in ctx.text
    assert ctx.text.endswith(
        "[2024-04-24 23:11] Alice: Kyoto for sure. What did I say about food last time?"
    )
    assert "[2024-04-24 23:08] Assistant: Great, when do you want to go?" in ctx.text
    assert [i.candidate.point.id for i in ctx.memories] == ["p1", "h1", "h2", "h3", "h4"]
    assert [i.pinned for i in ctx.memories] == [True, False, False, False, False]
    assert ctx.window == WINDOW and ctx.anchor == ANCHOR
    assert ctx.tokens == count_tokens(ctx.text) <= 2000
    assert [(d.id, d.reason) for d in ctx.dropped] == [("p1", "pinned")]


def test_per_kind_caps_and_memories_from_window_messages_are_left_out():
    hits = [point("w", "Kenji has an exam in October.", "fact", (("s1", 3),)), *HITS]
    ctx = assemble(budget(2000, caps={"summary": 1}), "s1", None, [], WINDOW, hits)
    ids = [i.candidate.point.id for i in ctx.memories]
    assert ids == ["h1", "h2", "p1", "h3"]  # not pinned here: recalled like the others
    assert ("w", "in_window") in [(d.id, d.reason) for d in ctx.dropped]
    assert ("h4", "per_kind_cap") in [(d.id, d.reason) for d in ctx.dropped]
    # A source of another session with the same seq is another message.
    other = [point("o", "Kenji has an exam.", "fact", (("s2", 3),))]
    assert [
        i.candidate.point.id for i in assemble(budget(500), "s1", None, [], WINDOW, other).memories
    ] == ["o"]


def lines_tokens(messages: list[StoredMessage]) -> int:
    return count_tokens("Conversation:") + sum(count_tokens(message_line(m)) for m in messages)


def test_the_window_keeps_the_newest_messages_contiguous_and_shares_flow():
    two = lines_tokens(WINDOW[-2:])
    # No memories: the window takes the whole budget, its newest messages, oldest first.
    ctx = assemble(budget(two, window_share=0.0), "s1", None, [], WINDOW, [])
    assert ctx.window == WINDOW[-2:] and ctx.tokens == two
    h1 = count_tokens("From memory:") + count_tokens(format_item(HITS[0]))
    # The window's share first (all of it), then the memories get what it left.
    ctx = assemble(budget(lines_tokens(WINDOW) + h1, 1.0), "s1", None, [], WINDOW, HITS)
    assert ctx.window == WINDOW and [i.candidate.point.id for i in ctx.memories] == ["h1"]
    # A share of 0: the memories first, then the window gets what they left.
    ctx = assemble(budget(two + h1, 0.0), "s1", None, [], WINDOW, HITS[:1])
    assert ctx.window == WINDOW[-2:] and [i.candidate.point.id for i in ctx.memories] == ["h1"]
    assert ctx.tokens == two + h1


def test_an_anchor_that_does_not_fit_is_dropped_whole_and_pins_keep_to_their_share():
    small = assemble(budget(10), "s1", ANCHOR, PINS, WINDOW, HITS)
    assert small.anchor is None and "Task" not in small.text
    assert next((d.id, d.kind, d.reason) for d in small.dropped if d.kind == "anchor") == (
        "s1",
        "anchor",
        "budget",
    )
    # 25 % of 40 tokens cannot hold the pin's line: it is left out for its share.
    pinned = assemble(budget(40), "s1", None, PINS, [], [])
    assert not pinned.memories and pinned.dropped[0].reason == "pinned_share"


@settings(max_examples=150, deadline=None)
@given(
    tokens=st.integers(1, 400),
    share=st.floats(0, 1),
    anchor=st.booleans(),
    caps=st.dictionaries(st.sampled_from(["fact", "summary", "episode_turn"]), st.integers(0, 3)),
)
def test_the_budget_is_never_exceeded_and_nothing_is_repeated(tokens, share, anchor, caps):
    ctx = assemble(
        Budget(tokens, share, 0.25, caps), "s1", ANCHOR if anchor else None, PINS, WINDOW, HITS
    )
    assert ctx.tokens == count_tokens(ctx.text) <= tokens
    ids = [i.candidate.point.id for i in ctx.memories]
    assert len(ids) == len(set(ids))
    assert ctx.window == WINDOW[len(WINDOW) - len(ctx.window) :]  # the newest, contiguous
    for item in ctx.memories:
        assert item.text in ctx.text
    for m in ctx.window:
        assert message_line(m) in ctx.text
    for kind, cap in caps.items():
        assert (
            sum(1 for i in ctx.memories if i.candidate.point.kind == kind and not i.pinned) <= cap
        )
    if ctx.anchor is not None:
        assert ctx.text.startswith("Session anchor")


def test_the_query_is_the_last_user_message_and_the_names_of_the_last_turns():
    assert formulate_query([], 4) == ""
    query = formulate_query(WINDOW, 4)
    assert query == "Kyoto for sure. What did I say about food last time? Kenji October"
    # Only the last `turns` messages lend names; names already in the text are not repeated.
    assert formulate_query(WINDOW, 1) == "Kyoto for sure. What did I say about food last time?"
    # No user message: the last message with text.
    assert formulate_query([msg(1, "Tell Maria hello.", role="assistant")], 4) == (
        "Tell Maria hello."
    )
    tool = StoredMessage(9, "assistant", "", T0, T0, 3, tool_call=ToolCall("search", "{}"))
    assert message_line(tool).endswith("Assistant: called search({})")

"""GetContext, SetAnchor, GetAnchor and PinMemory end to end, over gRPC against a real daemon
(with tokens, so that tenants and rights apply): the window, the memories, the anchor and the
pins within one budget; no duplicates; never-seen and ended sessions; errors; tenants;
Forget. The restart and export/import of anchors and pins:
tests/daemon/services/test_context_durable.py."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from daemon.server.auth import token_hash
from daemon.settings import Settings
from stratad_client import MemoryClient, StrataClientError, message
from stratad_client.pb import memory_pb2 as pb
from tests.support import MODEL_CACHE, QUIET, ThreadDaemon, wait_indexed, wait_until
from tiers.core.records import Scope, StoredMessage
from tiers.core.tokens import count_tokens
from tiers.rights.archive import format as export
from tiers.rights.archive.format import SessionRecord
from tiers.semantic.vectors import MemoryPoint, PointFilter, Source

pytestmark = pytest.mark.slow
TOKENS = {"ops": "tok-ctx-ops", "alice": "tok-ctx-alice", "bob": "tok-ctx-bob", "ro": "tok-ctx-ro"}
REASONS = {"budget", "pinned_share", "per_kind_cap", "in_window", "pinned"}
OLD = [
    ("I moved to Lisbon last spring and my cat Miso sleeps on the balcony.", "user", "Alice"),
    ("Lisbon is lovely. Does Miso like the sun?", "assistant", ""),
    ("He loves it. My sister Ana visits us every summer.", "user", "Alice"),
]
CHAT = [
    ("Hi, it's me again.", "user", "Alice"),
    ("Hello Alice! How can I help?", "assistant", ""),
    ("I want to book a vet appointment.", "user", "Alice"),
    ("Sure. For which pet?", "assistant", ""),
    ("What is my cat called again? Ana keeps asking.", "user", "Alice"),
]


def _token(name: str, tenants: list[str], rights: list[str]) -> dict[str, Any]:
    return {"name": name, "sha256": token_hash(TOKENS[name]), "tenants": tenants, "rights": rights}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadDaemon]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("context") / "data",
        listen="127.0.0.1:0",
        shutdown_grace_seconds=2.0,
        embedding={"cache_dir": MODEL_CACHE},
        weaver=QUIET,  # indexing only
        auth={
            "tokens": [
                _token("ops", ["*"], ["admin"]),
                _token("alice", ["alice"], ["append", "recall", "forget"]),
                _token("bob", ["bob"], ["append", "recall"]),
                _token("ro", ["alice"], ["recall"]),
            ]
        },
    )
    d = ThreadDaemon(settings)
    try:
        yield d
    finally:
        d.stop()


def client(daemon: ThreadDaemon, who: str = "ops") -> MemoryClient:
    return MemoryClient(daemon.address, token=TOKENS[who], timeout=60)


@pytest.fixture(scope="module")
def ops(daemon: ThreadDaemon) -> Iterator[MemoryClient]:
    with client(daemon) as c:
        yield c


def said(turns: list[tuple[str, str, str]]) -> list[pb.Message]:
    return [message(text, role, name=name) for text, role, name in turns]


def code(call: Callable[[], Any]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(StrataClientError) as err:
        call()
    return err.value.code, err.value.message or ""


def history(c: MemoryClient, user: str) -> str:
    """An ended, indexed conversation of ``user``; returns the id of the turn about Miso."""
    c.append_batch(f"{user}-old", said(OLD), user_id=user)
    c.end_session(f"{user}-old", user_id=user)
    wait_indexed(c)
    hits = c.recall("cat Miso balcony", user_id=user, k=5).hits
    return next(h.id for h in hits if "Miso sleeps" in h.text)


def test_context_holds_anchor_pins_memories_and_the_newest_window_within_the_budget(ops):
    miso = history(ops, "alice")
    note = ops.put_document("notes", "diet", "Alice is vegetarian.", user_id="alice").document
    wait_indexed(ops)
    ops.append_batch("vet", said(CHAT), user_id="alice")
    window = list(ops.get_working_memory("vet", user_id="alice").messages)
    set_ = ops.set_anchor("vet", "Task: book the vet for Miso. Next: ask which day.")
    assert not set_.replaced and set_.anchor.scope.user_id == "alice"
    assert ops.pin_memory(note.id, user_id="alice").changed
    assert not ops.pin_memory(note.id, user_id="alice").changed  # a repeat: nothing new

    ctx = ops.get_context("vet", 600, explain=True)  # the session's user found by its id
    assert ctx.state == pb.SESSION_STATE_OPEN and ctx.scope.user_id == "alice"
    assert ctx.query == "What is my cat called again? Ana keeps asking."
    assert ctx.tokens == count_tokens(ctx.text) <= 600
    parts = ctx.text.split("\n\n")
    assert parts[0].startswith("Session anchor (updated ") and parts[0].endswith("ask which day.")
    assert parts[1] == "Pinned:\n" + ctx.memories[0].text and "vegetarian" in parts[1]
    assert parts[2].startswith("From memory:\n") and "Miso sleeps on the balcony" in parts[2]
    assert parts[3].startswith("Conversation:\n")
    assert parts[3].endswith("Alice: What is my cat called again? Ana keeps asking.")
    assert ctx.anchor.text == set_.anchor.text
    # The pin first, then the recalled memories; none twice, the note not again.
    ids = [m.id for m in ctx.memories]
    assert ids[0] == note.id and ctx.memories[0].pinned and len(ids) == len(set(ids))
    assert miso in ids[1:] and not any(m.pinned for m in ctx.memories[1:])
    assert all(m.why for m in ctx.memories) and ctx.memories[0].why.startswith("pinned for")
    recalled = next(m for m in ctx.memories if m.id == miso)
    assert recalled.why.startswith("recalled for the query: rank ")
    assert recalled.explanation.channels and recalled.sources[0].session_id == "alice-old"
    assert recalled.tokens == count_tokens(recalled.text) and recalled.text in ctx.text
    assert {d.reason for d in ctx.dropped} <= REASONS
    assert all(d.id not in ids or d.reason == "pinned" for d in ctx.dropped)
    # The whole window fits: the same messages as GetWorkingMemory, oldest first.
    assert [m.seq for m in ctx.messages] == [m.seq for m in window] == [1, 2, 3, 4, 5]
    for m in ctx.messages:
        line = f"] {m.message.name or 'Assistant'}: {m.message.content}"
        assert line in ctx.text

    # Any budget, tiny ones too: never exceeded, the window its newest messages.
    for budget in (1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 5000):
        for share in (None, 0.0, 0.3, 1.0):
            got = ops.get_context("vet", budget, user_id="alice", window_share=share)
            assert got.tokens == count_tokens(got.text) <= budget, (budget, share)
            seqs = [m.seq for m in got.messages]
            assert seqs == list(range(6 - len(seqs), 6)), (budget, share, seqs)
            if got.HasField("anchor"):
                assert got.text.startswith("Session anchor")
            if budget < 10:
                assert got.text == "" and not got.memories
    # A per-kind cap of 0 and a query of the caller's own.
    capped = ops.get_context(
        "vet", 600, user_id="alice", query="Lisbon sister", per_kind_caps={"episode_turn": 0},
        explain=True,
    )  # fmt: skip
    assert capped.query == "Lisbon sister"
    assert not [m for m in capped.memories if m.kind == "episode_turn"]
    assert "per_kind_cap" in {d.reason for d in capped.dropped}


def test_a_recalled_memory_from_a_message_in_the_window_is_left_out(daemon, ops):
    """An open session and a memory drawn from one of its window's messages (made by an
    import, with a fact the live stage does not write): never recalled into the block."""
    scope = Scope("dana")
    now = int(time.time() * 1_000_000)
    turns = ["I adopted a parrot named Kiwi.", "Kiwi the parrot whistles all day."]
    messages = [
        StoredMessage(i, "user", text, now + i, now + i, count_tokens(text), "Dana")
        for i, text in enumerate(turns, 1)
    ]

    def fact(seq: int, text: str) -> MemoryPoint:
        src = Source("pets", seq, speaker="Dana", created_at_us=now, text=text, role="user")
        return MemoryPoint(f"00000000-0000-4000-8000-00000000000{seq}", "fact", text, scope,
                           "", "pets", [src], now, "test")  # fmt: skip

    points = [fact(1, "Dana has a parrot named Kiwi."), fact(7, "Dana's parrot Kiwi is green.")]
    lines = [
        export.header(scope, "any", 0, now),
        export.session(SessionRecord("pets", scope, 1, 3, True, 2, now)),
        *[export.message(m, session_id="pets") for m in messages],
        *[export.point(p) for p in points],
        export.footer(Counter(session=1, message=2, point=2), Counter(fact=2)),
    ]
    ops.admin.import_([b"".join(export.dump(line) for line in lines)])
    ctx = ops.get_context("pets", 1000, user_id="dana", query="parrot Kiwi", explain=True)
    assert [m.seq for m in ctx.messages] == [1, 2]
    assert [m.id for m in ctx.memories] == [points[1].id]  # drawn from seq 7: not in the window
    assert points[0].id not in [d.id for d in ctx.dropped], "not recalled at all"
    assert "Kiwi is green" in ctx.text and "has a parrot named" not in ctx.text


def test_never_seen_and_ended_sessions(ops):
    history(ops, "erin")
    fresh = ops.get_context("brand-new", 300, user_id="erin", query="Where did I move?")
    assert fresh.state == pb.SESSION_STATE_UNSPECIFIED and not fresh.messages
    assert fresh.memories and "Conversation:" not in fresh.text
    assert fresh.text.startswith("From memory:\n") and "Lisbon" in fresh.text
    # No query and no window: nothing to recall; the anchor and pins only (none): empty.
    empty = ops.get_context("brand-new", 300, user_id="erin")
    assert (empty.text, empty.query, list(empty.memories)) == ("", "", [])
    # An anchor may be set before the session's first message.
    ops.set_anchor("brand-new", "Plan: greet Erin.", user_id="erin")
    assert ops.get_context("brand-new", 300, user_id="erin").anchor.text == "Plan: greet Erin."

    ops.append("trip", "Remind me about Miso's food.", user_id="erin", name="Erin")
    ops.set_anchor("trip", "Next: order cat food.", user_id="erin")
    ops.end_session("trip", user_id="erin")
    ended = ops.get_context("trip", 300, user_id="erin", query="cat Miso")
    assert ended.state == pb.SESSION_STATE_ENDED and not ended.messages
    assert ended.anchor.text == "Next: order cat food." and ended.memories
    assert ops.get_anchor("trip", user_id="erin").anchor.text == "Next: order cat food."
    # Named by its id alone, a session nobody has is NOT_FOUND: whose memories would it be?
    status, details = code(lambda: ops.get_context("nobody-has-this", 300))
    assert status == grpc.StatusCode.NOT_FOUND and "name scope.user_id" in details
    # Clearing the anchor.
    cleared = ops.set_anchor("trip", "  ", user_id="erin")
    assert cleared.replaced and not cleared.HasField("anchor")
    assert code(lambda: ops.get_anchor("trip", user_id="erin"))[0] == grpc.StatusCode.NOT_FOUND


def test_invalid_requests_say_what_is_wrong(ops):
    wait_indexed(ops)  # PinMemory reads Tier 3
    ops.append("val", "hello", user_id="frank")
    ops.append("shared", "hello", user_id="frank")
    ops.append("shared", "hello", user_id="gina")
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    cases: list[tuple[Callable[[], Any], grpc.StatusCode, str]] = [
        (lambda: ops.get_context("val", 0), invalid, "max_tokens must be between 1 and 200000"),
        (lambda: ops.get_context("val", 200_001), invalid, "got 200001"),
        (lambda: ops.get_context("val", 9, window_share=1.5), invalid, "window_share must be"),
        (lambda: ops.get_context("val", 9, window_share=float("nan")), invalid, "window_share"),
        (lambda: ops.get_context("val", 9, per_kind_caps={"facts": 1}), invalid, "'facts' is not"),
        (lambda: ops.get_context("val", 9, per_kind_caps={"fact": -1}), invalid, "negative"),
        (lambda: ops.get_context("val", 9, kinds=["memo"]), invalid, "kinds: 'memo'"),
        (lambda: ops.get_context("val", 9, recipe="nope"), invalid, "no recipe named 'nope'"),
        (lambda: ops.get_context("val", 9, query="x" * 70_000), invalid, "query is 70000 bytes"),
        (lambda: ops.get_context("", 9), invalid, "session_id is required"),
        (lambda: ops.get_context("shared", 9), invalid, "exists for 2 users: name scope.user_id"),
        (
            lambda: ops.get_context("val", 9, user_id="frank", agent_id="other"),
            grpc.StatusCode.FAILED_PRECONDITION,
            "agent of session 'val'",
        ),
        (lambda: ops.set_anchor("val", "x" * 4097), invalid, "limits.max_anchor_bytes"),
        (lambda: ops.pin_memory("not-a-uuid", user_id="frank"), invalid, "a UUID"),
        (
            lambda: ops.pin_memory("00000000-0000-4000-8000-0000000000ff", user_id="frank"),
            grpc.StatusCode.NOT_FOUND,
            "not found (user 'frank', no agent)",
        ),
        (lambda: ops.pin_memory("00000000-0000-4000-8000-0000000000ff"), invalid, "user_id"),
    ]
    for call, status, words in cases:
        got, details = code(call)
        assert (got, words in details) == (status, True), (details, words)
    # Unpinning what is not pinned is no error; nor is setting an anchor of exactly the limit.
    assert not ops.pin_memory("00000000-0000-4000-8000-0000000000ff", user_id="frank",
                              pinned=False).changed  # fmt: skip
    assert ops.set_anchor("val", "é" * 2048, user_id="frank").anchor.text == "é" * 2048


def test_tenants_and_rights(daemon, ops):
    bobs = history(ops, "bob")
    ops.append("chat", "Bob here.", user_id="bob", name="Bob")  # alice has a "chat" too
    with client(daemon, "bob") as bob, client(daemon, "alice") as alice, client(daemon, "ro") as ro:
        bob.set_anchor("chat", "Bob's secret plan.")
        assert bob.pin_memory(bobs).changed
        alice.append("mine", "Where is my cat?", name="Alice")
        mine = alice.get_context("mine", 2000, query="cat Miso balcony Lisbon")
        assert "Bob" not in mine.text and bobs not in [m.id for m in mine.memories]
        alice.set_anchor("chat", "Alice's plan.")
        other = alice.get_context("chat", 2000)
        assert "secret" not in other.text and "Alice's plan." in other.text
        assert other.scope.user_id == "alice" and other.state == pb.SESSION_STATE_UNSPECIFIED
        assert alice.get_anchor("chat").anchor.text == "Alice's plan."
        assert bob.get_anchor("chat").anchor.text == "Bob's secret plan."
        # Another tenant's memory cannot be pinned (NOT_FOUND, as if it did not exist), nor
        # another tenant named.
        assert code(lambda: alice.pin_memory(bobs))[0] == grpc.StatusCode.NOT_FOUND
        denied = grpc.StatusCode.PERMISSION_DENIED
        assert code(lambda: alice.get_context("chat", 100, user_id="bob"))[0] == denied
        assert code(lambda: alice.set_anchor("chat", "x", user_id="bob"))[0] == denied
        # The rights: reading the context is recall; setting an anchor or a pin is append.
        assert ro.get_context("chat", 100).scope.user_id == "alice"
        assert ro.get_anchor("chat").anchor.session_id == "chat"
        assert code(lambda: ro.set_anchor("chat", "x"))[0] == denied
        assert code(lambda: ro.pin_memory(bobs))[0] == denied


def test_agent_pins_apply_to_that_agent_and_user_pins_to_every_agent(ops):
    turn = history(ops, "hana")
    note = ops.put_document("notes", "tz", "Hana lives in UTC+9.", user_id="hana", agent_id="a2")
    note = note.document
    ops.append("a1-chat", "Hi", user_id="hana", agent_id="a1")
    ops.append("a2-chat", "Hi", user_id="hana", agent_id="a2")
    ops.append("plain", "Hi", user_id="hana")
    ops.pin_memory(turn, user_id="hana")  # the user's: every agent
    ops.pin_memory(note.id, user_id="hana", agent_id="a2")  # a2's only

    def pinned(sid: str) -> list[str]:
        return [m.id for m in ops.get_context(sid, 2000, user_id="hana").memories if m.pinned]

    assert pinned("a1-chat") == [turn]
    assert pinned("plain") == [turn]
    assert sorted(pinned("a2-chat")) == sorted([turn, note.id])
    # A pin of agent a1 may name only a1's memories (as a1's recall sees them): not a2's.
    status, details = code(lambda: ops.pin_memory(note.id, user_id="hana", agent_id="a1"))
    assert status == grpc.StatusCode.NOT_FOUND and "agent 'a1'" in details


def test_forget_removes_anchors_and_pins(ops):
    turn = history(ops, "ivan")
    note = ops.put_document("notes", "x", "Ivan prefers tea.", user_id="ivan").document
    bot = ops.put_document("notes", "y", "Ivan's bot speaks Dutch.", user_id="ivan",
                           agent_id="bot").document  # fmt: skip
    ops.append("s1", "Hi", user_id="ivan", agent_id="bot")
    ops.append("s2", "Hi", user_id="ivan")
    ops.set_anchor("s1", "anchor one", user_id="ivan")
    ops.set_anchor("s2", "anchor two", user_id="ivan")
    assert ops.get_anchor("s1", user_id="ivan").anchor.scope.agent_id == "bot"
    for memory, agent in ((turn, ""), (note.id, ""), (bot.id, ""), (bot.id, "bot")):
        assert ops.pin_memory(memory, user_id="ivan", agent_id=agent).changed

    # Forget of a memory id: its pins, in every scope.
    gone = ops.forget(memory_ids=[bot.id])
    assert (gone.documents, gone.pins, gone.anchors) == (1, 2, 0)
    ctx = ops.get_context("s2", 2000, user_id="ivan")
    assert sorted(m.id for m in ctx.memories if m.pinned) == sorted([turn, note.id])
    # Forget of an agent: its anchors (and pins); the user's stay.
    by_agent = ops.forget(user_id="ivan", agent_id="bot")
    assert (by_agent.anchors, by_agent.pins) == (1, 0)
    assert code(lambda: ops.get_anchor("s1", user_id="ivan"))[0] == grpc.StatusCode.NOT_FOUND
    assert ops.get_anchor("s2", user_id="ivan").anchor.text == "anchor two"
    # Forget of the user: everything else.
    everything = ops.forget(user_id="ivan")
    assert (everything.anchors, everything.pins) == (1, 2)
    assert code(lambda: ops.get_anchor("s2", user_id="ivan"))[0] == grpc.StatusCode.NOT_FOUND
    assert ops.get_context("s2", 2000, user_id="ivan").text == ""


def test_a_pin_whose_memory_is_gone_is_skipped_and_deleted_but_not_during_a_rebuild(daemon, ops):
    turn = history(ops, "jo")
    ops.append("s", "Hi", user_id="jo")
    ops.pin_memory(turn, user_id="jo")
    pins = daemon.daemon.parts.pins
    semantic = daemon.daemon.parts.semantic
    assert pins is not None and semantic is not None
    _embedder, vectors = semantic.wait_ready(0)
    # The point leaves Tier 3 the way a rebuild takes it out before writing it again: while a
    # writer holds Tier 3's write lock, the pin is only skipped.
    with semantic.write_lock:
        vectors.delete(PointFilter(ids=(turn,)))
        assert not [m for m in ops.get_context("s", 500, user_id="jo").memories if m.pinned]
        assert pins.get(Scope("jo"), turn) is not None
    # With no writer, gone is gone: the pin is deleted by a GetContext that finds no writer
    # at work (the live index of "Hi" takes the lock too, at a time of its own).

    def deleted() -> bool:
        assert not [m for m in ops.get_context("s", 500, user_id="jo").memories if m.pinned]
        return pins.get(Scope("jo"), turn) is None

    wait_until(deleted, 30, "for a GetContext to delete the pin of a memory gone")

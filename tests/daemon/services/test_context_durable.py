"""Anchors and pins are durable: they survive a killed ``stratad`` and the session's end, and
an export carries them to another daemon (``anchor`` and ``pin`` records)."""

from __future__ import annotations

import json

import pytest

from stratad_client import MemoryClient, message
from stratad_client.pb import memory_pb2 as pb
from tests.support import QUIET_ENV, wait_indexed, wait_until

pytestmark = pytest.mark.slow
# An export written before anchors and pins: its footer counts neither.
OLDER = b"".join(
    json.dumps(record).encode() + b"\n"
    for record in (
        {"type": "header", "format": "strata-memory-export", "version": 1,
         "exported_at": "2025-01-01T00:00:00Z", "exported_at_us": 1735689600000000,
         "scope": {"user_id": "zoe", "agent_id": ""}, "model": "m", "dim": 4},
        {"type": "footer", "records": {"session": 0, "episode": 0}, "kinds": {}},
    )
)  # fmt: skip
ANCHOR = "Task: plan Alice's move. Done: chose Porto. Next: find a flat near the river."


def ready(c: MemoryClient) -> None:
    wait_until(lambda: c.health() == "SERVING", 120, "for Tier 3 to open")


def test_anchor_and_pin_survive_a_kill_the_end_of_the_session_and_an_export(spawn, tmp_path):
    first = spawn(tmp_path / "a", **QUIET_ENV)
    with first.client(timeout=60) as c:
        ready(c)
        c.append("before", "My sister Ana lives in Porto.", user_id="alice", name="Alice")
        c.end_session("before", user_id="alice")
        wait_indexed(c)
        (hit,) = [h for h in c.recall("Ana Porto", user_id="alice", k=3).hits if "Ana" in h.text]
        c.append_batch(
            "move",
            [message("Let's plan my move.", name="Alice"), message("Sure!", role="assistant")],
            user_id="alice",
        )
        c.set_anchor("move", ANCHOR, user_id="alice")
        c.pin_memory(hit.id, user_id="alice")
    first.kill()  # SIGKILL: both were durable when their calls returned

    again = spawn(tmp_path / "a", **QUIET_ENV)
    with again.client(timeout=60) as c:
        ready(c)
        ctx = c.get_context("move", 500, user_id="alice")
        assert ctx.state == pb.SESSION_STATE_OPEN and ctx.anchor.text == ANCHOR
        assert ctx.text.startswith("Session anchor (updated ") and ANCHOR in ctx.text
        assert [(m.id, m.pinned) for m in ctx.memories][:1] == [(hit.id, True)]
        assert [m.message.content for m in ctx.messages] == ["Let's plan my move.", "Sure!"]
        c.end_session("move", user_id="alice")
        ended = c.get_context("move", 500, user_id="alice")
        assert ended.state == pb.SESSION_STATE_ENDED and not ended.messages
        assert ended.anchor.text == ANCHOR and ended.memories[0].id == hit.id
        data = b"".join(chunk.data for chunk in c.admin.export("alice"))
    records = [json.loads(line) for line in data.splitlines()]
    anchors = [r for r in records if r["type"] == "anchor"]
    pins = [r for r in records if r["type"] == "pin"]
    assert [(a["session_id"], a["text"], a["user_id"]) for a in anchors] == [
        ("move", ANCHOR, "alice")
    ]
    assert [(p["memory_id"], p["agent_id"]) for p in pins] == [(hit.id, "")]
    assert records[-1]["records"]["anchor"] == 1 and records[-1]["records"]["pin"] == 1
    again.terminate()

    other = spawn(tmp_path / "b", **QUIET_ENV)
    with other.client(timeout=60) as c:
        ready(c)
        assert c.admin.import_([OLDER]).user_id == "zoe"  # a file of before anchors and pins
        imported = c.admin.import_([data])
        assert imported.written.records["anchor"] == 1 and imported.written.records["pin"] == 1
        ctx = c.get_context("move", 500, user_id="alice")
        assert ctx.anchor.text == ANCHOR and ctx.anchor.updated_at == ended.anchor.updated_at
        assert ctx.memories[0].id == hit.id and ctx.memories[0].pinned
        assert "Ana lives in Porto" in ctx.memories[0].text

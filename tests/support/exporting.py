"""What the export tests write and read (``tests/tiers/rights/test_export*.py``): two users'
LoCoMo-like conversations filled into a daemon and consolidated, exports and their records, the
points of a user."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from stratad_client import MemoryClient, message
from tests.support import ThreadDaemon, wait_indexed, wait_until
from tiers.semantic.vectors import PointFilter

MAY, JUNE = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC), dt.datetime(2023, 6, 9, tzinfo=dt.UTC)
ALICE_ONLY = "Zanzibar-4471"  # in alice's data only: never in bob's export
BOB_ONLY = "Quokka-9183"


def talk(
    c: MemoryClient,
    user: str,
    sid: str,
    when: dt.datetime,
    turns: list[tuple[str, str]],
    *,
    agent: str = "",
    end: bool = True,
) -> str:
    c.append_batch(
        sid,
        [
            message(
                text,
                name=who,
                created_at=when + dt.timedelta(minutes=i),
                message_id=f"{sid}-{when:%m%d}-{i}",
                metadata={"dia_id": f"D{i + 1}"},
            )
            for i, (who, text) in enumerate(turns)
        ],
        user_id=user,
        agent_id=agent,
    )
    return c.end_session(sid).episode_id if end else ""


def fill(c: MemoryClient) -> dict[str, str]:
    """Two users' LoCoMo-like conversations, consolidated; alice keeps two open sessions (one
    the second generation of an ended one) and one episode indexed but not consolidated."""
    ep = {
        "s1": talk(
            c,
            "alice",
            "alice-s1",
            MAY,
            [
                ("Caroline", "I went to an LGBTQ support group yesterday and it was powerful."),
                ("Melanie", "That's great! I just adopted a puppy named Bolt."),
                ("Caroline", "I moved to Berlin last week for a new job."),
                ("Melanie", "I love painting landscapes on weekends."),
            ],
        ),
        "s2": talk(
            c,
            "alice",
            "alice-s2",
            MAY + dt.timedelta(days=17),
            [
                ("Melanie", "I took my kids camping at the lake last weekend."),
                ("Caroline", f"I work at Acme as a counselor, badge {ALICE_ONLY}."),
                ("Melanie", "Our cat Luna loves the garden."),
                ("Caroline", "I am researching adoption agencies."),
            ],
        ),
        "chat1": talk(
            c, "alice", "chat", JUNE, [("Caroline", "I started pottery classes this week.")]
        ),
        "coach": talk(
            c,
            "alice",
            "alice-coach",
            JUNE,
            [("Caroline", "My goal is to run a marathon in October.")],
            agent="coach",
        ),
        "bob": talk(
            c,
            "bob",
            "bob-s1",
            MAY,
            [
                ("Bob", "I moved to Berlin last week for a new job."),
                ("Jon", f"I adopted a puppy named Bolt, tag {BOB_ONLY}."),
            ],
        ),
    }
    wait_indexed(c, 180)
    report = list(c.admin.run_weaver())[-1].report
    assert report.ok and report.facts >= 4 and report.triplets >= 1, report
    ep["late"] = talk(
        c, "alice", "alice-late", JUNE, [("Melanie", "We painted a sunset together today.")]
    )
    wait_indexed(c, 60)
    talk(c, "alice", "chat", JUNE, [("Caroline", "Pottery is going well.")], end=False)
    c.append_batch(
        "alice-open",
        [
            message("Remind me about the adoption agency call.", name="Caroline"),
            message("", role="assistant", tool_call=("remind", '{"when": "friday"}')),
            message("Done: Friday.", role="tool", message_id="t-1", metadata={"k": "v"}),
        ],
        user_id="alice",
    )
    # The open sessions' turns are embedded in a batch (weaver.live_batch_seconds), noted
    # at each append: an export taken before that batch has their logs without their points.
    wait_until(lambda: c.admin.weaver_status().live_unindexed == 0, 120, "for the live batch")
    return ep


def exported(c: MemoryClient, user: str, agent: str = "") -> bytes:
    chunks = list(c.admin.export(user, agent_id=agent, timeout=120))
    assert chunks[-1].done and not any(ch.done for ch in chunks[:-1])
    return b"".join(ch.data for ch in chunks)


def records(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def user_points(d: ThreadDaemon, user: str) -> dict[str, str]:
    _embedder, vectors = d.daemon.parts.semantic.wait_ready(60)
    return {p.id: p.kind for p in vectors.scroll(PointFilter(user_id=user), 100_000)}

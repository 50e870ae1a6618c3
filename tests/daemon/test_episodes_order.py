"""Episodes in Tier 3 under the interleavings of a Forget with the writers that re-derive them,
and of a consolidation that writes a fact again after it was superseded. What
``tests/tiers/rights/test_forget_writers.py`` checks after the Forget (every writer run again),
this file checks while a writer is half way: the index job embedding the episode (no lock held), the
index job and a rebuild inside their locked step (the Forget waits for it, then removes what
they wrote), and a resumed run writing a superseded fact again (it stays superseded
throughout). Each case holds the writer at that point (:mod:`tests.support.gates`) on a real
daemon, through gRPC."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import MAY
from tests.support.forgetting import SECRET, talk
from tests.support.gates import DEADLINE, Gated, gated_daemon, holding, settled, when
from tests.support.weaving import conversation, run
from tiers.core.records import Scope
from tiers.semantic.tombstones import is_forgotten
from tiers.semantic.vectors import MemoryPoint, PointFilter

pytestmark = pytest.mark.slow
ALICE = Scope("alice")
QUESTION = "What is the locker code?"


class Hooked(Gated):
    """A daemon of :func:`gated_daemon` with alice's session "kept" written and indexed."""

    def secrets(self) -> list[str]:
        """Recall's hits that hold the secret."""
        hits = self.c.recall(f"{QUESTION} {SECRET}", user_id="alice", k=20).hits
        return [h.text for h in hits if SECRET in h.text]

    def of_session(self, session_id: str) -> list[MemoryPoint]:
        points = self.vectors.scroll(PointFilter(user_id="alice"), 10_000)
        return [p for p in points if p.session_id == session_id]

    def writes_of(self, session_id: str) -> list[MemoryPoint]:
        """Every point of ``session_id`` upserted from now on, in order."""
        assert self.hooks.vectors is not None
        seen: list[MemoryPoint] = []
        self.hooks.vectors.after_upsert.append(
            lambda points: seen.extend(p for p in points if p.session_id == session_id)
        )
        return seen


@pytest.fixture
def hooked(start_daemon) -> Iterator[Hooked]:
    with gated_daemon(start_daemon) as g:
        talk(g.c, "alice", "kept", "I keep my bike in the hall.", "Good idea.")
        settled(g.weaver)
        yield Hooked(**vars(g))


def in_session(session_id: str) -> Any:
    return lambda points: any(p.session_id == session_id for p in points)


def test_a_forget_while_the_index_job_embeds_the_episode_leaves_nothing(hooked: Hooked):
    h = hooked
    assert h.hooks.embedder is not None
    pause = h.hooks.pause("the index job embedding the episode")
    h.hooks.embedder.before_documents.append(
        when(lambda texts: any(SECRET in t for t in texts), pause)
    )
    written = h.writes_of("s1")
    eid = talk(h.c, "alice", "s1", f"My locker code is {SECRET}.", "Noted.")
    pause.reached()
    r = h.c.forget(episode_ids=[eid])  # the job holds no lock while it embeds
    assert (r.episodes, r.vector_points) == (1, 0)
    assert h.secrets() == []
    pause.release()
    settled(h.weaver)
    assert written == []  # dropped at the door (the tombstone), never written and deleted
    assert h.secrets() == [] and h.of_session("s1") == []
    assert h.d.daemon.parts.journal.unindexed() == []  # type: ignore[union-attr]
    assert h.of_session("kept")  # the other episode is untouched


@pytest.mark.parametrize("writer", ["index", "rebuild"])
def test_a_forget_while_a_writer_is_inside_its_step_waits_and_then_removes_it(
    hooked: Hooked, writer: str
):
    """The index job (and a rebuild, which re-derives every episode under the lock) holds
    Tier 3's write lock from its tombstone check to its marks: a Forget arriving meanwhile
    waits, then removes what the step wrote."""
    h = hooked
    assert h.hooks.vectors is not None
    pause = h.hooks.pause(f"the {writer} inside its step")
    if writer == "index":
        h.hooks.vectors.before_upsert.append(when(in_session("s1"), pause))
        eid = talk(h.c, "alice", "s1", f"My locker code is {SECRET}.", "Noted.")
        going: threading.Thread | None = None
    else:
        eid = talk(h.c, "alice", "s1", f"My locker code is {SECRET}.", "Noted.")
        settled(h.weaver)
        assert h.secrets()
        h.hooks.vectors.before_upsert.append(when(in_session("s1"), pause))
        going = threading.Thread(target=lambda: h.c.admin.rebuild("alice", timeout=120))
        going.start()
    pause.reached()
    counts: list[Any] = []
    forgetting = threading.Thread(target=lambda: counts.append(h.c.forget(episode_ids=[eid])))
    forgetting.start()
    h.lock.waited_for()
    assert forgetting.is_alive()
    pause.release()
    forgetting.join(DEADLINE)
    assert counts and counts[0].episodes == 1 and counts[0].vector_points >= 2  # the step's
    assert h.secrets() == []
    if going is not None:
        going.join(DEADLINE)
        assert not going.is_alive()
    settled(h.weaver)
    assert h.secrets() == [] and h.of_session("s1") == []
    assert is_forgotten(h.d.daemon.parts.state, episode_id=eid)  # type: ignore[arg-type]
    assert h.of_session("kept")


def test_a_superseded_fact_written_again_stays_superseded_throughout(hooked: Hooked):
    """A run that wrote an episode's facts and died before clearing its pending mark runs it
    again from the stored extraction: the facts are written again with their ids. One that a
    later fact superseded meanwhile must not read as current, not even between its write and
    the supersession step that follows it."""
    h = hooked
    earlier = conversation(h.c, "earlier", MAY, "I live in Paris.")
    conversation(h.c, "later", dt.datetime(2024, 2, 1, tzinfo=dt.UTC), "I moved to Berlin.")
    assert run(h.c).superseded == 1
    facts = {
        p.attrs.get("object"): p
        for p in h.vectors.scroll(PointFilter(user_id="alice", kinds=("fact",)), 1000)
        if p.attrs.get("predicate") == "lives_in"
    }
    paris, berlin = facts["Paris"], facts["Berlin"]
    assert paris.valid_to_us == berlin.valid_from_us and berlin.valid_to_us is None
    journal = h.d.daemon.parts.journal
    assert journal is not None
    header = journal.find(earlier)
    assert header is not None
    journal.set_marks(header, indexed=True, consolidated=False)  # its run died after the writes

    pause = h.hooks.pause("the run after writing the Paris fact again")
    assert h.hooks.vectors is not None
    h.hooks.vectors.after_upsert.append(when(holding(paris.id, paris.text), pause))
    reports: list[Any] = []
    running = threading.Thread(target=lambda: reports.append(run(h.c)))
    running.start()
    pause.reached()
    assert superseded(h, paris.id) == [True], "the superseded fact read as current"
    (point,) = h.vectors.get([paris.id])
    assert point.valid_to_us == berlin.valid_from_us
    pause.release()
    running.join(DEADLINE)
    assert reports and reports[0].ok and reports[0].episodes == 1
    assert superseded(h, paris.id) == [True] and superseded(h, berlin.id) == [False]
    edge = h.d.daemon.parts.semantic.graph.get(paris.id)  # type: ignore[union-attr]
    assert edge is not None and edge.valid_to_us == berlin.valid_from_us


def superseded(h: Hooked, fact_id: str) -> list[bool]:
    """Whether Recall marks the fact superseded (one entry per hit of it)."""
    hits = h.c.recall("Where does Alice live? Paris Berlin", user_id="alice", kinds=["fact"]).hits
    return [h.superseded for h in hits if h.id == fact_id]

"""The local extractor over the LoCoMo dev conversations, read by ``tests/bench/locomo/data.py``
(skipped when ``../shared`` is absent; CI fails instead): known turns of conv-26 and a run
over every session."""

from __future__ import annotations

import os
import re
import time
from datetime import date
from functools import cache

import pytest

from tests.bench.locomo import data as locomo_data
from tests.support.local_extraction import texts, us
from tiers.core.records import Scope
from weaver.extractors import EpisodeInput, Extraction, Fact, Turn
from weaver.extractors.local import LocalExtractor


@cache
def _locomo() -> locomo_data.Dataset:
    return locomo_data.load()


@pytest.fixture
def locomo() -> locomo_data.Dataset:
    if (missing := locomo_data.missing()) is not None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{missing}: CI always has ../shared, so these tests must run")
        pytest.skip(missing)
    return _locomo()


def session_episode(conv: locomo_data.Conversation, session: locomo_data.Session) -> EpisodeInput:
    n = session.number
    base = int(session.started_at.timestamp()) * 1_000_000
    turns = []
    for i, t in enumerate(session.turns, start=1):
        assert t.dia_id == f"D{n}:{i}"
        turns.append(Turn(i, t.speaker, "user", t.text, base + i))
    return EpisodeInput(f"{conv.sample_id}-{n}", f"session_{n}", Scope("locomo"), turns)


def conv26(locomo: locomo_data.Dataset, n: int) -> Extraction:
    [conv] = [c for c in locomo.conversations if c.sample_id == "conv-26"]
    [session] = [s for s in conv.sessions if s.number == n]
    return LocalExtractor().extract(session_episode(conv, session))


def facts_of(x: Extraction, seq: int) -> list[Fact]:
    return [f for f in x.facts if f.source_seqs == [seq]]


def test_locomo_support_group_yesterday(locomo: locomo_data.Dataset) -> None:
    # D1:3, 8 May 2023, Caroline: "I went to a LGBTQ support group yesterday and it was so
    # powerful."
    [fact] = [f for f in facts_of(conv26(locomo, 1), 3) if "support group" in f.text]
    assert fact.text.startswith("Caroline went to a LGBTQ support group on 7 May 2023")
    assert fact.valid_from_us == us(date(2023, 5, 7), hour=0)
    assert fact.triplet is not None
    assert (fact.triplet.subject, fact.triplet.predicate) == ("Caroline", "went_to")
    assert fact.triplet.object == "LGBTQ support group"


def test_locomo_known_turns(locomo: locomo_data.Dataset) -> None:
    s1 = conv26(locomo, 1)
    # D1:14 Melanie: "Yeah, I painted that lake sunrise last year! It's special to me."
    assert texts(facts_of(s1, 14)) == ["Melanie painted that lake sunrise in 2022."]
    assert facts_of(s1, 14)[0].valid_from_us == us(date(2022, 1, 1), hour=0)
    # D1:16 Melanie: "... Painting's a fun way to express my feelings and get creative. ..."
    assert "Painting's a fun way to express Melanie's feelings and get creative." in texts(
        facts_of(s1, 16)
    )
    # D1:11 Caroline: "I'm keen on counseling or working in mental health - I'd love to ..."
    d11 = facts_of(s1, 11)
    assert texts(d11) == [
        "Caroline is keen on counseling or working in mental health.",
        "Caroline would love to support those with similar issues.",
    ]
    assert [f.triplet.predicate if f.triplet else None for f in d11] == ["plans_to", "plans_to"]
    # D2:1 (Thursday 25 May 2023) Melanie: "I ran a charity race for mental health last Saturday"
    assert "Melanie ran a charity race for mental health on 20 May 2023." in texts(
        facts_of(conv26(locomo, 2), 1)
    )
    # D3:14 Melanie: "I'm lucky to have my husband and kids; they keep me motivated."
    [husband] = [f for f in facts_of(conv26(locomo, 3), 14) if "husband" in f.text]
    assert husband.text == "Melanie is lucky to have Melanie's husband and kids."
    assert husband.triplet is not None
    assert (husband.triplet.subject, husband.triplet.predicate) == ("Melanie", "has")
    # D9:6 Caroline: "I mentor a transgender teen just like me."
    assert "Caroline mentors a transgender teen just like Caroline." in texts(
        facts_of(conv26(locomo, 9), 6)
    )
    # D13:4 Melanie: "... they're good- we got another cat named Bailey too."
    [cat] = [f for f in facts_of(conv26(locomo, 13), 4) if "Bailey" in f.text]
    assert cat.triplet is not None
    assert (cat.triplet.subject, cat.triplet.predicate, cat.triplet.object) == (
        "Melanie",
        "has_pet",
        "cat named Bailey",
    )
    # D19:1 (Sunday 22 October 2023) Caroline: "I passed the adoption agency interviews last
    # Friday!"
    assert "Caroline passed the adoption agency interviews on 20 October 2023." in texts(
        facts_of(conv26(locomo, 19), 1)
    )


def test_locomo_all_sessions(locomo: locomo_data.Dataset) -> None:
    extractor = LocalExtractor()
    sessions = turns = facts = triplets = 0
    elapsed = 0.0
    predicates: dict[str, int] = {}
    for conv in locomo.conversations:
        for session in conv.sessions:
            ep = session_episode(conv, session)
            start = time.perf_counter()
            x = extractor.extract(ep)
            elapsed += time.perf_counter() - start
            seqs = {t.seq for t in ep.turns}
            sessions += 1
            turns += len(ep.turns)
            facts += len(x.facts)
            assert x.summary.startswith("Conversation between ")
            assert 0 < len(x.summary_source_seqs) <= 4
            assert set(x.summary_source_seqs) <= seqs
            assert len({f.text for f in x.facts}) == len(x.facts)
            for f in x.facts:
                assert len(f.source_seqs) == 1 and f.source_seqs[0] in seqs
                assert f.valid_from_us is not None and f.text.endswith(".")
                unquoted = re.sub(r'"[^"]*"', "", f.text)
                assert not unquoted.startswith("I "), f.text
                assert not re.search(r" (?:I|my|me|I'm|I've)[ ,.]", unquoted), f.text
                if f.triplet:
                    triplets += 1
                    predicates[f.triplet.predicate] = predicates.get(f.triplet.predicate, 0) + 1
                    assert f.triplet.subject and f.triplet.object
                    assert re.fullmatch(r"[a-z]+(?:_[a-z]+)*", f.triplet.predicate)
    assert sessions == 128 and turns == 2760
    assert 0.8 < facts / turns < 2.5
    assert triplets > 150
    per_episode_ms = elapsed * 1000 / sessions
    assert per_episode_ms < 50
    print(
        f"\nLoCoMo: {sessions} sessions, {turns} turns, {facts} facts ({facts / turns:.2f}/turn), "
        f"{triplets} triplets, {per_episode_ms:.1f} ms/episode"
    )
    print("predicates:", dict(sorted(predicates.items(), key=lambda kv: -kv[1])))

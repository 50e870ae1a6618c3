"""The :class:`weaver.extractors.Extractor` contract, run against every implementation: the
local extractor (with the real model for its summary, as the daemon wires it) and the LLM
extractor on a loopback OpenAI-compatible server, whose "model" answers from the turns it is
sent: a summary and one fact per turn, plus citations of turns that do not exist."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

from tests.contracts.models_kit import DOWN_CAUSES, down, loopback_client, minilm
from tests.support.llm_extraction import EPISODE, episode
from tests.support.llm_server import FakeOpenAI, Reply
from tiers.core.records import Scope
from weaver.errors import ExtractionFailed
from weaver.extractors import EpisodeInput, Extraction, Extractor, Triplet
from weaver.extractors.llm import LLMExtractor
from weaver.extractors.llm_reply import DATA_CLOSE, DATA_OPEN
from weaver.extractors.local import LocalExtractor

IMPLEMENTATIONS = ["local", "llm"]
UNKNOWN_SEQ = 99

TRIP = episode(
    ("Caroline", "I went to an LGBTQ support group yesterday and it was powerful."),
    ("Melanie", "That's great! I painted a sunrise over the lake last week."),
    ("Caroline", "My mom gave me a necklace from Sweden when I was young."),
    ("Melanie", "Lovely. We are going camping in the mountains next month."),
)


def model_reply(request: Any) -> Reply:
    """What the fake model answers: a summary and a fact per turn it was sent, each with a
    triplet; the summary and one more fact also cite a turn that does not exist."""
    user = request["messages"][1]["content"]
    turns = json.loads(user[user.index(DATA_OPEN) + len(DATA_OPEN) : user.index(DATA_CLOSE)])
    seqs = [t["seq"] for t in turns]
    facts = [
        {
            "text": f"{t['speaker']} said: {t['text']}",
            "source_seqs": [t["seq"]],
            "triplet": {"subject": t["speaker"], "predicate": "said", "object": t["text"][:40]},
            "valid_from": t["time"],
            "confidence": 0.9,
        }
        for t in turns
    ]
    facts.append({"text": "Someone else said something.", "source_seqs": [UNKNOWN_SEQ]})
    summary = f"A conversation between {' and '.join(dict.fromkeys(t['speaker'] for t in turns))}."
    return Reply.json(
        {"summary": summary, "summary_source_seqs": [*seqs, UNKNOWN_SEQ], "facts": facts}
    )


@dataclass
class Impl:
    kind: str
    extractor: Extractor
    requests: list[Any]  # what went to a model over HTTP


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=model_reply) as fake:
        yield fake


@pytest.fixture(scope="module", params=IMPLEMENTATIONS)
def impl(request: pytest.FixtureRequest, server: FakeOpenAI) -> Impl:
    if request.param == "local":
        return Impl("local", LocalExtractor(embed=minilm().encode_documents), [])
    llm = LLMExtractor(loopback_client(server))
    return Impl("llm", llm, server.requests)


def seqs_of(ep: EpisodeInput) -> set[int]:
    return {t.seq for t in ep.turns}


@pytest.mark.parametrize("ep", [EPISODE, TRIP], ids=["lisbon", "trip"])
def test_an_episode_gives_a_summary_and_facts_that_cite_its_turns(
    impl: Impl, ep: EpisodeInput
) -> None:
    x = impl.extractor.extract(ep)
    assert isinstance(x, Extraction) and x.extractor == impl.extractor.name
    assert x.summary.strip()
    assert x.summary_source_seqs and set(x.summary_source_seqs) <= seqs_of(ep)
    assert x.summary_source_seqs == sorted(set(x.summary_source_seqs))
    assert x.facts
    for fact in x.facts:
        assert fact.text.strip()
        assert fact.source_seqs and set(fact.source_seqs) <= seqs_of(ep)
        assert 0.0 < fact.confidence <= 1.0
        assert fact.valid_from_us is None or isinstance(fact.valid_from_us, int)
    triplets = [f.triplet for f in x.facts if f.triplet is not None]
    assert triplets  # both find some in these episodes
    for t in triplets:
        assert isinstance(t, Triplet) and t.subject.strip() and t.object.strip()
        assert t.predicate and t.predicate == t.predicate.lower() and " " not in t.predicate


def test_facts_never_cite_a_turn_of_another_episode(impl: Impl) -> None:
    """Seqs are the episode's own: the same texts at other seqs are cited at those."""
    shifted = EpisodeInput(
        "ep-2", "sess-2", Scope("u1"), [replace(t, seq=t.seq + 40) for t in TRIP.turns]
    )
    x = impl.extractor.extract(shifted)
    assert {s for f in x.facts for s in f.source_seqs} <= seqs_of(shifted)
    assert set(x.summary_source_seqs) <= seqs_of(shifted)


def test_the_same_episode_gives_the_same_extraction(impl: Impl) -> None:
    assert impl.extractor.extract(TRIP) == impl.extractor.extract(TRIP)


# -- errors ----------------------------------------------------------------------------------


def test_empty_episode_fails_without_a_request(impl: Impl) -> None:
    sent = len(impl.requests)
    with pytest.raises(ExtractionFailed, match="no t"):  # "no turns", "no text"
        impl.extractor.extract(EpisodeInput("ep-0", "s", Scope("u1"), []))
    assert len(impl.requests) == sent


@pytest.mark.parametrize("kind", IMPLEMENTATIONS)
def test_a_model_that_cannot_answer_fails_the_extraction(kind: str, server: FakeOpenAI) -> None:
    """No partial result: the model's error becomes ExtractionFailed (and its cause)."""
    with down(server) as (embed, client):
        extractor = LocalExtractor(embed=embed) if kind == "local" else LLMExtractor(client)
        with pytest.raises(ExtractionFailed) as err:
            extractor.extract(TRIP)
    assert isinstance(err.value.__cause__, DOWN_CAUSES[kind])

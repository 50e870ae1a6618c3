"""A stored consolidation record (:mod:`weaver.consolidate`) as JSON, for exports.

The stored record is msgpack with short keys; an export (``tiers.rights.archive.format``, record
type
``extraction``) carries it in readable form::

    {"extractor": "local", "summary": "...", "summary_source_seqs": [1, 2],
     "facts": [{"text": "...", "source_seqs": [1], "valid_from_us": null, "confidence": 1.0,
                "triplet": {"subject": "Alice", "predicate": "lives_in", "object": "Paris"},
                "updates": ["<the id of a fact it replaced>"]}],
     "provenance": {"session_id": "s1", "turns": [{"seq": 1, "speaker": "Alice",
                    "role": "user", "created_at_us": 0, "message_id": "", "metadata": {}}]}}

``provenance`` is null for records written before records kept it. :func:`record_from_json`
is the inverse and raises TypeError or ValueError on a document of the wrong shape (the
import names the line).
"""

from __future__ import annotations

from typing import Any

from tiers.core.records import Scope
from weaver.consolidate import decode_record, encode_extraction
from weaver.extractors import EpisodeInput, Extraction, Fact, Triplet, Turn


def record_to_json(raw: bytes) -> tuple[Scope | None, dict[str, Any]]:
    """The record's scope (from its provenance; None without one) and its JSON form."""
    extraction, episode = decode_record(raw)
    provenance = None
    if episode is not None:
        provenance = {
            "session_id": episode.session_id,
            "turns": [
                {
                    "seq": t.seq,
                    "speaker": t.speaker,
                    "role": t.role,
                    "created_at_us": t.created_at_us,
                    "message_id": t.message_id,
                    "metadata": t.metadata,
                }
                for t in episode.turns
            ],
        }
    doc = {
        "extractor": extraction.extractor,
        "summary": extraction.summary,
        "summary_source_seqs": list(extraction.summary_source_seqs),
        "facts": [
            {
                "text": f.text,
                "source_seqs": list(f.source_seqs),
                "triplet": (
                    None
                    if f.triplet is None
                    else {
                        "subject": f.triplet.subject,
                        "predicate": f.triplet.predicate,
                        "object": f.triplet.object,
                    }
                ),
                "valid_from_us": f.valid_from_us,
                "confidence": f.confidence,
                "updates": list(f.updates),
            }
            for f in extraction.facts
        ],
        "provenance": provenance,
    }
    return (episode.scope if episode is not None else None), doc


def record_from_json(episode_id: str, scope: Scope, doc: dict[str, Any]) -> bytes:
    """The stored record for ``doc`` (:func:`record_to_json`'s form). Raises TypeError,
    ValueError or KeyError when it is not that form."""
    facts = []
    for f in _list(doc["facts"], "facts"):
        triplet = f["triplet"]
        facts.append(
            Fact(
                text=_str(f["text"], "facts[].text"),
                source_seqs=_ints(f["source_seqs"], "facts[].source_seqs"),
                triplet=(
                    None
                    if triplet is None
                    else Triplet(
                        _str(triplet["subject"], "subject"),
                        _str(triplet["predicate"], "predicate"),
                        _str(triplet["object"], "object"),
                    )
                ),
                valid_from_us=_opt_int(f["valid_from_us"], "facts[].valid_from_us"),
                confidence=_number(f["confidence"], "facts[].confidence"),
                # Absent in exports made before a fact could name what it updates.
                updates=[
                    _str(u, "facts[].updates[]")
                    for u in _list(f.get("updates", []), "facts[].updates")
                ],
            )
        )
    extraction = Extraction(
        summary=_str(doc["summary"], "summary"),
        summary_source_seqs=_ints(doc["summary_source_seqs"], "summary_source_seqs"),
        facts=facts,
        extractor=_str(doc["extractor"], "extractor"),
    )
    provenance = doc["provenance"]
    episode = None
    if provenance is not None:
        turns = [
            Turn(
                seq=_int(t["seq"], "turns[].seq"),
                speaker=_str(t["speaker"], "turns[].speaker"),
                role=_str(t["role"], "turns[].role"),
                text="",
                created_at_us=_int(t["created_at_us"], "turns[].created_at_us"),
                message_id=_str(t["message_id"], "turns[].message_id"),
                metadata=_str_map(t["metadata"], "turns[].metadata"),
            )
            for t in _list(provenance["turns"], "provenance.turns")
        ]
        session_id = _str(provenance["session_id"], "provenance.session_id")
        episode = EpisodeInput(episode_id, session_id, scope, turns)
    return encode_extraction(extraction, episode)


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= 2**63:
        raise TypeError(f"{what} must be an integer")
    return value


def _opt_int(value: Any, what: str) -> int | None:
    return None if value is None else _int(value, what)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number")
    return float(value)


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{what} must be a list")
    return value


def _ints(value: Any, what: str) -> list[int]:
    return [_int(v, what) for v in _list(value, what)]


def _str_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise TypeError(f"{what} must map strings to strings")
    return dict(value)

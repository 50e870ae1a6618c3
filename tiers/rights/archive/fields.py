"""The field readers of :mod:`tiers.rights.archive.parser`: each takes a record (a JSON object) and
a key, and returns the field's value, checked, or raises :class:`Bad` saying what is wrong (the
parser adds the line)."""

from __future__ import annotations

from typing import Any

from tiers.rights.archive.format import EPISODE_ID, MAX_US, MIN_US
from tiers.semantic.vectors import Source, canonical_id


class Bad(ValueError):
    """A field problem; :class:`tiers.rights.archive.parser.ExportParser` adds the line number."""


def no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def string(d: dict[str, Any], key: str, *, empty: bool = False) -> str:
    value = d.get(key)
    if not isinstance(value, str):
        raise Bad(f"{key} must be a string")
    if not value and not empty:
        raise Bad(f"{key} must not be empty")
    return value


def integer(d: dict[str, Any], key: str, low: int) -> int:
    value = d.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**63:
        raise Bad(f"{key} must be an integer of at least {low}")
    return value


def boolean(d: dict[str, Any], key: str) -> bool:
    value = d.get(key)
    if not isinstance(value, bool):
        raise Bad(f"{key} must be true or false")
    return value


def micros(d: dict[str, Any], key: str, *, optional: bool = False) -> Any:
    value = d.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_US <= value <= MAX_US:
        raise Bad(f"{key} must be a time in microseconds since the epoch (an integer)")
    return value


def episode_id(d: dict[str, Any], key: str) -> str:
    value = d.get(key)
    if not isinstance(value, str) or not EPISODE_ID.fullmatch(value):
        raise Bad(f"{key} must be 32 lowercase hex characters")
    return value


def uuid_str(d: dict[str, Any], key: str) -> str:
    value = d.get(key)
    if not isinstance(value, str) or canonical_id(value) != value:
        raise Bad(f"{key} must be a UUID in canonical form")
    return value


def mapping(d: dict[str, Any], key: str) -> dict[str, Any]:
    value = d.get(key)
    if not isinstance(value, dict):
        raise Bad(f"{key} must be an object")
    return value


def str_map(d: dict[str, Any], key: str) -> dict[str, str]:
    value = mapping(d, key)
    if not all(isinstance(v, str) for v in value.values()):
        raise Bad(f"{key} must map strings to strings")
    return value


def sources(d: dict[str, Any]) -> list[Source]:
    value = d.get("sources")
    if not isinstance(value, list) or not all(isinstance(s, dict) for s in value):
        raise Bad("sources must be a list of objects")
    return [
        Source(
            session_id=string(s, "session_id", empty=True),
            seq=integer(s, "seq", 0),
            message_id=string(s, "message_id", empty=True),
            metadata=str_map(s, "metadata"),
            speaker=string(s, "speaker", empty=True),
            created_at_us=micros(s, "created_at_us"),
            text=string(s, "text", empty=True),
            role=string(s, "role", empty=True),
        )
        for s in value
    ]

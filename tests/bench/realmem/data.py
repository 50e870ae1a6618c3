"""RealMem for the benchmarks and the tests: personas, sessions, turns, and the queries with
their gold sessions. The one reader of the files: the data stays in ``../shared`` and is never
copied.

The files are ``../shared/data/realmem/*_dialogues_256k.json`` beside the checkout (see
``../shared/README.md``), one persona each, sorted by name. A file is ``{_metadata, dialogues:
[{session_identifier, session_uuid, current_time, dialogue_turns, ...}]}`` with the sessions in
time order. A query is a User turn whose ``is_query`` is true (the string ``"True"`` or a JSON
boolean: the files have booleans); its gold is the next Assistant turn's
``memory_session_uuids``: a list, or a list written as a string (``ast.literal_eval``). The
query's own session is dropped from its gold (so would be a uuid naming no earlier session of
the file; the files have none), and a query left without gold is skipped (and counted). Turns
with empty text cannot be appended (the daemon refuses them): they are left out, and counted.

``current_time`` is a date only ("2025-12-20 (Saturday)"), several sessions may share a day,
and in one file the dates go backwards while the gold never names a later session of the
file: the file's order is the time order. A session's time (:attr:`Session.at`) is its date at
:data:`DAY_START`, at least :data:`SESSION_GAP` after the session before it (so the order
within a day is kept, and a date earlier than the session before it is moved forward: counted
in :attr:`Persona.moved`); turn ``i`` of a session is at ``at + i`` seconds.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import ROOT

REALMEM_DIR = ROOT.parent / "shared" / "data" / "realmem"
PATTERN = "*_dialogues_256k.json"
DAY_START = dt.timedelta(hours=9)
SESSION_GAP = dt.timedelta(hours=1)  # more than a session's turns at a second each
ROLES = {"user": "user", "assistant": "assistant"}


@dataclass(frozen=True, slots=True)
class Turn:
    index: int  # position in the session's dialogue_turns, from 0
    role: str  # "user" or "assistant"
    text: str


@dataclass(frozen=True, slots=True)
class Query:
    qid: str  # "<persona>/<session_uuid>/<turn index>"
    query_id: str  # the file's query_id (may be empty)
    turn: int  # the query turn's index in its session's dialogue_turns
    text: str
    gold: tuple[str, ...]  # session_uuids of earlier sessions, in the file's order, no repeats


@dataclass(frozen=True, slots=True)
class Session:
    uuid: str
    identifier: str
    date: dt.date
    at: dt.datetime  # UTC, see the module's docstring
    turns: tuple[Turn, ...]  # non-empty turns only
    queries: tuple[Query, ...]

    def turn_time(self, turn: Turn) -> dt.datetime:
        return self.at + dt.timedelta(seconds=turn.index)


@dataclass(frozen=True, slots=True)
class Persona:
    name: str
    sessions: tuple[Session, ...]
    moved: int = 0  # sessions dated before the session before them (their time moved forward)
    skipped_no_gold: int = 0  # queries whose gold was empty once their own session was dropped
    own_dropped: int = 0  # queries whose gold named their own session (dropped from it)
    not_earlier: int = 0  # other gold uuids that name no earlier session of the file (dropped)
    empty_turns: int = 0  # turns with no text, left out

    @property
    def user_id(self) -> str:
        return f"realmem-{self.name}"

    def session_id(self, session: Session) -> str:
        return f"realmem-{self.name}-{session.uuid}"

    @property
    def queries(self) -> int:
        return sum(len(s.queries) for s in self.sessions)

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


@dataclass(slots=True)
class Dataset:
    personas: list[Persona] = field(default_factory=list)

    @property
    def sessions(self) -> int:
        return sum(len(p.sessions) for p in self.personas)

    @property
    def turns(self) -> int:
        return sum(p.turns for p in self.personas)

    @property
    def queries(self) -> int:
        return sum(p.queries for p in self.personas)

    def total(self, attr: str) -> int:
        return sum(int(getattr(p, attr)) for p in self.personas)


def missing(path: Path = REALMEM_DIR) -> str | None:
    """Why the RealMem files cannot be read (None: they are there)."""
    if path.is_dir() and any(path.glob(PATTERN)):
        return None
    return (
        f"RealMem data not found at {path}: this needs the shared data beside the checkout "
        "(../shared/data/realmem/, see ../shared/README.md)"
    )


def is_true(value: Any) -> bool:
    """``is_query`` as the files write it: a boolean, or the string "True"."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def parse_uuids(value: Any) -> list[str]:
    """``memory_session_uuids``: a list, a list written as a string, or nothing."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        value = ast.literal_eval(value)
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def parse_date(text: str) -> dt.date:
    """``"2025-12-20 (Saturday)"`` -> 2025-12-20."""
    return dt.date.fromisoformat(text.strip()[:10])


def persona_name(path: Path) -> str:
    return path.name.removesuffix(PATTERN.removeprefix("*"))


def read_persona(name: str, doc: dict[str, Any]) -> Persona:
    """A persona from a file's parsed JSON (see the module's docstring)."""
    sessions: list[Session] = []
    moved = skipped = own_dropped = not_earlier = empty = 0
    last: Session | None = None
    earlier: set[str] = set()
    for raw in doc["dialogues"]:
        uuid = str(raw["session_uuid"])
        date = parse_date(str(raw["current_time"]))
        at = dt.datetime.combine(date, dt.time(), tzinfo=dt.UTC) + DAY_START
        if last is not None and at < last.at + SESSION_GAP:
            moved += int(date < last.date)
            at = last.at + SESSION_GAP
        dialogue = list(raw["dialogue_turns"])
        turns: list[Turn] = []
        queries: list[Query] = []
        for i, t in enumerate(dialogue):
            role = ROLES.get(str(t["speaker"]).strip().lower())
            if role is None:
                raise ValueError(f"{name}/{uuid}: turn {i} has speaker {t['speaker']!r}")
            text = str(t.get("content") or "")
            if text.strip():
                turns.append(Turn(i, role, text))
            else:
                empty += 1
            if role != "user" or not is_true(t.get("is_query")):
                continue
            answer = dialogue[i + 1] if i + 1 < len(dialogue) else {}
            uuids = parse_uuids(answer.get("memory_session_uuids"))
            own_dropped += int(uuid in uuids)
            not_earlier += sum(u not in earlier for u in uuids if u != uuid)
            gold = tuple(dict.fromkeys(u for u in uuids if u in earlier))
            if not gold or not text.strip():
                skipped += 1
                continue
            qid = f"{name}/{uuid}/{i}"
            queries.append(Query(qid, str(t.get("query_id") or ""), i, text, gold))
        last = Session(
            uuid, str(raw.get("session_identifier", "")), date, at, tuple(turns), tuple(queries)
        )
        sessions.append(last)
        earlier.add(uuid)
    return Persona(name, tuple(sessions), moved, skipped, own_dropped, not_earlier, empty)


def load(path: Path = REALMEM_DIR, *, personas: int = 0) -> Dataset:
    """The personas of the files under ``path`` in name order (the first ``personas`` if > 0)."""
    if (reason := missing(path)) is not None:
        raise SystemExit(reason)
    files = sorted(path.glob(PATTERN))
    if personas > 0:
        files = files[:personas]
    return Dataset([read_persona(persona_name(f), json.loads(f.read_text())) for f in files])

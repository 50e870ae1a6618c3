"""The update scenarios of :mod:`tests.bench.updates`: a user states a fact, weeks of ordinary
conversation later changes it, and asks for the current value and for the earlier one.

Ten kinds of fact (``tests/data/updates.json``: a quantity, a place, a date, a person in a
role, a choice, ...), each with its own wordings: of the first statement, of the update, of
the question for the present and of the question about the past, and its own values. Every
list is split in two halves by position (even: dev, odd: held out), so the held-out scenarios
share no wording and no value with the dev ones: a rule tuned to the dev sentences does not
carry over by accident.

Each scenario also has a stable fact of another kind that is never updated but talked about
again (a topic turn without a value): the control for updates detected where there is none.

A third split, ``fresh`` (``tests/data/updates_fresh.json``), has eight other kinds with all
their wordings, written after the rules were last changed and measured once: the figure
for a set no rule was tuned on, and no miss of which was looked at first.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HALVES = ("dev", "held-out")  # of tests/data/updates.json
SPLITS = (*HALVES, "fresh")


@dataclass(frozen=True)
class Kind:
    name: str
    values: list[tuple[str, str]]  # (first, updated)
    states: list[str]  # the first statement, {v} the value
    updates: list[str]  # the update, {v} the new value
    now: list[str]  # a question for the current value
    past: list[str]  # a question for the earlier value
    chatter: list[str]  # about the same topic, no value


DATA = Path(__file__).resolve().parents[2] / "data" / "updates.json"
_DOC = json.loads(DATA.read_text())
FRESH = Path(__file__).resolve().parents[2] / "data" / "updates_fresh.json"


def _kinds(doc: dict[str, Any]) -> list[Kind]:
    return [Kind(**{**k, "values": [tuple(v) for v in k["values"]]}) for k in doc["kinds"]]


KINDS = _kinds(_DOC)
FRESH_KINDS = _kinds(json.loads(FRESH.read_text()))
FILLER: list[str] = _DOC["filler"]


@dataclass(frozen=True)
class Scenario:
    user: str
    split: str
    kind: str
    old: str
    new: str
    sessions: list[list[str]]  # the user's messages, session by session, a day apart or more
    now: str  # the question for the current value
    past: str  # the question about the earlier value
    stable_kind: str
    stable_value: str
    stable_question: str
    notes: dict[str, str] = field(default_factory=dict)


def _say(template: str, value: str) -> str:
    text = template.format(v=value)
    return text[0].upper() + text[1:]


def _half(items: list[str], split: str) -> list[str]:
    """The wordings (or values) of ``split``: every other one of a half, all for ``fresh``."""
    return list(items) if split == "fresh" else items[HALVES.index(split) :: 2]


def kind_named(name: str) -> Kind:
    return next(k for k in (*KINDS, *FRESH_KINDS) if k.name == name)


def scenarios(split: str, n: int, seed: int = 7) -> list[Scenario]:
    """``n`` users of ``split``: each states a fact, talks for several weeks (a stable fact of
    another kind among it, talked about again), updates the fact, then asks."""
    rng = random.Random(f"{seed}-{split}")
    kinds = FRESH_KINDS if split == "fresh" else KINDS
    out = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        stable = kinds[(i * 3 + 1) % len(kinds)]
        if stable is kind:
            stable = kinds[(kinds.index(kind) + 1) % len(kinds)]
        old, new = rng.choice(_half([f"{a}\t{b}" for a, b in kind.values], split)).split("\t")
        stable_value = rng.choice(_half([a for a, _b in stable.values], split))
        statement = _say(rng.choice(_half(kind.states, split)), old)
        update = _say(rng.choice(_half(kind.updates, split)), new)
        stable_statement = _say(rng.choice(_half(stable.states, split)), stable_value)
        filler = rng.sample(FILLER, len(FILLER))
        weeks = rng.randint(3, 6)  # sessions between the statement and the update
        sessions: list[list[str]] = []
        sessions.append([filler.pop(), statement, filler.pop(), rng.choice(kind.chatter)])
        for w in range(weeks):
            turns = [filler.pop(), filler.pop()]
            if w == 0:
                turns.insert(1, stable_statement)
            if w == weeks // 2:
                turns.append(rng.choice(kind.chatter))
            if w == weeks - 1:
                turns.append(rng.choice(stable.chatter))  # the stable topic again, no value
            sessions.append(turns)
        sessions.append([filler.pop(), update, filler.pop()])
        sessions.append([filler.pop(), filler.pop()])
        out.append(
            Scenario(
                user=f"{split}-u{i:02d}",
                split=split,
                kind=kind.name,
                old=old,
                new=new,
                sessions=sessions,
                now=rng.choice(_half(kind.now, split)),
                past=rng.choice(_half(kind.past, split)),
                stable_kind=stable.name,
                stable_value=stable_value,
                stable_question=rng.choice(_half(stable.now, split)),
            )
        )
    return out

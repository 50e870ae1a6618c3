"""LoCoMo for the benchmarks and the tests: conversations, sessions, turns, questions and their
gold evidence. The one reader of the file: the data stays in ``../shared`` and is never copied.

The file is ``../shared/data/locomo/locomo_dev.json`` beside the checkout (see
``../shared/README.md``); :func:`missing` says why it cannot be read, :func:`require` stops a
benchmark with that. Evidence strings may pack several turn ids (``"D8:6; D9:17"``); they
are split, ids that do not name a turn of the conversation are dropped (and counted), and a
question left without any evidence is skipped (and counted). ``evidence_fixes_dev.json``
(an independent audit) replaces the evidence of the questions it marks ``WRONG_CITATION``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import ROOT

LOCOMO_DIR = ROOT.parent / "shared" / "data" / "locomo"
LOCOMO = LOCOMO_DIR / "locomo_dev.json"
FIXES = LOCOMO_DIR / "evidence_fixes_dev.json"
DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_SESSION = re.compile(r"session_(\d+)")
_ID_SPLIT = re.compile(r"[;,\s]+")


@dataclass(frozen=True, slots=True)
class Turn:
    speaker: str
    text: str  # the turn's text, plus " [shares a photo of <caption>]" when it has one
    dia_id: str


@dataclass(frozen=True, slots=True)
class Session:
    number: int
    started_at: dt.datetime  # session_N_date_time, as UTC
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Question:
    qid: str  # locomo_<conversation index>_qa<question index>, both 0-based
    text: str
    category: int
    evidence: tuple[str, ...]  # gold dia_ids, resolved, in citation order
    fixed: bool = False  # the evidence comes from the audit's correction


@dataclass(frozen=True, slots=True)
class Conversation:
    index: int
    sample_id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def user_id(self) -> str:
        return f"locomo-{self.sample_id}"

    def session_id(self, session: Session) -> str:
        return f"locomo-{self.sample_id}-s{session.number}"

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


@dataclass(slots=True)
class Dataset:
    conversations: list[Conversation]
    skipped_no_evidence: int = 0  # questions without any resolvable evidence id
    unresolved_ids: list[str] = field(default_factory=list)  # "locomo_0_qa5: D10:19"
    fixes_applied: int = 0
    # Every question of the file, in file order, skipped or not: the embedding benchmarks'
    # queries.
    question_texts: list[str] = field(default_factory=list)

    @property
    def questions(self) -> int:
        return sum(len(c.questions) for c in self.conversations)

    @property
    def turns(self) -> int:
        return sum(c.turns for c in self.conversations)

    @property
    def sessions(self) -> int:
        return sum(len(c.sessions) for c in self.conversations)

    def conversation_sessions(self) -> list[tuple[Conversation, Session]]:
        """Every session with its conversation, in conversation and session order."""
        return [(c, s) for c in self.conversations for s in c.sessions]


def missing(path: Path = LOCOMO) -> str | None:
    """Why ``path`` cannot be read (None: it is there)."""
    if path.exists():
        return None
    return (
        f"LoCoMo data not found at {path}: this needs the shared data beside the checkout "
        "(../shared/data/locomo/, see ../shared/README.md)"
    )


def require(path: Path) -> Path:
    """``path``, or SystemExit with :func:`missing`'s reason."""
    if (reason := missing(path)) is not None:
        raise SystemExit(reason)
    return path


def parse_date(text: str) -> dt.datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime."""
    return dt.datetime.strptime(text.strip(), DATE_FORMAT).replace(tzinfo=dt.UTC)


def split_ids(evidence: list[str]) -> list[str]:
    """``["D8:6; D9:17", "D1:3"]`` -> ``["D8:6", "D9:17", "D1:3"]`` (order kept, no repeats)."""
    ids = (part for item in evidence for part in _ID_SPLIT.split(item) if part)
    return list(dict.fromkeys(ids))


def turn_texts(sessions: Iterable[Session]) -> list[str]:
    """One ``"Speaker: text"`` per turn, as the index stage writes a turn into a chunk."""
    return [f"{t.speaker}: {t.text}" for s in sessions for t in s.turns]


def load_fixes(path: Path = FIXES) -> dict[str, list[str]]:
    """question id -> corrected evidence, for the audit's ``WRONG_CITATION`` entries."""
    items: list[dict[str, Any]] = json.loads(require(path).read_text())
    return {
        item["question_id"]: list(item["correct_evidence"])
        for item in items
        if item.get("error_type") == "WRONG_CITATION"
    }


def _sessions(conv: dict[str, Any]) -> tuple[Session, ...]:
    numbers = sorted(int(m[1]) for k in conv if (m := _SESSION.fullmatch(k)))
    sessions = []
    for n in numbers:
        turns = []
        for t in conv[f"session_{n}"]:
            text = t["text"]
            if t.get("blip_caption"):
                text += f" [shares a photo of {t['blip_caption']}]"
            turns.append(Turn(t["speaker"], text, t["dia_id"]))
        if turns:
            sessions.append(Session(n, parse_date(conv[f"session_{n}_date_time"]), tuple(turns)))
    return tuple(sessions)


def load(
    path: Path = LOCOMO, *, fixes: dict[str, list[str]] | None = None, conversations: int = 0
) -> Dataset:
    """The conversations of the file (the first ``conversations`` if > 0), with ``fixes``
    (question id -> evidence) applied."""
    samples: list[dict[str, Any]] = json.loads(require(path).read_text())
    if conversations > 0:
        samples = samples[:conversations]
    fixes = fixes or {}
    data = Dataset([])
    for ci, sample in enumerate(samples):
        sessions = _sessions(sample["conversation"])
        known = {t.dia_id for s in sessions for t in s.turns}
        questions = []
        for qi, qa in enumerate(sample["qa"]):
            if qa.get("question"):
                data.question_texts.append(str(qa["question"]))
            qid = f"locomo_{ci}_qa{qi}"
            fixed = qid in fixes
            ids = split_ids(fixes[qid] if fixed else list(qa.get("evidence") or []))
            data.fixes_applied += int(fixed)
            data.unresolved_ids += [f"{qid}: {i}" for i in ids if i not in known]
            gold = tuple(i for i in ids if i in known)
            if not gold:
                data.skipped_no_evidence += 1
                continue
            questions.append(Question(qid, qa["question"], int(qa["category"]), gold, fixed))
        data.conversations.append(Conversation(ci, sample["sample_id"], sessions, tuple(questions)))
    return data

"""What the graph takes from each memory point (:class:`Features`), and the features of a
scope's memories as arrays (:class:`FeatureTable`): no Python object per memory stays
resident, and a table goes to disk and back as a few arrays (:mod:`recall.graph.files`).

A point's features are a function of its id (a turn's, a chunk's and a fact's id is derived
from its text and sources), so features once read never go stale: a build takes the rows of
the ids a table holds and reads only the points it lacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from recall.words import names
from tiers.semantic.graph import normalize
from tiers.semantic.vectors import MemoryPoint

ID = np.dtype("S")  # point ids, as ASCII bytes (a UUID's text), sized to the longest
NAME_BYTES = 120  # a word of the vocabulary: its str, list slot and dict entry (tracemalloc)


@dataclass(frozen=True, slots=True)
class Features:
    """What the graph takes from one memory point (see the module's text)."""

    kind: str
    speakers: frozenset[str]  # the normalized speakers of its source turns
    inside: frozenset[str]  # names inside a sentence (recall.words.names)
    initial: frozenset[str]  # candidates from runs that start a sentence
    turn: tuple[str, int] | None = None  # an episode_turn's message: (session_id, seq)
    asks: bool = False  # an episode_turn whose text holds a question mark

    @classmethod
    def of(cls, point: MemoryPoint) -> Features:
        inside, initial = names(point.text)
        speakers = frozenset(normalize(s.speaker) for s in point.sources if s.speaker)
        turn = None
        if point.kind == "episode_turn" and len(point.sources) == 1:
            turn = (point.sources[0].session_id, point.sources[0].seq)
        asks = turn is not None and "?" in point.text
        return cls(point.kind, speakers, frozenset(inside), frozenset(initial), turn, asks)


@dataclass(frozen=True, slots=True)
class Ragged:
    """A list of code lists: row ``i`` is ``codes[offsets[i]:offsets[i + 1]]``."""

    offsets: np.ndarray  # int64, rows + 1
    codes: np.ndarray  # int32

    @classmethod
    def of(cls, rows: Sequence[Sequence[int]]) -> Ragged:
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        codes = np.fromiter((c for r in rows for c in r), dtype=np.int32, count=int(offsets[-1]))
        return cls(offsets, codes)

    @property
    def rows(self) -> np.ndarray:
        """The row of each code."""
        return np.repeat(np.arange(len(self.offsets) - 1), np.diff(self.offsets))

    def take(self, rows: np.ndarray) -> Ragged:
        starts, lengths = self.offsets[rows], self.offsets[rows + 1] - self.offsets[rows]
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        within = np.arange(int(offsets[-1])) - np.repeat(offsets[:-1], lengths)
        return Ragged(offsets, self.codes[np.repeat(starts, lengths) + within])

    def append(self, other: Ragged) -> Ragged:
        offsets = np.concatenate([self.offsets, other.offsets[1:] + self.offsets[-1]])
        return Ragged(offsets, np.concatenate([self.codes, other.codes]))

    def recode(self, codes: np.ndarray) -> Ragged:
        return Ragged(self.offsets, codes[self.codes].astype(np.int32))

    @property
    def nbytes(self) -> int:
        return int(self.offsets.nbytes + self.codes.nbytes)


RAGGED = ("speakers", "inside", "initial")


@dataclass(frozen=True, slots=True)
class FeatureTable:
    """The :class:`Features` of a scope's memories, row ``i`` for ``ids[i]``. Every string
    (names, kinds, session ids) is a code into ``words``, which holds no word that no row
    uses; ``session`` is ``-1`` for a memory that is no single turn."""

    ids: np.ndarray  # ID
    kind: np.ndarray  # int32 codes
    speakers: Ragged
    inside: Ragged
    initial: Ragged
    session: np.ndarray  # int32 codes, -1: no turn
    seq: np.ndarray  # int64
    asks: np.ndarray  # bool
    words: tuple[str, ...]

    @classmethod
    def empty(cls) -> FeatureTable:
        return cls.of([])

    @classmethod
    def of(cls, rows: Sequence[tuple[str, Features]]) -> FeatureTable:
        """The table of these ``(point id, features)`` rows, in that order."""
        code: dict[str, int] = {}

        def coded(words: Iterable[str]) -> list[int]:
            return [code.setdefault(w, len(code)) for w in sorted(words)]

        speakers, inside, initial = [], [], []
        kinds, session = [], []
        for _pid, f in rows:
            kinds.append(code.setdefault(f.kind, len(code)))
            speakers.append(coded(f.speakers))
            inside.append(coded(f.inside))
            initial.append(coded(f.initial))
            session.append(-1 if f.turn is None else code.setdefault(f.turn[0], len(code)))
        return cls(
            np.array([pid for pid, _f in rows], dtype=ID),
            np.array(kinds, dtype=np.int32),
            Ragged.of(speakers),
            Ragged.of(inside),
            Ragged.of(initial),
            np.array(session, dtype=np.int32),
            np.array([0 if f.turn is None else f.turn[1] for _p, f in rows], dtype=np.int64),
            np.array([f.asks for _p, f in rows], dtype=bool),
            tuple(code),
        )

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        arrays = self.ids.nbytes + self.kind.nbytes + self.session.nbytes + self.seq.nbytes
        ragged = sum(getattr(self, name).nbytes for name in RAGGED)
        return int(arrays + ragged + self.asks.nbytes + NAME_BYTES * len(self.words))

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """The row of each of ``ids`` (``ID``), or -1 where this table has none."""
        if not len(self.ids) or not len(ids):
            return np.full(len(ids), -1, dtype=np.int64)
        order = np.argsort(self.ids, kind="stable")
        sorted_ids = self.ids[order]
        at = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
        return np.where(sorted_ids[at] == ids, order[at], -1)

    def take(self, rows: np.ndarray) -> FeatureTable:
        """The table of these rows, in this order, its words cut to those they use."""
        rows = np.asarray(rows, dtype=np.int64)
        part = FeatureTable(
            self.ids[rows],
            self.kind[rows],
            self.speakers.take(rows),
            self.inside.take(rows),
            self.initial.take(rows),
            self.session[rows],
            self.seq[rows],
            self.asks[rows],
            self.words,
        )
        return part.compact()

    def compact(self) -> FeatureTable:
        """This table with no word that no row uses (renumbered in the order of ``words``)."""
        used = np.zeros(len(self.words) + 1, dtype=bool)  # the last slot: -1 (no session)
        for codes in (self.kind, self.session, *(getattr(self, n).codes for n in RAGGED)):
            used[codes] = True
        used = used[:-1]
        if used.all():
            return self
        recode = np.full(len(self.words) + 1, -1, dtype=np.int64)
        recode[:-1][used] = np.arange(int(used.sum()))
        return FeatureTable(
            self.ids,
            recode[self.kind].astype(np.int32),
            self.speakers.recode(recode),
            self.inside.recode(recode),
            self.initial.recode(recode),
            recode[self.session].astype(np.int32),
            self.seq,
            self.asks,
            tuple(w for w, u in zip(self.words, used, strict=True) if u),
        )

    def append(self, other: FeatureTable) -> FeatureTable:
        """This table's rows, then ``other``'s (its words merged into these)."""
        if not len(other):
            return self
        code = {w: i for i, w in enumerate(self.words)}
        for w in other.words:
            code.setdefault(w, len(code))
        recode = np.array([code[w] for w in other.words] + [-1], dtype=np.int64)
        return FeatureTable(
            np.concatenate([self.ids, other.ids]),
            np.concatenate([self.kind, recode[other.kind].astype(np.int32)]),
            self.speakers.append(other.speakers.recode(recode)),
            self.inside.append(other.inside.recode(recode)),
            self.initial.append(other.initial.recode(recode)),
            np.concatenate([self.session, recode[other.session].astype(np.int32)]),
            np.concatenate([self.seq, other.seq]),
            np.concatenate([self.asks, other.asks]),
            tuple(code),
        )

    def has_kind(self, kind: str) -> bool:
        return kind in self.words and bool((self.kind == self.words.index(kind)).any())

    def features(self, row: int) -> Features:
        """Row ``row`` as :class:`Features` (for tests and debugging: the graph reads arrays)."""

        def words(ragged: Ragged) -> frozenset[str]:
            codes = ragged.codes[ragged.offsets[row] : ragged.offsets[row + 1]]
            return frozenset(self.words[c] for c in codes)

        session = int(self.session[row])
        turn = None if session < 0 else (self.words[session], int(self.seq[row]))
        return Features(
            self.words[int(self.kind[row])],
            words(self.speakers),
            words(self.inside),
            words(self.initial),
            turn,
            bool(self.asks[row]),
        )

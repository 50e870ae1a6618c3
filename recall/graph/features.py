"""What the graph takes from each memory point (:class:`Features`), and a copy of a scope's
features on disk (:class:`FeatureFiles`) so that a scope evicted from memory, or a daemon
restarted, builds its graph again without reading and parsing every point.

A point's features are a function of its id (a turn's, a chunk's and a fact's id is derived
from its text and sources), so a file never goes stale: a build reads the scope's current ids
from the vector store, takes the features of the ids the file holds and reads only the points
it lacks. What the file holds beyond the current ids is left out, and the file is rewritten.

Forget leaves none of it: :meth:`FeatureFiles.forget` deletes the user's files, and a file a
build was writing while the user was forgotten is thrown away, never renamed into place. The
files are a cache: one that cannot be read (a crash mid-write leaves only a temporary file,
swept at open) is ignored and written again, and none is written while the disk is below its
reserve.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from recall.words import names
from tiers.core.errors import TierError
from tiers.core.records import Scope
from tiers.semantic.graph import normalize
from tiers.semantic.vectors import MemoryPoint

log = logging.getLogger("strata.recall")

FORMAT = 1
FEATURE_BYTES = 1000  # a memory's Features with its id (measured with tracemalloc: 1,012)


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

    def row(self, point_id: str) -> list[object]:
        """The JSON row of this point's features (:meth:`of_row` reads it)."""
        session, seq = self.turn if self.turn is not None else (None, 0)
        return [
            point_id,
            self.kind,
            sorted(self.speakers),
            sorted(self.inside),
            sorted(self.initial),
            session,
            seq,
            int(self.asks),
        ]

    @classmethod
    def of_row(
        cls, row: list[object], sets: dict[tuple[str, ...], frozenset[str]] | None = None
    ) -> tuple[str, Features]:
        """The point id and features of a row of :meth:`row`; ``sets`` shares equal sets
        between the rows of one file (most rows name the same few speakers, or nothing).
        Raises ``ValueError``, ``TypeError`` or ``IndexError`` for a row of another shape."""
        point_id, kind, speakers, inside, initial, session, seq, asks = row
        if not isinstance(point_id, str) or not isinstance(kind, str):
            raise TypeError("a feature row starts with a point id and a kind")
        shared = {} if sets is None else sets

        def frozen(items: object) -> frozenset[str]:
            if not isinstance(items, list):
                raise TypeError("a feature row's names are a list")
            key = tuple(items)
            found = shared.get(key)
            if found is None:
                found = shared[key] = frozenset(key)
            return found

        turn = (str(session), int(seq)) if session is not None else None  # type: ignore[call-overload]
        return point_id, cls(
            kind, frozen(speakers), frozen(inside), frozen(initial), turn, bool(asks)
        )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class FeatureFiles:
    """The features of each scope kept with ``min_memories`` memories or more, as one file per
    scope under ``path`` (``<user digest>/<agent digest>.json``). ``check(what)`` raises
    :class:`tiers.space.DiskFull` when no file may be written now (the data dir's reserve).
    A file that cannot be read or written is logged and skipped, never raised (only
    :meth:`forget` raises, when it cannot delete)."""

    def __init__(
        self,
        path: Path,
        *,
        min_memories: int = 200,
        check: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self.min_memories = min_memories
        self._check = check
        self._lock = threading.Lock()
        self._forgotten: dict[str, int] = {}  # user -> Forgets seen
        self.loads = 0  # files read (for tests and figures)
        self.saves = 0  # files written
        shutil.rmtree(path / "tmp", ignore_errors=True)  # a write a crash cut short

    def _file(self, scope: Scope) -> Path:
        return self.path / _digest(scope.user_id) / f"{_digest(scope.agent_id)}.json"

    def generation(self, user_id: str) -> int:
        """The user's Forget count: :meth:`save` keeps a build's file only when it is unchanged
        since the build began."""
        with self._lock:
            return self._forgotten.get(user_id, 0)

    def load(self, scope: Scope) -> dict[str, Features]:
        """The scope's features as last saved (none when there is no readable file)."""
        file = self._file(scope)
        try:
            doc = json.loads(file.read_bytes())
            if not isinstance(doc, dict) or doc.get("format") != FORMAT:
                raise ValueError(f"not a feature file of format {FORMAT}")
            sets: dict[tuple[str, ...], frozenset[str]] = {}
            found = dict(Features.of_row(row, sets) for row in doc["rows"])
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, KeyError, IndexError) as exc:
            log.warning(
                "recall.graph_features_unreadable",
                extra={"fields": {"file": str(file), "error": str(exc)}},
            )
            return {}
        self.loads += 1
        return found

    def save(self, scope: Scope, features: dict[str, Features], generation: int) -> bool:
        """Write the scope's features (in place of its file), unless they are fewer than
        ``min_memories`` or the user was forgotten since :meth:`generation` gave
        ``generation``. Returns whether the file was written."""
        if len(features) < self.min_memories:
            return False
        tmp = self.path / "tmp" / f"{uuid.uuid4().hex}.json"
        try:
            if self._check is not None:
                self._check("a file of the graph's features")
            tmp.parent.mkdir(parents=True, exist_ok=True)
            rows = [f.row(pid) for pid, f in features.items()]
            tmp.write_text(json.dumps({"format": FORMAT, "rows": rows}, separators=(",", ":")))
        except (OSError, TierError) as exc:
            tmp.unlink(missing_ok=True)  # a write the disk cut short
            log.warning(
                "recall.graph_features_unsaved",
                extra={"fields": {"user_id": scope.user_id, "error": str(exc)}},
            )
            return False
        file = self._file(scope)
        with self._lock:
            if self._forgotten.get(scope.user_id, 0) == generation:
                try:
                    file.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(tmp, file)
                    self.saves += 1
                    return True
                except OSError as exc:
                    log.warning(
                        "recall.graph_features_unsaved",
                        extra={"fields": {"user_id": scope.user_id, "error": str(exc)}},
                    )
        tmp.unlink(missing_ok=True)
        return False

    def forget(self, user_id: str) -> None:
        """Delete every file of the user (all its agents'); a save under way is dropped.
        Raises ``OSError`` when a file cannot be deleted."""
        with self._lock:
            self._forgotten[user_id] = self._forgotten.get(user_id, 0) + 1
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(self.path / _digest(user_id))


def graph_features_path(data_dir: Path) -> Path:
    """Where the daemon keeps the feature files: ``<data_dir>/graphs``."""
    return data_dir / "graphs"

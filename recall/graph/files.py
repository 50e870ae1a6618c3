"""A copy of a scope's graph features on disk (:class:`FeatureFiles`), so that a scope evicted
from memory, or a daemon restarted, builds its graph again without reading and parsing every
point: one ``numpy`` archive of the scope's :class:`recall.graph.features.FeatureTable` per
scope, read back in milliseconds whatever the scope's size.

Features never go stale (:mod:`recall.graph.features`): a build reads the scope's current ids
from the vector store, takes the rows of the ids the file holds and reads only the points it
lacks. What the file holds beyond the current ids is left out, and the file is rewritten.

Forget leaves none of it: :meth:`FeatureFiles.forget` deletes the user's files, and a file a
build was writing while the user was forgotten is thrown away, never renamed into place. A
file holds only the words its rows use, so a memory's names leave the disk with the first
save after the memory went. The files are a cache: one that cannot be read (a crash mid-write
leaves only a temporary file, swept at open) is ignored and written again, and none is
written while the disk is below its reserve.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import threading
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from recall.graph.features import ID, RAGGED, FeatureTable, Ragged
from tiers.core.errors import TierError
from tiers.core.records import Scope

log = logging.getLogger("strata.recall")

FORMAT = 2  # 1 was a JSON row per memory (``<agent digest>.json``), deleted when met


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _arrays(scope: Scope, table: FeatureTable) -> dict[str, np.ndarray]:
    arrays = {
        "format": np.array([FORMAT], dtype=np.int64),
        # whose it is, for the warm-up at a start (its name is a digest of them)
        "scope": np.array([scope.user_id, scope.agent_id]),
        "ids": table.ids,
        "kind": table.kind,
        "session": table.session,
        "seq": table.seq,
        "asks": table.asks,
    }
    # UTF-8, as a user would search the disk for a name: ``words`` is their bytes one after
    # another, ``word_ends`` where each ends.
    encoded = [w.encode() for w in table.words]
    arrays["words"] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    arrays["word_ends"] = np.cumsum([len(b) for b in encoded], dtype=np.int64)
    for name in RAGGED:
        ragged: Ragged = getattr(table, name)
        arrays[f"{name}_offsets"], arrays[f"{name}_codes"] = ragged.offsets, ragged.codes
    return arrays


def _table(arrays: dict[str, np.ndarray]) -> FeatureTable:
    """The table these arrays hold; raises ``ValueError`` (or ``KeyError``) when they are
    not one :func:`_arrays` wrote."""
    if arrays["format"].tolist() != [FORMAT]:
        raise ValueError(f"not a feature file of format {FORMAT}")
    blob, ends = arrays["words"].astype(np.uint8).tobytes(), arrays["word_ends"].tolist()
    starts = [0, *ends][: len(ends)]
    pairs = list(zip(starts, ends, strict=True))
    if (ends[-1] if ends else 0) != len(blob) or any(b < a for a, b in pairs):
        raise ValueError("the words' ends do not fit their bytes")
    words = tuple(blob[a:b].decode() for a, b in pairs)
    rows = len(arrays["ids"])
    ragged = {}
    for name in RAGGED:
        offsets = arrays[f"{name}_offsets"].astype(np.int64)
        codes = arrays[f"{name}_codes"].astype(np.int32)
        if len(offsets) != rows + 1 or offsets[0] != 0 or offsets[-1] != len(codes):
            raise ValueError(f"the {name} offsets do not fit the rows")
        if (np.diff(offsets) < 0).any():
            raise ValueError(f"the {name} offsets go back")
        ragged[name] = Ragged(offsets, codes)
    table = FeatureTable(
        arrays["ids"].astype(ID),
        arrays["kind"].astype(np.int32),
        ragged["speakers"],
        ragged["inside"],
        ragged["initial"],
        arrays["session"].astype(np.int32),
        arrays["seq"].astype(np.int64),
        arrays["asks"].astype(bool),
        words,
    )
    for column in (table.kind, table.session, table.seq, table.asks):
        if len(column) != rows:
            raise ValueError("the columns differ in length")
    for codes in (table.kind, *(r.codes for r in ragged.values())):
        if len(codes) and (codes.min() < 0 or codes.max() >= len(words)):
            raise ValueError("a code outside the words")
    if len(table.session) and (table.session.min() < -1 or table.session.max() >= len(words)):
        raise ValueError("a session code outside the words")
    return table


class FeatureFiles:
    """The features of each scope kept with ``min_memories`` memories or more, as one file per
    scope under ``path`` (``<user digest>/<agent digest>.npz``). ``check(what)`` raises
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
        return self.path / _digest(scope.user_id) / f"{_digest(scope.agent_id)}.npz"

    def generation(self, user_id: str) -> int:
        """The user's Forget count: :meth:`save` keeps a build's file only when it is unchanged
        since the build began."""
        with self._lock:
            return self._forgotten.get(user_id, 0)

    def load(self, scope: Scope) -> FeatureTable:
        """The scope's features as last saved (an empty table when there is no readable
        file)."""
        file = self._file(scope)
        try:
            with np.load(file, allow_pickle=False) as archive:
                table = _table({name: archive[name] for name in archive.files})
        except FileNotFoundError:
            file.with_suffix(".json").unlink(missing_ok=True)  # format 1's file, if any
            return FeatureTable.empty()
        except (OSError, ValueError, TypeError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            log.warning(
                "recall.graph_features_unreadable",
                extra={"fields": {"file": str(file), "error": str(exc)}},
            )
            return FeatureTable.empty()
        self.loads += 1
        return table

    def saved(self) -> Iterator[Scope]:
        """The scopes of the files on disk, the file written last first (the warm-up's order
        at a start: :mod:`recall.graph.warm`), each file's scope read as it is reached. A file
        that cannot be read, or that a version before 2026-12-08 wrote without its scope, is
        left out (its scope's next save writes it)."""
        written = []
        for file in self.path.glob("*/*.npz"):
            with contextlib.suppress(OSError):
                written.append((file.stat().st_mtime, file))
        for _mtime, file in sorted(written, key=lambda pair: -pair[0]):
            try:
                with np.load(file, allow_pickle=False) as archive:  # the scope alone is read
                    user_id, agent_id = archive["scope"].tolist()
            except (OSError, ValueError, TypeError, KeyError, EOFError, zipfile.BadZipFile):
                continue
            scope = Scope(str(user_id), str(agent_id))
            if file == self._file(scope):  # not a file copied or renamed by hand
                yield scope

    def save(self, scope: Scope, table: FeatureTable, generation: int) -> bool:
        """Write the scope's features (in place of its file), unless they are fewer than
        ``min_memories`` or the user was forgotten since :meth:`generation` gave
        ``generation``. Returns whether the file was written."""
        if len(table) < self.min_memories:
            return False
        tmp = self.path / "tmp" / f"{uuid.uuid4().hex}.npz"
        try:
            if self._check is not None:
                self._check("a file of the graph's features")
            tmp.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("wb") as out:
                np.savez(out, **_arrays(scope, table.compact()))  # type: ignore[arg-type]
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

"""The engine's point ids as the store's text (:func:`texts`).

The engine hands each id back as a ``uuid.UUID``, and ``str()`` of one takes about a
microsecond of Python: a listing of a user's ids (:meth:`EdgeVectorStore.ids
<tiers.semantic.vectors.edge.store.EdgeVectorStore.ids>`, read at every first load of a
user's graph) spent more in it than in the engine's scroll (6,678 ids: 8.2 ms against 1.6 in
one pass here, 2026-12-07)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np

from tiers.semantic.vectors import canonical_id

# Where each of a UUID's 32 hex digits goes in its 36-character text; the others are dashes.
_DIGITS = np.array([i for i in range(36) if i not in (8, 13, 18, 23)])
_DASHES = np.array([8, 13, 18, 23])


def texts(ids: Sequence[object]) -> list[str]:
    """The canonical text of each id, in order: ``str(id)`` for a ``uuid.UUID``, formatted
    in one pass when all are (lowercase hex, ``8-4-4-4-12``); otherwise one at a time by
    :func:`~tiers.semantic.vectors.canonical_id` (an id that is no UUID as ``str(id)``)."""
    if not all(type(i) is uuid.UUID for i in ids):
        return [canonical_id(i) or str(i) for i in ids]
    if len(ids) < 16:  # a few: as fast one by one
        return [str(i) for i in ids]
    raw = b"".join([i.bytes for i in ids])  # type: ignore[attr-defined]
    digits = np.frombuffer(raw.hex().encode("ascii"), dtype=np.uint8).reshape(len(ids), 32)
    out = np.empty((len(ids), 36), dtype=np.uint32)  # UCS-4 code points: a str array's layout
    out[:, _DASHES] = ord("-")
    out[:, _DIGITS] = digits
    return out.view("U36").ravel().tolist()

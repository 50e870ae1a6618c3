"""A batch of texts embedded a slice at a time, so that a stop is looked at between two
slices: a big batch on a busy machine is minutes of work, and a daemon's stop must not wait
for it. A slice holds about :data:`SLICE_SECONDS` of work at the pace of the one before (a
starved worker embeds two texts a second), the texts sorted by length so that similar
lengths go together."""

from __future__ import annotations

import threading
import time

import numpy as np

from tiers.core.errors import Stopped
from tiers.semantic.embedding import Embedder

__all__ = ["FIRST_SLICE", "MAX_SLICE", "SLICE_SECONDS", "encode_sliced", "next_slice"]

# The first slice's texts, the most in one, and the seconds a slice should take.
FIRST_SLICE, MAX_SLICE, SLICE_SECONDS = 8, 64, 1.0


def encode_sliced(
    embedder: Embedder, texts: list[str], stopping: threading.Event
) -> dict[str, np.ndarray]:
    """The document embedding of each of ``texts`` (distinct), by text. Raises
    :class:`~tiers.core.errors.Stopped` when ``stopping`` is set between two slices."""
    dense: dict[str, np.ndarray] = {}
    texts = sorted(texts, key=len)
    i, size = 0, FIRST_SLICE
    while i < len(texts):
        if stopping.is_set():
            raise Stopped(f"stopped with {len(texts) - i} texts not embedded")
        part = texts[i : i + size]
        began = time.monotonic()
        dense.update(zip(part, embedder.encode_documents(part), strict=True))
        i += len(part)
        size = next_slice(len(part), time.monotonic() - began)
    return dense


def next_slice(texts: int, seconds: float) -> int:
    """The texts of the next slice: about :data:`SLICE_SECONDS` of work at the pace of the
    last slice (``texts`` in ``seconds``), from 1 to :data:`MAX_SLICE`."""
    if seconds <= 0:
        return MAX_SLICE
    return max(1, min(MAX_SLICE, int(texts * SLICE_SECONDS / seconds)))

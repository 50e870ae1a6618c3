"""How a vector store keeps and searches its dense vectors: as they are, or with an int8 copy
searched and the originals on disk, read only to rescore (the settings
``vectors.quantization``, ``vectors.originals`` and ``vectors.rescore``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Quantization = Literal["none", "int8"]
Originals = Literal["float32", "float16"]
# Candidates a quantized search takes per hit asked for, rescored (with ``vectors.rescore``).
RESCORE_OVERSAMPLING = 2.0


@dataclass(frozen=True, slots=True)
class DenseStorage:
    """How a store keeps and searches its dense vectors (the settings ``vectors.quantization``,
    ``vectors.originals`` and ``vectors.rescore``): one value, handed to every store and to
    what makes a shard or a collection."""

    # As they are ("none"), or with an int8 copy in memory, searched first, and the originals
    # on disk, read only to rescore.
    quantization: Quantization = "none"
    # The originals' type, fixed when a shard or a collection is made.
    originals: Originals = "float32"
    # With "int8": the candidates scored again on the originals (:data:`RESCORE_OVERSAMPLING`
    # of them a hit asked for); without, the int8 vectors' hits and scores.
    rescore: bool = True


FLOAT32 = DenseStorage()  # the originals alone, as float32: the engine's own defaults

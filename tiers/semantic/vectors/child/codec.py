"""What crosses the socket to the vector store's process: a call's arguments, its result and its
error, as msgpack data (:mod:`tiers.core.wire`: never pickle). The seam's records are
tagged maps (``{"$": tag, ...}``): a point travels as its payload (:meth:`MemoryPoint.payload`,
the engine's own schema) with its vectors, a filter as its fields. Errors travel as a class
of :data:`ERRORS` and a message; any other error comes back a
:class:`~tiers.semantic.vectors.VectorStoreUnavailable` naming it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from tiers.core.errors import (
    IndexBuildCancelled,
    VectorStoreInterrupted,
    VectorStoreMismatch,
    VectorStoreUnavailable,
)
from tiers.semantic.vectors import Hit, MemoryPoint, PointFilter, SparseVector, Validity
from tiers.semantic.vectors.storage import DenseStorage

# The call that asks the point cache's counts (the daemon's metrics): the child's store's
# figures, not a call of the seam.
POINT_COUNTS = "point_counts"

# The errors the seam raises (tiers.semantic.vectors.VectorStore), by name.
ERRORS: dict[str, type[Exception]] = {
    e.__name__: e
    for e in (
        VectorStoreMismatch,
        VectorStoreUnavailable,
        VectorStoreInterrupted,
        IndexBuildCancelled,
        ValueError,
        TypeError,
    )
}


def encode(value: Any) -> Any:
    """``value`` as msgpack data (module doc). Raises ``TypeError`` for what has no form."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, MemoryPoint):
        return {
            "$": "point",
            "id": value.id,
            "payload": value.payload(),
            "dense": None if value.dense is None else [float(x) for x in value.dense],
            "sparse": encode(value.sparse),
        }
    if isinstance(value, Hit):
        return {"$": "hit", "point": encode(value.point), "score": float(value.score)}
    if isinstance(value, SparseVector):
        return {"$": "sparse", "indices": list(value.indices), "values": list(value.values)}
    if isinstance(value, PointFilter):
        return {"$": "filter", **{k: encode(v) for k, v in dataclasses.asdict(value).items()}}
    if isinstance(value, Validity):
        return {"$": "validity", "to": value.valid_to_us, "by": value.replaced_by}
    if isinstance(value, DenseStorage):
        return {"$": "storage", **dataclasses.asdict(value)}
    if isinstance(value, (set, frozenset)):
        return {"$": "set", "items": [encode(v) for v in value]}
    if isinstance(value, Path):
        return {"$": "path", "path": str(value)}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    raise TypeError(f"a {type(value).__name__} cannot cross to the vector store's process")


def decode(value: Any) -> Any:
    """What :func:`encode` made, as it was (tuples come back as lists, but in a filter)."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    tag = value.get("$")
    if tag is None:
        return {k: decode(v) for k, v in value.items()}
    if tag == "point":
        point = MemoryPoint.from_payload(value["id"], value["payload"])
        return dataclasses.replace(point, dense=value["dense"], sparse=decode(value["sparse"]))
    if tag == "hit":
        return Hit(decode(value["point"]), value["score"])
    if tag == "sparse":
        return SparseVector(value["indices"], value["values"])
    if tag == "filter":
        fields = {k: v for k, v in value.items() if k != "$"}  # its tuples came as lists
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
        fields["exclude_from"] = tuple(tuple(x) for x in fields["exclude_from"])
        return PointFilter(**fields)
    if tag == "validity":
        return Validity(value["to"], value["by"])
    if tag == "storage":
        return DenseStorage(value["quantization"], value["originals"], value["rescore"])
    if tag == "set":
        return {decode(v) for v in value["items"]}
    if tag == "path":
        return Path(value["path"])
    raise ValueError(f"an unknown record {tag!r} from the vector store's process")


def encode_error(exc: BaseException) -> dict[str, str]:
    """An error as ``{"type", "message"}``: its class when :data:`ERRORS` holds it (or a
    subclass of one), else :class:`VectorStoreUnavailable` naming the class."""
    for cls in type(exc).__mro__:
        if cls.__name__ in ERRORS and ERRORS[cls.__name__] is cls:
            return {"type": cls.__name__, "message": str(exc)}
    return {"type": "VectorStoreUnavailable", "message": f"{type(exc).__name__}: {exc}"}


def decode_error(error: dict[str, str]) -> Exception:
    """The error :func:`encode_error` sent."""
    return ERRORS.get(error.get("type", ""), VectorStoreUnavailable)(error.get("message", ""))

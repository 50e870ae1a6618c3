"""Strata's :class:`~tiers.semantic.vectors.PointFilter` as a qdrant-edge filter."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
from qdrant_edge import FieldCondition, Filter, HasIdCondition, MatchAny, MatchValue, RangeFloat

from tiers.semantic.vectors import PointFilter, canonical_ids

if TYPE_CHECKING:
    from qdrant_edge import ConditionType

# qdrant-edge 0.9.0 converts a Python bool in MatchValue to an integer (bool is an int
# subclass and the binding tries int first), which never matches a boolean payload value:
# MatchValue(False) matches nothing. numpy's bool is not an int, so it arrives as a bool.
_FALSE = cast(bool, np.False_)


def require_scope(flt: PointFilter) -> None:
    """Raise ``ValueError`` unless ``flt`` names a user: a search's scope is a hard filter."""
    if not flt.user_id:
        raise ValueError("a vector search needs a user_id: scope is a hard filter")


def build_filter(flt: PointFilter) -> Filter | None:
    """The engine filter for ``flt`` (None when it matches everything)."""
    must: list[ConditionType] = []
    if flt.user_id:
        must.append(FieldCondition(key="user_id", match=MatchValue(flt.user_id)))
    if flt.agent_id:
        must.append(FieldCondition(key="agent_id", match=MatchValue(flt.agent_id)))
    if flt.kinds:
        must.append(FieldCondition(key="kind", match=MatchAny(list(flt.kinds))))
    if flt.episode_ids:
        must.append(FieldCondition(key="episode_id", match=MatchAny(list(flt.episode_ids))))
    if flt.created_from_us is not None or flt.created_to_us is not None:
        must.append(
            FieldCondition(
                key="created_at",
                range=RangeFloat(gte=flt.created_from_us, lt=flt.created_to_us),
            )
        )
    if not flt.include_superseded:
        must.append(FieldCondition(key="superseded", match=MatchValue(_FALSE)))
    if flt.replaced_by:
        must.append(FieldCondition(key="replaced_by", match=MatchAny(list(flt.replaced_by))))
    if flt.ids:
        must.append(HasIdCondition(set(canonical_ids(flt.ids))))
    skip: list[ConditionType] = []
    if flt.exclude_sessions:
        skip.append(FieldCondition(key="session_id", match=MatchAny(list(flt.exclude_sessions))))
    for session_id, first, last in flt.exclude_from:
        session = FieldCondition(key="session_id", match=MatchValue(session_id))
        later = FieldCondition(key="sources[].seq", range=RangeFloat(gte=first, lte=last))
        skip.append(Filter(must=[session, later]))
    if skip:
        return Filter(must=must, must_not=skip)
    return Filter(must=must) if must else None

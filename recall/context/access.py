"""What Pack and GetContext count of the memories they hand out (the counts themselves are
:mod:`tiers.keyed.access`; plain Recall counts nothing).

A memory handed out is counted, and so are the hits merged into it (the same sources) and
the hit that brought a message's point in (``found_via``), all of the handed memory's scope
and episode. A store that cannot be written is logged, and the answer goes out all the same.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from recall import Candidate
from tiers.core.errors import StoreUnavailable
from tiers.keyed.access import AccessCounts, Accessed
from tiers.space import DiskFull

log = logging.getLogger("strata.recall")


def accessed(handed: Sequence[Candidate]) -> list[Accessed]:
    """The accesses that handing out ``handed`` makes (see the module's docstring)."""
    out = []
    for c in handed:
        p = c.point
        out.append(Accessed(p.id, p.scope, p.episode_id))
        for other in (c.found_via, *c.merged_ids):
            if other:
                out.append(Accessed(other, p.scope, p.episode_id))
    return out


def record_handed(access: AccessCounts | None, handed: Sequence[Candidate]) -> None:
    """Count ``handed`` (blocking: on a worker thread). Nothing without a store or with
    nothing handed; a store that refuses the write is logged, not raised."""
    if access is None or not handed:
        return
    try:
        access.record(accessed(handed))
    except (StoreUnavailable, DiskFull) as exc:
        log.warning("recall.access_not_counted", extra={"fields": {"error": str(exc)}})


async def count_handed(access: AccessCounts | None, handed: Sequence[Candidate]) -> None:
    """:func:`record_handed` on a worker thread."""
    if access is not None and handed:
        await asyncio.to_thread(record_handed, access, handed)

"""The Forget RPC of ``strata.v1.MemoryService`` (the cascade itself is
``tiers.rights.forget.cascade``)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import grpc

from daemon.codec import convert
from daemon.codec import validation as check
from daemon.codec.status import InvalidArgument, rpc
from daemon.services import tenancy
from daemon.settings.sections import LimitsSettings
from stratad_client.pb import memory_pb2 as pb
from tiers.rights.forget.cascade import ForgetCounts, ForgetTarget, Forgetter

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def forget_target(request: pb.ForgetRequest, limits: LimitsSettings) -> ForgetTarget:
    """Exactly one of scope, episode_ids, memory_ids; at most limits.max_page_size ids."""
    given = [
        name
        for name, present in (
            ("scope", request.HasField("scope")),
            ("episode_ids", bool(request.episode_ids)),
            ("memory_ids", bool(request.memory_ids)),
        )
        if present
    ]
    if len(given) != 1:
        raise InvalidArgument(
            "exactly one of scope, episode_ids or memory_ids is required"
            + (f"; got {', '.join(given)}" if given else "")
        )
    ids = list(request.episode_ids or request.memory_ids)
    if len(ids) > limits.max_page_size:
        raise InvalidArgument(
            f"{given[0]} has {len(ids)} ids; the limit is {limits.max_page_size}"
            " (limits.max_page_size)"
        )
    if request.HasField("scope"):
        scope = tenancy.user_scope(check.scope(request.scope, limits), "Forget never spans users")
        return ForgetTarget(scope=scope)
    if request.episode_ids:
        for i, eid in enumerate(ids):
            if len(eid) != 32 or any(c not in "0123456789abcdef" for c in eid):
                raise InvalidArgument(
                    f"episode_ids[{i}] must be 32 lowercase hex characters, got {eid!r}"[:200]
                )
        return ForgetTarget(episode_ids=tuple(dict.fromkeys(ids)))
    for i, mid in enumerate(ids):
        if not _UUID.match(mid):
            raise InvalidArgument(f"memory_ids[{i}] must be a hit's id (a UUID), got {mid!r}"[:200])
    return ForgetTarget(memory_ids=tuple(dict.fromkeys(ids)))


def counts_pb(counts: ForgetCounts) -> pb.ForgetResponse:
    return convert.from_fields(pb.ForgetResponse, counts)


@dataclass(frozen=True, slots=True)
class ForgetRpcs:
    """Forget."""

    forgetter: Forgetter
    limits: LimitsSettings

    @rpc
    async def Forget(
        self, request: pb.ForgetRequest, context: grpc.aio.ServicerContext
    ) -> pb.ForgetResponse:
        target = forget_target(request, self.limits)
        # Another tenant's episodes and memories are treated as unknown ids (the worker thread
        # runs in a copy of this call's context, which tenancy reads).
        counts = await asyncio.to_thread(
            self.forgetter.forget, target, lambda owner: tenancy.visible(owner.user_id)
        )
        return counts_pb(counts)

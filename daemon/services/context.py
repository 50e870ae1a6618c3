"""The context RPCs of ``strata.v1.MemoryService``: GetContext, SetAnchor, GetAnchor and
PinMemory. Each checks its request, names the session through tenancy, calls one method of
:class:`recall.context.session.SessionContexts` (GetContext, the anchors) or
:class:`recall.context.pins.PinnedMemories` (PinMemory), and converts the answer. The rules (how
a session is named, the budget, the query, what is counted) are there; the block's assembly
is :mod:`recall.context.assembly`.

A session is named as for GetWorkingMemory (:func:`daemon.server.tenancy.session_user`): by its id
and, when the caller knows it, its user.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import grpc

from daemon.codec import convert
from daemon.codec import validation as check
from daemon.codec.status import InvalidArgument, rpc
from daemon.services import tenancy
from daemon.services.sessions import session_state
from daemon.settings.sections import LimitsSettings
from recall.context.assembly import Context
from recall.context.pins import PinnedMemories
from recall.context.session import SessionContexts, SessionName
from recall.recipe import RecallSettings
from stratad_client.pb import memory_pb2 as pb

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True, slots=True)
class ContextRpcs:
    """GetContext, SetAnchor, GetAnchor, PinMemory."""

    contexts: SessionContexts
    pinned: PinnedMemories
    recall: RecallSettings
    limits: LimitsSettings

    def _name(self, sid: str, scope: pb.Scope) -> SessionName:
        """The session a call names (PERMISSION_DENIED for a user the token may not name)."""
        requested = check.scope(scope, self.limits)
        user, allowed = tenancy.session_user(requested.user_id)
        return SessionName(sid, user, requested.agent_id, allowed)

    # -- anchors -----------------------------------------------------------------------------
    @rpc
    async def SetAnchor(
        self, request: pb.SetAnchorRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetAnchorResponse:
        sid = check.session_id(request.session_id, self.limits)
        size = len(request.text.encode())
        if size > self.limits.max_anchor_bytes:
            raise InvalidArgument(
                f"text is {size} bytes; the limit is {self.limits.max_anchor_bytes}"
                " (limits.max_anchor_bytes)"
            )
        name = self._name(sid, request.scope)
        anchor, replaced = await self.contexts.set_anchor(name, request.text)
        response = pb.SetAnchorResponse(replaced=replaced)
        if anchor is not None:
            response.anchor.CopyFrom(convert.anchor_pb(anchor))
        return response

    @rpc
    async def GetAnchor(
        self, request: pb.GetAnchorRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetAnchorResponse:
        sid = check.session_id(request.session_id, self.limits)
        name = self._name(sid, pb.Scope(user_id=request.scope.user_id))
        return pb.GetAnchorResponse(anchor=convert.anchor_pb(await self.contexts.anchor(name)))

    # -- pins --------------------------------------------------------------------------------
    @rpc
    async def PinMemory(
        self, request: pb.PinMemoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.PinMemoryResponse:
        scope = tenancy.user_scope(
            check.scope(request.scope, self.limits), "a pin belongs to one user"
        )
        if not _UUID.match(request.memory_id):
            raise InvalidArgument("memory_id must be a memory's id (a UUID)")
        changed = await asyncio.to_thread(
            self.pinned.pin, scope, request.memory_id, request.pinned, self.limits.max_pins
        )
        return pb.PinMemoryResponse(pinned=request.pinned, changed=changed)

    # -- GetContext --------------------------------------------------------------------------
    @rpc
    async def GetContext(
        self, request: pb.GetContextRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetContextResponse:
        """The session's anchor, its scope's pins, its window and the memories recalled for
        it within ``max_tokens`` (:meth:`recall.context.session.SessionContexts.get`)."""
        checked = check.context_request(request, self.limits, self.recall.recipes)
        user, allowed = tenancy.session_user(checked.scope.user_id)
        name = SessionName(checked.session_id, user, checked.scope.agent_id, allowed)
        ask = checked.ask
        answer = await self.contexts.get(name, ask)
        ctx, view, result = answer.context, answer.view, answer.result
        state = pb.SESSION_STATE_UNSPECIFIED if view is None else session_state(view.open)
        response = pb.GetContextResponse(
            text=ctx.text,
            tokens=ctx.tokens,
            messages=[convert.stored_message(m) for m in ctx.window],
            memories=_items(ctx, ask.explain, result.weights),
            query=answer.query.text,
            state=state,
            scope=convert.scope(answer.scope),
            degraded_channels=result.degraded,
            timings=[pb.StageTiming(stage=k, ms=v) for k, v in answer.timings.items()],
        )
        if ctx.anchor is not None:
            response.anchor.CopyFrom(convert.anchor_pb(ctx.anchor))
        if ask.explain:
            response.dropped.extend(
                pb.ContextDrop(id=d.id, kind=d.kind, tokens=d.tokens, reason=d.reason)
                for d in ctx.dropped
            )
        return response


def _items(ctx: Context, explain: bool, weights: dict[str, float]) -> list[pb.ContextItem]:
    """``weights``: those the recall fused its lists at (for an explanation)."""
    out = []
    for item in ctx.memories:
        point = item.candidate.point
        entry = pb.ContextItem(
            id=point.id,
            kind=point.kind,
            text=item.text,
            tokens=item.tokens,
            sources=convert.source_pbs(point),
            created_at=convert.timestamp(point.created_at_us),
            superseded=item.candidate.superseded,
            pinned=item.pinned,
        )
        if explain:
            entry.why = item.why
            if not item.pinned:
                entry.explanation.CopyFrom(
                    convert.hit_pb(item.candidate, True, weights).explanation
                )
        out.append(entry)
    return out

"""The Tier 1 RPCs of ``strata.v1.MemoryService``: Append, AppendBatch, GetWorkingMemory,
EndSession and RemoveMessages, over :mod:`tiers.working.memory`.

A session is per user: a call names it by its id and, when the caller knows it, its user
(:func:`daemon.server.tenancy.session_user` decides which users a caller may name).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc

from daemon.codec import convert
from daemon.codec import validation as check
from daemon.codec.status import rpc
from daemon.services import tenancy
from daemon.settings.sections import LimitsSettings
from stratad_client.pb import memory_pb2 as pb
from tiers.core.locks import when_free
from tiers.core.records import Scope
from tiers.working.memory import WorkingMemory

Allowed = Callable[[str], bool] | None  # the users a session may be found among (None: any)
T = TypeVar("T")


def append_scope(requested: Scope) -> tuple[Scope, str, Allowed]:
    """The scope an append gives (empty: the session's), and how its session is named
    (:func:`tenancy.session_user`)."""
    user, allowed = tenancy.session_user(requested.user_id)
    if requested != Scope("") and user:
        requested = Scope(user, requested.agent_id)
    return requested, user, allowed


def session_state(open_: bool) -> pb.SessionState:
    return pb.SESSION_STATE_OPEN if open_ else pb.SESSION_STATE_ENDED


@dataclass(frozen=True, slots=True)
class SessionRpcs:
    """Append, AppendBatch, GetWorkingMemory, EndSession, RemoveMessages."""

    working: WorkingMemory
    limits: LimitsSettings

    async def _quick(self, call: Callable[[], T]) -> T:
        """``call``, a working-memory call, on the event loop without blocking it."""
        return await when_free(self.working.write_lock, call)

    def _session(
        self,
        request: pb.GetWorkingMemoryRequest | pb.EndSessionRequest | pb.RemoveMessagesRequest,
    ) -> tuple[str, str, Allowed]:
        """The session a request names: its id, and its user as
        :func:`tenancy.session_user` names it."""
        sid = check.session_id(request.session_id, self.limits)
        user, allowed = tenancy.session_user(check.scope(request.scope, self.limits).user_id)
        return sid, user, allowed

    def _appended_to(
        self, request: pb.AppendRequest | pb.AppendBatchRequest
    ) -> tuple[str, Scope, str, Allowed]:
        """The session an append names, and the scope it gives (:func:`append_scope`)."""
        sid = check.session_id(request.session_id, self.limits)
        return (sid, *append_scope(check.scope(request.scope, self.limits)))

    @rpc
    async def Append(
        self, request: pb.AppendRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendResponse:
        sid, scope, user, allowed = self._appended_to(request)
        if not request.HasField("message"):
            raise check.InvalidArgument("message is required")
        message = check.message(request.message, self.limits)
        (result,) = await self._quick(
            lambda: self.working.append(sid, scope, [message], user_id=user, allowed=allowed)
        )
        return pb.AppendResponse(seq=result.seq, duplicate=result.duplicate)

    @rpc
    async def AppendBatch(
        self, request: pb.AppendBatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendBatchResponse:
        sid, scope, user, allowed = self._appended_to(request)
        messages = check.batch(list(request.messages), self.limits)
        results = await self._quick(
            lambda: self.working.append(sid, scope, messages, user_id=user, allowed=allowed)
        )
        return pb.AppendBatchResponse(
            results=[pb.AppendResponse(seq=r.seq, duplicate=r.duplicate) for r in results]
        )

    @rpc
    async def GetWorkingMemory(
        self, request: pb.GetWorkingMemoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetWorkingMemoryResponse:
        sid, user, allowed = self._session(request)
        window = functools.partial(
            self.working.window,
            sid,
            max_messages=check.budget(request.max_messages, "max_messages"),
            max_tokens=check.budget(request.max_tokens, "max_tokens"),
            user_id=user,
            allowed=allowed,
        )
        view = await self._quick(window)
        return pb.GetWorkingMemoryResponse(
            session_id=view.session_id,
            scope=convert.scope(view.scope),
            state=session_state(view.open),
            messages=[convert.stored_message(m) for m in view.messages],
            total_tokens=view.total_tokens,
            log_messages=view.log_messages,
        )

    @rpc
    async def EndSession(
        self, request: pb.EndSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.EndSessionResponse:
        sid, user, allowed = self._session(request)
        result = await asyncio.to_thread(
            functools.partial(self.working.end_session, sid, user_id=user, allowed=allowed)
        )
        return pb.EndSessionResponse(
            episode_id=result.episode_id, message_count=result.message_count
        )

    @rpc
    async def RemoveMessages(
        self, request: pb.RemoveMessagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.RemoveMessagesResponse:
        sid, user, allowed = self._session(request)
        if request.all == (request.last > 0):
            raise check.InvalidArgument(
                "set exactly one of last (how many of the newest messages to remove) and all"
            )
        count = None if request.all else request.last
        result = await self._quick(
            lambda: self.working.remove_last(sid, count, user_id=user, allowed=allowed)
        )
        if result.settled is not None:  # their points deleted (the live index stage)
            await asyncio.wrap_future(result.settled)
        return pb.RemoveMessagesResponse(
            removed=[convert.stored_message(m) for m in result.removed],
            log_messages=result.log_messages,
            state=session_state(result.open),
        )

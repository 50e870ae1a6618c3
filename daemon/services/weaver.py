"""``strata.v1.WeaverService``: run the consolidation now, and its status."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc

from daemon.codec import convert
from daemon.codec import validation as check
from daemon.codec.status import FailedPrecondition, NotFound, rpc, rpc_stream
from daemon.services import tenancy
from daemon.settings.sections import LimitsSettings
from stratad_client.pb import weaver_pb2 as pb
from stratad_client.pb import weaver_pb2_grpc
from tiers.journal.store import Journal
from tiers.workers.pool import WorkerStatus
from weaver.jobs.runner import Weaver
from weaver.run import RunReport


def report_pb(report: RunReport) -> pb.RunReport:
    return convert.from_fields(
        pb.RunReport,
        report,
        started_at=convert.timestamp(int(report.started_at * 1_000_000)),
        finished_at=convert.timestamp(int(report.finished_at * 1_000_000)),
    )


@dataclass(frozen=True, slots=True)
class WeaverService(weaver_pb2_grpc.WeaverServiceServicer):
    weaver: Weaver | None
    journal: Journal
    limits: LimitsSettings
    embedding: str
    workers: Callable[[], tuple[list[WorkerStatus], str]] = lambda: ([], "")

    def _require(self) -> Weaver:
        if self.weaver is None:
            raise FailedPrecondition("the weaver is disabled (weaver.enabled = false)")
        return self.weaver

    @rpc_stream
    async def RunNow(
        self, request: pb.RunNowRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.RunEvent]:
        weaver = self._require()
        ids = tuple(check.episode_id(e) for e in request.episode_ids)
        # A token limited to some tenants runs the weaver for them only.
        scope = tenancy.effective_scope(check.scope(request.scope, self.limits))
        if ids and tenancy.current() is not None:
            await asyncio.to_thread(self._check_visible, ids)
        run = weaver.request_run(ids, scope)
        seen = 0
        while True:
            events, report = await asyncio.to_thread(run.follow, seen, 1.0)
            seen += len(events)
            for e in events:
                progress = convert.from_fields(pb.RunProgress, e, run_id=run.run_id)
                yield pb.RunEvent(progress=progress)
            if report is not None:
                yield pb.RunEvent(report=report_pb(report))
                return

    def _check_visible(self, ids: tuple[str, ...]) -> None:
        for eid in ids:
            try:
                owner = self.journal.get(eid).scope.user_id
            except NotFound:
                continue  # the run reports it as unknown, as without authentication
            if not tenancy.visible(owner):
                raise NotFound(f"episode {eid!r} was not found")

    @rpc
    async def Status(
        self, request: pb.WeaverStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.WeaverStatusResponse:
        return await asyncio.to_thread(self._status)

    def _status(self) -> pb.WeaverStatusResponse:
        weaver = self._require()
        pending = self.journal.pending()
        near = len(self.journal.near_expiry(pending))
        live = weaver.live_backlog()
        response = pb.WeaverStatusResponse(
            running=weaver.running is not None,
            pending=len(pending),
            unindexed=self.journal.unindexed_count() + weaver.unindexed_documents(),
            live_sessions_behind=live.sessions,
            live_unindexed=live.messages,
            last_error=weaver.last_error,
            pending_near_expiry=near,
            extractor=weaver.extractor_name,
            embedding_model=self.embedding,
            embedding_ready=weaver.ready,
            tier3_error=weaver.tier3_error or "",
        )
        workers, response.workers_note = self.workers()
        response.workers.extend(convert.from_fields(pb.Worker, w) for w in workers)
        if weaver.last_run is not None:
            response.last_run.CopyFrom(report_pb(weaver.last_run))
        next_run = weaver.next_run()
        if next_run is not None:
            response.next_run.CopyFrom(convert.timestamp(int(next_run * 1_000_000)))
        return response

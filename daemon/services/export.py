"""``AdminService.Export`` and ``AdminService.Import`` (:class:`TransferRpcs`, a handler object
of the AdminService).

Export: the scope is checked (a token of some tenants exports only them), then
:class:`tiers.rights.archive.exporter.Exporter` writes the file to a spool in the data directory on
a worker thread, so the Tier 3 lock it holds is never held while a slow client reads; progress
messages (record counts) go out meanwhile, then the file in chunks of :data:`CHUNK_BYTES`, then the
final counts (``done``).

Import: the client streams a file; lines may span messages. Each line is checked as it arrives
(:class:`tiers.rights.archive.parser.ExportParser`) and spooled; a bad line ends the call at once
with INVALID_ARGUMENT naming it, before anything is written. Once the whole file has been read and
its footer checked, :class:`tiers.rights.archive.importer.Importer` checks it against the stores
(FAILED_PRECONDITION for ids of another tenant, nothing written) and writes it. The user is the
file's; a ``user_id`` in the first message must be the same, and the token must be allowed that user
(PERMISSION_DENIED). Episodes imported unindexed are handed to the weaver's indexer.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import grpc

from daemon.codec import validation
from daemon.codec.status import (
    InvalidArgument,
    MalformedRequest,
    PermissionDenied,
    rpc,
    rpc_stream,
)
from daemon.services import tenancy
from daemon.settings.sections import LimitsSettings
from stratad_client.pb import admin_pb2 as pb
from tiers.core.errors import InvalidExport
from tiers.core.records import Scope, from_fields
from tiers.journal.store import Journal
from tiers.rights.archive.exporter import Exporter
from tiers.rights.archive.format import MAX_LINE_BYTES, Record
from tiers.rights.archive.importer import Importer, ImportReport
from tiers.rights.archive.parser import ExportParser
from tiers.rocks import RocksStore
from tiers.scoped import Limits, ScopedKind
from tiers.semantic.store import SemanticStore
from tiers.working.memory import WorkingMemory
from weaver.extraction_json import record_from_json, record_to_json
from weaver.jobs.runner import Weaver

CHUNK_BYTES = 1024 * 1024
READY_TIMEOUT = 60.0  # seconds an export or import waits for Tier 3 at start-up


@dataclass(frozen=True, slots=True)
class TransferSources:
    """What Export and Import use (built by ``daemon.app``)."""

    exporter: Exporter
    importer: Importer
    semantic: SemanticStore
    spool_dir: Path  # for the spooled file: the data directory's disk, not /tmp
    # Checks an extraction record's JSON form (raises TypeError, ValueError, KeyError).
    check_extraction: Callable[[str, Scope, dict[str, Any]], object]
    # Hands episodes imported unindexed to the weaver's indexer (a no-op without a weaver).
    index: Callable[[list[str]], None]


def transfer_sources(
    state: RocksStore,
    journal: Journal,
    working: WorkingMemory,
    semantic: SemanticStore,
    weaver: Weaver | None,
    data_dir: Path,
    kinds: Sequence[ScopedKind] = (),
) -> TransferSources:
    """Export and Import over a daemon's stores."""

    def index(episode_ids: list[str]) -> None:
        if weaver is not None:  # without one, the next start's weaver indexes them
            for eid in episode_ids:
                weaver.notify_flushed(eid)

    return TransferSources(
        exporter=Exporter(state, journal, semantic, working.write_lock, record_to_json, kinds),
        importer=Importer(state, journal, working, semantic, record_from_json, kinds),
        semantic=semantic,
        spool_dir=data_dir,
        check_extraction=record_from_json,
        index=index,
    )


def _limits(limits: LimitsSettings) -> Limits:
    return from_fields(Limits, limits, max_document_bytes=limits.max_message_bytes)


def _counts(records: Counter[str], size: int) -> pb.TransferCounts:
    return pb.TransferCounts(records={k: v for k, v in records.items() if v}, bytes=size)


@dataclass(frozen=True, slots=True)
class TransferRpcs:
    """Export, Import."""

    transfer: TransferSources
    limits: LimitsSettings

    @rpc_stream
    async def Export(
        self, request: pb.ExportRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ExportChunk]:
        user_id = tenancy.effective_user(validation.user_id(request.user_id, self.limits))
        if not user_id:
            raise InvalidArgument("user_id is required: an export holds one user")
        agent_id = validation.agent_id(request.agent_id, self.limits)
        t = self.transfer
        await asyncio.to_thread(t.semantic.wait_ready, READY_TIMEOUT)
        loop = asyncio.get_running_loop()
        updates: asyncio.Queue[Counter[str]] = asyncio.Queue()
        spool = tempfile.TemporaryFile(dir=t.spool_dir)  # noqa: SIM115 - closed below

        def progress(counts: Counter[str]) -> None:
            loop.call_soon_threadsafe(updates.put_nowait, counts)

        task = asyncio.ensure_future(
            asyncio.to_thread(t.exporter.write, spool, Scope(user_id, agent_id), progress)
        )
        try:
            while not task.done():
                waiting = asyncio.ensure_future(updates.get())
                await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
                if waiting.done():
                    yield pb.ExportChunk(progress=_counts(waiting.result(), 0))
                else:
                    waiting.cancel()
            summary = task.result()
            spool.seek(0)
            while data := await asyncio.to_thread(spool.read, CHUNK_BYTES):
                yield pb.ExportChunk(data=data)
            yield pb.ExportChunk(progress=_counts(summary.records, summary.bytes), done=True)
        finally:
            # A client that went away: the walk ends on its own, then the spool is closed.
            task.add_done_callback(lambda _done: _close(spool, task))

    @rpc
    async def Import(
        self, requests: AsyncIterator[pb.ImportChunk], context: grpc.aio.ServicerContext
    ) -> pb.ImportResponse:
        t = self.transfer
        began = time.monotonic()
        parser: ExportParser | None = None
        pending = bytearray()  # the start of a line not ended yet
        received = 0
        with tempfile.TemporaryFile(dir=t.spool_dir) as spool:
            async for chunk in requests:
                if isinstance(chunk, MalformedRequest):
                    raise chunk.error()
                if parser is None:
                    named = validation.user_id(chunk.user_id, self.limits)
                    if named:
                        tenancy.effective_user(named)  # PERMISSION_DENIED for another tenant
                    parser = ExportParser(named, _limits(self.limits), t.check_extraction)
                received += len(chunk.data)
                pending += chunk.data
                end = pending.rfind(b"\n")
                if end >= 0:
                    lines = bytes(pending[: end + 1])
                    del pending[: end + 1]
                    await asyncio.to_thread(_check, parser, spool, lines)
                if len(pending) > MAX_LINE_BYTES:
                    raise InvalidExport(
                        f"line {parser.lines + 1}: longer than {MAX_LINE_BYTES} bytes"
                    )
            if parser is None:
                raise InvalidArgument("the import stream is empty: send an export file")
            if pending:  # a last line without its newline
                await asyncio.to_thread(_check, parser, spool, bytes(pending) + b"\n")
            parser.finish()
            assert parser.header is not None
            await asyncio.to_thread(t.semantic.wait_ready, READY_TIMEOUT)
            report = await asyncio.to_thread(_apply, t, spool, parser.user_id)
        embedder, _vectors = t.semantic.wait_ready(0)
        read = parser.counts + Counter({f"point:{k}": n for k, n in parser.kinds.items()})
        return pb.ImportResponse(
            user_id=parser.user_id,
            read=_counts(read, received),
            written=_counts(report.written, 0),
            skipped_forgotten=report.skipped_forgotten,
            skipped_expired=report.skipped_expired,
            sessions_skipped=report.sessions_skipped,
            source_model=parser.header.model,
            model=embedder.model_name,
            seconds=time.monotonic() - began,
        )


def _close(spool: IO[bytes], task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a walk the client did not wait for is not an error
    spool.close()


def _check(parser: ExportParser, spool: IO[bytes], lines: bytes) -> None:
    """Parse and check complete lines, then spool them (worker thread). The token must be
    allowed the file's user, which the header names."""
    for line in lines.split(b"\n")[:-1]:  # ``lines`` ends with one; a CR is JSON whitespace
        record = parser.feed(line)
        if record.type == "header" and not tenancy.visible(parser.user_id):
            raise PermissionDenied(f"this token may not act for user_id {parser.user_id!r}")
    spool.write(lines)


def _records(spool: IO[bytes], user_id: str) -> Iterator[Record]:
    """The spooled file, parsed again (it was checked whole already)."""
    spool.seek(0)
    parser = ExportParser(user_id, Limits(*[2**31] * 7))
    for line in spool:
        yield parser.feed(line)


def _apply(t: TransferSources, spool: IO[bytes], user_id: str) -> ImportReport:
    t.importer.check(_records(spool, user_id))
    report = t.importer.apply(_records(spool, user_id))
    if report.unindexed:
        t.index(report.unindexed)
    return report

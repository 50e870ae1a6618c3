"""The operator's calls (AdminService, WeaverService and the daemon's Stats), defined once for
:class:`stratad_client.AdminClient` and :class:`stratad_client.AsyncAdminClient`. ``weaverctl``
is made of them."""

from __future__ import annotations

from collections.abc import Iterable

from stratad_client.base import Api, T
from stratad_client.calls import Stream, Unary
from stratad_client.pb import admin_pb2, weaver_pb2
from stratad_client.pb import memory_pb2 as pb
from stratad_client.requests import import_chunks
from stratad_client.rpc import stream, unary


class AdminApi(Api[T]):
    """Stats, backup, rebuild, export and import, and the weaver's runs and status. ``timeout``
    is a call's deadline in seconds (None: the client's; for the streams, no deadline)."""

    @unary
    def stats(self, *, timeout: float | None = None) -> Unary[pb.StatsResponse]:
        """Counts per tier, store sizes and uptime."""
        return Unary(self._memory.Stats, pb.StatsRequest(), self._t(timeout))

    @unary
    def backup(
        self, destination: str, *, timeout: float | None = None
    ) -> Unary[admin_pb2.BackupResponse]:
        """A consistent online checkpoint of every store into ``destination`` (a directory
        that must not exist, on the daemon's host)."""
        req = admin_pb2.BackupRequest(destination=destination)
        return Unary(self._admin.Backup, req, self._t(timeout))

    @unary
    def rebuild(
        self, user_id: str = "", *, timeout: float | None = None
    ) -> Unary[admin_pb2.RebuildResponse]:
        """Re-derive Tier 3 (vector points, graph) from the journal and the stored
        consolidation records, for one user (``user_id``) or (empty) every user."""
        req = admin_pb2.RebuildRequest(user_id=user_id)
        return Unary(self._admin.Rebuild, req, self._t(timeout))

    @stream
    def export(
        self, user_id: str = "", *, agent_id: str = "", timeout: float | None = None
    ) -> Stream[admin_pb2.ExportChunk]:
        """Everything of ``user_id`` (or of its agent ``agent_id``) as a stream: progress
        counts while the daemon makes the export, then the JSON Lines file in chunks
        (``data``, to be written in order), then the final counts (``done``). ``timeout``
        bounds the whole stream (None: no deadline)."""
        req = admin_pb2.ExportRequest(user_id=user_id, agent_id=agent_id)
        return Stream(self._admin.Export, req, timeout)

    @unary
    def import_(
        self, data: Iterable[bytes], *, user_id: str = "", timeout: float | None = None
    ) -> Unary[admin_pb2.ImportResponse]:
        """Import an export file, given as byte chunks (``data``) of any size in file order.
        The user is the file's; ``user_id``, when given, must be the same. ``timeout`` bounds
        the whole call, embedding included (None: no deadline)."""
        return Unary(self._admin.Import, import_chunks(data, user_id), timeout)

    @stream
    def run_weaver(
        self,
        *,
        episode_ids: Iterable[str] = (),
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> Stream[weaver_pb2.RunEvent]:
        """Start a consolidation run (of ``episode_ids``, or of the pending episodes of the
        scope ``user_id``/``agent_id``; all empty: every pending episode); yields progress
        events, then the report. Closing the iterator early leaves the run going on in the
        daemon. ``timeout`` bounds the whole stream (None: no deadline)."""
        req = weaver_pb2.RunNowRequest(
            episode_ids=list(episode_ids), scope=pb.Scope(user_id=user_id, agent_id=agent_id)
        )
        return Stream(self._weaver.RunNow, req, timeout)

    @unary
    def weaver_status(
        self, *, timeout: float | None = None
    ) -> Unary[weaver_pb2.WeaverStatusResponse]:
        """The weaver: last and next run, pending and unindexed work, whether the embedding
        model is ready, the last error."""
        return Unary(self._weaver.Status, weaver_pb2.WeaverStatusRequest(), self._t(timeout))

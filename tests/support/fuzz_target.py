"""What ``tests/daemon/codec/test_fuzz.py`` fuzzes: every RPC of the daemon's services, enumerated
from the generated descriptors, and :class:`Fuzz`, the state the module's tests share (the daemon, a
raw channel to it, the ids it issued, the status codes seen per RPC)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

from stratad_client.pb import admin_pb2, memory_pb2, weaver_pb2
from tests.support import ThreadDaemon

SERVICES = (
    memory_pb2.DESCRIPTOR.services_by_name["MemoryService"],
    admin_pb2.DESCRIPTOR.services_by_name["AdminService"],
    weaver_pb2.DESCRIPTOR.services_by_name["WeaverService"],
)
DOCUMENTED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.OUT_OF_RANGE,  # a Watch cursor older than the change log keeps
}
CALL_TIMEOUT = 60.0  # per call: only a hung RPC reaches it
# Streams a valid request keeps open (Watch follows until the client leaves): read for this
# many seconds; still open then is the request accepted.
OPEN_STREAMS = {"MemoryService.Watch": 0.5}


@dataclass(frozen=True)
class Rpc:
    path: str
    name: str
    method: MethodDescriptor
    request: type[Message]
    response: type[Message]

    @property
    def streaming(self) -> bool:
        return bool(self.method.server_streaming)

    @property
    def client_streaming(self) -> bool:
        return bool(self.method.client_streaming)


def _rpcs() -> list[Rpc]:
    out = []
    for service in SERVICES:
        for m in service.methods:
            out.append(
                Rpc(
                    path=f"/{service.full_name}/{m.name}",
                    name=f"{service.name}.{m.name}",
                    method=m,
                    request=message_factory.GetMessageClass(m.input_type),
                    response=message_factory.GetMessageClass(m.output_type),
                )
            )
    return out


RPCS = _rpcs()


@dataclass
class Fuzz:
    daemon: ThreadDaemon
    channel: grpc.Channel
    backups: Path
    pools: dict[str, list[str]]
    counts: dict[str, Counter[str]]

    def call(self, rpc: Rpc, payload: bytes) -> grpc.StatusCode:
        """Send ``payload`` as the raw request; the status code (responses are harvested)."""
        self.counts[rpc.name]["cases"] += 1
        open_for = OPEN_STREAMS.get(rpc.name)
        try:
            if rpc.client_streaming:  # the payload as the stream's one message
                call = self.channel.stream_unary(rpc.path)
                replies = [call(iter([payload]), timeout=CALL_TIMEOUT)]
            elif rpc.streaming:
                timeout = open_for or CALL_TIMEOUT
                stream = self.channel.unary_stream(rpc.path)(payload, timeout=timeout)
                replies = list(stream)
            else:
                replies = [self.channel.unary_unary(rpc.path)(payload, timeout=CALL_TIMEOUT)]
        except grpc.RpcError as exc:
            code: grpc.StatusCode = exc.code()
            if open_for and code == grpc.StatusCode.DEADLINE_EXCEEDED:
                self.counts[rpc.name]["OK (open)"] += 1
                return grpc.StatusCode.OK
            self.counts[rpc.name][code.name] += 1
            assert code in DOCUMENTED, f"{rpc.name}: {code.name}: {exc.details()}"
            return code
        self.counts[rpc.name]["OK"] += 1
        for raw in replies:
            self._harvest(rpc.response.FromString(raw))
        return grpc.StatusCode.OK

    def _harvest(self, reply: Message) -> None:
        """Remember ids the daemon issued, so that later cases can name real things."""
        if isinstance(reply, memory_pb2.EndSessionResponse):
            self._remember("episode_id", reply.episode_id)
        elif isinstance(reply, memory_pb2.ListEpisodesResponse):
            for e in reply.episodes[:5]:
                self._remember("episode_id", e.episode_id)
        elif isinstance(reply, memory_pb2.RecallResponse):
            for h in reply.hits[:5]:
                self._remember("id", h.id)

    def _remember(self, kind: str, value: str) -> None:
        pool = self.pools[kind]
        if value and value not in pool:
            pool.append(value)
            del pool[:-50]

"""A gRPC server with Strata's stubs whose ``Append`` does no work: the floor any Python gRPC
daemon has on this machine. Prints its address, then serves until terminated."""

from __future__ import annotations

import asyncio

import grpc

from stratad_client.pb import memory_pb2 as pb
from stratad_client.pb import memory_pb2_grpc


class _Floor(memory_pb2_grpc.MemoryServiceServicer):
    async def Append(
        self, request: pb.AppendRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendResponse:
        return pb.AppendResponse(seq=1)


async def _serve() -> None:
    server = grpc.aio.server()
    memory_pb2_grpc.add_MemoryServiceServicer_to_server(_Floor(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(_serve())

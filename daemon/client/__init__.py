"""The Python client agents import: :class:`MemoryClient` (sync) and :class:`AsyncMemoryClient`.

::

    from daemon.client import MemoryClient

    with MemoryClient() as memory:  # $STRATA_ADDRESS or 127.0.0.1:50051
        memory.append("chat-1", "I moved to Berlin last week.", user_id="alice")
        memory.end_session("chat-1")
        for episode in memory.iter_episodes(user_id="alice"):
            print(episode.episode_id, episode.message_count)

Both clients take the same arguments and return the protobuf messages of
``proto/strata/v1/memory.proto`` (typed by the generated ``.pyi`` stubs). Errors are
``grpc.RpcError`` with the daemon's status code and message. Every call has a deadline
(``timeout`` seconds, per client or per call).
"""

from daemon.client.aio import AsyncMemoryClient
from daemon.client.requests import (
    ADDRESS_ENV,
    DEFAULT_ADDRESS,
    Timeish,
    default_address,
    message,
    timestamp,
)
from daemon.client.sync import MemoryClient

__all__ = [
    "ADDRESS_ENV",
    "DEFAULT_ADDRESS",
    "AsyncMemoryClient",
    "MemoryClient",
    "Timeish",
    "default_address",
    "message",
    "timestamp",
]

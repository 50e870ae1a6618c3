"""The Python client of a Strata daemon: :class:`MemoryClient` for an agent's calls and
:class:`AdminClient` for the operator's, each also for asyncio (:class:`AsyncMemoryClient`,
:class:`AsyncAdminClient`).

::

    from stratad_client import MemoryClient

    with MemoryClient() as memory:  # $STRATA_ADDRESS or 127.0.0.1:50051
        memory.append("chat-1", "I moved to Berlin last week.", user_id="alice")
        memory.end_session("chat-1")
        for episode in memory.iter_episodes(user_id="alice"):
            print(episode.episode_id, episode.message_count)

The clients return the protobuf messages of ``proto/strata/v1/*.proto`` (typed by the
generated ``.pyi`` stubs). Every call has a deadline (``timeout`` seconds, per client or per
call) and raises only :class:`StrataClientError` and its subclasses, one per error kind
(:class:`NotFoundError`, :class:`InvalidArgumentError`, ...), with the gRPC status ``code`` and
the daemon's ``message``. This package needs grpcio and protobuf only: it imports nothing of
the daemon.
"""

from stratad_client.aio import AsyncAdminClient, AsyncMemoryClient
from stratad_client.errors import (
    AlreadyExistsError,
    CallCancelledError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    StrataClientError,
    UnauthenticatedError,
    UnavailableError,
)
from stratad_client.kinds import MEMORY_KINDS, MemoryKind
from stratad_client.requests import (
    ADDRESS_ENV,
    DEFAULT_ADDRESS,
    Timeish,
    default_address,
    message,
    timestamp,
)
from stratad_client.sync import AdminClient, MemoryClient

__all__ = [
    "ADDRESS_ENV",
    "DEFAULT_ADDRESS",
    "MEMORY_KINDS",
    "AdminClient",
    "AlreadyExistsError",
    "AsyncAdminClient",
    "AsyncMemoryClient",
    "CallCancelledError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "MemoryClient",
    "MemoryKind",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "StrataClientError",
    "Timeish",
    "UnauthenticatedError",
    "UnavailableError",
    "default_address",
    "message",
    "timestamp",
]

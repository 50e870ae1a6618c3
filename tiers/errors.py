"""Errors raised by the tiers. Each inherits a kind from :mod:`daemon.errors`, which decides
its gRPC status code."""

from __future__ import annotations

from daemon.errors import FailedPrecondition, NotFound, StrataError, Unavailable


def one_line(exc: BaseException) -> str:
    """An exception as one short line, for logs and status fields (library errors, such as
    a model that fails to load, can span screens)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


class TierError(StrataError):
    """Root of the tiers' errors."""


class SessionNotFound(TierError, NotFound):
    """No session with this id has ever had a message."""


class SessionEnded(TierError, FailedPrecondition):
    """The session was ended already and has had no message since."""


class ScopeMismatch(TierError, FailedPrecondition):
    """A message's scope differs from the scope fixed by the session's first message."""


class EpisodeNotFound(TierError, NotFound):
    """No such episode in the journal, or it has expired."""


class StoreUnavailable(TierError, Unavailable):
    """A RocksDB write or read failed (disk full, I/O error, store closed)."""

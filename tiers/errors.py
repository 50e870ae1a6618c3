"""Errors raised by the tiers. Each inherits a kind from :mod:`daemon.errors`, which decides
its gRPC status code."""

from __future__ import annotations

from daemon.errors import FailedPrecondition, NotFound, StrataError, Unavailable


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

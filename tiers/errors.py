"""Errors raised by the tiers. Each inherits a kind from :mod:`daemon.errors`, which decides
its gRPC status code."""

from __future__ import annotations

from daemon.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    StrataError,
    Unavailable,
)


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


class DocumentNotFound(TierError, NotFound):
    """No keyed document of this scope, namespace and key."""


class InvalidExport(TierError, InvalidArgument):
    """An export file (``tiers.export``) that cannot be imported: not JSON Lines, an unknown
    format version, a record of another scope, a missing or wrong field. The message names
    the line."""


class ImportConflict(TierError, FailedPrecondition):
    """An export names a session, episode, point or edge that this daemon holds for another
    scope (or a session open here at another generation); nothing was imported."""


class StoreUnavailable(TierError, Unavailable):
    """A RocksDB write or read failed (disk full, I/O error, store closed)."""


class ModelError(TierError):
    """A model behind litellm (:mod:`tiers.models`) failed a request. ``detail`` is the
    message without the client's name, ``cause`` the last failure alone (both redacted)."""

    def __init__(self, message: str, *, detail: str = "", cause: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message
        self.cause = cause or self.detail


class ModelUnavailable(ModelError, Unavailable):
    """The model's endpoint is down, slow or overloaded (connection errors, timeouts, 408, 429,
    5xx) and still was after the retries: the request may succeed later."""


class ModelRequestFailed(ModelError, FailedPrecondition):
    """The endpoint refused the request (400, 401, 403, 404...), its replies were unusable
    after the retries, or the API key is missing: a configuration problem, not a pause."""

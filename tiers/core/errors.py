"""The project's exception tree: the root, the *kinds*, and the tiers' own errors.

``StrataError`` is the root of every error Strata raises on purpose. The *kind* classes below
it (``InvalidArgument``, ``NotFound``, ...) say what went wrong without naming a transport;
each package adds its own subclasses (``TierError`` here, :mod:`weaver.errors`,
``recall.RecallError``) that also inherit a kind, and :func:`daemon.codec.status.grpc_status` maps
the kind to a gRPC status code. The kinds live here, on the lowest floor that raises them, so
that no package imports ``daemon`` for them. The message of an exception is sent to the
client, so it must say what was wrong and must not contain secrets.
"""

from __future__ import annotations


class StrataError(Exception):
    """Root of every error Strata raises on purpose."""


class InvalidArgument(StrataError):
    """The request is malformed regardless of the daemon's state."""


class NotFound(StrataError):
    """The thing the request names does not exist (or has expired)."""


class AlreadyExists(StrataError):
    """The request would create something that exists already."""


class FailedPrecondition(StrataError):
    """The request is well formed but conflicts with the current state."""


class OutOfRange(StrataError):
    """The request reads past what is kept (a cursor older than a log's retention)."""


class ResourceExhausted(StrataError):
    """The request is over a size or capacity limit."""


class Unavailable(StrataError):
    """A store cannot take the request right now; nothing was acknowledged."""


class Unauthenticated(StrataError):
    """The call carries no valid credentials (a bearer token, when authentication is on)."""


class PermissionDenied(StrataError):
    """The caller is known but its token lacks the right or the tenant the call needs."""


class ConfigError(StrataError):
    """The configuration is invalid; the daemon refuses to start."""


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
    """An export file (``tiers.rights.archive.format``) that cannot be imported: not JSON Lines, an
    unknown format version, a record of another scope, a missing or wrong field. The message names
    the line."""


class ImportConflict(TierError, FailedPrecondition):
    """An export names a session, episode, point or edge that this daemon holds for another
    scope (or a session open here at another generation); nothing was imported."""


class StoreUnavailable(TierError, Unavailable):
    """A RocksDB write or read failed (disk full, I/O error, store closed)."""


class Stopped(TierError, Unavailable):
    """Work given a stop event gave up because the event was set (the daemon is stopping):
    nothing of it was written."""


class VectorStoreMismatch(TierError, FailedPrecondition):
    """The store was created with another embedding model or vector size."""


class VectorStoreUnavailable(TierError, Unavailable):
    """The vector store failed a read or write (server down, disk error)."""


class VectorStoreInterrupted(VectorStoreUnavailable, Stopped):
    """Work that can wait for the next start was asked of a vector store told to stop it
    (:meth:`tiers.semantic.vectors.VectorStore.interrupt`): a shard's keyword count. Of the
    request that met it, what was written before stays; the rest is the caller's to redo (the
    weaver redoes it at its next start)."""


class IndexBuildCancelled(VectorStoreUnavailable):
    """An index build was given up, because a purge (Forget) rewrites the same shard
    meanwhile: the copy it built would still hold the purged bytes. A later build starts
    afresh."""


class ModelError(TierError):
    """A model behind litellm (:mod:`tiers.core.models`) failed a request. ``detail`` is the
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

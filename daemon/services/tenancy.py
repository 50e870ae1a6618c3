"""Tenants: which user a request acts for, and what its caller may see.

The server's door (:mod:`daemon.server.auth`) runs each authenticated call as its token's
:class:`Principal`, kept in a context variable for the length of the call. Handlers then ask
:func:`effective_user` which tenant (``user_id``) a request acts for and :func:`visible`
whether a stored thing belongs to the caller. With authentication off there is no principal
and both helpers change nothing.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass

from daemon.codec.status import InvalidArgument, PermissionDenied
from daemon.settings.security import ALL_TENANTS, RIGHTS, TokenEntry
from tiers.core.records import Scope


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a token's name, its tenants (None: all tenants) and its rights."""

    name: str
    tenants: frozenset[str] | None
    rights: frozenset[str]

    @classmethod
    def of(cls, entry: TokenEntry) -> Principal:
        rights = frozenset(RIGHTS) if "admin" in entry.rights else frozenset(entry.rights)
        tenants = None if entry.tenants == [ALL_TENANTS] else frozenset(entry.tenants)
        return cls(entry.name, tenants, rights)

    def allows(self, user_id: str) -> bool:
        return self.tenants is None or user_id in self.tenants


_current: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "strata_principal", default=None
)


def current() -> Principal | None:
    """The caller of the RPC being served; None when authentication is off."""
    return _current.get()


def effective_user(requested: str) -> str:
    """The tenant a request acts for.

    A named ``user_id`` must be one of the token's tenants (PERMISSION_DENIED otherwise). An
    empty one becomes the token's tenant when it has exactly one; it stays empty for an
    all-tenants token (the caller may see every user) and is an INVALID_ARGUMENT for a token of
    several tenants, which must say which one it means.
    """
    p = current()
    if p is None:
        return requested
    if requested:
        if not p.allows(requested):
            raise PermissionDenied(f"this token may not act for user_id {requested!r}")
        return requested
    if p.tenants is None:
        return ""
    if len(p.tenants) == 1:
        return next(iter(p.tenants))
    raise InvalidArgument("scope.user_id is required: this token has several tenants")


def effective_scope(requested: Scope) -> Scope:
    """``requested`` with the tenant it acts for (:func:`effective_user`)."""
    return Scope(effective_user(requested.user_id), requested.agent_id)


def user_scope(requested: Scope, why: str) -> Scope:
    """:func:`effective_scope` for a call over one user's data: INVALID_ARGUMENT when it names
    no user (``why``: what makes the call one user's)."""
    scope = effective_scope(requested)
    if not scope.user_id:
        raise InvalidArgument(f"scope.user_id is required: {why}")
    return scope


def visible(user_id: str) -> bool:
    """Whether something stored for ``user_id`` may be shown to (or changed by) the caller."""
    p = current()
    return p is None or p.allows(user_id)


def require_all_tenants(what: str) -> None:
    """For operations over every tenant at once (a backup): only an all-tenants token."""
    p = current()
    if p is not None and p.tenants is not None:
        raise PermissionDenied(f'{what} needs a token whose tenants are ["*"]')


def act_as(principal: Principal) -> None:
    """Run the rest of the current call (its task's context) as ``principal``."""
    _current.set(principal)


def session_user(requested: str) -> tuple[str, Callable[[str], bool] | None]:
    """How a call names a session's user (sessions are per user): the user, or "" with the
    users it may be found among (None: any), when the session is to be found by its id.

    A named user must be one of the token's tenants (PERMISSION_DENIED otherwise); an empty
    one is the token's tenant when it has one, and otherwise is found among its tenants. Another
    tenant's session of the same id is a different session, never named by this caller."""
    p = current()
    if p is None or requested:
        return effective_user(requested), None
    if p.tenants is None:
        return "", None
    if len(p.tenants) == 1:
        return next(iter(p.tenants)), None
    return "", p.allows

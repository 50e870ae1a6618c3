"""Malformed requests are INVALID_ARGUMENT, not UNKNOWN.

gRPC's Python server answers UNKNOWN ("Unexpected DecodeError") when a request's bytes are not
the RPC's request message (corrupt wire format, a string field that is not UTF-8, a field of
the wrong wire type). :class:`daemon.server.interceptors.MalformedRequestInterceptor` gives
every handler of Strata's own services a deserializer (:func:`tolerant`) that returns a
:class:`daemon.codec.status.MalformedRequest` instead of raising; the servicers'
:func:`daemon.codec.status.rpc` decorators turn it into INVALID_ARGUMENT.
Health and reflection keep gRPC's own behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.message import DecodeError

from daemon.codec.status import MalformedRequest

PREFIX = "/strata.v1."


def tolerant(deserialize: Callable[[bytes], Any], method: str) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except (DecodeError, ValueError, TypeError) as exc:
            return MalformedRequest(method, str(exc))

    return parse

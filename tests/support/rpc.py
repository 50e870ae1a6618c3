"""What a refused gRPC call tells the client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from stratad_client import StrataClientError


def code(call: Callable[[], Any]) -> tuple[grpc.StatusCode, str]:
    """The status code and details of ``call``'s error (the call must fail with one)."""
    with pytest.raises(StrataClientError) as info:
        call()
    return info.value.code, info.value.message or ""

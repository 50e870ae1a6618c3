"""Structured logging: one line per event, ``key=value`` (default) or JSON.

Log calls name an event and pass fields::

    log.info("session.ended", extra={"fields": {"session_id": sid, "messages": 12}})
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_RESERVED = {"ts", "level", "logger", "event"}


def _kv_value(value: Any) -> str:
    text = str(value)
    if text == "" or any(c in text for c in ' "=\n\t'):
        return json.dumps(text, ensure_ascii=False)
    return text


class StructuredFormatter(logging.Formatter):
    def __init__(self, fmt: str = "kv") -> None:
        super().__init__()
        self.fmt = fmt

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in (getattr(record, "fields", None) or {}).items():
            fields[f"field_{key}" if key in _RESERVED else key] = value
        if record.exc_info:
            fields["error"] = self.formatException(record.exc_info)
        if self.fmt == "json":
            return json.dumps(fields, default=str, ensure_ascii=False)
        return " ".join(f"{k}={_kv_value(v)}" for k, v in fields.items())


def configure(level: str = "info", fmt: str = "kv") -> None:
    """Send the ``strata`` loggers to stderr in the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(StructuredFormatter(fmt))
    root = logging.getLogger("strata")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    logging.getLogger("apscheduler").setLevel(logging.WARNING)

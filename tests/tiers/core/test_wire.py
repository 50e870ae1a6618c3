"""A child's log records reach the daemon's log as its own (``tiers.core.wire``): a real child
process logs through :func:`log_to_parent`, and :func:`relay_stderr` in this process logs what
it sent by its logger, level, time and fields, and passes on what it printed."""

from __future__ import annotations

import logging
import subprocess
import sys
import time

import pytest

from tests.support import ROOT
from tiers.core.wire import relay_stderr

CHILD = r"""
import logging, sys
from tiers.core.wire import log_to_parent
log_to_parent(logging.INFO)
log = logging.getLogger("strata.probe")
log.debug("probe.quiet")
log.info("probe.said", extra={"fields": {"n": 3, "path": "a b", "at": {1, 2}}})
try:
    1 / 0
except ZeroDivisionError:
    log.exception("probe.failed")
print("a line a library printed", file=sys.stderr)
sys.stderr.write("\x1estrata-log {not json\n")
"""


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept():
    logger = logging.getLogger("strata.probe")
    handler = _Kept()
    logger.addHandler(handler)
    level = logger.level
    try:
        yield logger, handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _relayed(level: int, kept) -> tuple[list[logging.LogRecord], list[str], int]:
    logger, handler = kept
    logger.setLevel(level)
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stderr is not None
    printed: list[str] = []
    relay_stderr(proc.stderr, printed.append)  # returns when the child has closed its stderr
    assert proc.wait(30) == 0
    return handler.records, printed, proc.pid


def test_a_childs_records_are_logged_here_as_they_were_and_its_prints_passed_on(kept) -> None:
    began = time.time()
    records, printed, child_pid = _relayed(logging.DEBUG, kept)
    assert [(r.name, r.levelno, r.getMessage()) for r in records] == [
        ("strata.probe", logging.INFO, "probe.said"),  # not the debug one: below the child's level
        ("strata.probe", logging.ERROR, "probe.failed"),
    ]
    said, failed = records
    fields = {"n": 3, "path": "a b", "at": "{1, 2}", "child_pid": child_pid}
    assert said.fields == fields  # type: ignore[attr-defined]
    assert began - 1 <= said.created <= failed.created <= time.time()  # the child's times
    error = failed.fields["error"]  # type: ignore[attr-defined]
    assert "Traceback" in error and "ZeroDivisionError: division by zero" in error
    # what is not a record is passed on as printed, a broken record too
    assert printed == ["a line a library printed", "\x1estrata-log {not json"]


def test_the_relay_reads_to_the_end_whatever_its_callback_raises() -> None:
    """A child that prints more than a pipe holds ends: the relay never stops reading, even
    when what it passes lines to fails."""
    code = "import sys\nfor i in range(20000): print('x' * 100, i, file=sys.stderr)"
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    assert proc.stderr is not None
    seen = []

    def failing(line: str) -> None:
        seen.append(line)
        raise RuntimeError("a handler that fails")

    relay_stderr(proc.stderr, failing)
    assert proc.wait(30) == 0 and len(seen) == 20000


def test_a_record_below_this_process_level_is_not_logged_here(kept) -> None:
    records, printed, _ = _relayed(logging.WARNING, kept)
    assert [r.getMessage() for r in records] == ["probe.failed"]
    assert len(printed) == 2

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.settings import Settings
from daemon.wiring import Factories
from stratad_client import MemoryClient
from tests.support import MODEL_CACHE, QUIET, ProcessDaemon, ThreadDaemon, tier

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier (make test-fast): no test marked slow or daemon, none with a "
        "daemon fixture; a test that starts a daemon anyway fails (tests/support/tier.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--fast"):
        tier.enter_fast()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not tier.is_fast():
        return
    keep, left_out = [], []
    for item in items:
        daemon = tier.DAEMON_FIXTURES & set(getattr(item, "fixturenames", ()))
        marked = item.get_closest_marker("slow") or item.get_closest_marker("daemon")
        (left_out if daemon or marked else keep).append(item)
    config.hook.pytest_deselected(items=left_out)
    items[:] = keep


@pytest.fixture
def sleeps() -> list[float]:
    """The pauses a model client took, recorded instead of slept
    (:func:`tests.support.model_clients.client_settings`)."""
    return []


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No STRATA_* variable of the developer's shell leaks into a test."""
    for key in list(os.environ):
        if key.startswith("STRATA_"):
            monkeypatch.delenv(key)


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        overrides.setdefault("data_dir", tmp_path / "data")
        overrides.setdefault("listen", "127.0.0.1:0")
        overrides.setdefault("shutdown_grace_seconds", 2.0)
        overrides.setdefault("embedding", {"cache_dir": MODEL_CACHE})
        return Settings(**overrides)

    return make


@pytest.fixture
def start_daemon(make_settings: Callable[..., Settings]) -> Iterator[Callable[..., ThreadDaemon]]:
    started: list[ThreadDaemon] = []

    def start(*, factories: Factories | None = None, **overrides: Any) -> ThreadDaemon:
        """A daemon with ``make_settings(**overrides)``; ``factories``: see
        :class:`daemon.wiring.Factories`."""
        daemon = ThreadDaemon(make_settings(**overrides), factories=factories)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


@pytest.fixture
def daemon(start_daemon: Callable[..., ThreadDaemon]) -> ThreadDaemon:
    return start_daemon()


@pytest.fixture
def quiet_daemon(start_daemon: Callable[..., ThreadDaemon]) -> ThreadDaemon:
    """A daemon whose weaver runs only when asked (``QUIET``), once Tier 3 is open."""
    d = start_daemon(weaver=QUIET)
    d.daemon.parts.semantic.wait_ready(120)
    return d


@pytest.fixture
def client(daemon: ThreadDaemon) -> Iterator[MemoryClient]:
    with daemon.client() as c:
        yield c


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., ProcessDaemon]]:
    """Start ``stratad serve`` subprocesses; any still running at the end are killed."""
    procs: list[ProcessDaemon] = []

    def start(
        data_dir: Path | None = None, preexec_fn: Callable[[], Any] | None = None, **settings: str
    ) -> ProcessDaemon:
        proc = ProcessDaemon(data_dir or tmp_path / "data", preexec_fn, **settings)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.proc.poll() is None:
            proc.kill()

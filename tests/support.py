"""Test support: a daemon in this process (on its own event-loop thread) or in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from daemon.app import Daemon
from daemon.client import MemoryClient
from daemon.settings import Settings

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
# The ONNX export of the model, made once and shared by the tests' daemons (an export costs
# about 3 s and 170 MB; concurrent exports are safe: tiers.embedding).
MODEL_CACHE = Path(tempfile.gettempdir()) / f"strata-test-models-{os.getuid()}"


def wait_until(predicate: Callable[[], object], timeout: float = 180, what: str = "") -> None:
    """Poll ``predicate`` every 0.1 s until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting {what}".strip()
        time.sleep(0.1)


def wait_indexed(client: MemoryClient, timeout: float = 60) -> None:
    """Wait until the daemon's model is loaded and the weaver has indexed every ended
    episode (Recall finds them from then on)."""

    def indexed() -> bool:
        status = client.weaver_status()
        return status.embedding_ready and not status.unindexed

    wait_until(indexed, timeout, "for the weaver to index every episode")


class ThreadDaemon:
    """A real daemon (gRPC server on a loopback port) served from a background thread."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.daemon = Daemon(settings)
        self.address = self.call(self.daemon.start())

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def client(self, timeout: float = 10.0) -> MemoryClient:
        return MemoryClient(self.address, timeout=timeout)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.call(self.daemon.stop())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()


def daemon_env(data_dir: Path, **settings: str) -> dict[str, str]:
    """The environment for a stratad subprocess: this one without STRATA_*, plus settings
    (with the tests' shared model cache unless they name one)."""
    settings = {"embedding__cache_dir": str(MODEL_CACHE), **settings}
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    env.update(STRATA_DATA_DIR=str(data_dir), STRATA_LISTEN="127.0.0.1:0")
    env.update({f"STRATA_{k.upper()}": v for k, v in settings.items()})
    return env


class ProcessDaemon:
    """``stratad serve`` in a subprocess; ``address`` once it is ready."""

    def __init__(
        self, data_dir: Path, preexec_fn: Callable[[], Any] | None = None, **settings: str
    ) -> None:
        self.data_dir = data_dir
        self.ready_file = data_dir.parent / f"{data_dir.name}.ready"
        self.ready_file.unlink(missing_ok=True)
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daemon", "serve", "--ready-file", str(self.ready_file)],
            env=daemon_env(data_dir, **settings),
            cwd=ROOT,
            stdout=self._log,
            stderr=self._log,
            preexec_fn=preexec_fn,  # e.g. resource limits for fault tests
        )
        deadline = time.monotonic() + 30
        while not self.ready_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"stratad exited with {self.proc.returncode}: {self.log()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"stratad did not become ready: {self.log()}")
            time.sleep(0.02)
        info = json.loads(self.ready_file.read_text())
        self.address: str = info["address"]
        self.pid: int = info["pid"]

    def client(self, timeout: float = 10.0) -> MemoryClient:
        return MemoryClient(self.address, timeout=timeout)

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.wait()

    def terminate(self, timeout: float = 30) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float = 30) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

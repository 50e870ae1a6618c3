"""Daemons for tests: one in this process (on its own event-loop thread) or ``stratad`` in a
subprocess, the environment of such a subprocess, a Python command run in one (:func:`python`),
and ``weaverctl`` against a daemon."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from daemon.settings import Settings
from daemon.testing import LocalDaemon
from daemon.wiring import Factories
from stratad_client import MemoryClient
from tests.support.models import shared_factories
from tests.support.polling import wait_until
from tests.support.settings import MODEL_CACHE
from tests.support.tier import refuse_daemon

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


class ThreadDaemon(LocalDaemon):
    """The testing kit's daemon in this process (:class:`daemon.testing.LocalDaemon`) as the
    suite runs it: the model shared by every such daemon (:mod:`tests.support.models`), the
    stop at once (a test may stop it while Tier 3 opens), and refused in a run that starts no
    daemon. ``factories``: :class:`daemon.wiring.Factories` for its vector store and
    embedding service."""

    def __init__(self, settings: Settings, *, factories: Factories | None = None) -> None:
        refuse_daemon("a daemon in this process")
        super().__init__(settings, factories=shared_factories(factories), settle_on_stop=False)

    def client(self, timeout: float = 10.0) -> MemoryClient:  # type: ignore[override]
        return MemoryClient(self.address, timeout=timeout)


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
        refuse_daemon("a stratad subprocess")
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

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"stratad exited with {self.proc.returncode}: {self.log()}")
            return self.ready_file.exists()

        try:
            wait_until(ready, 30, "for stratad's ready file", interval=0.02)
        except AssertionError:
            self.proc.kill()
            raise RuntimeError(f"stratad did not become ready: {self.log()}") from None
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
        """The exit code; AssertionError with the log's tail (it is killed) if it has not
        exited within ``timeout``."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"stratad did not exit in {timeout:g} s: {self.log()}") from None
        finally:
            self._log.close()

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]


def python(
    *args: str, env: dict[str, str], cwd: Path = ROOT, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` (this interpreter) in a subprocess with ``env``, run in ``cwd``, its text
    output captured."""
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def weaverctl(
    address: str, *args: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """``weaverctl --address ADDRESS ARGS`` (text output captured), with ``env`` over the
    environment of a stratad subprocess."""
    return python(
        "-m",
        "daemon.cli.weaverctl",
        "--address",
        address,
        *args,
        env=daemon_env(ROOT / "unused") | (env or {}),
        timeout=timeout,
    )

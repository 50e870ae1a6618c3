"""The client is installable alone: ``pip install strata`` brings grpcio and protobuf, the
client imports without the daemon's dependencies, and the daemon's tools say what to install
when they are missing (docs/integrations.md, "Installing the client")."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from packaging.requirements import Requirement

from tests.support import ROOT

# The daemon's dependencies (the extra [daemon]) as modules; blocked, an import of them fails
# as if they were not installed.
DAEMON_MODULES = (
    "pydantic", "pydantic_settings", "rocksdict", "msgpack", "apscheduler", "qdrant_client",
    "qdrant_edge", "networkx", "numpy", "scipy", "torch", "sentence_transformers",
    "transformers", "onnxruntime", "tokenizers", "litellm", "rich", "prometheus_client",
    "grpc_reflection",
)  # fmt: skip


# Prints the project's server packages this process imported.
SERVER_LOADED = (
    "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tiers', 'weaver', 'recall')))"
)


def _without_daemon(
    code: str, keep: frozenset[str] = frozenset()
) -> subprocess.CompletedProcess[str]:
    block = "".join(f"sys.modules[{m!r}] = None\n" for m in DAEMON_MODULES if m not in keep)
    return subprocess.run(
        [sys.executable, "-c", f"import sys\n{block}{code}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_base_install_is_the_client_and_the_daemon_is_an_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {Requirement(line).name for line in project["dependencies"]}
    assert base == {"grpcio", "grpcio-health-checking", "protobuf"}
    daemon = {Requirement(line).name for line in project["optional-dependencies"]["daemon"]}
    assert {"torch", "rocksdict", "pydantic", "grpcio-reflection"} <= daemon
    assert project["scripts"]["stratad"] == "daemon.cli.entry:stratad"
    assert project["scripts"]["weaverctl"] == "daemon.cli.entry:weaverctl"


def test_the_client_imports_without_the_daemons_dependencies():
    done = _without_daemon(
        "import daemon.client\n"
        "from daemon.client import AsyncMemoryClient, MemoryClient, message\n"
        "MemoryClient('127.0.0.1:1').close()\n" + SERVER_LOADED
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_daemons_tools_say_to_install_the_extra_when_it_is_missing():
    for tool in ("stratad", "weaverctl"):
        done = _without_daemon(f"from daemon.cli import entry\nsys.exit(entry.{tool}())")
        assert done.returncode == 1, done.stderr
        assert f"{tool}: the daemon's dependencies are not installed" in done.stderr
        assert 'pip install "strata[daemon]"' in done.stderr
        assert "Traceback" not in done.stderr


def test_the_adapters_need_the_client_and_their_framework_only():
    # pydantic, numpy, litellm and the like come with some frameworks: left importable here.
    frameworks_bring = frozenset(
        {"pydantic", "numpy", "transformers", "tokenizers", "litellm", "rich"}
    )
    done = _without_daemon(
        "import daemon.adapters.mcp.server, daemon.adapters.openai_agents\n"
        "import daemon.adapters.langgraph_store, daemon.adapters.google_adk\n" + SERVER_LOADED,
        keep=frameworks_bring,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

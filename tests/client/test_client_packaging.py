"""The client is a product of its own: the distribution ``stratad-client`` (``daemon/client/``)
carries the package ``stratad_client`` (the client, its stubs and the integrations) and needs
grpcio and protobuf only; its import name is its own, so it installs beside python-daemon
(whose package is ``daemon``); the daemon is the distribution ``stratad``, which depends on it,
and its tools say what to install when the daemon's dependencies are missing
(docs/integrations.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import warnings
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

from tests.support import ROOT

CLIENT = ROOT / "daemon" / "client"


def _client_copy(tmp_path: Path) -> Path:
    """The client's distribution, copied: a build writes its build/ and egg-info beside it."""
    return Path(
        shutil.copytree(
            CLIENT,
            tmp_path / "client",
            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
        )
    )


# The daemon's dependencies as modules; blocked, an import of them fails as if they were not
# installed.
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

# A stand-in for python-daemon 3.1 (the real one, from the package index, put beside this
# venv's editable daemon would shadow it; docs/benchmarks.md records the check with the real
# one): its package is ``daemon``, with ``DaemonContext``.
PYTHON_DAEMON = '''"""python-daemon stand-in."""
class DaemonContext:
    def __init__(self, **kwargs): self.kwargs = kwargs
'''


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


def _project(path: Path) -> dict:  # type: ignore[type-arg]
    return tomllib.loads(path.read_text())["project"]


def test_two_distributions_the_client_alone_and_the_daemon_on_it():
    client = _project(CLIENT / "pyproject.toml")
    assert client["name"] == "stratad-client"
    assert {Requirement(r).name for r in client["dependencies"]} == {
        "grpcio",
        "grpcio-health-checking",
        "protobuf",
    }
    assert set(client["optional-dependencies"]) == {"mcp", "agents", "langgraph", "adk"}
    assert client["scripts"]["stratad-mcp"] == "stratad_client.integrations.mcp.server:main"
    daemon = _project(ROOT / "pyproject.toml")
    assert daemon["name"] == "stratad"
    base = {Requirement(r).name: Requirement(r) for r in daemon["dependencies"]}
    assert str(base["stratad-client"].specifier) == f"=={client['version']}"
    assert {"torch", "rocksdict", "pydantic", "grpcio-reflection"} <= base.keys()
    assert daemon["scripts"]["stratad"] == "daemon.cli.entry:stratad"
    assert daemon["scripts"]["weaverctl"] == "daemon.cli.entry:weaverctl"


def test_the_client_wheel_carries_the_client_and_the_stubs_only(tmp_path: Path):
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip, "-w", str(tmp_path), str(_client_copy(tmp_path))],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("stratad_client-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"stratad_client"}
    assert "stratad_client/pb/memory_pb2.py" in names
    assert "stratad_client/pb/memory_pb2.pyi" in names
    assert "stratad_client/integrations/mcp/README.md" in names


def test_the_client_installs_beside_python_daemon_and_both_import(tmp_path: Path):
    """Installed into a directory of its own beside a package ``daemon`` (python-daemon's), with
    the repository off the path: ``stratad_client`` imports from the wheel, ``daemon`` is
    python-daemon's."""
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip, "--target", str(tmp_path / "site"), str(_client_copy(tmp_path))],
        check=True,
        capture_output=True,
        timeout=300,
    )
    other = tmp_path / "other" / "daemon"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text(PYTHON_DAEMON)
    code = f"""
import sys
# the repository off the path: the editable installs' finders and path hooks out
sys.meta_path[:] = [
    f for f in sys.meta_path
    if not (f.__module__ if isinstance(f, type) else type(f).__module__).startswith("__editable__")
]
sys.path[:] = [{str(tmp_path / "site")!r}, {str(tmp_path / "other")!r}] + [
    p for p in sys.path
    if p not in ("", {str(ROOT)!r}) and not p.startswith(("__editable__", {str(CLIENT)!r}))
]
import daemon, stratad_client
from stratad_client import MemoryClient
from stratad_client.pb import memory_pb2
MemoryClient("127.0.0.1:1").close()
print(daemon.__file__, daemon.DaemonContext(umask=0o22).kwargs, stratad_client.__file__, sep="|")
"""
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    daemon_file, kwargs, client_file = done.stdout.split("|")
    assert daemon_file == str(other / "__init__.py") and kwargs == "{'umask': 18}"
    assert client_file.strip().startswith(str(tmp_path / "site" / "stratad_client"))


def test_the_client_imports_without_the_daemons_dependencies():
    done = _without_daemon(
        "import stratad_client\n"
        "from stratad_client import AsyncMemoryClient, MemoryClient, message\n"
        "MemoryClient('127.0.0.1:1').close()\n" + SERVER_LOADED
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_daemons_tools_say_what_to_install_when_its_dependencies_are_missing(tmp_path):
    # weaverctl's commands but export need the client alone (an operator's machine may have
    # only it); export writes the Markdown tree, with the daemon's packages.
    export = ["weaverctl", "--address", "127.0.0.1:1", "export", "--user", "u", str(tmp_path)]
    for tool, argv in (("stratad", ["stratad"]), ("weaverctl", export)):
        done = _without_daemon(
            f"from daemon.cli import entry\nsys.argv = {argv!r}\nsys.exit(entry.{tool}())"
        )
        assert done.returncode == 1, done.stderr
        assert f"{tool}: the daemon's dependencies are not installed" in done.stderr
        assert "pip install stratad" in done.stderr
        assert "Traceback" not in done.stderr
    done = _without_daemon(
        "from daemon.cli import entry\nsys.argv = ['weaverctl', '--help']\n"
        "sys.exit(entry.weaverctl())"
    )
    assert done.returncode == 0 and "run-now" in done.stdout, done.stderr


def test_the_integrations_need_the_client_and_their_framework_only():
    # pydantic, numpy, litellm and the like come with some frameworks: left importable here.
    frameworks_bring = frozenset(
        {"pydantic", "numpy", "transformers", "tokenizers", "litellm", "rich"}
    )
    done = _without_daemon(
        "import stratad_client.integrations.mcp.server\n"
        "import stratad_client.integrations.openai_agents\n"
        "import stratad_client.integrations.langgraph\n"
        "import stratad_client.integrations.google_adk\n" + SERVER_LOADED,
        keep=frameworks_bring,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_old_names_import_the_new_modules_with_a_warning():
    """``daemon.client``, ``daemon.pb`` and ``daemon.adapters`` until 0.1 (daemon/moved.py)."""
    import stratad_client
    import stratad_client.integrations.langgraph
    import stratad_client.pb.memory_pb2

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from daemon.adapters import langgraph_store  # type: ignore[import-not-found]
        from daemon.client import MemoryClient  # type: ignore[import-not-found]
        from daemon.pb import memory_pb2  # type: ignore[import-not-found]
    assert MemoryClient is stratad_client.MemoryClient
    assert memory_pb2 is stratad_client.pb.memory_pb2
    assert langgraph_store is stratad_client.integrations.langgraph
    told = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert any("daemon.client is deprecated" in m and "stratad_client" in m for m in told)
    assert any("stratad_client.integrations.langgraph" in m for m in told)
    assert stratad_client.__spec__ is not None and stratad_client.__spec__.name == "stratad_client"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import daemon.client.memory  # type: ignore[import-not-found]
    assert daemon.client.memory is stratad_client.memory  # a module, not made a package
    assert not hasattr(stratad_client.memory, "__path__")
    assert stratad_client.memory.__spec__.name == "stratad_client.memory"

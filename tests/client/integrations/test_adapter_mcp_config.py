"""stratad-mcp's configuration: what it refuses, what it reads from the environment, and the
process's exit status on a bad one (the tools against real daemons:
``tests/client/integrations/test_adapter_mcp.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stratad_client.integrations.mcp.server import build_parser, parse_config
from tests.support import ROOT
from tests.support.mcp_sessions import MODULE, env


@pytest.mark.parametrize(
    ("args", "environ", "message"),
    [
        ([], {}, "a user id is required"),
        (["--port", "70000", "--user-id", "a"], {}, "not a TCP port"),
        (["--port", "http", "--user-id", "a"], {}, "not a TCP port"),
        (["--transport", "http", "--host", "0.0.0.0", "--user-id", "a"], {}, "not loopback"),
        (["--forward-token", "--user-id", "a"], {}, "--forward-token needs --transport http"),
        (["--transport", "sse", "--user-id", "a"], {}, "invalid choice"),
        (["--timeout", "0", "--user-id", "a"], {}, "--timeout must be positive"),
    ],
)
def test_a_bad_configuration_is_refused(
    args: list[str], environ: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_config(args, environ)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_configuration_from_the_environment() -> None:
    environ = {"STRATA_MCP_USER_ID": "u", "STRATA_MCP_AGENT_ID": "a", "STRATA_ADDRESS": "h:1"}
    c = parse_config([], environ)
    assert (c.transport, c.user_id, c.agent_id, c.address) == ("stdio", "u", "a", "h:1")
    c = parse_config(["--user-id", "v", "--address", "k:2", "--transport", "http"], environ)
    assert (c.user_id, c.address, c.host, c.port) == ("v", "k:2", "127.0.0.1", 8765)
    assert parse_config(["--transport", "http", "--forward-token", "--host", "0.0.0.0"], {})
    text = build_parser().format_help()
    for flag in ("--transport", "--host", "--port", "--address", "--user-id", "--agent-id"):
        assert flag in text


@pytest.mark.slow
def test_the_process_exits_non_zero_on_a_bad_configuration(tmp_path: Path) -> None:
    def start(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *MODULE, *args], env=env("127.0.0.1:1", **extra), cwd=ROOT,
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    done = start()
    assert done.returncode == 2 and "a user id is required" in done.stderr
    done = start("--user-id", "a", STRATA_TOKEN_FILE=str(tmp_path / "missing"))
    assert done.returncode == 1 and "cannot set up the connection to stratad" in done.stderr
    assert "--forward-token" in start("--help").stdout

"""deploy/: the example config, the systemd unit, the Dockerfile and the compose file name
settings that exist, with values the daemon accepts, and stop timeouts above the grace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from daemon.codec.status import ConfigError
from daemon.settings import Settings, load_settings
from tests.support import ROOT

DEPLOY = ROOT / "deploy"
EXAMPLE = DEPLOY / "strata.example.toml"
# A valid [[auth.tokens]] list, standing in for what the operator provides.
TOKENS = (
    '[{"name": "agents", "sha256": "' + "ab" * 32 + '", "tenants": ["*"], "rights": ["append"]}]'
)


def unit_environment() -> dict[str, str]:
    text = (DEPLOY / "strata.service").read_text()
    return dict(re.findall(r"^Environment=(\w+)=(.*)$", text, re.MULTILINE))


def unit_option(name: str) -> str:
    text = (DEPLOY / "strata.service").read_text()
    match = re.search(rf"^{name}=(.*)$", text, re.MULTILINE)
    assert match, f"the unit sets no {name}"
    return match.group(1).strip()


def dockerfile_environment() -> dict[str, str]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in re.findall(r"^ENV (.*)$", text, re.MULTILINE):
        env.update(re.findall(r"(\w+)=(\S+)", line))
    return env


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def interpolate(value: str, host: dict[str, str]) -> str:
    """Compose's ${NAME:?message} and ${NAME} from the host environment."""
    return re.sub(r"\$\{(\w+)(?::\?[^}]*)?\}", lambda m: host[m.group(1)], value)


def settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    """load_settings with exactly these variables (plus the example file as the config)."""
    for key, value in env.items():
        if key == "STRATA_CONFIG":
            value = str(EXAMPLE)  # the installed path does not exist here
        if key == "STRATA_QDRANT_API_KEY_FILE":
            (tmp_path / "qdrant_api_key").write_text("secret\n")
            value = str(tmp_path / "qdrant_api_key")
        if key == "STRATA_DATA_DIR":
            value = str(tmp_path / "data")
        monkeypatch.setenv(key, value)
    return load_settings()


def test_the_example_config_parses_to_the_defaults():
    assert load_settings(EXAMPLE) == Settings()


def test_the_systemd_unit_names_real_settings_and_outlasts_the_grace(monkeypatch, tmp_path):
    env = unit_environment()
    assert env["STRATA_CONFIG"] == "/etc/strata/strata.toml"
    settings = settings_from(env, monkeypatch, tmp_path)  # raises on an unknown STRATA_*
    assert settings.log_format == "json"
    assert float(unit_option("TimeoutStopSec")) > settings.shutdown_grace_seconds + 10
    assert unit_option("Restart") == "on-failure"
    assert unit_option("User") == "strata" and unit_option("NoNewPrivileges") == "yes"
    assert unit_option("ProtectSystem") == "strict"
    assert "78" in unit_option("RestartPreventExitStatus").split()  # bad config: no loop
    assert env["HF_HUB_OFFLINE"] == "1"


def test_the_image_runs_as_a_user_and_refuses_to_listen_openly_without_tokens(
    monkeypatch, tmp_path
):
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^USER strata$", text, re.MULTILINE)
    assert "download.pytorch.org/whl/cpu torch==2.13.0" in text
    assert "COPY deploy/requirements.lock" in text and "-c requirements.lock" in text
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    assert "!deploy/requirements.lock" in ignore
    env = dockerfile_environment()
    assert env["HF_HUB_OFFLINE"] == "1" and env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    strata = {k: v for k, v in env.items() if k.startswith("STRATA_")}
    assert strata["STRATA_LISTEN"].startswith("0.0.0.0:")
    with pytest.raises(ConfigError, match="authentication is off"):
        settings_from(strata, monkeypatch, tmp_path)
    settings = settings_from(strata | {"STRATA_AUTH__TOKENS": TOKENS}, monkeypatch, tmp_path)
    assert settings.auth.enabled
    assert env["STRATA_DATA_DIR"] in re.search(r"^VOLUME (.*)$", text, re.MULTILINE).group(1)


def test_the_compose_file_wires_qdrant_auth_and_a_long_enough_stop(monkeypatch, tmp_path):
    services = compose()["services"]
    strata = services["strata"]
    host = {"AUTH_TOKENS": TOKENS, "QDRANT_API_KEY": "secret"}
    env = {k: interpolate(str(v), host) for k, v in strata["environment"].items()}
    assert all(k.startswith("STRATA_") for k in env)
    settings = settings_from(
        dockerfile_environment() | env, monkeypatch, tmp_path
    )  # the image's variables, then the compose file's, as in the container
    assert settings.qdrant_url == "http://qdrant:6333"
    assert settings.auth.enabled and settings.metrics.enabled
    assert "qdrant" in strata["depends_on"]
    assert services["qdrant"]["image"].startswith("qdrant/qdrant:")
    grace = re.fullmatch(r"(\d+)s", strata["stop_grace_period"])
    assert grace and int(grace.group(1)) > settings.shutdown_grace_seconds + 10
    assert strata["build"]["dockerfile"] == "deploy/Dockerfile"
    assert (DEPLOY / strata["build"]["context"] / strata["build"]["dockerfile"]).is_file()


def test_the_image_installs_the_daemon_and_its_client_from_the_repository() -> None:
    """The daemon (``.``: stratad) depends on the client (``daemon/client``: stratad-client),
    which no package index holds: the image installs both from its copy of the repository."""
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    installs = re.findall(r"pip install [^&]*--no-build-isolation ([^&]+?)\s*(?:&&|$)", text)
    assert installs == ["./daemon/client ."], installs

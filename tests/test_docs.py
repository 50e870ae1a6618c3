"""Docs that cannot drift: the README quickstart runs, generated docs and stubs are current."""

from __future__ import annotations

import re

import pytest

from daemon.dev import docgen, protogen
from tests.support import ROOT, daemon_env
from tests.support.daemons import python

README = (ROOT / "README.md").read_text()


def test_readme_states_the_two_commands_and_ci_runs_the_test_one():
    quickstart = README.split("## Quickstart", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^make \w+", quickstart, re.MULTILINE)
    assert commands == ["make run", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.MULTILINE)
    makefile = (ROOT / "Makefile").read_text()
    assert "stratad serve" in makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]


@pytest.mark.slow
def test_readme_python_quickstart_runs_against_a_real_daemon(spawn, tmp_path):
    snippets = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
    assert len(snippets) == 2
    proc = spawn(tmp_path / "data")
    out = python(
        "-c",
        "\n".join(snippets),
        # PYTHONPATH: this checkout's code, whatever the environment installed
        env=daemon_env(tmp_path / "unused")
        | {"STRATA_ADDRESS": proc.address, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "'Small, but it has a balcony.'" in out.stdout
    assert "with 3 messages" in out.stdout
    assert "chat-42" in out.stdout
    assert "episode_turn" in out.stdout and "Berlin" in out.stdout
    assert "'source': 'readme'" in out.stdout  # the client's metadata came back
    proc.terminate()


def test_generated_stubs_have_not_drifted():
    assert protogen.drift() == []


def test_the_clients_kinds_are_written_from_the_daemons_one_list(monkeypatch):
    """A kind added to Tier 3's list is in the client's once protogen runs, and until then
    ``--check`` names the client's file."""
    from tiers.semantic import vectors

    monkeypatch.setattr(vectors, "KINDS", (*vectors.KINDS, "bookmark"))
    text = protogen.kinds_module()
    assert '    "thread",\n    "bookmark",\n]' in text
    namespace: dict[str, object] = {}
    exec(compile(text, "kinds.py", "exec"), namespace)
    assert namespace["MEMORY_KINDS"] == vectors.KINDS
    assert protogen.drift() == ["kinds.py"]


def test_cli_reference_and_settings_table_match_the_code():
    assert docgen.main(["--check"]) == 0, "run: python -m daemon.dev.docgen"


def test_example_config_names_every_setting_with_its_default(tmp_path):
    from daemon.settings import Settings, load_settings

    example = (ROOT / "deploy" / "strata.example.toml").read_text()
    uncommented = re.sub(r"^# (\w+ = )", r"\1", example, flags=re.MULTILINE)
    (tmp_path / "strata.toml").write_text(uncommented)
    assert load_settings(tmp_path / "strata.toml") == Settings()
    assert uncommented.count(" = ") + uncommented.count(": unset by default") >= len(
        docgen._rows(Settings)
    )

"""The snippets of docs/integrations.md (and the snippets of docs/api.md) run, as written,
against a real daemon (a ``stratad`` subprocess), with a loopback server speaking the OpenAI
API where a snippet calls a model."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from stratad_client import MemoryClient
from tests.support import ROOT, ProcessDaemon, daemon_env, wait_until
from tests.support.daemons import python
from tests.support.llm_server import FakeOpenAI

pytestmark = pytest.mark.slow
DOC = (ROOT / "docs" / "integrations.md").read_text()
API_DOC = (ROOT / "docs" / "api.md").read_text()


def snippet(heading: str, doc: str = DOC, level: str = "##") -> str:
    """The python snippet of the section whose heading starts with ``heading``."""
    section = doc.split(f"\n{level} {heading}", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    return code


@pytest.fixture
def stratad(spawn, tmp_path: Path) -> ProcessDaemon:
    proc = spawn(tmp_path / "data")
    with MemoryClient(proc.address) as c:
        wait_until(lambda: c.health() == "SERVING", what="for the model to load")
    return proc


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def run(code: str, proc: ProcessDaemon, tmp_path: Path, fake: FakeOpenAI) -> str:
    env = daemon_env(tmp_path / "unused") | {
        "STRATA_ADDRESS": proc.address,
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_BASE": fake.base_url,
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": str(ROOT),  # this checkout's code, whatever the environment installed
    }
    out = python("-c", code, env=env, cwd=tmp_path, timeout=90)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


def test_the_openai_agents_snippet_runs(stratad, model, tmp_path):
    model.reply_text("Noted: Lisbon.")
    out = run(snippet("OpenAI Agents SDK"), stratad, tmp_path, model)
    assert "Noted: Lisbon." in out
    assert "'content': 'I just moved to Lisbon.'" in out
    with MemoryClient(stratad.address) as c:
        window = c.get_working_memory("conversation-7", user_id="alice").messages
    # pop_item took the assistant's answer out of the daemon too
    assert [m.message.content for m in window] == ["I just moved to Lisbon."]


def test_the_google_adk_snippet_runs(stratad, model, tmp_path):
    model.reply_text("Noted, you live in Lisbon now.")
    out = run(snippet("Google ADK"), stratad, tmp_path, model)
    assert "Noted, you live in Lisbon now." in out
    assert "I moved to Lisbon in May." in out.split("Noted, you live in Lisbon now.", 1)[1]
    with MemoryClient(stratad.address) as c:
        (episode,) = c.list_episodes(user_id="alice").episodes
    assert episode.scope.agent_id == "travel" and episode.message_count == 2


def test_the_langgraph_snippet_runs(stratad, model, tmp_path):
    out = run(snippet("LangGraph"), stratad, tmp_path, model)
    lines = out.splitlines()
    assert lines[0] == "{'text': 'I moved to Lisbon in May.'}"
    assert lines[1].startswith("('alice', 'facts') home {'text': 'I moved to Lisbon in May.'}")
    assert lines[-1] == "[('alice', 'facts')]"


def test_the_agent_loop_of_the_api_doc_runs(stratad, model, tmp_path):
    model.reply_text("Your sister Ana lives in Porto, near the river.")
    out = run(snippet("An agent loop", API_DOC, "###"), stratad, tmp_path, model)
    (request,) = model.requests  # one turn: one model call
    system, user = request["messages"]
    assert user == {"role": "user", "content": "Where does my sister live?"}
    block = system["content"].split("\n\n", 1)[1]
    assert block.startswith("Session anchor (updated ")
    assert "Task: plan Alice's move to Porto. Next: find a flat." in block
    assert "\n\nFrom memory:\n[conversation · " in block
    assert "Alice: My sister Ana lives in Porto, near the river." in block
    assert block.endswith("Alice: Where does my sister live?")
    printed = out.splitlines()
    assert printed[0] == "Your sister Ana lives in Porto, near the river."
    assert printed[-1].endswith("] Assistant: Your sister Ana lives in Porto, near the river.")
    with MemoryClient(stratad.address) as c:
        window = c.get_working_memory("move-planning", user_id="alice").messages
    assert [m.message.content for m in window] == [
        "Where does my sister live?",
        "Your sister Ana lives in Porto, near the river.",
    ]


def test_the_watch_snippet_runs_and_resumes(stratad, model, tmp_path):
    code = snippet("Watch: what changes", API_DOC)
    said = ["session.started 0", "session.appended 1", "session.ended 1"]
    assert run(code, stratad, tmp_path, model).splitlines() == said
    first = int((tmp_path / "alice.cursor").read_text())
    # again: it resumes after the change it handled last, so the first standup is not
    # replayed (the weaver may have indexed it meanwhile)
    again = run(code, stratad, tmp_path, model).splitlines()
    assert [line for line in again if not line.startswith("episode.indexed")] == said
    assert int((tmp_path / "alice.cursor").read_text()) > first


def test_the_story_snippet_resumes_a_project(stratad, model, tmp_path):
    model.reply_text("The cabinets now arrive on 2 April.")
    out = run(snippet("Resuming a long project", API_DOC, "###"), stratad, tmp_path, model)
    assert out.splitlines() == ["The cabinets now arrive on 2 April."]
    (request,) = model.requests  # the weaver's extractor is local: one call, the agent's
    system = request["messages"][0]["content"]
    context, details = system.split("\n\n", 1)[1].split("\n\n", 1)
    assert context.startswith(
        "From memory:\n[digest · 2026-03-18] The story so far (2 Mar 2026 to 18 Mar 2026; "
        "Bea; 3 conversations). Week of 2026-03-02: "
    )
    assert "Week of 2026-03-16: Bea: The cabinets arrive late, on 2 April." in context
    assert details.startswith("[fact · 2026-03-18 · Bea] The cabinets arrive late, on 2 April.")
    assert "\n[digest" not in details and "\n[thread" not in details  # the thread's episodes

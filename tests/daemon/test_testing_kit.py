"""The testing kit (:mod:`daemon.testing`): the snippet of docs/api.md runs as written, and the
asyncio kit serves on the caller's loop; both remove their temporary data directory."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from daemon.testing import async_local_daemon, local_daemon
from tests.support import ROOT
from tests.support.settings import MODEL_CACHE, QUIET

pytestmark = pytest.mark.daemon


def _snippet() -> str:
    section = (ROOT / "docs" / "api.md").read_text().split("## Testing an agent", 1)[1]
    return re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)[0]


def test_the_docs_snippet_runs(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("STRATA_EMBEDDING__CACHE_DIR", str(MODEL_CACHE))  # the shared export
    namespace: dict[str, object] = {}
    exec(compile(_snippet(), "docs/api.md", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_") and callable(f)]
    assert len(tests) == 1
    tests[0]()


def test_the_data_dir_is_temporary_unless_given_and_settings_apply(tmp_path: Path):
    with local_daemon(weaver=QUIET, embedding={"cache_dir": MODEL_CACHE}) as strata:
        made = strata.settings.data_dir
        assert made.exists() and strata.settings.weaver.interval_seconds == 3600
        with strata.client() as memory, strata.admin() as admin:
            memory.append("s", "Hello.", user_id="alice")
            assert admin.stats().working_memory.live_sessions == 1
    assert not made.exists()
    kit = {"weaver": QUIET, "embedding": {"cache_dir": MODEL_CACHE}}
    with local_daemon(data_dir=tmp_path / "kept", **kit) as strata:
        assert strata.address.startswith("127.0.0.1:")
    assert (tmp_path / "kept").is_dir()


def test_the_async_kit_serves_on_the_running_loop():
    async def run() -> list[str]:
        async with async_local_daemon(weaver=QUIET, embedding={"cache_dir": MODEL_CACHE}) as d:
            async with d.client() as memory:
                await memory.append("s", "Hi there.", user_id="alice")
                window = await memory.get_working_memory("s", user_id="alice")
            async with d.admin() as admin:
                assert (await admin.stats()).working_memory.live_sessions == 1
            return [m.message.content for m in window.messages]

    assert asyncio.run(run()) == ["Hi there."]

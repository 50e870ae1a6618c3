"""``stratad`` with the onnx-int8 back-end on a fresh data dir, and a model that cannot load."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from daemon.server.grpc_server import REASON_KEY
from stratad_client import message
from tests.support import QUIET_ENV, wait_until, weaverctl

pytestmark = pytest.mark.slow


# Three daemons, the model's export and its quantization: 53 s alone, over the suite's 120 s
# beside a second suite on two cores (2026-11-30).
@pytest.mark.timeout(300)
def test_stratad_with_onnx_int8_on_a_fresh_data_dir_recalls(spawn, tmp_path):
    models = tmp_path / "models"  # not the tests' shared cache: the export is made here
    proc = spawn(
        tmp_path / "data",
        **QUIET_ENV,
        embedding__backend="onnx-int8",
        embedding__cache_dir=str(models),
    )
    with proc.client(timeout=30) as c:
        c.append_batch(
            "trip",
            [
                message("I adopted a beagle called Biscuit last spring.", name="Alice"),
                message("Lovely! Does Biscuit like the park?", role="assistant"),
            ],
            user_id="alice",
        )
        c.end_session("trip")
        wait_until(lambda: c.health() == "SERVING" and c.admin.weaver_status().unindexed == 0)
        status = c.admin.weaver_status()
        assert status.embedding_ready and status.tier3_error == ""
        assert "(onnx-int8)" in status.embedding_model
        hits = c.recall("What is the name of Alice's dog?", user_id="alice", k=3).hits
        assert hits and "Biscuit" in hits[0].text
        # The export ran in a child process: the daemon never loaded torch, which it would
        # keep for good (some 400 MB).
        assert "libtorch" not in Path(f"/proc/{proc.pid}/maps").read_text()
    assert list(models.glob("*/onnx/model_int8_*.onnx"))
    assert proc.terminate() == 0

    # Switching the back-end on this data dir (to the default, onnx) is refused, in one line
    # that says what to do; appends are still served, and nothing is lost.
    proc = spawn(tmp_path / "data", **QUIET_ENV)
    with proc.client(timeout=30) as c:
        wait_until(lambda: c.admin.weaver_status().tier3_error != "")
        reason = c.admin.weaver_status().tier3_error
        assert "\n" not in reason
        assert "@onnx-int8" in reason and "weaverctl rebuild" in reason
        assert c.health() == "NOT_SERVING"
        c.append("later", "Biscuit learned to sit.", user_id="alice")
    assert proc.terminate() == 0

    # Doing what it says: the vectors moved aside, a rebuild from the journal.
    # The rebuild runs on torch, so each of the three back-ends runs a daemon in this test.
    (tmp_path / "data" / "vectors").rename(tmp_path / "vectors.int8")
    proc = spawn(tmp_path / "data", **QUIET_ENV, embedding__backend="torch")
    with proc.client(timeout=30) as c:
        wait_until(lambda: c.health() == "SERVING")
        assert weaverctl(proc.address, "rebuild").returncode == 0
        hits = c.recall("What is the name of Alice's dog?", user_id="alice", k=3).hits
        assert hits and "Biscuit" in hits[0].text
    assert proc.terminate() == 0


def test_a_model_that_cannot_load_is_explained_in_one_line(spawn, tmp_path):
    proc = spawn(tmp_path / "data", **QUIET_ENV, embedding__model=str(tmp_path / "no-such-model"))
    with proc.client() as c:
        wait_until(lambda: c.admin.weaver_status().tier3_error != "")
        reason = c.admin.weaver_status().tier3_error
        assert "no-such-model" in reason and "\n" not in reason
        assert c.append("s", "appends are still served", user_id="u").seq == 1
    status = weaverctl(proc.address, "status")
    [line] = [x for x in status.stdout.splitlines() if x.startswith("embedding")]
    assert f"(failed: {reason})" in line
    assert json.loads(weaverctl(proc.address, "--json", "status").stdout)["tier3Error"] == reason
    with grpc.insecure_channel(proc.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        response, call = stub.Check.with_call(health_pb2.HealthCheckRequest(service=""))
        assert response.status == health_pb2.HealthCheckResponse.NOT_SERVING
        assert dict(call.trailing_metadata())[REASON_KEY] == reason
    assert proc.terminate() == 0
    logged = [line for line in proc.log().splitlines() if "tier3.unavailable" in line]
    assert logged and reason in logged[0]

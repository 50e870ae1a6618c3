"""``weaverctl export`` and ``weaverctl import``: the client side of AdminService.Export and
AdminService.Import.

Export writes ``DIR/memory.jsonl`` (first as ``memory.jsonl.partial``, renamed once the
daemon's last message says the export is complete, so a file named ``memory.jsonl`` is never
a partial one) and renders the Markdown tree beside it (:mod:`weaver.markdown_tree`). Import
reads ``DIR/memory.jsonl``, or the file given, and streams it. Both print progress to stderr
(every few thousand records, or every few MB sent) and return the summary for stdout.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from stratad_client import AdminClient
from stratad_client.pb import admin_pb2

FILE_NAME = "memory.jsonl"
READ_BYTES = 1024 * 1024
PROGRESS_BYTES = 8 * 1024 * 1024  # import: a progress line every this many bytes sent


class TransferError(Exception):
    """A local problem (a directory that holds an export already, a missing file)."""


def _records(counts: admin_pb2.TransferCounts) -> str:
    items = sorted((k, v) for k, v in counts.records.items() if ":" not in k)
    return ", ".join(f"{v} {k}" for k, v in items) or "nothing"


def export_to(
    client: AdminClient,
    user_id: str,
    agent_id: str,
    directory: Path,
    timeout: float | None,
    err: TextIO | None = None,
) -> dict[str, Any]:
    """Export ``user_id`` (or its agent) into ``directory``; returns the summary. Progress
    goes to ``err`` (default: stderr)."""
    # Imported here, before the daemon is asked: it brings the archive's format and the fact
    # graph (0.3 s, and the daemon's dependencies), which no other weaverctl command needs.
    from weaver.markdown_tree import write_tree

    err = err or sys.stderr
    target = directory / FILE_NAME
    if target.exists():
        raise TransferError(f"{target} exists already: choose another directory")
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / (FILE_NAME + ".partial")
    began = time.monotonic()
    final: admin_pb2.ExportChunk | None = None
    with partial.open("wb") as out:
        for chunk in client.export(user_id, agent_id=agent_id, timeout=timeout):
            out.write(chunk.data)
            if chunk.done:
                final = chunk
            elif chunk.HasField("progress"):
                print(f"export: {_records(chunk.progress)} so far", file=err, flush=True)
    if final is None:
        raise TransferError(f"the export ended early; {partial} is incomplete")
    partial.replace(target)
    print(f"export: written {target}; rendering the Markdown tree", file=err, flush=True)
    tree = write_tree(target, directory)
    return {
        "file": str(target),
        "bytes": final.progress.bytes,
        "records": dict(final.progress.records),
        "markdown_files": tree.files,
        "index": str(directory / "index.md"),
        "seconds": round(time.monotonic() - began, 3),
    }


def render_export(d: dict[str, Any]) -> str:
    counts = ", ".join(f"{v} {k}" for k, v in sorted(d["records"].items()) if ":" not in k)
    return (
        f"exported {counts} ({d['bytes']} bytes) to {d['file']} in {d['seconds']:.1f} s\n"
        f"readable: {d['index']} ({d['markdown_files']} Markdown files)"
    )


def import_from(
    client: AdminClient,
    path: Path,
    user_id: str,
    timeout: float | None,
    err: TextIO | None = None,
) -> admin_pb2.ImportResponse:
    """Stream ``path`` (an export file, or a directory holding ``memory.jsonl``); progress
    goes to ``err`` (default: stderr)."""
    out = err or sys.stderr
    source = path / FILE_NAME if path.is_dir() else path
    if not source.is_file():
        raise TransferError(f"{source} is not a file (give an export directory or its file)")
    size = source.stat().st_size

    def blocks() -> Iterator[bytes]:
        sent = reported = 0
        with source.open("rb") as f:
            while block := f.read(READ_BYTES):
                yield block
                sent += len(block)
                if sent - reported >= PROGRESS_BYTES or sent == size:
                    reported = sent
                    print(f"import: sent {sent} of {size} bytes", file=out, flush=True)
        print("import: the daemon is writing (points are embedded again)", file=out, flush=True)

    return client.import_(blocks(), user_id=user_id, timeout=timeout)


def render_import(d: dict[str, Any]) -> str:
    def counts(key: str) -> str:
        records = d.get(key, {}).get("records", {})
        return ", ".join(f"{v} {k}" for k, v in sorted(records.items()) if ":" not in k)

    line = (
        f"imported into user {d.get('userId', '')}: {counts('written') or 'nothing'} "
        f"(read {counts('read')}; {d.get('read', {}).get('bytes', '0')} bytes) in "
        f"{float(d.get('seconds', 0)):.1f} s; points embedded with {d.get('model', '')} "
        f"(exported with {d.get('sourceModel', '')})"
    )
    skipped = [
        f"{d[k]} {what}"
        for k, what in (
            ("skippedForgotten", "forgotten here"),
            ("skippedExpired", "episodes past this daemon's journal TTL"),
            ("sessionsSkipped", "open sessions that ended here already"),
        )
        if int(d.get(k, 0))
    ]
    return line + (f"\nskipped: {', '.join(skipped)}" if skipped else "")

"""The vector store's process: ``python -m tiers.semantic.vectors.child.main``, started and
supervised by :class:`tiers.semantic.vectors.child.ChildVectorStore`.

It opens the store its spec names (:data:`STORES`) and answers the seam's calls, each on a
thread of its own, until its input ends; then it closes the store and exits. Frames
(:mod:`tiers.core.wire`, their contents by :mod:`tiers.semantic.vectors.child.codec`) come
on stdin and go out on what was stdout; anything else the process prints goes to stderr. It
ignores SIGINT and SIGTERM (the daemon closes it after its staged shutdown) and dies with the
daemon's thread that started it (``PR_SET_PDEATHSIG``), so that a daemon started again after
a crash finds the shards' locks free.

Spec (the first frame): ``{"store": a name of STORES, "args": [...], "kwargs": {...}}``. It
answers ``{"id": 0, "ready": true, "pid"}`` or ``{"id": 0, "error": {...}}`` and exits.
Calls: ``{"id", "op": a method of OPS, "args", "kwargs"}`` -> ``{"id", "result"}`` or
``{"id", "error": {"type", "message"}}``. ``interrupt`` is answered at once, beside the calls
under way (its point is to stop them); every other call runs on a thread of its own.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from tiers.core.wire import WireClosed, as_child, receive, send
from tiers.semantic.vectors.child.codec import decode, encode, encode_error
from tiers.semantic.vectors.shards.store import ShardedVectorStore

# What a spec may open, by name: a frame is data, never code.
STORES: dict[str, type[Any]] = {"sharded": ShardedVectorStore}
# The calls a parent may make: the seam's methods, and a backup's copy of the files.
OPS = frozenset(
    {
        "ensure", "upsert", "search_dense", "search_sparse", "weigh", "get", "dense",
        "scroll", "ids", "episode_ids", "set_valid_to", "delete", "count", "optimize",
        "purge", "flush", "interrupt", "close", "copy_to",
    }
)  # fmt: skip
# Calls under way at once, at most: more than the daemon's threads that call the store.
THREADS = 64


def serve(inp: IO[bytes], out: IO[bytes]) -> int:
    spec = receive(inp)
    sending = threading.Lock()

    def reply(message: dict[str, Any]) -> None:
        with sending:
            send(out, message)

    try:
        store = STORES[spec["store"]](*decode(spec["args"]), **decode(spec["kwargs"]))
    except Exception as exc:
        reply({"id": 0, "error": encode_error(exc)})
        return 1
    reply({"id": 0, "ready": True, "pid": os.getpid()})

    def run(call: dict[str, Any]) -> None:
        try:
            method = getattr(store, call["op"])
            result = method(*decode(call["args"]), **decode(call["kwargs"]))
            message = {"id": call["id"], "result": encode(result)}
        except Exception as exc:
            message = {"id": call["id"], "error": encode_error(exc)}
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, ValueError):
            reply(message)  # fails only when the daemon is gone: the input's end follows

    with ThreadPoolExecutor(THREADS, thread_name_prefix="vectors-call") as calls:
        while True:
            try:
                call = receive(inp)
            except WireClosed:
                break
            if call.get("op") not in OPS:
                reply({"id": call.get("id"), "error": encode_error(ValueError(
                    f"the vector store has no call {call.get('op')!r}"))})  # fmt: skip
            elif call["op"] == "interrupt":
                run(call)
            else:
                calls.submit(run, call)
    store.close()  # the calls under way done; idempotent after the daemon's close
    return 0


def main() -> int:
    out = as_child(die_with_thread=True)
    try:
        return serve(sys.stdin.buffer, out)
    except (WireClosed, BrokenPipeError):
        return 0


if __name__ == "__main__":
    sys.exit(main())

"""The vector store's process: ``python -m tiers.semantic.vectors.child.main``, started and
supervised by :class:`tiers.semantic.vectors.child.ChildVectorStore`.

It opens the store its spec names (:data:`STORES`), listens on a local socket (Linux's
abstract namespace, no file) and answers the seam's calls on each connection, one at a time,
a thread a connection, until its input ends; then it closes the store (as the daemon would in
its own process: beside the calls under way, which the close ends), gives those calls
:data:`STOP_SECONDS` to end, and exits. Frames are :mod:`tiers.core.wire`'s, their contents
:mod:`tiers.semantic.vectors.child.codec`'s; anything the process prints goes to stderr. It
ignores SIGINT and SIGTERM (the daemon closes it after its staged shutdown) and dies with the
daemon's thread that started it (``PR_SET_PDEATHSIG``), so that a daemon started again after
a crash finds the shards' locks free. Its interpreter is set as stratad's
(:mod:`tiers.core.priority`'s switch interval, :mod:`tiers.core.collector`'s thresholds), and
what the open keeps is frozen out of the full collections' walks.

On its input, the spec: ``{"store": a name of STORES, "args": [...], "kwargs": {...},
"token", "log_level"}`` (its records go to the daemon's log:
:func:`tiers.core.wire.log_to_parent`); on its output the answer, ``{"ready": true, "pid",
"address"}`` or ``{"error": {...}}`` (then it exits). A connection's first frame is ``{"token",
"nice"}`` (another token is closed): its thread runs ``nice`` steps below the main thread, at
its callers' priority.
Then calls ``{"op": a method of OPS, "args", "kwargs", "rest"?, "background"?}`` ->
``{"result"}`` or ``{"error": {"type", "message"}}``, each within its caller's rest share
(:func:`tiers.core.priority.resting`), and as the daemon's own work when the caller's was
(:func:`tiers.core.priority.background`: the point cache does not count its reads); or
``{"op": "point_counts"}`` -> the point cache's counts (:class:`CacheCounts`' fields).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import sys
import threading
from typing import IO, Any

from tiers.core import collector
from tiers.core.priority import background, hand_over_sooner, lower_this_thread, resting
from tiers.core.wire import WireClosed, log_to_parent, receive, run_child, send
from tiers.semantic.vectors.child.codec import POINT_COUNTS, decode, encode, encode_error
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
# How long the calls under way may take to end after the store's close (the process exits).
STOP_SECONDS = 30.0
# Connections waiting to be accepted, at most.
THREADS = 64


def serve(inp: IO[bytes], out: IO[bytes]) -> int:
    hand_over_sooner()  # as stratad's: a call waits less for a long job's thread
    collector.tune()  # as stratad's: young collections rarer
    spec = receive(inp)
    log_to_parent(int(spec.get("log_level", logging.WARNING)))  # the daemon logs what it logs
    try:
        store = STORES[spec["store"]](*decode(spec["args"]), **decode(spec["kwargs"]))
    except Exception as exc:
        send(out, {"error": encode_error(exc)})
        return 1
    collector.freeze()  # what the open keeps, out of full collections' walks
    address = f"strata-vectors-{os.getpid()}-{secrets.token_hex(8)}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + address)
    listener.listen(THREADS)
    calls = _Calls()
    threading.Thread(
        target=_accept, args=(listener, store, str(spec["token"]), calls), daemon=True
    ).start()
    send(out, {"ready": True, "pid": os.getpid(), "address": address})
    with contextlib.suppress(WireClosed):
        receive(inp)  # nothing more comes: its end is the stop
    calls.stop()  # none begins after
    store.close()  # as in the daemon's process: beside the calls under way, which it ends
    calls.wait(STOP_SECONDS)
    return 0


class _Calls:
    """The calls under way; once stopped, none begins."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0
        self._stopped = False

    def begin(self) -> bool:
        with self._cond:
            if self._stopped:
                return False
            self._running += 1
            return True

    def end(self) -> None:
        with self._cond:
            self._running -= 1
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True

    def wait(self, timeout: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: not self._running, timeout)


def _accept(listener: socket.socket, store: Any, token: str, calls: _Calls) -> None:
    while True:
        conn, _ = listener.accept()
        threading.Thread(
            target=_connection, args=(conn, store, token, calls), name="vectors-call", daemon=True
        ).start()


def _connection(conn: socket.socket, store: Any, token: str, calls: _Calls) -> None:
    """Answer the calls of one connection, one at a time, until it closes."""
    with conn, conn.makefile("rwb") as stream:
        try:
            first = receive(stream)
            if first.get("token") != token:
                return
            lower_this_thread(int(first.get("nice", 0)))
            while True:
                call = receive(stream)
                if not calls.begin():
                    return  # stopping: the connection closes unanswered
                try:
                    send(stream, _answer(store, call))
                finally:
                    calls.end()
        except (OSError, ValueError, WireClosed):
            return  # the daemon closed it, or is gone


def _answer(store: Any, call: dict[str, Any]) -> dict[str, Any]:
    op = call.get("op")
    try:
        if op == POINT_COUNTS:
            return {"result": list(store.points.counts())}
        if op not in OPS:
            raise ValueError(f"the vector store has no call {op!r}")
        mine = background() if call.get("background") else contextlib.nullcontext()
        with resting(float(call.get("rest", 0.0))), mine:
            result = getattr(store, str(op))(*decode(call["args"]), **decode(call["kwargs"]))
        return {"result": encode(result)}
    except Exception as exc:
        return {"error": encode_error(exc)}


if __name__ == "__main__":
    sys.exit(run_child(serve, die_with_thread=True))

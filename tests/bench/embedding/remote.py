"""The remote embedding path with several requests in flight (``embedding.max_in_flight``).

Run as ``python -m tests.bench.embedding.remote``. Texts go through the daemon's remote
embedder (:class:`tiers.semantic.embedding.remote.LiteLLMEmbedder` over
:class:`tiers.core.models.ModelClient`: litellm, real HTTP) to the tests' loopback
OpenAI-compatible server (``tests/support/llm_server.py``, in a process of its own), which answers
each request after a fixed delay (50 ms by default: a remote GPU server's turnaround, the
model's compute and the network together) with 384-dimension vectors. The texts are LoCoMo
turns from the shared data, ``batch_size`` of them per request. For each ``max_in_flight``:
the throughput (texts/s, the median of the rounds, and the slowest), the most requests the
server held at once (its own count), and the bound the delay alone sets (texts /
(ceil(batches / max_in_flight) x delay)). The client's own cost per request (litellm, the
JSON of 384 floats per text) is what separates a figure from its bound.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time
from multiprocessing.connection import Connection
from typing import Any

from tests.bench.locomo.data import load, turn_texts
from tests.bench.support.daemon import command_line, format_machine, machine_info, write_json
from tests.support.llm_server import FakeOpenAI
from tiers.core.models import ModelClient
from tiers.semantic.embedding.remote import LiteLLMEmbedder

DIM = 384
IN_FLIGHT = (1, 2, 4, 8)


def _vectors(texts: list[str]) -> list[list[float]]:
    return [[float(len(t) % 7 + 1)] + [0.5] * (DIM - 1) for t in texts]


def _serve(delay_s: float, conn: Connection) -> None:
    """The child: the loopback endpoint, answering each request after ``delay_s``; it sends
    its URL, then answers "peak" (the most requests it held at once since the last ask) until
    "stop"."""

    def embed(texts: list[str]) -> list[list[float]]:
        time.sleep(delay_s)  # the modelled server's turnaround, not a synchronization
        return _vectors(texts)

    with FakeOpenAI(embed=embed) as server:
        conn.send(server.base_url)
        while conn.recv() == "peak":
            conn.send(server.peak)
            server.peak = 0


class SlowServer:
    """The endpoint in a process of its own: its JSON and HTTP work is not the client's."""

    def __init__(self, delay_s: float) -> None:
        self._conn, child = mp.get_context("spawn").Pipe()
        self._proc = mp.get_context("spawn").Process(target=_serve, args=(delay_s, child))
        self._proc.start()
        self.base_url: str = self._conn.recv()

    def peak(self) -> int:
        self._conn.send("peak")
        return int(self._conn.recv())

    def __enter__(self) -> SlowServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._conn.send("stop")
        self._proc.join(30)


def measure(
    server: SlowServer, texts: list[str], batch_size: int, in_flight: int, rounds: int
) -> dict[str, Any]:
    client = ModelClient(
        model="openai/bench",
        api_base=server.base_url,
        batch_size=batch_size,
        max_in_flight=in_flight,
        max_retries=0,
        timeout_seconds=60.0,
    )
    try:
        embedder = LiteLLMEmbedder(client, dim=DIM)
        embedder.encode_documents(texts[: batch_size * in_flight])  # warm: imports, the pool
        rates = []
        server.peak()  # from now on
        for _ in range(rounds):
            began = time.perf_counter()
            rows = embedder.encode_documents(texts)
            rates.append(len(texts) / (time.perf_counter() - began))
            assert rows.shape == (len(texts), DIM)
        return {
            "batch_size": batch_size,
            "max_in_flight": in_flight,
            "texts_per_s": round(statistics.median(rates), 1),
            "texts_per_s_min": round(min(rates), 1),
            "server_peak_in_flight": server.peak(),
        }
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.embedding.remote", __doc__)
    parser.add_argument("--texts", type=int, default=1024, help="texts per round")
    parser.add_argument("--batch-sizes", default="64,16", help="texts per request")
    parser.add_argument("--delay-ms", type=float, default=50.0, help="the server's turnaround")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    machine = machine_info()
    turns = turn_texts(s for _, s in load().conversation_sessions())
    texts = (turns * (1 + args.texts // len(turns)))[: args.texts]
    delay = args.delay_ms / 1000.0
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    results = []
    with SlowServer(0.0) as server:  # the client's own ceiling: a server that answers at once
        ceiling = {b: measure(server, texts, b, 1, args.rounds)["texts_per_s"] for b in sizes}
    with SlowServer(delay) as server:
        for batch_size in sizes:
            batches = -(-len(texts) // batch_size)
            for in_flight in IN_FLIGHT:
                r = measure(server, texts, batch_size, in_flight, args.rounds)
                best_s = -(-batches // in_flight) * delay
                r["delay_bound_texts_per_s"] = round(len(texts) / best_s, 1)
                r["client_ceiling_texts_per_s"] = ceiling[batch_size]
                results.append(r)
    print()
    print(
        f"Remote embeddings: {len(texts)} LoCoMo turns through LiteLLMEmbedder to a loopback "
        f"server answering each request after {args.delay_ms:g} ms ({DIM} dims)"
    )
    print(format_machine(machine))
    for b in sizes:
        print(f"  the client alone, one request at a time, batch {b}: {ceiling[b]} texts/s")
    print(
        f"  {'batch':>5} {'in flight':>9} {'texts/s':>8} {'(min)':>8} {'server peak':>11} "
        f"{'delay bound':>11} {'x of 1':>6}"
    )
    base: dict[int, float] = {}
    for r in results:
        base.setdefault(r["batch_size"], r["texts_per_s"])
        speedup = r["texts_per_s"] / base[r["batch_size"]]
        print(
            f"  {r['batch_size']:>5} {r['max_in_flight']:>9} {r['texts_per_s']:>8} "
            f"{r['texts_per_s_min']:>8} {r['server_peak_in_flight']:>11} "
            f"{r['delay_bound_texts_per_s']:>11} {speedup:>6.2f}"
        )
    write_json(args.json, {"machine": machine, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

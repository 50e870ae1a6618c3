"""Tenant isolation: two tenants who say the very same things never see each other's data."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from daemon.server.auth import token_hash
from stratad_client import MemoryClient, StrataClientError, message
from tests.support import QUIET, wait_until

TENANTS = ("alice", "bob")
TOKENS = {"alice": "tok-iso-alice", "bob": "tok-iso-bob", "ops": "tok-iso-ops"}
SCRIPT = [
    ["Alice lives in Paris.", "Alice works at Google as an engineer.", "Alice likes jazz."],
    ["Bob moved to Berlin last spring.", "Bob is married to Carol.", "Carol plays tennis."],
    ["Alice bought a red bicycle.", "The bicycle was stolen in Paris.", "Alice felt sad."],
    ["Dave works at Acme.", "Dave lives in Rome.", "Alice visited Dave in Rome."],
]
QUERIES = [
    "Where does Alice live?",
    "Alice Paris",
    "Who is Bob married to?",
    "Where does Dave work?",
    "bicycle stolen",
    "What does Alice like?",
    "Carol tennis",
    "Rome",
    "Berlin spring",
    "Google engineer",
    "Who felt sad?",
    "red bicycle",
    "Acme",
    "jazz music",
    "What happened last spring?",
]
KINDS: list[tuple[str, ...]] = [
    (),
    ("episode_chunk",),
    ("summary",),
    ("fact",),
    ("fact", "summary"),
]
CHANNELS: list[tuple[str, ...]] = [(), ("graph",), ("keyword",), ("vector",), ("graph", "keyword")]


def _token(name: str, tenants: list[str], rights: list[str]) -> dict[str, Any]:
    return {"name": name, "sha256": token_hash(TOKENS[name]), "tenants": tenants, "rights": rights}


def _not_found(call: Callable[[], Any]) -> None:
    with pytest.raises(StrataClientError) as err:
        call()
    assert err.value.code == grpc.StatusCode.NOT_FOUND, err.value.message


def test_two_tenants_with_the_same_conversations_never_cross(start_daemon):
    daemon = start_daemon(
        auth={
            "tokens": [
                _token("alice", ["alice"], ["append", "recall"]),
                _token("bob", ["bob"], ["append", "recall"]),
                _token("ops", ["*"], ["admin"]),
            ]
        },
        weaver=QUIET,
        recall={"cache_ttl_seconds": 60},  # the cache must be per tenant too
    )
    clients = {t: MemoryClient(daemon.address, token=TOKENS[t], timeout=60) for t in TOKENS}
    sessions: dict[str, set[str]] = {t: set() for t in TENANTS}
    episodes: dict[str, set[str]] = {t: set() for t in TENANTS}
    open_session = {}
    live: dict[str, set[str]] = {t: set() for t in TENANTS}  # the open sessions' episode ids
    for tenant in TENANTS:
        c = clients[tenant]
        for i, turns in enumerate(SCRIPT):
            sid = f"{tenant}-chat-{i}"
            c.append_batch(sid, [message(t, name=t.split()[0]) for t in turns])  # no user_id
            sessions[tenant].add(sid)
            episodes[tenant].add(c.end_session(sid).episode_id)
        open_session[tenant] = f"{tenant}-open"
        c.append(open_session[tenant], "Alice lives in Paris, still.", name="Alice")
        sessions[tenant].add(open_session[tenant])

    ops = clients["ops"]
    wait_until(lambda: ops.admin.weaver_status().embedding_ready, 120, "for the model")
    report = list(ops.admin.run_weaver())[-1].report
    assert report.ok and report.episodes == 2 * len(SCRIPT) and report.facts > 0

    requests = 0
    hits_by: dict[str, dict[str, str]] = {t: {} for t in TENANTS}  # hit id -> kind
    graph_hits = dict.fromkeys(TENANTS, 0)

    def own(tenant: str, episode_id: str, session_ids: list[str]) -> None:
        if session_ids and set(session_ids) == {open_session[tenant]}:
            live[tenant].add(episode_id)  # its live session's, indexed as it goes
        assert episode_id in episodes[tenant] | live[tenant]
        assert set(session_ids) <= sessions[tenant]

    combos = itertools.product(QUERIES, KINDS, CHANNELS)
    for n, (query, kinds, channels) in enumerate(combos):
        for tenant in TENANTS:
            c = clients[tenant]
            user = tenant if n % 2 else ""  # named, or taken from the token
            response = c.recall(query, user_id=user, k=8, kinds=kinds, channels=channels)
            requests += 1
            for hit in response.hits:
                own(tenant, hit.episode_id, [s.session_id for s in hit.sources])
                hits_by[tenant][hit.id] = hit.kind
                if "graph" in channels:
                    graph_hits[tenant] += 1
        if n % 5 == 0:
            for tenant in TENANTS:
                packed = clients[tenant].pack(query, user_id="", max_tokens=300, kinds=kinds)
                requests += 1
                for item in packed.items:
                    own(tenant, item.sources[0].episode_id, [s.session_id for s in item.sources])

    # Both tenants found things, also through the graph; the ids differ (scope is in the id).
    for tenant in TENANTS:
        assert len(hits_by[tenant]) > 10 and graph_hits[tenant] > 0
    assert not set(hits_by["alice"]) & set(hits_by["bob"])

    # Id-based reads of the other tenant's things: NOT_FOUND, exactly like unknown ids.
    for tenant in TENANTS:
        c = clients[tenant]
        other = TENANTS[1 - TENANTS.index(tenant)]
        for node_id in sorted(hits_by[other]):
            _not_found(lambda: c.get_node(node_id))  # noqa: B023
            requests += 1
        for node_id in sorted(hits_by[tenant])[:20]:
            own(tenant, c.get_node(node_id).node.episode_id, [])
            requests += 1
        for episode_id in sorted(episodes[other]):
            _not_found(lambda: c.get_episode(episode_id))  # noqa: B023
            requests += 1
        for sid in sorted(sessions[other]):
            _not_found(lambda: c.get_working_memory(sid))  # noqa: B023
            _not_found(lambda: c.end_session(sid))  # noqa: B023
            requests += 2
        listed = {e.episode_id for e in c.iter_episodes()}
        assert listed == episodes[tenant]
        requests += 1
        for kind in ("", "fact", "summary"):
            for query in QUERIES:
                with pytest.raises(StrataClientError) as err:
                    c.recall(query, user_id=other, kinds=[kind] if kind else [])
                assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
                requests += 1
        window = c.get_working_memory(open_session[tenant])
        assert window.scope.user_id == tenant and len(window.messages) == 1

    # The other tenant's open session is still open and untouched.
    for tenant in TENANTS:
        assert clients[tenant].end_session(open_session[tenant]).message_count == 1
    assert requests >= 1000, requests
    for c in clients.values():
        c.close()

"""Tier 3 fact graph: the seam and its records.

Entities are nodes, keyed by scope and normalized name (see :func:`normalize`), with the
surface forms seen as aliases. Facts with a triplet are typed edges (subject -predicate->
object), each linked to its fact point, its source messages and its validity interval. A
server graph database can implement :class:`GraphStore` without touching the weaver or recall.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from tiers.core.records import Scope
from tiers.semantic.vectors import Source

# The edges an implementation holding users' graphs in memory keeps by default
# (graph.cache_edges; about 1.4 kB each in NetworkXGraph).
CACHE_EDGES = 100_000

_ARTICLE = re.compile(r"^(the|a|an)\s+")
_PUNCT = re.compile(r"[^\w\s'-]+")


@functools.lru_cache(maxsize=1 << 16)  # a user's graph is read with the same names again and again
def normalize(name: str) -> str:
    """The key of an entity: lower case, no leading article, no punctuation, single spaces."""
    text = _PUNCT.sub(" ", name.lower()).strip()
    text = re.sub(r"\s+", " ", text)
    return _ARTICLE.sub("", text).strip(" '-")


@dataclass(frozen=True, slots=True)
class Edge:
    id: str  # the id of the fact point it comes from
    scope: Scope
    subject: str  # as written
    predicate: str  # snake_case
    object: str  # as written
    fact_text: str
    episode_id: str
    sources: list[Source]
    created_at_us: int
    valid_from_us: int
    valid_to_us: int | None = None
    confidence: float = 1.0
    extractor: str = ""
    attrs: dict[str, str] = field(default_factory=dict)

    @property
    def current(self) -> bool:
        return self.valid_to_us is None


@runtime_checkable
class GraphStore(Protocol):
    """The graph seam. Writes are durable before they return; reads never cross scopes (but
    :meth:`edges_where`, :meth:`get` and :meth:`counts`, which the daemon's own maintenance
    uses, see every scope).

    Errors: a write (:meth:`add_edges`, :meth:`close_edges`, :meth:`remove_edges`,
    :meth:`remove_episodes`, :meth:`remove_scope`) that its store refuses raises
    :class:`~tiers.core.errors.StoreUnavailable` (an ``Unavailable``), and then nothing changed,
    for reads either. Reads raise nothing of their own: an unknown id, entity or scope is
    ``None`` or empty, and unknown ids are skipped by every write.
    ``tests/contracts/test_graph_store.py`` runs the contract against each implementation."""

    def add_edges(self, edges: Sequence[Edge]) -> None:
        """Insert or replace edges by id (idempotent). Raises StoreUnavailable."""

    def get(self, edge_id: str) -> Edge | None:
        """The edge of this id (any scope), or None."""

    def close_edges(self, ids: Sequence[str], valid_to_us: int | None) -> None:
        """Set ``valid_to`` of these edges (supersession; ``None`` makes them current again);
        nothing is deleted. Raises StoreUnavailable."""

    def remove_edges(self, ids: Sequence[str]) -> tuple[int, int]:
        """Delete these edges (Forget) and the nodes left without an edge; returns how many
        (edges, nodes). Unknown ids are skipped. Raises StoreUnavailable."""

    def remove_episodes(self, episode_ids: set[str], user_id: str = "") -> int:
        """Delete every edge derived from these episodes (of ``user_id``, or of every user)
        and the nodes left without an edge; returns how many edges. Raises StoreUnavailable."""

    def remove_scope(self, scope: Scope) -> tuple[int, int]:
        """Delete every edge of ``scope`` (every agent's when its ``agent_id`` is empty: a
        whole user's Forget) and the nodes left without an edge; returns how many (edges,
        nodes), as :meth:`remove_edges` given their ids would. Raises StoreUnavailable."""

    def episodes_of(self, scope: Scope) -> set[str]:
        """The episode ids of ``scope``'s edges (every agent's when its ``agent_id`` is
        empty; ``""`` for an edge of no episode), read without building the edges."""

    def edges_about(self, scope: Scope, subject: str, predicate: str) -> list[Edge]:
        """Every edge (current or closed) from the entity ``subject`` with ``predicate``."""

    def edges_of(self, scope: Scope, entity: str) -> list[Edge]:
        """Every edge touching ``entity`` (either end) in ``scope``."""

    def edges_where(self, keep: Callable[[Edge], bool], user_id: str = "") -> list[Edge]:
        """Every edge for which ``keep`` is true: of ``user_id``'s scopes when given (without
        looking at the other users' edges), else of any scope."""

    def triplets(self, scope: Scope) -> list[tuple[str, str, str]]:
        """(id, subject, object) of each current edge of ``scope`` (every agent's when its
        ``agent_id`` is empty), in key order: what a Recall's graph is built from, read
        without building the edges."""

    def entities(self, scope: Scope) -> list[tuple[str, list[str]]]:
        """(normalized name, sorted aliases) of every entity in ``scope``."""

    def counts(self) -> tuple[int, int]:
        """(entities, edges) over all scopes."""

    def close(self) -> None:
        """Release what the graph holds (its store's owner closes the store)."""

"""LangGraph's ``BaseStore`` on Strata's keyed documents (``stratad-client[langgraph]``).

::

    from stratad_client.integrations.langgraph import StrataStore

    store = StrataStore()                   # the user is each namespace's first label
    store.put(("alice", "memories"), "home", {"text": "Alice moved to Lisbon."})
    store.search(("alice", "memories"), query="where does she live?")

    graph = builder.compile(store=store)    # nodes get it as their ``store`` argument

How it maps:

- **Whose.** Strata keeps every memory under a user, and recall never crosses users. The
  user is a fixed ``user_id`` given to the store, or else the namespace's label at
  ``user_index`` (default 0: ``("alice", "memories")`` is Alice's). A call that names no
  user (a namespace, or a search or listing prefix, too short to hold it) raises
  ``InvalidNamespaceError``. ``agent_id`` (default empty) is the agent within the user.
- **Items** are documents (``PutDocument``, ``GetDocument``, ``DeleteDocument``,
  ``ListDocuments``), keyed by the whole namespace and the key: durable when ``put``
  returns, and ``get`` reads them back at once. The value is kept as JSON.
- **What Recall indexes** is the text of the fields ``index`` names (LangGraph's field
  paths: ``["text"]``, ``["$"]``...; ``None``: the store's ``index_fields``, default the
  whole value), one ``field: text`` line each. ``index=False`` puts an item that only
  ``get`` and filter-only ``search`` find.
- ``search(prefix, query=...)`` is ``Recall`` of kind ``document``: the weaver indexes a put
  within seconds, and hits come best first with Recall's score. Without a query, ``search``
  lists the prefix in namespace and key order. ``filter`` (LangGraph's: exact values,
  ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``) applies to the values in both.
- ``list_namespaces`` lists the namespaces of the user's documents.
- ``delete`` (and ``put`` of ``None``) is ``DeleteDocument``: removed everywhere, as Forget
  does. TTLs are not supported (``supports_ttl`` is false).

The async methods run the blocking client in a worker thread.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import get_text_at_path

from stratad_client import MemoryClient, NotFoundError
from stratad_client.integrations.connection import Connection
from stratad_client.pb import memory_pb2 as pb

KIND = "document"


@dataclass(frozen=True, slots=True)
class Scope:
    user: str
    agent: str


class StrataStore(BaseStore):
    """A LangGraph store kept by a running ``stratad`` (see the module docstring)."""

    supports_ttl = False

    def __init__(
        self,
        *,
        user_id: str | None = None,
        user_index: int = 0,
        agent_id: str = "",
        index_fields: list[str] | None = None,
        max_k: int = 50,
        client: MemoryClient | None = None,
        **client_args: Any,
    ) -> None:
        """``user_id``: every namespace's user; None: the namespace's label at
        ``user_index``. ``index_fields``: what Recall indexes when a put does not say
        (default ``["$"]``, the whole value). ``max_k``: most Recall hits read for one
        search (the daemon's ``recall.max_k`` bounds it). ``client``: a
        :class:`MemoryClient` to use (not closed by :meth:`close`); without one, a client is
        made from ``client_args`` (``address``, ``token``..., defaulting to the
        environment)."""
        if user_id == "":
            raise ValueError("user_id may be None (from the namespace), not empty")
        self.user_id = user_id
        self.user_index = user_index
        self.agent_id = agent_id
        self.index_fields = index_fields or ["$"]
        self.max_k = max_k
        self._daemon = Connection(client, client_args)
        self._client = self._daemon.client

    def close(self) -> None:
        self._daemon.close()

    def __enter__(self) -> StrataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- BaseStore -----------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._daemon.call(self.batch, list(ops))

    # -- operations ----------------------------------------------------------------------
    def _user(self, namespace: tuple[str, ...], what: str) -> str:
        if self.user_id is not None:
            return self.user_id
        if len(namespace) <= self.user_index:
            raise InvalidNamespaceError(
                f"{what} {namespace!r} names no user: the user is the label at position "
                f"{self.user_index} (or give StrataStore a user_id)"
            )
        return namespace[self.user_index]

    def _scope(self, namespace: tuple[str, ...], what: str) -> Scope:
        return Scope(self._user(namespace, what), self.agent_id)

    def _get(self, op: GetOp) -> Item | None:
        try:
            s = self._scope(op.namespace, "namespace")
            got = self._client.get_document(op.namespace, op.key, user_id=s.user, agent_id=s.agent)
        except NotFoundError:
            return None
        return _item(got.document)

    def _put(self, op: PutOp) -> None:
        s = self._scope(op.namespace, "namespace")
        if op.value is None:
            self._client.delete_document(op.namespace, op.key, user_id=s.user, agent_id=s.agent)
            return
        value = dict(op.value)
        text = "" if op.index is False else self._text(value, op.index or self.index_fields)
        self._client.put_document(
            op.namespace, op.key, text, value=json.dumps(value), user_id=s.user, agent_id=s.agent
        )

    @staticmethod
    def _text(value: dict[str, Any], fields: list[str]) -> str:
        """One ``field: text`` line per text the field paths select (``$``: each top-level
        field of the value)."""
        lines: list[str] = []
        for field in fields:
            if field == "$":
                lines.extend(f"{k}: {_plain_text(v)}" for k, v in value.items())
                continue
            for text in get_text_at_path(value, field):
                if text.strip():
                    lines.append(f"{field}: {text}")
        return "\n".join(line for line in lines if line.strip())

    def _search(self, op: SearchOp) -> list[SearchItem]:
        scope = self._scope(op.namespace_prefix, "namespace prefix")
        wanted = op.offset + op.limit
        found: list[SearchItem] = []
        for item, score in self._candidates(op, scope):
            if op.filter and not _matches(item.value, op.filter):
                continue
            found.append(_search_item(item, score))
            if len(found) >= wanted:
                break
        return found[op.offset : wanted]

    def _candidates(self, op: SearchOp, s: Scope) -> Iterator[tuple[Item, float | None]]:
        prefix = op.namespace_prefix
        if not op.query:
            for doc in self._client.iter_documents(
                namespace_prefix=prefix, user_id=s.user, agent_id=s.agent
            ):
                yield _item(doc), None
            return
        k = min(self.max_k, max(10, 4 * (op.offset + op.limit)))
        hits = self._client.recall(op.query, k=k, kinds=[KIND], user_id=s.user, agent_id=s.agent)
        seen: set[str] = set()
        for hit in hits.hits:
            if hit.id in seen:
                continue
            seen.add(hit.id)
            where = _document_of(hit)
            if where is None or where[0][: len(prefix)] != prefix:
                continue
            try:
                got = self._client.get_document(
                    where[0], where[1], user_id=s.user, agent_id=s.agent
                )
            except NotFoundError:  # deleted since it was indexed
                continue
            yield _item(got.document), hit.score

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix = _concrete_prefix(op.match_conditions)
        s = self._scope(prefix, "namespace listing (a prefix condition)")
        spaces = {
            tuple(doc.namespace)
            for doc in self._client.iter_documents(
                namespace_prefix=prefix, user_id=s.user, agent_id=s.agent
            )
        }
        conditions = op.match_conditions or ()
        chosen = [ns for ns in spaces if all(_condition(c, ns) for c in conditions)]
        if op.max_depth is not None:
            chosen = list({ns[: op.max_depth] for ns in chosen})
        return sorted(chosen)[op.offset : op.offset + op.limit]


# -- mapping ------------------------------------------------------------------------------
def _time(ts: Any) -> dt.datetime:
    return ts.ToDatetime(dt.UTC) if ts.ByteSize() else dt.datetime.fromtimestamp(0, dt.UTC)


def _plain_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _item(doc: pb.Document) -> Item:
    return Item(
        value=json.loads(doc.value) if doc.value else {},
        key=doc.key,
        namespace=tuple(doc.namespace),
        created_at=_time(doc.created_at),
        updated_at=_time(doc.updated_at),
    )


def _search_item(item: Item, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )


def _document_of(hit: pb.Hit) -> tuple[tuple[str, ...], str] | None:
    """The namespace and key of the document a hit is, from its source."""
    for source in hit.sources:
        meta = source.metadata
        if "key" in meta and "namespace" in meta:
            return tuple(json.loads(meta["namespace"])), meta["key"]
    return None


def _concrete_prefix(conditions: tuple[MatchCondition, ...] | None) -> tuple[str, ...]:
    """The longest namespace prefix, without wildcards, that a prefix condition fixes."""
    best: tuple[str, ...] = ()
    for c in conditions or ():
        if c.match_type != "prefix":
            continue
        labels: list[str] = []
        for label in c.path:
            if label == "*":
                break
            labels.append(label)
        if len(labels) > len(best):
            best = tuple(labels)
    return best


def _condition(c: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` meets a LangGraph match condition ("*" matches any label)."""
    if len(namespace) < len(c.path):
        return False
    labels = namespace if c.match_type == "prefix" else namespace[len(namespace) - len(c.path) :]
    return all(p in ("*", label) for p, label in zip(c.path, labels, strict=False))


def _matches(value: Any, expected: Any) -> bool:
    """LangGraph's filter semantics: nested exact values, or ``$``-operators."""
    if isinstance(expected, dict):
        if any(str(k).startswith("$") for k in expected):
            return all(_compare(value, op, arg) for op, arg in expected.items())
        return isinstance(value, dict) and all(
            _matches(value.get(k), v) for k, v in expected.items()
        )
    if isinstance(expected, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(expected)
            and all(_matches(a, b) for a, b in zip(value, expected, strict=True))
        )
    return bool(value == expected)


def _compare(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    if value is None:
        return False
    if op == "$gt":
        return float(value) > float(arg)
    if op == "$gte":
        return float(value) >= float(arg)
    if op == "$lt":
        return float(value) < float(arg)
    if op == "$lte":
        return float(value) <= float(arg)
    raise ValueError(f"unsupported filter operator {op!r}")

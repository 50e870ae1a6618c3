"""The LangGraph adapter with the real ``langgraph`` package: StrataStore against a real daemon,
held to the semantics of LangGraph's own InMemoryStore, and used by a compiled graph."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError, Item
from langgraph.store.memory import InMemoryStore

from stratad_client import MemoryClient
from stratad_client.integrations.langgraph import StrataStore
from tests.support import wait_indexed

pytestmark = pytest.mark.slow


@pytest.fixture
def store(quiet_daemon):
    s = StrataStore(address=quiet_daemon.address)
    yield s
    s.close()


def _plain(item: Item | None) -> Any:
    return None if item is None else (item.namespace, item.key, item.value)


def _scenario(s: BaseStore) -> list[Any]:
    """Store operations and what they return, comparable between two stores."""
    out: list[Any] = []
    s.put(("alice", "memories"), "home", {"text": "Lives in Lisbon", "since": 2023})
    s.put(("alice", "memories"), "pet", {"text": "Has a cat named Miso", "since": 2019})
    s.put(("alice", "memories", "work"), "job", {"text": "Nurse", "since": 2015, "tags": ["a"]})
    s.put(("alice", "prefs"), "tone", {"text": "Brief answers", "nested": {"level": 2}})
    s.put(("bob", "memories"), "home", {"text": "Lives in Oslo", "since": 2021})
    out.append(_plain(s.get(("alice", "memories"), "home")))
    out.append(_plain(s.get(("alice", "memories"), "missing")))
    s.put(("alice", "memories"), "home", {"text": "Lives in Porto", "since": 2024})  # replace
    out.append(_plain(s.get(("alice", "memories"), "home")))
    s.delete(("alice", "memories"), "pet")
    out.append(_plain(s.get(("alice", "memories"), "pet")))
    s.put(("alice", "prefs"), "gone", {"text": "x"})
    s.put(("alice", "prefs"), "gone", None)  # a put of None deletes
    out.append(_plain(s.get(("alice", "prefs"), "gone")))

    def search(prefix: tuple[str, ...], **kw: Any) -> list[Any]:
        return sorted((i.namespace, i.key, i.value) for i in s.search(prefix, **kw))

    out.append(search(("alice",)))
    out.append(search(("alice", "memories")))
    out.append(search(("alice", "memories"), filter={"since": {"$gte": 2015, "$lt": 2024}}))
    out.append(search(("alice",), filter={"nested": {"level": 2}}))
    out.append(search(("alice",), filter={"tags": ["a"]}))
    out.append(search(("alice", "memories"), filter={"since": {"$ne": 2015}}))
    out.append(search(("bob",)))
    out.append(len(s.search(("alice",), limit=1)))
    out.append(len(s.search(("alice",), limit=2, offset=2)))
    out.append(s.list_namespaces(prefix=("alice",)))
    out.append(s.list_namespaces(prefix=("alice",), max_depth=2))
    out.append(s.list_namespaces(prefix=("alice",), suffix=("work",)))
    out.append(s.list_namespaces(prefix=("alice", "*", "work")))
    out.append(s.list_namespaces(prefix=("alice",), limit=1, offset=1))
    return out


def test_the_store_behaves_as_langgraphs_own(store):
    assert _scenario(store) == _scenario(InMemoryStore())


def test_search_by_query_uses_recall(quiet_daemon, store):
    ns = ("carol", "memories")
    store.put(ns, "home", {"text": "Carol moved to Lisbon in May"})
    store.put(ns, "food", {"text": "Carol is allergic to peanuts", "kind": "health"})
    store.put(("carol", "other"), "note", {"text": "Lisbon trams are yellow"})
    store.put(ns, "secret", {"text": "Carol's safe code is Lisbon 1234"}, index=False)
    store.put(ns, "fields", {"title": "Diet", "body": "peanut-free meals"}, index=["title"])
    with MemoryClient(quiet_daemon.address) as c:
        wait_indexed(c)
    hits = store.search(ns, query="Where does Carol live?", limit=3)
    assert hits[0].key == "home" and hits[0].score is not None
    assert all(h.namespace == ns for h in hits)  # the other namespace is not in the prefix
    assert "secret" not in {h.key for h in store.search(ns, query="safe code Lisbon")}
    assert store.get(ns, "secret").value["text"].startswith("Carol's safe code")  # type: ignore[union-attr]
    assert [h.key for h in store.search(ns, query="peanuts", filter={"kind": "health"})] == ["food"]
    # Replacing an item changes what is found; deleting it removes it.
    store.put(ns, "home", {"text": "Carol moved to Tokyo"})
    store.delete(ns, "food")
    with MemoryClient(quiet_daemon.address) as c:
        wait_indexed(c)
    home = next(h for h in store.search(ns, query="Tokyo", limit=5) if h.key == "home")
    assert home.value == {"text": "Carol moved to Tokyo"}
    assert "food" not in {h.key for h in store.search(ns, query="allergic to peanuts")}


def test_users_come_from_the_namespace_or_the_store(quiet_daemon, store):
    store.put(("dan", "notes"), "k", {"text": "Dan's note"})
    with pytest.raises(InvalidNamespaceError, match="names no user"):
        store.search(())
    with pytest.raises(InvalidNamespaceError):
        store.list_namespaces()
    # A store fixed to one user keeps the namespace as given, under that user.
    with StrataStore(user_id="erin", agent_id="planner", address=quiet_daemon.address) as erin:
        erin.put(("notes",), "k", {"text": "Erin's note"})
        assert erin.get(("notes",), "k").value == {"text": "Erin's note"}  # type: ignore[union-attr]
        assert erin.get(("dan", "notes"), "k") is None  # not Dan's
        assert erin.list_namespaces() == [("notes",)]
    with MemoryClient(quiet_daemon.address) as c:
        docs = list(c.iter_documents(user_id="erin", agent_id="planner"))
        assert [(tuple(d.namespace), d.key) for d in docs] == [(("notes",), "k")]


def test_async_methods(store):
    async def run() -> list[Any]:
        await store.aput(("fay", "m"), "a", {"text": "one"})
        got = await store.aget(("fay", "m"), "a")
        listed = await store.asearch(("fay",))
        spaces = await store.alist_namespaces(prefix=("fay",))
        await store.adelete(("fay", "m"), "a")
        return [_plain(got), [i.key for i in listed], spaces, await store.aget(("fay", "m"), "a")]

    assert asyncio.run(run()) == [(("fay", "m"), "a", {"text": "one"}), ["a"], [("fay", "m")], None]


class State(TypedDict):
    user: str
    said: str
    reply: str


def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    store.put((state["user"], "facts"), "latest", {"text": state["said"]})
    return {}


def answer(state: State, *, store: BaseStore) -> dict[str, Any]:
    item = store.get((state["user"], "facts"), "latest")
    return {"reply": f"You told me: {item.value['text']}" if item else "I know nothing."}


def test_a_compiled_graph_uses_the_store(quiet_daemon, store):
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    graph = builder.compile(store=store)
    out = graph.invoke({"user": "gus", "said": "I play the cello.", "reply": ""})
    assert out["reply"] == "You told me: I play the cello."
    with MemoryClient(quiet_daemon.address) as c:
        (doc,) = c.iter_documents(user_id="gus")
    assert tuple(doc.namespace) == ("gus", "facts") and "cello" in doc.text

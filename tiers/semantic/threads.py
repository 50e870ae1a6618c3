"""Story threads: per topic, the narrative spine of a scope's conversations about it.

A thread is a Tier 3 point of kind ``thread``: for one topic, the episodes about it, oldest
first, each by its date and its summary, for example::

    Thread: kitchen renovation (3 conversations, 2 Mar 2026 to 19 Mar 2026). 2 Mar 2026:
    Ana asked for quotes for the cabinets ... 19 Mar 2026: ...

Where an episode's topics come from (the weaver sets them on its summary, see
:func:`topics_of_episode`):

- **hints**: a message whose metadata has ``topic`` (several: separated by commas) puts its
  episode in those threads (``attrs["topics"]`` of the summary); one episode makes a thread;
- otherwise the weaver's own topics: the topics of the episode's facts
  (:data:`tiers.semantic.profiles.TOPICS`, by a triplet's predicate or the fact's words) that
  two facts or more share, at most two per episode (``attrs["weaver_topics"]``); a thread of
  these needs two episodes.

A thread names its children (the summaries, ``attrs["children"]``) and their episodes
(``attrs["episodes"]``: what Recall's and Pack's ``thread`` filter keeps), its sources are
theirs, and like a digest (:mod:`tiers.semantic.digests`) it is a function of the scope's
summaries with an id of scope and topic: a refresh writes the threads whose members changed,
and Forget builds them again from what is left.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from tiers.core.errors import NotFound, TierError
from tiers.core.records import Scope
from tiers.semantic.digests import event_date, overview, plural
from tiers.semantic.profiles import PREDICATE_TOPICS, topics_of
from tiers.semantic.vectors import MemoryPoint, PointFilter, VectorStore, point_id

KIND = "thread"
HINT = "topic"  # the message metadata key of topic hints
MAX_TOPIC_CHARS = 80
WEAVER_TOPICS = 2  # weaver topics per episode at most
MIN_WEAVER_EPISODES = 2


def hints(metadata: Iterable[Mapping[str, str]]) -> list[str]:
    """The topic hints of messages' metadata, in order, each once (each cut at
    :data:`MAX_TOPIC_CHARS` characters, blanks dropped)."""
    out: dict[str, None] = {}
    for meta in metadata:
        for part in meta.get(HINT, "").split(","):
            topic = " ".join(part.split())[:MAX_TOPIC_CHARS]
            if topic:
                out.setdefault(topic, None)
    return list(out)


def topics_of_episode(facts: Sequence[tuple[str, str]]) -> list[str]:
    """The weaver's topics of an episode from its facts (``(text, predicate)`` pairs): the
    topics two facts or more share, the most shared first (at most :data:`WEAVER_TOPICS`)."""
    counts: Counter[str] = Counter()
    for text, predicate in facts:
        topic = PREDICATE_TOPICS.get(predicate)
        counts.update([topic] if topic else topics_of(text))
    ranked = sorted((t for t, n in counts.items() if n >= 2), key=lambda t: (-counts[t], t))
    return ranked[:WEAVER_TOPICS]


class ThreadNotFound(TierError, NotFound):
    """The scope has no story thread of this topic."""


def thread_id(scope: Scope, topic: str) -> str:
    return point_id(scope, KIND, topic, [])


def episodes_of(vectors: VectorStore, scope: Scope, topic: str) -> tuple[str, ...]:
    """The episodes of the scope's thread ``topic`` (of every agent of the user when the
    scope names none). Raises ThreadNotFound, VectorStoreUnavailable."""
    flt = PointFilter(user_id=scope.user_id, agent_id=scope.agent_id, kinds=(KIND,))
    threads = [p for p in vectors.scroll(flt, 100_000) if p.attrs.get("topic") == topic]
    if not threads:
        raise ThreadNotFound(f"no story thread {topic!r} in this scope")
    return tuple(dict.fromkeys(str(e) for p in threads for e in p.attrs.get("episodes") or ()))


def build_threads(scope: Scope, summaries: Iterable[MemoryPoint]) -> list[MemoryPoint]:
    """The threads of ``scope`` from its summaries' topics, by topic, without vectors.
    Deterministic: the same summaries give the same points."""
    hinted: dict[str, list[MemoryPoint]] = defaultdict(list)
    derived: dict[str, list[MemoryPoint]] = defaultdict(list)
    for p in sorted(summaries, key=lambda p: (p.created_at_us, p.id)):
        if p.kind != "summary" or p.scope != scope or not p.text:
            continue
        own = [str(t) for t in p.attrs.get("topics") or ()]
        for topic in own:
            hinted[topic].append(p)
        for topic in p.attrs.get("weaver_topics") or ():
            if not own:
                derived[str(topic)].append(p)
    groups = {t: m for t, m in derived.items() if len(m) >= MIN_WEAVER_EPISODES}
    for topic, members in hinted.items():  # a hinted topic also takes derived members
        groups[topic] = sorted(
            {p.id: p for p in [*members, *derived.get(topic, [])]}.values(),
            key=lambda p: (p.created_at_us, p.id),
        )
    return [
        _thread(topic, members, "hint" if topic in hinted else "weaver")
        for topic, members in sorted(groups.items())
    ]


def _thread(topic: str, members: list[MemoryPoint], origin: str) -> MemoryPoint:
    head = (
        f"Thread: {topic} ({plural(len(members), 'conversation')}, "
        f"{event_date(members[0].created_at_us)} to {event_date(members[-1].created_at_us)})."
    )
    attrs = {"topic": topic, "title": f"Thread: {topic}", "origin": origin}
    return overview(thread_id(members[-1].scope, topic), KIND, head, members, "thread", attrs)

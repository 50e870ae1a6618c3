"""A readable Markdown tree of an export file (``weaverctl export`` writes it beside the JSONL).

::

    DIR/index.md                 the scope, the counts, links to everything below
    DIR/episodes/<id>.md         one per episode: its summary, its messages (speaker, time,
                                 anchors seq-N), the facts drawn from it
    DIR/entities/<name>.md       one per entity: its profiles, its facts (validity, superseded),
                                 each fact linking to its source messages' episode file
    DIR/sessions/<name>.md       one per open session: its messages
    DIR/documents.md             the keyed documents: namespace, key, scope, text, value
    DIR/story.md                 the story so far, then the period digests, newest first,
                                 each linking to its episodes
    DIR/threads/<topic>.md       one per story thread: its text, links to its episodes

Links are relative and only point at files of the tree: a fact whose episode has left the
journal (so is not in the export) says so instead of linking. The file is read twice (facts
and profiles first, then the episodes' messages), so no episode is held in memory whole.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tiers.core.records import StoredMessage
from tiers.keyed.document import Document
from tiers.rights.archive.format import (
    EpisodeRecord,
    Header,
    Record,
    SessionRecord,
    with_messages,
)
from tiers.rights.archive.parser import ExportParser
from tiers.semantic.vectors import MemoryPoint

_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(slots=True)
class _Index:
    """What the first pass learns."""

    header: Header | None = None
    counts: Counter[str] = field(default_factory=Counter)
    episodes: dict[str, EpisodeRecord] = field(default_factory=dict)
    summaries: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    facts: list[MemoryPoint] = field(default_factory=list)
    profiles: list[MemoryPoint] = field(default_factory=list)
    digests: list[MemoryPoint] = field(default_factory=list)
    threads: list[MemoryPoint] = field(default_factory=list)
    sessions: list[SessionRecord] = field(default_factory=list)
    documents: list[Document] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TreeSummary:
    files: int
    episodes: int
    entities: int
    sessions: int


def write_tree(jsonl: Path, out: Path) -> TreeSummary:
    """Render ``jsonl`` (a complete export) as Markdown under ``out``. Raises InvalidExport."""
    index = _Index()
    with jsonl.open("rb") as f:
        for r in _records(f):
            _learn(index, r)
    assert index.header is not None
    (out / "episodes").mkdir(parents=True, exist_ok=True)
    files = 0
    with jsonl.open("rb") as f:
        for record, messages in with_messages(_records(f)):
            parent = record.value
            if isinstance(parent, EpisodeRecord):
                _write(
                    out / "episodes" / f"{parent.episode.episode_id}.md",
                    _episode(index, parent, messages),
                )
                files += 1
            elif isinstance(parent, SessionRecord) and messages:
                _write(out / "sessions" / _file(parent.session_id), _session(parent, messages))
                files += 1
    entities = _entities(index)
    for name, (profiles, facts) in entities.items():
        _write(out / "entities" / _file(name), _entity(index, name, profiles, facts))
    if index.documents:
        _write(out / "documents.md", _documents(index.documents))
        files += 1
    if index.digests:
        _write(out / "story.md", _story(index))
        files += 1
    for t in index.threads:
        _write(out / "threads" / _thread_file(t), _thread(index, t))
        files += 1
    _write(out / "index.md", _index(index, sorted(entities)))
    live = sum(1 for s in index.sessions if s.open)
    return TreeSummary(files + len(entities) + 1, len(index.episodes), len(entities), live)


def _records(f: IO[bytes]) -> Iterator[Record]:
    parser = ExportParser()
    for line in f:
        yield parser.feed(line)
    parser.finish()


def _learn(index: _Index, r: Record) -> None:
    if r.type == "header":
        index.header = r.value
    elif r.type == "episode":
        index.episodes[r.value.episode.episode_id] = r.value
    elif r.type == "session":
        index.sessions.append(r.value)
    elif r.type == "point" and r.value.kind == "summary":
        index.summaries[r.value.episode_id].append(r.value.text)
    elif r.type == "point" and r.value.kind == "fact":
        index.facts.append(r.value)
    elif r.type == "point" and r.value.kind == "profile":
        index.profiles.append(r.value)
    elif r.type == "point" and r.value.kind == "digest":
        index.digests.append(r.value)
    elif r.type == "point" and r.value.kind == "thread":
        index.threads.append(r.value)
    elif r.type == "document":
        index.documents.append(r.value)
    if r.type not in ("header", "footer"):
        index.counts[r.type] += 1


# -- pages ---------------------------------------------------------------------------------------
def _episode(index: _Index, rec: EpisodeRecord, messages: list[StoredMessage]) -> str:
    e = rec.episode
    lines = [
        f"# Episode of {_when(e.started_at_us)}",
        "",
        f"- session: `{e.session_id}`, {e.message_count} messages, "
        f"{_when(e.started_at_us)} to {_when(e.ended_at_us)} (ended by {e.end_reason})",
        f"- scope: user `{e.scope.user_id}`"
        + (f", agent `{e.scope.agent_id}`" if e.scope.agent_id else ""),
        f"- episode id: `{e.episode_id}`; indexed: {_yes(rec.indexed)}, "
        f"consolidated: {_yes(rec.consolidated)}",
        "",
        "[All memory](../index.md)",
        "",
    ]
    for summary in index.summaries.get(e.episode_id, []):
        lines += ["## Summary", "", _quote(summary), ""]
    lines += ["## Messages", ""]
    lines += _messages(messages)
    facts = [f for f in index.facts if f.episode_id == e.episode_id]
    if facts:
        lines += ["## Facts drawn from it", ""]
        lines += [
            f"- {_fact_line(f, '')} ([{_link_text(_subject(f))}](../entities/{_file(_subject(f))}))"
            for f in facts
        ]
        lines.append("")
    return "\n".join(lines)


def _session(rec: SessionRecord, messages: list[StoredMessage]) -> str:
    lines = [
        f"# Open session `{rec.session_id}`",
        "",
        f"- scope: user `{rec.scope.user_id}`"
        + (f", agent `{rec.scope.agent_id}`" if rec.scope.agent_id else ""),
        f"- generation {rec.generation}, {len(messages)} messages in its log",
        "",
        "[All memory](../index.md)",
        "",
    ]
    return "\n".join(lines + _messages(messages))


def _messages(messages: list[StoredMessage]) -> list[str]:
    lines: list[str] = []
    for m in messages:
        who = m.name or m.role
        lines += [
            f'<a id="seq-{m.seq}"></a>',
            f"**{_escape(who)}** · {_when(m.created_at_us)} · #{m.seq}",
            "",
        ]
        if m.content:
            lines.append(_quote(m.content))
        if m.tool_call is not None:
            lines.append(f"> tool call `{m.tool_call.name}`: `{m.tool_call.arguments}`")
        if m.metadata:
            pairs = ", ".join(f"{k}={v}" for k, v in sorted(m.metadata.items()))
            lines.append(f"> ({_escape(pairs)})")
        lines.append("")
    return lines


def _entities(index: _Index) -> dict[str, tuple[list[MemoryPoint], list[MemoryPoint]]]:
    """Entity name -> (its profiles, its facts). A fact's entity is its triplet's subject,
    else the speaker of its first source message."""
    out: dict[str, tuple[list[MemoryPoint], list[MemoryPoint]]] = {}
    for p in index.profiles:
        name = str(p.attrs.get("entity") or _subject(p))
        out.setdefault(name, ([], []))[0].append(p)
    for f in index.facts:
        out.setdefault(_subject(f), ([], []))[1].append(f)
    return out


def _entity(index: _Index, name: str, profiles: list[MemoryPoint], facts: list[MemoryPoint]) -> str:
    lines = [f"# {_escape(name)}", "", "[All memory](../index.md)", ""]
    for p in sorted(profiles, key=lambda p: str(p.attrs.get("topic", ""))):
        lines += [f"## {_escape(str(p.attrs.get('topic') or 'profile'))}", "", _quote(p.text), ""]
    if facts:
        lines += ["## Facts", ""]
        for f in sorted(facts, key=lambda f: (f.valid_from_us or f.created_at_us, f.id)):
            lines.append(
                f"- {_fact_line(f, '../episodes/' if f.episode_id in index.episodes else None)}"
            )
        lines.append("")
    return "\n".join(lines)


def _story(index: _Index) -> str:
    """The story so far of each agent of the export, then its period digests, newest first
    (tiers.semantic.digests)."""
    lines = ["# The story so far", "", "[All memory](index.md)", ""]
    ordered = sorted(
        index.digests,
        key=lambda d: (d.scope.agent_id, d.attrs.get("level") != "story", -d.created_at_us),
    )
    for d in ordered:
        agent = f" (agent `{_link_text(d.scope.agent_id)}`)" if d.scope.agent_id else ""
        lines += [f"## {_escape(str(d.attrs.get('title') or 'Digest'))}{agent}", ""]
        lines += [_quote(d.text), "", _episode_links(index, d, "episodes/"), ""]
    return "\n".join(lines)


def _thread(index: _Index, t: MemoryPoint) -> str:
    lines = [f"# {_escape(str(t.attrs.get('title') or 'Thread'))}", "", "[All memory](../index.md)"]
    lines += ["", _quote(t.text), "", _episode_links(index, t, "../episodes/"), ""]
    return "\n".join(lines)


def _thread_file(t: MemoryPoint) -> str:
    return _file(f"{t.scope.agent_id}/{t.attrs.get('topic', '')}")


def _episode_links(index: _Index, point: MemoryPoint, episodes: str) -> str:
    """Links to the episodes a digest or thread covers (those still in the journal)."""
    links = []
    for eid in point.attrs.get("episodes") or ():
        rec = index.episodes.get(str(eid))
        if rec is not None:
            links.append(f"[{_when(rec.episode.started_at_us)}]({episodes}{eid}.md)")
    gone = len(point.attrs.get("episodes") or ()) - len(links)
    said = f"Episodes: {', '.join(links)}" if links else "Episodes:"
    return said + (f" ({_n(gone, 'episode')} left the journal)" if gone else "")


def _fact_line(f: MemoryPoint, episodes: str | None) -> str:
    """A fact with its validity and, when ``episodes`` is a path, links to its sources."""
    text = _escape(f.text)
    since = f" (since {_when(f.valid_from_us)})" if f.valid_from_us is not None else ""
    if f.valid_to_us is not None:
        text = f"~~{text}~~ superseded {_when(f.valid_to_us)}"
    if episodes is None:
        return f"{text}{since}; its episode has left the journal"
    if not episodes:
        return f"{text}{since}"
    links = ", ".join(f"[#{s.seq}]({episodes}{f.episode_id}.md#seq-{s.seq})" for s in f.sources)
    return f"{text}{since}; from {links or f'[its episode]({episodes}{f.episode_id}.md)'}"


def _index(index: _Index, entities: list[str]) -> str:
    h = index.header
    assert h is not None
    agent = f", agent `{h.scope.agent_id}`" if h.scope.agent_id else " (every agent)"
    counts = ", ".join(f"{n} {t}" for t, n in sorted(index.counts.items()))
    lines = [
        f"# Memory of `{h.scope.user_id}`{agent}",
        "",
        f"Exported {_when(h.exported_at_us)} (embedding model {h.model}): {counts}. "
        "The complete, importable export is `memory.jsonl`.",
        "",
        "## Episodes",
        "",
    ]
    for rec in sorted(index.episodes.values(), key=lambda r: r.episode.started_at_us):
        e = rec.episode
        lines.append(
            f"- [{_when(e.started_at_us)}, session {_link_text(e.session_id)}]"
            f"(episodes/{e.episode_id}.md): {_n(e.message_count, 'message')}"
        )
    if index.digests:
        lines += ["", "## The story so far", "", "- [The story so far](story.md)"]
    if index.threads:
        lines += ["", "## Story threads", ""]
        for t in sorted(index.threads, key=lambda t: str(t.attrs.get("topic", ""))):
            title = _link_text(str(t.attrs.get("title") or "Thread"))
            lines.append(f"- [{title}](threads/{_thread_file(t)})")
    lines += ["", "## Entities", ""]
    lines += [f"- [{_link_text(name)}](entities/{_file(name)})" for name in entities]
    if index.documents:
        lines += ["", "## Documents", ""]
        lines.append(f"- [{_n(len(index.documents), 'keyed document')}](documents.md)")
    open_sessions = [s for s in index.sessions if s.open]
    if open_sessions:
        lines += ["", "## Open sessions", ""]
        for s in open_sessions:
            link = f"[{_link_text(s.session_id)}](sessions/{_file(s.session_id)})"
            lines.append(f"- {link}: {_n(s.messages, 'message')}")
    return "\n".join([*lines, ""])


def _documents(docs: list[Document]) -> str:
    lines = ["# Keyed documents", "", "[All memory](index.md)", ""]
    for d in docs:
        path = " / ".join(f"`{_link_text(label)}`" for label in d.namespace) or "(no namespace)"
        agent = f", agent `{d.scope.agent_id}`" if d.scope.agent_id else ""
        lines += [
            f"## {path} · `{_link_text(d.key)}`",
            "",
            f"- user `{d.scope.user_id}`{agent}; created {_when(d.created_at_us)}, "
            f"updated {_when(d.updated_at_us)}; id `{d.id}`",
            "",
            _quote(d.text),
            "",
        ]
        if d.value:  # a fence longer than any run of backticks in the value
            fence = "`" * max(3, 1 + max(map(len, re.findall("`+", d.value)), default=0))
            lines += [f"{fence}json", d.value, fence, ""]
    return "\n".join(lines)


# -- helpers -------------------------------------------------------------------------------------
def _subject(f: MemoryPoint) -> str:
    subject = str(f.attrs.get("subject") or "")
    return subject or (f.sources[0].speaker if f.sources and f.sources[0].speaker else "unknown")


def _file(name: str) -> str:
    """A safe, unique file name for an entity or session name."""
    slug = _SLUG.sub("-", name.lower()).strip("-")[:60] or "x"
    return f"{slug}-{hashlib.sha256(name.encode()).hexdigest()[:8]}.md"


def _when(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1_000_000, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _escape(text: str) -> str:
    return re.sub(r"([\\`*_\[\]<>])", r"\\\1", text)


def _link_text(text: str) -> str:
    return _escape(text).replace("\n", " ")


def _quote(text: str) -> str:
    return "\n".join(f"> {_escape(line)}" if line else ">" for line in text.splitlines() or [""])


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")

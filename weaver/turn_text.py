"""One message as the weaver indexes it and extracts from it: the text of its turn.

:func:`turn_text` is the one rendering, used by :func:`weaver.episodes.load_episode`, so
indexing, consolidation (the extractors see the same turns) and a rebuild from the journal
all agree; the stored messages themselves are never changed (GetNode, export).

- A message's content stays as it is.
- A tool call becomes a sentence of its own, after the content if there is any:
  ``assistant called search_flights(from="BER", to="JFK")``: the speaker (the message's name,
  else its role), the tool's name and its arguments. A JSON object's members are
  ``key=value`` pairs joined by ``", "`` (keys as written when they are identifiers, else
  quoted; values as compact JSON, so strings are quoted and nested values are ``{"a":1}``);
  any other JSON value is its compact JSON; empty or ``null`` arguments give ``()``; text
  that is not JSON (the daemon validates, so only defensively) is kept with its whitespace
  collapsed. The rendered arguments are cut after ``ToolText.call_tokens`` tokens
  (``tiers.core.tokens``), marked with ``…``.
- A tool's result (a message of role ``tool``) reads as the result of the call:
  ``search_flights returned: {...}`` (the message's name, else ``tool``), its whitespace
  collapsed and cut after ``ToolText.result_tokens`` tokens, marked with ``…``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tiers.core.records import StoredMessage, ToolCall
from tiers.core.tokens import truncate_tokens

CUT = "…"


@dataclass(frozen=True, slots=True)
class ToolText:
    """The bounds of the rendering (``weaver.tool_call_max_tokens`` and
    ``weaver.tool_result_max_tokens``; the defaults are theirs). At these defaults a call and
    its result both cut at their bounds still fit one chunk of ``weaver.chunk_max_tokens``'
    default (200) together, for tool names of a few words."""

    call_tokens: int = 64  # a tool call's rendered arguments
    result_tokens: int = 100  # a tool's result


def turn_text(message: StoredMessage, bounds: ToolText) -> str:
    """The text of ``message``'s turn ("" for a message with neither content nor call)."""
    parts: list[str] = []
    if message.content:
        if message.role == "tool":
            parts.append(result_text(message.name, message.content, bounds.result_tokens))
        else:
            parts.append(message.content)
    if message.tool_call is not None:
        speaker = message.name or message.role
        parts.append(call_text(speaker, message.tool_call, bounds.call_tokens))
    return "\n".join(parts)


def call_text(speaker: str, call: ToolCall, max_tokens: int) -> str:
    """``speaker called name(arguments)``, the arguments cut after ``max_tokens`` tokens."""
    arguments, cut = truncate_tokens(_arguments(call.arguments), max_tokens)
    return f"{speaker} called {call.name}({arguments}{CUT if cut else ''})"


def result_text(name: str, content: str, max_tokens: int) -> str:
    """``name returned: content``, the content cut after ``max_tokens`` tokens."""
    result, cut = truncate_tokens(" ".join(content.split()), max_tokens)
    return f"{name or 'tool'} returned: {result}{CUT if cut else ''}"


def _arguments(raw: str) -> str:
    try:
        value = json.loads(raw) if raw.strip() else None
    except (ValueError, RecursionError):
        return " ".join(raw.split())
    if value is None:
        return ""
    if isinstance(value, dict):
        return ", ".join(f"{_key(k)}={_compact(v)}" for k, v in value.items())
    return _compact(value)


def _key(key: str) -> str:
    return key if key.isidentifier() else _compact(key)


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

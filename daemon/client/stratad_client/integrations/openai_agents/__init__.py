"""The OpenAI Agents SDK's ``Session`` protocol on Strata's working memory
(``stratad-client[agents]``).

::

    from agents import Agent, Runner
    from stratad_client.integrations.openai_agents import StrataSession

    session = StrataSession("support-42", user_id="alice")
    result = await Runner.run(agent, "Where do I live?", session=session)

Each history item is one message of the Strata session ``session_id`` of ``user_id``:

- ``role``, ``content`` (the item's text) and, for a function call, ``tool_call`` are what
  Strata reads: the window, the episode the session becomes, and the memories drawn from it.
- An item other than a plain ``{"role", "content"}`` message also keeps its JSON in the
  message's metadata (:data:`ITEM_KEY`), so :meth:`StrataSession.get_items` returns exactly
  what was added. Its size counts against the daemon's ``limits.max_message_bytes``.

How the protocol maps:

- ``get_items(limit)``: the session's working-memory window (``working_memory.max_messages``
  and ``max_tokens``), not its whole log: older turns stay in the log, and once the session
  ends (``end_session``, or idle for ``working_memory.idle_timeout_seconds``) they are an
  episode, found by Recall and Pack. A tool output whose call fell out of the window (or of
  ``limit``) is left out, so the model is never sent an output without its call.
- ``add_items``: one atomic, durable ``AppendBatch``.
- ``pop_item`` and ``clear_session``: ``RemoveMessages``, durable before they return; the
  episode the session becomes does not hold what they removed.

The calls are the blocking client's, run in a worker thread, so a session object works from
any event loop (``asyncio.run`` twice, a framework's own loop).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agents.memory.session_settings import SessionSettings, resolve_session_limit

from stratad_client import MemoryClient, NotFoundError, message
from stratad_client.integrations.connection import Connection
from stratad_client.pb import memory_pb2 as pb

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

# The metadata key holding an item's JSON.
ITEM_KEY = "openai_agents.item"
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_ROLE_NAMES = {pb.ROLE_USER: "user", pb.ROLE_ASSISTANT: "assistant", pb.ROLE_SYSTEM: "system"}
# Item types that answer a call (by call_id) and must not reach the model without it.
_OUTPUTS = {
    "function_call_output": "function_call",
    "computer_call_output": "computer_call",
    "local_shell_call_output": "local_shell_call",
    "shell_call_output": "shell_call",
    "apply_patch_call_output": "apply_patch_call",
    "custom_tool_call_output": "custom_tool_call",
}


class StrataSession:
    """A conversation history kept in Strata's working memory (see the module docstring)."""

    def __init__(
        self,
        session_id: str,
        *,
        user_id: str,
        agent_id: str = "",
        client: MemoryClient | None = None,
        session_settings: SessionSettings | None = None,
        **client_args: Any,
    ) -> None:
        """``client``: a :class:`MemoryClient` to use (not closed by :meth:`close`); without
        one, a client is made from ``client_args`` (``address``, ``token``, ``ca_file``...,
        each defaulting to the environment: ``STRATA_ADDRESS``, ``STRATA_TOKEN``...)."""
        if not user_id:
            raise ValueError("user_id is required: Strata sessions belong to a user")
        self.session_id = session_id
        self.session_settings = session_settings
        self.user_id = user_id
        self.agent_id = agent_id
        self._daemon = Connection(client, client_args)
        self._client = self._daemon.client
        self._call = self._daemon.call

    def close(self) -> None:
        self._daemon.close()

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The newest ``limit`` items of the window (None: ``session_settings.limit``, or the
        whole window), oldest first. An unknown session has none."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit <= 0:
            return []
        try:
            view = await self._call(
                self._client.get_working_memory,
                self.session_id,
                max_messages=limit,
                user_id=self.user_id,
            )
        except NotFoundError:
            return []
        return _answered([item_of(m.message) for m in view.messages])

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if not items:
            return
        await self._call(
            self._client.append_batch,
            self.session_id,
            [message_of(item) for item in items],
            user_id=self.user_id,
            agent_id=self.agent_id,
        )

    async def pop_item(self) -> TResponseInputItem | None:
        removed = await self._remove(last=1)
        return item_of(removed[-1].message) if removed else None

    async def clear_session(self) -> None:
        await self._remove(all=True)

    async def _remove(self, **which: Any) -> list[pb.StoredMessage]:
        try:
            response = await self._call(
                self._client.remove_messages, self.session_id, user_id=self.user_id, **which
            )
        except NotFoundError:
            return []
        return list(response.removed)


def message_of(item: TResponseInputItem | dict[str, Any]) -> pb.Message:
    """The Strata message that holds ``item``."""
    data: dict[str, Any] = dict(item)
    kind = data.get("type", "message")
    plain = set(data) == {"role", "content"} and isinstance(data["content"], str)
    metadata = (
        {} if plain and data["role"] in _ROLE_NAMES.values() else {ITEM_KEY: json.dumps(data)}
    )
    if kind == "message" and data.get("role") in _ROLES:
        return message(
            _text(data.get("content")) or f"[{kind}]", _ROLES[data["role"]], metadata=metadata
        )
    if kind == "function_call":
        name, arguments = str(data.get("name", "")), str(data.get("arguments", ""))
        if name and _is_json(arguments):
            return message("", "assistant", tool_call=(name, arguments), metadata=metadata)
        return message(f"[{kind} {name}] {arguments}".strip(), "assistant", metadata=metadata)
    if kind in _OUTPUTS:  # no speaker name: indexed as "tool returned: ..."
        return message(_text(data.get("output")) or f"[{kind}]", "tool", metadata=metadata)
    # Reasoning, hosted tool calls, references...: their readable text, or their type.
    text = _text(data.get("summary")) or _text(data.get("content")) or _text(data.get("output"))
    return message(text or f"[{kind}]", "assistant", name=kind, metadata=metadata)


def item_of(stored: pb.Message) -> TResponseInputItem:
    """The item a message made by :func:`message_of` holds (a plain message for any other)."""
    raw = stored.metadata.get(ITEM_KEY)
    if raw is not None:
        item: TResponseInputItem = json.loads(raw)
        return item
    role = _ROLE_NAMES.get(stored.role, "user")
    return {"role": role, "content": stored.content}  # type: ignore[return-value,misc]


def _text(value: Any) -> str:
    """The readable text of an item's content, output or summary (a string or parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [_text(part) for part in value]
        return "\n".join(p for p in parts if p)
    if isinstance(value, dict):
        for key in ("text", "refusal", "output"):
            if isinstance(value.get(key), str):
                return str(value[key])
    return ""


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _answered(items: list[TResponseInputItem]) -> list[TResponseInputItem]:
    """``items`` without the tool outputs whose call is not among them (it left the window)."""
    calls = {
        (d.get("type"), d.get("call_id"))
        for d in (dict(i) for i in items)
        if d.get("type") not in _OUTPUTS
    }
    keep: list[TResponseInputItem] = []
    for item in items:
        d = dict(item)
        call = _OUTPUTS.get(str(d.get("type")))
        # (a local shell call's output names its call by "id")
        if call is not None and (call, d.get("call_id", d.get("id"))) not in calls:
            continue
        keep.append(item)
    return keep

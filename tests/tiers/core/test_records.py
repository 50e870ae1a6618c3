"""A record made from another it mirrors (tiers.core.records.from_fields)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tiers.core.records import Message, StoredMessage, ToolCall, from_fields
from tiers.working.session import WindowLimits


def test_a_stored_message_gives_back_the_message_the_client_sent() -> None:
    stored = StoredMessage(
        seq=7,
        role="tool",
        content="42",
        created_at_us=1_000,
        received_at_us=2_000,
        tokens=3,
        name="calc",
        tool_call=ToolCall("add", '{"a": 40, "b": 2}'),
        message_id="m-7",
        metadata={"k": "v"},
    )
    message = from_fields(Message, stored)
    assert message == Message(
        "tool", "42", "calc", ToolCall("add", '{"a": 40, "b": 2}'), 1_000, "m-7", {"k": "v"}
    )


def test_given_fields_win_and_others_come_from_the_source() -> None:
    limits = from_fields(WindowLimits, WindowLimits(9, 90, 1.5, 3, 30), max_tokens=12)
    assert limits == WindowLimits(9, 12, 1.5, 3, 30)


def test_a_field_the_source_lacks_is_an_error_not_a_default() -> None:
    @dataclass
    class Short:
        max_messages: int = 9

    with pytest.raises(AttributeError, match="max_tokens"):
        from_fields(WindowLimits, Short())


def test_fields_made_after_init_are_left_to_the_record() -> None:
    @dataclass
    class Counted:
        name: str
        seen: list[str] = field(init=False, default_factory=list)

    @dataclass
    class Source:
        name: str = "n"
        seen: str = "not a list"

    assert from_fields(Counted, Source()).seen == []

"""Domain records to protobuf messages (daemon.codec.convert)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from daemon.codec import convert
from stratad_client.pb import admin_pb2, memory_pb2, weaver_pb2
from tiers.core.records import Scope
from tiers.keyed.anchors import Anchor
from weaver.rebuild import RebuildReport


def test_a_message_mirrors_its_record_field_for_field() -> None:
    report = RebuildReport(episodes=3, records_replayed=2, vector_points=40, graph_edges=5)
    report.seconds = 1.5
    message = convert.from_fields(admin_pb2.RebuildResponse, report)
    assert (message.episodes, message.records_replayed, message.vector_points) == (3, 2, 40)
    assert (message.graph_edges, message.seconds) == (5, 1.5)


def test_given_fields_win_over_the_records() -> None:
    @dataclass
    class Progress:
        stage: str
        done: int
        total: int
        episode_id: str
        run_id: str = "the record's"

    progress = Progress("index", 1, 4, "ep-1")
    message = convert.from_fields(weaver_pb2.RunProgress, progress, run_id="run-9")
    assert (message.run_id, message.stage, message.done, message.total) == ("run-9", "index", 1, 4)


def test_a_field_the_record_lacks_is_an_error_not_an_empty_value() -> None:
    @dataclass
    class Partial:
        episodes: int = 1  # no records_replayed, vector_points, graph_edges, seconds

    with pytest.raises(AttributeError, match="records_replayed"):
        convert.from_fields(admin_pb2.RebuildResponse, Partial())


def test_a_timestamp_is_read_from_the_records_microseconds() -> None:
    anchor = Anchor("s1", Scope("alice"), "the plan", updated_at_us=1_700_000_000_250_000)
    message = convert.from_fields(memory_pb2.SessionAnchor, anchor, scope=memory_pb2.Scope())
    assert (message.session_id, message.text) == ("s1", "the plan")
    assert (message.updated_at.seconds, message.updated_at.nanos) == (1_700_000_000, 250_000_000)

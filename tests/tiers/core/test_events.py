"""Typed events (``tiers/core/events.py``): handlers by event type, called in the order they
subscribed on the publisher's thread; a failing handler is logged and the others still run."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import pytest

from tiers.core.events import Events


@dataclass(frozen=True)
class Started:
    name: str


@dataclass(frozen=True)
class Stopped:
    name: str


@dataclass(frozen=True)
class StartedLate(Started):
    """A subclass is an event type of its own: Started's handlers do not hear it."""


def test_handlers_hear_their_type_only_in_the_order_they_subscribed() -> None:
    events, heard = Events("test"), []
    events.subscribe(Started, lambda e: heard.append(("first", e.name)))
    events.subscribe(Stopped, lambda e: heard.append(("stopped", e.name)))
    events.subscribe(Started, lambda e: heard.append(("second", e.name)))
    events.publish(Started("a"))
    events.publish(Stopped("b"))
    events.publish(StartedLate("c"))
    events.publish("no handler for this")
    assert heard == [("first", "a"), ("second", "a"), ("stopped", "b")]
    assert (events.handlers(Started), events.handlers(StartedLate)) == (2, 0)


def test_a_handler_runs_on_the_publishers_thread() -> None:
    events, threads = Events("test"), []
    events.subscribe(Started, lambda e: threads.append(threading.current_thread().name))
    publisher = threading.Thread(target=events.publish, args=(Started("a"),), name="publisher")
    publisher.start()
    publisher.join()
    assert threads == ["publisher"]


def test_a_failing_handler_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events, heard = Events("test"), []

    def broken(event: Started) -> None:
        raise RuntimeError("observer bug")

    events.subscribe(Started, broken)
    events.subscribe(Started, lambda e: heard.append(e.name))
    with caplog.at_level(logging.ERROR, logger="strata.test"):
        events.publish(Started("a"))  # does not raise
    assert heard == ["a"]
    (record,) = caplog.records
    assert record.name == "strata.test" and record.getMessage() == "test.observer_failed"
    assert record.exc_info is not None and "observer bug" in str(record.exc_info[1])
    assert record.fields == {"event": "Started"}  # type: ignore[attr-defined]


def test_unsubscribe_stops_one_handler() -> None:
    events, heard = Events("test"), []
    stop = events.subscribe(Started, lambda e: heard.append(1))
    events.subscribe(Started, lambda e: heard.append(2))
    stop()
    stop()  # idempotent
    events.publish(Started("a"))
    assert heard == [2]

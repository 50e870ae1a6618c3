"""The stages of a Forget, timed for its ``forget.done`` log line."""

from __future__ import annotations

import time

from tiers.rights.forget.plan import Laps


def test_each_stage_takes_the_time_since_the_last_lap_added_up_over_its_laps():
    laps = Laps()
    time.sleep(0.02)
    laps.lap("scope")
    laps.lap("points")
    time.sleep(0.02)
    laps.lap("scope")
    assert list(laps.ms) == ["scope_ms", "points_ms"]
    assert laps.ms["scope_ms"] >= 40.0  # both of its laps
    assert laps.ms["points_ms"] >= 0.0

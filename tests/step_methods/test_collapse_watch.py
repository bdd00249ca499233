"""The collapse watch: means of the exact acceptance over consecutive windows of tuning draws."""

from __future__ import annotations

import numpy as np

from pymc_rnshmc.step_methods.collapse_watch import CollapseWatch


def test_a_window_below_the_floor_is_reported_once_with_its_mean():
    watch = CollapseWatch(window=4, floor=0.05)
    assert [watch.record(a) for a in (0.0, 0.1, np.nan, 0.0)] == [None, None, None, 0.025]
    assert watch.accepts == [], "the next window starts empty"


def test_a_window_at_or_above_the_floor_is_not_reported():
    watch = CollapseWatch(window=2, floor=0.05)
    assert [watch.record(a) for a in (0.05, 0.05, 0.9, 0.0)] == [None, None, None, None]


def test_a_restart_forgets_the_open_window():
    watch = CollapseWatch(window=3, floor=0.5)
    watch.record(0.0)
    watch.record(0.0)
    watch.restart()
    assert watch.record(0.0) is None and watch.record(0.0) is None
    assert watch.record(0.0) == 0.0

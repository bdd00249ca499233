"""The start rule, on draw counts alone: when the first fit comes, and when it waits."""

from __future__ import annotations

import numpy as np

from pymc_rnshmc.step_methods.schedule import RNSHMC_SCHEDULE, ExplorationSchedule
from pymc_rnshmc.step_methods.start_rule import StartRule

TUNE, DIM = 1000, 4


def rule(start_error: float | None = 0.1, schedule=RNSHMC_SCHEDULE, **changes) -> StartRule:
    options = {"exploration_steps": None, "tune": TUNE, "dim": DIM, "chains": 1, **changes}
    return StartRule(schedule, start_error=start_error, name="test", **options)


def test_the_first_fit_comes_at_the_schedules_length_or_the_users():
    assert rule().exploration_length() == RNSHMC_SCHEDULE.exploration_length(TUNE, DIM) == 200
    assert rule(chains=4).exploration_length() == 50  # shared by four chains, at least 50
    assert rule(exploration_steps=120).exploration_length() == 120


def test_a_poor_fit_waits_until_the_latest_start_then_starts():
    waiting = rule()
    assert not waiting.postpones(0.05, 200, end_of_tuning=False)  # good enough
    assert not waiting.postpones(np.nan, 200, end_of_tuning=False)  # no error known
    assert waiting.postpones(0.5, 200, end_of_tuning=False)
    assert waiting.exploration_length() == RNSHMC_SCHEDULE.postponed_start(200) == 300
    latest = RNSHMC_SCHEDULE.latest_start(TUNE, DIM)
    assert waiting.postpones(0.5, latest // 2, end_of_tuning=False)
    assert not waiting.postpones(0.5, latest, end_of_tuning=False)  # no try left: it starts
    assert not rule().postpones(0.5, 200, end_of_tuning=True)
    assert not rule(start_error=None).postpones(0.5, 200, end_of_tuning=False)


def test_only_an_early_schedule_postpones_a_failed_fit():
    early = rule()
    assert early.postpone(200) and early.postponed_until == 300
    late = rule(schedule=ExplorationSchedule(tuning_share=0.7))
    assert not late.postpone(200) and late.postponed_until is None


def test_after_a_collapse_the_exploration_resumes_until_the_next_try_if_one_is_left():
    resumed = rule()
    assert resumed.restart(100) == RNSHMC_SCHEDULE.postponed_start(101) == 152
    assert resumed.exploration_length() == 152
    latest = RNSHMC_SCHEDULE.latest_start(TUNE, DIM)
    too_late = rule()
    assert too_late.restart(latest) is None and too_late.postponed_until is None

"""What a fit is set up with: the weighed error, the setup deadline, the dynamics' setting."""

from __future__ import annotations

import dataclasses
import logging
import time
from types import SimpleNamespace

import numpy as np
import pytest

from pymc_rnshmc.exceptions import EvaluationTimeout
from pymc_rnshmc.step_methods.economy import VERDICT_DRAWS, VERDICT_FIT_ERROR, Economy
from pymc_rnshmc.step_methods.fit_setup import (
    choose_dynamics,
    fit_window,
    log_fit,
    setup_deadline,
    weighed_error,
)
from tests.step_methods.helpers import SlowFit
from tests.step_methods.test_warmup import settings


def measured_economy(seconds_a_draw: float = 2e-3) -> Economy:
    economy = Economy()
    for _ in range(10):
        economy.note_draw(0, 7, seconds_a_draw)
    return economy


def test_the_weighed_error_is_the_held_out_gradient_error_and_none_for_values():
    surrogate = SimpleNamespace(report=SimpleNamespace(gradient_error=0.07))
    assert weighed_error(surrogate, values_only=False) == pytest.approx(0.07)
    assert np.isnan(weighed_error(surrogate, values_only=True))


def test_no_deadline_until_costs_are_measured():
    assert setup_deadline(Economy(), time.perf_counter(), 0.01, 500, 1000, 0.0) is None


def test_the_deadline_is_the_budget_less_what_earlier_fits_spent():
    economy = measured_economy()
    budget = economy.setup_budget(1000)
    now = time.perf_counter()
    assert not setup_deadline(economy, now, 0.01, 500, 1000, spent=0.0)()
    assert setup_deadline(economy, now - 2 * budget, 0.01, 500, 1000, spent=0.0)()
    assert setup_deadline(economy, now, 0.01, 500, 1000, spent=2 * budget)()


def test_a_poor_fit_awaiting_the_verdict_is_out_of_time_at_once():
    poor = 1.01 * VERDICT_FIT_ERROR
    out_of_time = setup_deadline(Economy(), time.perf_counter(), poor, VERDICT_DRAWS, 1000, 0.0)
    assert out_of_time()


class RecordingDynamics:
    """Dynamics that hand back the setting they were asked to choose in."""

    chooses_path_length = True

    def choose(self, surrogate, setting):
        return setting


def test_a_refit_scans_from_the_previous_choice_a_first_fit_from_nothing():
    chosen = settings(dynamics=RecordingDynamics(), path_length=1.5)
    positions, gradients = np.zeros((5, 3)), np.ones((5, 3))
    surrogate = SimpleNamespace()
    explorer = (np.full(3, 2.0), None, 0.3)
    rng = np.random.default_rng(1)
    first = choose_dynamics(chosen, surrogate, positions, gradients, explorer, 0.25, rng)
    assert not first.refit and first.previous is None
    assert first.step_size == 0.25 and first.path_length == 1.5
    np.testing.assert_array_equal(first.explorer_variances, explorer[0])
    assert first.target_accept == chosen.surrogate_target_accept
    previous = SimpleNamespace(best="the last best")
    again = choose_dynamics(chosen, surrogate, positions, gradients, explorer, 0.25, rng, previous)
    assert again.refit and again.previous == "the last best"


def test_the_first_fit_is_told_at_info_refits_at_debug(caplog):
    best = SimpleNamespace(
        metric=SimpleNamespace(kind="dense"), step_size=0.2, path_length=1.1, ess_mean=0.9
    )
    choice = SimpleNamespace(best=best)
    chosen = dataclasses.replace(settings(), dynamics=RecordingDynamics())
    with caplog.at_level(logging.DEBUG, logger="pymc.rnshmc"):
        log_fit(chosen, SimpleNamespace(), choice, 40, first=True)
        log_fit(chosen, SimpleNamespace(), choice, 60, first=False)
    levels = [(r.levelno, "on 40" in r.message or "on 60" in r.message) for r in caplog.records]
    assert levels == [(logging.INFO, True), (logging.DEBUG, True)]
    assert "dense metric" in caplog.records[0].message
    assert "path length 1.1" in caplog.records[0].message


@pytest.mark.parametrize("evaluates", [False, True])
def test_a_fit_past_its_limit_is_abandoned_unless_it_evaluates_a_model(evaluates):
    rng = np.random.default_rng(2)
    positions = rng.normal(size=(60, 2))
    window = (positions, 0.5 * np.sum(positions**2, axis=1), positions)
    host = SimpleNamespace(new_surrogate=lambda: SlowFit(0.3, evaluates))
    clock = time.perf_counter()
    if not evaluates:
        with pytest.raises(EvaluationTimeout):
            fit_window(host, window, None, rng, limit=0.05)
        assert time.perf_counter() - clock < 0.25
        return
    surrogate, gradients = fit_window(host, window, None, rng, limit=0.05)
    assert surrogate.is_fitted and gradients is window[2]
    surrogate, _ = fit_window(host, window, None, rng)  # no limit: fits whatever it evaluates
    assert surrogate.is_fitted

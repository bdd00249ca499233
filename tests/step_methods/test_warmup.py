"""The warm-up driven by hand: fed exact draws, asked to fit, learn, resume and freeze.

No ``pm.sample`` and no model: the exploration is scripted (exact draws of a Gaussian with their
gradients), the host is a few lines, and the chain's surrogate draws are ``kernel_step`` on the
warm-up's kernel. This is how a driver other than PyMC's step (several chains, a cluster) uses
it.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
from pymc.step_methods.step_sizes import DualAverageAdaptation

from pymc_rnshmc import RandomNetworkSurrogate, SurrogateWarning
from pymc_rnshmc.hmc.corrections import Evaluation, ExactMetropolis
from pymc_rnshmc.hmc.kernel import kernel_step
from pymc_rnshmc.hmc.transition import CachedPoint
from pymc_rnshmc.step_methods.dynamics import get_dynamics
from pymc_rnshmc.step_methods.economy import Verdict
from pymc_rnshmc.step_methods.learning_plan import WALL_REFITS
from pymc_rnshmc.step_methods.schedule import RNSHMC_SCHEDULE, Phase
from pymc_rnshmc.step_methods.tuning_alone import ALONE_CHECK_EVERY, FINAL_EXACT_DRAWS
from pymc_rnshmc.step_methods.wall_watch import WALL_NATS
from pymc_rnshmc.step_methods.warmup import (
    COLLAPSE_WINDOW,
    SurrogateWarmup,
    WarmupSettings,
)
from tests.checks import assert_moments

MEAN = np.array([1.0, -2.0, 0.5])
SD = np.array([1.0, 0.5, 2.0])
TUNE = 400


class Gaussian:
    """The exact model (``has_gradient``, ``logp``, ``potential_and_gradient``, ``cast``)."""

    has_gradient = True

    def logp(self, position):
        return -0.5 * float(np.sum(((position - MEAN) / SD) ** 2))

    def potential_and_gradient(self, position):
        return -self.logp(position), (position - MEAN) / SD**2

    def cast(self, position):
        return np.asarray(position, dtype=float)


class Host:
    """The warm-up's host: a network surrogate, the exact Metropolis test, dual averaging."""

    def __init__(self) -> None:
        self.installed = 0

    def new_surrogate(self):
        return RandomNetworkSurrogate()

    def correction(self):
        return ExactMetropolis(1000.0)

    def new_adaptation(self, initial_step, target):
        return DualAverageAdaptation(initial_step, target, 0.05, 0.75, 10)

    def explorer_metric(self):
        return SD**2, None, 0.5

    def surrogate_installed(self):
        self.installed += 1

    def chains_sharing(self):
        return 1


def settings(**changes) -> WarmupSettings:
    options = {
        "name": "test",
        "exact_sampler": "exact draws",
        "schedule": RNSHMC_SCHEDULE,
        "dynamics": get_dynamics("hmc"),
        "dim": 3,
        "values_only": False,
        "learns": True,
        "exploration_steps": None,
        "training_window": None,
        "path_length": None,
        "start_error": None,
        "surrogate_target_accept": 0.95,
        "max_steps": 128,
        "max_depth": 10,
        "max_energy_change": 1000.0,
    }
    return WarmupSettings(**{**options, **changes})


def explore(warmup: SurrogateWarmup, n: int, rng) -> None:
    """Scripted exploration: exact draws recorded with their potential and gradient."""
    model = Gaussian()
    for position in MEAN + SD * rng.normal(size=(n, 3)):
        potential, gradient = model.potential_and_gradient(position)
        warmup.record.append(position, potential, gradient)


def test_the_first_fit_comes_at_the_schedules_exploration_length_and_makes_a_kernel():
    rng, host = np.random.default_rng(1), Host()
    warmup = SurrogateWarmup(settings(), TUNE)
    length = warmup.start.exploration_length()
    assert length == max(50, round(0.2 * TUNE))
    explore(warmup, length, rng)
    warmup.fit_if_due(length - 1, rng, host)
    assert warmup.phase == Phase.EXPLORATION and warmup.kernel is None
    warmup.fit_if_due(length, rng, host)
    assert warmup.phase == Phase.SURROGATE and host.installed == 1
    assert warmup.kernel.surrogate is warmup.surrogate
    assert warmup.wants_gradients, "it learns from the tuning draws: ask for gradients"


@pytest.mark.parametrize(
    ("tune", "chains", "length"),
    [
        (1000, 1, 200),  # 20 % of tuning
        (1000, 2, 100),  # pooled chains share it
        (1000, 4, 50),
        (1000, 16, 50),  # but each chain explores at least 50 draws
        (30, 4, 21),  # and no less than a single chain with so short a tuning
    ],
)
def test_pooled_chains_share_the_exploration(tune, chains, length):
    assert RNSHMC_SCHEDULE.exploration_length(tune, 5, chains) == length
    assert SurrogateWarmup(settings(), tune, chains).start.exploration_length() == length


def test_too_few_draws_at_the_end_of_tuning_fall_back_to_exact_draws():
    rng = np.random.default_rng(2)
    warmup = SurrogateWarmup(settings(), TUNE)
    explore(warmup, 3, rng)
    with pytest.warns(SurrogateWarning, match="needs at least"):
        warmup.fit(3, rng, Host(), end_of_tuning=True)
    assert warmup.phase == Phase.EXACT and warmup.kernel is None


def test_a_poor_fit_at_the_end_of_tuning_leaves_the_kept_draws_to_exact_draws():
    # No verdict, collapse watch or adapted step size can follow it (PyMC 5, short tune).
    rng = np.random.default_rng(7)
    warmup = SurrogateWarmup(settings(), TUNE)
    for position in MEAN + SD * rng.normal(size=(80, 3)):  # gradients that are noise
        warmup.record.append(position, -Gaussian().logp(position), 5.0 * rng.normal(size=3))
    with pytest.warns(SurrogateWarning, match="held-out gradient error of .* Increase `tune`"):
        warmup.fit(80, rng, Host(), end_of_tuning=True)
    assert warmup.phase == Phase.EXACT and warmup.kernel is None
    good = SurrogateWarmup(settings(), TUNE)
    explore(good, 80, rng)
    with pytest.warns(SurrogateWarning, match="Tuning ended before test finished exploring"):
        good.fit(80, rng, Host(), end_of_tuning=True)
    assert good.phase == Phase.SURROGATE


class ReportlessNetwork(RandomNetworkSurrogate):
    """A network whose fits report no held-out error, as a sparse grid's do not."""

    def fit(self, *args, **kwargs):
        super().fit(*args, **kwargs)
        self.report = types.SimpleNamespace(summary=lambda: "")
        return self


@pytest.mark.parametrize(("points", "warns"), [(9, True), (80, False)])
@pytest.mark.parametrize("reports_held_out", [True, False])
def test_a_fit_too_small_to_check_with_little_tuning_left_is_said(points, warns, reports_held_out):
    """Seven training draws hold none out; with 10 tuning draws left no watch can judge it.

    Not said of a surrogate whose fits never report a held-out error (a grid's).
    """
    rng, tune = np.random.default_rng(3), points + 10
    warns = warns and reports_held_out
    host = Host()
    if not reports_held_out:
        host.new_surrogate = ReportlessNetwork
    warmup = SurrogateWarmup(settings(), tune)
    explore(warmup, points, rng)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warmup.fit(points, rng, host, end_of_tuning=False)
    said = [w for w in caught if "too few to hold any out" in str(w.message)]
    assert len(said) == warns and warmup.phase == Phase.SURROGATE
    if warns:
        assert "7 exact draws" in str(said[0].message) and "10 tuning draws" in str(said[0].message)


def started(seed: int) -> tuple[SurrogateWarmup, np.random.Generator]:
    rng = np.random.default_rng(seed)
    warmup = SurrogateWarmup(settings(), TUNE)
    explore(warmup, 80, rng)
    warmup.fit(80, rng, Host(), end_of_tuning=False)
    assert warmup.phase == Phase.SURROGATE
    return warmup, rng


def test_a_collapse_resumes_exploration_and_too_late_falls_back():
    warmup, _ = started(3)
    for _ in range(COLLAPSE_WINDOW - 1):
        assert warmup.watch_for_collapse(0.0, 100) is None
    assert warmup.watch_for_collapse(0.0, 100) == "resume"
    assert warmup.phase == Phase.EXPLORATION and warmup.start.postponed_until == 152
    late, _ = started(4)
    for _ in range(COLLAPSE_WINDOW - 1):
        late.watch_for_collapse(0.0, 250)
    with pytest.warns(SurrogateWarning, match="too late to fit another"):
        assert late.watch_for_collapse(0.0, 250) == "exact"
    assert late.phase == Phase.EXACT


def test_a_chain_driven_by_hand_tunes_freezes_and_samples_the_target():
    model, host = Gaussian(), Host()
    warmup, rng = started(6)
    position = MEAN.copy()
    point = CachedPoint(position, model.logp(position), ())

    def evaluate(position):  # the exact logp, and its gradient while the warm-up learns
        if warmup.wants_gradients:
            potential, gradient = model.potential_and_gradient(position)
            return Evaluation(position, -potential, gradient)
        return Evaluation(position, model.logp(position))

    for iteration in range(80, TUNE):
        warmup.fit_if_due(iteration, rng, host)
        if warmup.phase != Phase.SURROGATE:
            continue
        if host.installed:  # a refit: values cached for the old surrogate go
            point, host.installed = point.without_surrogate_values(), 0
        result = kernel_step(warmup.tuning_kernel(), point, rng, model, evaluate=evaluate)
        warmup.adapt(result.integrator_accept)
        warmup.learn_from(result)
        point = result.end
    assert warmup.phase == Phase.SURROGATE
    assert warmup.fitted_rows[1] > 80, "it refitted on the proposals it learned from"
    warmup.stop_learning()
    warmup.freeze()
    frozen = warmup.kernel
    draws = np.empty((2000, 3))
    for i in range(len(draws)):
        point = kernel_step(frozen, point, rng, model).end
        draws[i] = point.position
    assert warmup.kernel is frozen
    for i in range(3):
        assert_moments(draws[None, :, i], MEAN[i], SD[i], f"coordinate {i}", min_ess=300)


# ----------------------------------------------------------------- tuning on the surrogate alone
def fitted_warmup(**changes) -> SurrogateWarmup:
    """A warm-up with a first fit made at draw 80 of ``TUNE`` (weighing costs off)."""
    rng = np.random.default_rng(7)
    warmup = SurrogateWarmup(settings(weighs_costs=False, **changes), TUNE)
    explore(warmup, 80, rng)
    warmup.fit(80, rng, Host(), end_of_tuning=False)
    assert warmup.phase == Phase.SURROGATE
    return warmup


def test_tuning_moves_on_the_surrogate_alone_only_after_learning_and_before_the_last_draws():
    warmup = fitted_warmup(tunes_on_surrogate=True)
    assert warmup.plan.next_refit is not None and not warmup.tunes_alone(100)  # still learning
    warmup.plan.next_refit = None
    assert warmup.tunes_alone(100) and warmup.moves_alone(101)
    assert not warmup.moves_alone(100)  # every ALONE_CHECK_EVERY-th keeps the exact test
    assert [warmup.moves_alone(i) for i in (100 + ALONE_CHECK_EVERY, 111)] == [False, True]
    assert not warmup.tunes_alone(TUNE - FINAL_EXACT_DRAWS)  # the last draws are exact again
    assert warmup.tunes_alone(TUNE - FINAL_EXACT_DRAWS - 1)
    warmup.plan.refit_behind_wall(2 * len(warmup.record), warmup.fitted_rows[1])  # a wall
    assert warmup.plan.for_wall and not warmup.tunes_alone(101)
    for off in (
        fitted_warmup(tunes_on_surrogate=False),
        SurrogateWarmup(settings(tunes_on_surrogate=True), tune=None),  # PyMC 5: length unknown
    ):
        off.plan.next_refit = None
        assert not off.tunes_alone(101)


def test_tuning_alone_waits_for_the_economys_verdict_when_it_weighs_costs():
    warmup = fitted_warmup(tunes_on_surrogate=True)
    warmup.plan.next_refit, warmup.economy.weighs = None, True
    assert not warmup.tunes_alone(101)
    warmup.economy.verdict = Verdict(1e-3, 0.5, 1e-3, 0.5, 100, 100)
    assert warmup.tunes_alone(101)


def test_a_stretch_ended_by_its_checks_stays_ended_and_a_refit_measures_afresh():
    warmup = fitted_warmup(tunes_on_surrogate=True)
    warmup.plan.next_refit = None
    warmup.alone.check(logp=-3.0, surrogate_potential=10.0)
    warmup.alone.end("a test")
    assert not warmup.tunes_alone(101)
    warmup.refit(120, np.random.default_rng(8), Host())  # a new surrogate: a new reference
    assert warmup.alone.reference is None and warmup.alone.ended


def test_a_first_refit_comes_at_the_last_draw_in_time_or_learning_stops():
    # a record of 80 at the first fit: a refit at 160 points, or with at least 120 at the last
    # draw that leaves the adaptation's draws after it
    adaptation, rng = RNSHMC_SCHEDULE.refit_adaptation, np.random.default_rng(9)
    last = TUNE - adaptation
    grown, host = fitted_warmup(), Host()
    assert (grown.plan.next_refit, grown.plan.least_refit) == (160, 120)
    explore(grown, 50, rng)  # 130 points by the last draw: short of 160, more than 120
    grown.fit_if_due(last - 1, rng, host)
    assert grown.plan.learning and host.installed == 0
    grown.fit_if_due(last, rng, host)
    assert host.installed == 1 and not grown.plan.learning  # nothing could follow this one
    short, host = fitted_warmup(), Host()
    explore(short, 20, rng)  # 100 points: the 20 to come fit in until draw TUNE - 100 - 20
    short.fit_if_due(last - 20, rng, host)
    assert short.plan.learning
    short.fit_if_due(last - 19, rng, host)
    assert not short.plan.learning and host.installed == 0


def test_a_wall_brings_a_refit_and_a_fit_clears_it():
    warmup = fitted_warmup()
    explore(warmup, 20, np.random.default_rng(8))  # the record grew past the last fit's
    assert not warmup.wall_crossed(WALL_NATS + 5.0)
    assert warmup.phase == Phase.SURROGATE and warmup.plan.for_wall
    warmup.refit(100, np.random.default_rng(9), Host())
    assert warmup.standing_wall == -np.inf
    warmup.stop_learning()
    assert warmup.phase == Phase.SURROGATE  # no wall stands: the kept draws use the surrogate


def test_a_wall_no_fit_followed_leaves_the_kept_draws_to_exact_nuts(caplog):
    warmup = fitted_warmup()
    assert not warmup.wall_crossed(WALL_NATS + 5.0)  # the record has not grown: no refit yet
    assert warmup.phase == Phase.SURROGATE
    with caplog.at_level("INFO", logger="pymc.rnshmc"):
        warmup.stop_learning()
    assert warmup.phase == Phase.EXACT
    assert "wall of 15 nats" in caplog.text and "no refit followed" in caplog.text


def test_a_wall_met_once_its_refits_are_spent_hands_the_chain_to_exact_nuts():
    warmup = fitted_warmup()
    warmup.plan.wall_refits = WALL_REFITS
    assert warmup.wall_crossed(WALL_NATS)
    assert warmup.phase == Phase.EXACT and not warmup.plan.learning


def test_a_warmup_that_does_not_refit_hands_its_first_wall_to_exact_nuts_at_once():
    warmup = fitted_warmup(learns=False)
    assert warmup.wall_crossed(WALL_NATS)
    assert warmup.phase == Phase.EXACT


def test_a_wall_told_outside_the_surrogate_phase_changes_nothing():
    # pooled chains: another chain's verdict may have handed the warm-up to exact NUTS
    warmup = fitted_warmup()
    explore(warmup, 20, np.random.default_rng(8))  # a wall's refit could come
    warmup.phase, warmup.plan.next_refit = Phase.EXACT, None
    assert not warmup.wall_crossed(WALL_NATS + 5.0)
    assert warmup.phase == Phase.EXACT and not warmup.plan.learning
    assert warmup.standing_wall == -np.inf

"""The economy: measured costs, and the three choices they settle (logp function, refits, verdict).

The rules are plain functions of measured numbers (tested on numbers), and the chain acts on
them: a surrogate that is slow to draw on a cheap model gives way to exact NUTS, says why in one
line, and the draws stay exact.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from types import SimpleNamespace

import numpy as np
import pymc as pm
import pytest

from pymc_rnshmc import RNSHMC, RandomNetworkSurrogate
from pymc_rnshmc.step_methods.economy import (
    FIT_LIMIT_SHARE,
    SETUP_SHARE,
    VERDICT_COST_RATIO,
    VERDICT_DRAWS,
    VERDICT_FIT_ERROR,
    VERDICT_MIN_ESS,
    DrawCosts,
    Economy,
    Verdict,
    effective_draws_per_draw,
    logp_function_pays,
    refit_pays,
    sampling_verdict,
    unchecked_fit_too_poor,
)
from pymc_rnshmc.step_methods.exact_model import ExactModel
from pymc_rnshmc.step_methods.schedule import Phase
from pymc_rnshmc.step_methods.warmup import SurrogateWarmup
from tests.step_methods.helpers import SlowFit, sample_with
from tests.step_methods.test_warmup import settings


def ar1(n: int, rho: float, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    draws = np.zeros((n, dim))
    for i in range(1, n):
        draws[i] = rho * draws[i - 1] + np.sqrt(1 - rho**2) * rng.standard_normal(dim)
    return draws


# ----------------------------------------------------------------- measured costs
def test_draw_costs_leave_out_the_compilation_and_the_first_surrogate_draws():
    costs = DrawCosts()
    for seconds, gradients in [(1.5, 7), (0.01, 7), (0.02, 15), (0.01, 7), (0.03, 15)]:
        costs.note_exact(seconds, gradients)
    assert costs.compile_seconds() == pytest.approx(1.5 - 0.015)
    assert costs.seconds_per_gradient() == pytest.approx(0.07 / 44)
    assert costs.exact_draw_seconds() == pytest.approx(np.mean([0.02, 0.01, 0.03]))
    for seconds in (0.9, 0.5, 0.002, 0.004):
        costs.note_surrogate(seconds)
    assert costs.surrogate_draw_seconds() == pytest.approx(0.003)
    costs.fitted()
    assert np.isnan(costs.surrogate_draw_seconds())


def test_unknown_costs_are_nan_or_no_compilation():
    costs = DrawCosts()
    assert np.isnan(costs.exact_draw_seconds())
    assert np.isnan(costs.seconds_per_gradient())
    assert costs.compile_seconds() == 0.0


# ----------------------------------------------------------------- the three rules
def test_the_logp_function_pays_on_a_costly_model_and_not_on_a_cheap_one():
    # a second to compile; 2000 end points left
    assert not logp_function_pays(50e-6, compile_seconds=1.0, evaluations_left=2000)
    assert logp_function_pays(5e-3, compile_seconds=1.0, evaluations_left=2000)
    assert logp_function_pays(50e-6, compile_seconds=0.0, evaluations_left=2000)  # compiled
    assert logp_function_pays(np.nan, compile_seconds=1.0, evaluations_left=2000)


def test_a_refit_pays_where_surrogate_draws_save_more_than_it_costs():
    # last fit 1 s on half the points: a refit is predicted at 2 s
    assert refit_pays(1.0, 2.0, 1e-3, 50e-3, draws_left=1000)  # saves 49 s
    assert not refit_pays(1.0, 2.0, 1e-3, 4e-3, draws_left=1000)  # saves 3 s
    assert not refit_pays(0.1, 2.0, 1e-3, 0.5e-3, draws_left=1000)  # surrogate draws dearer
    assert refit_pays(1.0, 2.0, np.nan, 5e-3, draws_left=1000)  # not measured yet


def test_an_unchecked_fit_is_too_poor_where_the_verdict_would_give_it_up():
    assert unchecked_fit_too_poor(VERDICT_FIT_ERROR + 0.01)
    assert not unchecked_fit_too_poor(VERDICT_FIT_ERROR - 0.01)
    assert not unchecked_fit_too_poor(np.nan), "a fit to values only has no gradient error"


def test_effective_draws_per_draw_of_independent_and_sticky_chains():
    independent = effective_draws_per_draw(np.random.default_rng(1).standard_normal((2000, 3)))
    sticky = effective_draws_per_draw(ar1(2000, 0.9, 3, seed=2))
    assert 0.7 < independent < 1.4
    assert 0.02 < sticky < 0.12  # (1 - rho) / (1 + rho) = 0.053 for q
    assert np.isnan(effective_draws_per_draw(np.zeros((2, 3))))


def test_a_window_that_has_not_crossed_the_posterior_gets_a_low_ess():
    run = np.random.default_rng(5).standard_normal((4000, 2))
    one_side = run[run[:, 0] > 0.5][:200]  # independent draws, from one side only
    assert effective_draws_per_draw(one_side) > 0.6
    assert effective_draws_per_draw(one_side, reference=run) < 0.2


def verdict(surrogate_seconds, surrogate_rho, exact_rho=0.0, exact_seconds=1e-3, n=200):
    costs = DrawCosts()
    for _ in range(n):
        costs.note_exact(exact_seconds, 7)
    costs.note_surrogate(0.0)
    costs.note_surrogate(0.0)
    for _ in range(n):
        costs.note_surrogate(surrogate_seconds)
    exploration = ar1(2 * n, exact_rho, 2, seed=3)
    since_fit = ar1(n, surrogate_rho, 2, seed=4)
    seconds = (costs.exact_draw_seconds(), costs.surrogate_draw_seconds())
    return sampling_verdict(seconds, exploration, since_fit)


def test_the_verdict_keeps_a_surrogate_that_pays_and_gives_up_one_that_does_not():
    cheaper = verdict(surrogate_seconds=0.5e-3, surrogate_rho=0.0)
    assert cheaper.reliable and cheaper.surrogate_pays
    dearer = verdict(surrogate_seconds=5e-3, surrogate_rho=0.0)
    assert dearer.reliable and not dearer.surrogate_pays
    assert "5 ms" in dearer.reason() and "1 ms" in dearer.reason()
    assert "with exact NUTS" in dearer.reason()
    assert "with a random walk" in dearer.reason("a random walk")  # a model without gradients
    sticky = verdict(surrogate_seconds=0.5e-3, surrogate_rho=0.97)  # cheap, but barely moves
    assert sticky.reliable and not sticky.surrogate_pays


def test_the_verdict_keeps_the_surrogate_when_nuts_estimate_rests_on_too_few_draws():
    slow_nuts = verdict(surrogate_seconds=5e-3, surrogate_rho=0.0, exact_rho=0.97)
    assert slow_nuts.exact_ess * slow_nuts.exact_draws < VERDICT_MIN_ESS
    assert not slow_nuts.reliable and slow_nuts.surrogate_pays
    unknown = Verdict(np.nan, 1.0, 1e-3, 1.0, 100, 100)
    assert unknown.surrogate_pays


@pytest.mark.parametrize(
    ("fit_error", "exact_seconds", "pays"),
    [
        (2 * VERDICT_FIT_ERROR, 1e-3, False),  # a poor fit, draws as dear as NUTS's
        (2 * VERDICT_FIT_ERROR, VERDICT_COST_RATIO * 1e-3, True),  # a poor fit, cheap draws
        (0.5 * VERDICT_FIT_ERROR, 1e-3, True),  # a good fit
        (np.nan, 1e-3, True),  # no held-out error known
    ],
)
def test_a_poor_fit_is_given_up_unless_its_draws_are_much_cheaper(fit_error, exact_seconds, pays):
    # the windows say the surrogate mixes 2.5 times better per draw, on 100 draws each
    verdict = Verdict(exact_seconds, 0.3, 1e-3, 0.75, 100, 100, fit_error=fit_error)
    assert verdict.reliable and verdict.surrogate_pays is pays
    assert verdict.poor_fit is not pays
    if not pays:
        assert f"{100 * fit_error:.0f} %" in verdict.reason()


@pytest.mark.parametrize("fit_error", [2 * VERDICT_FIT_ERROR, 0.5 * VERDICT_FIT_ERROR])
def test_a_poor_fit_is_given_up_whatever_it_costs_where_exact_nuts_takes_a_new_metric(fit_error):
    """The exploration measured a diagonal metric that exact NUTS would no longer have."""
    cheap = Verdict(10 * VERDICT_COST_RATIO * 1e-3, 0.3, 1e-3, 0.75, 100, 100, fit_error, True)
    poor = fit_error > VERDICT_FIT_ERROR
    assert cheap.poor_fit is poor and cheap.surrogate_pays is not poor
    assert not dataclasses.replace(cheap, new_metric=False).poor_fit  # its draws are cheap
    if poor:
        assert "better metric" in cheap.reason()


def test_the_economy_judges_with_the_fit_error_it_is_given():
    economy = Economy()
    for _ in range(200):
        economy.note_draw(0, 7, 1e-3)
    economy.surrogate_started(iteration=200)
    for _ in range(VERDICT_DRAWS):
        economy.note_draw(1, 0, 1e-3)
    draws = np.concatenate([ar1(200, 0.0, 2, seed=1), ar1(VERDICT_DRAWS, 0.0, 2, seed=2)])
    verdict = economy.judge(draws, fit_error=0.3)
    assert verdict.fit_error == 0.3 and not verdict.surrogate_pays
    assert np.isnan(Economy().judge(draws).fit_error)


@pytest.mark.parametrize(("values_only", "gives_up"), [(False, True), (True, False)])
def test_the_warmup_judges_a_gradient_fit_by_its_error_and_a_values_fit_without(
    values_only, gives_up
):
    warmup = SurrogateWarmup(settings(values_only=values_only), tune=1000, draws=1000)
    warmup.surrogate = SimpleNamespace(report=SimpleNamespace(gradient_error=0.3))
    for _ in range(200):
        warmup.economy.note_draw(0, 7, 1e-3)
    warmup.economy.surrogate_started(iteration=200)
    for _ in range(VERDICT_DRAWS):
        warmup.economy.note_draw(1, 0, 1e-3)
    draws = np.concatenate([ar1(200, 0.0, 3, seed=1), ar1(VERDICT_DRAWS, 0.0, 3, seed=2)])
    verdict = warmup.judge_sampling(draws)
    assert verdict.poor_fit is gives_up and (warmup.phase == Phase.EXACT) is gives_up


def warmup_due_for_a_second_refit(weighs_costs: bool, surrogate_seconds: float):
    warmup = SurrogateWarmup(settings(weighs_costs=weighs_costs), tune=1000, draws=1000)
    warmup.economy.fit_took(600, 2.0, refit=False)
    warmup.economy.fit_took(600, 2.0, refit=True)
    warmup.plan.next_refit = warmup.plan.least_refit = 600
    for point in np.random.default_rng(1).normal(size=(600, 3)):  # the refit is due
        warmup.record.append(point, 0.5 * point @ point, point)
    for _ in range(50):
        warmup.economy.note_draw(0, 15, 5e-3)
        warmup.economy.note_draw(1, 0, surrogate_seconds)
    return warmup


@pytest.mark.parametrize(
    ("weighs_costs", "surrogate_seconds", "refits"),
    [(True, 1e-3, True), (True, 4e-3, False), (False, 4e-3, True)],
)
def test_a_warmup_refits_again_only_where_it_pays_when_it_weighs_costs(
    weighs_costs, surrogate_seconds, refits
):
    # the last fit took 2 s (the record has not grown here); 1200 draws left, 5 ms an exact draw
    warmup = warmup_due_for_a_second_refit(weighs_costs, surrogate_seconds)
    assert warmup.plan.refit_due(600, 200, warmup.draws_left(800), chains=1) is refits
    assert warmup.plan.learning is refits


def test_the_economy_sorts_draws_by_phase_and_judges_once_on_its_windows():
    economy = Economy()
    economy.note_draw(0, 7, 2e-3)
    economy.note_draw(3, 7, 9.0)  # exact for good: not a cost of either kind
    assert economy.costs.exact == [2e-3] and economy.costs.exact_gradients == [7]
    economy.surrogate_started(iteration=200)
    assert not economy.verdict_due
    for phase in [1, 2] * (VERDICT_DRAWS // 2):
        economy.note_draw(phase, 0, 1e-3)
    assert economy.verdict_due
    draws = np.concatenate([ar1(200, 0.0, 2, seed=1), ar1(VERDICT_DRAWS, 0.0, 2, seed=2)])
    verdict = economy.judge(draws)
    assert (verdict.exact_draws, verdict.surrogate_draws) == (100, VERDICT_DRAWS)
    assert economy.verdict is verdict and not economy.verdict_due
    economy.surrogate_started(iteration=400)  # a refit: fresh draw costs, the first fit stays
    assert economy.first_fit_at == 200 and economy.costs.surrogate == []


def test_the_setup_budget_and_the_fit_limit_are_shares_of_what_exact_nuts_still_needs():
    economy = Economy()
    assert economy.setup_budget(draws_left=1000) == np.inf  # nothing measured yet
    assert economy.fit_limit(draws_left=1000) == np.inf
    for _ in range(10):
        economy.note_draw(0, 7, 2e-3)
    assert economy.setup_budget(draws_left=1000) == pytest.approx(SETUP_SHARE * 2.0)
    assert economy.fit_limit(draws_left=1000) == pytest.approx(FIT_LIMIT_SHARE * 2.0)
    # one budget for the chain: what earlier fits took is spent
    assert economy.setup_budget(1000, spent=0.25) == pytest.approx(SETUP_SHARE * 2.0 - 0.25)
    unweighed = Economy(weighs=False, costs=economy.costs)
    assert unweighed.setup_budget(1000) == unweighed.fit_limit(1000) == np.inf


def test_a_poor_fit_awaiting_a_verdict_that_can_still_come_skips_its_setup():
    economy = Economy()
    poor, fair = VERDICT_FIT_ERROR * 1.01, VERDICT_FIT_ERROR * 0.99
    assert economy.skips_setup(poor, tuning_draws_left=VERDICT_DRAWS)
    assert economy.skips_setup(poor, tuning_draws_left=None)  # PyMC 5: not known
    assert not economy.skips_setup(fair, VERDICT_DRAWS)
    assert not economy.skips_setup(np.nan, VERDICT_DRAWS)  # a fit to values only
    assert not economy.skips_setup(poor, VERDICT_DRAWS - 1)  # no verdict can follow
    assert not Economy(weighs=False).skips_setup(poor, VERDICT_DRAWS)
    economy.verdict = Verdict(1.0, 0.5, 0.1, 0.5, 100, 100, fit_error=0.3)
    assert not economy.skips_setup(poor, VERDICT_DRAWS)  # after the verdict: the budget
    assert economy.verdict.kept_poor_fit
    assert not dataclasses.replace(economy.verdict, fit_error=fair).kept_poor_fit


def test_an_economy_that_does_not_weigh_measures_but_never_says_no():
    economy = Economy(weighs=False)
    economy.fit_took(100, 60.0, refit=True)
    economy.surrogate_started(iteration=10)
    for _ in range(VERDICT_DRAWS):
        economy.note_draw(1, 0, 1.0)
    assert economy.refit_pays(record_size=10_000, draws_left=1) and not economy.verdict_due
    assert len(economy.costs.surrogate) == VERDICT_DRAWS


# ----------------------------------------------------------------- the exact model
def test_logp_by_the_joint_function_is_the_logp():
    with pm.Model() as model:
        pm.Normal("x", mu=[1.0, -1.0], sigma=[0.5, 2.0])
    exact = ExactModel(model, model.value_vars)
    position = np.array([0.3, 0.7])
    alone = exact.logp(position)
    exact.logp_by_joint = True
    assert exact.logp(position) == pytest.approx(alone, rel=1e-12)
    assert exact.evaluate(position).logp == pytest.approx(alone, rel=1e-12)


# ----------------------------------------------------------------- a chain that gives way
class SlowSurrogate(RandomNetworkSurrogate):
    """A good network whose gradient at one point takes three milliseconds: its draws cannot pay.

    Rows (the simulations that choose the dynamics) stay fast.
    """

    def potential_and_gradient(self, position):
        if np.ndim(position) == 1:
            time.sleep(3e-3)
        return super().potential_and_gradient(position)

    def gradient(self, position):
        if np.ndim(position) == 1:
            time.sleep(3e-3)
        return super().gradient(position)


def sampled_and_told(caplog, **options):
    """One chain of RNSHMC on two independent normals, and the package's log lines."""
    with pm.Model() as model:
        pm.Normal("x", mu=[1.0, -1.0], sigma=[0.5, 2.0])
    with caplog.at_level(logging.INFO, logger="pymc.rnshmc"):
        idata, step = sample_with(RNSHMC, model, chains=1, **options)
    return idata, step, [record.getMessage() for record in caplog.records]


def test_a_surrogate_that_cannot_pay_gives_way_to_exact_nuts(caplog):
    idata, step, lines = sampled_and_told(
        caplog,
        tune=600,
        draws=400,
        seed=5,
        surrogate=SlowSurrogate(),
        safety_net=0.0,
        weigh_costs=True,
        exploration_steps=200,  # NUTS's cost rests on enough effective draws to be trusted
    )
    told = [line for line in lines if "does not pay" in line]
    assert len(told) == 1 and "exact NUTS" in told[0]
    assert not step._chain.warmup.economy.verdict.surrogate_pays
    phase = np.asarray(idata.sample_stats["phase"].values).ravel()
    assert np.all(phase == 3)
    draws = np.asarray(idata.posterior["x"].values).reshape(-1, 2)
    assert np.all(np.abs(draws.mean(axis=0) - [1.0, -1.0]) < 4 * np.array([0.5, 2.0]) / 10)


@pytest.mark.parametrize("weigh_costs", [True, False])
def test_a_first_fit_slower_than_finishing_with_exact_nuts_is_abandoned(weigh_costs, caplog):
    clock = time.perf_counter()
    idata, step, lines = sampled_and_told(
        caplog,
        tune=300,
        draws=200,
        seed=6,
        surrogate=SlowFit(1.0),  # far more than this cheap model's NUTS needs
        weigh_costs=weigh_costs,
        exploration_steps=100,
    )
    seconds = time.perf_counter() - clock
    told = [line for line in lines if "cannot pay" in line]
    phases = set(np.asarray(idata.sample_stats["phase"].values).ravel().tolist())
    if not weigh_costs:  # nothing weighed: the slow fit is made and its surrogate draws
        assert not told and step._chain.warmup.phase != Phase.EXACT
        return
    assert len(told) == 1 and "stopped after" in told[0] and "exact NUTS" in told[0]
    assert step._chain.warmup.phase == Phase.EXACT and step._chain.warmup.surrogate is None
    assert len(phases) == 1  # every kept draw exact NUTS's
    assert seconds < 1.0  # the fit was not waited for
    draws = np.asarray(idata.posterior["x"].values).reshape(-1, 2)
    assert np.all(np.abs(draws.mean(axis=0) - [1.0, -1.0]) < 4 * np.array([0.5, 2.0]) / 8)

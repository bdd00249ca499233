"""The tuned, frozen kernel of every sampler leaves the posterior invariant (tests/stationarity).

Each case tunes a step with ``pm.sample`` (one chain, ``TUNE`` draws, the protocol tests'
settings), pushes ``N`` independent exact draws of a known posterior through ``k`` transitions of
the frozen step, and compares the pushed draws with the posterior: means and a scale in iid
standard errors, five quantiles by binomial counts, and a two-sample KS test against fresh exact
draws. Pass: ``max |z| < 4.5`` and ``KS p > 1e-3``. The kernel is the sampler's as a user gets
it, safety net included (its exact draws are a fixed share of the transitions after tuning).

False alarms of an exact kernel: about 1.1e-3 per case (``1e-4`` from the 14 z-scores, ``1e-3``
from the Bonferroni-combined KS test), so about 3 % over the 25 exact-kernel checks of the default
run (less: the ``k = 1`` and ``k = 5`` checks share their starts). The seeds are fixed, so the
outcome is reproducible; a failure is a reason to look, not to reseed.

Power: the deliberately broken kernels must fail with the same ``N = 1000``. ``ShiftedRNSHMC`` (an
exact sampler of the posterior moved by 0.25 sd, ``tests/calibration.py``) gives ``max |z|`` 6-15,
and ``SurrogateAcceptanceRNSHMC`` (the Metropolis test on the surrogate, not the model) with a
surrogate flattened to 0.3 times its potential 7-22 (PyMC 5 and 6, ``k`` = 1 and 5). The same
flattened surrogate, and one walled off beyond 1 sd of the first coordinate, must pass with the
exact test: a wrong surrogate slows the kernel, it does not bias it.

ARNSHMC (default ``freeze_after_tuning=False``) goes on refreshing its surrogate after tuning from
the proposals it sees, so its pushes share an adaptive surrogate rather than one kernel; a first
transition from a fresh start is still exactly invariant (the surrogate depends only on earlier,
independent starts), later ones only up to the diminishing adaptation.

RNSRMHMC's generalized leapfrog costs 25-50 ms a transition (the others 0.2-0.8 ms): by default
it runs a smaller subset (the banana, ``N = 300``, ``k = 1``), and so do the wrong surrogates
with the exact test (the banana); the full grids are ``-m slow``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy import stats

from pymc_rnshmc import RNSHMC, RNSRMHMC
from tests.calibration import ShiftedRNSHMC, SurrogateAcceptanceRNSHMC
from tests.models import banana_reference_moments
from tests.stationarity import (
    KS_LIMIT,
    POSTERIORS,
    Z_LIMIT,
    BananaPosterior,
    StationarityRun,
    StudentTPosterior,
    binomial_z,
    compare,
    push,
    run_stationarity,
    t_absolute_moment,
    tuned_step,
)
from tests.step_methods.conftest import SAMPLERS, TUNE
from tests.step_methods.helpers import DistortedSurrogate

N = 1000
"""Exact draws pushed per case (the benchmark, ``benchmarks/stationarity.py``, pushes more)."""
K_VALUES = (1, 5)
SEED = 2024
MIN_MOVED = 0.3
"""Share of pushed draws that must have left their start: a kernel that stays passes trivially."""
DISTORTIONS = {"wall": 1.0, "flattened": 0.3}
"""Deliberately wrong surrogates (:class:`~tests.step_methods.helpers.DistortedSurrogate`): a wall
rising 1 training sd above the centre of the first coordinate; the potential times 0.3 (a surrogate
accepting on it targets a posterior 1.8 times as wide)."""


@functools.cache
def posterior(name: str):
    """The exact posterior called ``name`` (built once: the banana's quantiles take a moment)."""
    return POSTERIORS[name]()


@functools.cache
def sampler_run(case_index: int, posterior_name: str, n: int = N) -> StationarityRun:
    """The case's step tuned on the posterior and pushed to every ``k`` (shared by the ``k``)."""
    case = SAMPLERS[case_index]
    return run_stationarity(
        functools.partial(case.make, safety_net=None),  # as users get it: the net's default
        posterior(posterior_name),
        n=n,
        tune=TUNE,
        seed=SEED,
        k_values=K_VALUES,
        gradient=not case.black_box,
    )


def assert_stationary(run: StationarityRun, k: int, label: str) -> None:
    result = run.results[k]
    message = f"{label}: {result.summary()}; z = {result.z}"
    assert run.phase == "surrogate", (
        f"{label}: tuning ended in phase {run.phase} ({run.tuning_attempts} attempts)"
    )
    assert result.moved > MIN_MOVED, message
    assert result.max_abs_z < Z_LIMIT, message
    assert result.ks_pvalue > KS_LIMIT, message


def sampler_params():
    for index, case in enumerate(SAMPLERS):
        marks = [pytest.mark.slow] if case.step_class is RNSRMHMC else []
        yield pytest.param(index, id=case.id, marks=marks)


# ----------------------------------------------------------------------------- the harness
def test_exact_banana_draws_match_the_quadrature_reference():
    banana = BananaPosterior()
    means, sds = banana_reference_moments()
    np.testing.assert_allclose(banana.mean, means, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(np.sqrt(banana.variance), sds, rtol=1e-6)
    rng = np.random.default_rng(1)
    draws = banana.sample(20_000, rng)
    result = compare(draws, banana, banana.sample(20_000, rng))
    assert result.passed, result.summary()


def test_exact_banana_draws_match_rejection_sampling_from_the_prior():
    # b2's marginal is the N(0, 1) prior times N(ybar; b2^2, 1 + 4 / n) <= its peak: rejection
    # from the prior is exact with no grid, an independent check of the inverse CDF
    banana = BananaPosterior()
    rng = np.random.default_rng(2)
    candidates = rng.normal(size=60_000)
    ratio = np.exp(-0.5 * (banana.ybar - candidates**2) ** 2 / (1 + 4 / banana.data.size))
    b2 = candidates[rng.uniform(size=candidates.size) < ratio]
    b1 = rng.normal(banana.conditional_mean(b2), banana.conditional_sd)
    result = compare(np.column_stack([b1, b2]), banana, banana.sample(b2.size, rng))
    assert b2.size > 10_000
    assert result.passed, result.summary()


def test_exact_student_t_draws_and_summaries():
    assert t_absolute_moment(4.0) == pytest.approx(1.0, rel=1e-12)
    assert t_absolute_moment(7.0) == pytest.approx(stats.t(7).expect(abs), rel=1e-8)
    student = StudentTPosterior()
    rng = np.random.default_rng(3)
    draws = student.sample(20_000, rng)
    assert abs(np.corrcoef(draws.T)[0, 1] - 0.8) < 0.02
    result = compare(draws, student, student.sample(20_000, rng))
    assert result.passed, result.summary()


def test_the_binomial_score_is_conservative_in_the_tails():
    # P(|z| > c) under Binomial(n, p) is at most 2 Phi(-c) even with few expected counts
    for n, p in [(1000, 0.01), (1500, 0.05), (500, 0.5)]:
        counts = np.arange(n + 1)
        scores = np.array([binomial_z(c, n, p) for c in counts])
        for c in (2.0, 3.0, 4.5):
            assert stats.binom.pmf(counts, n, p)[np.abs(scores) > c].sum() <= 2 * stats.norm.sf(c)


def test_the_comparison_sees_a_small_shift_and_a_wrong_scale():
    banana = BananaPosterior()
    rng = np.random.default_rng(4)
    draws, reference = banana.sample(N, rng), banana.sample(N, rng)
    assert compare(draws, banana, reference).passed
    shifted = draws + 0.25 * np.sqrt(banana.variance)
    assert not compare(shifted, banana, reference).passed
    mean = banana.mean
    assert not compare(mean + 1.2 * (draws - mean), banana, reference).passed


def test_each_fresh_start_is_evaluated_and_a_continuing_chain_is_not():
    # The step caches its point's logp keyed by position: a fresh start must be evaluated, not
    # judged with the previous chain's cached logp.
    banana = posterior("banana")
    model = banana.model()
    # the surrogate kernel alone: the safety net's exact NUTS draws evaluate with PyMC's function
    make = functools.partial(RNSHMC, exploration_steps=200, safety_net=0.0, weigh_costs=False)
    step = tuned_step(make, model, tune=TUNE, seed=5)
    evaluated = []
    logp = step.exact_model.logp

    def recording_logp(position):
        evaluated.append(np.array(position, copy=True))
        return logp(position)

    step.exact_model.logp = recording_logp
    starts = banana.sample(20, np.random.default_rng(6))
    pushed = push(step, model, starts, k_values=(1, 2))
    evaluations = pushed.stats["n_logp_evals"]
    np.testing.assert_array_equal(evaluations[:, 0], 2)  # the start, then the proposal
    np.testing.assert_array_equal(evaluations[:, 1], 1)  # the proposal only: the start is cached
    assert len(evaluated) == 3 * len(starts)
    for i, start in enumerate(starts):
        assert np.array_equal(evaluated[3 * i], start)
        assert not any(np.array_equal(e, pushed.draws[1][i]) for e in evaluated[3 * i + 2 :])


# ----------------------------------------------------------------------------- every sampler
@pytest.mark.parametrize("k", K_VALUES)
@pytest.mark.parametrize("posterior_name", list(POSTERIORS))
@pytest.mark.parametrize("case_index", sampler_params())
def test_the_frozen_kernel_leaves_the_posterior_invariant(case_index, posterior_name, k):
    run = sampler_run(case_index, posterior_name)
    assert run.share("used_surrogate") > 0.5
    assert_stationary(run, k, f"{SAMPLERS[case_index].id} on {posterior_name}")


def test_the_riemannian_kernel_leaves_the_banana_invariant():
    # the default run's share of RNSRMHMC (25-50 ms a transition): one posterior, k = 1, N = 300
    index = next(i for i, case in enumerate(SAMPLERS) if case.step_class is RNSRMHMC)
    banana = posterior("banana")
    make = functools.partial(SAMPLERS[index].make, safety_net=None)
    run = run_stationarity(make, banana, n=300, tune=TUNE, seed=SEED, k_values=(1,))
    assert_stationary(run, 1, "RNSRMHMC on banana")


# ----------------------------------------------------------------------------- wrong and broken
def wrong_surrogate_run(step_class, posterior_name: str, kind: str, **options) -> StationarityRun:
    """``step_class`` with a fixed, deliberately wrong surrogate (no refits, no collapse watch,
    and kept however poorly it pays: ``weigh_costs=False``).

    Trajectories are capped (64 leapfrog steps, trees of depth 6), which keeps an exact kernel
    exact and bounds the cost: accepting on the flattened surrogate drove the leapfrog step size
    to its lower bound (about 150 steps a trajectory), and NUTS trees on it grew long.
    """
    surrogate = DistortedSurrogate(kind, DISTORTIONS[kind])
    options = {
        "max_steps": 64,
        "max_treedepth": 6,
        "refit_during_tuning": False,
        "weigh_costs": False,
        **options,
    }
    return run_stationarity(
        lambda: step_class(exploration_steps=200, surrogate=surrogate, **options),
        posterior(posterior_name),
        n=N,
        tune=TUNE,
        seed=SEED,
        k_values=K_VALUES,
    )


@pytest.mark.parametrize(("kind", "dynamics"), [("wall", "hmc"), ("flattened", "nuts")])
@pytest.mark.parametrize(
    "posterior_name", ["banana", pytest.param("student_t", marks=pytest.mark.slow)]
)
def test_a_wrong_surrogate_slows_the_kernel_but_keeps_it_exact(posterior_name, kind, dynamics):
    run = wrong_surrogate_run(RNSHMC, posterior_name, kind, dynamics=dynamics)
    for k in K_VALUES:
        assert_stationary(run, k, f"RNSHMC-{dynamics} with a {kind} surrogate on {posterior_name}")


@pytest.mark.parametrize("posterior_name", list(POSTERIORS))
def test_accepting_on_a_wrong_surrogate_is_caught(posterior_name):
    run = wrong_surrogate_run(SurrogateAcceptanceRNSHMC, posterior_name, "flattened")
    assert run.phase == "surrogate"
    for k in K_VALUES:
        result = run.results[k]
        assert result.moved > MIN_MOVED
        assert not result.passed, result.summary()


@pytest.mark.parametrize("posterior_name", list(POSTERIORS))
def test_a_kernel_moved_by_a_quarter_sd_is_caught(posterior_name):
    run = run_stationarity(
        lambda: ShiftedRNSHMC(shift=0.25, exploration_steps=200),
        posterior(posterior_name),
        n=N,
        tune=TUNE,
        seed=SEED,
        k_values=K_VALUES,
    )
    assert run.phase == "surrogate"
    for k in K_VALUES:
        result = run.results[k]
        assert result.max_abs_z > Z_LIMIT, result.summary()
        assert not result.passed

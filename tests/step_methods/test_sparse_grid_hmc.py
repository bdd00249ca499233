"""SparseGridHMC: exact posteriors with a precomputed grid, inside and outside its box."""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from pymc_rnshmc import SparseGridHMC, SurrogateWarning
from pymc_rnshmc.workloads import banana
from tests.checks import assert_moments, posterior_draws, sample_stat
from tests.models import (
    NORMAL_MEAN,
    NORMAL_SD,
    banana_reference_moments,
    correlated_normal,
    gamma_poisson,
    independent_normal,
)
from tests.step_methods.helpers import assert_correlated_normal, sample_with, surrogate_draws


def run(model, tune=400, draws=1500, chains=2, seed=40, cores=1, **step_options):
    return sample_with(
        SparseGridHMC,
        model,
        tune=tune,
        draws=draws,
        chains=chains,
        seed=seed,
        cores=cores,
        **step_options,
    )


def test_correlated_normal_with_a_laplace_box():
    idata, step = run(correlated_normal())
    used = surrogate_draws(idata)
    assert_correlated_normal(idata, correlation=False)
    report = step.surrogate.report
    assert report.domain == "laplace" and report.n_points <= 2000
    # after tuning: one exact logp per surrogate draw, exact gradients only outside the box
    outside = sample_stat(idata, "steps_outside_domain")[used]
    np.testing.assert_array_equal(sample_stat(idata, "n_gradient_evals")[used], outside)
    assert outside.mean() < 0.5


def test_independent_normal_with_a_box_from_exploration_draws():
    idata, step = run(independent_normal(), domain="exploration", level=3)
    assert step.surrogate.report.domain == "exploration"
    x = posterior_draws(idata, "x")
    for i in range(3):
        assert_moments(x[..., i], NORMAL_MEAN[i], NORMAL_SD[i], f"x[{i}]")


def test_gamma_poisson_through_the_log_transform():
    idata, _ = run(gamma_poisson())
    posterior = stats.gamma(14, scale=1 / 6)
    assert_moments(posterior_draws(idata, "rate"), posterior.mean(), posterior.std(), "rate")


@pytest.mark.parametrize("grid", ["sparse", "full"])
def test_banana_against_quadrature(grid):
    # the Laplace box misses the curved arms: domain="auto" places the box around the draws
    # the full grid as fine as the paper's (80 x 80 cells): coarser cells miss the thin ridge
    options = {"max_points": 6400} if grid == "full" else {}
    idata, step = run(banana(), tune=600, draws=2000, grid=grid, **options)
    assert step.surrogate.report.domain == "exploration"
    assert step.surrogate.report.grid == grid
    means, sds = banana_reference_moments()
    b = posterior_draws(idata, "b")
    for i in range(2):
        assert_moments(b[..., i], means[i], sds[i], f"b[{i}]", min_ess=150)


def test_correlated_normal_with_a_surplus_refined_grid():
    idata, step = run(correlated_normal(), refine=True, max_points=300)
    report = step.surrogate.report
    assert report.n_points <= 300 and report.level >= 3
    assert_correlated_normal(idata, "refined grid", correlation=False)


@pytest.mark.slow
def test_banana_with_a_surplus_refined_grid():
    idata, step = run(banana(), tune=600, draws=1500, chains=1, refine=True, max_points=800)
    report = step.surrogate.report
    assert report.n_points <= 800
    # refined beyond the isotropic level that fits the budget (level 7: 705 points)
    assert report.level > 7
    means, sds = banana_reference_moments()
    b = posterior_draws(idata, "b")
    for i in range(2):
        assert_moments(b[..., i], means[i], sds[i], f"refined b[{i}]", min_ess=100)


def test_correlated_normal_with_a_force_map():
    idata, step = run(correlated_normal(), grid="full")
    report = step.surrogate.report
    assert report.grid == "full" and report.cells_per_dimension == 44 and report.n_points == 1936
    used = surrogate_draws(idata)
    outside = sample_stat(idata, "steps_outside_domain")[used]
    np.testing.assert_array_equal(sample_stat(idata, "n_gradient_evals")[used], outside)
    np.testing.assert_array_equal(sample_stat(idata, "n_logp_evals")[used], outside + 1)
    assert_correlated_normal(idata, "force map", correlation=False)


def test_a_deliberately_coarse_force_map_is_slow_but_exact():
    # five cells per axis: 25 force vectors for the whole posterior
    idata, step = run(correlated_normal(), grid="full", cells_per_dimension=5, draws=1000)
    assert step.surrogate.report.error_estimate > 1.0
    assert_correlated_normal(idata, "5 x 5 force map", min_ess=100, correlation=False)


def test_the_approximate_complete_variant_warns_reports_its_bound_and_skips_exact_logps():
    with pytest.warns(SurrogateWarning, match=r"approximation of the posterior.*bound"):
        idata, step = run(correlated_normal(), exact_acceptance=False, draws=1000)
    report = step.surrogate.report
    assert 0.0 < report.kl_bound == 2.0 * report.max_potential_error < 0.1
    approximate = sample_stat(idata, "approximate_test")
    assert approximate.mean() > 0.9
    outside = sample_stat(idata, "steps_outside_domain")
    logp_evals = sample_stat(idata, "n_logp_evals")
    assert np.all(logp_evals[approximate & (outside == 0)] == 0)
    # a fine grid of a Gaussian: the approximate target is close to the posterior
    assert_correlated_normal(idata, "complete variant", correlation=False)


@pytest.mark.parametrize("gradient", [True, False], ids=["gradients", "no gradients"])
def test_the_approximate_variant_takes_no_safety_net_whose_draws_target_the_posterior(gradient):
    with correlated_normal(gradient=gradient):
        with pytest.raises(ValueError, match="takes no safety_net"):
            SparseGridHMC(exact_acceptance=False, safety_net=0.2)
        step = SparseGridHMC(exact_acceptance=False)  # the net is on without gradients
    assert step.safety_net.probability == 0.0


def test_exact_acceptance_is_the_default_and_never_approximates():
    idata, _ = run(correlated_normal(), tune=300, draws=200, chains=1)
    assert not sample_stat(idata, "approximate_test").any()


def test_leaving_and_reentering_a_small_box_keeps_the_posterior_exact():
    # a box holding half the mass: trajectories keep crossing its boundary
    idata, _ = run(correlated_normal(), mass=0.5, level=3, draws=2000)
    outside = sample_stat(idata, "steps_outside_domain")
    n_steps = sample_stat(idata, "n_steps")
    assert 0.1 < outside.sum() / (n_steps.sum() + n_steps.size) < 0.9
    assert (outside == 0).any() and (outside > 0).any()
    assert_correlated_normal(idata, "half-mass box", correlation=False)


def test_a_grid_beyond_max_error_is_refused_and_exact_nuts_samples():
    # no grid of the log-gamma potential is within 1e-6 nats: refused, sampled by exact NUTS
    refused = r"above max_error = 1e-06.*continues with exact NUTS"
    with pytest.warns(SurrogateWarning, match=refused):
        idata, step = run(gamma_poisson(), max_error=1e-6, draws=1000)
    assert step.surrogate is None
    assert not sample_stat(idata, "used_surrogate").any()
    posterior = stats.gamma(14, scale=1 / 6)
    assert_moments(posterior_draws(idata, "rate"), posterior.mean(), posterior.std(), "rate")


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"level": 0}, ValueError, "level must be an integer >= 1"),
        ({"level": 2.5}, ValueError, "level must be an integer >= 1"),
        ({"mass": 1.0}, ValueError, "mass"),
        ({"domain": "sphere"}, ValueError, "domain"),
        ({"max_points": 0}, ValueError, "max_points"),
        ({"max_error": 0.0}, ValueError, "max_error"),
        ({"max_error": np.nan}, ValueError, "max_error"),
        ({"n_hidden": 100}, TypeError, "n_hidden"),
        ({"grid": "hexagonal"}, ValueError, "grid must be"),
        ({"grid": "full", "cells_per_dimension": 2}, ValueError, "at least 3"),
        ({"grid": "full", "cells_per_dimension": 50}, ValueError, "125000 exact gradient"),
        ({"grid": "full", "level": 3}, ValueError, "level and refine are for grid='sparse'"),
        ({"refine": True, "level": 3}, ValueError, "do not pass `level`"),
        ({"cells_per_dimension": 10}, ValueError, "cells_per_dimension is for grid='full'"),
        ({"quadratic_base": "no"}, ValueError, "quadratic_base must be True or False"),
        ({"refine": "yes"}, ValueError, "refine must be True or False"),
        ({"exact_acceptance": 0}, ValueError, "exact_acceptance must be True or False"),
    ],
)
def test_invalid_settings_are_rejected(options, error, message):
    with independent_normal(), pytest.raises(error, match=message):
        SparseGridHMC(**options)


def test_a_grid_too_large_for_the_dimension_says_how_large_and_what_to_use():
    with pm.Model():
        pm.Normal("x", 0.0, 1.0, shape=12)
        with pytest.raises(ValueError, match=r"has \d+ points.*RNSHMC or ARNSHMC"):
            SparseGridHMC(level=5)
    with pm.Model():
        pm.Normal("x", 0.0, 1.0, shape=40)
        with pytest.raises(ValueError, match="level-1 sparse grid in 40 dimensions"):
            SparseGridHMC(max_points=50)
    with pm.Model():
        pm.Normal("x", 0.0, 1.0, shape=4)
        with pytest.raises(ValueError, match=r"at most 3 parameters.*grid='sparse'"):
            SparseGridHMC(grid="full")

"""SparseGridHMC: exact posteriors with a precomputed grid, inside and outside its box."""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from pymc_rnshmc import SparseGridHMC
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
from tests.step_methods.helpers import assert_correlated_normal, sample_with


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
    assert sample_stat(idata, "used_surrogate").all()
    assert_correlated_normal(idata, correlation=False)
    report = step.surrogate.report
    assert report.domain == "laplace" and report.n_points <= 2000
    # after tuning: one exact logp per draw, exact gradients only outside the box
    outside = sample_stat(idata, "steps_outside_domain")
    np.testing.assert_array_equal(sample_stat(idata, "n_gradient_evals"), outside)
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


def test_banana_against_quadrature():
    idata, _ = run(banana(), tune=600, draws=2000)
    means, sds = banana_reference_moments()
    b = posterior_draws(idata, "b")
    for i in range(2):
        assert_moments(b[..., i], means[i], sds[i], f"b[{i}]", min_ess=150)


def test_leaving_and_reentering_a_small_box_keeps_the_posterior_exact():
    # a box holding half the mass: trajectories keep crossing its boundary
    idata, _ = run(correlated_normal(), mass=0.5, level=3, draws=2000)
    outside = sample_stat(idata, "steps_outside_domain")
    n_steps = sample_stat(idata, "n_steps")
    assert 0.1 < outside.sum() / (n_steps.sum() + n_steps.size) < 0.9
    assert (outside == 0).any() and (outside > 0).any()
    assert_correlated_normal(idata, "half-mass box", correlation=False)


def test_parallel_chains_reproduce_sequential_ones():
    sequential, _ = run(independent_normal(), tune=200, draws=100, seed=9)
    parallel, _ = run(independent_normal(), tune=200, draws=100, seed=9, cores=2)
    np.testing.assert_array_equal(posterior_draws(parallel, "x"), posterior_draws(sequential, "x"))


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"level": 0}, ValueError, "level must be an integer >= 1"),
        ({"level": 2.5}, ValueError, "level must be an integer >= 1"),
        ({"mass": 1.0}, ValueError, "mass"),
        ({"domain": "sphere"}, ValueError, "domain"),
        ({"max_points": 0}, ValueError, "max_points"),
        ({"n_hidden": 100}, TypeError, "n_hidden"),
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

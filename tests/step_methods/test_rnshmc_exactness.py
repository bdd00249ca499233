"""RNSHMC samples the exact posterior: analytic posteriors, a banana, wrong surrogates."""

import numpy as np
import pytest
from scipy import stats

from pymc_rnshmc import RNSHMC
from pymc_rnshmc.workloads import banana
from tests.checks import assert_moments, posterior_draws, sample_stat
from tests.models import (
    NORMAL_MEAN,
    NORMAL_SD,
    banana_reference_moments,
    beta_binomial,
    correlated_normal,
    gamma_poisson,
    independent_normal,
)
from tests.step_methods.helpers import DistortedSurrogate, assert_correlated_normal, sample_with


def run(model, tune=600, draws=1500, chains=2, seed=20, **step_options):
    step_options.setdefault("exploration_steps", 400)
    idata, _ = sample_with(
        RNSHMC, model, tune=tune, draws=draws, chains=chains, seed=seed, **step_options
    )
    return idata


def assert_used_the_surrogate(idata):
    assert sample_stat(idata, "used_surrogate").all()
    assert (sample_stat(idata, "n_gradient_evals") == 0).all()


def test_independent_normal():
    idata = run(independent_normal())
    assert_used_the_surrogate(idata)
    x = posterior_draws(idata, "x")
    for i in range(3):
        assert_moments(x[..., i], NORMAL_MEAN[i], NORMAL_SD[i], f"x[{i}]")


def test_correlated_normal_including_the_correlation():
    idata = run(correlated_normal())
    assert_used_the_surrogate(idata)
    assert_correlated_normal(idata)  # with E[z1 z2] of the standardized coordinates


def test_beta_binomial_through_the_logit_transform():
    idata = run(beta_binomial())
    posterior = stats.beta(9, 16)
    assert_moments(posterior_draws(idata, "p"), posterior.mean(), posterior.std(), "p")


def test_gamma_poisson_through_the_log_transform():
    idata = run(gamma_poisson())
    posterior = stats.gamma(14, scale=1 / 6)
    assert_moments(posterior_draws(idata, "rate"), posterior.mean(), posterior.std(), "rate")


def test_banana_against_quadrature():
    idata = run(banana(), tune=1000, draws=2000, exploration_steps=700)
    assert_used_the_surrogate(idata)
    means, sds = banana_reference_moments()
    b = posterior_draws(idata, "b")
    for i in range(2):
        assert_moments(b[..., i], means[i], sds[i], f"b[{i}]")


@pytest.mark.parametrize(
    ("kind", "amount"),
    [("shifted", 0.5), ("flattened", 0.3)],
    ids=["shifted-by-half-an-sd", "force-times-0.3"],
)
def test_a_deliberately_wrong_surrogate_still_gives_the_right_answer(kind, amount):
    idata = run(correlated_normal(), draws=2000, surrogate=DistortedSurrogate(kind, amount))
    assert_used_the_surrogate(idata)
    # the distortion is visible: the surrogate misjudges the energy change of proposals
    assert np.nanmean(np.abs(sample_stat(idata, "surrogate_error"))) > 0.1  # every 10th draw
    assert_correlated_normal(idata, kind, min_ess=100, correlation=False)

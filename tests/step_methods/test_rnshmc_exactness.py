"""RNSHMC samples the exact posterior: analytic posteriors, a banana, wrong surrogates."""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from pymc_rnshmc import RNSHMC
from pymc_rnshmc.workloads import banana
from tests.checks import assert_moments, posterior_draws, sample_stat
from tests.models import (
    CORRELATED_COVARIANCE,
    CORRELATED_MEAN,
    NORMAL_MEAN,
    NORMAL_SD,
    banana_reference_moments,
    beta_binomial,
    correlated_normal,
    gamma_poisson,
    independent_normal,
)
from tests.step_methods.helpers import DistortedSurrogate


def run(model, tune=600, draws=1500, chains=2, seed=20, **step_options):
    step_options.setdefault("exploration_steps", 400)
    with model:
        step = RNSHMC(**step_options)
        return pm.sample(
            step=step,
            tune=tune,
            draws=draws,
            chains=chains,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )


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
    x = posterior_draws(idata, "x")
    sds = np.sqrt(np.diag(CORRELATED_COVARIANCE))
    for i in range(2):
        assert_moments(x[..., i], CORRELATED_MEAN[i], sds[i], f"x[{i}]")
    # E[z1 z2] of the standardized coordinates is the correlation
    product = np.prod((x - CORRELATED_MEAN) / sds, axis=-1)
    correlation = CORRELATED_COVARIANCE[0, 1] / (sds[0] * sds[1])
    second_moment_sd = np.sqrt(1 + correlation**2)
    assert_moments(product, correlation, second_moment_sd, "z1 * z2")


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
    assert np.abs(sample_stat(idata, "surrogate_error")).mean() > 0.1
    x = posterior_draws(idata, "x")
    sds = np.sqrt(np.diag(CORRELATED_COVARIANCE))
    for i in range(2):
        assert_moments(x[..., i], CORRELATED_MEAN[i], sds[i], f"{kind} x[{i}]", min_ess=100)

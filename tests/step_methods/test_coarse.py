"""RNSHMC and ARNSHMC with the user's coarse model: exact draws, the choice it logs, bad input."""

import logging

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_rnshmc
from pymc_rnshmc import ARNSHMC, RNSHMC, RNSRMHMC, SparseGridHMC
from pymc_rnshmc.step_methods.coarse_model import CoarseModelPotential
from pymc_rnshmc.surrogates.coarse import CoarseCorrectedSurrogate
from tests.checks import assert_moments, posterior_draws
from tests.models import CORRELATED_COVARIANCE, CORRELATED_MEAN, beta_binomial, correlated_normal
from tests.step_methods.helpers import DistortedSurrogate, assert_correlated_normal, sample_with


def wrong_normal() -> pm.Model:
    """A coarse model of ``correlated_normal`` that is wrong: uncorrelated, shifted, wider."""
    with pm.Model() as coarse:
        pm.Normal("x", CORRELATED_MEAN + 1.0, 3.0 * np.sqrt(np.diag(CORRELATED_COVARIANCE)))
    return coarse


def run(model, coarse, seed=3, **options):
    options.setdefault("exploration_steps", 200)
    return sample_with(RNSHMC, model, tune=600, draws=1500, seed=seed, coarse=coarse, **options)


def test_a_wrong_coarse_model_still_gives_the_exact_posterior(caplog):
    with caplog.at_level(logging.INFO, logger="pymc.rnshmc"):
        idata, step = run(correlated_normal(), wrong_normal())
    assert_correlated_normal(idata)
    surrogate = step.surrogate
    assert isinstance(surrogate, CoarseCorrectedSurrogate)
    assert isinstance(surrogate.coarse, CoarseModelPotential)
    assert surrogate.choice == "corrected"
    assert surrogate.report.errors.coarse > 10 * surrogate.report.errors.corrected
    assert "coarse + correction" in caplog.text


def test_arnshmc_learns_the_correction_online_and_stays_on_the_posterior():
    idata, step = sample_with(
        ARNSHMC, correlated_normal(), tune=600, draws=1500, seed=5, coarse=wrong_normal()
    )
    assert_correlated_normal(idata, "ARNSHMC(coarse=...)")
    assert isinstance(step.surrogate, CoarseCorrectedSurrogate)
    stats = idata.sample_stats
    learned = np.asarray(stats["estimator_points"].values).ravel()
    assert learned[-1] > learned[0] + 1000  # every kept draw's exact test was learned from
    assert np.asarray(stats["surrogate_refreshes"].values).max() > 0


def test_the_model_itself_as_its_coarse_model_moves_alone():
    idata, step = run(correlated_normal(), correlated_normal(), safety_net=0.0)
    assert step.surrogate.choice == "coarse"
    assert step.surrogate.report.errors.coarse == pytest.approx(0.0, abs=1e-8)
    misjudged = idata.sample_stats["surrogate_error"].values
    misjudged = misjudged[np.isfinite(misjudged)]  # NaN where no surrogate energy was compared
    assert misjudged.size > 100
    np.testing.assert_allclose(misjudged, 0.0, atol=1e-8)  # it is the exact Hamiltonian


def test_transformed_variables_and_a_coarse_model_that_fails_somewhere():
    # p ~ Beta(9, 16) sampled on the logit scale; the coarse model raises beyond p = 0.5 (in
    # its upper tail): those points are left out of the fit, and the network alone moves there
    coarse = beta_binomial()
    with coarse:
        p = coarse["p"]
        pm.Potential("fails", pm.math.switch(pm.math.gt(p, 0.5), np.nan, 0.0))
    idata, step = run(beta_binomial(), coarse)
    assert step.surrogate.report.coarse_failures > 0
    posterior = stats.beta(9, 16)
    assert_moments(posterior_draws(idata, "p"), posterior.mean(), posterior.std(), "p")


def test_a_step_with_a_coarse_model_pickles_and_samples_in_two_processes():
    coarse = wrong_normal()
    with correlated_normal():
        step = RNSHMC(coarse=coarse, exploration_steps=100, weigh_costs=False)
    clone = cloudpickle.loads(cloudpickle.dumps(step))  # as pm.sample sends steps
    assert isinstance(clone._surrogate_template, CoarseCorrectedSurrogate)
    idata, _ = sample_with(
        RNSHMC, correlated_normal(), tune=300, draws=300, seed=4, cores=2, coarse=wrong_normal()
    )
    assert np.isfinite(posterior_draws(idata, "x")).all()


# ----------------------------------------------------------------------------- bad input
def test_a_coarse_model_with_other_variables_is_refused():
    with pm.Model() as other:
        pm.Normal("y", 0.0, 1.0, shape=2)
    with correlated_normal(), pytest.raises(ValueError, match="same names and transforms"):
        RNSHMC(coarse=other)


def test_a_coarse_model_with_another_transform_is_refused():
    with pm.Model() as positive:
        pm.HalfNormal("p", 1.0)  # value variable p_log__, not p_logodds__
    with beta_binomial(), pytest.raises(ValueError, match="p_logodds__"):
        RNSHMC(coarse=positive)


def test_a_coarse_model_with_another_shape_is_refused():
    with pm.Model() as wider:
        pm.Normal("x", 0.0, 1.0, shape=3)
    with correlated_normal(), pytest.raises(ValueError, match=r"shape \(3,\)"):
        RNSHMC(coarse=wider)


def test_a_coarse_model_without_a_gradient_is_refused():
    coarse = correlated_normal(gradient=False)
    with correlated_normal(gradient=False), pytest.raises(ValueError, match="no gradient"):
        RNSHMC(coarse=coarse)


def test_a_coarse_callable_with_the_wrong_answer_is_refused():
    with correlated_normal(), pytest.raises(ValueError, match="2 values"):
        RNSHMC(coarse=lambda q: (0.0, np.zeros(3)))
    with correlated_normal(), pytest.raises(ValueError, match=r"\(logp, grad logp\)"):
        RNSHMC(coarse=lambda q: 0.0)
    with correlated_normal(), pytest.raises(TypeError, match=r"pymc\.Model"):
        RNSHMC(coarse="coarse.nc")


@pytest.mark.parametrize("step_class", [RNSHMC, ARNSHMC])
def test_with_a_coarse_model_the_first_fit_takes_no_share_of_tuning(step_class):
    coarse_model = wrong_normal()
    with correlated_normal():
        plain, coarse = step_class(), step_class(coarse=coarse_model)
    assert plain.schedule.earliest_share > 0
    assert coarse.schedule == plain.schedule.with_coarse_model()
    assert coarse.schedule.earliest_share == 0


@pytest.mark.parametrize("step_class", [RNSRMHMC, SparseGridHMC])
def test_samplers_that_cannot_use_a_coarse_model_refuse_it(step_class):
    coarse = wrong_normal()
    with correlated_normal(), pytest.raises(TypeError, match="does not take `coarse`"):
        step_class(coarse=coarse)


def test_coarse_needs_the_random_network():
    coarse = wrong_normal()
    with correlated_normal(), pytest.raises(ValueError, match="RandomNetworkSurrogate"):
        RNSHMC(coarse=coarse, surrogate=DistortedSurrogate("flattened", 0.3))


def test_pooled_chains_share_one_coarse_corrected_surrogate():
    coarse = wrong_normal()
    with correlated_normal() as model:
        step = RNSHMC(coarse=coarse, weigh_costs=False)
    idata = pymc_rnshmc.sample(
        draws=600, tune=400, chains=2, step=step, model=model, random_seed=2, progressbar=False
    )
    assert_correlated_normal(idata, "pooled RNSHMC(coarse=...)", min_ess=100)

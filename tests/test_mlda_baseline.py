"""The benchmarks' two-level delayed-acceptance baseline samples the fine posterior exactly."""

import numpy as np
import pymc as pm

from benchmarks.mlda import TwoLevelDelayedAcceptance
from tests.checks import posterior_draws
from tests.models import CORRELATED_COVARIANCE, CORRELATED_MEAN, correlated_normal
from tests.step_methods.helpers import assert_correlated_normal


def test_a_wrong_coarse_model_still_gives_the_fine_posterior():
    with pm.Model() as coarse:  # uncorrelated, shifted, wider
        pm.Normal("x", CORRELATED_MEAN + 1.0, 2.0 * np.sqrt(np.diag(CORRELATED_COVARIANCE)))
    with correlated_normal():
        step = TwoLevelDelayedAcceptance(coarse=coarse, subsampling=5)
        idata = pm.sample(
            tune=1000,
            draws=10_000,
            chains=2,
            cores=1,
            step=step,
            random_seed=11,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert_correlated_normal(idata)
    stats = idata.sample_stats
    assert 0.1 < float(stats["coarse_accept"].mean()) < 0.5
    assert int(stats["n_coarse_evals"].sum()) >= 5 * stats["n_coarse_evals"].size
    assert int(stats["n_logp_evals"].max()) <= 2
    assert np.isfinite(posterior_draws(idata, "x")).all()

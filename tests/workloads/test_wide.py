"""The wide-model workload: its width, its correlations, a logp PyMC can evaluate."""

import numpy as np

from pymc_rnshmc.workloads import (
    correlated_logistic_regression,
    correlated_logistic_regression_data,
)


def test_the_predictors_have_the_ar1_correlation_asked_for():
    design, responses, beta = correlated_logistic_regression_data(6, n_obs=20_000, correlation=0.7)
    assert design.shape == (20_000, 6) and responses.shape == (20_000,) and beta.shape == (6,)
    correlations = np.corrcoef(design, rowvar=False)
    for lag in (1, 2):
        observed = np.diag(correlations, k=lag)
        np.testing.assert_allclose(observed, 0.7**lag, atol=0.02)
    assert set(np.unique(responses)) == {0, 1}


def test_the_model_has_one_coefficient_per_column():
    model = correlated_logistic_regression(5, n_obs=500)
    point = model.initial_point()
    assert point["beta"].shape == (5,)
    assert np.isfinite(model.compile_logp()(point))

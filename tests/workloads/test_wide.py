"""The wide-model workload: its width, its correlations, a logp PyMC can evaluate."""

import numpy as np
import pytest

from pymc_rnshmc.workloads import (
    correlated_logistic_regression,
    correlated_logistic_regression_data,
    hierarchical_logistic_regression,
    hierarchical_logistic_regression_data,
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


def test_the_hierarchical_groups_are_unequal_and_every_one_is_observed():
    data = hierarchical_logistic_regression_data(50, n_obs=5_000)
    sizes = np.bincount(data["group"], minlength=50)
    assert sizes.sum() == 5_000 and sizes.min() >= 2
    assert sizes.max() > 10 * sizes.min()
    assert data["offsets"].shape == (50,) and set(np.unique(data["responses"])) == {0, 1}


def test_the_hierarchical_model_has_a_parameter_per_group():
    model = hierarchical_logistic_regression(12, n_obs=600, n_predictors=3)
    point = model.initial_point()
    assert point["z"].shape == (12,) and point["beta"].shape == (3,)
    assert sum(np.size(v) for v in point.values()) == 12 + 3 + 2
    assert np.isfinite(model.compile_logp()(point))
    np.testing.assert_array_equal(
        hierarchical_logistic_regression_data(12, n_obs=600, n_predictors=3)["group"],
        hierarchical_logistic_regression_data(12, n_obs=600, n_predictors=3)["group"],
    )


def test_too_few_rows_for_the_groups_is_a_clear_error():
    with pytest.raises(ValueError, match="need n_obs >= 40"):
        hierarchical_logistic_regression_data(20, n_obs=30)

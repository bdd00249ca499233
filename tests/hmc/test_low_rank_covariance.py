"""The draws' covariance with only the correlations that stand out of noise."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_rnshmc.hmc.low_rank_covariance import (
    FOLD_BLOCKS,
    FOLDS,
    _folds,
    correlation_condition,
    covariance_beyond_noise,
    noise_interval,
)
from pymc_rnshmc.step_methods.mode_metric import CORRELATED_CONDITION


def test_independent_coordinates_have_nothing_beyond_noise():
    """200 draws in 40 independent dimensions: the sample correlations are all noise."""
    draws = np.random.default_rng(1).normal(size=(200, 40)) * np.linspace(0.1, 10.0, 40)
    assert covariance_beyond_noise(draws) is None


def test_a_strong_correlation_is_kept_and_the_rest_is_diagonal():
    rng, dim = np.random.default_rng(2), 30
    scales = np.linspace(0.5, 3.0, dim)
    correlation = np.eye(dim)
    correlation[0, 1] = correlation[1, 0] = 0.95
    truth = scales[:, None] * correlation * scales[None, :]
    draws = rng.multivariate_normal(np.zeros(dim), truth, size=400)
    found = covariance_beyond_noise(draws)
    assert found is not None
    found_correlation = found / np.sqrt(np.outer(np.diag(found), np.diag(found)))
    assert found_correlation[0, 1] == pytest.approx(0.95, abs=0.05)
    unrelated = np.abs(found_correlation[2:, 2:] - np.eye(dim - 2))
    sample = np.abs(np.corrcoef(draws.T)[2:, 2:] - np.eye(dim - 2))
    assert unrelated.max() < 0.5 * sample.max()  # the noise is mostly gone
    np.testing.assert_allclose(np.sqrt(np.diag(found)), scales, rtol=0.15)
    np.linalg.cholesky(found)


def test_a_coordinate_that_never_moved_gets_unit_variance_and_no_correlation():
    rng = np.random.default_rng(3)
    first = rng.normal(size=300)
    draws = np.column_stack([first, first + 0.1 * rng.normal(size=300), np.full(300, 2.0)])
    found = covariance_beyond_noise(draws)
    assert found[2, 2] == 1.0
    np.testing.assert_array_equal(found[2, :2], 0.0)
    np.linalg.cholesky(found)


def test_the_noise_interval_widens_with_the_dimension_and_narrows_with_the_draws():
    assert noise_interval(100, 100)[0] == 0.0
    low, high = noise_interval(400, 100)
    assert (low, high) == pytest.approx((0.25, 2.25))
    assert noise_interval(4000, 100)[1] < high


def test_no_more_draws_than_moving_coordinates_or_a_non_finite_draw_give_none():
    rng = np.random.default_rng(4)
    assert covariance_beyond_noise(rng.normal(size=(50, 100))) is None
    draws = rng.multivariate_normal(np.zeros(2), [[1.0, 0.99], [0.99, 1.0]], size=200)
    assert covariance_beyond_noise(draws) is not None
    draws[7, 0] = np.inf
    assert covariance_beyond_noise(draws) is None


def autocorrelated_noise(seed: int, n_draws: int = 400, dim: int = 56, rho: float = 0.9):
    """Independent AR(1) coordinates: a slowly mixing chain on a posterior with no correlation."""
    noise = np.random.default_rng(seed).normal(size=(n_draws, dim))
    for t in range(1, n_draws):
        noise[t] = rho * noise[t - 1] + np.sqrt(1 - rho**2) * noise[t]
    return noise


@pytest.mark.parametrize("seed", range(5))
def test_autocorrelated_draws_of_independent_coordinates_do_not_whiten_a_metric(seed):
    """Their sample eigenvalues leave the noise interval; their held-out variances do not.

    With the sample eigenvalues, these draws gave correlation condition numbers of 40-60.
    """
    found = covariance_beyond_noise(autocorrelated_noise(seed))
    assert found is None or correlation_condition(found) < CORRELATED_CONDITION


def test_each_fold_is_checked_by_draws_it_did_not_see():
    folds = _folds(400)
    assert np.bincount(folds).tolist() == [80] * FOLDS
    assert np.count_nonzero(np.diff(folds)) == FOLDS * FOLD_BLOCKS - 1  # blocks, interleaved


@pytest.mark.parametrize("n_draws", [5, 7, 12, 16])
def test_too_few_draws_for_every_fold_give_none_not_nan(n_draws):
    """A fold of one draw has no variance; an empty one has none to check with."""
    pair = [[1.0, 0.99], [0.99, 1.0]]
    draws = np.random.default_rng(6).multivariate_normal(np.zeros(2), pair, size=n_draws)
    assert covariance_beyond_noise(draws) is None


def test_no_more_draws_outside_a_fold_than_coordinates_give_none():
    assert covariance_beyond_noise(np.random.default_rng(5).normal(size=(60, 50))) is None

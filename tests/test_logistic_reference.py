"""The importance-sampled logistic reference against quadrature, in two dimensions."""

import numpy as np
import pytest

from tests.logistic_reference import LogisticPosterior


@pytest.fixture(scope="module")
def posterior():
    return LogisticPosterior(2, n_obs=300, pool=40_000)


@pytest.fixture(scope="module")
def quadrature(posterior):
    """Marginal means and CDFs of both coefficients on a grid around the mode."""
    sd = np.sqrt(np.diag(posterior.chol @ posterior.chol.T))
    axes = [np.linspace(m - 7 * s, m + 7 * s, 401) for m, s in zip(posterior.mode, sd)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
    log_density = posterior.log_density(grid).reshape(401, 401)
    density = np.exp(log_density - log_density.max())
    density /= density.sum()
    marginals = [density.sum(axis=1), density.sum(axis=0)]
    means = np.array([m @ a for m, a in zip(marginals, axes)])
    return axes, marginals, means


def test_the_weighted_means_match_quadrature(posterior, quadrature):
    _, _, means = quadrature
    error = np.abs(posterior.mean - means) / posterior.mean_standard_error
    assert np.all(error < 4.0), error


def test_the_weighted_quantiles_match_quadrature(posterior, quadrature):
    axes, marginals, _ = quadrature
    for p in (0.05, 0.5, 0.95):
        quantile = posterior.quantiles([p])[0]
        for i in range(2):
            step = axes[i][1] - axes[i][0]  # masses at the nodes: the CDF at the cells' ends
            below = np.interp(quantile[i], axes[i] + step / 2, np.cumsum(marginals[i]))
            assert abs(below - p) < 4.0 * posterior.share_standard_error(p)[i], (p, i)


def test_resampled_draws_have_the_reference_mean(posterior):
    draws = posterior.sample(4_000, np.random.default_rng(5))
    error = (draws.mean(axis=0) - posterior.mean) / (draws.std(axis=0) / np.sqrt(len(draws)))
    assert draws.shape == (4_000, 2) and np.all(np.abs(error) < 4.0), error
    assert posterior.effective_pool > 0.8 * len(posterior.pool)

"""The Laplace approximation from values: mode and covariance, without any gradient."""

import numpy as np

from pymc_rnshmc.surrogates.laplace import laplace_start

MEAN = np.array([1.0, -2.0, 0.5])
COVARIANCE = np.array([[1.0, 0.45, 0.0], [0.45, 0.25, 0.05], [0.0, 0.05, 4.0]])
PRECISION = np.linalg.inv(COVARIANCE)


def gaussian(x):
    d = x - MEAN
    return -0.5 * float(d @ PRECISION @ d)


def test_recovers_the_mode_and_covariance_of_a_gaussian():
    start = np.zeros(3)
    laplace = laplace_start(gaussian, start, gaussian(start))
    np.testing.assert_allclose(laplace.position, MEAN, atol=1e-3)
    np.testing.assert_allclose(laplace.covariance, COVARIANCE, rtol=1e-3, atol=1e-4)
    assert laplace.logp == gaussian(laplace.position)
    assert laplace.n_evaluations > 2 * 3**2


def test_a_density_that_fails_in_places_still_gives_a_start():
    def failing(x):
        return -np.inf if x[0] > 2.5 else gaussian(x)

    start = np.array([2.0, 0.0, 0.0])
    laplace = laplace_start(failing, start, failing(start))
    np.testing.assert_allclose(laplace.position, MEAN, atol=1e-3)


def test_a_flat_direction_gets_a_wide_but_finite_covariance():
    def flat_in_the_last(x):
        return gaussian(np.array([x[0], x[1], MEAN[2]]))

    start = np.zeros(3)
    laplace = laplace_start(flat_in_the_last, start, flat_in_the_last(start))
    eigenvalues = np.linalg.eigvalsh(laplace.covariance)
    assert np.all(np.isfinite(eigenvalues)) and np.all(eigenvalues > 0)
    assert eigenvalues[-1] > 1e3 * eigenvalues[0]


def test_keeps_the_start_when_the_search_finds_nothing_better():
    start = MEAN.copy()
    laplace = laplace_start(gaussian, start, gaussian(start))
    assert laplace.logp >= gaussian(start)

"""The Laplace approximation: mode and covariance from values alone, or from gradients."""

import numpy as np
import pytest

from pymc_rnshmc.surrogates.laplace import (
    IMPORTANCE_DRAWS,
    LOG_WEIGHT_SPREAD,
    importance_check,
    laplace_from_gradients,
    laplace_start,
)

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


def potential_and_gradient(x):
    d = x - MEAN
    return 0.5 * float(d @ PRECISION @ d), PRECISION @ d


def test_from_gradients_recovers_the_mode_and_covariance_of_a_gaussian():
    laplace = laplace_from_gradients(potential_and_gradient, np.zeros(3))
    np.testing.assert_allclose(laplace.position, MEAN, atol=1e-4)
    np.testing.assert_allclose(laplace.covariance, COVARIANCE, rtol=1e-6, atol=1e-8)
    assert laplace.logp == pytest.approx(0.0, abs=1e-8)
    assert laplace.n_evaluations >= 2 * 3  # the search, then two gradients a coordinate


def test_from_gradients_in_single_precision_still_finds_the_covariance():
    def single(x):
        potential, gradient = potential_and_gradient(x.astype(np.float32).astype(float))
        return np.float32(potential), gradient.astype(np.float32)

    laplace = laplace_from_gradients(single, np.zeros(3), np.float32)
    np.testing.assert_allclose(laplace.covariance, COVARIANCE, rtol=1e-2, atol=1e-3)


def test_from_gradients_a_posterior_without_a_mode_gives_no_covariance():
    def funnel_neck(x):  # U = x0 + 0.5 x1^2: falls for ever as x0 -> -inf
        return x[0] + 0.5 * x[1] ** 2, np.array([1.0, x[1]])

    laplace = laplace_from_gradients(funnel_neck, np.zeros(2))
    assert laplace.covariance is None


GROUP_DATA = np.array([2.0, -1.0, 0.5, 1.5, -0.5, 0.0, 1.0, -2.0])


def centred_hierarchy(x):
    """``U`` of a centred hierarchy: ``t_i ~ N(mu, e^s)``, ``y_i ~ N(t_i, 1)``, ``log p(s) ~ s``.

    Its density grows without bound as ``s -> -inf`` with the ``t_i`` at ``mu``.
    """
    mu, s, t = x[0], x[1], x[2:]
    spread, residual = t - mu, t - GROUP_DATA
    precision = np.exp(-2.0 * s)
    logp = (1 - t.size) * s - 0.5 * (spread @ spread) * precision - 0.5 * residual @ residual
    logp -= 0.5 * mu**2 / 25.0
    gradient = np.concatenate(
        [
            [spread.sum() * precision - mu / 25.0, 1 - t.size + (spread @ spread) * precision],
            -spread * precision - residual,
        ]
    )
    return -float(logp), -gradient


def test_from_gradients_a_singularity_the_search_ran_into_gives_no_covariance():
    # The search stops deep in the neck (s about -26), where the curvature is so sharp that
    # the Newton step left looks short: standard deviations of 1e-12 there.
    laplace = laplace_from_gradients(centred_hierarchy, np.zeros(GROUP_DATA.size + 2))
    assert laplace.position[1] < -10.0
    assert laplace.covariance is None


def test_without_gradients_a_singularity_the_search_ran_into_is_no_start():
    # Powell's search runs to s = -36, standard deviations of 1e-16: the chain stays put.
    start = np.zeros(GROUP_DATA.size + 2)

    def log_density(x):
        return -centred_hierarchy(x)[0]

    laplace = laplace_start(log_density, start, log_density(start))
    np.testing.assert_array_equal(laplace.position, start)
    assert laplace.covariance is None and laplace.logp == log_density(start)


def test_from_gradients_a_saddle_gives_no_covariance():
    def saddle(x):
        return 0.5 * (x[0] ** 2 - x[1] ** 2), np.array([x[0], -x[1]])

    assert laplace_from_gradients(saddle, np.zeros(2)).covariance is None


def test_from_gradients_a_model_that_fails_in_places_still_finds_the_mode():
    def failing(x):
        if x[0] > 2.5:
            return np.inf, np.full(3, np.nan)
        return potential_and_gradient(x)

    laplace = laplace_from_gradients(failing, np.array([2.0, 0.0, 0.0]))
    np.testing.assert_allclose(laplace.position, MEAN, atol=1e-5)
    assert laplace.covariance is not None


def test_from_gradients_a_model_that_fails_everywhere_keeps_the_start():
    def failing(x):
        return np.inf, np.full(x.shape, np.nan)

    start = np.array([0.5, 0.5, 0.5])
    laplace = laplace_from_gradients(failing, start)
    np.testing.assert_array_equal(laplace.position, start)
    assert laplace.covariance is None and laplace.logp == -np.inf


def test_importance_check_keeps_the_approximation_of_a_gaussian():
    laplace = laplace_from_gradients(potential_and_gradient, np.zeros(3))
    checked, spread = importance_check(gaussian, laplace, np.random.default_rng(1))
    assert spread < 1e-4
    np.testing.assert_array_equal(checked.covariance, laplace.covariance)
    assert checked.n_evaluations == laplace.n_evaluations + IMPORTANCE_DRAWS
    assert checked.n_gradients == laplace.n_gradients


def funnel(x):
    """Neal's funnel, ``v ~ N(0, 3)``, ``x_i ~ N(0, exp(v / 2))``: a mode at ``v = -18``."""
    v, rest = x[0], x[1:]
    return -(v**2) / 18.0 - 0.5 * rest.size * v - 0.5 * float(rest @ rest) * np.exp(-v)


def funnel_potential_and_gradient(x):
    v, rest = x[0], x[1:]
    scaled = rest * np.exp(-v)
    gradient = np.concatenate([[v / 9.0 + 0.5 * rest.size - 0.5 * float(rest @ scaled)], scaled])
    return -funnel(x), gradient


def test_importance_check_drops_a_mode_far_from_the_posteriors_mass():
    laplace = laplace_from_gradients(funnel_potential_and_gradient, np.zeros(5))
    assert laplace.covariance is not None and laplace.position[0] == pytest.approx(-18, abs=0.1)
    checked, spread = importance_check(funnel, laplace, np.random.default_rng(1))
    assert spread > LOG_WEIGHT_SPREAD and checked.covariance is None


def test_importance_check_drops_an_approximation_whose_draws_fail():
    def failing(x):
        return -np.inf if x[0] > MEAN[0] + 1.0 else gaussian(x)

    laplace = laplace_from_gradients(potential_and_gradient, np.zeros(3))
    checked, spread = importance_check(failing, laplace, np.random.default_rng(1))
    assert spread == np.inf and checked.covariance is None


def test_from_gradients_newton_steps_finish_a_search_that_stopped_short(monkeypatch):
    """A scale parameter's potential, ``50 s + 50 exp(-2 s)``: mode at ``s = log(2) / 2``."""
    import pymc_rnshmc.surrogates.laplace as laplace

    def scale_and_location(x):
        s, m = x
        potential = 50.0 * s + 50.0 * np.exp(-2.0 * s) + 0.5 * (m - 1.0) ** 2
        return potential, np.array([50.0 - 100.0 * np.exp(-2.0 * s), m - 1.0])

    monkeypatch.setattr(laplace, "GRADIENT_SEARCH_EVALUATIONS", 2)  # L-BFGS stops at once
    monkeypatch.setattr(laplace, "GRADIENT_SEARCH_PER_DIMENSION", 0)
    found = laplace_from_gradients(scale_and_location, np.array([2.0, 0.0]))
    np.testing.assert_allclose(found.position, [np.log(2.0) / 2.0, 1.0], atol=1e-3)
    np.testing.assert_allclose(found.covariance, np.diag([1.0 / 100.0, 1.0]), rtol=1e-2)

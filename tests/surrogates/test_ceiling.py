"""The ceiling over a fitted surrogate (:mod:`pymc_rnshmc.surrogates.ceiling`)."""

import numpy as np
import pytest

from pymc_rnshmc.surrogates import RandomNetworkSurrogate
from pymc_rnshmc.surrogates.ceiling import MARGIN, WIDTH, Ceiling
from pymc_rnshmc.surrogates.whitening import Whitening


def arm_potential(points):
    """A banana whose arm tips (``|x| > 1.6``) no training point below reaches."""
    points = np.atleast_2d(points)
    bend = points[:, 1] - 0.5 * points[:, 0] ** 2
    values = 0.5 * points[:, 0] ** 2 + 8.0 * bend**2
    gradients = np.stack([points[:, 0] - 16.0 * points[:, 0] * bend, 16.0 * bend], axis=1)
    return values, gradients


@pytest.fixture(scope="module")
def bulk_fits():
    rng = np.random.default_rng(5)
    x = rng.uniform(-1.6, 1.6, size=60)
    points = np.stack([x, 0.5 * x**2 + rng.normal(0.0, 0.25, size=60)], axis=1)
    values, gradients = arm_potential(points)
    fits = {
        ceiling: RandomNetworkSurrogate(ceiling=ceiling).fit(points, values, gradients, rng=2)
        for ceiling in (True, False)
    }
    return points, values, fits


def test_among_the_training_points_the_ceiling_changes_almost_nothing(bulk_fits):
    points, _, fits = bulk_fits
    capped, network = fits[True], fits[False]
    np.testing.assert_allclose(capped.potential(points), network.potential(points), atol=1e-2)
    difference = capped.gradient(points) - network.gradient(points)
    scale = np.linalg.norm(network.gradient(points), axis=1) + 1.0
    assert np.all(np.linalg.norm(difference, axis=1) <= 2 * np.exp(-MARGIN) * scale)


def test_beyond_them_the_potential_stays_under_the_ceiling(bulk_fits):
    _, values, fits = bulk_fits
    capped = fits[True]
    far = np.random.default_rng(6).normal(0.0, 6.0, size=(500, 2))
    ceiling, _ = capped.ceiling_part.potential_and_gradient(far)
    assert np.all(capped.potential(far) <= ceiling + 1e-9)
    assert np.all(capped.potential(far) <= capped._network_potential(far) + 1e-9)
    assert capped.ceiling_part.level == pytest.approx(values.max() + MARGIN + 2 * np.log(WIDTH))


def test_the_ceiling_tears_down_the_wall_in_front_of_the_arm_tips(bulk_fits):
    _, _, fits = bulk_fits
    tips = np.array([[x, 0.5 * x**2] for x in (-3.0, -2.5, 2.5, 3.0)])
    exact = arm_potential(tips)[0] - arm_potential(np.zeros(2))[0]

    def wall(surrogate):
        return np.max(surrogate.potential(tips) - surrogate.potential(np.zeros(2)) - exact)

    assert wall(fits[False]) > 20.0  # the network alone extrapolates a wall (measured 280)
    assert wall(fits[True]) < 10.0


@pytest.mark.parametrize("scale", [0.5, 3.0, 8.0])
def test_the_force_is_the_gradient_of_the_capped_potential(bulk_fits, scale):
    _, _, fits = bulk_fits
    capped = fits[True]
    eps = 1e-5
    for point in np.random.default_rng(7).normal(0.0, scale, size=(5, 2)):
        numeric = [
            (capped.potential(point + eps * e) - capped.potential(point - eps * e)) / (2 * eps)
            for e in np.eye(2)
        ]
        np.testing.assert_allclose(capped.gradient(point), numeric, rtol=1e-5, atol=1e-5)
        value, gradient = capped.potential_and_gradient(point)
        assert value == pytest.approx(capped.potential(point))
        np.testing.assert_allclose(gradient, capped.gradient(point))


def test_a_wide_gaussian_above_the_highest_training_potential():
    points = np.random.default_rng(8).normal([1.0, -2.0], [0.5, 2.0], size=(400, 2))
    whitening = Whitening.from_positions(points)
    ceiling = Ceiling.above(whitening, np.arange(400.0))
    value, gradient = ceiling.potential_and_gradient(whitening.centre)
    assert value == pytest.approx(399.0 + MARGIN + 2 * np.log(WIDTH)) and np.allclose(gradient, 0.0)
    one_sd = whitening.centre + whitening.cholesky_factor[:, 0]
    assert ceiling.potential_and_gradient(one_sd)[0] == pytest.approx(value + 0.5 / WIDTH**2)


@pytest.mark.parametrize("dim", [2, 50])
def test_the_ceiling_holds_a_small_share_of_the_mass_in_any_dimension(dim):
    """At d = 50 a ceiling MARGIN nats above the training points held e^35 times the
    posterior's mass (its volume is WIDTH^d times theirs), and the chains roamed it."""
    points = np.random.default_rng(9).normal(size=(20 * dim, dim)) * np.linspace(0.1, 3, dim)
    whitening = Whitening.from_positions(points)
    whitened = whitening.to_whitened(points)
    potentials = 0.5 * np.sum(whitened**2, axis=1)  # a Gaussian with its mode at zero
    ceiling = Ceiling.above(whitening, potentials)
    log_det = np.sum(np.log(np.diag(whitening.cholesky_factor)))
    gaussian_mass = 0.5 * dim * np.log(2 * np.pi) + log_det
    ceiling_mass = -ceiling.level + 0.5 * dim * np.log(2 * np.pi) + log_det + dim * np.log(WIDTH)
    assert ceiling_mass - gaussian_mass <= -MARGIN


def test_a_failing_fit_stays_failing_under_the_ceiling(bulk_fits):
    capped = bulk_fits[2][True]
    point = np.array([0.3, 0.1])
    (value,), (gradient,) = np.array([[np.nan]]), np.full((1, 2), np.nan)
    potential, force = capped.ceiling_part.soft_minimum(point, value, gradient)
    assert np.isnan(potential) and np.isnan(force).all()

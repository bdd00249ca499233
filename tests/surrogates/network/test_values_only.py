"""Fits to potential values alone: the quadratic base, the held-out error and the online learner."""

import numpy as np
import pytest

from pymc_rnshmc.surrogates import RandomNetworkSurrogate
from pymc_rnshmc.surrogates.network.held_out_selection import validation_mask
from tests.surrogates.network.test_online_network import assert_same_weights
from tests.surrogates.network.test_random_network import banana_potential


def gaussian_like(n_points, seed, dim=10):
    """A correlated Gaussian potential with a mild cubic term, like a well-identified posterior."""
    rng = np.random.default_rng(seed)
    root = rng.normal(size=(dim, dim)) / np.sqrt(dim)
    precision = root @ root.T + 0.5 * np.eye(dim)
    direction = rng.normal(size=dim) / np.sqrt(dim)

    def potential(points):
        along = (points - 3.0) @ direction
        return 0.5 * np.sum(((points - 3.0) @ precision) * (points - 3.0), axis=1) + 0.01 * along**3

    covariance = np.linalg.inv(precision)
    points = rng.multivariate_normal(np.full(dim, 3.0), covariance, size=n_points)
    test = rng.multivariate_normal(np.full(dim, 3.0), covariance, size=500)
    return points, potential(points), test, potential(test)


def relative_error(surrogate, test, exact):
    return np.std(surrogate.potential(test) - exact) / np.std(exact)


def test_quadratic_base_beats_no_base_on_a_gaussian_like_target():
    points, values, test, exact = gaussian_like(60, seed=0)  # fewer than the 66 quadratic features
    with_base = RandomNetworkSurrogate().fit(points, values, rng=1)
    without = RandomNetworkSurrogate(quadratic=False).fit(points, values, rng=1)
    assert with_base.quadratic_part is not None
    assert relative_error(with_base, test, exact) < 0.25
    assert relative_error(with_base, test, exact) < 0.5 * relative_error(without, test, exact)
    # the held-out error (the base fitted without the held-out points) is not optimistic
    assert with_base.report.held_out_error > relative_error(with_base, test, exact)


def test_held_out_error_is_the_gradient_error_with_gradients():
    rng = np.random.default_rng(2)
    points = rng.normal(size=(300, 2)) * [1.0, 0.5] + [0.0, 0.5]
    values, gradients = banana_potential(points)
    report = RandomNetworkSurrogate().fit(points, values, gradients, rng=3).report
    assert report.with_gradients
    assert report.held_out_error == report.gradient_error
    assert 0 < report.held_out_error < 0.5
    assert np.isnan(report.value_error)
    assert "held-out gradient error" in report.summary()


def test_held_out_error_is_the_relative_potential_error_without_gradients():
    rng = np.random.default_rng(2)
    points = rng.normal(size=(300, 2)) * [1.0, 0.5] + [0.0, 0.5]
    values, _ = banana_potential(points)
    report = RandomNetworkSurrogate().fit(points, values, rng=3).report
    assert not report.with_gradients
    assert np.isnan(report.gradient_error)
    held_out = validation_mask(300, 0.2)
    expected = report.potential_error / np.std(values[held_out])
    assert report.held_out_error == report.value_error == pytest.approx(expected, rel=1e-12)
    assert 0 < report.held_out_error < 0.5
    summary = report.summary()
    assert "held-out potential error" in summary and "gradient" not in summary
    assert f"{report.value_error:.1%}" in summary


@pytest.mark.parametrize("with_gradients", [True, False], ids=["gradients", "values"])
def test_held_out_error_is_nan_when_nothing_is_held_out(with_gradients):
    rng = np.random.default_rng(4)
    points = rng.normal(size=(100, 2))
    values, gradients = banana_potential(points)
    surrogate = RandomNetworkSurrogate(validation_fraction=0.0, n_hidden=40)
    report = surrogate.fit(points, values, gradients if with_gradients else None, rng=5).report
    assert np.isnan(report.held_out_error)
    kind = "gradient" if with_gradients else "potential"
    assert f"held-out {kind} error not measured" in report.summary()


def test_online_learner_after_a_values_only_fit_with_a_quadratic_base():
    points, values, test, exact = gaussian_like(300, seed=6, dim=4)
    batch = RandomNetworkSurrogate(n_hidden=80, penalty=1e-6, validation_fraction=0.0)
    batch.fit(points, values, rng=7)
    assert batch.quadratic_part is not None
    first = 100
    early = RandomNetworkSurrogate(n_hidden=80, penalty=1e-6, validation_fraction=0.0)
    early.fit(points[:first], values[:first], rng=7)
    learner = early.online_estimator(points[:first], values[:first])
    for point, value in zip(points[first:], values[first:]):
        learner.add(point, value)
    assert learner.n_points == points.shape[0]
    updated = learner.updated_surrogate()
    # the same quadratic base and layer as the early fit, new weights that fit better
    assert updated.quadratic_part is early.quadratic_part
    assert relative_error(updated, test, exact) < relative_error(early, test, exact)
    # on the batch fit's own points, the online weights are the batch weights
    again = batch.online_estimator(points[:first], values[:first])
    for point, value in zip(points[first:], values[first:]):
        again.add(point, value)
    assert_same_weights(again.updated_surrogate(), batch, points)


def test_a_gaussian_base_is_used_for_values_and_ignored_with_gradients():
    rng = np.random.default_rng(11)
    mean, covariance = np.array([1.0, -2.0]), np.array([[1.0, 0.6], [0.6, 0.5]])
    precision = np.linalg.inv(covariance)
    positions = rng.multivariate_normal(mean, covariance, size=300)
    deviations = positions - mean
    potentials = 0.5 * np.sum(deviations @ precision * deviations, axis=1) + 3.0
    template = RandomNetworkSurrogate(ceiling=False)  # the fit itself, without its ceiling
    based = template.with_gaussian_base(mean, covariance)
    assert template.gaussian_base is None  # a configured copy, the template untouched
    based.fit(positions, potentials, rng=np.random.default_rng(0))
    assert based.report.n_hidden == 50  # the network only corrects the base
    test = rng.multivariate_normal(mean, covariance, size=200)
    deviations = test - mean
    truth = 0.5 * np.sum(deviations @ precision * deviations, axis=1) + 3.0
    np.testing.assert_allclose(based.potential(test), truth, atol=1e-3)
    gradients = deviations @ precision
    with_gradients = template.with_gaussian_base(mean + 5.0, covariance)  # a wrong base ...
    with_gradients.fit(test, truth, gradients, rng=np.random.default_rng(0))
    np.testing.assert_allclose(with_gradients.gradient(mean), 0.0, atol=1e-2)  # ... ignored

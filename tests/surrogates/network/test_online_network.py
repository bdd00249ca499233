"""The online learner of a random network's output weights reproduces the batch fit."""

import copy
import pickle

import numpy as np
import pytest

from pymc_rnshmc.surrogates import RandomNetworkSurrogate
from tests.surrogates.network.test_random_network import banana_potential

TOLERANCE = 1e-8
"""Relative difference allowed between online and batch output weights."""


@pytest.fixture(scope="module")
def points():
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 1.0, size=400)
    y = 0.5 * x**2 + rng.normal(0.0, 0.5, size=400)
    positions = np.stack([x, y], axis=1)
    return positions, *banana_potential(positions)


def batch_fit(positions, potentials, gradients, **options):
    # a fixed width and penalty: the batch reference then solves the same least squares
    surrogate = RandomNetworkSurrogate(
        n_hidden=80, penalty=1e-6, validation_fraction=0.0, **options
    )
    return surrogate.fit(positions, potentials, gradients, rng=7)


def assert_same_weights(online, batch, positions):
    difference = np.linalg.norm(online.coefficients - batch.coefficients)
    assert difference / np.linalg.norm(batch.coefficients) < TOLERANCE
    # The offset absorbs the mean of the features, so it is large and ill-conditioned; what
    # matters is that the two surrogates predict the same potential.
    expected = batch.potential(positions)
    spread = np.ptp(expected)
    np.testing.assert_allclose(online.potential(positions), expected, rtol=0, atol=1e-6 * spread)


@pytest.mark.parametrize("with_gradients", [True, False], ids=["values-and-gradients", "values"])
def test_points_added_one_at_a_time_give_the_batch_weights(points, with_gradients):
    positions, potentials, gradients = points
    gradients = gradients if with_gradients else None
    batch = batch_fit(positions, potentials, gradients, quadratic=with_gradients)
    first = 60
    learner = batch.online_estimator(
        positions[:first], potentials[:first], None if gradients is None else gradients[:first]
    )
    for index in range(first, positions.shape[0]):
        learner.add(
            positions[index], potentials[index], None if gradients is None else gradients[index]
        )
    assert learner.n_points == positions.shape[0]
    assert_same_weights(learner.updated_surrogate(), batch, positions)


def test_the_fit_data_alone_reproduce_the_fit(points):
    batch = batch_fit(*points)
    assert_same_weights(batch.online_estimator(*points).updated_surrogate(), batch, points[0])


def test_new_points_change_a_copy_not_the_surrogate_in_use(points):
    positions, potentials, gradients = points
    surrogate = batch_fit(positions[:100], potentials[:100], gradients[:100])
    before = surrogate.coefficients.copy()
    learner = surrogate.online_estimator(positions[:100], potentials[:100], gradients[:100])
    for index in range(100, 400):
        learner.add(positions[index], potentials[index], gradients[index])
    updated = learner.updated_surrogate()
    np.testing.assert_array_equal(surrogate.coefficients, before)
    assert not np.allclose(updated.coefficients, before)
    # more data, better fit: the gradient error on all 400 points goes down
    error_before = np.linalg.norm(surrogate.gradient(positions) - gradients)
    assert np.linalg.norm(updated.gradient(positions) - gradients) < error_before


def test_non_finite_evaluations_are_ignored(points):
    positions, potentials, gradients = points
    learner = batch_fit(*points).online_estimator(*points)
    learner.add(positions[0], np.nan, gradients[0])
    learner.add(positions[0], potentials[0], np.full(2, np.inf))
    learner.add(np.full(2, np.nan), 1.0)
    assert learner.n_points == positions.shape[0]


def test_the_learner_pickles_mid_stream_and_continues_identically(points):
    positions, potentials, gradients = points
    learner = batch_fit(positions[:100], potentials[:100], gradients[:100]).online_estimator(
        positions[:100], potentials[:100], gradients[:100]
    )
    for index in range(100, 130):  # some points still buffered, not yet folded
        learner.add(positions[index], potentials[index], gradients[index])
    clones = [pickle.loads(pickle.dumps(learner)), copy.deepcopy(learner)]
    for one in [learner, *clones]:
        for index in range(130, 200):
            one.add(positions[index], potentials[index], gradients[index])
    expected = learner.updated_surrogate().coefficients
    for clone in clones:
        np.testing.assert_array_equal(clone.updated_surrogate().coefficients, expected)


def test_an_unfitted_surrogate_cannot_learn_online(points):
    with pytest.raises(ValueError, match="fitted"):
        RandomNetworkSurrogate().online_estimator(*points)

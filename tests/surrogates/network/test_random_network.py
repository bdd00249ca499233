import pickle

import numpy as np
import pytest

from pymc_rnshmc.surrogates import PotentialSurrogate, RandomNetworkSurrogate, SurrogateFitError


def banana_potential(points):
    """Banana-shaped potential (value and gradient) at rows ``(n, 2)``."""
    points = np.atleast_2d(points)
    bend = points[:, 1] - 0.5 * points[:, 0] ** 2
    values = 0.5 * points[:, 0] ** 2 + 2.0 * bend**2
    gradients = np.stack([points[:, 0] - 4.0 * points[:, 0] * bend, 4.0 * bend], axis=1)
    return values, gradients


def gaussian_potential(points, precision):
    values = 0.5 * np.sum((points @ precision) * points, axis=1)
    return values, points @ precision


@pytest.fixture(scope="module")
def banana_training():
    rng = np.random.default_rng(0)
    x = rng.normal(0.0, 1.0, size=600)
    y = 0.5 * x**2 + rng.normal(0.0, 0.5, size=600)
    points = np.stack([x, y], axis=1)
    return points, *banana_potential(points)


@pytest.mark.parametrize(
    ("options", "tolerance"),
    [
        ({}, 0.05),
        ({"quadratic": False}, 0.05),
        ({"hidden_units": "radial"}, 0.2),
        ({"activation": "tanh", "n_hidden": 300}, 0.05),
    ],
    ids=["default", "no-quadratic", "radial", "tanh"],
)
def test_fits_a_banana_from_values_and_gradients(banana_training, options, tolerance):
    points, values, gradients = banana_training
    surrogate = RandomNetworkSurrogate(**options).fit(
        points[:400], values[:400], gradients[:400], rng=1
    )
    assert isinstance(surrogate, PotentialSurrogate)
    # Held-out points inside the training range (no surrogate extrapolates a banana's tips).
    inside = 400 + np.flatnonzero(np.abs(points[400:, 0]) < 2.5)
    test_values, test_gradients = values[inside], gradients[inside]
    predicted = surrogate.gradient(points[inside])
    spread = np.mean(np.sum((test_gradients - test_gradients.mean(0)) ** 2, axis=1))
    relative_error = np.sqrt(np.mean(np.sum((predicted - test_gradients) ** 2, axis=1)) / spread)
    assert relative_error < tolerance, relative_error
    assert surrogate.report.gradient_error < tolerance
    centred = surrogate.potential(points[inside]) - test_values
    assert np.std(centred) < 0.1 * np.std(test_values)


@pytest.mark.parametrize("weight_scale", [1.0, 0.1])
def test_gradient_is_the_derivative_of_the_potential(banana_training, weight_scale):
    points, values, gradients = banana_training
    surrogate = RandomNetworkSurrogate(n_hidden=100, weight_scale=weight_scale).fit(
        points, values, gradients, rng=3
    )
    # Small weights give output weights of ~1e4 whose sum rounds at ~1e-11: a wider difference.
    eps = 1e-4
    for point in points[:5]:
        numeric = [
            (surrogate.potential(point + eps * e) - surrogate.potential(point - eps * e))
            / (2 * eps)
            for e in np.eye(2)
        ]
        np.testing.assert_allclose(surrogate.gradient(point), numeric, rtol=1e-5, atol=1e-6)
    # one point and a batch give the same answer
    np.testing.assert_allclose(surrogate.gradient(points[:3])[1], surrogate.gradient(points[1]))


def test_quadratic_base_makes_gaussians_nearly_exact():
    rng = np.random.default_rng(4)
    dim = 20
    root = rng.normal(size=(dim, dim)) / np.sqrt(dim)
    precision = root @ root.T + 0.5 * np.eye(dim)
    points = rng.multivariate_normal(np.zeros(dim), np.linalg.inv(precision), size=300) + 50.0
    values, gradients = gaussian_potential(points - 50.0, precision)
    # the fit itself: the ceiling moves the force by up to exp(-5) at the data's fringe
    surrogate = RandomNetworkSurrogate(ceiling=False).fit(points, values, gradients, rng=5)
    test = rng.multivariate_normal(np.zeros(dim), np.linalg.inv(precision), size=50) + 50.0
    np.testing.assert_allclose(
        surrogate.gradient(test), gaussian_potential(test - 50.0, precision)[1], atol=1e-5
    )


def test_same_rng_same_fit_and_pickle_round_trip(banana_training):
    points, values, gradients = banana_training
    first = RandomNetworkSurrogate(n_hidden=60).fit(points, values, gradients, rng=7)
    second = RandomNetworkSurrogate(n_hidden=60).fit(points, values, gradients, rng=7)
    np.testing.assert_array_equal(first.coefficients, second.coefficients)
    clone = pickle.loads(pickle.dumps(first))
    np.testing.assert_array_equal(clone.gradient(points[0]), first.gradient(points[0]))


@pytest.mark.parametrize("quadratic", [False, True], ids=["no-quadratic", "quadratic"])
def test_values_only_fit_works(banana_training, quadratic):
    points, values, _ = banana_training
    surrogate = RandomNetworkSurrogate(n_hidden=200, quadratic=quadratic).fit(points, values, rng=8)
    assert (surrogate.quadratic_part is not None) == quadratic
    assert np.isnan(surrogate.report.gradient_error)
    assert np.std(surrogate.potential(points) - values) < 0.05 * np.std(values)


def test_non_finite_rows_are_dropped(banana_training):
    points, values, gradients = (a.copy() for a in banana_training)
    values[:10] = np.nan
    gradients[10:20] = np.inf
    surrogate = RandomNetworkSurrogate(n_hidden=50).fit(points, values, gradients, rng=9)
    assert surrogate.report.n_points == points.shape[0] - 20


def test_ill_conditioned_training_data_give_a_finite_surrogate():
    # Duplicated points (a chain that rejects a lot) and a coordinate that never moves.
    rng = np.random.default_rng(10)
    points = np.repeat(rng.normal(size=(12, 3)), 20, axis=0)
    points[:, 2] = 1.0
    values, gradients = gaussian_potential(points, np.eye(3))
    surrogate = RandomNetworkSurrogate().fit(points, values, gradients, rng=11)
    assert np.all(np.isfinite(surrogate.gradient(points)))
    assert np.all(np.isfinite(surrogate.gradient(np.full(3, 1e3))))


@pytest.mark.parametrize("with_gradients", [True, False], ids=["gradients", "values"])
def test_too_few_points_raise_a_clear_error(with_gradients):
    points = np.zeros((6, 5))
    gradients = np.zeros((6, 5)) if with_gradients else None
    with pytest.raises(SurrogateFitError, match="at least 7"):
        RandomNetworkSurrogate().fit(points, np.zeros(6), gradients)
    with pytest.raises(SurrogateFitError, match="at least 3"):
        RandomNetworkSurrogate(quadratic=False).fit(points[:2], np.zeros(2), None)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"n_hidden": 0}, "n_hidden"),
        ({"n_hidden": 2.5}, "n_hidden"),
        ({"activation": "relu6"}, "activation"),
        ({"hidden_units": "fourier"}, "hidden_units"),
        ({"penalty": -1.0}, "penalty"),
        ({"validation_fraction": 1.0}, "validation_fraction"),
        ({"weight_scale": 0.0}, "weight_scale"),
    ],
)
def test_invalid_settings_are_rejected(options, match):
    with pytest.raises(ValueError, match=match):
        RandomNetworkSurrogate(**options)


def smooth_cubic_training(n_points: int = 400, dim: int = 6, seed: int = 0):
    """A smooth non-Gaussian potential (quadratic plus cubic terms), like a PDE misfit."""
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(n_points, dim))
    a, b = rng.normal(size=(2, dim)) / np.sqrt(dim)
    t, u = points @ a, points @ b
    values = 0.5 * np.sum(points**2, axis=1) + 0.3 * t**3 + 0.2 * t * u**2
    gradients = points + np.outer(0.9 * t**2 + 0.2 * u**2, a) + np.outer(0.4 * t * u, b)
    return points, values, gradients


def test_default_weight_scale_is_chosen_on_held_out_points():
    points, values, gradients = smooth_cubic_training()
    chosen = RandomNetworkSurrogate().fit(points, values, gradients, rng=1)
    unit = RandomNetworkSurrogate(weight_scale=1.0).fit(points, values, gradients, rng=1)
    assert chosen.report.weight_scale < 1.0
    assert chosen.report.gradient_error < 0.5 * unit.report.gradient_error
    assert unit.report.weight_scale == 1.0


def test_weight_scale_search_stops_once_the_error_is_negligible():
    rng = np.random.default_rng(2)
    points = rng.normal(size=(300, 4))
    surrogate = RandomNetworkSurrogate().fit(points, 0.5 * np.sum(points**2, axis=1), points)
    assert surrogate.report.weight_scale == 1.0  # the quadratic base is exact: no search


def test_scale_search_reuses_the_drawn_directions(monkeypatch):
    from pymc_rnshmc.surrogates.network.hidden_layers import AdditiveLayer

    scaled = []
    original = AdditiveLayer.scaled

    def recording(self, factor):
        scaled.append(factor)
        return original(self, factor)

    monkeypatch.setattr(AdditiveLayer, "scaled", recording)
    rng = np.random.default_rng(2)
    points = rng.normal(size=(300, 4))
    RandomNetworkSurrogate().fit(points, 0.5 * np.sum(points**2, axis=1), points, rng=1)
    assert scaled == []  # negligible error at the unit scale: no other scale tried
    points, values, gradients = smooth_cubic_training()
    chosen = RandomNetworkSurrogate().fit(points, values, gradients, rng=1)
    assert scaled and scaled[0] == 0.3
    unit = RandomNetworkSurrogate(weight_scale=1.0).fit(points, values, gradients, rng=1)
    # the unit-scale layer drawn by the search is the one a fixed unit scale draws
    width = min(unit.layer.n_hidden, chosen.layer.n_hidden)
    np.testing.assert_array_equal(unit.layer.biases[:width], chosen.layer.biases[:width])
    scale = chosen.report.weight_scale
    np.testing.assert_allclose(chosen.layer.weights[:width], scale * unit.layer.weights[:width])

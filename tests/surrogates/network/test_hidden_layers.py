import numpy as np
import pytest

from pymc_rnshmc.surrogates.network.activations import ACTIVATIONS, get_activation
from pymc_rnshmc.surrogates.network.hidden_layers import (
    AdditiveLayer,
    RadialLayer,
    make_hidden_layer,
)

N_POINTS, DIM, N_HIDDEN = 30, 3, 8


def finite_difference_jacobians(layer, points, eps=1e-6):
    """J[n, i, k] = d phi_k / d z_i at point n, by central differences."""
    jacobians = np.zeros((points.shape[0], points.shape[1], layer.n_hidden))
    for i in range(points.shape[1]):
        shift = np.zeros(points.shape[1])
        shift[i] = eps
        jacobians[:, i, :] = (layer.features(points + shift) - layer.features(points - shift)) / (
            2 * eps
        )
    return jacobians


def layers():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(N_POINTS, DIM))
    for name in ACTIVATIONS:
        yield name, AdditiveLayer.draw(rng, N_HIDDEN, DIM, name), points
    yield "radial", RadialLayer.draw(rng, N_HIDDEN, points), points


@pytest.mark.parametrize(("name", "layer", "points"), list(layers()), ids=lambda x: str(x)[:10])
def test_gradient_identities_match_explicit_jacobians(name, layer, points):
    rng = np.random.default_rng(1)
    jacobians = finite_difference_jacobians(layer, points)
    targets = rng.normal(size=points.shape)
    coefficients = rng.normal(size=N_HIDDEN)
    several = rng.normal(size=(N_HIDDEN, 4))

    gram = np.einsum("nik,nil->kl", jacobians, jacobians)
    np.testing.assert_allclose(layer.gradient_gram(points), gram, rtol=1e-6, atol=1e-8)
    projection = np.einsum("nik,ni->k", jacobians, targets)
    np.testing.assert_allclose(layer.gradient_projection(points, targets), projection, atol=1e-7)
    gradients = np.einsum("nik,k->ni", jacobians, coefficients)
    np.testing.assert_allclose(layer.gradient(points, coefficients), gradients, atol=1e-7)
    np.testing.assert_allclose(layer.gradient(points[3], coefficients), gradients[3], atol=1e-7)
    batch = np.einsum("nik,km->nim", jacobians, several)
    np.testing.assert_allclose(layer.gradient_batch(points, several), batch, atol=1e-7)


def test_layers_pickle_and_stay_finite_far_away():
    import pickle

    rng = np.random.default_rng(2)
    points = rng.normal(size=(20, 2))
    for layer in (AdditiveLayer.draw(rng, 5, 2), RadialLayer.draw(rng, 5, points)):
        clone = pickle.loads(pickle.dumps(layer))
        np.testing.assert_array_equal(clone.features(points), layer.features(points))
        far = np.array([1e6, -1e6])
        assert np.all(np.isfinite(layer.features(far)))
        assert np.all(np.isfinite(layer.gradient(far, np.ones(5))))


def test_unknown_names_are_rejected_with_the_choices():
    with pytest.raises(ValueError, match="softplus"):
        get_activation("relu6")
    with pytest.raises(ValueError, match="additive"):
        make_hidden_layer("wavelet", np.random.default_rng(0), 3, np.zeros((4, 2)))

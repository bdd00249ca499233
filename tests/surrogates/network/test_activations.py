"""Activations: derivatives in place and against differences."""

import numpy as np
import pytest

from pymc_rnshmc.surrogates.network.activations import ACTIVATIONS


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_derivative_in_place_matches(name):
    x = np.linspace(-40.0, 40.0, 101)
    expected = ACTIVATIONS[name].derivative(x)
    buffer = x.copy()
    result = ACTIVATIONS[name].derivative(buffer, out=buffer)
    assert result is buffer
    np.testing.assert_allclose(result, expected, rtol=1e-15, atol=0)
    step = 1e-6
    numeric = (ACTIVATIONS[name].value(x + step) - ACTIVATIONS[name].value(x - step)) / (2 * step)
    np.testing.assert_allclose(expected, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_take_scalars(name):
    activation = ACTIVATIONS[name]
    assert np.ndim(activation.value(0.3)) == 0
    assert float(activation.derivative(0.3)) == pytest.approx(
        activation.derivative(np.array([0.3]))[0]
    )

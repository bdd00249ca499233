import numpy as np
import pytest

from pymc_rnshmc.surrogates.network import held_out_selection
from pymc_rnshmc.surrogates.network.held_out_selection import choose_on_held_out, validation_mask
from pymc_rnshmc.surrogates.network.hidden_layers import AdditiveLayer
from pymc_rnshmc.surrogates.network.layer_choice import LayerChoice

WIDTHS = [25, 50, 100, 200, 400, 800]
OPTIONS = LayerChoice(
    hidden_units="additive",
    activation="softplus",
    n_hidden=None,
    max_hidden=WIDTHS[-1],
    penalty=None,
    weight_scale=None,
    gradient_weight=1.0,
    validation_fraction=0.2,
    quadratic=False,
    gaussian_base=False,
)


def training(potential: str, seed: int, n_points: int = 200, dim: int = 4):
    """Points, values and (noisy) gradients of a smooth potential, and a layer drawn for them."""
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(n_points, dim))
    if potential == "cubic":  # learned to about 4 % (relative) at 100 units, then stalls
        direction = rng.normal(size=dim) / np.sqrt(dim)
        along = points @ direction
        values = 0.5 * np.sum(points**2, axis=1) + 0.1 * along**3
        gradients = points + np.outer(0.3 * along**2, direction)
        gradients += 0.03 * rng.normal(size=gradients.shape)
    else:  # a sum of sines that 200 points cannot teach: the error stalls and falls again
        frequencies = rng.normal(size=(6, dim)) * 1.5
        phases = points @ frequencies.T
        values = np.sum(np.sin(phases), axis=1)
        gradients = np.cos(phases) @ frequencies
    layer = AdditiveLayer.draw(np.random.default_rng(seed + 1), WIDTHS[-1], dim)
    return points, values, gradients, layer


def choose(points, values, gradients, layer, widths=WIDTHS):
    """The held-out choice, and the widths whose normal equations were formed."""
    formed = []

    def normal_equations(layer, whitened, features, values, gradients):
        formed.append(features.shape[1])
        return OPTIONS.normal_equations(layer, whitened, features, values, gradients)

    held_out = validation_mask(len(points), 0.2)
    spread = float(np.mean(np.sum((gradients - gradients.mean(0)) ** 2, axis=1)))
    features = layer.features(points)
    choice = choose_on_held_out(
        layer, points, features, values, gradients, held_out, spread, normal_equations, widths
    )
    return choice, formed, spread


def test_a_learned_fit_stops_widening_where_it_gains_less_than_a_tenth(monkeypatch):
    points, values, gradients, layer = training("cubic", seed=0)
    stopped, formed, spread = choose(points, values, gradients, layer)
    assert formed == WIDTHS[: len(formed)] and len(formed) < len(WIDTHS)
    errors = [choose(points, values, gradients, layer, [width])[0].lowest for width in formed]
    assert errors[-1] >= 0.9 * min(errors[:-1])  # the last width tried gained too little ...
    assert min(errors) <= held_out_selection.LEARNED_ERROR * spread  # ... on a learned fit
    monkeypatch.setattr(held_out_selection, "WIDENING_GAIN", -np.inf)
    whole, every, _ = choose(points, values, gradients, layer)
    assert every == WIDTHS
    assert (stopped.width, stopped.relative_penalty) == (whole.width, whole.relative_penalty)
    assert stopped.lowest == pytest.approx(min(errors))


def test_a_poor_fit_tries_every_width():
    points, values, gradients, layer = training("sines", seed=0)
    choice, formed, spread = choose(points, values, gradients, layer)
    assert formed == WIDTHS
    assert choice.lowest > held_out_selection.LEARNED_ERROR * spread


def test_a_negligible_error_ends_the_search():
    rng = np.random.default_rng(4)
    points = rng.normal(size=(200, 4))
    layer = AdditiveLayer.draw(rng, WIDTHS[-1], 4)
    weights = rng.normal(size=WIDTHS[0])  # a potential the narrowest layer represents exactly
    values = layer.subset(WIDTHS[0]).features(points) @ weights
    gradients = layer.subset(WIDTHS[0]).gradient(points, weights)
    choice, formed, _ = choose(points, values, gradients, layer)
    assert formed == WIDTHS[:1] and choice.width == WIDTHS[0]

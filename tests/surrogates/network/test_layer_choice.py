import numpy as np
import pytest

from pymc_rnshmc.surrogates import RandomNetworkSurrogate
from pymc_rnshmc.surrogates.network.layer_choice import LayerChoice


def sines(frequency: float, n_points: int = 800, dim: int = 4):
    """A Gaussian potential plus a sum of sines: the higher the frequency, the more units help."""
    rng = np.random.default_rng(0)
    points = rng.normal(size=(n_points, dim))
    frequencies = frequency * rng.normal(size=(3, dim))
    phases = points @ frequencies.T
    values = 0.5 * np.sum(points**2, axis=1) + np.sum(np.sin(phases), axis=1)
    gradients = points + np.cos(phases) @ frequencies
    return points, values, gradients


def widths_formed(monkeypatch, points, values, gradients):
    """The fitted surrogate, and the widths of every normal equations formed for it in order."""
    formed = []
    original = LayerChoice.normal_equations

    def recording(self, layer, whitened, features, values, gradients):
        formed.append(features.shape[1])
        return original(self, layer, whitened, features, values, gradients)

    monkeypatch.setattr(LayerChoice, "normal_equations", recording)
    surrogate = RandomNetworkSurrogate().fit(points, values, gradients, rng=1)
    return surrogate, formed


# 800 points in 4 dimensions: a layer of 1000 units, widths 125, 250, 500 (screened) and 1000.
@pytest.mark.parametrize(
    ("frequency", "widened", "chosen"),
    [(0.5, True, 1000), (0.3, False, 500)],
    ids=["still-falling", "negligible"],
)
def test_the_widest_width_is_tried_only_while_the_error_still_falls(
    monkeypatch, frequency, widened, chosen
):
    surrogate, formed = widths_formed(monkeypatch, *sines(frequency))
    assert formed[:3] == [125, 250, 500]
    assert (1000 in formed) == widened
    if widened:  # on from the screened choice, which is not fitted again
        assert formed[-2:] == [1000, 1000]  # the last: the fit on every point
        assert formed.count(500) == formed.count(125)
    assert surrogate.layer.n_hidden == chosen


def test_a_learned_fit_stops_widening_at_every_scale(monkeypatch):
    rng = np.random.default_rng(0)
    points = rng.normal(size=(800, 4))
    direction = rng.normal(size=4) / 2
    along = points @ direction
    values = 0.5 * np.sum(points**2, axis=1) + 0.1 * along**3
    gradients = points + np.outer(0.3 * along**2, direction) + 0.03 * rng.normal(size=(800, 4))
    surrogate, formed = widths_formed(monkeypatch, points, values, gradients)
    assert max(formed) == 250  # 250 gained too little on 125 at each scale tried
    assert surrogate.report.gradient_error < 0.1

"""Where the search for the surrogate dynamics' step size starts."""

import numpy as np
import pytest

from pymc_rnshmc.hmc.metrics import DiagonalMetric
from pymc_rnshmc.hmc.trajectory_tuning import MAX_SEARCH_STEPS, _find_step_size, _simulate


def gaussian(scales):
    scales = np.asarray(scales, dtype=float)

    def potential(rows):
        return 0.5 * np.sum((np.atleast_2d(rows) / scales) ** 2, axis=1)

    def gradient(rows):
        return np.atleast_2d(rows) / scales**2

    return potential, gradient


@pytest.mark.parametrize("initial", [1e-42, 1e3], ids=["collapsed", "huge"])
def test_the_step_size_search_starts_within_one_to_max_steps_steps_a_trajectory(initial):
    potential, gradient = gaussian(np.ones(3))
    rng = np.random.default_rng(0)
    starts = rng.normal(size=(16, 3))
    metric = DiagonalMetric(np.ones(3))
    path_length = 1.5
    step_size = _find_step_size(potential, gradient, metric, starts, initial, path_length, 0.9, rng)
    # a guess of 1e-42 used to come back unchanged: trajectories that did not move
    assert path_length / MAX_SEARCH_STEPS <= step_size <= 2 * path_length
    _, acceptance = _simulate(
        potential, gradient, metric, starts, step_size, lambda: round(1.5 / step_size), 50, rng
    )
    assert acceptance > 0.75

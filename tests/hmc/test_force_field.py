"""The trajectories' force field and its plausibility bound."""

import numpy as np

from pymc_rnshmc.hmc.force_field import FORCE_BOUND_FACTOR, ForceField, force_bound


def test_the_bound_keeps_the_natural_scale_of_a_coordinate_whose_gradients_are_zero():
    rng = np.random.default_rng(0)
    positions = rng.normal(size=(200, 2)) * [1.0, 0.5]
    gradients = np.column_stack([positions[:, 0], np.zeros(200)])  # flat in the second
    bound = force_bound(positions, gradients)
    assert bound[0] >= FORCE_BOUND_FACTOR * np.abs(gradients[:, 0]).max()
    assert bound[1] >= 0.9 * FORCE_BOUND_FACTOR / 0.5


def test_the_field_falls_back_to_the_exact_gradient_and_counts_it():
    exact_calls = []

    def exact(position):
        exact_calls.append(position)
        return -position

    field = ForceField(lambda q: np.where(q > 1.0, np.nan, q), exact, np.full(1, 10.0))
    np.testing.assert_array_equal(field(np.array([0.5])), [0.5])
    np.testing.assert_array_equal(field(np.array([2.0])), [-2.0])
    np.testing.assert_array_equal(field(np.array([0.5])), [0.5])
    assert field.exact_points == 1 and len(exact_calls) == 1

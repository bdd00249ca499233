"""The trajectories' force field and its plausibility bound."""

import numpy as np

from pymc_rnshmc.hmc.force_field import (
    FORCE_BOUND_FACTOR,
    ForceField,
    LeftTrustRegion,
    force_bound,
)
from pymc_rnshmc.hmc.leapfrog import leapfrog


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


def _trajectory(position, momentum, field, n_steps=12, step_size=0.3):
    """Leapfrog as the proposal runs it: start force first, then the counted trajectory."""
    force = field(position)
    field.start_trajectory(n_steps + 1, field.last_exact)
    try:
        end = leapfrog(position, momentum, force, step_size, n_steps, field, lambda p: p)
    except LeftTrustRegion:
        return None
    return end


def test_leaving_the_trust_region_is_decided_the_same_forwards_and_backwards():
    # The surrogate fails beyond |q| > 1.2: counting exact points over the whole trajectory
    # (both ends) makes the stop-and-reject rule the same for the reversed trajectory.
    def surrogate(q):
        return np.where(np.abs(q) > 1.2, np.nan, q)

    def exact(q):
        return q

    rng = np.random.default_rng(1)
    decided = {True: 0, False: 0}
    for _ in range(300):
        position, momentum = rng.normal(size=2), rng.normal(size=2)
        free = _trajectory(position, momentum, ForceField(surrogate, exact, np.full(2, 1e3)))
        forward = _trajectory(
            position, momentum, ForceField(surrogate, exact, np.full(2, 1e3), 0.25, exact_floor=1)
        )
        field = ForceField(surrogate, exact, np.full(2, 1e3), 0.25, exact_floor=1)
        backward = _trajectory(free.position, -free.momentum, field)
        assert (forward is None) == (backward is None)
        decided[forward is None] += 1
        if forward is not None:
            np.testing.assert_allclose(backward.position, position, atol=1e-10)
    assert decided[True] > 20 and decided[False] > 20

"""One surrogate transition (:mod:`pymc_rnshmc.hmc.transition`)."""

import numpy as np

from pymc_rnshmc.hmc.corrections import Evaluation, ExactMetropolis
from pymc_rnshmc.hmc.force_field import ForceField
from pymc_rnshmc.hmc.metrics import DiagonalMetric
from pymc_rnshmc.hmc.proposals import LeapfrogProposal
from pymc_rnshmc.hmc.transition import CachedPoint, surrogate_transition

CURVATURE = np.array([1.0, 3.0])


def potential(q):
    return 0.5 * np.sum(CURVATURE * np.asarray(q, dtype=float) ** 2, axis=-1)


def gradient(q):
    return CURVATURE * np.asarray(q, dtype=float)


def transition(start: CachedPoint, seed: int, cast):
    force_field = ForceField(gradient, gradient, np.full(2, 1e6))
    return surrogate_transition(
        start,
        LeapfrogProposal(DiagonalMetric(np.ones(2)), path_length=1.3, max_steps=100),
        ExactMetropolis(1000.0),
        force_field,
        0.1,
        np.random.default_rng(seed),
        evaluate=lambda q: Evaluation(q, -float(potential(q))),
        surrogate_potential=potential,
        cast=cast,
        extras=(),
        diagnose=True,
    )


def test_a_cached_force_belongs_to_the_point_the_chain_holds():
    def to_float32(q):
        return np.ascontiguousarray(q, dtype=np.float32)

    position = to_float32([0.3, -0.7])
    start = CachedPoint(position, -float(potential(position)), (), force=gradient(position))
    result = transition(start, 4, to_float32)
    assert result.accepted and result.end.position.dtype == np.float32
    force = result.end.force
    assert force is None or np.array_equal(force, gradient(result.end.position))


def test_without_a_cast_the_trajectory_hands_on_its_end_force():
    position = np.array([0.3, -0.7])
    start = CachedPoint(position, -float(potential(position)), (), force=gradient(position))
    result = transition(start, 4, np.asarray)
    assert result.accepted
    np.testing.assert_allclose(result.end.force, gradient(result.end.position))


def test_a_surrogate_far_too_low_at_the_end_is_a_rejection_not_a_divergence():
    # the model is 2000 nats above the (smooth) surrogate beyond x0 = 1: a trajectory that
    # keeps the surrogate's Hamiltonian and crosses there has an exact energy change of 2000
    def exact(q):
        return Evaluation(q, -float(potential(q)) - 2000.0 * (q[0] > 1.0))

    position = np.array([0.9, 0.0])
    start = CachedPoint(position, -float(potential(position)), (), force=gradient(position))
    results = [
        surrogate_transition(
            start,
            LeapfrogProposal(DiagonalMetric(np.ones(2)), path_length=0.5, max_steps=100),
            ExactMetropolis(1000.0),
            ForceField(gradient, gradient, np.full(2, 1e6)),
            0.1,
            np.random.default_rng(seed),
            evaluate=exact,
            surrogate_potential=potential,
            cast=np.asarray,
            extras=(),
            diagnose=True,
        )
        for seed in range(20)
    ]
    far = [seed for seed, r in enumerate(results) if r.energy_change > 1000.0]
    assert far, "no trajectory crossed x0 = 1"
    assert all(not results[i].accepted and results[i].divergence is None for i in far)
    # a wall as high (the surrogate 2000 nats above the model there) stays a divergence
    wall = surrogate_transition(
        start,
        LeapfrogProposal(DiagonalMetric(np.ones(2)), path_length=0.5, max_steps=100),
        ExactMetropolis(1000.0),
        ForceField(gradient, gradient, np.full(2, 1e6)),
        0.1,
        np.random.default_rng(far[0]),  # the same trajectory as a far one
        evaluate=lambda q: Evaluation(q, -float(potential(q)) + 2000.0 * (q[0] > 1.0)),
        surrogate_potential=potential,
        cast=np.asarray,
        extras=(),
        diagnose=True,
    )
    assert wall.energy_change < -1000.0 and wall.divergence is not None and not wall.accepted

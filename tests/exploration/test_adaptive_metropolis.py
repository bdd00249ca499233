"""The gradient-free explorer: an invariant kernel once fixed, and an adaptation that learns."""

import numpy as np
import pytest

from pymc_rnshmc.exploration.adaptive_metropolis import TARGET_ACCEPT, AdaptiveMetropolis
from tests.checks import assert_moments

COVARIANCE = np.array([[4.0, 1.8], [1.8, 1.0]])  # sd 2 and 1, correlation 0.9
PRECISION = np.linalg.inv(COVARIANCE)


def gaussian_logp(x):
    return -0.5 * float(x @ PRECISION @ x)


def run(explorer, n_steps, seed, start=None):
    rng = np.random.default_rng(seed)
    position = np.zeros(2) if start is None else start
    logp = gaussian_logp(position)
    steps = []
    for _ in range(n_steps):
        step = explorer.step(position, logp, gaussian_logp, rng)
        position, logp = step.position, step.logp
        steps.append(step)
    return steps


def test_adaptation_learns_the_covariance_and_the_acceptance_rate():
    explorer = AdaptiveMetropolis(2)
    steps = run(explorer, 4000, seed=1, start=np.array([5.0, -3.0]))
    learned = explorer.chain_covariance()
    np.testing.assert_allclose(learned, COVARIANCE, rtol=0.3, atol=0.3)
    late_accept = np.mean([step.accept for step in steps[-2000:]])
    assert abs(late_accept - TARGET_ACCEPT) < 0.08


def test_a_fixed_random_walk_leaves_the_target_invariant():
    explorer = AdaptiveMetropolis(2)
    run(explorer, 2000, seed=2)
    explorer.adapting = False
    fixed = (explorer.cholesky.copy(), explorer.log_scale)
    steps = run(explorer, 40_000, seed=3, start=np.array([0.5, 0.2]))
    assert np.array_equal(explorer.cholesky, fixed[0]) and explorer.log_scale == fixed[1]
    draws = np.array([step.position for step in steps])[None]
    sds = np.sqrt(np.diag(COVARIANCE))
    for i in range(2):
        assert_moments(draws[..., i], 0.0, sds[i], f"x[{i}]")


def test_every_step_evaluates_one_proposal_and_reports_it():
    calls = []

    def counted(x):
        calls.append(np.array(x))
        return gaussian_logp(x)

    explorer = AdaptiveMetropolis(2)
    rng = np.random.default_rng(4)
    position, logp = np.zeros(2), 0.0
    for _ in range(50):
        step = explorer.step(position, logp, counted, rng)
        assert np.array_equal(step.proposal, calls[-1])
        assert step.proposal_logp == gaussian_logp(step.proposal)
        expected = step.proposal if step.accepted else position
        assert np.array_equal(step.position, expected)
        position, logp = step.position, step.logp
    assert len(calls) == 50


@pytest.mark.parametrize("bad", [np.nan, -np.inf])
def test_proposals_with_a_bad_log_density_are_rejected(bad):
    explorer = AdaptiveMetropolis(3)
    rng = np.random.default_rng(5)
    start = np.ones(3)
    for _ in range(100):
        step = explorer.step(start, -1.0, lambda x: bad, rng)
        assert not step.accepted and step.accept == 0.0
        assert np.array_equal(step.position, start) and step.logp == -1.0
    assert explorer.chain_covariance() is None  # a chain that never moved learns nothing
    assert np.all(np.isfinite(explorer.cholesky)) and np.isfinite(explorer.log_scale)


def test_a_window_of_too_few_distinct_states_does_not_become_the_proposal():
    """Two distinct states in a window of 20 gave a covariance of rank one, and the walk
    proposed along one line for good."""
    explorer = AdaptiveMetropolis(2)
    explorer._states = [np.array([0.0, 0.0])] * 30 + [np.array([1.0, 2.0])] * 10
    explorer._update_covariance()
    assert explorer.chain_covariance() is None  # the proposal is still the initial one
    spread = np.random.default_rng(0).normal(size=(40, 2))
    explorer._states = list(spread)
    explorer._update_covariance()
    assert np.linalg.eigvalsh(explorer.chain_covariance()).min() > 0.1

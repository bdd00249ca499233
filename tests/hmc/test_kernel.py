"""The surrogate kernel without PyMC: a value, and a transition that keeps exact draws exact."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from pymc_rnshmc.hmc.corrections import (
    DelayedAcceptance,
    Evaluation,
    ExactMetropolis,
    SurrogateTarget,
)
from pymc_rnshmc.hmc.kernel import SurrogateKernel, kernel_finish, kernel_propose, kernel_step
from pymc_rnshmc.hmc.metrics import DenseMetric
from pymc_rnshmc.hmc.proposals import LeapfrogProposal, NutsProposal
from pymc_rnshmc.hmc.transition import CachedPoint
from tests.checks import assert_moments

MEAN = np.array([1.0, -2.0])
COVARIANCE = np.array([[1.0, 0.6], [0.6, 0.5]])
PRECISION = np.linalg.inv(COVARIANCE)


class GaussianTarget:
    """The exact model: a correlated Gaussian, counting its evaluations."""

    has_gradient = True

    def __init__(self) -> None:
        self.evaluations = 0

    def logp(self, position: np.ndarray) -> float:
        self.evaluations += 1
        residual = position - MEAN
        return -0.5 * float(residual @ PRECISION @ residual)

    def potential_and_gradient(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        self.evaluations += 1
        residual = position - MEAN
        return 0.5 * float(residual @ PRECISION @ residual), PRECISION @ residual

    def cast(self, position: np.ndarray) -> np.ndarray:
        return np.asarray(position, dtype=float)


class WrongSurrogate:
    """A Gaussian potential with the wrong centre and scale: a poor fit, deliberately."""

    def __init__(self, shift: float, stretch: float) -> None:
        self.centre = MEAN + shift
        self.precision = PRECISION / stretch

    def potential(self, positions: np.ndarray) -> np.ndarray | float:
        residual = np.asarray(positions) - self.centre
        return 0.5 * np.einsum("...i,ij,...j->...", residual, self.precision, residual)

    def gradient(self, position: np.ndarray) -> np.ndarray:
        return self.precision @ (position - self.centre)


def kernel(dynamics: str, shift: float = 0.5, stretch: float = 2.0) -> SurrogateKernel:
    metric = DenseMetric(COVARIANCE)
    if dynamics == "hmc":
        proposal, correction = LeapfrogProposal(metric, 1.5, 64), ExactMetropolis(1000.0)
    else:
        proposal, correction = NutsProposal(metric, 6, 1000.0), DelayedAcceptance(1000.0)
    return SurrogateKernel(
        WrongSurrogate(shift, stretch),
        proposal,
        correction,
        step_size=0.3,
        force_bound=np.full(2, 1e6),
        uses_cached_force=dynamics == "hmc",
    )


def chain(value: SurrogateKernel, target, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    position = MEAN.copy()
    point = CachedPoint(position, target.logp(position), ())
    draws = np.empty((n, 2))
    for i in range(n):
        point = kernel_step(value, point, rng, target).end
        draws[i] = point.position
    return draws


@pytest.mark.parametrize("dynamics", ["hmc", "nuts"])
def test_a_wrong_surrogate_still_samples_the_target(dynamics):
    target = GaussianTarget()
    draws = chain(kernel(dynamics), target, 3000, seed=1)[None]
    for i in range(2):
        label = f"{dynamics}, coordinate {i}"
        assert_moments(draws[..., i], MEAN[i], np.sqrt(COVARIANCE[i, i]), label, min_ess=300)


@pytest.mark.parametrize("dynamics", ["hmc", "nuts"])
def test_a_kept_draw_costs_one_exact_logp(dynamics):
    target = GaussianTarget()
    chain(kernel(dynamics), target, 200, seed=2)
    assert target.evaluations == 1 + 200  # the start's, then one a draw


@pytest.mark.parametrize("dynamics", ["hmc", "nuts"])
def test_chains_whose_proposals_are_evaluated_together_make_the_same_draws(dynamics):
    """Propose for every chain, evaluate the proposals in one batch, then finish each."""
    value, target = kernel(dynamics), GaussianTarget()
    starts = [MEAN.copy(), MEAN + 0.5, MEAN - 0.3]
    one_by_one = [CachedPoint(q, target.logp(q), ()) for q in starts]
    batched = list(one_by_one)
    rngs = [np.random.default_rng(seed) for seed in (11, 12, 13)]
    twins = [np.random.default_rng(seed) for seed in (11, 12, 13)]
    for _ in range(30):
        one_by_one = [
            kernel_step(value, point, rng, target).end
            for point, rng in zip(one_by_one, rngs, strict=True)
        ]
        pending = [
            kernel_propose(value, point, rng, target)
            for point, rng in zip(batched, twins, strict=True)
        ]
        wanted = [p.position_to_evaluate for p in pending]
        logps = [None if q is None else target.logp(q) for q in wanted]  # one batch
        batched = [
            kernel_finish(value, p, rng, lambda q, logp=logp: Evaluation(q, logp)).end
            for p, rng, logp in zip(pending, twins, logps, strict=True)
        ]
        for mine, theirs in zip(one_by_one, batched, strict=True):
            np.testing.assert_array_equal(mine.position, theirs.position)


def test_the_kernel_is_a_value_that_pickles_and_replays():
    value = kernel("hmc")
    copied = pickle.loads(pickle.dumps(value))
    np.testing.assert_array_equal(
        chain(value, GaussianTarget(), 50, seed=3), chain(copied, GaussianTarget(), 50, seed=3)
    )
    with pytest.raises(AttributeError):
        value.step_size = 0.1  # a new step size is a new kernel: value._replace(step_size=0.1)


def test_a_broken_kernel_is_caught():
    """The same harness fails a kernel whose test ignores the target (the check can fail)."""

    class SurrogateTest(ExactMetropolis):
        def decide(self, start_logp, move, evaluate, rng):
            return super().decide(start_logp, move, surrogate_evaluation, rng)

    wrong = WrongSurrogate(shift=0.5, stretch=2.0)

    def surrogate_evaluation(position):
        return Evaluation(position, -float(wrong.potential(position)))

    broken = kernel("hmc")._replace(surrogate=wrong, correction=SurrogateTest(1000.0))
    draws = chain(broken, GaussianTarget(), 3000, seed=1)[None]
    with pytest.raises(AssertionError):
        for i in range(2):
            assert_moments(draws[..., i], MEAN[i], np.sqrt(COVARIANCE[i, i]), min_ess=100)


@pytest.mark.parametrize("dynamics", ["hmc", "nuts"])
def test_a_kernel_on_the_surrogate_alone_samples_the_surrogate_without_the_model(dynamics):
    """``SurrogateTarget`` (tuning on the surrogate alone): no exact call, ``exp(-U~)`` sampled."""
    wrong = kernel(dynamics)
    alone = wrong._replace(correction=SurrogateTarget(wrong.correction, wrong.surrogate.potential))
    target = GaussianTarget()
    rng = np.random.default_rng(3)
    position = MEAN.copy()
    point = CachedPoint(
        position, -float(wrong.surrogate.potential(position)), (), on_surrogate=True
    )
    draws = np.empty((3000, 2))
    for i in range(len(draws)):
        result = kernel_step(alone, point, rng, target)
        point = result.end
        assert point.on_surrogate and result.n_logp_evals == 0
        draws[i] = point.position
    assert target.evaluations == 0
    surrogate_sd = np.sqrt(2.0 * np.diag(COVARIANCE))  # WrongSurrogate(stretch=2): precision / 2
    for i in range(2):
        label = f"{dynamics} on the surrogate alone, coordinate {i}"
        assert_moments(draws[None, :, i], wrong.surrogate.centre[i], surrogate_sd[i], label)

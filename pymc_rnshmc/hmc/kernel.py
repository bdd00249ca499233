"""The surrogate kernel: everything a surrogate draw needs, as one value, and its transition.

A chain's surrogate draws are fixed by a handful of values: the fitted surrogate, the proposal
(dynamics, metric, path length), the correction, the step size and the force field's bound.
:class:`SurrogateKernel` holds them; :func:`kernel_step` is the transition ``(kernel, point,
rng, target) -> DrawResult``, which reads nothing else and reaches the exact model only through
``target``. When tuning ends the kernel is frozen: the kept draws apply one value, so they are a
Markov chain whatever happened while tuning, and the same value can be pickled, handed to
another driver or pushed over exact draws (the stationarity test).

numpy only. While tuning, the PyMC step replaces the step size before every draw and passes an
``evaluate`` that also asks for gradients when the surrogate learns; neither changes the value.

The path of one draw: :func:`kernel_step` = :func:`kernel_propose` (:func:`start_point`, the
surrogate's potential and force at the start if the draw's start lacks them, then
:func:`~pymc_rnshmc.hmc.transition.propose_move`: ``proposal.propose``, one surrogate gradient a
step) + :func:`kernel_finish` (:func:`~pymc_rnshmc.hmc.transition.judge_move`:
``correction.decide``, one exact ``logp``). The halves can run apart, so that a driver of many
chains evaluates their proposals together.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import numpy as np

from pymc_rnshmc.hmc.corrections import Correction, Evaluation
from pymc_rnshmc.hmc.force_field import EXACT_FORCE_SHARE, ForceField, LeftTrustRegion
from pymc_rnshmc.hmc.proposals import Proposal
from pymc_rnshmc.hmc.transition import (
    CachedPoint,
    DrawResult,
    ProposedMove,
    judge_move,
    propose_move,
    surrogate_potential_or_target,
)
from pymc_rnshmc.surrogates.base import Capabilities, for_simulation, potential_and_gradient

__all__ = [
    "ExactTarget",
    "PendingDraw",
    "SurrogateKernel",
    "kernel_finish",
    "kernel_propose",
    "kernel_step",
    "start_point",
]


class ExactTarget(Protocol):
    """What a kernel asks of the exact model (the PyMC step's ``ExactModel`` is one)."""

    has_gradient: bool

    def logp(self, position: np.ndarray) -> float:
        """The exact log density at one point (``-inf`` or NaN where it fails)."""
        ...

    def potential_and_gradient(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        """``U = -logp`` and its gradient at one point."""
        ...

    def cast(self, position: np.ndarray) -> np.ndarray:
        """The position in the dtype the chain holds."""
        ...


class SurrogateKernel(NamedTuple):
    """A surrogate HMC kernel: for a fixed value, a Markov transition that leaves ``pi`` invariant.

    Attributes
    ----------
    surrogate : PotentialSurrogate
        The fitted surrogate (fixed: it is never refitted through the kernel).
    proposal : Proposal
        The surrogate dynamics with their metric and path length (or tree depth).
    correction : Correction
        The test that keeps or rejects a move, with the exact target.
    step_size : float
        The integrator's step size.
    force_bound : ndarray
        Largest plausible surrogate force per coordinate
        (:func:`~pymc_rnshmc.hmc.force_field.force_bound`).
    max_surrogate_energy_change : float
        A leapfrog trajectory whose own Hamiltonian changes by more is rejected without
        evaluating the target (finite for surrogates fitted to values alone).
    uses_cached_force : bool
        The proposal starts from the force at its start point (a leapfrog; a tree computes it).

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
    .. [2] Christen, J. A., & Fox, C. (2005). Markov chain Monte Carlo using an approximation.
       Journal of Computational and Graphical Statistics, 14(4), 795-810.
    """

    surrogate: Any
    proposal: Proposal
    correction: Correction
    step_size: float
    force_bound: np.ndarray
    max_surrogate_energy_change: float = math.inf
    uses_cached_force: bool = True


def _force_field(kernel: SurrogateKernel, surrogate, target: ExactTarget) -> ForceField:
    """The force of ``surrogate``'s trajectories, the exact gradient where it is unusable.

    Without exact gradients a trajectory that meets an unusable force is rejected.
    """
    exact = target.has_gradient
    trusted_everywhere = Capabilities.of(kernel.surrogate).defined_everywhere
    return ForceField(
        surrogate.gradient,
        _exact_gradient(target) if exact else None,
        kernel.force_bound,
        EXACT_FORCE_SHARE if trusted_everywhere else None,
        potential_and_gradient=potential_and_gradient(surrogate),
        exact_potential_and_gradient=target.potential_and_gradient if exact else None,
    )


def _moving_surrogate(kernel: SurrogateKernel, target: ExactTarget):
    """The surrogate the trajectories move by (its extension, for one defined in a domain).

    Only without exact gradients: with them, the exact force takes over outside the domain.
    """
    return kernel.surrogate if target.has_gradient else for_simulation(kernel.surrogate)


def _exact_gradient(target: ExactTarget) -> Callable[[np.ndarray], np.ndarray]:
    def gradient(position: np.ndarray) -> np.ndarray:
        return target.potential_and_gradient(position)[1]

    return gradient


def _logp_evaluation(target: ExactTarget) -> Callable[[np.ndarray], Evaluation]:
    def evaluate(position: np.ndarray) -> Evaluation:
        return Evaluation(position, target.logp(position))

    return evaluate


def start_point(
    kernel: SurrogateKernel, point: CachedPoint, surrogate, forces: ForceField
) -> CachedPoint:
    """``point`` with ``surrogate``'s potential and the force there, if the proposal needs them.

    A point the previous draw left complete is returned as it is. Where the force is unusable
    and there is no exact one, it is NaN, so the move is rejected.
    """
    if not kernel.uses_cached_force or point.force is not None:
        return point
    position = point.position
    potential = surrogate_potential_or_target(surrogate.potential, position, point.logp)
    try:
        force, exact_force = np.asarray(forces(position), dtype=float), False
    except LeftTrustRegion:
        force, exact_force = np.full(position.shape, np.nan), True
    exact_force = exact_force or forces.last_exact
    return point._replace(surrogate_potential=potential, force=force, exact_force=exact_force)


class PendingDraw(NamedTuple):
    """A kernel's draw between its two halves: the move made, the correction still to come.

    ``position_to_evaluate`` is where the correction needs the exact ``logp`` (``None``: the
    move is settled without one). A driver of many chains gathers these positions, evaluates
    them together (on workers, say), and finishes each draw with :func:`kernel_finish`; the
    draws are the same as :func:`kernel_step`'s, however the evaluations were run.
    """

    proposed: ProposedMove
    surrogate: Any
    """The surrogate the trajectory moved by."""
    extras: tuple
    diagnose: bool

    @property
    def position_to_evaluate(self) -> np.ndarray | None:
        return self.proposed.position_to_evaluate


def kernel_propose(
    kernel: SurrogateKernel,
    point: CachedPoint,
    rng: np.random.Generator,
    target: ExactTarget,
    *,
    extras: tuple = (),
    diagnose: bool = True,
    evaluable: Callable[[np.ndarray], bool] | None = None,
) -> PendingDraw:
    """The first half of :func:`kernel_step`: the surrogate move, no exact ``logp`` yet.

    ``target`` is used only where the surrogate's force fails along the trajectory (its exact
    gradient, counted), never for the move's end.
    """
    surrogate = _moving_surrogate(kernel, target)
    forces = _force_field(kernel, surrogate, target)
    start = start_point(kernel, point, surrogate, forces)
    proposed = propose_move(
        start,
        kernel.proposal,
        forces,
        kernel.step_size,
        rng,
        surrogate_potential=surrogate.potential,
        cast=target.cast,
        diagnose=diagnose,
        max_surrogate_energy_change=kernel.max_surrogate_energy_change,
        evaluable=evaluable,
    )
    return PendingDraw(proposed, surrogate, extras, diagnose)


def kernel_finish(
    kernel: SurrogateKernel,
    pending: PendingDraw,
    rng: np.random.Generator,
    evaluate: Callable[[np.ndarray], Evaluation],
) -> DrawResult:
    """The second half of :func:`kernel_step`: the correction with the target's evaluation.

    ``evaluate`` gives the target at ``pending.position_to_evaluate`` (an
    :class:`~pymc_rnshmc.hmc.corrections.Evaluation`); it may return one computed beforehand.
    ``rng`` must continue the stream the first half drew from.
    """
    return judge_move(
        pending.proposed,
        kernel.correction,
        rng,
        evaluate=evaluate,
        surrogate_potential=pending.surrogate.potential,
        extras=pending.extras,
        diagnose=pending.diagnose,
    )


def kernel_step(
    kernel: SurrogateKernel,
    point: CachedPoint,
    rng: np.random.Generator,
    target: ExactTarget,
    *,
    extras: tuple = (),
    diagnose: bool = True,
    evaluate: Callable[[np.ndarray], Evaluation] | None = None,
    evaluable: Callable[[np.ndarray], bool] | None = None,
) -> DrawResult:
    """One transition of ``kernel`` from ``point`` (which carries its target ``logp``).

    Random numbers come from ``rng`` only. ``extras`` tags the new point's ``logp`` (PyMC: the
    values of variables the step does not sample). ``diagnose`` also compares the surrogate
    with the target (``surrogate_error``). While tuning, ``evaluate`` may replace the target's
    ``logp`` at the proposal (to ask for its gradient too), and ``evaluable`` may refuse to
    evaluate proposals far outside the explored region; a kept draw uses neither.
    :func:`kernel_propose` and :func:`kernel_finish` are its two halves.
    """
    pending = kernel_propose(
        kernel, point, rng, target, extras=extras, diagnose=diagnose, evaluable=evaluable
    )
    return kernel_finish(kernel, pending, rng, evaluate or _logp_evaluation(target))

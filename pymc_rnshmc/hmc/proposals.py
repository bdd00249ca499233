"""Proposals of surrogate HMC: move the chain with the surrogate's force field only.

A proposal spends no exact evaluation of its own (the force field may, where the surrogate
fails) and returns a :class:`Move`, the values a correction needs to judge it. The one here is
the jittered fixed-length leapfrog; a NUTS tree on the surrogate or a generalized (implicit)
leapfrog are further fillers of the same slot.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np

from pymc_rnshmc.hmc.force_field import ForceField, LeftTrustRegion
from pymc_rnshmc.hmc.leapfrog import jittered_n_steps, leapfrog
from pymc_rnshmc.hmc.metrics import Metric

__all__ = ["LeapfrogProposal", "Move", "Proposal"]


class Move(NamedTuple):
    """A proposal's end point and what a correction needs to judge it.

    Attributes
    ----------
    position, force : ndarray
        End point and the force field there.
    start_kinetic, end_kinetic : float
        Kinetic energy of the momentum drawn and of the momentum at the end.
    n_steps : int
        Leapfrog steps planned.
    failed : bool
        The trajectory became non-finite: the move must be rejected (a divergence).
    left_trust_region : bool
        The trajectory stopped where the surrogate is not trusted: it must be rejected.
    end_exact : bool
        ``force`` is the exact gradient.
    """

    position: np.ndarray
    force: np.ndarray
    start_kinetic: float
    end_kinetic: float
    n_steps: int
    failed: bool
    left_trust_region: bool = False
    end_exact: bool = False


class Proposal(Protocol):
    """Moves the chain with the surrogate only, drawing random numbers from ``rng`` only."""

    metric: Metric

    def propose(
        self,
        position: np.ndarray,
        force: np.ndarray,
        force_field: ForceField,
        step_size: float,
        rng: np.random.Generator,
        start_exact: bool = False,
    ) -> Move: ...


class LeapfrogProposal:
    """Leapfrog for about ``path_length`` on the force field, with the step count jittered.

    Parameters
    ----------
    metric : Metric
        Kinetic energy (inverse mass matrix) of the trajectories.
    path_length : float
        Integration time; the number of steps is uniform on +-20 % of ``path_length /
        step_size`` (:func:`~pymc_rnshmc.hmc.leapfrog.jittered_n_steps`).
    max_steps : int
        Largest number of steps.
    """

    def __init__(self, metric: Metric, path_length: float, max_steps: int) -> None:
        self.metric = metric
        self.path_length = float(path_length)
        self.max_steps = int(max_steps)

    def propose(
        self,
        position: np.ndarray,
        force: np.ndarray,
        force_field: ForceField,
        step_size: float,
        rng: np.random.Generator,
        start_exact: bool = False,
    ) -> Move:
        """Draw a momentum and a step count from ``rng``, then integrate (in this order).

        ``force`` is the force field at ``position`` (``start_exact``: the exact gradient).
        """
        metric = self.metric
        momentum = metric.random(rng)
        start_kinetic = metric.energy(momentum)
        n_steps = jittered_n_steps(rng, self.path_length, step_size, self.max_steps)
        force_field.start_trajectory(n_steps + 1, start_exact)
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                trajectory = leapfrog(
                    position, momentum, force, step_size, n_steps, force_field, metric.velocity
                )
                end_kinetic = metric.energy(trajectory.momentum)
        except LeftTrustRegion:
            return Move(position, force, start_kinetic, np.inf, n_steps, False, True, start_exact)
        return Move(
            trajectory.position,
            trajectory.gradient,
            start_kinetic,
            end_kinetic,
            trajectory.n_steps,
            trajectory.failed,
            False,
            force_field.last_exact,
        )

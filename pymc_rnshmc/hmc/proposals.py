"""Proposals of surrogate HMC: move the chain with the surrogate's force field only.

A proposal spends no exact evaluation of its own (the force field may, where the surrogate
fails) and returns a :class:`Move`, the values a correction needs to judge it: the jittered
fixed-length leapfrog (:class:`LeapfrogProposal`, judged on the exact Hamiltonian) and a NUTS
transition on the surrogate Hamiltonian (:class:`NutsProposal`, judged by delayed acceptance).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np

from pymc_rnshmc.hmc.force_field import ForceField, LeftTrustRegion
from pymc_rnshmc.hmc.leapfrog import jittered_n_steps, leapfrog
from pymc_rnshmc.hmc.metrics import Metric
from pymc_rnshmc.hmc.nuts_tree import MAX_ENERGY_SPREAD, finite_state, surrogate_nuts

__all__ = ["LeapfrogProposal", "Move", "NutsProposal", "Proposal"]


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
    start_potential, end_potential : float
        The surrogate potential ``U~`` at the start and the end, as the proposal used it (NaN
        if it used none: a leapfrog needs only forces).
    tree_depth : int
        Doublings of a NUTS tree (0 for a leapfrog).
    surrogate_accept : float
        The proposal's own acceptance statistic on the surrogate Hamiltonian (a NUTS tree's
        mean); NaN if it has none.
    tree_divergent : bool
        A NUTS tree stopped on a divergence (its state is still a valid proposal).
    reached_max_depth : bool
        A NUTS tree doubled up to its depth limit without a U-turn.
    index : int, optional
        Steps from the start to the proposal along the trajectory (0: the start itself, which
        a NUTS tree can draw); ``None``: the trajectory's end, ``n_steps``.
    solver_iterations : float
        Fixed-point iterations per step of an implicit integrator (0 for an explicit one).
    unconverged : bool
        An implicit step's iteration did not converge: the move must be rejected.
    irreversible : bool
        Integrating back from the end did not return to the start: the move must be rejected.
    metric_range : tuple of float, optional
        Smallest and largest eigenvalue of the inverse mass matrix at the start, for a metric
        that depends on the position (``None``: the proposal's fixed metric).
    """

    position: np.ndarray
    force: np.ndarray
    start_kinetic: float
    end_kinetic: float
    n_steps: int
    failed: bool
    left_trust_region: bool = False
    end_exact: bool = False
    start_potential: float = np.nan
    end_potential: float = np.nan
    tree_depth: int = 0
    surrogate_accept: float = np.nan
    tree_divergent: bool = False
    reached_max_depth: bool = False
    index: int | None = None
    solver_iterations: float = 0.0
    unconverged: bool = False
    irreversible: bool = False
    metric_range: tuple[float, float] | None = None

    @property
    def rejected_unevaluated(self) -> bool:
        """Rejected without evaluating the target, reversibly, and not a divergence.

        It left the surrogate's trust region, or an implicit integrator could not be trusted.
        """
        return self.left_trust_region or self.unconverged or self.irreversible

    @property
    def stayed(self) -> bool:
        """The proposal is the start itself."""
        return self.index == 0

    @property
    def index_in_trajectory(self) -> int:
        """Steps from the start to the proposal (PyMC's ``index_in_trajectory``)."""
        return self.n_steps if self.index is None else self.index


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
        if not np.all(np.isfinite(force)):  # no usable force at the start (no exact gradient)
            return Move(position, force, start_kinetic, np.inf, n_steps, False, True, start_exact)
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


class NutsProposal:
    """A NUTS transition on the surrogate Hamiltonian ``U~ + K`` (see ``hmc.nuts_tree``).

    It is reversible with respect to ``exp(-U~)``, so it must be corrected by delayed
    acceptance (:class:`~pymc_rnshmc.hmc.corrections.DelayedAcceptance`), which needs ``U~``
    at both ends: the move carries the values the tree used. The tree weighs its states by the
    force field's potential (:meth:`ForceField.potential_and_force`: the surrogate's, the exact
    one where the surrogate fails) and follows its gradient. A tree that needs the exact
    potential at more points than the field's floor has left the surrogate's trust region and
    is rejected: a property of the whole set of states the tree evaluates, which is the same
    from any of them, so the kernel stays reversible.

    Parameters
    ----------
    metric : Metric
        Kinetic energy of the trajectories.
    max_depth : int
        Largest number of doublings.
    max_energy_spread : float
        Energy spread within a subtree that counts as a divergence.
    """

    path_length = None

    def __init__(
        self, metric: Metric, max_depth: int = 10, max_energy_spread: float = MAX_ENERGY_SPREAD
    ) -> None:
        self.metric = metric
        self.max_depth = int(max_depth)
        self.max_energy_spread = float(max_energy_spread)

    def propose(
        self,
        position: np.ndarray,
        force: np.ndarray,
        force_field: ForceField,
        step_size: float,
        rng: np.random.Generator,
        start_exact: bool = False,
    ) -> Move:
        """Build a tree from ``position`` and return the state it drew.

        ``U~`` and its gradient are evaluated afresh at ``position``, so the move's values come
        from the same surrogate as the tree, whatever the chain cached.
        """
        potential_and_force = force_field.potential_and_force
        force_field.start_trajectory(0, False)  # a tree's length is unknown: the floor
        try:
            with np.errstate(over="ignore", invalid="ignore", under="ignore"):
                potential, gradient = potential_and_force(position)
                potential = float(potential)
                if not finite_state(potential, gradient):
                    kinetic = float(self.metric.energy(self.metric.random(rng)))
                    return Move(position, force, kinetic, np.inf, 0, True)
                tree = surrogate_nuts(
                    position,
                    potential,
                    gradient,
                    potential_and_force,
                    self.metric,
                    step_size,
                    rng,
                    self.max_depth,
                    self.max_energy_spread,
                )
        except LeftTrustRegion:  # the energy stat of such a draw is the start's -logp
            return Move(position, force, 0.0, np.inf, 0, False, True)
        sample = tree.sample
        return Move(
            sample.position,
            sample.gradient,
            tree.start_kinetic,
            float(self.metric.energy(sample.momentum)),
            tree.n_steps,
            False,
            start_potential=float(potential),
            end_potential=sample.potential,
            tree_depth=tree.depth,
            surrogate_accept=tree.mean_accept,
            tree_divergent=tree.divergent,
            reached_max_depth=tree.reached_max_depth,
            index=tree.index,
        )

"""Riemannian proposals on the surrogate: momentum ``~ N(0, G(q))``, then generalized leapfrog.

The proposal moves with ``H~(q, p) = U~(q) + 1/2 log det G(q) + 1/2 p^T G(q)^-1 p``, where both
``U~`` and ``G`` come from the surrogate (its
:class:`~pymc_rnshmc.hmc.riemannian_metric.SurrogateGeometry`), and hands the exact
correction ``K(q, p) = 1/2 log det G(q) + 1/2 p^T G(q)^-1 p`` at both ends:
the Metropolis test on ``U + K`` with the exact ``U`` then leaves the posterior invariant. The
joint density ``exp(-U(q)) N(p; 0, G(q))`` has the posterior as its ``q`` marginal for any
smooth positive definite ``G``, the momentum is a Gibbs draw from its conditional, and the
generalized leapfrog followed by a momentum flip is a volume-preserving involution however
wrong the surrogate is, so only the target's ``U`` has to be exact.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pymc_rnshmc.hmc.force_field import ForceField
from pymc_rnshmc.hmc.generalized_leapfrog import (
    SolverSettings,
    Trajectory,
    integrate,
    returns_to_start,
)
from pymc_rnshmc.hmc.leapfrog import jittered_n_steps
from pymc_rnshmc.hmc.proposals import Move
from pymc_rnshmc.hmc.riemannian_metric import SurrogateGeometry

__all__ = ["RiemannianProposal", "RiemannianTrajectory", "riemannian_trajectory"]

REVERSIBILITY_TOLERANCE_FACTOR = 1e3
"""The reversibility check accepts a return to the start within this many solver tolerances."""


class RiemannianTrajectory(NamedTuple):
    """One integration from a drawn momentum, with the kinetic energies the test needs.

    ``iterations`` counts the fixed-point iterations of the forward integration and of the
    reversibility check; ``reversible`` is ``True`` when the check passed or was not made.
    """

    end: Trajectory
    start_kinetic: float
    end_kinetic: float
    reversible: bool
    iterations: int


def riemannian_trajectory(
    geometry: SurrogateGeometry,
    position: np.ndarray,
    local,
    momentum: np.ndarray,
    step_size: float,
    n_steps: int,
    settings: SolverSettings,
    check_reversibility: bool,
) -> RiemannianTrajectory:
    """Integrate from ``(position, momentum)``; ``local`` is ``geometry.at(position)``."""
    start_kinetic = local.kinetic(momentum)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        end = integrate(position, momentum, local, step_size, n_steps, geometry, settings)
        end_kinetic = np.inf
        if end.converged and not end.failed:
            end_kinetic = end.local.kinetic(end.momentum)
        reversible, iterations = True, end.iterations
        if check_reversibility and end.converged and not end.failed:
            tolerance = REVERSIBILITY_TOLERANCE_FACTOR * settings.tolerance
            reversible, back_iterations = returns_to_start(
                end, position, momentum, step_size, geometry, settings, tolerance
            )
            iterations += back_iterations
    return RiemannianTrajectory(end, start_kinetic, float(end_kinetic), reversible, iterations)


class RiemannianProposal:
    """Generalized leapfrog for about ``path_length`` on the surrogate's geometry.

    Parameters
    ----------
    metric : SurrogateGeometry
        The position-dependent metric (and the surrogate potential's gradient).
    path_length : float
        Integration time; the number of steps is jittered as for the leapfrog.
    max_steps : int
        Largest number of steps.
    settings : SolverSettings
        Tolerance and iteration limit of the implicit solves.
    check_reversibility : bool
        Integrate back from every end and reject unless it returns to the start (twice the
        surrogate work; what makes rejecting non-convergence reversible).
    """

    def __init__(
        self,
        metric: SurrogateGeometry,
        path_length: float,
        max_steps: int,
        settings: SolverSettings,
        check_reversibility: bool = True,
    ) -> None:
        self.metric = metric
        self.path_length = float(path_length)
        self.max_steps = int(max_steps)
        self.settings = settings
        self.check_reversibility = bool(check_reversibility)

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

        ``force`` and ``force_field`` are not used: the geometry supplies the forces, and a
        position where it is not finite gives a failed move.
        """
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            local = self.metric.at(position)
        momentum = local.random(rng)
        n_steps = jittered_n_steps(rng, self.path_length, step_size, self.max_steps)
        if not (local.is_finite() and np.all(np.isfinite(momentum))):
            return Move(position, np.full(position.shape, np.nan), np.inf, np.inf, n_steps, True)
        result = riemannian_trajectory(
            self.metric,
            position,
            local,
            momentum,
            step_size,
            n_steps,
            self.settings,
            self.check_reversibility,
        )
        end = result.end
        return Move(
            end.position,
            end.local.gradient,
            result.start_kinetic,
            result.end_kinetic,
            n_steps,
            end.failed,
            solver_iterations=result.iterations / max(n_steps, 1),
            unconverged=not end.converged and not end.failed,
            irreversible=end.converged and not end.failed and not result.reversible,
            metric_range=local.eigenvalue_range(),
        )

"""From a record of exact draws to a surrogate kernel: fit, choose the dynamics, build.

The three stages every fit and refit of a chain goes through, as functions of values (numpy
only, no model evaluation: a surrogate that needs the exact model at its own nodes, a sparse
grid, was given the model when it was made):

1. :func:`fit_surrogate`: a copy of the template fitted to the training window, and the
   gradients the dynamics are chosen with;
2. :func:`candidate_metrics` and the dynamics' ``choose``
   (:mod:`~pymc_rnshmc.step_methods.dynamics`): metric, step size and path length, chosen by
   simulating chains on the surrogate;
3. :func:`new_kernel`: the :class:`~pymc_rnshmc.hmc.kernel.SurrogateKernel` they make.

The step decides when to call them (:mod:`~pymc_rnshmc.step_methods.schedule`) and what to do
when one raises one of ``FIT_ERRORS``.
"""

from __future__ import annotations

import numpy as np

from pymc_rnshmc.exceptions import SurrogateFitError
from pymc_rnshmc.hmc.corrections import Correction
from pymc_rnshmc.hmc.force_field import force_bound
from pymc_rnshmc.hmc.kernel import SurrogateKernel
from pymc_rnshmc.hmc.metrics import DenseMetric
from pymc_rnshmc.hmc.trajectory_candidates import rows
from pymc_rnshmc.hmc.trajectory_tuning import TrajectoryCandidate
from pymc_rnshmc.step_methods.dynamics import Dynamics
from pymc_rnshmc.surrogates.base import approximate_covariance, for_simulation, with_gaussian_base
from pymc_rnshmc.surrogates.laplace import LaplaceStart

__all__ = ["FAILING_FORCE_SHARE", "candidate_metrics", "fit_surrogate", "new_kernel"]

FAILING_FORCE_SHARE = 0.5
"""A fit whose force is unusable at more than this share of its training points is refused;
isolated failures are handled by exact gradients there."""


def fit_surrogate(
    surrogate,
    positions: np.ndarray,
    potentials: np.ndarray,
    gradients: np.ndarray | None,
    laplace: LaplaceStart | None,
    rng: np.random.Generator,
):
    """``surrogate`` (a fresh copy) fitted to the window, and the gradients to choose with.

    Those are the exact training gradients, or without them the surrogate's own at the training
    points (non-finite rows as zero); a values-only fit gets the Laplace approximation as its
    Gaussian base, where the chain started with one.

    Raises
    ------
    SurrogateFitError
        The fitted surrogate's force is not finite at more than ``FAILING_FORCE_SHARE`` of the
        training points (or the fit itself failed).
    """
    if gradients is None and laplace is not None and laplace.covariance is not None:
        surrogate = with_gaussian_base(surrogate, laplace.position, laplace.covariance)
    surrogate.fit(positions, potentials, gradients, rng=rng)
    check = rows(for_simulation(surrogate).gradient)(positions)
    usable = np.all(np.isfinite(check), axis=1)
    failing = np.mean(~usable)
    if failing > FAILING_FORCE_SHARE:
        raise SurrogateFitError(
            f"the fitted surrogate's gradient is not finite at {failing:.0%} of the training points"
        )
    if gradients is None:
        gradients = np.where(usable[:, None], check, 0.0)
    return surrogate, gradients


def candidate_metrics(
    surrogate, explorer_covariance: np.ndarray | None = None
) -> tuple[DenseMetric, ...]:
    """Dense metrics to try beside the draws' own: the surrogate's, the random walk's.

    A covariance that is not positive definite is left out.
    """
    metrics = []
    for covariance in (approximate_covariance(surrogate), explorer_covariance):
        if covariance is None:
            continue
        try:
            metrics.append(DenseMetric(covariance))
        except np.linalg.LinAlgError:
            pass
    return tuple(metrics)


def new_kernel(
    dynamics: Dynamics,
    surrogate,
    best: TrajectoryCandidate,
    positions: np.ndarray,
    gradients: np.ndarray,
    correction: Correction,
    *,
    max_steps: int,
    max_depth: int,
    max_energy_change: float,
    values_only: bool,
) -> SurrogateKernel:
    """The kernel of a fitted surrogate with its chosen trajectories.

    The force bound comes from the training draws; values-only surrogates also reject
    trajectories whose own energy changes by more than ``max_energy_change``, since they can
    fly off to where the model is absurdly slow to evaluate.
    """
    return SurrogateKernel(
        surrogate,
        dynamics.proposal(best, max_steps, max_depth, max_energy_change),
        correction,
        best.step_size,
        force_bound(positions, gradients),
        max_surrogate_energy_change=max_energy_change if values_only else np.inf,
        uses_cached_force=dynamics.uses_cached_force,
    )

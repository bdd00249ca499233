"""A Laplace approximation from log-density values alone: the mode, and the curvature there.

For models without gradients. The gradient-free exploration starts from it: a random walk
started far from the posterior spends its first hundreds of steps climbing, and a
covariance adapted on the climb points along it: on the pharmacokinetic ODE posterior
(``one_comp_mm_elim_abs``, d = 4) one such chain climbed into the tail ``log K_m = -7``, six
nats below the bulk, adapted to that region and stayed there for 1500 draws. Starting at the mode,
with the inverse curvature there as the first proposal covariance, removes the climb. A
sparse grid's box can be placed by it too.

The mode comes from scipy's derivative-free Powell search; the curvature from central second
differences of the values (``2 d^2`` evaluations).

References
----------
.. [1] Powell, M. J. D. (1964). An efficient method for finding the minimum of a function of
   several variables without calculating derivatives. The Computer Journal, 7(2), 155-162.
.. [2] Nocedal, J., & Wright, S. J. (2006). Numerical Optimization (2nd ed.), section 8.1
   (finite-difference Hessians). Springer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy import linalg, optimize

__all__ = ["LaplaceStart", "laplace_start"]

EVALUATIONS_PER_DIMENSION = 200
"""The mode search stops after this many evaluations per dimension."""
DIFFERENCE_STEP = 1e-3
"""Step of the second differences, relative to ``max(1, |mode_i|)``."""
MIN_PRECISION = 1e-6
"""Floor on the curvature's eigenvalues (a flat or saddle direction gets a wide proposal)."""


class LaplaceStart(NamedTuple):
    """The mode, its log density and the inverse curvature there (``None`` if not finite).

    ``n_evaluations`` counts the log-density evaluations spent.
    """

    position: np.ndarray
    logp: float
    covariance: np.ndarray | None
    n_evaluations: int


class _Counted:
    """A log density that counts its evaluations."""

    def __init__(self, log_density: Callable[[np.ndarray], float]) -> None:
        self.log_density = log_density
        self.count = 0

    def __call__(self, position: np.ndarray) -> float:
        self.count += 1
        return float(self.log_density(position))

    def potential(self, position: np.ndarray) -> float:
        """``-logp``, and a large finite value where the model fails (for the optimizer)."""
        logp = self(position)
        return -logp if np.isfinite(logp) else 1e300


def laplace_start(
    log_density: Callable[[np.ndarray], float], start: np.ndarray, start_logp: float
) -> LaplaceStart:
    """Search the mode from ``start``, then the inverse curvature there.

    Returns ``start`` itself if the search finds nothing better; ``covariance`` is ``None``
    when the curvature is not finite.
    """
    counted = _Counted(log_density)
    dim = start.shape[0]
    result = optimize.minimize(
        counted.potential,
        np.asarray(start, dtype=float),
        method="Powell",
        options={"maxfev": EVALUATIONS_PER_DIMENSION * dim, "xtol": 1e-4, "ftol": 1e-8},
    )
    mode, logp = np.asarray(start, dtype=float), float(start_logp)
    if np.isfinite(result.fun) and -float(result.fun) > logp:
        mode, logp = np.asarray(result.x, dtype=float), -float(result.fun)
    covariance = _inverse_curvature(counted, mode, logp)
    return LaplaceStart(mode, logp, covariance, counted.count)


def _inverse_curvature(
    log_density: Callable[[np.ndarray], float], mode: np.ndarray, logp: float
) -> np.ndarray | None:
    """Inverse of ``-Hessian`` of the log density at ``mode``, eigenvalues floored."""
    hessian = _second_differences(log_density, mode, logp)
    if not np.all(np.isfinite(hessian)):
        return None
    eigenvalues, eigenvectors = linalg.eigh(-0.5 * (hessian + hessian.T))
    eigenvalues = np.maximum(eigenvalues, MIN_PRECISION * max(float(eigenvalues.max()), 1.0))
    return (eigenvectors / eigenvalues) @ eigenvectors.T


def _second_differences(
    log_density: Callable[[np.ndarray], float], mode: np.ndarray, logp: float
) -> np.ndarray:
    """Central second differences of the log density at ``mode`` (``2 d^2`` evaluations)."""
    dim = mode.shape[0]
    steps = DIFFERENCE_STEP * np.maximum(1.0, np.abs(mode))
    shifts = np.diag(steps)
    hessian = np.empty((dim, dim))
    for i in range(dim):
        up, down = log_density(mode + shifts[i]), log_density(mode - shifts[i])
        hessian[i, i] = (up - 2.0 * logp + down) / steps[i] ** 2
        for j in range(i):
            corners = (
                log_density(mode + shifts[i] + shifts[j])
                - log_density(mode + shifts[i] - shifts[j])
                - log_density(mode - shifts[i] + shifts[j])
                + log_density(mode - shifts[i] - shifts[j])
            )
            hessian[i, j] = hessian[j, i] = corners / (4.0 * steps[i] * steps[j])
    return hessian

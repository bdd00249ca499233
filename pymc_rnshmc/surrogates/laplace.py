"""A Laplace approximation: the mode, and the curvature there.

:func:`laplace_start` is for models without gradients; :func:`laplace_from_gradients` for models
with them (the exploring NUTS of a wide, correlated model starts from it).

Without gradients: The gradient-free exploration starts from it: a random walk
started far from the posterior spends its first hundreds of steps climbing, and a
covariance adapted on the climb points along it: on the pharmacokinetic ODE posterior
(``one_comp_mm_elim_abs``, d = 4) one such chain climbed into the tail ``log K_m = -7``, six
nats below the bulk, adapted to that region and stayed there for 1500 draws. Starting at the mode,
with the inverse curvature there as the first proposal covariance, removes the climb. A
sparse grid's box can be placed by it too.

The mode comes from scipy's derivative-free Powell search; the curvature from central second
differences of the values (``2 d^2`` evaluations).

With gradients, the mode comes from scipy's L-BFGS, polished by a few Newton steps, and the
curvature from central differences of the gradient (``2 d`` evaluations a step), as a
Hessian-free method would not give the whole matrix the metric needs. The result is kept only
where it is a mode: the curvature is positive definite and the Newton step left there is short
against the curvature's own scale. A posterior without a
mode (where the search runs off for ever) fails that test, unless the search ran so far that the
curvature became sharp enough to make any step look short: the density of a centred
hierarchical model grows without bound as its scale goes to zero, and on the centred eight
schools (PyMC 6.4) the search stopped at ``log tau = -23.6``, the group effects equal to the
mean to ten digits, with standard deviations of 5e-11 there, and passed. Such a point is refused
by its precision (``RESOLUTION``). :func:`importance_check` then asks
whether the approximation describes the posterior around it: a mode can exist far from the
posterior's mass (Neal's funnel has one at the bottom of its neck, ``v = -18`` for ``v ~ N(0,
3)``), and there the approximation's own draws find potentials unlike those it predicts.

References
----------
.. [1] Powell, M. J. D. (1964). An efficient method for finding the minimum of a function of
   several variables without calculating derivatives. The Computer Journal, 7(2), 155-162.
.. [2] Nocedal, J., & Wright, S. J. (2006). Numerical Optimization (2nd ed.), section 8.1
   (finite-difference Hessians) and chapter 7 (L-BFGS). Springer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy import linalg, optimize

__all__ = ["LaplaceStart", "importance_check", "laplace_from_gradients", "laplace_start"]

EVALUATIONS_PER_DIMENSION = 200
"""The mode search stops after this many evaluations per dimension."""
DIFFERENCE_STEP = 1e-3
"""Step of the second differences, relative to ``max(1, |mode_i|)``."""
MIN_PRECISION = 1e-6
"""Floor on the curvature's eigenvalues (a flat or saddle direction gets a wide proposal)."""
GRADIENT_SEARCH_EVALUATIONS = 100
"""The gradient search stops after this many evaluations ..."""
GRADIENT_SEARCH_PER_DIMENSION = 10
"""... plus this many per dimension."""
NEWTON_STEPS = 8
"""After L-BFGS, at most this many Newton steps (each ``2 d`` gradients for the curvature). On
posteriordb's ``sblrc-blr`` (curvatures 1e2 to 1e7) scipy's L-BFGS stopped where the curvature
had a negative eigenvalue and the gradient was 2e3, ``log sigma`` at 1.74 against the mode's
0.007; five Newton steps reached the mode."""
BACKTRACKS = 10
"""A Newton step is halved at most this many times to lower ``U``."""
MODE_TOLERANCE = 0.1
"""A point is taken for the mode if the Newton step left there is shorter than this, in the
curvature's own metric (standard deviations of the approximation)."""
RESOLUTION = 0.5
"""A mode is refused if its approximation's smallest standard deviation is below
``eps ** RESOLUTION * max(1, |v| . |mode|)``, ``v`` that direction, in the model's precision
(1.5e-8 relative in float64, 3.5e-4 in float32, where a posterior that precise is beyond what
its float32 draws resolve anyway): a sharper peak is a singularity the search ran into, not a
posterior. The least seen on a
posterior with a mode: 5.6e-7 (posteriordb ``kilpisjarvi_mod``, a year-valued predictor), then
4e-4 (``sblrc-blr``), over the economy's 20 posteriors, the ten everyday models with a mode,
the hierarchical (50 and 100 groups) and logistic (d = 80, 320) regressions; the centred eight
schools' singularity: 2e-12."""
IMPORTANCE_DRAWS = 20
"""Draws of the approximation that :func:`importance_check` evaluates (logp only)."""
LOG_WEIGHT_SPREAD = 1.0
"""The approximation is kept if the standard deviation of the log importance weights of its
draws is at most this (nats): log-normal weights of this spread keep ``exp(-1)``, about a third,
of an importance sample's draws effective. Not tuned on any posterior."""


class LaplaceStart(NamedTuple):
    """The mode, its log density and the inverse curvature there (``None`` if not usable).

    ``n_evaluations`` counts the model evaluations spent, ``n_gradients`` those of them that
    computed the gradient too.
    """

    position: np.ndarray
    logp: float
    covariance: np.ndarray | None
    n_evaluations: int
    n_gradients: int = 0


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

    Returns ``start`` itself if the search finds nothing better, or if what it found is a
    singularity it ran into (``RESOLUTION``, in float64); ``covariance`` is ``None`` when the
    curvature is not finite (the point found is then returned, unchecked).
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
    if covariance is not None:
        variances, directions = linalg.eigh(covariance)
        if not _resolved(1.0 / variances[0], directions[:, 0], mode):
            start = np.asarray(start, dtype=float)
            return LaplaceStart(start, float(start_logp), None, counted.count)
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


def laplace_from_gradients(
    potential_and_gradient: Callable[[np.ndarray], tuple[float, np.ndarray]],
    start: np.ndarray,
    dtype=np.float64,
) -> LaplaceStart:
    """Search the mode of ``exp(-U)`` from ``start``, then the inverse curvature there.

    L-BFGS first, then up to ``NEWTON_STEPS`` Newton steps on the curvature from gradient
    differences, until the point is a mode: finite, with a positive definite curvature, and a
    Newton step shorter than ``MODE_TOLERANCE`` standard deviations. ``covariance`` is ``None``
    if no mode was reached, or if the one reached is a singularity (see ``RESOLUTION``).
    ``potential_and_gradient(x)`` returns ``(U, grad U)``, ``U = inf`` where the model fails;
    ``dtype`` is the model's (its precision sets the difference step and ``RESOLUTION``'s bound).
    ``logp`` is ``-U`` at the point found (``-inf`` if the search failed everywhere).
    """
    counted = _CountedGradient(potential_and_gradient)
    start = np.asarray(start, dtype=float)
    dim = start.shape[0]
    result = optimize.minimize(
        counted.for_search,
        start,
        jac=True,
        method="L-BFGS-B",
        options={"maxfun": GRADIENT_SEARCH_EVALUATIONS + GRADIENT_SEARCH_PER_DIMENSION * dim},
    )
    position = np.asarray(result.x, dtype=float)
    potential, gradient = counted(position)
    if not (np.isfinite(potential) and np.all(np.isfinite(gradient))):
        return LaplaceStart(start, -np.inf, None, counted.count, counted.count)
    for _ in range(NEWTON_STEPS):
        curvature = _curvature(counted, position, difference_step(dtype))
        if curvature is None:
            break
        eigenvalues, eigenvectors = curvature
        if not np.all(eigenvalues != 0.0):  # a flat direction: no Newton step
            break
        whitened_gradient = (eigenvectors.T @ gradient) / np.sqrt(np.abs(eigenvalues))
        if eigenvalues[0] > 0.0 and np.linalg.norm(whitened_gradient) <= MODE_TOLERANCE:
            if not _resolved(eigenvalues[-1], eigenvectors[:, -1], position, dtype):
                break
            covariance = (eigenvectors / eigenvalues) @ eigenvectors.T
            return LaplaceStart(position, -potential, covariance, counted.count, counted.count)
        newton = eigenvectors @ (whitened_gradient / np.sqrt(np.abs(eigenvalues)))
        moved = _backtrack(counted, position, potential, newton)
        if moved is None:
            break
        position, potential, gradient = moved
    return LaplaceStart(position, -potential, None, counted.count, counted.count)


def _resolved(
    largest_curvature: float, direction: np.ndarray, mode: np.ndarray, dtype=np.float64
) -> bool:
    """Whether the sharpest ``direction``'s standard deviation is at least ``RESOLUTION``'s bound.

    The bound is relative to the mode's size along that direction.
    """
    size = max(1.0, float(np.abs(direction) @ np.abs(mode)))
    bound = np.finfo(dtype).eps ** RESOLUTION * size
    return bool(largest_curvature * bound**2 <= 1.0)


def _curvature(
    counted: _CountedGradient, position: np.ndarray, relative_step: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Eigenvalues and eigenvectors of the Hessian of ``U`` (``None`` if not finite)."""
    hessian = _gradient_differences(counted, position, relative_step)
    if not np.all(np.isfinite(hessian)):
        return None
    return linalg.eigh(0.5 * (hessian + hessian.T))


def _backtrack(counted: _CountedGradient, position, potential, step):
    """``position - t step`` for the first ``t`` in 1, 1/2, ... that lowers ``U`` (or ``None``).

    The step is the saddle-free Newton step (curvature eigenvalues taken by absolute value), so
    it descends also where the curvature is not yet positive definite.
    """
    for halvings in range(BACKTRACKS):
        moved = position - 0.5**halvings * step
        moved_potential, moved_gradient = counted(moved)
        finite = np.isfinite(moved_potential) and np.all(np.isfinite(moved_gradient))
        if finite and moved_potential < potential:
            return moved, moved_potential, moved_gradient
    return None


class _CountedGradient:
    """``(U, grad U)`` that counts its evaluations."""

    def __init__(self, potential_and_gradient) -> None:
        self.potential_and_gradient = potential_and_gradient
        self.count = 0

    def __call__(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        self.count += 1
        potential, gradient = self.potential_and_gradient(position)
        return float(potential), np.asarray(gradient, dtype=float)

    def for_search(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        """A large finite value and no slope where the model fails (the line search backs off)."""
        potential, gradient = self(position)
        if np.isfinite(potential) and np.all(np.isfinite(gradient)):
            return potential, gradient
        return 1e300, np.zeros_like(position)


def difference_step(dtype) -> float:
    """The relative central-difference step for a gradient in ``dtype``.

    Its precision's cube root, the step that balances truncation and rounding error.
    """
    return float(np.finfo(dtype).eps ** (1.0 / 3.0))


def _gradient_differences(
    counted: _CountedGradient, mode: np.ndarray, relative_step: float
) -> np.ndarray:
    """Central differences of ``grad U`` at ``mode``: the Hessian's rows (``2 d`` evaluations)."""
    steps = relative_step * np.maximum(1.0, np.abs(mode))
    hessian = np.empty((mode.shape[0], mode.shape[0]))
    for i, step in enumerate(steps):
        shift = np.zeros_like(mode)
        shift[i] = step
        hessian[i] = (counted(mode + shift)[1] - counted(mode - shift)[1]) / (2.0 * step)
    return hessian


def importance_check(
    log_density: Callable[[np.ndarray], float],
    laplace: LaplaceStart,
    rng: np.random.Generator,
    draws: int = IMPORTANCE_DRAWS,
) -> tuple[LaplaceStart, float]:
    """``laplace`` if its draws find the log density it predicts, else without its covariance.

    Evaluates ``log_density`` (``-inf`` where the model fails) at ``draws`` draws of the
    approximation; their log importance weights (exact log density minus the approximation's,
    each relative to the mode) must spread by at most ``LOG_WEIGHT_SPREAD``. Returns the
    approximation, with the evaluations added to ``n_evaluations``, and the spread.
    """
    if laplace.covariance is None:
        return laplace, np.inf
    try:
        factor = linalg.cholesky(laplace.covariance, lower=True)
    except np.linalg.LinAlgError:
        return laplace._replace(covariance=None), np.inf
    whitened = rng.standard_normal((draws, laplace.position.shape[0]))
    positions = laplace.position + whitened @ factor.T
    exact = np.array([log_density(position) for position in positions]) - laplace.logp
    log_weights = exact + 0.5 * np.sum(whitened**2, axis=1)
    spread = float(np.std(log_weights)) if np.all(np.isfinite(log_weights)) else np.inf
    checked = laplace._replace(n_evaluations=laplace.n_evaluations + draws)
    if spread > LOG_WEIGHT_SPREAD:
        checked = checked._replace(covariance=None)
    return checked, spread

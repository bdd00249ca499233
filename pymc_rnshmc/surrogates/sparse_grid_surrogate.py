"""A sparse-grid surrogate of the potential over a box around the posterior's bulk.

Sparse-grid HMC (Zhang, Shahbaba & Zhao, section 3): inside a *domain of interest* ``D`` the
potential ``U`` is replaced by a Smolyak interpolant precomputed on a sparse grid
(:mod:`~pymc_rnshmc.surrogates.sparse_grid`); outside ``D`` the exact potential is used (their
eq. 3.11). ``D`` is a box in the coordinates ``z = L^-1 (q - centre)`` of a Gaussian approximation
``N(centre, L L^T)``: the Laplace approximation at the posterior mode (section 3.5), or the mean
and covariance of exploration draws (the option their section 6 suggests). Its half-width ``r``
gives the box a chosen probability ``mass`` under that Gaussian. Unlike the paper's
axis-aligned box, this one follows the posterior's correlations, so no grid points are spent on
empty corners of a tilted posterior.

The interpolated function is the residual ``U(q) - |z|^2 / 2`` when ``quadratic_base`` is on: for
a Laplace box ``|z|^2 / 2`` is the Laplace approximation's own potential, so the piecewise-linear
basis only has to capture the departure from it, which is smaller and smoother than ``U``.

The surrogate returns NaN outside the box; the step method then uses the exact gradient and
potential there, and the exact Metropolis test always uses the exact Hamiltonian.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize
from scipy import stats

from pymc_rnshmc.surrogates.random_network import SurrogateFitError
from pymc_rnshmc.surrogates.sparse_grid import SparseGrid

__all__ = ["DomainBox", "SparseGridReport", "SparseGridSurrogate", "laplace_approximation"]


def half_width_for_mass(dim: int, mass: float) -> float:
    """Half-width ``r`` of the cube ``|z_k| <= r`` holding ``mass`` of a standard normal."""
    return float(stats.norm.ppf(0.5 + 0.5 * mass ** (1.0 / dim)))


@dataclass(frozen=True)
class DomainBox:
    """The box ``|L^-1 (q - centre)|_inf <= half_width`` in the sampler's coordinates."""

    centre: np.ndarray
    factor: np.ndarray
    half_width: float

    @functools.cached_property
    def inverse_factor(self) -> np.ndarray:
        """``L^-1`` (computed once)."""
        return scipy.linalg.solve_triangular(self.factor, np.eye(self.centre.size), lower=True)

    @classmethod
    def from_covariance(cls, centre, covariance, mass: float) -> DomainBox:
        """Box with probability ``mass`` under ``N(centre, covariance)``."""
        centre = np.asarray(centre, dtype=float)
        covariance = 0.5 * (covariance + covariance.T)
        factor = np.linalg.cholesky(covariance)
        return cls(centre, factor, half_width_for_mass(centre.size, mass))

    @classmethod
    def from_draws(cls, positions: np.ndarray, mass: float) -> DomainBox:
        """Box around draws: their mean and covariance, wide enough to hold ``mass`` of them.

        The half-width is the ``mass`` quantile of the draws' largest whitened coordinate, or
        the Gaussian value if that is larger.
        """
        centre = positions.mean(axis=0)
        covariance = np.atleast_2d(np.cov(positions, rowvar=False))
        box = cls.from_covariance(centre, covariance, mass)
        whitened = (positions - centre) @ box.inverse_factor.T
        observed = float(np.quantile(np.max(np.abs(whitened), axis=1), mass))
        return cls(box.centre, box.factor, max(box.half_width, observed))


def laplace_approximation(
    potential: Callable[[np.ndarray], float],
    gradient: Callable[[np.ndarray], np.ndarray],
    start: np.ndarray,
    factor: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Posterior mode (scipy's L-BFGS-B on ``U``) and the covariance of the Laplace approximation.

    The search runs in the coordinates ``w = factor^-1 (q - start)``, with ``factor`` a
    Cholesky factor of a rough covariance (of exploration draws): a strongly correlated or badly
    scaled posterior is then well conditioned for the optimizer. The Hessian is the central
    difference of the exact gradient in those coordinates (steps of ``1e-4``, ``2 d`` gradient
    evaluations), symmetrized. Returns ``(mode, covariance, evaluations)``.

    Raises
    ------
    numpy.linalg.LinAlgError
        The Hessian at the mode is not positive definite.
    """
    dim = start.size

    def to_position(whitened):
        return start + factor @ whitened

    def whitened_potential(whitened):
        return potential(to_position(whitened))

    def whitened_gradient(whitened):
        return factor.T @ gradient(to_position(whitened))

    result = scipy.optimize.minimize(
        whitened_potential, np.zeros(dim), jac=whitened_gradient, method="L-BFGS-B"
    )
    optimum = np.asarray(result.x, dtype=float)
    hessian = np.empty((dim, dim))
    for k in range(dim):
        step = np.zeros(dim)
        step[k] = 1e-4
        hessian[:, k] = (whitened_gradient(optimum + step) - whitened_gradient(optimum - step)) / (
            2e-4
        )
    hessian = 0.5 * (hessian + hessian.T)
    whitened_covariance = np.linalg.inv(hessian)
    np.linalg.cholesky(whitened_covariance)  # raises unless positive definite
    covariance = factor @ whitened_covariance @ factor.T
    return to_position(optimum), covariance, int(result.nfev) + 2 * dim


@dataclass(frozen=True)
class SparseGridReport:
    """What the precomputation cost and how accurate the grid looks.

    ``n_points`` exact potentials on the grid plus ``n_laplace_evaluations`` for the mode and
    Hessian, in ``seconds``; ``finest_surplus`` is the largest hierarchical surplus on the finest
    level (an estimate of the interpolation error, in units of the potential).
    """

    level: int
    n_points: int
    n_laplace_evaluations: int
    seconds: float
    half_width: float
    finest_surplus: float
    domain: str


class SparseGridSurrogate:
    """Sparse-grid interpolant of the potential over a box, NaN outside it.

    Parameters
    ----------
    level : int
        Smolyak level (``level >= 1``; ``2 d + 1`` points at level 1).
    mass : float
        Probability of the box under the Gaussian approximation, in (0, 1).
    domain : {"laplace", "exploration"}
        Gaussian approximation that places the box: Laplace at the mode, or the mean and
        covariance of the training draws.
    quadratic_base : bool
        Interpolate ``U - |z|^2 / 2`` instead of ``U``.
    exact_potential, exact_gradient : callable
        Exact ``U`` at rows ``(n, d)`` and exact ``grad U`` at one point; used by :meth:`fit`
        only and dropped afterwards.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Precomputing strategy for Hamiltonian
       Monte Carlo method based on regularity in parameter space. Computational Statistics,
       32(1), 253-279.
    """

    def __init__(
        self,
        level: int,
        mass: float = 0.999,
        domain: str = "laplace",
        quadratic_base: bool = True,
        exact_potential: Callable[[np.ndarray], np.ndarray] | None = None,
        exact_gradient: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> None:
        self.level = int(level)
        self.mass = float(mass)
        self.domain = domain
        self.quadratic_base = bool(quadratic_base)
        self.exact_potential = exact_potential
        self.exact_gradient = exact_gradient
        self.box: DomainBox | None = None
        self.interpolant = None
        self.report: SparseGridReport | None = None
        self._outside_quadratic = False

    def fit(self, positions, potentials, gradients=None, rng=None) -> SparseGridSurrogate:
        """Place the box (from the draws, or Laplace from the best draw), fill the grid.

        Raises
        ------
        SurrogateFitError
            The Laplace Hessian is not positive definite, or the exact potential is not finite
            at some grid points.
        """
        if self.exact_potential is None or self.exact_gradient is None:
            raise SurrogateFitError("The sparse grid needs the exact potential and gradient.")
        start = time.perf_counter()
        positions = np.atleast_2d(np.asarray(positions, dtype=float))
        potentials = np.asarray(potentials, dtype=float)
        dim = positions.shape[1]
        laplace_evaluations = 0
        if self.domain == "laplace":
            best = positions[np.nanargmin(potentials)]
            spread = np.atleast_2d(np.cov(positions, rowvar=False))
            spread += 1e-10 * np.trace(spread) / dim * np.eye(dim) + 1e-300 * np.eye(dim)

            def scalar_potential(point):
                return float(self.exact_potential(point[None, :])[0])

            try:
                mode, covariance, laplace_evaluations = laplace_approximation(
                    scalar_potential, self.exact_gradient, best, np.linalg.cholesky(spread)
                )
                self.box = DomainBox.from_covariance(mode, covariance, self.mass)
            except np.linalg.LinAlgError as err:
                raise SurrogateFitError(
                    "the Hessian of the potential at the mode is not positive definite, so the "
                    "Laplace approximation cannot place the box; use domain='exploration'"
                ) from err
        else:
            self.box = DomainBox.from_draws(positions, self.mass)
        grid = SparseGrid(dim, self.level)
        whitened = (2.0 * grid.points - 1.0) * self.box.half_width
        nodes = self.box.centre + whitened @ self.box.factor.T
        values = np.asarray(self.exact_potential(nodes), dtype=float)
        failing = ~np.isfinite(values)
        if failing.any():
            raise SurrogateFitError(
                f"the exact potential is not finite at {failing.sum()} of {values.size} grid "
                "points; lower `mass` to shrink the box"
            )
        if self.quadratic_base:
            values = values - 0.5 * np.sum(whitened**2, axis=1)
        self.interpolant = grid.fit(values)
        self.exact_potential = self.exact_gradient = None  # keep the state small and picklable
        by_level = self.interpolant.surplus_by_level()
        self.report = SparseGridReport(
            level=self.level,
            n_points=grid.n_points,
            n_laplace_evaluations=laplace_evaluations,
            seconds=time.perf_counter() - start,
            half_width=self.box.half_width,
            finest_surplus=float(by_level[-1]) if len(by_level) else np.nan,
            domain=self.domain,
        )
        return self

    def extended_by_quadratic(self) -> SparseGridSurrogate:
        """A copy defined everywhere, for simulations that must not spend exact evaluations.

        Outside the box: the interpolant at the nearest point of the box plus the Gaussian
        approximation's quadratic; continuous across the boundary, and cheap.
        """
        extended = copy.copy(self)
        extended._outside_quadratic = True
        return extended

    def _whitened(self, positions: np.ndarray) -> np.ndarray:
        return (positions - self.box.centre) @ self.box.inverse_factor.T

    def contains(self, positions: np.ndarray) -> np.ndarray | bool:
        """Whether points ``(d,)`` or rows ``(n, d)`` lie in the box."""
        inside = np.max(np.abs(self._whitened(positions)), axis=-1) <= self.box.half_width
        return bool(inside) if np.ndim(inside) == 0 else inside

    def potential(self, positions: np.ndarray) -> np.ndarray | float:
        """Interpolated ``U`` at a point ``(d,)`` or rows ``(n, d)``; NaN outside the box."""
        whitened = self._whitened(np.asarray(positions, dtype=float))
        radius = self.box.half_width
        unit = np.clip((whitened + radius) / (2.0 * radius), 0.0, 1.0)
        value = np.asarray(self.interpolant.value(unit), dtype=float)
        if self.quadratic_base:
            value = value + 0.5 * np.sum(whitened**2, axis=-1)
        if not self._outside_quadratic:
            inside = np.max(np.abs(whitened), axis=-1) <= radius
            value = np.where(inside, value, np.nan)
        return float(value) if value.ndim == 0 else value

    def gradient(self, position: np.ndarray) -> np.ndarray:
        """Gradient of the interpolant at one point ``(d,)`` (or rows); NaN outside the box."""
        whitened = self._whitened(position)
        radius = self.box.half_width
        outside = np.abs(whitened) > radius
        if not self._outside_quadratic and outside.any(axis=-1).all():
            return np.full_like(whitened, np.nan)
        unit = np.clip((whitened + radius) / (2.0 * radius), 0.0, 1.0)
        gradient = np.asarray(self.interpolant.gradient(unit)) / (2.0 * radius)
        if self._outside_quadratic:
            gradient = np.where(outside, 0.0, gradient)  # flat along clipped coordinates
        else:
            gradient = np.where(outside.any(axis=-1, keepdims=True), np.nan, gradient)
        if self.quadratic_base:
            gradient = gradient + whitened
        return gradient @ self.box.inverse_factor

"""The domain of interest of the grid surrogates: a box around the posterior's bulk.

Grid-based HMC (Zhang, Shahbaba & Zhao, sections 3.3-3.5) replaces the potential by a
precomputed approximation inside a *domain of interest* ``D`` and uses the exact potential
outside it (their eq. 3.11). Here ``D`` is a box in the coordinates ``z = L^-1 (q - centre)`` of a
Gaussian approximation ``N(centre, L L^T)``: the Laplace approximation at the posterior mode
(section 3.5), or the mean and covariance of exploration draws (the option their section 6
suggests for posteriors a Gaussian describes badly). Its half-width ``r`` gives the box a
chosen probability ``mass`` under that Gaussian. Unlike the paper's axis-aligned box, this one
follows the posterior's correlations, so no grid points are spent on the empty corners of a
tilted posterior.

:class:`BoxSurrogate` is what the grid surrogates share: placing the box, whitening, NaN outside
the box (the step method then uses exact evaluations there), a cheap extension outside it for
the trajectory simulations, and a report of the precomputation's cost and accuracy.
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

from pymc_rnshmc.exceptions import SurrogateFitError
from pymc_rnshmc.surrogates.laplace import laplace_start

__all__ = [
    "DOMAINS",
    "BoxSurrogate",
    "DomainBox",
    "GridReport",
    "half_width_for_mass",
    "laplace_approximation",
]

DOMAINS = ("auto", "laplace", "exploration")
AUTO_COVERAGE = 0.9
"""``domain="auto"`` keeps the Laplace box if it holds at least this share of the exploration
draws, and otherwise places the box around the draws (a curved or skewed posterior)."""


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
        observed = float(np.quantile(np.max(np.abs(box.whiten(positions)), axis=1), mass))
        return cls(box.centre, box.factor, max(box.half_width, observed))

    def whiten(self, positions: np.ndarray) -> np.ndarray:
        """``z = L^-1 (q - centre)`` of a point or of rows."""
        return (positions - self.centre) @ self.inverse_factor.T

    def position(self, whitened: np.ndarray) -> np.ndarray:
        """``q = centre + L z`` of a point or of rows."""
        return self.centre + whitened @ self.factor.T

    def contains(self, positions: np.ndarray) -> np.ndarray | bool:
        """Whether points ``(d,)`` or rows ``(n, d)`` lie in the box."""
        inside = np.max(np.abs(self.whiten(positions)), axis=-1) <= self.half_width
        return bool(inside) if np.ndim(inside) == 0 else inside


def laplace_approximation(
    potential_and_gradient: Callable[[np.ndarray], tuple[float, np.ndarray]],
    start: np.ndarray,
    factor: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Posterior mode (scipy's L-BFGS-B on ``U``) and the covariance of the Laplace approximation.

    ``potential_and_gradient`` gives ``(U, grad U)`` at a point, in one model call. The search
    runs in the coordinates ``w = factor^-1 (q - start)``, with ``factor`` a Cholesky factor of a
    rough covariance (of exploration draws): a strongly correlated or badly scaled posterior is
    then well conditioned for the optimizer. The Hessian is the central difference of the exact
    gradient in those coordinates (steps of ``1e-4``, ``2 d`` evaluations), symmetrized.
    Returns ``(mode, covariance, evaluations)``.

    Raises
    ------
    numpy.linalg.LinAlgError
        The Hessian at the mode is not positive definite.
    """
    dim = start.size

    def to_position(whitened):
        return start + factor @ whitened

    def whitened_potential_and_gradient(whitened):
        potential, gradient = potential_and_gradient(to_position(whitened))
        return float(potential), factor.T @ np.asarray(gradient, dtype=float)

    def whitened_gradient(whitened):
        return whitened_potential_and_gradient(whitened)[1]

    result = scipy.optimize.minimize(
        whitened_potential_and_gradient, np.zeros(dim), jac=True, method="L-BFGS-B"
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


def laplace_from_values(
    potentials: Callable[[np.ndarray], np.ndarray], start: np.ndarray, factor: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`laplace_approximation` for a model without gradients.

    ``potentials`` gives ``U`` at rows. The mode is searched derivative-free and the Hessian
    taken by second differences of the values
    (:func:`~pymc_rnshmc.surrogates.laplace.laplace_start`), in the same well-conditioned
    coordinates ``w = factor^-1 (q - start)``. Returns ``(mode, covariance, evaluations)``.

    Raises
    ------
    numpy.linalg.LinAlgError
        No usable curvature at the mode (not finite, or the search ran into a singularity).
    """

    def log_density(whitened: np.ndarray) -> float:
        return -float(np.asarray(potentials((start + factor @ whitened)[None]))[0])

    origin = np.zeros(start.size)
    laplace = laplace_start(log_density, origin, log_density(origin))
    if laplace.covariance is None:
        raise np.linalg.LinAlgError("no usable curvature at the mode (not finite, or no mode)")
    covariance = factor @ laplace.covariance @ factor.T
    return start + factor @ laplace.position, covariance, laplace.n_evaluations + 1


@dataclass(frozen=True)
class GridReport:
    """What the precomputation cost and how accurate the grid looks.

    ``n_points`` exact evaluations on the grid plus ``n_laplace_evaluations`` for the mode and
    Hessian, in ``seconds``. ``error_estimate`` is the grid's own estimate of its interpolation
    error (the largest finest-level hierarchical surplus of a sparse grid; a quarter of the
    largest first-order Taylor residual between neighbouring cells of a force map);
    ``max_potential_error`` is the larger of that and the largest ``|U - U~|`` at the
    exploration draws inside the box: the estimate of ``max |U - U~|`` over the box behind the
    Kullback-Leibler bound ``2 max |U - U~|`` of an approximate Metropolis test.
    """

    grid: str
    level: int | None
    cells_per_dimension: int | None
    n_points: int
    n_laplace_evaluations: int
    seconds: float
    half_width: float
    error_estimate: float
    max_potential_error: float
    domain: str

    @property
    def kl_bound(self) -> float:
        """``2 max |U - U~|`` (Theorem 5.1 of the sparse-grid HMC paper)."""
        return 2.0 * self.max_potential_error

    def summary(self) -> str:
        """One phrase for the step's log."""
        size = (
            f"a level-{self.level} sparse grid of {self.n_points} points"
            if self.grid == "sparse"
            else f"a force map of {self.n_points} cells"
        )
        return (
            f": {size} in a {self.domain} box (half-width {self.half_width:.2f}), "
            f"{self.n_points} + {self.n_laplace_evaluations} exact evaluations in "
            f"{self.seconds:.2g} s, estimated largest error of the potential "
            f"{self.max_potential_error:.2g}"
        )


class BoxSurrogate:
    """A precomputed approximation of the potential inside a box, NaN outside it.

    Subclasses fill the box in :meth:`_fill_box` and evaluate in :meth:`_evaluate`.

    Parameters
    ----------
    mass : float
        Probability of the box under the Gaussian approximation, in (0, 1).
    domain : {"auto", "laplace", "exploration"}
        Gaussian approximation that places the box: Laplace at the mode, or the mean and
        covariance of the training draws; ``"auto"`` uses the Laplace box unless it holds less
        than 90 % of the training draws (or the Hessian is not positive definite).
    exact_potential : callable
        Exact ``U`` at rows ``(n, d)``.
    exact_potential_and_gradient : callable, optional
        Exact ``(U, grad U)`` at one point; ``None`` for a model without gradients (the Laplace
        box then comes from values, :func:`laplace_from_values`). Both callables are used by
        :meth:`fit` only and dropped afterwards.
    max_error : float, optional
        Refuse a grid whose ``report.max_potential_error`` is above this many nats
        (:meth:`fit` raises); ``None`` accepts every grid.
    """

    grid = ""
    level: int | None = None
    cells_per_dimension: int | None = None
    defined_everywhere = False
    is_gradient_field = True
    fit_evaluates_models = True

    def __init__(
        self,
        mass: float = 0.999,
        domain: str = "auto",
        exact_potential: Callable[[np.ndarray], np.ndarray] | None = None,
        exact_potential_and_gradient: Callable[[np.ndarray], tuple] | None = None,
        max_error: float | None = None,
    ) -> None:
        if domain not in DOMAINS:
            raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}.")
        self.mass = float(mass)
        self.domain = domain
        self.exact_potential = exact_potential
        self.exact_potential_and_gradient = exact_potential_and_gradient
        self.max_error = max_error
        self.box: DomainBox | None = None
        self.report: GridReport | None = None
        self._outside_quadratic = False

    # ----------------------------------------------------------------- fitting
    def fit(self, positions, potentials, gradients=None, rng=None) -> BoxSurrogate:
        """Place the box (around the draws, or Laplace from the best draw), fill the grid.

        Raises
        ------
        SurrogateFitError
            The Laplace Hessian is not positive definite (``domain="laplace"``), the exact
            potential is not finite at any grid point, or the grid's estimated largest error is
            above ``max_error``.
        """
        if self.exact_potential is None:
            raise SurrogateFitError("The grid needs the exact potential.")
        start = time.perf_counter()
        positions = np.atleast_2d(np.asarray(positions, dtype=float))
        potentials = np.asarray(potentials, dtype=float)
        laplace_evaluations, used = self._place_box(positions, potentials)
        n_points, error_estimate = self._fill_box()
        inside = self.box.contains(positions)
        observed = 0.0
        if inside.any():
            errors = self.potential(positions[inside]) - potentials[inside]
            observed = float(np.max(np.abs(errors)))
        self.exact_potential = self.exact_potential_and_gradient = None  # small, picklable
        self.report = GridReport(
            grid=self.grid,
            level=self.level,
            cells_per_dimension=self.cells_per_dimension,
            n_points=n_points,
            n_laplace_evaluations=laplace_evaluations,
            seconds=time.perf_counter() - start,
            half_width=self.box.half_width,
            error_estimate=error_estimate,
            max_potential_error=max(error_estimate, observed),
            domain=used,
        )
        self._check_error()
        return self

    def _check_error(self) -> None:
        error = self.report.max_potential_error
        if self.max_error is None or error <= self.max_error:
            return
        raise SurrogateFitError(
            f"the grid's estimated largest error of the potential is {error:.3g} nats, above "
            f"max_error = {self.max_error:g}: a grid of {self.report.n_points} points cannot "
            "follow this posterior (a funnel or a heavy tail, say), and its proposals would "
            "mix slowly. Reparametrize the model, give the grid more points (max_points), or "
            "raise max_error"
        )

    def _place_box(self, positions: np.ndarray, potentials: np.ndarray) -> tuple[int, str]:
        """Set ``self.box``; return the Laplace evaluations spent and the domain used."""
        if self.domain == "exploration":
            self.box = DomainBox.from_draws(positions, self.mass)
            return 0, "exploration"
        dim = positions.shape[1]
        best = positions[np.nanargmin(potentials)]
        spread = np.atleast_2d(np.cov(positions, rowvar=False))
        spread += 1e-10 * np.diag(np.diag(spread)) + 1e-300 * np.eye(dim)
        try:
            if self.exact_potential_and_gradient is None:
                mode, covariance, evaluations = laplace_from_values(
                    self.exact_potential, best, np.linalg.cholesky(spread)
                )
            else:
                mode, covariance, evaluations = laplace_approximation(
                    self.exact_potential_and_gradient, best, np.linalg.cholesky(spread)
                )
            box = DomainBox.from_covariance(mode, covariance, self.mass)
        except np.linalg.LinAlgError as err:
            if self.domain == "auto":
                self.box = DomainBox.from_draws(positions, self.mass)
                return 0, "exploration"
            raise SurrogateFitError(
                "the Hessian of the potential at the mode is not positive definite, so the "
                "Laplace approximation cannot place the box; use domain='exploration'"
            ) from err
        if self.domain == "auto" and np.mean(box.contains(positions)) < AUTO_COVERAGE:
            self.box = DomainBox.from_draws(positions, self.mass)
            return evaluations, "exploration"
        self.box = box
        return evaluations, "laplace"

    def _exact_values(self, whitened: np.ndarray) -> np.ndarray:
        """Exact ``U`` at whitened rows; where the model fails, the highest value where it does.

        A node where the model fails (the caller counts it) gets a plateau at the highest finite
        value: the interpolant stays finite, and a proposal into that region is rejected by the
        exact test anyway. A clear error if the model fails at every node.
        """
        values = np.asarray(self.exact_potential(self.box.position(whitened)), dtype=float)
        failing = ~np.isfinite(values)
        if failing.all():
            raise SurrogateFitError(
                f"the exact potential is not finite at any of the {values.size} grid points; "
                "lower `mass` to shrink the box"
            )
        return np.where(failing, values[~failing].max(), values)

    def _fill_box(self) -> tuple[int, float]:
        """Evaluate the exact model on the grid; return its size and error estimate."""
        raise NotImplementedError

    # ----------------------------------------------------------------- evaluation
    def extended_by_quadratic(self) -> BoxSurrogate:
        """A copy defined everywhere, for simulations that must not spend exact evaluations.

        Outside the box: the approximation's first-order extension from the nearest point of
        the box plus the Gaussian approximation's quadratic beyond the box. Value and gradient
        are continuous across the boundary (a jump in the force there would make the
        simulations choose tiny step sizes), and it is cheap.
        """
        extended = copy.copy(self)
        extended._outside_quadratic = True
        return extended

    def for_simulation(self) -> BoxSurrogate:
        """The version the trajectory simulations use: :meth:`extended_by_quadratic`."""
        return self.extended_by_quadratic()

    def approximate_covariance(self) -> np.ndarray:
        """Covariance of the Gaussian approximation that placed the box (a metric candidate)."""
        return self.box.factor @ self.box.factor.T

    def contains(self, positions: np.ndarray) -> np.ndarray | bool:
        """Whether points ``(d,)`` or rows ``(n, d)`` lie in the box."""
        return self.box.contains(positions)

    def potential(self, positions: np.ndarray) -> np.ndarray | float:
        """Approximate ``U`` at a point ``(d,)`` or rows ``(n, d)``; NaN outside the box."""
        value = self._evaluate(np.asarray(positions, dtype=float), gradient=False)
        return float(value) if np.ndim(value) == 0 else value

    def gradient(self, position: np.ndarray) -> np.ndarray:
        """Approximate ``grad U`` at a point ``(d,)`` or rows ``(n, d)``; NaN outside the box."""
        return self._evaluate(np.asarray(position, dtype=float), gradient=True)

    def _evaluate(self, positions: np.ndarray, gradient: bool) -> np.ndarray:
        raise NotImplementedError

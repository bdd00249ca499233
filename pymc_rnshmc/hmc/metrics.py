"""Euclidean metrics (inverse mass matrices) for the surrogate dynamics.

PyMC's potentials keep their own random generator and adapt themselves; the surrogate phase needs
a frozen metric that can also act on many momenta at once (the trajectory tuner simulates many
surrogate chains in one batch) and draws from a generator it is given. These small classes do
exactly that; every method accepts one vector ``(d,)`` or rows ``(n, d)``.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from scipy import linalg

from pymc_rnshmc.surrogates.quadratic import QuadraticPotential
from pymc_rnshmc.surrogates.whitening import Whitening

__all__ = ["DenseMetric", "DiagonalMetric", "Metric", "dense_metric_from_gradients"]


class Metric(Protocol):
    """Kinetic energy ``K(p) = 0.5 p^T S p`` of the surrogate dynamics (``S`` a covariance)."""

    kind: str

    def velocity(self, momentum: np.ndarray) -> np.ndarray:
        """``dK/dp`` of one momentum or of rows."""
        ...

    def energy(self, momentum: np.ndarray) -> np.ndarray | float:
        """Kinetic energy of one momentum or of rows."""
        ...

    def random(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Momentum ``~ N(0, S^-1)``: one vector, or ``n`` rows."""
        ...

    def eigenvalue_range(self) -> tuple[float, float]:
        """Smallest and largest eigenvalue of ``S`` (the inverse mass matrix)."""
        ...


class DiagonalMetric:
    """Kinetic energy ``0.5 p^T diag(v) p`` with ``v`` the inverse masses (variances).

    Parameters
    ----------
    variances : ndarray, shape (d,)
    """

    kind = "diagonal"

    def __init__(self, variances: np.ndarray) -> None:
        self.variances = np.ascontiguousarray(variances, dtype=float)
        if not (np.all(np.isfinite(self.variances)) and np.all(self.variances > 0)):
            raise ValueError("A diagonal metric needs finite, positive variances.")
        self._scales = 1.0 / np.sqrt(self.variances)

    def velocity(self, momentum: np.ndarray) -> np.ndarray:
        """``dK/dp``."""
        return self.variances * momentum

    def energy(self, momentum: np.ndarray) -> np.ndarray | float:
        """Kinetic energy."""
        return 0.5 * np.sum(momentum * momentum * self.variances, axis=-1)

    def random(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Momentum ``~ N(0, M)``: one vector, or ``n`` rows."""
        shape = self.variances.shape if n is None else (n, self.variances.size)
        return rng.normal(size=shape) * self._scales

    def eigenvalue_range(self) -> tuple[float, float]:
        """Smallest and largest variance."""
        return float(self.variances.min()), float(self.variances.max())


class DenseMetric:
    """Kinetic energy ``0.5 p^T S p`` with ``S`` a covariance (inverse mass matrix).

    Parameters
    ----------
    covariance : ndarray, shape (d, d)
        Symmetric positive definite.
    """

    kind = "dense"

    def __init__(self, covariance: np.ndarray) -> None:
        self.covariance = np.ascontiguousarray(covariance, dtype=float)
        factor = linalg.cholesky(self.covariance, lower=True)
        # p = L^{-T} z has covariance (L L^T)^{-1}, the mass matrix; as rows, p = z L^{-1}.
        self._inverse_factor = linalg.solve_triangular(factor, np.eye(len(factor)), lower=True)
        self._eigenvalue_range: tuple[float, float] | None = None

    def velocity(self, momentum: np.ndarray) -> np.ndarray:
        """``dK/dp``."""
        return momentum @ self.covariance

    def energy(self, momentum: np.ndarray) -> np.ndarray | float:
        """Kinetic energy."""
        return 0.5 * np.sum(momentum * self.velocity(momentum), axis=-1)

    def random(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Momentum ``~ N(0, M)``: one vector, or ``n`` rows."""
        dim = self.covariance.shape[0]
        shape = dim if n is None else (n, dim)
        return rng.normal(size=shape) @ self._inverse_factor

    def eigenvalue_range(self) -> tuple[float, float]:
        """Smallest and largest eigenvalue of the covariance (computed once)."""
        if self._eigenvalue_range is None:
            eigenvalues = linalg.eigvalsh(self.covariance)
            self._eigenvalue_range = (float(eigenvalues[0]), float(eigenvalues[-1]))
        return self._eigenvalue_range


def dense_metric_from_gradients(
    positions: np.ndarray, gradients: np.ndarray, min_curvature: float = 1e-2
) -> DenseMetric:
    """The inverse of an average Hessian, from a regression of exact gradients on positions.

    For a near-Gaussian posterior this is its covariance, estimated from ``n d`` gradient
    components instead of ``n`` positions, so it is far less noisy than a sample covariance
    when ``n`` is not much larger than ``d``.

    Parameters
    ----------
    positions : ndarray, shape (n, d)
    gradients : ndarray, shape (n, d)
        Gradients of the potential ``U = -logp``.
    min_curvature : float
        Eigenvalue floor of the whitened Hessian (caps inflated variances at ``1 / floor``
        times the sample variance).
    """
    whitening = Whitening.from_positions(positions)
    whitened = whitening.to_whitened(positions)
    quadratic = QuadraticPotential.fit(
        whitened, whitening.gradient_to_whitened(gradients), min_curvature=min_curvature
    )
    factor = whitening.cholesky_factor
    covariance = factor @ linalg.inv(quadratic.hessian) @ factor.T
    return DenseMetric(0.5 * (covariance + covariance.T))

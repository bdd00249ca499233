"""Position-dependent metrics from a surrogate's curvature: SoftAbs, dense or on the diagonal.

Riemannian HMC (Girolami & Calderhead 2011) moves with the Hamiltonian
``H(q, p) = U(q) + 1/2 log det G(q) + 1/2 p^T G(q)^-1 p``. RNS-RMHMC (Zhang et al. 2017, section
3.4) takes ``G`` from the surrogate's Hessian. A Hessian is not positive definite away from a
convex potential's mode, so it is made so smoothly: SoftAbs (Betancourt 2013) maps each
eigenvalue ``l`` to ``l coth(alpha l)``, which is ``|l|`` for ``|l| >> 1/alpha`` and ``1/alpha``
near zero, and is differentiable, so the dynamics stay smooth. The diagonal form applies the
same map to the Hessian's diagonal only: the paper's metric for the elliptic PDE, at ``O(s d)``
a point instead of ``O(s d^2 + d^3)``.

Each metric evaluated at a point is a :class:`DenseSoftAbs` or :class:`DiagonalSoftAbs` value
holding what the generalized leapfrog needs there: the velocity ``G^-1 p``, the kinetic energy
with its log determinant, the gradient of ``phi = U + 1/2 log det G``, and
``nu(p)_i = (G^-1 p)^T dG/dq_i (G^-1 p)``. The derivatives of ``G`` come from the derivative
of the eigen-decomposition (the Daleckii-Krein formula: ``dG = Q (J o Q^T dH Q) Q^T`` with the
divided differences ``J`` of the SoftAbs map) contracted with the surrogate's third derivatives
through its units (:mod:`pymc_rnshmc.surrogates.network.curvature`), never as a ``d^3`` tensor.

Written by hand: no maintained Python library provides SoftAbs metrics on a user's potential
(the SoftAbs papers' code is in Stan's C++ research branches and in JAX demos).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from pymc_rnshmc.surrogates.network.curvature import LocalCurvature, RidgeForm

__all__ = ["DenseSoftAbs", "DiagonalSoftAbs", "SurrogateGeometry", "softabs"]

SMALL_ARGUMENT = 1e-4
"""Below this ``|alpha l|`` the SoftAbs map and its slope use their Taylor series."""
METRIC_KINDS = ("softabs", "diagonal")


def softabs(eigenvalues: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``l coth(alpha l)`` and its derivative in ``l``, stable at ``l = 0`` and for large ``l``."""
    x = alpha * np.asarray(eigenvalues, dtype=float)
    small = np.abs(x) < SMALL_ARGUMENT
    safe = np.where(small, 1.0, x)
    with np.errstate(over="ignore"):
        coth = 1.0 / np.tanh(safe)
        sinh = np.sinh(safe)
        slope_large = coth - safe / (sinh * sinh)
    values = np.where(small, (1.0 + x * x / 3.0) / alpha, safe * coth / alpha)
    slopes = np.where(small, 2.0 * x / 3.0, slope_large)
    return values, slopes


class DenseSoftAbs:
    """SoftAbs of the full Hessian at one point.

    The eigen-decomposition (``O(d^3)``) is made at once: the velocity needs it, and the
    generalized leapfrog's position iterations need nothing else. What ``nu`` and the gradient
    of ``phi`` also need (the units' weights in the eigenbasis, ``O(s d^2)``, and the divided
    differences) is computed on first use.
    """

    kind = "softabs"

    def __init__(self, curvature: LocalCurvature, alpha: float) -> None:
        self.potential = curvature.potential
        self.gradient = curvature.gradient
        self._eigenvalues, self.eigenvectors = np.linalg.eigh(curvature.hessian)
        self.values, self._slopes = softabs(self._eigenvalues, alpha)
        self.log_det = float(np.sum(np.log(self.values)))
        self._weights = curvature.weights
        self._third = curvature.third

    @cached_property
    def _projected(self) -> np.ndarray:
        return self._weights @ self.eigenvectors

    @cached_property
    def _divided_differences(self) -> np.ndarray:
        return _divided_differences(self._eigenvalues, self.values, self._slopes)

    @cached_property
    def phi_gradient(self) -> np.ndarray:
        """Gradient of ``U~ + 1/2 log det G``."""
        per_unit = (self._projected**2) @ (self._slopes / self.values)
        return self.gradient + 0.5 * self._through_units(per_unit)

    def _through_units(self, per_unit: np.ndarray) -> np.ndarray:
        return (self._third * per_unit) @ self._weights

    def velocity(self, momentum: np.ndarray) -> np.ndarray:
        """``G^-1 p``."""
        return self.eigenvectors @ ((momentum @ self.eigenvectors) / self.values)

    def kinetic(self, momentum: np.ndarray) -> float:
        """``1/2 log det G + 1/2 p^T G^-1 p``."""
        rotated = momentum @ self.eigenvectors
        return 0.5 * self.log_det + 0.5 * float(rotated @ (rotated / self.values))

    def nu(self, momentum: np.ndarray) -> np.ndarray:
        """``(G^-1 p)^T dG/dq_i (G^-1 p)`` for every ``i``."""
        rotated_velocity = (momentum @ self.eigenvectors) / self.values
        scaled = self._projected * rotated_velocity
        per_unit = np.einsum("kj,kj->k", scaled @ self._divided_differences, scaled)
        return self._through_units(per_unit)

    def random(self, rng: np.random.Generator) -> np.ndarray:
        """A momentum ``~ N(0, G)``."""
        normal = rng.standard_normal(self.values.shape[0])
        return self.eigenvectors @ (np.sqrt(self.values) * normal)

    def eigenvalue_range(self) -> tuple[float, float]:
        """Smallest and largest eigenvalue of ``G^-1`` (the inverse mass matrix here)."""
        return float(1.0 / self.values.max()), float(1.0 / self.values.min())

    def is_finite(self) -> bool:
        """Whether everything the dynamics need here is finite."""
        return bool(np.isfinite(self.potential) and np.all(np.isfinite(self.phi_gradient)))


class DiagonalSoftAbs(DenseSoftAbs):
    """SoftAbs of the Hessian's diagonal at one point (``O(s d)``)."""

    kind = "diagonal"

    def __init__(self, curvature: LocalCurvature, alpha: float) -> None:
        self.potential = curvature.potential
        self.gradient = curvature.gradient
        self.values, self._slopes = softabs(curvature.hessian, alpha)
        self.log_det = float(np.sum(np.log(self.values)))
        self._weights = curvature.weights
        self._third = curvature.third

    @cached_property
    def _squared_weights(self) -> np.ndarray:
        return self._weights**2

    @cached_property
    def phi_gradient(self) -> np.ndarray:
        """Gradient of ``U~ + 1/2 log det G``."""
        per_unit = self._squared_weights @ (self._slopes / self.values)
        return self.gradient + 0.5 * self._through_units(per_unit)

    def velocity(self, momentum: np.ndarray) -> np.ndarray:
        return momentum / self.values

    def kinetic(self, momentum: np.ndarray) -> float:
        return 0.5 * self.log_det + 0.5 * float(momentum @ (momentum / self.values))

    def nu(self, momentum: np.ndarray) -> np.ndarray:
        velocity = momentum / self.values
        return self._through_units(self._squared_weights @ (self._slopes * velocity * velocity))

    def random(self, rng: np.random.Generator) -> np.ndarray:
        return np.sqrt(self.values) * rng.standard_normal(self.values.shape[0])


class SurrogateGeometry:
    """The metric field of a fitted network surrogate: position -> local SoftAbs metric.

    Parameters
    ----------
    form : RidgeForm
        The fitted network (:meth:`RandomNetworkSurrogate.ridge_form`).
    kind : {"softabs", "diagonal"}
        SoftAbs of the whole Hessian, or of its diagonal.
    alpha : float
        SoftAbs sharpness: eigenvalues well above ``1 / alpha`` are kept (their absolute
        value), smaller ones are lifted to about ``1 / alpha``.

    References
    ----------
    .. [1] Betancourt, M. (2013). A general metric for Riemannian manifold Hamiltonian Monte
       Carlo. Geometric Science of Information, LNCS 8085, 327-334.
    .. [2] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
    """

    def __init__(self, form: RidgeForm, kind: str, alpha: float) -> None:
        if kind not in METRIC_KINDS:
            raise ValueError(f"metric must be one of {METRIC_KINDS}; got {kind!r}.")
        if not (np.isfinite(alpha) and alpha > 0):
            raise ValueError(f"alpha must be a positive number; got {alpha!r}.")
        self.form = form
        self.kind = kind
        self.alpha = float(alpha)

    def at(self, position: np.ndarray) -> DenseSoftAbs:
        """The metric (and the potential's gradient) at ``position``."""
        diagonal = self.kind == "diagonal"
        curvature = self.form.at(position, diagonal=diagonal)
        local_class = DiagonalSoftAbs if diagonal else DenseSoftAbs
        return local_class(curvature, self.alpha)


def _divided_differences(
    eigenvalues: np.ndarray, values: np.ndarray, slopes: np.ndarray
) -> np.ndarray:
    """``J_jk = (f(l_j) - f(l_k)) / (l_j - l_k)``, the mean slope where ``l_j`` and ``l_k`` meet."""
    gaps = eigenvalues[:, None] - eigenvalues[None, :]
    rises = values[:, None] - values[None, :]
    scale = 1.0 + np.abs(eigenvalues).max()
    close = np.abs(gaps) <= 1e-10 * scale
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = rises / gaps
    return np.where(close, 0.5 * (slopes[:, None] + slopes[None, :]), ratios)

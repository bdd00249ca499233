"""A quadratic potential fitted to exact gradients, the base under the random network.

Near a posterior mode a potential is close to quadratic; a prototype on the paper's logistic
regression found a quadratic base with the network fitted to the residual about ten times more
accurate than the network alone. The gradient of ``0.5 z^T A z + b^T z`` is affine in ``z``, so
``A`` and ``b`` follow from one multivariate linear regression of the exact gradients on the
positions (``d + 1`` regressors, ``d`` outputs): no quadratic feature matrix is ever formed.
``A`` is symmetrized and its eigenvalues are floored at a small positive curvature, so the base
always confines trajectories, even where the training data do not reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

__all__ = ["QuadraticPotential"]


@dataclass(frozen=True)
class QuadraticPotential:
    """The quadratic ``0.5 z^T A z + b^T z`` in whitened coordinates.

    Parameters
    ----------
    hessian : ndarray, shape (d, d)
        Symmetric positive definite ``A``.
    linear : ndarray, shape (d,)
        ``b``, the gradient at ``z = 0``.
    """

    hessian: np.ndarray
    linear: np.ndarray

    @classmethod
    def fit(
        cls, whitened: np.ndarray, whitened_gradients: np.ndarray, min_curvature: float = 1e-2
    ) -> QuadraticPotential:
        """Least-squares fit of ``A z + b`` to gradients of the potential.

        Parameters
        ----------
        whitened : ndarray, shape (n, d)
            Training positions in whitened coordinates.
        whitened_gradients : ndarray, shape (n, d)
            Gradients of the potential ``U`` with respect to the whitened coordinates.
        min_curvature : float
            Floor on the eigenvalues of ``A``, in whitened units (where a standard normal
            posterior has curvature 1).
        """
        whitened = np.atleast_2d(whitened)
        dim = whitened.shape[1]
        mean_position = whitened.mean(axis=0)
        mean_gradient = whitened_gradients.mean(axis=0)
        centred_positions = whitened - mean_position
        centred_gradients = whitened_gradients - mean_gradient
        cross = centred_positions.T @ centred_gradients
        scatter = centred_positions.T @ centred_positions
        ridge = 1e-8 * max(float(np.trace(scatter)) / dim, 1e-300) + 1e-12
        scatter[np.diag_indices(dim)] += ridge
        # Regression of gradients on positions: gradient ~ A z + b, with A = cross^T scatter^-1.
        hessian = linalg.solve(scatter, cross, assume_a="pos").T
        hessian = 0.5 * (hessian + hessian.T)
        eigenvalues, eigenvectors = linalg.eigh(hessian)
        eigenvalues = np.maximum(eigenvalues, min_curvature)
        hessian = (eigenvectors * eigenvalues) @ eigenvectors.T
        linear = mean_gradient - hessian @ mean_position
        return cls(hessian=hessian, linear=linear)

    def potential(self, whitened: np.ndarray) -> np.ndarray:
        """Value at one point ``(d,)`` or at rows ``(n, d)``."""
        whitened = np.asarray(whitened, dtype=float)
        return 0.5 * np.sum((whitened @ self.hessian) * whitened, axis=-1) + whitened @ self.linear

    def gradient(self, whitened: np.ndarray) -> np.ndarray:
        """Gradient at one point ``(d,)`` or at rows ``(n, d)``."""
        return np.asarray(whitened, dtype=float) @ self.hessian + self.linear

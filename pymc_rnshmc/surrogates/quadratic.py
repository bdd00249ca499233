"""A quadratic potential, the base under the random network.

Near a posterior mode a potential is close to quadratic; a prototype on the paper's logistic
regression found a quadratic base with the network fitted to the residual about ten times more
accurate than the network alone. The base ``0.5 z^T A z + b^T z`` is fitted in one of two ways:

* to exact gradients (:meth:`QuadraticPotential.fit`): the gradient is affine in ``z``, so ``A``
  and ``b`` follow from one multivariate linear regression of the gradients on the positions
  (``d + 1`` regressors, ``d`` outputs); no quadratic feature matrix is ever formed;
* to exact values alone (:meth:`QuadraticPotential.fit_to_values`), for models without
  gradients: ridge least squares on the ``d (d + 1) / 2 + d + 1`` quadratic features, shrinking
  ``A`` towards the identity (the curvature of a Gaussian posterior in whitened coordinates) with
  the penalty chosen by generalized cross-validation, then ``b`` again with ``A`` fixed. On the
  elliptic PDE posterior (d = 20, 231 features) 250 chain draws gave a relative potential error
  of 0.24 this way, 0.53 with a fixed small penalty (least squares interpolate erratically when
  the points barely outnumber the features) and 0.12 for the fit to gradients; from 500 draws on
  the two fits to values agree (0.15, then 0.13 at 1000).

Either way ``A`` is symmetrized and its eigenvalues are floored at a small positive curvature, so
the base always confines trajectories, even where the training data do not reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

__all__ = ["QuadraticPotential"]

VALUE_FIT_PENALTIES = np.logspace(-8, 2, 21)
"""Ridge penalties of the fit to values (relative to the mean squared quadratic feature)."""


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
        hessian = floor_curvature(hessian, min_curvature)
        linear = mean_gradient - hessian @ mean_position
        return cls(hessian=hessian, linear=linear)

    @classmethod
    def fit_to_values(
        cls, whitened: np.ndarray, potentials: np.ndarray, min_curvature: float = 1e-2
    ) -> QuadraticPotential:
        """Least-squares fit of ``0.5 z^T A z + b^T z + c`` to values of the potential.

        ``A``, ``b`` and ``c`` come from ridge least squares on the quadratic features. The
        penalty is on ``||A - I||_F^2 + ||b||^2`` (``I`` is the curvature of a Gaussian
        posterior in whitened coordinates; the Frobenius norm does not depend on their
        rotation), not on ``c``, and is chosen by generalized cross-validation over
        ``VALUE_FIT_PENALTIES``; fewer points than the ``d (d + 1) / 2 + d + 1`` features still
        give a definite answer. Repeated positions (the rejections of a chain) count once.
        ``A`` is then floored like in :meth:`fit`, and ``b`` refitted with ``A`` fixed, so the
        linear part matches the floored curvature. The constant ``c`` is not kept: the
        network's offset absorbs it.

        Parameters
        ----------
        whitened : ndarray, shape (n, d)
            Training positions in whitened coordinates; at least ``d + 2`` distinct ones for a
            determined linear part.
        potentials : ndarray, shape (n,)
            The potential ``U`` at the positions.
        min_curvature : float
            Floor on the eigenvalues of ``A``, in whitened units.
        """
        whitened = np.atleast_2d(np.asarray(whitened, dtype=float))
        potentials = np.asarray(potentials, dtype=float).reshape(-1)
        whitened, first = np.unique(whitened, axis=0, return_index=True)
        potentials = potentials[first]
        hessian = np.eye(whitened.shape[1]) + _hessian_from_values(
            whitened, potentials - 0.5 * np.sum(whitened**2, axis=1)
        )
        hessian = floor_curvature(hessian, min_curvature)
        curvature = 0.5 * np.sum((whitened @ hessian) * whitened, axis=1)
        linear = _linear_from_values(whitened, potentials - curvature)
        return cls(hessian=hessian, linear=linear)

    @classmethod
    def from_gaussian(cls, mean: np.ndarray, covariance: np.ndarray) -> QuadraticPotential:
        """The potential of ``N(mean, covariance)`` (up to a constant), in whitened coordinates.

        ``mean`` and ``covariance`` are in the same whitened coordinates; the covariance must be
        positive definite.
        """
        hessian = linalg.inv(np.asarray(covariance, dtype=float))
        hessian = 0.5 * (hessian + hessian.T)
        return cls(hessian=hessian, linear=-hessian @ np.asarray(mean, dtype=float))

    def potential(self, whitened: np.ndarray) -> np.ndarray:
        """Value at one point ``(d,)`` or at rows ``(n, d)``."""
        whitened = np.asarray(whitened, dtype=float)
        return 0.5 * np.sum((whitened @ self.hessian) * whitened, axis=-1) + whitened @ self.linear

    def gradient(self, whitened: np.ndarray) -> np.ndarray:
        """Gradient at one point ``(d,)`` or at rows ``(n, d)``."""
        return np.asarray(whitened, dtype=float) @ self.hessian + self.linear


def floor_curvature(hessian: np.ndarray, min_curvature: float) -> np.ndarray:
    """Symmetrize ``hessian`` and raise its eigenvalues to at least ``min_curvature``."""
    hessian = 0.5 * (hessian + hessian.T)
    eigenvalues, eigenvectors = linalg.eigh(hessian)
    eigenvalues = np.maximum(eigenvalues, min_curvature)
    return (eigenvectors * eigenvalues) @ eigenvectors.T


def quadratic_features(whitened: np.ndarray) -> np.ndarray:
    """Quadratic and linear features of rows ``(n, d)``: ``(n, d (d + 1) / 2 + d)``.

    The coefficient of ``z_i^2 / 2`` is ``A_ii`` and that of ``z_i z_j / sqrt(2)`` (``i < j``)
    is ``sqrt(2) A_ij`` (see :func:`_hessian_from_coefficients`), so the squared coefficients
    of the quadratic part sum to ``||A||_F^2``.
    """
    rows, columns = np.triu_indices(whitened.shape[1])
    weights = np.where(rows == columns, 0.5, np.sqrt(0.5))
    return np.column_stack([whitened[:, rows] * whitened[:, columns] * weights, whitened])


def _hessian_from_coefficients(coefficients: np.ndarray, dim: int) -> np.ndarray:
    """The symmetric ``A`` whose quadratic features have these leading coefficients."""
    rows, columns = np.triu_indices(dim)
    upper = np.zeros((dim, dim))
    upper[rows, columns] = coefficients[: rows.size] * np.where(rows == columns, 1.0, np.sqrt(0.5))
    return upper + np.triu(upper, 1).T


def _hessian_from_values(whitened: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``A`` of the ridge fit of ``0.5 z^T A z + b^T z + c`` to ``targets``, by GCV.

    One thin SVD of the centred features gives the whole penalty path; among the penalties
    within 1 % of the lowest generalized cross-validation score the largest wins (the smoother
    fit on ties).
    """
    features = quadratic_features(whitened)
    features -= features.mean(axis=0)
    targets = targets - targets.mean()
    n_points, n_features = features.shape
    try:
        left, singular, right = linalg.svd(features, full_matrices=False)
    except linalg.LinAlgError:  # the divide-and-conquer driver rarely fails to converge
        left, singular, right = linalg.svd(features, full_matrices=False, lapack_driver="gesvd")
    squares = singular**2
    penalties = VALUE_FIT_PENALTIES * max(float(np.sum(squares)) / n_features, 1e-300)
    projected = left.T @ targets
    shrinkage = squares[:, None] / (squares[:, None] + penalties)
    residuals = targets[:, None] - left @ (shrinkage * projected[:, None])
    used = 1.0 + np.sum(shrinkage, axis=0)  # degrees of freedom, the constant included
    score = np.mean(residuals**2, axis=0) / np.maximum(1.0 - used / n_points, 1e-12) ** 2
    best = np.flatnonzero(score <= 1.01 * np.min(score))[-1]
    coefficients = right.T @ (singular / (squares + penalties[best]) * projected)
    return _hessian_from_coefficients(coefficients, whitened.shape[1])


def _linear_from_values(whitened: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``b`` of the least-squares fit of ``b^T z + c`` to ``targets``."""
    centred = whitened - whitened.mean(axis=0)
    linear, *_ = linalg.lstsq(centred, targets - targets.mean())
    return linear

"""A metric's covariance from a chain's draws, with only the correlations beyond sampling noise.

A dense sample covariance from a few hundred tuning draws in tens of dimensions is mostly noise:
even for independent coordinates, the eigenvalues of a sample correlation matrix of ``n`` draws
in ``d`` dimensions spread over the Marchenko-Pastur interval ``[(1 - sqrt(d/n))^2,
(1 + sqrt(d/n))^2]`` [1]_, so a metric built from it would distort every direction by up to that
factor. Here the correlation matrix keeps only its eigen-directions outside that interval (the
spiked-covariance view of what can be told from noise [2]_) and is the identity in the others:
``C = S (I + U (L - I) U^T) S``, with ``S`` the draws' standard deviations and ``(L, U)`` the kept
eigenvalues and vectors. Where no direction stands out, there is nothing to gain over a diagonal
metric, and :func:`covariance_beyond_noise` says so with ``None``. Like the low-rank mass matrix
of nutpie, it corrects only the few directions where a diagonal metric is wrong; unlike nutpie's,
it uses the draws alone (not their gradients).

numpy and scipy only; written here because neither PyMC nor SciPy has such an estimator.

References
----------
.. [1] Marchenko, V. A., & Pastur, L. A. (1967). Distribution of eigenvalues for some sets of
   random matrices. Mathematics of the USSR-Sbornik, 1(4), 457-483.
.. [2] Johnstone, I. M. (2001). On the distribution of the largest eigenvalue in principal
   components analysis. The Annals of Statistics, 29(2), 295-327.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

__all__ = ["correlation_condition", "covariance_beyond_noise", "noise_interval"]

SMALLEST_EIGENVALUE = 1e-8
"""Kept eigenvalues of the correlation matrix are floored here (a coordinate that is a function
of others would make the covariance singular)."""


def noise_interval(n_draws: int, dim: int) -> tuple[float, float]:
    """Where the eigenvalues of the correlation matrix of ``n_draws`` independent draws fall."""
    ratio = np.sqrt(dim / n_draws)
    return max(1.0 - ratio, 0.0) ** 2, (1.0 + ratio) ** 2


def covariance_beyond_noise(draws: np.ndarray) -> np.ndarray | None:
    """The draws' covariance with the correlations that stand out of noise (``None``: none do).

    ``draws``: one chain's positions ``(n, d)``. A coordinate that never moved gets unit
    variance and no correlation. ``None`` also where the draws are not all finite, or not more
    than the coordinates that moved (the correlation matrix is then singular, and the noise
    interval has no lower edge).

    The interval is that of independent draws. A chain's draws are autocorrelated, so fewer
    count and noise spreads wider: in 56 dimensions, 400 draws of independent AR(1) coordinates
    with autocorrelation 0.9 kept noise directions in 20 of 20 seeds, with correlation condition
    numbers up to 60.
    """
    draws = np.asarray(draws, dtype=float)
    n_draws, dim = draws.shape
    if not np.all(np.isfinite(draws)):
        return None
    deviations = draws - draws.mean(axis=0)
    scales = np.sqrt(np.sum(deviations**2, axis=0) / max(n_draws - 1, 1))
    moved = scales > 0.0
    if np.sum(moved) >= n_draws:
        return None
    scales[~moved] = 1.0
    standard = deviations[:, moved] / scales[moved]
    eigenvalues, vectors = linalg.eigh(standard.T @ standard / (n_draws - 1))
    low, high = noise_interval(n_draws, int(np.sum(moved)))
    kept = (eigenvalues > high) | (eigenvalues < low)
    if not np.any(kept):
        return None
    excess = np.maximum(eigenvalues[kept], SMALLEST_EIGENVALUE) - 1.0
    correlation = np.eye(dim)
    correlation[np.ix_(moved, moved)] += (vectors[:, kept] * excess) @ vectors[:, kept].T
    return scales[:, None] * correlation * scales[None, :]


def correlation_condition(covariance: np.ndarray) -> float:
    """The condition number of ``covariance``'s correlation matrix.

    What a diagonal metric leaves of a Gaussian posterior's spread of scales: NUTS's leapfrog
    steps per trajectory grow about as its square root.
    """
    scales = np.sqrt(np.diag(covariance))
    eigenvalues = linalg.eigvalsh(covariance / np.outer(scales, scales))
    return float(eigenvalues[-1] / eigenvalues[0])

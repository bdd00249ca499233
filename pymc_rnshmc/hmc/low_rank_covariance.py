"""A metric's covariance from a chain's draws, with only the correlations beyond sampling noise.

A dense sample covariance from a few hundred tuning draws in tens of dimensions is mostly noise:
even for independent coordinates, the eigenvalues of a sample correlation matrix of ``n`` draws
in ``d`` dimensions spread over the Marchenko-Pastur interval ``[(1 - sqrt(d/n))^2,
(1 + sqrt(d/n))^2]`` [1]_, so a metric built from it would distort every direction by up to that
factor. Here the correlation matrix keeps only its eigen-directions outside that interval (the
spiked-covariance view of what can be told from noise [2]_) and is the identity in the others:
``C = S (I + U (L - I) U^T) S``, with ``S`` the draws' standard deviations and ``(U, L)`` the kept
eigenvectors and their variances. Where no direction stands out, there is nothing to gain over a
diagonal metric, and :func:`covariance_beyond_noise` says so with ``None``. Like the low-rank mass
matrix of nutpie, it corrects only the few directions where a diagonal metric is wrong; unlike
nutpie's, it uses the draws alone (not their gradients).

The variance along a kept direction is not its sample eigenvalue but the variance of draws that
did not choose it [3]_: the draws are split in ``FOLDS`` folds of interleaved blocks, the
directions found in all folds but one are measured on the one left out, and the folds' estimates
are averaged. A sample eigenvalue outside the interval can still be noise, because a chain's
draws are autocorrelated and not Gaussian: on a non-centred hierarchical regression with 500
groups (d = 1507), 4000 draws of PyMC's NUTS had 204 sample eigenvalues under the interval's
lower edge (0.005 against 0.015), whose variances on held-out draws were 0.78-3.4 (noise), and a
metric from its first 1700 draws with the sample eigenvalues made NUTS take 127-132 leapfrog
steps a draw against 15 with the diagonal metric (the held-out estimate keeps the diagonal one:
correlation condition numbers 3.0 and 6.7 from 2500 and 4000 draws). On the hierarchical
logistic regression with 50 groups (d = 56, 800 draws of PyMC's NUTS) NUTS took 8.7 leapfrog
steps a draw with the held-out estimate, 9.9 with the sample eigenvalues, 22.4 with the
diagonal metric. On Gaussians with a known covariance (one strong pair, three factors, blocks of
correlated coordinates, d = 30-200, 400-2000 draws, 5 seeds), the condition number that the
estimate leaves (median) was 1.5-8.4 with five folds, 1.5-14.5 with the sample eigenvalues and
1.6-81 with two halves; on 400 autocorrelated draws (AR(1), 0.9) of 56 independent coordinates,
3.9 against 49 with the sample eigenvalues (the diagonal metric: 2.7). Five eigendecompositions
cost about 3.6 s at d = 1507.

numpy and scipy only; written here because neither PyMC nor SciPy has such an estimator.

References
----------
.. [1] Marchenko, V. A., & Pastur, L. A. (1967). Distribution of eigenvalues for some sets of
   random matrices. Mathematics of the USSR-Sbornik, 1(4), 457-483.
.. [2] Johnstone, I. M. (2001). On the distribution of the largest eigenvalue in principal
   components analysis. The Annals of Statistics, 29(2), 295-327.
.. [3] Lam, C. (2016). Nonparametric eigenvalue-regularized precision or covariance matrix
   estimator. The Annals of Statistics, 44(3), 928-953.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

__all__ = ["correlation_condition", "covariance_beyond_noise", "noise_interval"]

SMALLEST_EIGENVALUE = 1e-8
"""Held-out variances along kept directions are floored here (a coordinate that is a function
of others would make the covariance singular)."""

FOLDS = 5
"""The draws are split in this many folds; each fold's variances check the others' directions."""
FOLD_BLOCKS = 4
"""Each fold is this many blocks of consecutive draws, interleaved with the other folds' (so that
a draw and its autocorrelated neighbours mostly fall in one fold, while each fold still spans
the chain's history). Blocks shorter than the autocorrelation time let noise through: 250 draws
of independent AR(1) coordinates (autocorrelation 0.97, d = 106) gave correlation condition
numbers up to 172 (20 seeds; 13 with one contiguous block per fold). One block per fold was
tried and taken back: on the hierarchical logistic regressions with 20, 50 and 100 groups (two
seeds each, ``economy_heldout_metric_contiguous``) the ESS per second of the call had a
geometric mean of 4.6 against 5.9 with four blocks (4.5 with the sample eigenvalues), losing
on 20 groups (2.9 and 1.9 against 5.8 and 5.2), where a chain's early draws differ from its
later ones. A block length chosen from the chain's autocorrelation time is not tried yet."""


def _folds(n_draws: int) -> np.ndarray:
    """The fold of each of ``n_draws`` consecutive draws."""
    return (np.arange(n_draws) * FOLDS * FOLD_BLOCKS // max(n_draws, 1)) % FOLDS


def noise_interval(n_draws: int, dim: int) -> tuple[float, float]:
    """Where the eigenvalues of the correlation matrix of ``n_draws`` independent draws fall."""
    ratio = np.sqrt(dim / n_draws)
    return max(1.0 - ratio, 0.0) ** 2, (1.0 + ratio) ** 2


def covariance_beyond_noise(draws: np.ndarray) -> np.ndarray | None:
    """The draws' covariance with the correlations that stand out of noise (``None``: none do).

    ``draws``: one chain's positions ``(n, d)``. A coordinate that never moved gets unit
    variance and no correlation. ``None`` also where the draws are not all finite, where a
    fold has fewer than two draws, or where the draws outside a fold are not more than the
    coordinates that moved (their correlation matrix is then singular, and the noise interval
    has no lower edge).

    The interval is that of independent draws. A chain's draws are autocorrelated, so fewer
    count and noise spreads wider: in 56 dimensions, 400 draws of independent AR(1) coordinates
    with autocorrelation 0.9 kept noise directions in 20 of 20 seeds, with correlation condition
    numbers up to 60 when the directions' variances were their sample eigenvalues. Their
    variances on held-out draws (:func:`_held_out_spikes`) bring such directions back to about
    1, and the correlation matrix is rescaled to a unit diagonal: the marginal variances are
    the draws' own.
    """
    draws = np.asarray(draws, dtype=float)
    n_draws, dim = draws.shape
    if not np.all(np.isfinite(draws)):
        return None
    deviations = draws - draws.mean(axis=0)
    scales = np.sqrt(np.sum(deviations**2, axis=0) / max(n_draws - 1, 1))
    moved = scales > 0.0
    folds = _folds(n_draws)
    sizes = np.bincount(folds, minlength=FOLDS)
    if sizes.min() < 2 or np.sum(moved) >= n_draws - sizes.max():
        return None
    scales[~moved] = 1.0
    standard = deviations[:, moved] / scales[moved]
    spikes = [_held_out_spikes(standard[folds != k], standard[folds == k]) for k in range(FOLDS)]
    if not any(kept for _, kept in spikes):
        return None
    correlation = np.eye(dim)
    correlation[np.ix_(moved, moved)] += sum(excess for excess, _ in spikes) / FOLDS
    unit = np.sqrt(np.diag(correlation))  # a correlation matrix again: the draws' own scales
    return (scales / unit)[:, None] * correlation * (scales / unit)[None, :]


def _held_out_spikes(fit: np.ndarray, check: np.ndarray) -> tuple[np.ndarray, int]:
    """``U (L - I) U^T`` and how many directions: ``fit``'s correlations beyond noise.

    ``U``: the eigenvectors of ``fit``'s covariance whose eigenvalues fall outside the noise
    interval; ``L``: the variances of ``check`` along them (floored at ``SMALLEST_EIGENVALUE``).
    Both are draws ``(n, d)`` standardized by the whole chain's scales, so each covariance is
    close to a correlation matrix.
    """
    fit, check = fit - fit.mean(axis=0), check - check.mean(axis=0)
    eigenvalues, vectors = linalg.eigh(fit.T @ fit / (len(fit) - 1))
    low, high = noise_interval(len(fit), fit.shape[1])
    kept = vectors[:, (eigenvalues > high) | (eigenvalues < low)]
    variances = np.sum((check @ kept) ** 2, axis=0) / (len(check) - 1)
    excess = np.maximum(variances, SMALLEST_EIGENVALUE) - 1.0
    return (kept * excess) @ kept.T, kept.shape[1]


def correlation_condition(covariance: np.ndarray) -> float:
    """The condition number of ``covariance``'s correlation matrix.

    What a diagonal metric leaves of a Gaussian posterior's spread of scales: NUTS's leapfrog
    steps per trajectory grow about as its square root.
    """
    scales = np.sqrt(np.diag(covariance))
    eigenvalues = linalg.eigvalsh(covariance / np.outer(scales, scales))
    return float(eigenvalues[-1] / eigenvalues[0])

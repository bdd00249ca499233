"""From a fitted surrogate and the exploration record to the surrogate dynamics' settings.

numpy only: the step passes in what it read from its exact explorer (PyMC's adapted metric).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np
from scipy import linalg

from pymc_rnshmc.hmc import trajectory_tuning
from pymc_rnshmc.hmc.metrics import DiagonalMetric, dense_metric_from_gradients

__all__ = [
    "candidate_metrics",
    "choose_trajectory",
    "covariance_estimate",
    "held_out_quarter_period",
    "quarter_period",
    "rows",
]

N_SIMULATED_CHAINS = 16
STEP_COST = 0.01
"""Cost of a surrogate leapfrog step relative to a draw's exact logp: the expensive-model regime
this package is for (a network gradient takes tens of microseconds, an expensive logp
milliseconds). It only breaks near-ties towards shorter trajectories."""
QUARTER_PERIOD = np.pi / 2
"""A quarter oscillation of a Gaussian in a metric that whitens it."""
SCAN_STEPS = 4
"""The first choice scans integration times up to 2^(4/4) = 2 times shorter and longer than the
best metric's quarter period (and longer while the longest scores best)."""
SCAN_STEPS_REFIT = 2
"""A refit scans up to 2^(2/4) times shorter and longer."""
HELD_OUT_DIRECTIONS = 3
"""The slowest directions of one half of the draws whose spread the other half measures."""
HALF_DRAWS = 8
"""Fewest draws in each half for the held-out estimate; with fewer, the draws' own spread."""


def candidate_metrics(
    variances: np.ndarray | None, positions: np.ndarray, gradients: np.ndarray
) -> Iterator:
    """Candidate metrics of the surrogate dynamics, each made when it is asked for.

    The explorer's adapted diagonal metric (``variances``, if any) and a dense one from the
    gradients; the positions' variances if neither is usable. The dense metric is not made
    unless the budget lets a second metric be scored: at d = 1507 it took 2 s.
    """
    usable = variances is not None and np.all(np.isfinite(variances)) and np.all(variances > 0)
    if usable:
        yield DiagonalMetric(variances)
    try:
        dense = dense_metric_from_gradients(positions, gradients)
    except (np.linalg.LinAlgError, ValueError):
        dense = None
    if dense is not None:
        yield dense
    elif not usable:
        variances = np.var(positions, axis=0)
        yield DiagonalMetric(np.where(variances > 0, variances, 1.0))


def quarter_period(metric, covariance: np.ndarray) -> float:
    """Integration time of a quarter oscillation of the slowest direction under ``metric``.

    For a Gaussian with ``covariance``, a direction with variance ``v`` in units of the metric's
    inverse mass oscillates with period ``2 pi sqrt(v)``; the slowest direction has the largest
    generalized eigenvalue of ``(covariance, M^-1)``. A metric that whitens the Gaussian gives
    ``pi / 2``.
    """
    inverse_mass = np.asarray(metric.velocity(np.eye(covariance.shape[0])))
    try:
        largest = linalg.eigh(covariance, inverse_mass, eigvals_only=True)[-1]
    except (np.linalg.LinAlgError, ValueError):
        return QUARTER_PERIOD
    if not (np.isfinite(largest) and largest > 0):
        return QUARTER_PERIOD
    return float(QUARTER_PERIOD * np.sqrt(largest))


def held_out_quarter_period(metric, positions: np.ndarray) -> float:
    """:func:`quarter_period` of the slowest direction the draws show beyond their own noise.

    The largest eigenvalue of ``n`` draws' covariance in ``d`` dimensions, in the units of a
    metric that whitens the posterior, is not 1 but about ``(1 + sqrt(d / n))^2`` (the edge of the
    Marchenko-Pastur law), and more for autocorrelated draws: the quarter period from it was 2.2
    times the metric's own on the wide-models logistic regression at d = 80 (150 draws) and 2.8
    times at d = 160 (180 draws), where the dense metric from the gradients nearly whitens the
    posterior, so the scan of path lengths around it ended at or before the lengths whose ESS of
    squares was best. Here the slowest directions are found in the first half of the draws and
    their spread is measured in the second half, and the other way round: directions that only
    noise made slow show an ordinary spread in the other half (0.97-1.16 in the metric's units on
    those draws, against 3.1-7.7 in-sample), while a direction that is truly slow stays slow in
    both. The halves are the first and the last draws, so that autocorrelated neighbours do not
    fall into both. Each half is measured about its own mean, so a direction the chain only
    drifted along between the halves reads short (a direction of variance 9 among 4, 200 draws
    of an AR(1) chain with coefficient 0.99: 1.8, in-sample 3.3): the scan of lengths then
    starts short, which it corrects, since it goes on upwards while the longest length scores
    best, but only twice shorter downwards. Where a half has fewer than ``HALF_DRAWS`` draws, a
    draw is not finite, or the metric's inverse mass matrix has no Cholesky factor, it is
    :func:`quarter_period` of :func:`covariance_estimate`.

    Parameters
    ----------
    metric : Metric
        The candidate metric (its ``velocity`` of the identity is the inverse mass matrix).
    positions : ndarray, shape (n, d)
        The training draws, in the order the chain made them.

    Returns
    -------
    float
        ``pi / 2`` times the square root of the held-out spread of the slowest direction.
    """
    positions = np.asarray(positions, dtype=float)
    if positions.ndim == 1:
        positions = positions[:, None]
    whitened = _whitened(metric, positions)
    if whitened is None:
        return quarter_period(metric, covariance_estimate(positions))
    half = positions.shape[0] // 2
    first, second = whitened[:half], whitened[half:]
    try:
        spread = np.mean([_held_out_spread(first, second), _held_out_spread(second, first)])
    except (np.linalg.LinAlgError, ValueError):
        return quarter_period(metric, covariance_estimate(positions))
    if not (np.isfinite(spread) and spread > 0):
        return QUARTER_PERIOD
    return float(QUARTER_PERIOD * np.sqrt(spread))


def _whitened(metric, positions: np.ndarray) -> np.ndarray | None:
    """``L^-1 (x - mean)`` with ``L L^T`` the metric's inverse mass (``None``: not possible)."""
    if positions.shape[0] // 2 < HALF_DRAWS or not np.all(np.isfinite(positions)):
        return None
    inverse_mass = np.asarray(metric.velocity(np.eye(positions.shape[1])), dtype=float)
    try:
        factor = linalg.cholesky(inverse_mass, lower=True)
    except (np.linalg.LinAlgError, ValueError):
        return None
    centred = (positions - positions.mean(axis=0)).T
    return linalg.solve_triangular(factor, centred, lower=True).T


def _held_out_spread(finding: np.ndarray, measuring: np.ndarray) -> float:
    """The largest variance of ``measuring`` along the slowest directions of ``finding``."""
    _, vectors = linalg.eigh(np.atleast_2d(np.cov(finding, rowvar=False)))
    slowest = vectors[:, ::-1][:, :HELD_OUT_DIRECTIONS]
    spread = np.atleast_2d(np.cov(measuring, rowvar=False))
    return float(np.max(np.einsum("ij,ik,kj->j", slowest, spread, slowest)))


def covariance_estimate(positions: np.ndarray) -> np.ndarray:
    """The posterior covariance the candidate lengths refer to: the training positions'.

    Not the dense metric's inverse average Hessian, which on a curved posterior (the banana)
    is far wider than the draws along its flat direction and made the quarter period of the
    explorer's diagonal metric 5.6 where the draws' covariance gives about 1.6; the longer path
    carried one chain into a tail the surrogate never learned, where it stayed.

    The jitter is relative to each variance: one relative to their average widened the narrow
    direction of ``kilpisjarvi`` (variances 6e11 apart) 23-fold, and the quarter period with it,
    so its surrogate trajectories took 150-900 leapfrog steps a draw instead of four.
    """
    covariance = np.atleast_2d(np.cov(positions, rowvar=False))
    return covariance + 1e-10 * np.diag(np.diag(covariance))


def rows(function):
    """Evaluate a surrogate method on rows ``(n, d)``, looping if it only takes one point."""

    def evaluate(points: np.ndarray) -> np.ndarray:
        values = np.asarray(function(points))
        if values.shape[:1] == points.shape[:1]:
            return values
        return np.stack([np.asarray(function(point)) for point in points])

    return evaluate


def choose_trajectory(
    surrogate,
    explorer_variances: np.ndarray | None,
    positions: np.ndarray,
    gradients: np.ndarray,
    step_size: float,
    target_accept: float,
    max_steps: int,
    rng: np.random.Generator,
    path_length: float | None = None,
    simulated_draws: int = 100,
    extra_metrics: tuple = (),
    refit: bool = False,
    scan_lengths: bool = True,
    out_of_time: Callable[[], bool] | None = None,
) -> trajectory_tuning.TrajectoryChoice:
    """Pick the metric, step size and path length of the surrogate dynamics by simulation.

    ``explorer_variances`` is the diagonal metric the exact explorer adapted (``None`` if its
    metric is not diagonal); ``positions`` and ``gradients`` are the training draws and their
    exact ``grad U``; ``step_size`` is the first guess of the step-size search (NUTS's adapted
    one). Every candidate metric is compared at its own quarter period
    (:func:`held_out_quarter_period`);
    the best one's integration times are then scanned around it, in steps of 2^(1/4): four
    steps each way, or two for a ``refit``, whose previous choice searched widely already. A
    given ``path_length`` is the only candidate length. ``simulated_draws`` is the length of
    each simulated chain per candidate; ``extra_metrics`` are candidates besides PyMC's and the
    one from the gradients. Without ``scan_lengths`` only the metrics are compared (for
    dynamics that choose each trajectory's length themselves). ``out_of_time()``, if given,
    ends the comparison early, with the candidates scored so far (at least the first metric).
    """
    metrics = itertools.chain(
        candidate_metrics(explorer_variances, positions, gradients), extra_metrics
    )
    if path_length is None:
        steps = (SCAN_STEPS_REFIT if refit else SCAN_STEPS) if scan_lengths else 0
        ratios = 2.0 ** (np.arange(-steps, steps + 1) / 4)
        paired = ((metric, held_out_quarter_period(metric, positions)) for metric in metrics)
    else:
        ratios = np.ones(1)
        paired = ((metric, path_length) for metric in metrics)
    chosen = np.linspace(0, positions.shape[0] - 1, min(N_SIMULATED_CHAINS, positions.shape[0]))
    starts = positions[chosen.round().astype(int)]
    return trajectory_tuning.tune(
        potential_fn=rows(surrogate.potential),
        gradient_fn=rows(surrogate.gradient),
        metrics=paired,
        length_ratios=ratios,
        initial_step_size=step_size,
        starts=starts,
        cost_per_step=STEP_COST,
        rng=rng,
        target_accept=target_accept,
        max_steps=max_steps,
        n_draws=simulated_draws,
        out_of_time=out_of_time,
    )

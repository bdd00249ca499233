"""From a fitted surrogate and the exploration record to the surrogate dynamics' settings.

numpy only: the step passes in what it read from its exact explorer (PyMC's adapted metric).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import linalg

from pymc_rnshmc.hmc import trajectory_tuning
from pymc_rnshmc.hmc.metrics import DiagonalMetric, dense_metric_from_gradients

__all__ = [
    "candidate_metrics",
    "choose_trajectory",
    "covariance_estimate",
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


def candidate_metrics(
    variances: np.ndarray | None, positions: np.ndarray, gradients: np.ndarray
) -> list:
    """Candidate metrics of the surrogate dynamics.

    The explorer's adapted diagonal metric (``variances``, if any) and a dense one from the
    gradients; the positions' variances if neither is usable.
    """
    metrics = []
    if variances is not None and np.all(np.isfinite(variances)) and np.all(variances > 0):
        metrics.append(DiagonalMetric(variances))
    try:
        metrics.append(dense_metric_from_gradients(positions, gradients))
    except (np.linalg.LinAlgError, ValueError):
        pass
    if not metrics:
        variances = np.var(positions, axis=0)
        metrics.append(DiagonalMetric(np.where(variances > 0, variances, 1.0)))
    return metrics


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
    one). Every candidate metric is compared at its own quarter period (:func:`quarter_period`);
    the best one's integration times are then scanned around it, in steps of 2^(1/4): four
    steps each way, or two for a ``refit``, whose previous choice searched widely already. A
    given ``path_length`` is the only candidate length. ``simulated_draws`` is the length of
    each simulated chain per candidate; ``extra_metrics`` are candidates besides PyMC's and the
    one from the gradients. Without ``scan_lengths`` only the metrics are compared (for
    dynamics that choose each trajectory's length themselves). ``out_of_time()``, if given,
    ends the comparison early, with the candidates scored so far (at least the first metric).
    """
    metrics = candidate_metrics(explorer_variances, positions, gradients) + list(extra_metrics)
    if path_length is None:
        covariance = covariance_estimate(positions)
        metric_lengths = [quarter_period(metric, covariance) for metric in metrics]
        steps = (SCAN_STEPS_REFIT if refit else SCAN_STEPS) if scan_lengths else 0
        ratios = 2.0 ** (np.arange(-steps, steps + 1) / 4)
    else:
        metric_lengths, ratios = [path_length] * len(metrics), np.ones(1)
    chosen = np.linspace(0, positions.shape[0] - 1, min(N_SIMULATED_CHAINS, positions.shape[0]))
    starts = positions[chosen.round().astype(int)]
    return trajectory_tuning.tune(
        potential_fn=rows(surrogate.potential),
        gradient_fn=rows(surrogate.gradient),
        metrics=metrics,
        metric_lengths=metric_lengths,
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

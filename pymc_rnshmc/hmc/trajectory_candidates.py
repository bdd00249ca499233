"""From a fitted surrogate and the exploration record to the surrogate dynamics' settings.

numpy only: the step passes in what it read from its exact explorer (PyMC's adapted metric).
"""

from __future__ import annotations

import numpy as np

from pymc_rnshmc.hmc import trajectory_tuning
from pymc_rnshmc.hmc.metrics import DiagonalMetric, dense_metric_from_gradients

__all__ = [
    "candidate_metrics",
    "candidate_path_lengths",
    "choose_trajectory",
    "lengths_around",
    "rows",
]

N_SIMULATED_CHAINS = 16
STEP_COST = 0.01
"""Cost of a surrogate leapfrog step relative to a draw's exact logp: the expensive-model regime
this package is for (a network gradient takes tens of microseconds, an expensive logp
milliseconds). It only breaks near-ties towards shorter trajectories."""
REFERENCE_INDEX = 4
"""The metrics are compared at this candidate path length: NUTS's mean jump (the candidates
start at half of it, in steps of 2^(1/4)), or the middle one when there are fewer."""


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


def candidate_path_lengths(jumps: np.ndarray, tree_lengths: np.ndarray, floor: float) -> np.ndarray:
    """Candidate integration times around those NUTS used.

    From half its mean jump to twice its mean trajectory (or four times the jump), in steps
    of 2^(1/4).
    """
    jump = max(float(np.mean(jumps)) if jumps.size else floor, floor)
    tree = max(float(np.mean(tree_lengths)) if tree_lengths.size else jump, jump)
    longest = max(2.0 * tree, 4.0 * jump)
    count = int(np.floor(4 * np.log2(longest / (0.5 * jump)))) + 1
    return 0.5 * jump * 2.0 ** (np.arange(min(max(count, 1), 16)) / 4)


def rows(function):
    """Evaluate a surrogate method on rows ``(n, d)``, looping if it only takes one point."""

    def evaluate(points: np.ndarray) -> np.ndarray:
        values = np.asarray(function(points))
        if values.shape[:1] == points.shape[:1]:
            return values
        return np.stack([np.asarray(function(point)) for point in points])

    return evaluate


def lengths_around(path_length: float, below: int = 2, above: int = 2) -> np.ndarray:
    """Candidate integration times around a previous choice, in steps of 2^(1/4)."""
    return path_length * 2.0 ** (np.arange(-below, above + 1) / 4)


def choose_trajectory(
    surrogate,
    explorer_variances: np.ndarray | None,
    positions: np.ndarray,
    gradients: np.ndarray,
    jumps: np.ndarray,
    tree_lengths: np.ndarray,
    step_size: float,
    target_accept: float,
    max_steps: int,
    rng: np.random.Generator,
    path_length: float | None = None,
    shortest_jump: float = 0.0,
    simulated_draws: int = 100,
    extra_metrics: tuple = (),
    previous: trajectory_tuning.TrajectoryCandidate | None = None,
) -> trajectory_tuning.TrajectoryChoice:
    """Pick the metric, step size and path length of the surrogate dynamics by simulation.

    ``explorer_variances`` is the diagonal metric the exact explorer adapted (``None`` if its
    metric is not diagonal); ``positions`` and ``gradients`` are the training draws and their
    exact ``grad U``;
    ``jumps`` and ``tree_lengths`` are the NUTS exploration's integration times to the chosen
    draw and of the whole trajectory; ``step_size`` is NUTS's adapted step size. A given
    ``path_length`` is used as the only candidate. ``shortest_jump`` is a floor on the NUTS
    jump the candidates are built around, for explorations too short to have adapted the
    metric their integration times refer to. ``simulated_draws`` is the length of each
    simulated chain per candidate; ``extra_metrics`` are candidates besides PyMC's and the one
    from the gradients. With a ``previous`` choice (a refit), the path lengths are those around
    it, extended upwards while the longest scores best, and the metrics are compared there.
    """
    metrics = candidate_metrics(explorer_variances, positions, gradients) + list(extra_metrics)
    if path_length is not None:
        lengths = np.array([path_length])
    elif previous is not None:
        lengths = lengths_around(previous.path_length)
    else:
        lengths = candidate_path_lengths(jumps, tree_lengths, max(step_size, shortest_jump))
    reference = lengths[min(len(lengths) // 2, REFERENCE_INDEX)]
    chosen = np.linspace(0, positions.shape[0] - 1, min(N_SIMULATED_CHAINS, positions.shape[0]))
    starts = positions[chosen.round().astype(int)]
    return trajectory_tuning.tune(
        potential_fn=rows(surrogate.potential),
        gradient_fn=rows(surrogate.gradient),
        metrics=metrics,
        initial_step_size=step_size if previous is None else previous.step_size,
        path_lengths=lengths,
        starts=starts,
        cost_per_step=STEP_COST,
        rng=rng,
        target_accept=target_accept,
        max_steps=max_steps,
        n_draws=simulated_draws,
        reference_length=float(reference),
    )

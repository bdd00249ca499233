"""Choose the metric, step size and path length of surrogate HMC by simulating on the surrogate.

Once a surrogate is fitted, its dynamics cost microseconds per step, so candidate trajectory
settings can be compared on *simulated* surrogate-HMC chains (Metropolis on the surrogate
Hamiltonian, many chains in one batch) before a single exact evaluation is spent on them. The
candidate metrics are compared first, each at its own natural integration time (a quarter
oscillation of the posterior's slowest direction under that metric: a time that suits one metric
can be far too short or long for another); the integration times around the winner's are then
simulated with that metric only. Each simulation sets its step size to reach a target acceptance
and is scored by the minimum over coordinates of the ESS per draw of
``q`` (means) and of ``(q - mean)^2`` (spread and tails). The winner has the most ESS of ``q`` per
unit cost of a real draw (one exact logp plus a small charge per leapfrog step on the surrogate,
so ESS per exact evaluation with a preference for shorter trajectories) among the
candidates whose ESS of squares is at least half the best one. Means alone favour antithetic
trajectories (half an oscillation) that mix second moments and tails badly; the constraint
keeps NUTS-like antithetic gains for means without giving up the tails. The ESS per draw uses
Geyer's initial positive sequence,
vectorized over coordinates, because the scoring runs inside the fit on hundreds of coordinates
and many candidates, which per-variable ArviZ calls would make slow.

This is tuning only: the chosen settings are then used, fixed, by a chain whose Metropolis test
uses the exact log density.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

SCAN_STOP = 0.8
"""A scan direction stops at the first length scoring below this share of the best so far."""

MAX_SEARCH_STEPS = 1024
"""The step-size search stops where a trajectory would need more leapfrog steps than this."""

SOLE_CANDIDATE_DRAWS = 20
"""Simulated draws per chain of a first candidate scored when the budget is already spent: it
will be the only one, so its simulation chooses nothing and only reports its acceptance and ESS
(in the fit's log line). On a hierarchical model with 1507 parameters, whose fit alone spent the
setup budget, the usual 100 draws took 5 of the call's 35 s."""

__all__ = ["TrajectoryCandidate", "TrajectoryChoice", "effective_sample_size_per_draw", "tune"]


@dataclass(frozen=True)
class TrajectoryCandidate:
    """Score of one simulated setting (``metric`` is the metric object itself)."""

    metric: Any
    step_size: float
    path_length: float
    acceptance: float
    ess_mean: float
    ess_square: float
    cost_per_draw: float

    @property
    def mean_efficiency(self) -> float:
        """ESS of ``q`` per unit cost of a real draw."""
        return float(max(self.ess_mean, 0.0) / self.cost_per_draw)

    @property
    def efficiency(self) -> float:
        """Geometric mean of the two ESS per draw, per unit cost (steers the scan only)."""
        quality = np.sqrt(max(self.ess_mean, 0.0) * max(self.ess_square, 0.0))
        return float(quality / self.cost_per_draw)


@dataclass(frozen=True)
class TrajectoryChoice:
    """The best candidate and every candidate scored."""

    best: TrajectoryCandidate
    candidates: list[TrajectoryCandidate] = field(default_factory=list)

    @classmethod
    def of(cls, candidates: list[TrajectoryCandidate]) -> TrajectoryChoice:
        """The choice among scored candidates.

        The most ESS of ``q`` per unit cost among those whose ESS of ``(q - mean)^2`` per draw
        is at least half the best such value.
        """
        best_square = max(c.ess_square for c in candidates)
        eligible = [c for c in candidates if c.ess_square >= 0.5 * best_square]
        return cls(max(eligible, key=lambda c: c.mean_efficiency), candidates)


def effective_sample_size_per_draw(
    samples: np.ndarray, mean: np.ndarray | None = None, variance: np.ndarray | None = None
) -> np.ndarray:
    """ESS divided by the number of draws for every column of ``samples (chains, draws, p)``.

    Autocorrelations are averaged over chains (around the pooled mean) and summed with Geyer's
    initial positive sequence, so antithetic chains can exceed one. ``mean`` and ``variance``
    (per column) replace the samples' own as the reference of the autocorrelations: a short
    window of a longer run, measured against the run's moments, shows slow mixing that its
    own moments hide.
    """
    n_chains, n_draws, _ = samples.shape
    centred = samples - (samples.mean(axis=(0, 1)) if mean is None else mean)
    if variance is None:
        variance = np.mean(centred**2, axis=(0, 1))
    size = 1 << int(np.ceil(np.log2(2 * n_draws)))
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    autocovariance = np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=1)[:, :n_draws]
    autocovariance = autocovariance.mean(axis=0) / n_draws
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = autocovariance / variance
    rho = np.nan_to_num(rho, nan=0.0)
    n_pairs = (n_draws - 1) // 2
    pairs = rho[: 2 * n_pairs].reshape(n_pairs, 2, -1).sum(axis=1)
    positive = np.cumprod(pairs > 0, axis=0).astype(bool)
    tau = -1.0 + 2.0 * np.sum(np.where(positive, pairs, 0.0), axis=0)
    return 1.0 / np.maximum(tau, 1.0 / np.log10(max(n_chains * n_draws, 10)))


def _batched_leapfrog(position, momentum, gradient, step_size, n_steps, gradient_fn, metric):
    momentum = momentum - 0.5 * step_size * gradient
    for step in range(n_steps):
        position = position + step_size * metric.velocity(momentum)
        gradient = gradient_fn(position)
        weight = 0.5 if step == n_steps - 1 else 1.0
        momentum = momentum - weight * step_size * gradient
    return position, momentum, gradient


def _simulate(potential_fn, gradient_fn, metric, starts, step_size, n_steps_fn, n_draws, rng):
    """Run surrogate-HMC chains from ``starts``.

    Returns the draws ``(chains, n_draws, d)`` and the mean acceptance probability.
    """
    position = starts.copy()
    potential = potential_fn(position)
    gradient = gradient_fn(position)
    draws = np.empty((n_draws, *position.shape))
    total_accept = 0.0
    with np.errstate(all="ignore"):
        for draw in range(n_draws):
            momentum = metric.random(rng, position.shape[0])
            start_energy = potential + metric.energy(momentum)
            proposal, end_momentum, end_gradient = _batched_leapfrog(
                position, momentum, gradient, step_size, n_steps_fn(), gradient_fn, metric
            )
            end_potential = potential_fn(proposal)
            change = end_potential + metric.energy(end_momentum) - start_energy
            change = np.where(np.isfinite(change), change, np.inf)
            finite = np.all(np.isfinite(end_gradient), axis=1)
            accept = np.where(finite, np.exp(np.minimum(0.0, -change)), 0.0)
            total_accept += float(accept.mean())
            moved = rng.random(accept.shape) < accept
            position = np.where(moved[:, None], proposal, position)
            potential = np.where(moved, end_potential, potential)
            gradient = np.where(moved[:, None], end_gradient, gradient)
            draws[draw] = position
    return np.swapaxes(draws, 0, 1), total_accept / n_draws


def _find_step_size(potential_fn, gradient_fn, metric, starts, initial, path_length, target, rng):
    """Step size whose surrogate acceptance is near ``target``.

    Robbins-Monro on the log step size with all chains moving, as in warm-up; the answer is
    the average of the last half of the iterates. The first guess is brought within
    ``[path_length / MAX_SEARCH_STEPS, path_length]``, one to ``MAX_SEARCH_STEPS`` steps a
    trajectory: from a guess of 1e-42 (a collapsed dual averaging, on posteriordb's ridge
    ``kilpisjarvi``) the search had stopped at once and chosen trajectories that did not move.
    """
    log_step, iterates = np.log(np.clip(initial, path_length / MAX_SEARCH_STEPS, path_length)), []
    position = starts
    for iteration in range(20):
        step_size = float(np.exp(log_step))
        n_steps = max(1, round(path_length / step_size))
        if n_steps > MAX_SEARCH_STEPS:
            break
        draws, acceptance = _simulate(
            potential_fn, gradient_fn, metric, position, step_size, lambda n=n_steps: n, 1, rng
        )
        position = draws[:, -1]
        log_step += 2.0 * (acceptance - target) / np.sqrt(iteration + 1.0)
        iterates.append(log_step)
    return float(np.exp(np.mean(iterates[-10:]))) if iterates else float(np.exp(log_step))


def _extended(path_lengths, candidates, max_extra: int = 8):
    """Yield ``path_lengths``, then longer ones while the longest of ``candidates`` scores best.

    The grid ratio is kept; a best score at the long end means the grid was too short.
    """
    yield from path_lengths
    if len(path_lengths) == 0:  # nothing to extend: a single given length
        return
    ratio = path_lengths[-1] / path_lengths[-2] if len(path_lengths) > 1 else 2.0**0.25
    for _ in range(max_extra):
        longest = max(candidates, key=lambda c: c.path_length)
        if max(candidates, key=lambda c: c.efficiency) is not longest:
            return
        yield longest.path_length * ratio


def tune(
    potential_fn: Callable[[np.ndarray], np.ndarray],
    gradient_fn: Callable[[np.ndarray], np.ndarray],
    metrics: Iterable[tuple[Any, float]],
    length_ratios: np.ndarray,
    initial_step_size: float,
    starts: np.ndarray,
    cost_per_step: float,
    rng: np.random.Generator,
    target_accept: float = 0.9,
    n_draws: int = 100,
    max_steps: int = 1024,
    out_of_time: Callable[[], bool] | None = None,
) -> TrajectoryChoice:
    """Pick a metric, then the path length, on simulated surrogate chains.

    Every metric is scored at its own length; the best-scoring candidate's length times
    ``length_ratios`` is then scanned outwards, with its metric only.
    The best candidate has the most ESS of ``q`` per unit cost among the candidates whose ESS
    of ``(q - mean)^2`` per draw is at least half the best such value.

    Parameters
    ----------
    potential_fn, gradient_fn : callable
        Surrogate potential and gradient, evaluated on rows ``(chains, d)``.
    metrics : iterable of (metric, float)
        Candidate metrics (:mod:`pymc_rnshmc.hmc.metrics`), each with the integration time it
        is compared at, in order of priority. Taken one at a time, as each is to be scored: a
        generator that builds them builds none the budget leaves unscored.
    length_ratios : ndarray
        Increasing multipliers of the best metric's length to scan (1 is its own); each
        direction stops after two candidates in a row score less than half the best so far,
        and the grid is extended while its longest scores best.
    initial_step_size : float
        Starting guess for the step-size search.
    starts : ndarray, shape (chains, d)
        Starting points, ideally approximate posterior draws.
    cost_per_step : float
        Cost of one surrogate leapfrog step, in units of the cost of a draw's exact logp
        evaluation. A constant, not a timing: measured times would make the sampler's choices,
        and so its draws, depend on machine load instead of only on the random seed.
    rng : numpy.random.Generator
    target_accept : float
        Acceptance the step size is chosen for.
    n_draws : int
        Simulated draws per chain and candidate.
    max_steps : int
        Largest number of leapfrog steps of a trajectory.
    out_of_time : callable, optional
        Checked before each metric and before each length of the scan: once it returns true,
        nothing more is simulated and the best of the candidates scored so far is chosen (so
        the order of ``metrics`` is their priority). The first metric is scored whatever it
        says, on ``SOLE_CANDIDATE_DRAWS`` simulated draws if it is already true.
    """
    simulate = partial(
        _score,
        potential_fn,
        gradient_fn,
        starts=starts,
        cost_per_step=cost_per_step,
        rng=rng,
        target_accept=target_accept,
        n_draws=n_draws,
        max_steps=max_steps,
    )
    out_of_time = out_of_time or (lambda: False)
    scored, sole = [], out_of_time()
    for attempt, (metric, length) in enumerate(metrics):
        candidate = simulate(
            metric,
            float(length),
            initial_step_size,
            shorten_to_fit=len(length_ratios) > 1,
            n_draws=min(n_draws, SOLE_CANDIDATE_DRAWS) if sole and attempt == 0 else n_draws,
        )
        if candidate is not None:
            scored.append(candidate)
        if scored and out_of_time():
            break
    if not scored:
        raise ValueError("No trajectory candidate could be simulated.")
    reference = max(scored, key=lambda c: c.efficiency)
    path_lengths = reference.path_length * np.asarray(length_ratios, dtype=float)
    candidates = scored + _scan_lengths(simulate, reference, path_lengths, out_of_time)
    return TrajectoryChoice.of(candidates)


def _scan_lengths(simulate, reference: TrajectoryCandidate, path_lengths, out_of_time) -> list:
    """Score the path lengths outwards from the reference's, with its metric.

    Upwards (extending the grid while its long end scores best), then downwards; each direction
    stops at the first candidate that scores less than ``SCAN_STOP`` of the best so far (until
    two in a row scored below half the best, the scan cost a quarter more setup on the logistic
    regression for the same choice), and both stop once ``out_of_time()``.
    """
    lengths = np.asarray(path_lengths, dtype=float)
    longer = list(lengths[lengths > reference.path_length * (1 + 1e-9)])
    shorter = list(lengths[lengths < reference.path_length * (1 - 1e-9)][::-1])
    candidates = [reference]
    for direction in (_extended(longer, candidates), shorter):
        step_size = reference.step_size
        for path_length in direction:
            if out_of_time():
                break
            candidate = simulate(reference.metric, path_length, step_size)
            if candidate is None:
                break
            step_size = candidate.step_size
            candidates.append(candidate)
            if candidate.efficiency < SCAN_STOP * max(c.efficiency for c in candidates):
                break
    return candidates[1:]


def _score(
    potential_fn,
    gradient_fn,
    metric,
    path_length: float,
    initial_step_size: float,
    *,
    starts,
    cost_per_step,
    rng,
    target_accept,
    n_draws,
    max_steps,
    shorten_to_fit=False,
) -> TrajectoryCandidate | None:
    """Simulate one (metric, path length), after finding its step size.

    A length that needs more than ``max_steps`` steps of that size gives ``None``, or with
    ``shorten_to_fit`` is shortened to ``max_steps`` steps.
    """
    step_size = _find_step_size(
        potential_fn,
        gradient_fn,
        metric,
        starts,
        initial_step_size,
        path_length,
        target_accept,
        rng,
    )
    centre = path_length / step_size
    if centre > max_steps and not shorten_to_fit:
        return None
    if centre > max_steps:
        path_length, centre = max_steps * step_size, max_steps
    low = min(max(1, round(0.8 * centre)), max_steps)
    high = min(max(low + 1, round(1.2 * centre)), max_steps)

    def n_steps():
        return int(rng.integers(low, high + 1))

    draws, acceptance = _simulate(
        potential_fn, gradient_fn, metric, starts, step_size, n_steps, n_draws, rng
    )
    ess = effective_sample_size_per_draw(draws)
    square = effective_sample_size_per_draw((draws - draws.mean(axis=(0, 1))) ** 2)
    return TrajectoryCandidate(
        metric=metric,
        step_size=step_size,
        path_length=float(path_length),
        acceptance=acceptance,
        ess_mean=float(np.min(ess)),
        ess_square=float(np.min(square)),
        cost_per_draw=1.0 + 0.5 * (low + high) * cost_per_step,
    )

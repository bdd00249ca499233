"""Choose the step size and path length of Riemannian surrogate dynamics by simulation on it.

As for the leapfrog (:mod:`pymc_rnshmc.hmc.trajectory_tuning`), candidate settings are compared
on simulated chains whose Metropolis test uses the surrogate Hamiltonian, so no exact
evaluation is spent. The metric is not a candidate here: it is the surrogate's own SoftAbs
curvature, under which a Gaussian posterior is whitened wherever the surrogate is right, so the
natural integration time is a quarter oscillation, ``pi / 2``; times around it are scanned. Each
candidate first finds its step size for the target acceptance (Robbins-Monro on the log step,
all chains moving), then is scored as the leapfrog's candidates are: the most ESS of ``q`` per
unit cost among those whose ESS of ``(q - mean)^2`` is at least half the best. A generalized
leapfrog step costs tens of surrogate gradients, so the simulation uses fewer chains and draws
than the leapfrog's and no reversibility check (tuning only: the chosen settings are then used
by a chain corrected exactly).
"""

from __future__ import annotations

import numpy as np

from pymc_rnshmc.hmc.generalized_leapfrog import SolverSettings
from pymc_rnshmc.hmc.leapfrog import jittered_n_steps
from pymc_rnshmc.hmc.riemannian_metric import SurrogateGeometry
from pymc_rnshmc.hmc.riemannian_proposal import riemannian_trajectory
from pymc_rnshmc.hmc.trajectory_tuning import (
    TrajectoryCandidate,
    TrajectoryChoice,
    effective_sample_size_per_draw,
)

__all__ = ["QUARTER_PERIOD", "choose_riemannian_trajectory", "path_length_candidates"]

QUARTER_PERIOD = np.pi / 2
STEP_COST = 0.05
"""Cost of a generalized leapfrog step relative to an exact logp (breaks near-ties only)."""
STEP_SEARCH_ITERATIONS = 12


def path_length_candidates(previous: float | None, given: float | None) -> tuple[float, ...]:
    """A given length alone; a refit's previous length alone; else ``pi / 2`` times 2^(-1..1/2)."""
    if given is not None:
        return (float(given),)
    if previous is not None:
        return (float(previous),)
    return tuple(QUARTER_PERIOD * 2.0 ** (np.arange(-2, 2) / 2))


def _transition(geometry, state, step_size, path_length, max_steps, settings, rng):
    """One Metropolis step on the surrogate Hamiltonian; ``state`` is ``(position, local)``."""
    position, local = state
    momentum = local.random(rng)
    n_steps = jittered_n_steps(rng, path_length, step_size, max_steps)
    result = riemannian_trajectory(
        geometry, position, local, momentum, step_size, n_steps, settings, False
    )
    end = result.end
    accept = 0.0
    if end.converged and not end.failed:
        change = end.local.potential + result.end_kinetic - local.potential - result.start_kinetic
        if np.isfinite(change):
            accept = float(np.exp(min(0.0, -change)))
    if rng.random() < accept:
        return (end.position, end.local), accept
    return state, accept


def _find_step_size(geometry, states, initial, path_length, target, max_steps, settings, rng):
    log_step, iterates = np.log(initial), []
    for iteration in range(STEP_SEARCH_ITERATIONS):
        step_size = float(np.exp(log_step))
        if path_length / step_size > max_steps:
            break
        accepts = []
        for index, state in enumerate(states):
            states[index], accept = _transition(
                geometry, state, step_size, path_length, max_steps, settings, rng
            )
            accepts.append(accept)
        log_step += 2.0 * (np.mean(accepts) - target) / np.sqrt(iteration + 1.0)
        iterates.append(log_step)
    return float(np.exp(np.mean(iterates[len(iterates) // 2 :]))) if iterates else float(initial)


def _score(geometry, starts, step_size, path_length, n_draws, max_steps, settings, rng):
    states = [(start, geometry.at(start)) for start in starts]
    draws = np.empty((len(states), n_draws, starts.shape[1]))
    total_accept = 0.0
    for draw in range(n_draws):
        for index, state in enumerate(states):
            states[index], accept = _transition(
                geometry, state, step_size, path_length, max_steps, settings, rng
            )
            draws[index, draw] = states[index][0]
            total_accept += accept
    ess = effective_sample_size_per_draw(draws)
    square = effective_sample_size_per_draw((draws - draws.mean(axis=(0, 1))) ** 2)
    return TrajectoryCandidate(
        metric=geometry,
        step_size=step_size,
        path_length=float(path_length),
        acceptance=total_accept / (n_draws * len(states)),
        ess_mean=float(np.min(ess)),
        ess_square=float(np.min(square)),
        cost_per_draw=1.0 + STEP_COST * path_length / step_size,
    )


def choose_riemannian_trajectory(
    geometry: SurrogateGeometry,
    starts: np.ndarray,
    initial_step_size: float,
    target_accept: float,
    path_lengths: tuple[float, ...],
    rng: np.random.Generator,
    settings: SolverSettings,
    n_draws: int = 40,
    max_steps: int = 1024,
) -> TrajectoryChoice:
    """Step size and path length for ``geometry``, on chains started at the rows of ``starts``.

    Every length of ``path_lengths`` is scored after finding its step size (starting from the
    previous length's, which is usually close).
    """
    candidates, step_size = [], float(initial_step_size)
    with np.errstate(all="ignore"):
        for path_length in path_lengths:
            states = [(start, geometry.at(start)) for start in starts]
            step_size = _find_step_size(
                geometry, states, step_size, path_length, target_accept, max_steps, settings, rng
            )
            if path_length / step_size > max_steps:
                continue
            candidates.append(
                _score(geometry, starts, step_size, path_length, n_draws, max_steps, settings, rng)
            )
    if not candidates:
        raise ValueError(
            "Every path length needs more than max_steps Riemannian steps on this surrogate."
        )
    return TrajectoryChoice.of(candidates)

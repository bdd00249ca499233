"""The generalized leapfrog of Riemannian HMC: fixed-point iterations and a reversibility check.

For ``H(q, p) = phi(q) + 1/2 p^T G(q)^-1 p`` with ``phi = U + 1/2 log det G`` one step of size
``e`` is (Leimkuhler & Reich 2004; Girolami & Calderhead 2011, eqs 16-18)::

    p' = p - e/2 [grad phi(q) - 1/2 nu(q, p')]                 (implicit in p')
    q'' = q + e/2 [G^-1(q) + G^-1(q'')] p'                      (implicit in q'')
    p'' = p' - e/2 [grad phi(q'') - 1/2 nu(q'', p')]            (explicit)

with ``nu(q, p)_i = (G^-1 p)^T dG/dq_i (G^-1 p)``. Solved exactly it is reversible and
volume-preserving; here the two implicit equations are solved by fixed-point iteration to a
relative tolerance. A step whose iteration does not converge ends the trajectory, which the
proposal then rejects. Rejecting non-convergence is only reversible if the reverse trajectory
would have failed too; the fixed-point solution may also not be unique for large steps. So the
proposal can integrate back from the end with the momentum flipped and reject unless that
converges and returns to the start (Zappa, Holmes-Cerfon & Goodman 2018 show that this check
is what makes a projection or implicit scheme's kernel reversible): :func:`returns_to_start`.

numpy only. Written by hand: the implicit integrators in SciPy solve ODEs to a tolerance, not a
symplectic map whose solves a Metropolis test can trust.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["SolverSettings", "Trajectory", "integrate", "returns_to_start"]


class SolverSettings(NamedTuple):
    """How the implicit equations are solved.

    Attributes
    ----------
    tolerance : float
        Iteration stops when no coordinate changes by more than ``tolerance`` times
        ``1 + max |value|``.
    max_iterations : int
        Iterations of one implicit equation before it counts as not converged.
    """

    tolerance: float = 1e-9
    max_iterations: int = 100


class Trajectory(NamedTuple):
    """The end of an integration and how its solves went.

    ``local`` is the metric at ``position``; ``iterations`` counts fixed-point iterations over
    all steps; ``converged`` is ``False`` if some step's iteration did not converge (the
    trajectory stops there); ``failed`` if a value became non-finite.
    """

    position: np.ndarray
    momentum: np.ndarray
    local: object
    n_steps: int
    iterations: int
    converged: bool
    failed: bool


def _close(new: np.ndarray, old: np.ndarray, tolerance: float) -> bool:
    return bool(np.max(np.abs(new - old)) <= tolerance * (1.0 + np.max(np.abs(new))))


def _fixed_point(update, guess: np.ndarray, settings: SolverSettings):
    """Iterate ``x <- update(x)`` from ``guess``; returns ``(x, iterations, converged)``."""
    for iteration in range(1, settings.max_iterations + 1):
        new = update(guess)
        if not np.all(np.isfinite(new)):
            return new, iteration, False
        if _close(new, guess, settings.tolerance):
            return new, iteration, True
        guess = new
    return guess, settings.max_iterations, False


def _momentum_half_step(local, momentum, half_step, settings):
    """Solve ``p' = p - h [grad phi - 1/2 nu(p')]``; returns ``(p', iterations, converged)``."""
    gradient = local.phi_gradient
    return _fixed_point(
        lambda guess: momentum - half_step * (gradient - 0.5 * local.nu(guess)),
        momentum - half_step * gradient,
        settings,
    )


def _position_step(local, position, momentum, step_size, geometry, settings):
    """Solve ``q'' = q + e/2 [G^-1(q) + G^-1(q'')] p'``.

    Returns ``(q'', iterations, converged)``.
    """
    start_velocity = local.velocity(momentum)
    return _fixed_point(
        lambda guess: (
            position + 0.5 * step_size * (start_velocity + geometry.at(guess).velocity(momentum))
        ),
        position + step_size * start_velocity,
        settings,
    )


def integrate(
    position: np.ndarray,
    momentum: np.ndarray,
    local,
    step_size: float,
    n_steps: int,
    geometry,
    settings: SolverSettings,
) -> Trajectory:
    """``n_steps`` generalized leapfrog steps from ``(position, momentum)``.

    ``local`` is ``geometry.at(position)``; ``geometry.at`` gives the metric anywhere.
    """
    half_step = 0.5 * step_size
    iterations = 0
    for step in range(n_steps):
        half, used, converged = _momentum_half_step(local, momentum, half_step, settings)
        iterations += used
        if converged:
            new_position, used, converged = _position_step(
                local, position, half, step_size, geometry, settings
            )
            iterations += used
        if not converged:
            failed = not np.all(np.isfinite(half))
            return Trajectory(position, momentum, local, step, iterations, False, failed)
        local = geometry.at(new_position)
        if not local.is_finite():
            return Trajectory(new_position, half, local, step + 1, iterations, True, True)
        position = new_position
        momentum = half - half_step * (local.phi_gradient - 0.5 * local.nu(half))
        if not np.all(np.isfinite(momentum)):
            return Trajectory(position, momentum, local, step + 1, iterations, True, True)
    return Trajectory(position, momentum, local, n_steps, iterations, True, False)


def returns_to_start(
    trajectory: Trajectory,
    start_position: np.ndarray,
    start_momentum: np.ndarray,
    step_size: float,
    geometry,
    settings: SolverSettings,
    tolerance: float,
) -> tuple[bool, int]:
    """Whether integrating back from the end (momentum flipped) converges to the start.

    Returns the verdict and the fixed-point iterations spent. ``tolerance`` is relative, as the
    solver's.
    """
    back = integrate(
        trajectory.position,
        -trajectory.momentum,
        trajectory.local,
        step_size,
        trajectory.n_steps,
        geometry,
        settings,
    )
    if not back.converged or back.failed:
        return False, back.iterations
    agrees = _close(back.position, start_position, tolerance) and _close(
        -back.momentum, start_momentum, tolerance
    )
    return agrees, back.iterations

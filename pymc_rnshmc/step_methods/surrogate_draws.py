"""Small rules of a surrogate draw that the step applies.

The chain's point with its target ``logp``, the acceptance the step size adapts on, and when
to warn that a trajectory needed the exact force.
"""

from __future__ import annotations

import numpy as np
from pymc.exceptions import SamplingError

from pymc_rnshmc.hmc.corrections import Correction, Evaluation
from pymc_rnshmc.hmc.force_field import EXACT_FORCE_FLOOR, EXACT_FORCE_SHARE
from pymc_rnshmc.hmc.transition import CachedPoint, DrawResult
from pymc_rnshmc.surrogates.base import Capabilities

__all__ = ["adaptation_accept", "current_point", "exact_forces_message", "uses_exact_forces"]


def current_point(
    cache: CachedPoint | None, position: np.ndarray, exact_model, correction: Correction | None
) -> tuple[CachedPoint, int, bool]:
    """The chain's point with its target ``logp``: ``cache`` if still valid, else evaluated.

    Evaluated through ``correction``'s target if given (an approximate test may not need the
    exact model), else exactly. Also returns the exact evaluations spent and whether the
    ``logp`` came from an approximate test. A non-finite ``logp`` raises, as PyMC's NUTS does.
    A cached ``logp`` is valid only under the target it was computed for (the surrogate's, for
    a correction ``on_surrogate``; else the model's), and only if known (not NaN).
    """
    on_surrogate = correction is not None and correction.on_surrogate
    if (
        cache is not None
        and np.array_equal(cache.position, position)
        and cache.on_surrogate == on_surrogate
        and not np.isnan(cache.logp)
        and exact_model.extras_unchanged(cache.extras)
    ):
        return cache, 0, False

    def evaluate(point: np.ndarray) -> Evaluation:
        return Evaluation(point, exact_model.logp(point))

    evaluation = evaluate(position) if correction is None else correction.target(position, evaluate)
    logp = evaluation.logp
    if not np.isfinite(logp):
        raise SamplingError(
            f"Bad initial energy: the model's logp is {logp} at the current point. "
            "Check the initial values with model.debug() or model.point_logps()."
        )
    point = CachedPoint(
        position.copy(), logp, exact_model.extra_values(), on_surrogate=on_surrogate
    )
    return point, int(evaluation.exact), not evaluation.exact


def adaptation_accept(surrogate, result: DrawResult) -> float:
    """The acceptance the surrogate step size adapts on.

    The integrator's share of rejections, on the surrogate's own Hamiltonian (a smaller step
    cannot fix the surrogate's own error), unless the force is the gradient of no potential:
    then the exact acceptance.
    """
    if Capabilities.of(surrogate).gradient_field:
        return result.integrator_accept
    return result.accept


def uses_exact_forces(surrogate, result: DrawResult) -> bool:
    """Whether a draw needed the exact force where a surrogate defined everywhere failed.

    (Leaving a grid's box is how a grid surrogate works, so it does not count.)
    """
    return bool(result.exact_forces) and Capabilities.of(surrogate).defined_everywhere


def exact_forces_message(sampler: str) -> str:
    """The warning when a surrogate's force was unusable along a trajectory."""
    return (
        "The surrogate's gradient was not finite, or implausibly large, at some points "
        f"of a trajectory; {sampler} used the exact gradient there (counted in "
        "n_gradient_evals), and rejected trajectories that needed it at more than "
        f"{EXACT_FORCE_FLOOR} points and {EXACT_FORCE_SHARE:.0%} of their points (stat "
        "left_trust_region). The posterior stays exact, but a surrogate trained on more of "
        "the region would mix better."
    )

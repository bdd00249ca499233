"""Values that carry a surrogate HMC chain's state from draw to draw.

A draw reads the chain's :class:`CachedPoint`, returns a :class:`DrawResult`, and the step turns
that into sampler statistics in one place; nothing about a draw travels through attributes.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

import numpy as np

from pymc_rnshmc.hmc.corrections import Evaluation

__all__ = ["CachedPoint", "DrawResult", "Phase"]


class Phase(StrEnum):
    """What a surrogate HMC chain is doing (compares equal to its value, e.g. ``"surrogate"``)."""

    EXPLORATION = "exploration"
    """Exact NUTS, recording draws for the first fit."""
    SURROGATE = "surrogate"
    """Surrogate dynamics with the exact Metropolis test."""
    EXACT = "exact"
    """Exact NUTS for good: no usable surrogate."""


class CachedPoint(NamedTuple):
    """The chain's current point and what is already known there.

    Attributes
    ----------
    position : ndarray
        In the model's dtype, exactly as PyMC holds it.
    logp : float
        Log density of the Metropolis test at ``position`` (the exact one, unless an opt-in
        approximate test is used).
    extras : tuple
        Values of the variables the step does not sample when ``logp`` was computed.
    surrogate_potential : float
        The trajectories' potential ``U~`` at ``position``; NaN while not known.
    force : ndarray or None
        The trajectories' force field ``grad U~`` at ``position``; ``None`` while not known.
    exact_force : bool
        ``force`` is the exact gradient (the surrogate's was not usable here).
    """

    position: np.ndarray
    logp: float
    extras: tuple
    surrogate_potential: float = np.nan
    force: np.ndarray | None = None
    exact_force: bool = False

    def without_surrogate_values(self) -> CachedPoint:
        """The same point with the surrogate's values forgotten (after the surrogate changed)."""
        return CachedPoint(self.position, self.logp, self.extras)


class DrawResult(NamedTuple):
    """Everything one surrogate draw did; :meth:`SurrogateHMC._stats` turns it into stats.

    ``end`` is where the chain is after the draw; ``proposal`` is the target's evaluation at the
    proposal (``None`` if none was made), for surrogates that learn from it.
    """

    end: CachedPoint
    proposal: Evaluation | None
    accept: float
    accepted: bool
    energy: float
    energy_change: float
    n_steps: int
    step_size: float
    n_logp_evals: int
    n_gradient_evals: int
    exact_forces: int
    surrogate_error: float
    integrator_accept: float
    divergence: str | None
    approximate_test: bool = False
    left_trust_region: bool = False

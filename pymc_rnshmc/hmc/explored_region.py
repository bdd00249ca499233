"""Where tuning has seen the posterior: proposals far beyond it are not evaluated while tuning.

A surrogate fitted on few points can send a trajectory far beyond them, where it has no
information and the model may be absurd to evaluate: an ODE solver grinding for minutes on an
exploding system (the black-box Lotka-Volterra example at ``log sigma = 110``), or failing (the
pharmacokinetic ``pm.ode`` model at ``log sigma = 12.8``). While tuning, such a proposal is
rejected without evaluating the model, and counted (stat ``left_trust_region``). Tuning draws
are discarded, so this costs no exactness; after tuning the region is not used, and every
proposal is judged by the exact model.

The region is an ellipsoid around the fit's training points, in the whitened coordinates of
their mean and covariance (:class:`~pymc_rnshmc.surrogates.whitening.Whitening`), ``REACH``
times as far out as the farthest of them (and at least ``REACH`` times the radius ``sqrt(d)``
that a Gaussian posterior's draws have): generous, so that it only stops proposals that have
flown off, not the tails the chain still has to learn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pymc_rnshmc.surrogates.whitening import Whitening

__all__ = ["REACH", "ExploredRegion"]

REACH = 3.0
"""How many times the farthest training point's whitened distance a proposal may be away."""


@dataclass(frozen=True)
class ExploredRegion:
    """An ellipsoid ``|L^-1 (q - centre)| <= radius`` around the points tuning has seen.

    Parameters
    ----------
    whitening : Whitening
        The training points' centre and covariance factor ``L``.
    radius : float
        In whitened units.
    """

    whitening: Whitening
    radius: float

    @classmethod
    def around(cls, positions: np.ndarray, reach: float = REACH) -> ExploredRegion:
        """The region ``reach`` times as far out as the farthest of ``positions`` ``(n, d)``."""
        whitening = Whitening.from_positions(positions)
        distances = np.linalg.norm(whitening.to_whitened(positions), axis=1)
        farthest = max(float(np.max(distances)), math.sqrt(whitening.dim))
        return cls(whitening, reach * farthest)

    def contains(self, position: np.ndarray) -> bool:
        """Whether ``position`` ``(d,)`` is inside (``False`` for a non-finite one)."""
        distance = float(np.linalg.norm(self.whitening.to_whitened(position)))
        return distance <= self.radius

"""The Metropolis test on the exact Hamiltonian."""

from __future__ import annotations

import numpy as np

__all__ = ["metropolis_accept"]


def metropolis_accept(energy_change: float, rng: np.random.Generator) -> tuple[float, bool]:
    """Accept a proposal whose exact energy exceeds the current one by ``energy_change``.

    Returns the acceptance probability ``min(1, exp(-energy_change))`` and the decision. A
    non-finite ``energy_change`` (NaN, or ``+inf`` from a proposal where the log density is
    ``-inf``) is rejected with probability one; ``-inf`` cannot occur for a finite current energy.
    A uniform variate is drawn in every case, so the random stream does not depend on the outcome.
    """
    uniform = rng.random()
    if not np.isfinite(energy_change):
        return 0.0, False
    probability = float(np.exp(min(0.0, -energy_change)))
    return probability, bool(uniform < probability)

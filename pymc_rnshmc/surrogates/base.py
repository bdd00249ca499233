"""The interface a surrogate must offer to drive surrogate Hamiltonian dynamics."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["PotentialSurrogate"]


@runtime_checkable
class PotentialSurrogate(Protocol):
    """A cheap approximation of the potential energy ``U(q) = -logp(q)``.

    ``fit`` receives exact evaluations in the sampler's (transformed, raveled) coordinates;
    ``gradient`` is called once per leapfrog step, one point at a time, so it must be fast;
    ``potential`` is used only for diagnostics (the exact Metropolis test never sees it).
    Fitting may raise :class:`~pymc_rnshmc.surrogates.SurrogateFitError`.
    """

    def fit(
        self,
        positions: np.ndarray,
        potentials: np.ndarray,
        gradients: np.ndarray | None = None,
        rng: np.random.Generator | None = None,
    ) -> PotentialSurrogate:
        """Fit to exact ``U`` (and ``grad U``) at ``positions`` ``(n, d)``; return ``self``."""
        ...

    def potential(self, positions: np.ndarray) -> np.ndarray | float:
        """Surrogate ``U`` at one point or at rows."""
        ...

    def gradient(self, position: np.ndarray) -> np.ndarray:
        """Surrogate ``grad U`` at one point."""
        ...

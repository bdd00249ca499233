"""Surrogates of the potential energy ``U = -logp`` (pure numpy, no PyMC import)."""

from pymc_rnshmc.surrogates.base import PotentialSurrogate
from pymc_rnshmc.surrogates.random_network import (
    FitReport,
    RandomNetworkSurrogate,
    SurrogateFitError,
)

__all__ = ["FitReport", "PotentialSurrogate", "RandomNetworkSurrogate", "SurrogateFitError"]

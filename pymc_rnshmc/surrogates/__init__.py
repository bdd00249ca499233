"""Surrogates of the potential energy ``U = -logp`` (pure numpy, no PyMC import)."""

from pymc_rnshmc.exceptions import SurrogateFitError
from pymc_rnshmc.surrogates.base import PotentialSurrogate
from pymc_rnshmc.surrogates.coarse import CoarseCorrectedSurrogate, CoarseFitReport, HeldOutErrors
from pymc_rnshmc.surrogates.network.random_network import FitReport, RandomNetworkSurrogate

__all__ = [
    "CoarseCorrectedSurrogate",
    "CoarseFitReport",
    "FitReport",
    "HeldOutErrors",
    "PotentialSurrogate",
    "RandomNetworkSurrogate",
    "SurrogateFitError",
]

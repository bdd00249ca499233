"""PyMC step methods that run Hamiltonian dynamics on a surrogate and correct exactly."""

from pymc_rnshmc.step_methods.arnshmc import ARNSHMC
from pymc_rnshmc.step_methods.rnshmc import RNSHMC, SurrogateWarning

__all__ = ["ARNSHMC", "RNSHMC", "SurrogateWarning"]

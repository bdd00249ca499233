"""The PyMC adapter: steps that run Hamiltonian dynamics on a surrogate and correct exactly."""

from pymc_rnshmc.exceptions import EvaluationTimeout, ModelEvaluationError, SurrogateWarning
from pymc_rnshmc.step_methods.arnshmc import ARNSHMC
from pymc_rnshmc.step_methods.pooled_sampling import sample
from pymc_rnshmc.step_methods.population import PooledSurrogate
from pymc_rnshmc.step_methods.rnshmc import RNSHMC
from pymc_rnshmc.step_methods.rnsrmhmc import RNSRMHMC
from pymc_rnshmc.step_methods.sparse_grid_hmc import SparseGridHMC
from pymc_rnshmc.step_methods.surrogate_hmc import SurrogateHMC

__all__ = [
    "ARNSHMC",
    "EvaluationTimeout",
    "ModelEvaluationError",
    "PooledSurrogate",
    "RNSHMC",
    "RNSRMHMC",
    "SparseGridHMC",
    "SurrogateHMC",
    "SurrogateWarning",
    "sample",
]

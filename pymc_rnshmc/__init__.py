"""pymc-rnshmc: surrogate-accelerated Hamiltonian Monte Carlo step methods for PyMC.

``pm.sample(step=RNSHMC())`` explores with exact NUTS during tuning, fits a cheap surrogate of
the potential ``U = -logp`` to what it saw, and then proposes with the surrogate's dynamics while
the Metropolis test uses the exact log density, so the chain targets the exact posterior.
"""

from pymc_rnshmc.comparison import (
    EvaluationCost,
    SamplerComparison,
    SamplerRun,
    compare_samplers,
    comparison_table,
    predict_call,
    run_sampler,
)
from pymc_rnshmc.diagnostics import plot_surrogate
from pymc_rnshmc.step_methods import (
    ARNSHMC,
    RNSHMC,
    RNSRMHMC,
    EvaluationTimeout,
    ModelEvaluationError,
    PooledSurrogate,
    SparseGridHMC,
    SurrogateWarning,
    sample,
)
from pymc_rnshmc.surrogates import (
    FitReport,
    PotentialSurrogate,
    RandomNetworkSurrogate,
    SurrogateFitError,
)

__version__ = "0.2.0"

__all__ = [
    "ARNSHMC",
    "RNSHMC",
    "RNSRMHMC",
    "EvaluationCost",
    "EvaluationTimeout",
    "FitReport",
    "ModelEvaluationError",
    "PooledSurrogate",
    "PotentialSurrogate",
    "RandomNetworkSurrogate",
    "SamplerComparison",
    "SamplerRun",
    "SparseGridHMC",
    "SurrogateFitError",
    "SurrogateWarning",
    "__version__",
    "compare_samplers",
    "comparison_table",
    "plot_surrogate",
    "predict_call",
    "run_sampler",
    "sample",
]

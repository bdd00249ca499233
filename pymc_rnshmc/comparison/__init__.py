"""One call that samples a model with PyMC's NUTS (and nutpie) and surrogate samplers, and compares.

:func:`compare_samplers` runs every sampler on the same model with the same tuning, draws,
chains and seed (unless a sampler's own options say otherwise), timing each whole call, and
returns a :class:`SamplerComparison`: a tidy table (ESS from ArviZ, per second of the draws and
of the whole call; exact evaluations per draw; acceptance; divergences; how far each posterior
mean is from the reference's, in Monte Carlo standard errors) and two figures (ESS per second;
relative error of the posterior means against wall time).

Its pieces serve runs made one at a time (the benchmark scripts time, profile and record runs
this way): :func:`run_sampler` is one run, :func:`comparison_table` the table of any runs, and
:func:`posterior_coordinates` and :func:`coordinate_ess` the draws and the ESS the table uses.
:func:`predict_call` prices a run's counted evaluations at another model cost
(:class:`EvaluationCost`): the call on an expensive model, from a run on a cheap one.
"""

from pymc_rnshmc.comparison.compare import SamplerComparison, compare_samplers
from pymc_rnshmc.comparison.prediction import CallPrediction, EvaluationCost, predict_call
from pymc_rnshmc.comparison.runs import (
    NUTPIE_NAME,
    NUTS_BACKENDS,
    NUTS_NAME,
    SamplerRun,
    run_sampler,
)
from pymc_rnshmc.comparison.table import (
    comparison_table,
    coordinate_ess,
    error_over_time,
    posterior_coordinates,
)

__all__ = [
    "CallPrediction",
    "EvaluationCost",
    "NUTPIE_NAME",
    "NUTS_BACKENDS",
    "NUTS_NAME",
    "SamplerComparison",
    "SamplerRun",
    "compare_samplers",
    "comparison_table",
    "coordinate_ess",
    "error_over_time",
    "posterior_coordinates",
    "predict_call",
    "run_sampler",
]

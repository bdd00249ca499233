"""Models from the papers and the examples: installed for examples, notebooks and benchmarks.

Nothing else in the package imports this subpackage (``tests/test_layers.py`` checks it).
"""

from pymc_rnshmc.workloads.hierarchical import (
    EIGHT_SCHOOLS,
    eight_schools_centered,
    eight_schools_noncentered,
    neals_funnel,
)
from pymc_rnshmc.workloads.papers import (
    WORKLOADS,
    banana,
    banana_data,
    gaussian_process,
    logistic_regression,
    logistic_regression_data,
    small_logistic_regression,
)
from pymc_rnshmc.workloads.pharmacokinetics import (
    OneCompartmentConcentrations,
    OneCompartmentData,
    one_compartment_data,
    one_compartment_model,
)
from pymc_rnshmc.workloads.sleeping import sleeping_covariance, sleeping_normal
from pymc_rnshmc.workloads.wide import (
    correlated_logistic_regression,
    correlated_logistic_regression_data,
    hierarchical_logistic_regression,
    hierarchical_logistic_regression_data,
    multilevel_regression,
)

__all__ = [
    "EIGHT_SCHOOLS",
    "WORKLOADS",
    "OneCompartmentConcentrations",
    "OneCompartmentData",
    "banana",
    "banana_data",
    "correlated_logistic_regression",
    "sleeping_covariance",
    "sleeping_normal",
    "correlated_logistic_regression_data",
    "eight_schools_centered",
    "eight_schools_noncentered",
    "gaussian_process",
    "hierarchical_logistic_regression",
    "hierarchical_logistic_regression_data",
    "logistic_regression",
    "logistic_regression_data",
    "multilevel_regression",
    "neals_funnel",
    "one_compartment_data",
    "one_compartment_model",
    "small_logistic_regression",
]

"""The posteriordb posterior ``one_comp_mm_elim_abs``: a pharmacokinetic ODE without a gradient.

A single oral dose ``D`` (mg) is absorbed at rate ``k_a`` (1/day) into one compartment of
volume ``V`` (L) and removed by saturable Michaelis-Menten elimination, so the concentration
``C(t)`` (mg/L) solves

    dC/dt = (D k_a / V) exp(-k_a t) - (V_m / V) C / (K_m + C),    C(0) = 0.

posteriordb's model switches the absorption input off for ``t <= 0``; integrating forward from
0, that changes the right-hand side at ``t = 0`` only, so the solution is the same without it.
Twenty measured concentrations follow ``C_hat_n ~ LogNormal(log C(t_n), sigma)``, with
half-Cauchy(1) priors on ``k_a``, ``K_m``, ``V_m`` and ``sigma``. The posterior has a curved,
heavy-tailed ``K_m``-``V_m`` ridge: posteriordb's Stan reference run needed 35 000 warm-up
iterations and ``adapt_delta = 0.99``.

:class:`OneCompartmentConcentrations` solves the ODE with :func:`scipy.integrate.solve_ivp`
(stiff BDF, as Stan's ``integrate_ode_bdf``; ``rtol = atol = 1e-8``; the analytic Jacobian of
the right-hand side). It has **no gradient**: ``solve_ivp`` gives no sensitivities, so
differentiating the logp with respect to ``k_a``, ``K_m`` or ``V_m`` raises
``NotImplementedError`` and NUTS cannot run on them (``pm.sample``'s automatic assignment gives
them ``pm.Slice``, and NUTS to ``sigma`` alone); ``pm.DEMetropolisZ`` or ``pm.sample_smc`` run
the whole model gradient-free. A failed solve gives NaN concentrations, hence a NaN logp, which
the step methods reject; ``failed_solve="-inf"`` makes it ``-inf`` instead, for SMC. A solve that
needs more than ``MAX_EVALUATIONS`` right-hand-side evaluations fails.

Cost of one ``model.compile_logp()`` evaluation on the project's 2-vCPU machine (median over
100 reference draws, ``OMP_NUM_THREADS=1``): about 12 ms with BDF and 1.0 ms with LSODA under
PyMC 5.28 / PyTensor 2.38, 13 ms and 1.1 ms under PyMC 6.4 / PyTensor 3.3 (Numba object mode).
SciPy's BDF steps in Python, LSODA in compiled Fortran (both call the Python right-hand side):
LSODA is the cheaper variant for tests. With the second core busy, BDF took up to 20 ms.

The Op is implemented in Python (``perform``); under PyTensor 3 it runs in Numba's object mode,
registered as in :mod:`pymc_rnshmc.workloads.elliptic_pde.ops`. Its properties are plain floats,
tuples and a string, so it pickles (``pm.sample(cores=2)`` uses worker processes).

References
----------
.. [1] Magnusson, M., Torgander, J., Bürkner, P.-C., Zhang, L., Carpenter, B., & Vehtari, A.
   (2024). posteriordb: Testing, benchmarking and developing Bayesian inference algorithms.
   arXiv:2407.04967. Posterior ``one_comp_mm_elim_abs-one_comp_mm_elim_abs``, from Stan's
   stat_comp_benchmarks ``pkpd`` benchmark.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy.integrate import solve_ivp

from pymc_rnshmc.served.python_ops import run_in_object_mode

__all__ = [
    "OneCompartmentConcentrations",
    "OneCompartmentData",
    "one_compartment_data",
    "one_compartment_model",
]

METHODS = ("BDF", "LSODA")
FAILED_SOLVE = ("nan", "-inf")
TOLERANCE = 1e-8
"""Relative and absolute tolerance of every solve."""
MAX_EVALUATIONS = 50_000
"""A solve that needs more right-hand-side evaluations fails. At posterior draws LSODA needs
about 200 and BDF 400-600; far from them (a surrogate trajectory's end point) one LSODA solve ran
for minutes."""


class _SolveTooLong(Exception):
    """Raised inside the right-hand side once a solve has used ``MAX_EVALUATIONS``."""


def _with_effort_cap(right_hand_side):
    calls = itertools.count(1)

    def capped(*args):
        if next(calls) > MAX_EVALUATIONS:
            raise _SolveTooLong
        return right_hand_side(*args)

    return capped


_OBSERVED_CONCENTRATIONS = (
    5.70812264865215, 7.10126075072086, 8.38520678426651, 9.79008249883381, 13.4390409239245,
    11.4478987597702, 11.2124282696837, 11.4269217682577, 12.2432859438401, 13.8201804108938,
    13.8408670746042, 11.422291744251, 10.5031943081843, 11.9121452242965, 14.0849980781312,
    10.5505145523917, 10.1905539351877, 12.2232272590821, 11.7290653047821, 12.2719396535996,
)  # fmt: skip


class OneCompartmentData(NamedTuple):
    """The posteriordb data ``one_comp_mm_elim_abs`` (the dose is given at time 0).

    Attributes
    ----------
    times : numpy.ndarray
        Observation times (days), 0.5, 1.0, ..., 10.0.
    dose : float
        Oral dose ``D`` (mg).
    volume : float
        Compartment volume ``V`` (L).
    concentrations : numpy.ndarray
        Measured concentrations ``C_hat`` (mg/L) at ``times``.
    """

    times: np.ndarray
    dose: float
    volume: float
    concentrations: np.ndarray


def one_compartment_data() -> OneCompartmentData:
    """The posteriordb data ``one_comp_mm_elim_abs``: 20 concentrations after a 30 mg dose."""
    times = 0.5 * np.arange(1, 21, dtype=float)
    return OneCompartmentData(times, 30.0, 2.0, np.array(_OBSERVED_CONCENTRATIONS))


def _right_hand_side(t, concentration, k_a, K_m, V_m, dose, volume) -> np.ndarray:
    absorption = dose * k_a / volume * np.exp(-k_a * t)
    return absorption - V_m / volume * concentration / (K_m + concentration)


def _jacobian(t, concentration, k_a, K_m, V_m, dose, volume) -> np.ndarray:
    return np.reshape(-V_m / volume * K_m / (K_m + concentration) ** 2, (1, 1))


def _float_scalar(variable) -> pt.TensorVariable:
    variable = pt.as_tensor_variable(variable)
    if variable.ndim != 0:
        raise TypeError(f"expected a scalar, got {variable.type}")
    return pt.cast(variable, "float64") if variable.dtype != "float64" else variable


class OneCompartmentConcentrations(Op):
    """``(k_a, K_m, V_m) -> C(times)``: the one-compartment model's concentrations, no gradient.

    Parameters
    ----------
    times : sequence of float
        Increasing observation times (days) after the dose at time 0.
    dose : float
        Oral dose ``D`` (mg).
    volume : float
        Compartment volume ``V`` (L).
    method : {"BDF", "LSODA"}
        :func:`scipy.integrate.solve_ivp` method. BDF is the stiff solver the posterior is
        defined with; LSODA gives the same concentrations (within 3e-7 relative at reference
        draws) about ten times faster.

    Notes
    -----
    The three inputs are float64 scalars, the output is a float64 vector of ``len(times)``
    concentrations, NaN where the solve fails or a parameter is not finite. ``pullback``
    (``L_op`` for PyTensor 2) raises ``NotImplementedError``: the Op has no gradient.

    References
    ----------
    .. [1] posteriordb (stan-dev), posterior ``one_comp_mm_elim_abs-one_comp_mm_elim_abs``;
       from Stan's stat_comp_benchmarks ``pkpd`` benchmark.
    """

    __props__ = ("times", "dose", "volume", "method")

    def __init__(
        self, times: Sequence[float], dose: float, volume: float, method: str = "BDF"
    ) -> None:
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        self.times = tuple(float(time) for time in times)
        if self.times[0] <= 0.0 or np.any(np.diff(self.times) <= 0.0):
            raise ValueError("times must be positive and increasing")
        self.dose, self.volume, self.method = float(dose), float(volume), method

    def solve(self, k_a: float, K_m: float, V_m: float) -> np.ndarray:
        """Concentrations at ``times``.

        NaN if a parameter is not finite or the solve fails, including one that needs more than
        ``MAX_EVALUATIONS`` right-hand-side evaluations.
        """
        failed = np.full(len(self.times), np.nan)
        if not np.all(np.isfinite([k_a, K_m, V_m])):
            return failed
        try:
            with np.errstate(all="ignore"):
                solution = solve_ivp(
                    _with_effort_cap(_right_hand_side),
                    (0.0, self.times[-1]),
                    [0.0],
                    method=self.method,
                    t_eval=self.times,
                    args=(k_a, K_m, V_m, self.dose, self.volume),
                    jac=_jacobian,
                    rtol=TOLERANCE,
                    atol=TOLERANCE,
                )
        except (ValueError, ArithmeticError, _SolveTooLong):  # e.g. a non-finite Jacobian
            return failed
        return solution.y[0] if solution.success else failed

    def make_node(self, k_a, K_m, V_m) -> Apply:
        inputs = [_float_scalar(k_a), _float_scalar(K_m), _float_scalar(V_m)]
        return Apply(self, inputs, [pt.tensor(dtype="float64", shape=(len(self.times),))])

    def perform(self, node, inputs, output_storage) -> None:
        output_storage[0][0] = self.solve(*(float(value) for value in inputs))

    def pullback(self, inputs, outputs, cotangents):
        raise NotImplementedError(f"{type(self).__name__} has no gradient (scipy's solve_ivp)")

    L_op = pullback  # PyTensor 2 asks for L_op, PyTensor 3 for pullback


run_in_object_mode(OneCompartmentConcentrations)


def one_compartment_model(method: str = "BDF", failed_solve: str = "nan") -> pm.Model:
    """The posteriordb posterior ``one_comp_mm_elim_abs`` as a gradient-free PyMC model.

    Parameters
    ----------
    method : {"BDF", "LSODA"}
        The ODE solver of :class:`OneCompartmentConcentrations`; BDF defines the posterior,
        LSODA is a cheaper variant for tests.
    failed_solve : {"nan", "-inf"}
        The logp where the solve fails: NaN (PyMC's and this package's step methods reject
        the point), or ``-inf`` through a ``pm.Potential`` named ``failed_solve``, which
        ``pm.sample_smc`` needs: a NaN logp makes its importance weights NaN ("cannot convert
        float NaN to integer"). The posterior is the same.

    Returns
    -------
    pymc.Model
        Free variables ``k_a``, ``K_m``, ``V_m``, ``sigma`` (scalars, ``HalfCauchy(1)``, log
        transformed), observed ``C_hat`` (20 values); with ``failed_solve="-inf"`` also the
        potential ``failed_solve``. PyMC's half-Cauchy density is Stan's
        ``cauchy(0, 1)`` on a positive parameter plus ``log 2``, so the logp exceeds Stan's by
        ``4 log 2``.

    References
    ----------
    .. [1] posteriordb (stan-dev), posterior ``one_comp_mm_elim_abs-one_comp_mm_elim_abs``.
    """
    if failed_solve not in FAILED_SOLVE:
        raise ValueError(f"failed_solve must be one of {FAILED_SOLVE}, got {failed_solve!r}")
    data = one_compartment_data()
    concentrations = OneCompartmentConcentrations(data.times, data.dose, data.volume, method)
    with pm.Model() as model:
        k_a = pm.HalfCauchy("k_a", beta=1.0)
        K_m = pm.HalfCauchy("K_m", beta=1.0)
        V_m = pm.HalfCauchy("V_m", beta=1.0)
        sigma = pm.HalfCauchy("sigma", beta=1.0)
        solved_concentrations = concentrations(k_a, K_m, V_m)
        if failed_solve == "-inf":
            finite = ~(pt.isnan(solved_concentrations) | pt.isinf(solved_concentrations))
            solved = pt.all(finite & (solved_concentrations > 0))  # PyTensor 2 has no isfinite
            pm.Potential("failed_solve", pt.switch(solved, 0.0, -np.inf))
            solved_concentrations = pt.switch(solved, solved_concentrations, 1.0)
        mu = pt.log(solved_concentrations)
        pm.LogNormal("C_hat", mu=mu, sigma=sigma, observed=data.concentrations)
    return model

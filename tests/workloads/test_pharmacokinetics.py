"""posteriordb's one_comp_mm_elim_abs: data, log density against an RK4 check, no gradient."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import cloudpickle
import numpy as np
import pytensor
import pytest

from pymc_rnshmc.workloads import (
    OneCompartmentConcentrations,
    one_compartment_data,
    one_compartment_model,
    pharmacokinetics,
)
from pymc_rnshmc.workloads.pharmacokinetics import METHODS

FOLDER = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "posteriordb"
    / "one_comp_mm_elim_abs-one_comp_mm_elim_abs"
)
# Reference draws (k_a, K_m, V_m, sigma): chain 1 draw 1, chain 4 draw 518, chain 10 draw 1000.
REFERENCE_DRAWS = np.array(
    [
        [0.87149444400937, 0.281726741298786, 0.901070839334823, 0.125940523719882],
        [0.847937203245705, 5.04657406105131, 1.1386527197903, 0.122144325061118],
        [0.747913381357602, 0.522220066076925, 0.975310705446783, 0.112432655690013],
    ]
)
HALF_CAUCHY_NORMALISATION = 4.0 * np.log(2.0)  # PyMC's 2 / pi against Stan's 1 / pi, 4 times


def rk4_concentrations(parameters: np.ndarray, times: np.ndarray, step: float = 1e-3):
    """Classical fixed-step RK4 for every row ``(k_a, K_m, V_m)`` at once, at ``times``."""
    data = one_compartment_data()
    k_a, K_m, V_m = parameters.T

    def rate(t, concentration):
        absorption = data.dose * k_a / data.volume * np.exp(-k_a * t)
        return absorption - V_m / data.volume * concentration / (K_m + concentration)

    concentration, t, observed = np.zeros(len(parameters)), 0.0, []
    for end in times:
        n_steps = round((end - t) / step)
        for _ in range(n_steps):
            k1 = rate(t, concentration)
            k2 = rate(t + step / 2, concentration + step / 2 * k1)
            k3 = rate(t + step / 2, concentration + step / 2 * k2)
            k4 = rate(t + step, concentration + step * k3)
            concentration = concentration + step / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            t += step
        observed.append(concentration)
    return np.array(observed).T


def stan_log_density(draws: np.ndarray) -> np.ndarray:
    """posteriordb's log density with all constants, on the log scale (plus the log-Jacobian)."""
    data = one_compartment_data()
    log_c_hat = np.log(data.concentrations)
    mu = np.log(rk4_concentrations(draws[:, :3], data.times))
    sigma = draws[:, 3:]
    log_prior = np.sum(-np.log(np.pi) - np.log1p(draws**2), axis=1)
    log_likelihood = np.sum(
        -log_c_hat - np.log(sigma) - 0.5 * np.log(2 * np.pi) - (log_c_hat - mu) ** 2 / sigma**2 / 2,
        axis=1,
    )
    return log_prior + log_likelihood + np.log(draws).sum(axis=1)


def unconstrained(draw: np.ndarray) -> dict[str, float]:
    return dict(zip(["k_a_log__", "K_m_log__", "V_m_log__", "sigma_log__"], np.log(draw)))


def test_the_data_are_posteriordbs():
    posteriordb = json.loads((FOLDER / "data.json").read_text())
    data = one_compartment_data()
    assert posteriordb["t0"] == 0 and posteriordb["N_t"] == len(data.times) == 20
    assert (data.dose, data.volume) == (posteriordb["D"], posteriordb["V"])
    np.testing.assert_array_equal(data.times, posteriordb["times"])
    np.testing.assert_array_equal(data.concentrations, posteriordb["C_hat"])


def test_logp_at_reference_draws_is_the_stan_density_up_to_the_half_cauchy_constant():
    model = one_compartment_model()
    assert [variable.name for variable in model.free_RVs] == ["k_a", "K_m", "V_m", "sigma"]
    logp = model.compile_logp()
    pymc = np.array([logp(unconstrained(draw)) for draw in REFERENCE_DRAWS])
    np.testing.assert_allclose(
        pymc - stan_log_density(REFERENCE_DRAWS), HALF_CAUCHY_NORMALISATION, rtol=0, atol=1e-5
    )


def test_lsoda_and_bdf_give_the_same_concentrations():
    data = one_compartment_data()
    bdf, lsoda = (
        OneCompartmentConcentrations(data.times, data.dose, data.volume, method)
        for method in ("BDF", "LSODA")
    )
    for k_a, K_m, V_m, _ in REFERENCE_DRAWS:
        np.testing.assert_allclose(lsoda.solve(k_a, K_m, V_m), bdf.solve(k_a, K_m, V_m), rtol=1e-6)


def test_the_model_logp_has_no_gradient():
    model = one_compartment_model("LSODA")
    with pytest.raises(NotImplementedError, match="no gradient"):
        pytensor.gradient.grad(model.logp(), model.value_vars)


def test_a_failed_solve_gives_nan_or_on_request_minus_infinity():
    data = one_compartment_data()
    op = OneCompartmentConcentrations(data.times, data.dose, data.volume)
    assert np.all(np.isnan(op.solve(np.nan, 1.0, 1.0)))
    assert np.all(np.isnan(op.solve(1e300, 1.0, 1.0)))  # BDF's Jacobian overflows
    point = unconstrained(REFERENCE_DRAWS[0])
    failed = dict(point, k_a_log__=np.log(1e300))  # finite priors, a failed solve
    logp = one_compartment_model("BDF").compile_logp()
    assert np.isfinite(logp(point)) and np.isnan(logp(failed))
    guarded = one_compartment_model("BDF", failed_solve="-inf").compile_logp()
    # the two graphs compile apart: equal to rounding (they differed in the last bit once)
    assert guarded(point) == pytest.approx(logp(point), rel=1e-12) and guarded(failed) == -np.inf
    with pytest.raises(ValueError, match="failed_solve must be one of"):
        one_compartment_model("BDF", failed_solve="zero")


def test_a_solve_that_needs_too_many_evaluations_fails(monkeypatch):
    data = one_compartment_data()
    draw = REFERENCE_DRAWS[0]
    for method in METHODS:
        op = OneCompartmentConcentrations(data.times, data.dose, data.volume, method)
        assert np.all(np.isfinite(op.solve(*draw[:3])))
        monkeypatch.setattr(pharmacokinetics, "MAX_EVALUATIONS", 50)  # a reference draw needs 200+
        assert np.all(np.isnan(op.solve(*draw[:3])))
        monkeypatch.undo()


def test_the_op_and_the_model_pickle():
    data = one_compartment_data()
    op = OneCompartmentConcentrations(data.times, data.dose, data.volume, "LSODA")
    restored = pickle.loads(pickle.dumps(op))
    assert restored == op and hash(restored) == hash(op)
    k_a, K_m, V_m = REFERENCE_DRAWS[0, :3]
    np.testing.assert_array_equal(restored(k_a, K_m, V_m).eval(), op.solve(k_a, K_m, V_m))

    model = one_compartment_model("LSODA")
    point = unconstrained(REFERENCE_DRAWS[1])
    copy = cloudpickle.loads(cloudpickle.dumps(model))
    assert copy.compile_logp()(point) == model.compile_logp()(point)


def test_unknown_methods_and_unordered_times_are_refused():
    with pytest.raises(ValueError, match="method"):
        OneCompartmentConcentrations([1.0], 30.0, 2.0, method="RK45")
    with pytest.raises(ValueError, match="increasing"):
        OneCompartmentConcentrations([2.0, 1.0], 30.0, 2.0)


def test_log_scale_summary_agrees_with_the_reference_summary():
    logs = json.loads((FOLDER / "log_scale_summary.json").read_text())
    reference = json.loads((FOLDER / "reference_summary.json").read_text())
    assert logs["names"] == reference["names"] == ["k_a", "K_m", "V_m", "sigma"]
    # the log is monotone: quantiles map through it (up to interpolation between draws)
    for quantile in ("q05", "q50", "q95"):
        np.testing.assert_allclose(np.exp(logs[quantile]), reference[quantile], rtol=1e-3)
    np.testing.assert_allclose(
        logs["mcse_mean"], np.array(logs["sd"]) / np.sqrt(reference["ess_bulk"]), rtol=1e-12
    )

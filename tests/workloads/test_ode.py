"""The Lotka-Volterra workload through pm.ode."""

import numpy as np

from pymc_rnshmc.workloads.ode import LOTKA_VOLTERRA_TRUTH, lotka_volterra, lotka_volterra_data


def test_the_data_are_reproducible_and_follow_the_solution():
    times, observed, solution = lotka_volterra_data(seed=3)
    _, again, _ = lotka_volterra_data(seed=3)
    np.testing.assert_array_equal(observed, again)
    assert observed.shape == solution.shape == (times.size, 2)
    residuals = np.log(observed / solution)
    assert abs(residuals.std() - LOTKA_VOLTERRA_TRUTH["sigma"]) < 0.1


def test_the_model_has_seven_parameters_and_a_finite_logp_and_gradient_at_the_truth():
    model = lotka_volterra(n_times=10)
    assert len(model.continuous_value_vars) == 7
    point = model.initial_point()
    for name, value in LOTKA_VOLTERRA_TRUTH.items():
        point[f"{name}_log__"] = np.log(value)
    logp = model.compile_logp()(point)
    gradient = model.compile_dlogp()(point)
    assert np.isfinite(logp) and np.all(np.isfinite(gradient))
    # the truth is far more probable than a point where the rates are halved
    halved = dict(point, alpha_log__=np.log(0.5 * LOTKA_VOLTERRA_TRUTH["alpha"]))
    assert model.compile_logp()(halved) < logp - 10

"""The Lotka-Volterra workloads through pm.ode."""

import numpy as np

from pymc_rnshmc.workloads.ode import (
    HUDSON_PELTS,
    LOTKA_VOLTERRA_TRUTH,
    hudson_lynx_hare,
    lotka_volterra,
    lotka_volterra_data,
)


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


def test_the_hudson_pelts_model_has_eight_parameters_and_prefers_the_classic_fit():
    model = hudson_lynx_hare()
    assert len(model.continuous_value_vars) == 3  # theta (4), z_init (2), sigma (2)
    point = model.initial_point()
    assert sum(np.size(value) for value in point.values()) == 8
    assert HUDSON_PELTS.shape == (21, 2)
    # near the posterior means of Carpenter's case study against the prior-centred start
    fit = dict(point)
    fit["theta_interval__"] = np.log([0.55, 0.028, 0.80, 0.024])  # bounded below by 0 only
    fit["z_init_log__"] = np.log([33.9, 5.9])
    fit["sigma_log__"] = np.log([0.25, 0.25])
    logp = model.compile_logp()
    assert np.isfinite(logp(fit)) and logp(fit) > logp(point) + 100


def test_the_runge_kutta_coarse_model_is_close_to_the_pm_ode_one():
    # 2 fixed steps per unit of time against odeint: the same posterior up to about a percent
    fine, coarse = lotka_volterra(), lotka_volterra(steps_per_unit=2)
    names = [v.name for v in fine.continuous_value_vars]
    assert names == [v.name for v in coarse.continuous_value_vars]
    point = fine.initial_point()
    for name, value in LOTKA_VOLTERRA_TRUTH.items():
        point[f"{name}_log__"] = np.log(value)
    fine_logp, coarse_logp = fine.compile_logp()(point), coarse.compile_logp()(point)
    assert abs(fine_logp - coarse_logp) < 0.05 * abs(fine_logp)
    fine_gradient = fine.compile_dlogp()(point)
    coarse_gradient = coarse.compile_dlogp()(point)
    error = np.linalg.norm(coarse_gradient - fine_gradient) / np.linalg.norm(fine_gradient)
    assert 0 < error < 0.1


def test_the_tolerance_of_the_loose_coarse_model_takes_effect():
    # pm.ode with rtol 1e-3 is close to the default solve, rtol 1e-7 closer still
    point = lotka_volterra().initial_point()
    for name, value in LOTKA_VOLTERRA_TRUTH.items():
        point[f"{name}_log__"] = np.log(value)

    def gradient(**options):
        return lotka_volterra(**options).compile_dlogp()(point)

    default = gradient()

    def error(rtol):
        return np.linalg.norm(gradient(rtol=rtol) - default) / np.linalg.norm(default)

    loose, tight = error(1e-3), error(1e-7)
    assert 0 < tight < loose < 1e-2

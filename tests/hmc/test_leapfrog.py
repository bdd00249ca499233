import numpy as np
import pytest

from pymc_rnshmc.hmc.leapfrog import leapfrog
from pymc_rnshmc.surrogates import RandomNetworkSurrogate


def identity(momentum):
    return momentum


def quartic_gradient(position):
    return position**3 + 0.5 * position


def quartic_energy(position, momentum):
    return np.sum(0.25 * position**4 + 0.25 * position**2) + 0.5 * momentum @ momentum


@pytest.fixture(scope="module")
def fitted_surrogate():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(300, 3))
    values = np.sum(0.25 * points**4 + 0.25 * points**2, axis=1)
    return RandomNetworkSurrogate(n_hidden=80).fit(points, values, quartic_gradient(points), rng=1)


def gradient_fields(surrogate):
    return {"exact-quartic": quartic_gradient, "surrogate": surrogate.gradient}


def run(position, momentum, step_size, n_steps, gradient_field):
    return leapfrog(
        position,
        momentum,
        gradient_field(position),
        step_size,
        n_steps,
        gradient_field,
        identity,
    )


def test_harmonic_oscillator_follows_the_exact_solution_and_conserves_energy():
    position, momentum = np.array([1.0, -0.5]), np.array([0.3, 2.0])
    step_size, n_steps = 0.01, 157  # t = 1.57

    end = run(position, momentum, step_size, n_steps, lambda q: q)
    time = step_size * n_steps
    exact_position = position * np.cos(time) + momentum * np.sin(time)
    np.testing.assert_allclose(end.position, exact_position, atol=1e-4)
    start_energy = 0.5 * (position @ position + momentum @ momentum)
    end_energy = 0.5 * (end.position @ end.position + end.momentum @ end.momentum)
    assert abs(end_energy - start_energy) < 1e-4
    assert not end.failed and end.n_steps == n_steps


@pytest.mark.parametrize("n_steps", [1, 2, 3, 4, 20])
@pytest.mark.parametrize("step_size", [0.01, 0.1])
@pytest.mark.parametrize("field", ["exact-quartic", "surrogate"])
def test_reversible(fitted_surrogate, field, step_size, n_steps):
    gradient_field = gradient_fields(fitted_surrogate)[field]
    rng = np.random.default_rng(n_steps)
    position, momentum = rng.normal(size=3), rng.normal(size=3)
    forward = run(position, momentum, step_size, n_steps, gradient_field)
    backward = run(forward.position, -forward.momentum, step_size, n_steps, gradient_field)
    np.testing.assert_allclose(backward.position, position, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(-backward.momentum, momentum, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("field", ["exact-quartic", "surrogate"])
def test_volume_preserving(fitted_surrogate, field):
    gradient_field = gradient_fields(fitted_surrogate)[field]
    rng = np.random.default_rng(5)
    state = rng.normal(size=6)

    def flow(state):
        end = run(state[:3], state[3:], 0.2, 7, gradient_field)
        return np.concatenate([end.position, end.momentum])

    eps = 1e-4  # central differences: truncation ~eps^2; at 1e-6 rounding reached 1e-6
    jacobian = np.column_stack(
        [(flow(state + eps * e) - flow(state - eps * e)) / (2 * eps) for e in np.eye(6)]
    )
    assert abs(np.linalg.det(jacobian) - 1.0) < 1e-6


def test_energy_error_shrinks_with_the_step_size_on_the_exact_potential():
    position, momentum = np.array([0.7, -1.2, 0.1]), np.array([0.5, 0.5, -1.0])
    start = quartic_energy(position, momentum)
    errors = []
    for step_size in (0.1, 0.05, 0.025):
        end = run(position, momentum, step_size, round(1.0 / step_size), quartic_gradient)
        errors.append(abs(quartic_energy(end.position, end.momentum) - start))
    assert errors[0] < 0.05
    # second-order integrator: halving the step divides the error by about four
    assert errors[1] < errors[0] / 2.5 and errors[2] < errors[1] / 2.5


def test_non_finite_gradient_or_overflow_fails_the_trajectory():
    def nan_beyond_one(position):
        return position if np.all(np.abs(position) < 1.0) else np.full_like(position, np.nan)

    end = run(np.zeros(2), np.array([1.0, 0.0]), 0.3, 10, nan_beyond_one)
    assert end.failed and end.n_steps < 10

    def explosive(position):
        return -1e308 * np.sign(position + 0.1)

    with np.errstate(over="ignore", invalid="ignore"):
        end = run(np.zeros(2), np.ones(2), 0.5, 10, explosive)
    assert end.failed

"""Riemannian dynamics on a surrogate: curvature, SoftAbs metrics, the generalized leapfrog.

The known metric is a small random network with a quadratic base (a ``RidgeForm`` built by
hand), non-convex enough that SoftAbs has negative eigenvalues to lift. Its derivatives are
checked against central differences; the integrator against its defining properties.
"""

from types import SimpleNamespace

import numpy as np
import pytest

from pymc_rnshmc.hmc.corrections import Evaluation, ExactMetropolis
from pymc_rnshmc.hmc.generalized_leapfrog import SolverSettings, integrate, returns_to_start
from pymc_rnshmc.hmc.riemannian_metric import SurrogateGeometry, softabs
from pymc_rnshmc.hmc.riemannian_proposal import RiemannianProposal
from pymc_rnshmc.hmc.transition import CachedPoint, surrogate_transition
from pymc_rnshmc.surrogates.network.activations import ACTIVATIONS
from pymc_rnshmc.surrogates.network.curvature import RidgeForm

DIM = 3
KINDS = pytest.mark.parametrize("kind", ["softabs", "diagonal"])


def ridge_form(activation="tanh", seed=0, units=6, dim=DIM, base_shift=0.5) -> RidgeForm:
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(dim, dim))
    return RidgeForm(
        weights=rng.normal(size=(units, dim)),
        biases=rng.normal(size=units),
        coefficients=2.0 * rng.normal(size=units),
        activation=ACTIVATIONS[activation],
        base_hessian=base @ base.T / dim + base_shift * np.eye(dim),
        base_linear=rng.normal(size=dim),
        centre=rng.normal(size=dim),
        offset=0.3,
    )


def central_difference(function, position, h=1e-5):
    columns = []
    for i in range(position.size):
        shift = np.zeros_like(position)
        shift[i] = h
        columns.append(
            (np.asarray(function(position + shift)) - function(position - shift)) / (2 * h)
        )
    return np.stack(columns, axis=-1)


def dense_softabs_matrix(form, position, alpha):
    eigenvalues, vectors = np.linalg.eigh(form.at(position).hessian)
    return vectors @ np.diag(softabs(eigenvalues, alpha)[0]) @ vectors.T


def metric_matrix(form, position, kind, alpha):
    if kind == "diagonal":
        return np.diag(softabs(form.at(position, diagonal=True).hessian, alpha)[0])
    return dense_softabs_matrix(form, position, alpha)


@pytest.mark.parametrize("activation", ["softplus", "tanh", "logistic", "cosine"])
def test_activation_higher_derivatives_match_differences(activation):
    entry = ACTIVATIONS[activation]
    x = np.linspace(-3, 3, 13)
    first, second, third = entry.higher_derivatives(x)
    np.testing.assert_allclose(first, entry.derivative(x), atol=1e-12)
    np.testing.assert_allclose(
        second, central_difference(lambda v: entry.derivative(v), x).diagonal(), atol=1e-7
    )
    np.testing.assert_allclose(
        third, central_difference(lambda v: entry.higher_derivatives(v)[1], x).diagonal(), atol=1e-7
    )


def test_curvature_is_the_potentials_second_and_third_derivative():
    form = ridge_form()
    position = np.array([0.2, -0.4, 0.7])
    local = form.at(position)
    np.testing.assert_allclose(
        local.gradient, central_difference(form.potential, position), atol=1e-7
    )
    hessian = central_difference(lambda q: form.at(q).gradient, position)
    np.testing.assert_allclose(local.hessian, hessian, atol=1e-6)
    np.testing.assert_allclose(form.at(position, diagonal=True).hessian, np.diag(local.hessian))
    derivative = central_difference(lambda q: form.at(q).hessian, position)  # (d, d, d): last is i
    contracted = np.einsum(
        "k,ki,kj,kl->jli", local.third, local.weights, local.weights, local.weights
    )
    np.testing.assert_allclose(contracted, derivative, atol=1e-6)


def test_softabs_is_smooth_at_zero_and_the_absolute_value_far_from_it():
    eigenvalues = np.array([-50.0, -1e-9, 0.0, 1e-7, 2e-5, 3.0])
    values, slopes = softabs(eigenvalues, alpha=1e4)
    np.testing.assert_allclose(values[[0, -1]], [50.0, 3.0])
    assert np.all(values >= 1e-4 - 1e-12)
    numeric = central_difference(lambda v: softabs(v, 1e4)[0], eigenvalues, h=1e-9).diagonal()
    np.testing.assert_allclose(slopes, numeric, atol=1e-4)


@KINDS
def test_the_metric_derivatives_match_differences_of_the_metric(kind):
    form, alpha = ridge_form(base_shift=-2.0), 5.0
    geometry = SurrogateGeometry(form, kind, alpha)
    position = np.array([0.2, -0.4, 0.7])
    local = geometry.at(position)
    hessian = form.at(position).hessian
    assert np.linalg.eigvalsh(hessian).min() < 0  # SoftAbs has work to do
    if kind == "diagonal":
        assert np.diag(hessian).min() < 0
    matrix = metric_matrix(form, position, kind, alpha)
    momentum = np.array([0.5, -1.2, 0.8])
    np.testing.assert_allclose(
        local.velocity(momentum), np.linalg.solve(matrix, momentum), rtol=1e-10
    )
    log_det = np.linalg.slogdet(matrix)[1]
    assert local.kinetic(momentum) == pytest.approx(
        0.5 * log_det + 0.5 * momentum @ np.linalg.solve(matrix, momentum), rel=1e-10
    )
    derivative = central_difference(lambda q: metric_matrix(form, q, kind, alpha), position, h=1e-6)
    velocity = np.linalg.solve(matrix, momentum)
    nu = np.einsum("j,jli,l->i", velocity, derivative, velocity)
    np.testing.assert_allclose(local.nu(momentum), nu, atol=1e-6)
    log_det_gradient = central_difference(
        lambda q: np.linalg.slogdet(metric_matrix(form, q, kind, alpha))[1], position, h=1e-6
    )
    np.testing.assert_allclose(
        local.phi_gradient, local.gradient + 0.5 * log_det_gradient, atol=1e-6
    )


def test_momenta_have_the_metric_as_covariance():
    geometry = SurrogateGeometry(ridge_form(), "softabs", 5.0)
    local = geometry.at(np.zeros(DIM))
    rng = np.random.default_rng(1)
    draws = np.stack([local.random(rng) for _ in range(40_000)])
    matrix = metric_matrix(ridge_form(), np.zeros(DIM), "softabs", 5.0)
    np.testing.assert_allclose(np.cov(draws.T), matrix, atol=0.05 * np.abs(matrix).max())


def step_map(geometry, settings, step_size, n_steps):
    def flow(state):
        position, momentum = state[:DIM], state[DIM:]
        end = integrate(
            position, momentum, geometry.at(position), step_size, n_steps, geometry, settings
        )
        assert end.converged and not end.failed
        return np.concatenate([end.position, end.momentum])

    return flow


@KINDS
def test_the_generalized_leapfrog_is_reversible(kind):
    geometry, settings = SurrogateGeometry(ridge_form(), kind, 5.0), SolverSettings(1e-12, 200)
    flow = step_map(geometry, settings, step_size=0.1, n_steps=8)
    start = np.array([0.2, -0.4, 0.7, 0.5, -1.2, 0.8])
    end = flow(start)
    assert np.max(np.abs(end - start)) > 0.1
    back = flow(np.concatenate([end[:DIM], -end[DIM:]]))
    np.testing.assert_allclose(back, np.concatenate([start[:DIM], -start[DIM:]]), atol=1e-9)


@KINDS
def test_the_generalized_leapfrog_preserves_volume(kind):
    geometry, settings = SurrogateGeometry(ridge_form(), kind, 5.0), SolverSettings(1e-13, 300)
    flow = step_map(geometry, settings, step_size=0.1, n_steps=5)
    jacobian = central_difference(flow, np.array([0.2, -0.4, 0.7, 0.5, -1.2, 0.8]), h=1e-5)
    assert np.linalg.det(jacobian) == pytest.approx(1.0, abs=1e-6)


def test_the_generalized_leapfrog_conserves_the_hamiltonian_to_second_order():
    form = ridge_form(activation="softplus")
    geometry, settings = SurrogateGeometry(form, "softabs", 5.0), SolverSettings(1e-12, 200)
    position, momentum = np.array([0.2, -0.4, 0.7]), np.array([0.5, -1.2, 0.8])
    local = geometry.at(position)
    start = local.potential + local.kinetic(momentum)
    errors = []
    for step_size in (0.04, 0.02):
        end = integrate(
            position, momentum, local, step_size, round(0.4 / step_size), geometry, settings
        )
        errors.append(abs(end.local.potential + end.local.kinetic(end.momentum) - start))
    assert errors[1] < errors[0] / 3  # second order: a quarter, up to the solver's tolerance


def test_a_step_too_large_does_not_converge_and_says_so():
    geometry = SurrogateGeometry(ridge_form(), "softabs", 5.0)
    position, momentum = np.array([0.2, -0.4, 0.7]), np.array([5.0, -12.0, 8.0])
    end = integrate(
        position, momentum, geometry.at(position), 3.0, 4, geometry, SolverSettings(1e-12, 20)
    )
    assert not end.converged or end.failed


def test_the_reversibility_check_passes_where_the_solves_converge():
    geometry, settings = SurrogateGeometry(ridge_form(), "softabs", 5.0), SolverSettings(1e-11, 200)
    position, momentum = np.array([0.2, -0.4, 0.7]), np.array([0.5, -1.2, 0.8])
    end = integrate(position, momentum, geometry.at(position), 0.1, 6, geometry, settings)
    assert returns_to_start(end, position, momentum, 0.1, geometry, settings, 1e-8)[0]
    assert not returns_to_start(end, position + 1e-3, momentum, 0.1, geometry, settings, 1e-8)[0]


def test_a_proposal_reports_its_solves_and_the_metric_at_its_start():
    geometry = SurrogateGeometry(ridge_form(), "softabs", 5.0)
    proposal = RiemannianProposal(
        geometry, path_length=0.6, max_steps=100, settings=SolverSettings()
    )
    position = np.array([0.2, -0.4, 0.7])
    move = proposal.propose(position, None, None, 0.1, np.random.default_rng(3))
    assert not (move.failed or move.unconverged or move.irreversible)
    assert 2 <= move.solver_iterations < 60
    local = geometry.at(position)
    assert move.metric_range == local.eigenvalue_range()
    assert move.start_kinetic >= 0.5 * local.log_det
    assert np.isfinite(move.end_kinetic)
    again = proposal.propose(position, None, None, 0.1, np.random.default_rng(3))
    np.testing.assert_array_equal(again.position, move.position)  # deterministic given the seed


def test_an_unconverged_trajectory_is_rejected_without_evaluating_the_model_nor_diverging():
    geometry = SurrogateGeometry(ridge_form(), "softabs", 5.0)
    proposal = RiemannianProposal(geometry, 0.6, 100, SolverSettings(1e-12, max_iterations=1))
    position = np.array([0.2, -0.4, 0.7])
    start = CachedPoint(position, -geometry.form.potential(position), ())
    evaluations = []
    result = surrogate_transition(
        start,
        proposal,
        ExactMetropolis(1000.0),
        SimpleNamespace(exact_points=0),  # the geometry supplies every force
        0.1,
        np.random.default_rng(5),
        evaluate=lambda q: evaluations.append(q) or Evaluation(q, -geometry.form.potential(q)),
        surrogate_potential=geometry.form.potential,
        cast=lambda q: q,
        extras=(),
        diagnose=True,
    )
    assert result.unconverged and not result.irreversible
    assert not result.accepted and result.divergence is None and not evaluations
    assert result.integrator_accept == 0.0  # the step size adapts down on it
    np.testing.assert_array_equal(result.end.position, position)

"""The elliptic PDE forward model, its adjoint gradient and the PyMC model built on it."""

import itertools

import cloudpickle
import numpy as np
import pymc as pm
import pytensor
import pytest

from pymc_rnshmc.workloads.elliptic_pde import forward_model as pde
from pymc_rnshmc.workloads.elliptic_pde.forward_model import (
    EllipticPDEForwardModel,
    KarhunenLoeveExpansion,
    observation_points,
    synthetic_data,
)
from pymc_rnshmc.workloads.elliptic_pde.ops import (
    EllipticPDEObservations,
    elliptic_pde,
    sparse_grid_elliptic_pde,
)

EXPANSION = KarhunenLoeveExpansion(20)


def constant_diffusivity_solution(points: np.ndarray, n_terms: int = 2000) -> np.ndarray:
    """Cosine-series solution of the problem for c = 1 (theta = 0).

    Every term ``cos(k pi x1) sinh(k pi x2)`` is harmonic and has zero x1-derivative at
    x1 = 0 and 1; the odd-k coefficients 4 / (k pi)^2 expand x1 - 1/2 and 1/2 - x1 in cosines,
    so ``1/2 + sum`` meets u = x1 at x2 = 0 and u = 1 - x1 at x2 = 1. (The bilinear
    x1 + x2 - 2 x1 x2 is harmonic and meets the Dirichlet data but not the Neumann condition.)
    ``sinh(a x2) / sinh(a)`` is written with exponentials so large k does not overflow.
    """
    first, second = points[:, 0], points[:, 1]
    k = np.arange(1, 2 * n_terms, 2)[:, None] * np.pi

    def sinh_ratio(x):
        return np.exp(k * (x - 1.0)) * (1.0 - np.exp(-2.0 * k * x)) / (1.0 - np.exp(-2.0 * k))

    terms = 4.0 / k**2 * np.cos(k * first) * (sinh_ratio(second) - sinh_ratio(1.0 - second))
    return 0.5 + terms.sum(axis=0)


def test_karhunen_loeve_eigenvalues_decrease_and_eigenfunctions_are_orthonormal():
    eigenvalues = EXPANSION.eigenvalues
    assert np.all(np.diff(eigenvalues) <= 0.0) and eigenvalues[-1] > 0.0
    # The trace of the covariance operator is variance * area = 1.
    assert np.isclose(EXPANSION.eigenvalues_1d.sum() ** 2, 1.0, atol=1e-10)
    finer = KarhunenLoeveExpansion(20, n_quadrature=80)
    np.testing.assert_allclose(finer.eigenvalues, eigenvalues, rtol=1e-10)

    nodes, weights = EXPANSION.nodes, EXPANSION.weights
    second, first = np.meshgrid(nodes, nodes, indexing="ij")
    values = EXPANSION.eigenfunctions(np.column_stack([first.ravel(), second.ravel()]))
    gram = values.T @ (np.outer(weights, weights).ravel()[:, None] * values)
    np.testing.assert_allclose(gram, np.eye(20), atol=1e-10)

    # The interpolated eigenfunctions solve the integral equation at points off the nodes.
    points = np.random.default_rng(0).uniform(size=(5, 2))
    kernel = np.exp(
        -((points[:, 0, None] - first.ravel()) ** 2 + (points[:, 1, None] - second.ravel()) ** 2)
        / (2.0 * 0.2**2)
    )
    integral = kernel @ (np.outer(weights, weights).ravel()[:, None] * values)
    np.testing.assert_allclose(integral, EXPANSION.eigenfunctions(points) * eigenvalues, atol=1e-9)


def test_observation_matrix_interpolates_bilinear_functions_exactly():
    model = EllipticPDEForwardModel(n_cells=7, expansion=EXPANSION)  # points off the nodes
    first, second = model.node_coordinates.T
    points = observation_points()
    nodal = 0.3 - 1.2 * first + 0.7 * second + 2.1 * first * second
    expected = 0.3 - 1.2 * points[:, 0] + 0.7 * points[:, 1] + 2.1 * points[:, 0] * points[:, 1]
    np.testing.assert_allclose(model.observation_matrix @ nodal, expected, atol=1e-13)


def test_constant_diffusivity_matches_series_solution_at_second_order():
    points = observation_points(11)
    inside = (points[:, 1] > 0.0) & (points[:, 1] < 1.0)
    exact = constant_diffusivity_solution(points[inside])
    errors = []
    for n_cells in (10, 20, 40):
        model = EllipticPDEForwardModel(n_cells, 3)
        solution = model.solve(np.zeros(3))
        boundary = model.node_coordinates[:, 1] == 0.0
        np.testing.assert_allclose(solution[boundary], model.node_coordinates[boundary, 0])
        errors.append(np.abs(model.observe(np.zeros(3))[inside] - exact).max())
    assert errors[-1] < 1e-3
    rates = np.log2(np.array(errors[:-1]) / errors[1:])
    assert np.all(rates > 1.8), (errors, rates)


def test_random_diffusivity_converges_at_second_order_under_refinement():
    theta = 0.5 * np.random.default_rng(3).standard_normal(20)
    observed = [
        EllipticPDEForwardModel(n_cells, expansion=EXPANSION).observe(theta)
        for n_cells in (10, 20, 40, 80)
    ]
    changes = np.array([np.abs(b - a).max() for a, b in itertools.pairwise(observed)])
    assert changes[-1] < 5e-4
    rates = np.log2(changes[:-1] / changes[1:])
    assert np.all(rates > 1.8), (changes, rates)


def test_adjoint_gradient_matches_central_finite_differences():
    model = EllipticPDEForwardModel(30, expansion=EXPANSION)
    data = synthetic_data(expansion=EXPANSION, seed=11)
    theta = 0.5 * np.random.default_rng(5).standard_normal(20)
    _, gradient = model.gaussian_log_likelihood(theta, data.observations, 0.1)
    step = 1e-6
    finite_differences = np.array(
        [
            model.gaussian_log_likelihood(theta + step * unit, data.observations, 0.1)[0]
            - model.gaussian_log_likelihood(theta - step * unit, data.observations, 0.1)[0]
            for unit in np.eye(20)
        ]
    ) / (2.0 * step)
    relative = np.abs(finite_differences - gradient).max() / np.abs(gradient).max()
    assert relative < 1e-5, relative

    cotangent = np.random.default_rng(6).standard_normal(model.n_observations)
    observations, product = model.observe_and_vjp(theta, cotangent)
    np.testing.assert_allclose(observations, model.observe(theta))
    jacobian_column = (model.observe(theta + step * np.eye(20)[4]) - observations) / step
    np.testing.assert_allclose(product[4], cotangent @ jacobian_column, rtol=1e-4)


def test_overflowing_diffusivity_gives_nan_not_an_exception():
    model = EllipticPDEForwardModel(6, 3)
    theta = np.array([5000.0, 0.0, 0.0])
    assert np.all(np.isnan(model.observe(theta)[12:-12]))
    assert np.all(np.isnan(model.vector_jacobian_product(theta, np.ones(121))))


def test_synthetic_data_are_reproducible_and_noisy_at_the_stated_level():
    first, second = synthetic_data(seed=4), synthetic_data(seed=4)
    np.testing.assert_array_equal(first.observations, second.observations)
    noise = first.observations - first.noiseless
    assert 0.08 < noise.std() < 0.12
    assert np.abs(first.true_theta).max() < 2.0  # drawn with sd 0.5


def test_pytensor_gradient_is_the_adjoint_vector_jacobian_product():
    forward = EllipticPDEForwardModel(10, 4)
    rng = np.random.default_rng(8)
    pytensor.gradient.verify_grad(
        EllipticPDEObservations(forward), [0.5 * rng.standard_normal(4)], rng=rng, eps=1e-6
    )


def test_model_logp_gradient_matches_finite_differences_with_one_factorization(monkeypatch):
    model = elliptic_pde(n_modes=6, n_cells=10, data_cells=20)
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    theta = 0.4 * np.random.default_rng(9).standard_normal(6)
    gradient = dlogp({"theta": theta})
    step = 1e-6
    finite_differences = np.array(
        [
            logp({"theta": theta + step * unit}) - logp({"theta": theta - step * unit})
            for unit in np.eye(6)
        ]
    ) / (2.0 * step)
    np.testing.assert_allclose(gradient, finite_differences, rtol=1e-6, atol=1e-6)

    factorizations = []
    original = pde.cholesky_banded

    def counted_cholesky(*args, **kwargs):
        factorizations.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(pde, "cholesky_banded", counted_cholesky)
    function = model.logp_dlogp_function(ravel_inputs=True)
    function.set_extra_values({})
    value, joint_gradient = function(theta + 0.1)
    assert len(factorizations) == 1
    assert np.isclose(value, logp({"theta": theta + 0.1}))
    np.testing.assert_allclose(joint_gradient, dlogp({"theta": theta + 0.1}))


def test_model_pickles_and_samples_with_nuts():
    original = sparse_grid_elliptic_pde(n_cells=8, data_cells=16)
    restored = cloudpickle.loads(cloudpickle.dumps(original))
    point = {"theta": np.linspace(-1.0, 1.0, 5)}
    assert np.isclose(restored.compile_logp()(point), original.compile_logp()(point))
    model = elliptic_pde(n_modes=3, n_cells=8, data_cells=16, seed=1)
    with model:
        idata = pm.sample(
            step=pm.NUTS(),
            tune=100,
            draws=50,
            chains=1,
            random_seed=2,
            progressbar=False,
            compute_convergence_checks=False,
        )
    draws = idata.posterior["theta"].values
    assert draws.shape == (1, 50, 3) and np.all(np.isfinite(draws))
    assert np.unique(draws[0, :, 0]).size > 10
    assert idata.sample_stats["diverging"].sum() == 0


def test_observation_points_fall_on_mesh_nodes_when_cells_divide_by_ten():
    n_cells = 30
    model = EllipticPDEForwardModel(n_cells, expansion=EXPANSION)
    theta = np.random.default_rng(12).standard_normal(20) * 0.5
    nodal = model.solve(theta)
    on_nodes = np.round(observation_points() * n_cells).astype(int)
    np.testing.assert_allclose(
        model.observe(theta), nodal[on_nodes[:, 1] * (n_cells + 1) + on_nodes[:, 0]], atol=1e-12
    )


def test_black_box_model_has_the_default_logp_and_no_gradient():
    default = elliptic_pde(n_modes=4, n_cells=8, data_cells=16)
    black_box = elliptic_pde(n_modes=4, n_cells=8, data_cells=16, gradient=False)
    point = {"theta": np.array([0.3, -0.2, 0.5, 0.1])}
    assert black_box.compile_logp()(point) == default.compile_logp()(point)
    assert np.all(np.isfinite(default.compile_dlogp()(point)))
    with pytest.raises(NotImplementedError, match="gradient=False"):
        pytensor.gradient.grad(black_box.logp(), black_box.value_vars)
    restored = cloudpickle.loads(cloudpickle.dumps(black_box))
    assert restored.compile_logp()(point) == default.compile_logp()(point)

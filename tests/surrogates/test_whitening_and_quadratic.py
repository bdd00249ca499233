import numpy as np
import pytest

from pymc_rnshmc.surrogates.quadratic import QuadraticPotential
from pymc_rnshmc.surrogates.whitening import Whitening


def test_whitening_gives_identity_covariance_and_round_trips():
    rng = np.random.default_rng(0)
    covariance = np.array([[4.0, 1.9], [1.9, 1.0]])
    positions = rng.multivariate_normal([10.0, -3.0], covariance, size=5000)
    whitening = Whitening.from_positions(positions)
    whitened = whitening.to_whitened(positions)
    np.testing.assert_allclose(whitened.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(np.cov(whitened.T), np.eye(2), atol=0.02)
    np.testing.assert_allclose(whitening.from_whitened(whitened), positions, atol=1e-10)


def test_gradient_chain_rule_both_ways():
    rng = np.random.default_rng(1)
    whitening = Whitening.from_positions(rng.normal(size=(50, 3)) * [1.0, 10.0, 0.1])
    matrix = rng.normal(size=(3, 3))

    def potential_q(q):
        return 0.5 * np.sum((q @ matrix) ** 2)

    q = rng.normal(size=3)
    gradient_q = matrix @ (matrix.T @ q)
    z = whitening.to_whitened(q)
    eps = 1e-6
    numeric_z = np.array(
        [
            (
                potential_q(whitening.from_whitened(z + eps * e))
                - potential_q(whitening.from_whitened(z - eps * e))
            )
            / (2 * eps)
            for e in np.eye(3)
        ]
    )
    np.testing.assert_allclose(whitening.gradient_to_whitened(gradient_q), numeric_z, rtol=1e-6)
    np.testing.assert_allclose(whitening.gradient_from_whitened(numeric_z), gradient_q, rtol=1e-6)


def test_degenerate_positions_still_whiten():
    positions = np.zeros((30, 3))
    positions[:, 0] = np.linspace(0, 1, 30)
    positions[:, 1] = 5.0  # never moves
    positions[:, 2] = 2 * positions[:, 0]  # perfectly collinear
    whitening = Whitening.from_positions(positions)
    assert np.all(np.isfinite(whitening.inverse_factor))
    assert np.all(np.isfinite(whitening.to_whitened(positions)))
    with pytest.raises(ValueError, match="two positions"):
        Whitening.from_positions(np.zeros((1, 3)))


def test_quadratic_fit_recovers_a_quadratic_exactly():
    rng = np.random.default_rng(2)
    hessian = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, -0.2], [0.0, -0.2, 0.5]])
    linear = np.array([0.1, -1.0, 2.0])
    points = rng.normal(size=(40, 3))
    gradients = points @ hessian + linear
    fit = QuadraticPotential.fit(points, gradients)
    np.testing.assert_allclose(fit.hessian, hessian, atol=1e-8)
    np.testing.assert_allclose(fit.linear, linear, atol=1e-8)
    np.testing.assert_allclose(fit.gradient(points), gradients, atol=1e-8)


def test_quadratic_fit_floors_negative_curvature():
    rng = np.random.default_rng(3)
    points = rng.normal(size=(40, 2))
    gradients = points @ np.diag([1.0, -1.0])  # a saddle
    fit = QuadraticPotential.fit(points, gradients, min_curvature=0.05)
    assert np.min(np.linalg.eigvalsh(fit.hessian)) >= 0.05 - 1e-12


def random_quadratic(rng, dim):
    root = rng.normal(size=(dim, dim)) / np.sqrt(dim)
    return root @ root.T + 0.5 * np.eye(dim), rng.normal(size=dim)


def quadratic_values(points, hessian, linear, constant=0.0):
    return 0.5 * np.sum((points @ hessian) * points, axis=1) + points @ linear + constant


def test_quadratic_fit_to_values_recovers_a_quadratic_exactly():
    rng = np.random.default_rng(4)
    hessian, linear = random_quadratic(rng, 4)
    points = rng.normal(size=(60, 4))  # 15 + 4 + 1 = 20 features
    fit = QuadraticPotential.fit_to_values(points, quadratic_values(points, hessian, linear, 7.0))
    np.testing.assert_allclose(fit.hessian, hessian, atol=1e-6)
    np.testing.assert_allclose(fit.linear, linear, atol=1e-6)
    np.testing.assert_allclose(fit.hessian, fit.hessian.T)


def test_quadratic_fit_to_values_floors_a_saddle_and_refits_the_linear_part():
    rng = np.random.default_rng(5)
    points = rng.normal(size=(80, 2))
    hessian = np.diag([1.0, -1.0])  # a saddle
    values = quadratic_values(points, hessian, np.array([0.5, -0.3]))
    fit = QuadraticPotential.fit_to_values(points, values, min_curvature=0.05)
    np.testing.assert_allclose(np.linalg.eigvalsh(fit.hessian), [0.05, 1.0], atol=1e-6)
    # b is the least-squares linear part given the floored A: the residual is orthogonal to
    # the linear features and the constant.
    residual = values - fit.potential(points)
    design = np.column_stack([points, np.ones(len(points))])
    residual -= residual.mean()
    np.testing.assert_allclose(design.T @ residual, 0.0, atol=1e-8 * np.abs(values).sum())


def test_quadratic_fit_to_values_works_with_fewer_points_than_features():
    rng = np.random.default_rng(6)
    dim = 20  # 231 features
    perturbation = 0.1 * rng.normal(size=(dim, dim))
    hessian = np.eye(dim) + 0.5 * (perturbation + perturbation.T)
    linear = 0.3 * rng.normal(size=dim)
    points = rng.normal(size=(150, dim))
    fit = QuadraticPotential.fit_to_values(points, quadratic_values(points, hessian, linear))
    assert np.all(np.isfinite(fit.hessian))
    assert np.min(np.linalg.eigvalsh(fit.hessian)) >= 1e-2 - 1e-12
    # better than the identity it is shrunk towards, on points it has not seen
    test = rng.normal(size=(500, dim))
    exact = quadratic_values(test, hessian, linear)
    identity_error = np.std(exact - 0.5 * np.sum(test**2, axis=1))
    assert np.std(exact - fit.potential(test)) < 0.75 * identity_error


def test_quadratic_fit_to_values_counts_repeated_positions_once():
    rng = np.random.default_rng(7)
    points = rng.normal(size=(30, 3))
    values = np.sum(points**2, axis=1) + np.sin(points[:, 0])
    once = QuadraticPotential.fit_to_values(points, values)
    repeats = np.repeat(np.arange(30), rng.integers(1, 5, size=30))  # rejections of a chain
    twice = QuadraticPotential.fit_to_values(points[repeats], values[repeats])
    np.testing.assert_allclose(twice.hessian, once.hessian, atol=1e-10)
    np.testing.assert_allclose(twice.linear, once.linear, atol=1e-10)


def test_the_quadratic_of_a_gaussian_gives_its_potential_differences():
    rng = np.random.default_rng(3)
    mean = np.array([0.5, -1.0, 2.0])
    factor = rng.normal(size=(3, 3)) + 2 * np.eye(3)
    covariance = factor @ factor.T
    quadratic = QuadraticPotential.from_gaussian(mean, covariance)
    points = rng.normal(size=(5, 3))
    deviations = points - mean
    exact = 0.5 * np.sum(deviations @ np.linalg.inv(covariance) * deviations, axis=1)
    np.testing.assert_allclose(
        quadratic.potential(points) - quadratic.potential(mean), exact, rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(quadratic.gradient(mean), 0.0, atol=1e-10)


def ridge_positions(n_points=150, correlation=-0.99999, seed=0):
    """Draws of a Gaussian ridge like posteriordb's kilpisjarvi (scales 30 and 0.0073)."""
    scales = np.array([30.0, 0.0073, 0.1])
    correlations = np.eye(3)
    correlations[0, 1] = correlations[1, 0] = correlation
    covariance = correlations * np.outer(scales, scales)
    rng = np.random.default_rng(seed)
    return rng.multivariate_normal([0.0, 0.02, 0.0], covariance, size=n_points), covariance


def test_whitening_keeps_a_ridge_narrow():
    """Shrinking the correlation -0.99999 by 4/150 in ``r`` widened the ridge 3000-fold."""
    positions, covariance = ridge_positions()
    whitening = Whitening.from_positions(positions)
    factor = whitening.cholesky_factor
    # the true covariance in the whitened coordinates: identity if the whitening fits it
    whitened_covariance = whitening.inverse_factor @ covariance @ whitening.inverse_factor.T
    eigenvalues = np.linalg.eigvalsh(whitened_covariance)
    assert 0.5 < eigenvalues.min() and eigenvalues.max() < 2.0
    # the marginal scales are the sample's
    np.testing.assert_allclose(
        np.sqrt(np.diag(factor @ factor.T)), np.std(positions, axis=0, ddof=1), rtol=1e-10
    )


def test_whitening_with_as_few_points_as_dimensions_is_diagonal():
    rng = np.random.default_rng(2)
    positions = rng.normal(size=(4, 3)) * [1.0, 10.0, 0.1]
    factor = Whitening.from_positions(positions).cholesky_factor
    np.testing.assert_allclose(factor, np.diag(np.std(positions, axis=0, ddof=1)))


def test_whitening_of_collinear_coordinates_falls_back_to_a_definite_factor():
    rng = np.random.default_rng(3)
    first = rng.normal(size=40)
    positions = np.column_stack([first, 2.0 * first, rng.normal(size=40)])
    whitening = Whitening.from_positions(positions)
    assert np.all(np.isfinite(whitening.inverse_factor))
    assert np.all(np.diag(whitening.cholesky_factor) > 0)

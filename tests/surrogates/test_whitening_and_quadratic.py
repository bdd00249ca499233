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

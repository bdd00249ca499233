"""The sparse-grid surrogate over a box: placement, accuracy, and reversible dynamics across
the box's boundary."""

import numpy as np
import pytest

from pymc_rnshmc.exceptions import SurrogateFitError
from pymc_rnshmc.hmc.leapfrog import leapfrog
from pymc_rnshmc.surrogates.grid.domain import DomainBox, half_width_for_mass, laplace_approximation
from pymc_rnshmc.surrogates.grid.sparse_grid_surrogate import SparseGridSurrogate
from tests.surrogates.network.test_random_network import banana_potential

PRECISION = np.array([[2.0, 0.9], [0.9, 1.0]])
MODE = np.array([1.0, -2.0])


def gaussian_rows(points):
    centred = np.atleast_2d(points) - MODE
    return 0.5 * np.sum((centred @ PRECISION) * centred, axis=1)


def gaussian_gradient(point):
    return (point - MODE) @ PRECISION


def banana_rows(points):
    return banana_potential(points)[0]


def banana_gradient(point):
    return banana_potential(point)[1][0]


def gaussian_both(point):
    return float(gaussian_rows(point)[0]), gaussian_gradient(point)


def both(rows, gradient):
    return lambda point: (float(rows(point)[0]), gradient(point))


@pytest.fixture(scope="module")
def draws():
    rng = np.random.default_rng(4)
    return rng.multivariate_normal(MODE, np.linalg.inv(PRECISION), size=400)


def fitted(rows, gradient, positions, **options):
    options.setdefault("level", 4)
    surrogate = SparseGridSurrogate(
        exact_potential=rows, exact_potential_and_gradient=both(rows, gradient), **options
    )
    return surrogate.fit(positions, rows(positions))


def test_the_laplace_box_of_a_gaussian_is_its_exact_mode_and_covariance(draws):
    surrogate = fitted(gaussian_rows, gaussian_gradient, draws)
    np.testing.assert_allclose(surrogate.box.centre, MODE, atol=1e-5)
    covariance = surrogate.box.factor @ surrogate.box.factor.T
    np.testing.assert_allclose(covariance, np.linalg.inv(PRECISION), rtol=1e-4)
    # the quadratic base is the Laplace potential itself: the interpolant has nothing left
    inside = draws[surrogate.contains(draws)]
    np.testing.assert_allclose(surrogate.potential(inside), gaussian_rows(inside), atol=1e-6)
    for point in inside[:20]:
        np.testing.assert_allclose(surrogate.gradient(point), gaussian_gradient(point), atol=1e-4)


def test_the_box_holds_the_requested_mass():
    rng = np.random.default_rng(5)
    for dim, mass in [(1, 0.9), (3, 0.99), (5, 0.999)]:
        points = rng.normal(size=(200_000, dim))
        inside = np.max(np.abs(points), axis=1) <= half_width_for_mass(dim, mass)
        assert inside.mean() == pytest.approx(mass, abs=3e-3)


def test_a_box_from_draws_holds_that_many_of_them(draws):
    box = DomainBox.from_draws(draws, 0.95)
    whitened = (draws - box.centre) @ box.inverse_factor.T
    assert np.mean(np.max(np.abs(whitened), axis=1) <= box.half_width) >= 0.95


def test_banana_error_shrinks_with_level_and_matches_the_surplus_estimate():
    rng = np.random.default_rng(6)
    x = rng.normal(size=2000)
    points = np.stack([x, 0.5 * x**2 + rng.normal(0.0, 0.5, size=2000)], axis=1)
    errors = []
    for level in (3, 5, 7):
        surrogate = fitted(
            banana_rows, banana_gradient, points, level=level, domain="exploration", mass=0.99
        )
        inside = points[surrogate.contains(points)]
        error = np.max(np.abs(surrogate.potential(inside) - banana_rows(inside)))
        errors.append(error)
        # the finest surpluses are an error estimate of the right order
        assert surrogate.report.error_estimate < 20 * error + 1e-12
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.02


def test_the_gradient_is_that_of_the_interpolated_potential():
    rng = np.random.default_rng(7)
    points = rng.normal(size=(500, 2)) * [1.0, 1.5] + [0.0, 0.5]
    surrogate = fitted(banana_rows, banana_gradient, points, domain="exploration", mass=0.99)
    for point in points[surrogate.contains(points)][:30]:
        step = 1e-7
        numeric = [
            (surrogate.potential(point + step * e) - surrogate.potential(point - step * e))
            / (2 * step)
            for e in np.eye(2)
        ]
        np.testing.assert_allclose(surrogate.gradient(point), numeric, rtol=1e-4, atol=1e-5)


def test_outside_the_box_the_surrogate_defers_to_the_exact_potential(draws):
    surrogate = fitted(gaussian_rows, gaussian_gradient, draws, mass=0.5)
    far = MODE + 10.0
    assert not surrogate.contains(far)
    assert np.isnan(surrogate.potential(far))
    assert np.isnan(surrogate.gradient(far)).all()
    rows = surrogate.gradient(np.stack([MODE, far]))
    assert np.isfinite(rows[0]).all() and np.isnan(rows[1]).all()


def test_leapfrog_across_the_boundary_is_reversible_and_volume_preserving():
    rng = np.random.default_rng(8)
    x = rng.normal(size=1000)
    points = np.stack([x, 0.5 * x**2 + rng.normal(0.0, 0.5, size=1000)], axis=1)
    surrogate = fitted(banana_rows, banana_gradient, points, domain="exploration", mass=0.6)
    crossings = 0

    def force(position):  # eq. 3.11: interpolant inside, exact outside
        gradient = surrogate.gradient(position)
        return gradient if np.isfinite(gradient).all() else banana_gradient(position)

    def velocity(momentum):
        return momentum

    for start in points[:40]:
        momentum = rng.normal(size=2) * 2.0
        forward = leapfrog(start, momentum, force(start), 0.05, 60, force, velocity)
        backward = leapfrog(
            forward.position, -forward.momentum, forward.gradient, 0.05, 60, force, velocity
        )
        np.testing.assert_allclose(backward.position, start, atol=1e-9)
        np.testing.assert_allclose(-backward.momentum, momentum, atol=1e-9)
        path = [start + 0.0]
        trajectory = start
        for _ in range(3):
            trajectory = leapfrog(
                trajectory, momentum, force(trajectory), 0.05, 20, force, velocity
            )
            path.append(trajectory.position)
            momentum = trajectory.momentum
            trajectory = trajectory.position
        inside = [surrogate.contains(p) for p in path]
        crossings += len(set(inside)) > 1
    assert crossings > 5  # the test did exercise trajectories that cross the boundary

    # volume preservation: the Jacobian of the map (q, p) -> (q', p') has determinant 1
    start, momentum = points[0], np.array([1.5, -0.5])

    def flow(state):
        end = leapfrog(state[:2], state[2:], force(state[:2]), 0.05, 30, force, velocity)
        return np.concatenate([end.position, end.momentum])

    state = np.concatenate([start, momentum])
    jacobian = np.column_stack(
        [(flow(state + 1e-6 * e) - flow(state - 1e-6 * e)) / 2e-6 for e in np.eye(4)]
    )
    assert np.linalg.det(jacobian) == pytest.approx(1.0, abs=1e-3)


def test_grid_points_where_the_model_fails_get_a_plateau_at_the_highest_value(draws):
    def infinite_far_out(points):
        values = gaussian_rows(points)
        return np.where(np.atleast_2d(points)[:, 0] - MODE[0] > 1.0, np.inf, values)

    surrogate = fitted(infinite_far_out, gaussian_gradient, draws)
    inside = draws[surrogate.contains(draws)]
    predicted = surrogate.potential(inside)
    assert np.isfinite(predicted).all()
    working = inside[:, 0] - MODE[0] < -0.5  # away from the plateau's edge
    np.testing.assert_allclose(predicted[working], gaussian_rows(inside[working]), atol=0.05)


def test_a_model_failing_at_every_grid_point_is_a_clear_error(draws):
    def failing(points):
        return np.full(len(np.atleast_2d(points)), np.nan)

    surrogate = SparseGridSurrogate(
        level=4, exact_potential=failing, exact_potential_and_gradient=gaussian_both
    )
    with pytest.raises(SurrogateFitError, match="not finite at any"):
        surrogate.fit(draws, gaussian_rows(draws))


def test_laplace_finds_the_mode_from_a_poor_start():
    mode, covariance, evaluations = laplace_approximation(gaussian_both, MODE + 3.0, np.eye(2))
    np.testing.assert_allclose(mode, MODE, atol=1e-5)
    np.testing.assert_allclose(covariance, np.linalg.inv(PRECISION), rtol=1e-5)
    assert evaluations > 4


def test_laplace_copes_with_an_extreme_correlation_given_a_rough_covariance():
    # correlation -0.99999 and scales 1e3 apart, like posteriordb's kilpisjarvi
    scales = np.array([30.0, 0.015])
    correlation = np.array([[1.0, -0.99999], [-0.99999, 1.0]])
    covariance = correlation * np.outer(scales, scales)
    precision = np.linalg.inv(covariance)
    centre = np.array([-30.0, 0.02])

    def rows(points):
        centred = np.atleast_2d(points) - centre
        return 0.5 * np.sum((centred @ precision) * centred, axis=1)

    def gradient(point):
        return (point - centre) @ precision

    rng = np.random.default_rng(9)
    draws = rng.multivariate_normal(centre, covariance, size=100)
    rough = np.linalg.cholesky(np.cov(draws, rowvar=False))
    mode, found, _ = laplace_approximation(both(rows, gradient), draws[0], rough)
    assert np.all(np.abs(mode - centre) <= 1e-3 * scales), mode
    np.testing.assert_allclose(found, covariance, rtol=1e-3)


def test_auto_domain_keeps_the_laplace_box_of_a_gaussian_and_follows_a_banana(draws):
    gaussian = fitted(gaussian_rows, gaussian_gradient, draws, domain="auto")
    assert gaussian.report.domain == "laplace"
    rng = np.random.default_rng(11)
    x = rng.normal(size=600)
    curved = np.stack([x, 0.5 * x**2 + rng.normal(0.0, 0.5, size=600)], axis=1)
    banana = fitted(banana_rows, banana_gradient, curved, domain="auto", mass=0.99)
    assert banana.report.domain == "exploration"
    assert np.mean(banana.contains(curved)) >= 0.99
    assert banana.report.n_laplace_evaluations > 0  # it did try the Laplace box first


def test_the_simulation_extension_is_continuous_across_the_boundary():
    rng = np.random.default_rng(12)
    x = rng.normal(size=600)
    points = np.stack([x, 0.5 * x**2 + rng.normal(0.0, 0.5, size=600)], axis=1)
    surrogate = fitted(banana_rows, banana_gradient, points, domain="exploration", mass=0.6)
    extended = surrogate.extended_by_quadratic()
    box = surrogate.box
    for corner in ([1.0, 0.3], [-0.2, -1.0], [0.5, 1.0]):
        edge = box.position(np.array(corner) * box.half_width)
        normal = box.factor @ np.sign(np.round(corner))
        inside, outside = edge - 1e-9 * normal, edge + 1e-9 * normal
        assert surrogate.contains(inside) and not surrogate.contains(outside)
        assert extended.potential(outside) == pytest.approx(extended.potential(inside), abs=1e-6)
        np.testing.assert_allclose(
            extended.gradient(outside), extended.gradient(inside), rtol=1e-5, atol=1e-5
        )
    far = box.position(np.array([3.0, 0.0]) * box.half_width)
    assert np.isfinite(extended.potential(far)) and np.isfinite(extended.gradient(far)).all()

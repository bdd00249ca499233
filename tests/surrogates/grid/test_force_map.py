"""Naive grid HMC's force map: exact at the cell centres, reversible across the box's boundary,
and an error estimate that bounds the error of a quadratic potential."""

import numpy as np
import pytest

from pymc_rnshmc.exceptions import SurrogateFitError
from pymc_rnshmc.hmc.leapfrog import leapfrog
from pymc_rnshmc.surrogates.grid.force_map import ForceMapSurrogate
from tests.surrogates.grid.test_sparse_grid_surrogate import (
    MODE,
    banana_gradient,
    banana_rows,
    both,
    gaussian_gradient,
    gaussian_rows,
)


@pytest.fixture(scope="module")
def draws():
    rng = np.random.default_rng(14)
    precision = np.array([[2.0, 0.9], [0.9, 1.0]])
    return rng.multivariate_normal(MODE, np.linalg.inv(precision), size=400)


def force_map(rows, gradient, positions, cells=20, **options):
    surrogate = ForceMapSurrogate(
        cells, exact_potential=rows, exact_potential_and_gradient=both(rows, gradient), **options
    )
    return surrogate.fit(positions, rows(positions))


def cell_centres(surrogate):
    return surrogate.box.position(surrogate._centres)


def test_exact_force_and_potential_at_every_cell_centre(draws):
    surrogate = force_map(banana_rows, banana_gradient, draws, cells=9, domain="exploration")
    centres = cell_centres(surrogate)
    assert len(centres) == 81 == surrogate.report.n_points
    np.testing.assert_allclose(surrogate.potential(centres), banana_rows(centres), atol=1e-10)
    expected = np.array([banana_gradient(c) for c in centres])
    np.testing.assert_allclose(surrogate.gradient(centres), expected, atol=1e-10)


def test_the_force_is_constant_in_a_cell_and_the_potential_continuous(draws):
    surrogate = force_map(banana_rows, banana_gradient, draws, cells=7, domain="exploration")
    rng = np.random.default_rng(3)
    width = surrogate._cell_width
    for centre in surrogate._centres[::5]:
        inner = centre + rng.uniform(-0.45, 0.45, size=(5, 2)) * width
        forces = surrogate.gradient(surrogate.box.position(inner))
        np.testing.assert_allclose(forces, np.broadcast_to(forces[0], forces.shape))
        boundary = surrogate.box.position(centre + np.array([0.5, 0.1]) * width)
        step = surrogate.box.factor[:, 0] * 1e-9
        if surrogate.contains(boundary + 1e-6):
            assert surrogate.potential(boundary - step) == pytest.approx(
                surrogate.potential(boundary + step), abs=1e-6
            )


def test_the_potential_reproduces_a_bilinear_function(draws):
    surrogate = force_map(banana_rows, banana_gradient, draws, cells=5, domain="exploration")

    def bilinear(points):
        z = surrogate.box.whiten(np.atleast_2d(points))
        return 1.0 + 2.0 * z[:, 0] - z[:, 1] + 0.7 * z[:, 0] * z[:, 1]

    surrogate._values = bilinear(cell_centres(surrogate))
    inside = draws[surrogate.contains(draws)]
    np.testing.assert_allclose(surrogate.potential(inside), bilinear(inside), atol=1e-10)


def test_an_affine_potential_is_reproduced_everywhere_in_the_box(draws):
    slope = np.array([0.7, -1.3])

    def rows(points):
        return 2.0 + np.atleast_2d(points) @ slope

    surrogate = force_map(rows, lambda point: slope.copy(), draws, cells=5, domain="exploration")
    inside = draws[surrogate.contains(draws)]
    np.testing.assert_allclose(surrogate.potential(inside), rows(inside), atol=1e-10)
    np.testing.assert_allclose(surrogate.gradient(inside), np.tile(slope, (len(inside), 1)))
    assert surrogate.report.error_estimate < 1e-10


@pytest.mark.parametrize("cells", [6, 12, 24])
def test_the_error_estimate_bounds_the_error_of_a_quadratic(draws, cells):
    surrogate = force_map(gaussian_rows, gaussian_gradient, draws, cells=cells)
    dense = surrogate.box.position(
        np.random.default_rng(5).uniform(-1, 1, size=(20_000, 2)) * surrogate.box.half_width
    )
    actual = np.max(np.abs(surrogate.potential(dense) - gaussian_rows(dense)))
    estimate = surrogate.report.error_estimate
    assert actual <= estimate * (1 + 1e-9)
    assert estimate <= 4.0 * actual
    assert surrogate.report.max_potential_error >= estimate
    assert surrogate.report.kl_bound == 2.0 * surrogate.report.max_potential_error


def test_outside_the_box_nan_and_the_extension_is_continuous(draws):
    surrogate = force_map(gaussian_rows, gaussian_gradient, draws, cells=10, mass=0.5)
    far = MODE + 10.0
    assert np.isnan(surrogate.potential(far)) and np.isnan(surrogate.gradient(far)).all()
    rows = surrogate.gradient(np.stack([MODE, far]))
    assert np.isfinite(rows[0]).all() and np.isnan(rows[1]).all()
    extended = surrogate.extended_by_quadratic()
    edge = surrogate.box.position(np.array([surrogate.box.half_width, 0.1]))
    direction = surrogate.box.factor[:, 0]
    inside, outside = edge - 1e-9 * direction, edge + 1e-9 * direction
    assert extended.potential(outside) == pytest.approx(extended.potential(inside), abs=1e-6)
    np.testing.assert_allclose(extended.gradient(outside), extended.gradient(inside), atol=1e-6)
    assert np.isfinite(extended.gradient(far)).all()


def test_leapfrog_through_cells_and_across_the_boundary_is_reversible():
    rng = np.random.default_rng(8)
    x = rng.normal(size=1000)
    points = np.stack([x, 0.5 * x**2 + rng.normal(0.0, 0.5, size=1000)], axis=1)
    surrogate = force_map(banana_rows, banana_gradient, points, cells=30, mass=0.6)

    def force(position):
        gradient = surrogate.gradient(position)
        return gradient if np.isfinite(gradient).all() else banana_gradient(position)

    crossed = 0
    for start in points[:30]:
        momentum = rng.normal(size=2) * 2.0
        forward = leapfrog(start, momentum, force(start), 0.05, 60, force, lambda p: p)
        backward = leapfrog(
            forward.position, -forward.momentum, forward.gradient, 0.05, 60, force, lambda p: p
        )
        np.testing.assert_allclose(backward.position, start, atol=1e-9)
        np.testing.assert_allclose(-backward.momentum, momentum, atol=1e-9)
        crossed += surrogate.contains(start) != surrogate.contains(forward.position)
    assert crossed > 0


def test_a_non_finite_gradient_at_a_cell_centre_is_a_clear_error(draws):
    def nan_far_out(point):
        return np.where(abs(point[0] - MODE[0]) > 1.0, np.nan, gaussian_gradient(point))

    with pytest.raises(SurrogateFitError, match="not finite at"):
        force_map(gaussian_rows, nan_far_out, draws, cells=10)

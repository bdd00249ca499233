import itertools
import math

import numpy as np
import pytest

from pymc_rnshmc.surrogates.grid.sparse_grid import (
    SparseGrid,
    SparseGridInterpolant,
    adaptive_interpolant,
)


def smooth_function(points):
    points = np.atleast_2d(points)
    frequencies = np.arange(1, points.shape[1] + 1) * 0.7
    return np.exp(np.sin(points @ frequencies + 0.3)) + points[:, 0] ** 2


def fitted(function, dim, level):
    grid = SparseGrid(dim, level)
    return grid, grid.fit(function(grid.points))


# --- An independent reference: Smolyak's combination formula with nodal 1-D interpolation ---


def nodal_nodes(paper_level):
    """The paper's X^i: 0.5 for i = 1, else 2^(i-1) + 1 equispaced nodes on [0, 1]."""
    if paper_level == 1:
        return np.array([0.5])
    return np.linspace(0.0, 1.0, 2 ** (paper_level - 1) + 1)


def nodal_weights(paper_level, coordinate):
    """Weights of the nodal piecewise-linear basis of U^i at one coordinate."""
    nodes = nodal_nodes(paper_level)
    if len(nodes) == 1:
        return np.ones(1)
    return np.array([np.interp(coordinate, nodes, unit) for unit in np.eye(len(nodes))])


def smolyak_reference(function, dim, level, points):
    """A_{q,d}(f) = sum over q-d+1 <= |i| <= q of (-1)^(q-|i|) binom(d-1, q-|i|) U^i(f).

    Here U^i = U^i1 x ... x U^id, the tensor product of nodal piecewise-linear interpolants.
    """
    q = level + dim
    results = np.zeros(len(points))
    for paper_levels in itertools.product(range(1, q + 1), repeat=dim):
        total = sum(paper_levels)
        if not q - dim + 1 <= total <= q:
            continue
        coefficient = (-1) ** (q - total) * math.comb(dim - 1, q - total)
        axes = [nodal_nodes(i) for i in paper_levels]
        mesh = np.meshgrid(*axes, indexing="ij")
        tensor = function(np.stack(mesh, axis=-1).reshape(-1, dim)).reshape(mesh[0].shape)
        for row, point in enumerate(points):
            contracted = tensor
            for paper_level, coordinate in zip(paper_levels, point):
                contracted = np.tensordot(
                    nodal_weights(paper_level, coordinate), contracted, axes=(0, 0)
                )
            results[row] += coefficient * float(contracted)
    return results


@pytest.mark.parametrize(
    ("dim", "level"),
    [(1, 0), (1, 1), (1, 2), (1, 5), (2, 0), (2, 1), (2, 3), (2, 4), (3, 1), (3, 3)],
)
def test_matches_combination_formula_reference(dim, level):
    rng = np.random.default_rng(10 * dim + level)
    points = rng.random((15, dim))
    _, interpolant = fitted(smooth_function, dim, level)
    expected = smolyak_reference(smooth_function, dim, level, points)
    np.testing.assert_allclose(interpolant.value(points), expected, rtol=0, atol=1e-12)


# --- Grid structure ---


NODE_COUNTS = [(1, 0, 1), (1, 3, 9), (2, 0, 1), (2, 1, 5), (2, 2, 13), (2, 3, 29), (2, 4, 65)]
NODE_COUNTS += [(3, 2, 25), (3, 3, 69), (5, 4, 801), (5, 5, 2433)]


@pytest.mark.parametrize(("dim", "level", "count"), NODE_COUNTS)
def test_node_counts_match_clenshaw_curtis_literature(dim, level, count):
    grid = SparseGrid(dim, level)
    assert grid.n_points == count
    assert SparseGrid.count_points(dim, level) == count
    assert grid.points.shape == (count, dim)
    assert len(np.unique(grid.points, axis=0)) == count
    assert np.all((grid.points >= 0.0) & (grid.points <= 1.0))
    assert grid.multi_indices.shape == (math.comb(level + dim, dim), dim)
    assert np.all(grid.multi_indices.sum(axis=1) <= level)


def test_count_points_is_cheap_for_huge_grids():
    assert SparseGrid.count_points(2, 5) == 145
    assert SparseGrid.count_points(40, 8) > 10**9


def test_grids_beyond_numpys_32_dimensions():
    grid = SparseGrid(40, 1)
    assert grid.n_points == 81 == SparseGrid.count_points(40, 1)
    points = np.random.default_rng(13).random((20, 40))
    _, interpolant = fitted(lambda x: 1.0 + x @ np.arange(40.0), 40, 1)
    np.testing.assert_allclose(interpolant.value(points), 1.0 + points @ np.arange(40.0))
    np.testing.assert_allclose(interpolant.gradient(points[0]), np.arange(40.0), atol=1e-10)


def test_level_one_adds_face_centres():
    points = SparseGrid(2, 1).points
    expected = {(0.5, 0.5), (0.0, 0.5), (1.0, 0.5), (0.5, 0.0), (0.5, 1.0)}
    assert {tuple(point) for point in points} == expected


# --- Interpolation properties ---


@pytest.mark.parametrize(("dim", "level"), [(1, 4), (2, 0), (2, 3), (3, 2), (4, 3), (5, 3)])
def test_exact_at_the_nodes(dim, level):
    grid, interpolant = fitted(smooth_function, dim, level)
    np.testing.assert_allclose(
        interpolant.value(grid.points), smooth_function(grid.points), rtol=0, atol=1e-12
    )
    single = [interpolant.value(point) for point in grid.points[:20]]
    np.testing.assert_allclose(single, smooth_function(grid.points[:20]), rtol=0, atol=1e-12)


def test_level_zero_reproduces_only_constants():
    rng = np.random.default_rng(1)
    points = rng.random((50, 3))
    _, constant = fitted(lambda x: np.full(len(x), 2.5), 3, 0)
    np.testing.assert_allclose(constant.value(points), 2.5, atol=1e-14)
    np.testing.assert_allclose(constant.gradient(points), 0.0, atol=1e-14)
    _, linear = fitted(lambda x: 1.0 + x[:, 0], 3, 0)
    assert np.max(np.abs(linear.value(points) - (1.0 + points[:, 0]))) > 0.1


def affine(points):
    return 1.0 + 2.0 * points[:, 0] - points[:, 1] + 0.5 * points[:, 2]


def bilinear(points):
    return 1.0 + 2.0 * points[:, 0] - points[:, 1] + 3.0 * points[:, 0] * points[:, 1]


def bilinear_gradient(points):
    return np.column_stack((2.0 + 3.0 * points[:, 1], -1.0 + 3.0 * points[:, 0]))


def trilinear(points):
    x0, x1, x2 = points.T
    return 1.0 + x0 - 2.0 * x2 + 0.5 * x0 * x1 - x1 * x2 + 2.0 * x0 * x1 * x2


def trilinear_gradient(points):
    x0, x1, x2 = points.T
    return np.column_stack(
        (1.0 + 0.5 * x1 + 2.0 * x1 * x2, 0.5 * x0 - x2 + 2.0 * x0 * x2, -2.0 - x1 + 2.0 * x0 * x1)
    )


@pytest.mark.parametrize("level", [1, 2, 4])
def test_affine_functions_reproduced_from_level_one(level):
    points = np.random.default_rng(2).random((100, 3))
    _, interpolant = fitted(affine, 3, level)
    np.testing.assert_allclose(interpolant.value(points), affine(points), atol=1e-12)
    np.testing.assert_allclose(
        interpolant.gradient(points), np.tile([2.0, -1.0, 0.5], (100, 1)), atol=1e-11
    )


@pytest.mark.parametrize(
    ("function", "gradient", "dim", "degree"),
    [(bilinear, bilinear_gradient, 2, 2), (trilinear, trilinear_gradient, 3, 3)],
)
def test_multilinear_functions_reproduced_from_their_degree(function, gradient, dim, degree):
    # A multilinear monomial of degree p needs the multi-index (2, ..., 2) on p axes: level p.
    points = np.random.default_rng(3).random((100, dim))
    for level in (degree, degree + 2):
        _, interpolant = fitted(function, dim, level)
        np.testing.assert_allclose(interpolant.value(points), function(points), atol=1e-12)
        np.testing.assert_allclose(interpolant.gradient(points), gradient(points), atol=1e-11)
    _, too_coarse = fitted(function, dim, degree - 1)
    assert np.max(np.abs(too_coarse.value(points) - function(points))) > 0.01


def test_interpolation_error_decreases_with_level():
    def bump(points):
        return np.exp(-((points[:, 0] - 0.3) ** 2) - 2.0 * (points[:, 1] - 0.6) ** 2)

    points = np.random.default_rng(4).random((2000, 2))
    errors = []
    for level in range(1, 8):
        _, interpolant = fitted(bump, 2, level)
        errors.append(np.max(np.abs(interpolant.value(points) - bump(points))))
    assert np.all(np.diff(errors) < 0.0)
    assert errors[-1] < 2e-3
    surpluses = interpolant.surplus_by_level()
    assert surpluses.shape == (8,)
    assert surpluses[0] == pytest.approx(bump(np.array([[0.5, 0.5]]))[0])
    assert surpluses[-1] < surpluses[2]


# --- Gradient ---


def away_from_kinks(points, level, margin=1e-5):
    finest = 2.0**level
    distance = np.abs(points * finest - np.round(points * finest)) / finest
    return points[np.all(distance > margin, axis=1)]


@pytest.mark.parametrize(("dim", "level"), [(1, 5), (2, 4), (3, 3), (5, 3)])
def test_gradient_matches_central_differences_of_value(dim, level):
    _, interpolant = fitted(smooth_function, dim, level)
    points = away_from_kinks(np.random.default_rng(5).random((40, dim)), level)
    assert len(points) > 30
    step = 1e-7
    for point in points:
        differences = [
            (interpolant.value(point + step * unit) - interpolant.value(point - step * unit))
            / (2.0 * step)
            for unit in np.eye(dim)
        ]
        np.testing.assert_allclose(interpolant.gradient(point), differences, rtol=1e-6, atol=1e-6)


def test_gradient_approximates_smooth_gradient():
    def bump(points):
        return np.exp(-np.sum((points - 0.4) ** 2, axis=1))

    points = np.random.default_rng(6).random((200, 2)) * 0.8 + 0.1
    _, interpolant = fitted(bump, 2, 7)
    exact = -2.0 * (points - 0.4) * bump(points)[:, None]
    assert np.max(np.abs(interpolant.gradient(points) - exact)) < 0.05


def test_gradient_at_kinks_is_the_right_derivative_and_left_at_one():
    grid, interpolant = fitted(smooth_function, 2, 3)
    step = 1e-7
    for point in grid.points:
        gradient = interpolant.gradient(point)
        for axis, unit in enumerate(np.eye(2)):
            if point[axis] < 1.0:
                one_sided = (
                    interpolant.value(point + step * unit) - interpolant.value(point)
                ) / step
            else:
                one_sided = (
                    interpolant.value(point) - interpolant.value(point - step * unit)
                ) / step
            assert gradient[axis] == pytest.approx(one_sided, rel=1e-6, abs=1e-6)
    np.testing.assert_array_equal(
        interpolant.gradient(grid.points[3]), interpolant.gradient(grid.points[3])
    )


def test_single_point_and_rows_agree():
    _, interpolant = fitted(smooth_function, 4, 3)
    points = np.random.default_rng(7).random((25, 4))
    points[0] = [0.0, 1.0, 0.5, 0.25]
    values = interpolant.value(points)
    gradients = interpolant.gradient(points)
    assert values.shape == (25,)
    assert gradients.shape == (25, 4)
    for point, value, gradient in zip(points, values, gradients):
        assert isinstance(interpolant.value(point), float)
        assert interpolant.value(point) == pytest.approx(value, rel=1e-13, abs=1e-13)
        np.testing.assert_allclose(interpolant.gradient(point), gradient, rtol=1e-13, atol=1e-13)


def test_outside_the_unit_cube_gives_nan():
    _, interpolant = fitted(smooth_function, 2, 3)
    assert np.isnan(interpolant.value(np.array([1.1, 0.5])))
    assert np.all(np.isnan(interpolant.gradient(np.array([0.5, -0.01]))))
    assert np.isnan(interpolant.value(np.array([np.nan, 0.5])))
    rows = np.array([[0.2, 0.3], [1.5, 0.3], [0.7, 0.9]])
    values = interpolant.value(rows)
    assert np.isnan(values[1])
    assert np.all(np.isfinite(values[[0, 2]]))
    assert np.all(np.isnan(interpolant.gradient(rows)[1]))


# --- Bad input ---


@pytest.mark.parametrize(
    ("dim", "level"), [(2, -1), (0, 2), (-1, 1), (2.0, 1), (2, 1.5), ("2", 1), (True, 1), (2, None)]
)
def test_bad_dim_or_level_raises(dim, level):
    with pytest.raises(ValueError, match=r"dim|level"):
        SparseGrid(dim, level)
    with pytest.raises(ValueError, match=r"dim|level"):
        SparseGrid.count_points(dim, level)


def test_numpy_integers_are_accepted():
    assert SparseGrid(np.int64(2), np.int32(2)).n_points == 13


def test_bad_values_or_points_raise():
    grid = SparseGrid(2, 2)
    with pytest.raises(ValueError, match="13"):
        grid.fit(np.zeros(12))
    with pytest.raises(ValueError, match="13"):
        grid.fit(np.zeros((13, 1)))
    with pytest.raises(ValueError, match="finite"):
        grid.fit(np.full(13, np.nan))
    interpolant = grid.fit(np.zeros(13))
    with pytest.raises(ValueError, match="shape"):
        interpolant.value(np.zeros(3))
    with pytest.raises(ValueError, match="shape"):
        interpolant.gradient(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="surpluses"):
        SparseGridInterpolant(grid, np.zeros(5))


# --- Surplus-based (dimension-adaptive) refinement ---


def anisotropic(points):
    points = np.atleast_2d(points)
    return (
        np.exp(-8.0 * (points[:, 0] - 0.4) ** 2) * (1.0 + 0.05 * points[:, 1]) + 0.01 * points[:, 2]
    )


def test_adaptive_refinement_spends_its_points_where_the_surpluses_are():
    calls = []

    def counted(points):
        calls.append(len(points))
        return anisotropic(points)

    adaptive = adaptive_interpolant(3, counted, max_points=120)
    grid = adaptive.grid
    assert grid.n_points <= 120 and sum(calls) == grid.n_points  # each node evaluated once
    np.testing.assert_allclose(adaptive.value(grid.points), anisotropic(grid.points), atol=1e-12)
    # refined far along x0, hardly along x2
    assert grid.multi_indices[:, 0].max() >= grid.multi_indices[:, 2].max() + 3
    isotropic_level = max(
        level for level in range(8) if SparseGrid.count_points(3, level) <= grid.n_points
    )
    _, isotropic = fitted(anisotropic, 3, isotropic_level)
    points = np.random.default_rng(12).random((3000, 3))
    adaptive_error = np.max(np.abs(adaptive.value(points) - anisotropic(points)))
    isotropic_error = np.max(np.abs(isotropic.value(points) - anisotropic(points)))
    assert adaptive_error < 0.5 * isotropic_error


def test_a_grid_from_multi_indices_matches_the_isotropic_one():
    grid = SparseGrid(3, 0, multi_indices=SparseGrid(3, 3).multi_indices[::-1])
    reference = SparseGrid(3, 3)
    assert grid.level == 3 and grid.n_points == reference.n_points
    np.testing.assert_array_equal(grid.points, reference.points)


def test_multi_indices_must_be_downward_closed():
    with pytest.raises(ValueError, match="downward closed"):
        SparseGrid(2, 0, multi_indices=np.array([[0, 0], [0, 2]]))

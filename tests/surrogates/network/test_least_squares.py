import numpy as np

from pymc_rnshmc.surrogates.network.least_squares import penalty_grid, ridge_path, ridge_solve


def test_ridge_path_and_solve_agree_with_direct_solutions():
    rng = np.random.default_rng(0)
    design = rng.normal(size=(60, 8))
    targets = rng.normal(size=60)
    gram, projection = design.T @ design, design.T @ targets
    penalties = penalty_grid(gram, 6)
    path = ridge_path(gram, projection, penalties)
    for j, penalty in enumerate(penalties):
        direct = np.linalg.solve(gram + penalty * np.eye(8), projection)
        np.testing.assert_allclose(path[:, j], direct, rtol=1e-7, atol=1e-10)
        np.testing.assert_allclose(ridge_solve(gram, projection, penalty), direct, rtol=1e-7)
    # Without penalty the solution is ordinary least squares.
    ordinary = np.linalg.lstsq(design, targets, rcond=None)[0]
    np.testing.assert_allclose(ridge_solve(gram, projection, 0.0), ordinary, rtol=1e-8)


def test_singular_system_gets_a_finite_answer():
    gram = np.ones((4, 4))  # rank one
    projection = np.ones(4)
    assert np.all(np.isfinite(ridge_solve(gram, projection, 0.0)))
    assert np.all(np.isfinite(ridge_path(gram, projection, np.array([0.0, 1e-3]))))

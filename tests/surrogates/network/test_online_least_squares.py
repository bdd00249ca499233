"""The online least-squares estimators agree with the batch solution on the same rows."""

import numpy as np
import pytest
import scipy.linalg

from pymc_rnshmc.surrogates.network.online_least_squares import (
    GrevilleLeastSquares,
    NormalEquationsRidge,
    RecursiveRidge,
)

TOLERANCE = 1e-8
"""Relative difference allowed between online and batch weights (measured: below 1e-9 after
10 000 updates, ``benchmarks/online_estimators.py``)."""


@pytest.fixture(scope="module")
def rows_and_targets():
    rng = np.random.default_rng(0)
    rows = np.column_stack(
        [np.tanh(rng.normal(size=(300, 40)) @ rng.normal(size=(40, 30))), np.ones(300)]
    )
    targets = rows[:, :5].sum(axis=1) + 0.1 * rng.normal(size=300)
    return rows, targets


def ridge(rows, targets, penalty):
    system = rows.T @ rows + np.diag(penalty)
    return scipy.linalg.solve(system, rows.T @ targets, assume_a="pos")


def relative_difference(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("estimator_class", [NormalEquationsRidge, RecursiveRidge])
def test_ridge_estimators_row_by_row_equal_the_batch_ridge(rows_and_targets, estimator_class):
    rows, targets = rows_and_targets
    penalty = np.full(rows.shape[1], 0.1)
    penalty[-1] = 0.0
    start = 20
    estimator = estimator_class(
        penalty, rows[:start].T @ rows[:start], rows[:start].T @ targets[:start], start
    )
    for index in range(start, rows.shape[0]):
        estimator.add_rows(rows[index], targets[index : index + 1])
        if index in (start, 100, rows.shape[0] - 1):
            expected = ridge(rows[: index + 1], targets[: index + 1], penalty)
            assert relative_difference(estimator.solve(), expected) < TOLERANCE
    assert estimator.n_rows == rows.shape[0]


def test_blocks_of_rows_equal_single_rows(rows_and_targets):
    rows, targets = rows_and_targets
    penalty = np.full(rows.shape[1], 0.5)
    by_row, by_block = NormalEquationsRidge(penalty), NormalEquationsRidge(penalty)
    for index in range(rows.shape[0]):
        by_row.add_rows(rows[index], targets[index : index + 1])
    by_block.add_rows(rows, targets)
    np.testing.assert_allclose(by_row.solve(), by_block.solve(), rtol=1e-10)


def test_greville_equals_the_minimum_norm_least_squares_solution(rows_and_targets):
    rows, targets = rows_and_targets
    estimator = GrevilleLeastSquares(rows[:10], targets[:10])
    for index in range(10, rows.shape[0]):
        estimator.add_rows(rows[index], targets[index : index + 1])
        if index in (20, rows.shape[0] - 1):  # rank deficient, then overdetermined
            expected = scipy.linalg.lstsq(rows[: index + 1], targets[: index + 1])[0]
            assert relative_difference(estimator.solve(), expected) < TOLERANCE
    # every row adds a new direction until the rows span all 31 unknowns
    assert estimator.n_rank_increases == rows.shape[1] - 10


def test_greville_recognises_a_repeated_row(rows_and_targets):
    rows, targets = rows_and_targets
    estimator = GrevilleLeastSquares(rows[:5], targets[:5])
    estimator.add_rows(rows[2], np.array([targets[2] + 1.0]))
    assert estimator.n_rank_increases == 0
    expected = scipy.linalg.lstsq(
        np.vstack([rows[:5], rows[2]]), np.append(targets[:5], targets[2] + 1.0)
    )[0]
    assert relative_difference(estimator.solve(), expected) < TOLERANCE


@pytest.mark.parametrize("penalty", [-1.0, np.nan, np.inf])
def test_invalid_penalty_is_rejected(penalty):
    with pytest.raises(ValueError, match="penalty"):
        NormalEquationsRidge(np.full(3, penalty))


def test_mismatched_rows_and_targets_are_rejected():
    with pytest.raises(ValueError, match="rows but"):
        NormalEquationsRidge(np.ones(3)).add_rows(np.ones((2, 3)), np.ones(3))


def test_a_scalar_penalty_needs_the_initial_normal_equations():
    with pytest.raises(ValueError, match="one entry per unknown"):
        NormalEquationsRidge(0.5)

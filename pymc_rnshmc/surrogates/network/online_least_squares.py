"""Least-squares estimators that take new rows one batch at a time.

The adaptive surrogate (ARNSHMC) keeps fitting its output weights as exact evaluations arrive.
Each estimator here holds a state whose size depends only on the number of unknowns ``p``, never
on the number of rows seen, and agrees with the batch solution on the same rows:

* :class:`NormalEquationsRidge` accumulates the ridge normal equations ``A = X^T X`` and
  ``b = X^T y``, ``O(p^2)`` per row (and ``O(p^2)`` per *point* for the gradient rows of a random
  network, through the Gram identities of :mod:`~pymc_rnshmc.surrogates.network.hidden_layers`), and
  solves ``(A + diag(penalty)) w = b`` by Cholesky, ``O(p^3)``, only when the weights are asked
  for. Sums carry no recursion, so nothing drifts: it is the batch solution at every refresh.
* :class:`RecursiveRidge` is recursive least squares: the inverse ``P = (A + diag(penalty))^-1``
  and the weights are updated with the Sherman-Morrison-Woodbury identity, ``O(p^2 k)`` for ``k``
  rows, so the weights are current after every row.
* :class:`GrevilleLeastSquares` is the minimum-norm least-squares update of the RNS-HMC paper
  (Proposition 1 and Appendix C, after Greville 1960): ``Phi`` (the projector onto the null
  space of the rows seen) and ``Theta = H^+ H^+T`` are updated per row, with a branch on whether
  the new row's component ``c = Phi h`` outside the span of earlier rows is zero. In floating
  point ``c`` is never exactly zero, so the branch needs a tolerance, and a wrong decision is
  amplified by ``1 / |c|^2``.

``benchmarks/online_estimators.py`` measures how far each drifts from the batch solution over
ten thousand updates; the sampler uses :class:`NormalEquationsRidge` (see ``docs/benchmarks.md``).
These are written with numpy and scipy.linalg directly because the updates are a few lines of
BLAS each and no maintained library offers them with the gradient-row shortcut.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

__all__ = ["GrevilleLeastSquares", "NormalEquationsRidge", "RecursiveRidge"]


def _as_rows(rows: np.ndarray, targets: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    rows = np.asarray(rows, dtype=float).reshape(-1, width)
    targets = np.asarray(targets, dtype=float).reshape(-1)
    if rows.shape[0] != targets.shape[0]:
        raise ValueError(f"{rows.shape[0]} rows but {targets.shape[0]} targets.")
    return rows, targets


def _penalty_vector(penalty, width: int) -> np.ndarray:
    penalty = np.broadcast_to(np.asarray(penalty, dtype=float), (width,)).copy()
    if not np.all(np.isfinite(penalty)) or np.any(penalty < 0):
        raise ValueError("penalty must be finite and non-negative.")
    return penalty


class NormalEquationsRidge:
    """Ridge regression from accumulated normal equations, solved on demand.

    Parameters
    ----------
    penalty : float or ndarray, shape (p,)
        Ridge penalty added to the diagonal of ``X^T X`` (zero entries leave a coefficient,
        such as an intercept, unpenalized).
    gram, projection : ndarray, optional
        Normal equations of rows already seen: ``X^T X`` ``(p, p)`` and ``X^T y`` ``(p,)``.
    n_rows : int
        How many rows ``gram`` summarizes.
    """

    def __init__(self, penalty, gram=None, projection=None, n_rows: int = 0) -> None:
        if gram is None:
            if np.ndim(penalty) != 1:
                raise ValueError(
                    "Without initial normal equations, give the penalty as a vector with one "
                    "entry per unknown."
                )
            width = np.size(penalty)
            gram = np.zeros((width, width))
            projection = np.zeros(width)
        self.gram = np.array(gram, dtype=float)
        self.projection = np.array(projection, dtype=float).reshape(-1)
        self.penalty = _penalty_vector(penalty, self.projection.shape[0])
        self.n_rows = int(n_rows)

    @property
    def width(self) -> int:
        """Number of unknowns ``p``."""
        return self.projection.shape[0]

    def add_rows(self, rows: np.ndarray, targets: np.ndarray) -> None:
        """Add rows ``(k, p)`` with their targets ``(k,)``."""
        rows, targets = _as_rows(rows, targets, self.width)
        self.add_normal_equations(rows.T @ rows, rows.T @ targets, rows.shape[0])

    def add_normal_equations(self, gram: np.ndarray, projection: np.ndarray, n_rows: int) -> None:
        """Add rows given by their contribution ``X^T X`` and ``X^T y`` to the normal equations."""
        self.gram += gram
        self.projection += projection
        self.n_rows += int(n_rows)

    def solve(self, fast_only: bool = False) -> np.ndarray:
        """Current ridge weights, by Cholesky (``O(p^3)``).

        Falls back to ``lstsq`` if the penalized normal equations are numerically singular,
        unless ``fast_only`` (then it raises ``LinAlgError``): the fallback is an SVD, seconds
        at ``p = 2000``, too slow inside a draw.
        """
        system = self.gram + np.diag(self.penalty)
        try:
            factor = scipy.linalg.cho_factor(system, check_finite=True)
        except np.linalg.LinAlgError:  # numerically singular: minimum-norm least squares
            if fast_only:
                raise
            return scipy.linalg.lstsq(system, self.projection, lapack_driver="gelsd")[0]
        return scipy.linalg.cho_solve(factor, self.projection)


class RecursiveRidge:
    """Recursive least squares: ridge weights and ``(X^T X + penalty)^-1`` updated per batch.

    Parameters
    ----------
    penalty : float or ndarray, shape (p,)
        Ridge penalty; must be positive unless ``gram`` is already positive definite.
    gram, projection : ndarray, optional
        Normal equations of rows already seen.
    n_rows : int
        How many rows ``gram`` summarizes.
    """

    def __init__(self, penalty, gram=None, projection=None, n_rows: int = 0) -> None:
        start = NormalEquationsRidge(penalty, gram, projection, n_rows)
        system = start.gram + np.diag(start.penalty)
        factor = scipy.linalg.cho_factor(system)
        self.inverse = scipy.linalg.cho_solve(factor, np.eye(start.width))
        self.weights = self.inverse @ start.projection
        self.n_rows = start.n_rows

    @property
    def width(self) -> int:
        """Number of unknowns ``p``."""
        return self.weights.shape[0]

    def add_rows(self, rows: np.ndarray, targets: np.ndarray) -> None:
        """Add rows ``(k, p)`` with their targets ``(k,)`` (Woodbury, ``O(p^2 k)``)."""
        rows, targets = _as_rows(rows, targets, self.width)
        spread = self.inverse @ rows.T
        innovation = np.eye(rows.shape[0]) + rows @ spread
        gain = scipy.linalg.solve(innovation, spread.T, assume_a="pos").T
        self.weights = self.weights + gain @ (targets - rows @ self.weights)
        self.inverse -= gain @ spread.T
        self.inverse = 0.5 * (self.inverse + self.inverse.T)
        self.n_rows += rows.shape[0]

    def solve(self) -> np.ndarray:
        """Current weights (already up to date, ``O(p)``)."""
        return self.weights.copy()


class GrevilleLeastSquares:
    """Minimum-norm least squares updated row by row with Greville's pseudoinverse recursion.

    Starts from the batch pseudoinverse of ``initial_rows`` and follows Proposition 1 of the
    RNS-HMC paper: ``v <- v + (t - h.v) b`` with ``b`` from ``c = Phi h``.

    Parameters
    ----------
    initial_rows : ndarray, shape (K, p)
    initial_targets : ndarray, shape (K,)
    tolerance : float
        ``c`` counts as zero when ``|c|^2 <= tolerance * |h|^2``.

    References
    ----------
    .. [1] Greville, T. N. E. (1960). Some applications of the pseudoinverse of a matrix.
       SIAM Review, 2(1), 15-22.
    .. [2] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
    """

    def __init__(
        self, initial_rows: np.ndarray, initial_targets: np.ndarray, tolerance: float = 1e-10
    ) -> None:
        initial_rows = np.atleast_2d(np.asarray(initial_rows, dtype=float))
        initial_rows, initial_targets = _as_rows(
            initial_rows, initial_targets, initial_rows.shape[1]
        )
        pseudoinverse = scipy.linalg.pinv(initial_rows)
        width = initial_rows.shape[1]
        self.weights = pseudoinverse @ initial_targets
        self.null_projector = np.eye(width) - pseudoinverse @ initial_rows
        self.theta = pseudoinverse @ pseudoinverse.T
        self.tolerance = float(tolerance)
        self.n_rows = initial_rows.shape[0]
        self.n_rank_increases = 0

    @property
    def width(self) -> int:
        """Number of unknowns ``p``."""
        return self.weights.shape[0]

    def add_rows(self, rows: np.ndarray, targets: np.ndarray) -> None:
        """Add rows one at a time (``O(p^2)`` each)."""
        rows, targets = _as_rows(rows, targets, self.width)
        for row, target in zip(rows, targets, strict=True):
            self._add_row(row, float(target))

    def _add_row(self, row: np.ndarray, target: float) -> None:
        outside = self.null_projector @ row
        theta_row = self.theta @ row
        if outside @ outside > self.tolerance * (row @ row):
            direction = outside / (outside @ outside)
            self.null_projector -= np.outer(outside, direction)
            self.theta += (
                (1.0 + row @ theta_row) * np.outer(direction, direction)
                - np.outer(theta_row, direction)
                - np.outer(direction, theta_row)
            )
            self.n_rank_increases += 1
        else:
            direction = theta_row / (1.0 + row @ theta_row)
            self.theta -= np.outer(theta_row, direction)
        self.weights = self.weights + (target - row @ self.weights) * direction
        self.n_rows += 1

    def solve(self) -> np.ndarray:
        """Current weights (already up to date)."""
        return self.weights.copy()

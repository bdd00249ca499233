"""Keep a fitted random network surrogate's output weights current as exact evaluations arrive.

The hidden layer, the whitening and the quadratic base of a fitted
:class:`~pymc_rnshmc.surrogates.RandomNetworkSurrogate` stay fixed; only the output weights
``v`` and the offset ``c`` are least-squares unknowns, so every new exact evaluation adds rows
that are linear in them: a value row ``[phi(z), 1]`` with target ``U - Q(z)`` and, with a
gradient, ``d`` rows ``[J(z), 0]`` (``J`` the Jacobian of the features) with target
``grad_z U - grad Q(z)``, weighted as in the batch fit. The rows go into
:class:`~pymc_rnshmc.surrogates.network.online_least_squares.NormalEquationsRidge` with the batch
fit's absolute penalty on ``v`` and none on ``c``; an unpenalized intercept is equivalent to the
batch fit's centring, so on the same points the online weights *are* the batch weights.

New points are buffered and folded into the normal equations in blocks (through the Gram
identities of the hidden layer), so a point costs ``O(s^2)`` amortized and the state never grows
with the number of points seen.
"""

from __future__ import annotations

import copy

import numpy as np

from pymc_rnshmc.surrogates.network.online_least_squares import NormalEquationsRidge
from pymc_rnshmc.surrogates.training import finite_rows

__all__ = ["OnlineNetworkLearner"]


class OnlineNetworkLearner:
    """Online least-squares output weights for a fitted random network surrogate.

    Parameters
    ----------
    surrogate : RandomNetworkSurrogate
        A fitted surrogate; it is not modified (see :meth:`updated_surrogate`).
    positions : ndarray, shape (n, d)
        The points it was fitted to, with their exact ``potentials`` ``(n,)`` and, optionally,
        ``gradients`` ``(n, d)`` of ``U``: the learner starts from the batch fit's normal
        equations.
    block_size : int
        New points are folded into the normal equations this many at a time.
    """

    def __init__(
        self,
        surrogate,
        positions: np.ndarray,
        potentials: np.ndarray,
        gradients: np.ndarray | None = None,
        block_size: int = 64,
    ) -> None:
        if not surrogate.is_fitted:
            raise ValueError("The surrogate must be fitted before it can learn online.")
        self.surrogate = surrogate
        self.block_size = int(block_size)
        width = surrogate.layer.n_hidden + 1
        penalty = np.full(width, float(surrogate.ridge_penalty))
        penalty[-1] = 0.0  # the offset, like the batch fit's centring, is not penalized
        self.estimator = NormalEquationsRidge(penalty)
        self._n_folded = 0
        self._pending: list[tuple[np.ndarray, float, np.ndarray | None]] = []
        # Features are shifted by their mean over the initial points (a fixed shift, so the
        # least squares are unchanged): uncentred softplus features and an intercept column
        # are nearly collinear, and the normal equations would be needlessly ill-conditioned.
        whitened = surrogate.whitening.to_whitened(np.atleast_2d(positions))
        features = surrogate.layer.features(whitened)
        finite = np.all(np.isfinite(features), axis=1)
        self._feature_shift = features[finite].mean(axis=0) if finite.any() else 0.0
        self._add_block(positions, potentials, gradients)

    def add(self, position: np.ndarray, potential: float, gradient: np.ndarray | None = None):
        """Learn from one exact evaluation: ``U`` (and ``grad U``) at ``position``.

        Non-finite evaluations are ignored.
        """
        position = np.array(position, dtype=float).reshape(-1)
        finite = np.isfinite(potential) and np.all(np.isfinite(position))
        if gradient is not None:
            gradient = np.array(gradient, dtype=float).reshape(-1)
            finite = finite and np.all(np.isfinite(gradient))
        if not finite:
            return
        self._pending.append((position, float(potential), gradient))
        if len(self._pending) >= self.block_size:
            self._flush()

    def updated_surrogate(self, fast_only: bool = False):
        """A copy of the surrogate with the least-squares weights of every point so far.

        Costs one Cholesky factorization of order ``s + 1`` (a least-squares solve if the
        penalized normal equations are numerically singular, unless ``fast_only``).

        Raises
        ------
        numpy.linalg.LinAlgError
            The weights came out non-finite, or (``fast_only``) the Cholesky factorization
            failed.
        """
        self._flush()
        solution = self.estimator.solve(fast_only)
        if not np.all(np.isfinite(solution)):
            raise np.linalg.LinAlgError("the online least-squares weights are not finite")
        updated = copy.copy(self.surrogate)
        updated.coefficients = solution[:-1]
        updated.offset = float(solution[-1] - self._feature_shift @ solution[:-1])
        return updated

    def _flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        with_gradients = [item for item in pending if item[2] is not None]
        values_only = [item for item in pending if item[2] is None]
        for group, has_gradients in ((with_gradients, True), (values_only, False)):
            if group:
                positions = np.stack([item[0] for item in group])
                potentials = np.array([item[1] for item in group])
                gradients = np.stack([item[2] for item in group]) if has_gradients else None
                self._add_block(positions, potentials, gradients)

    def _add_block(self, positions, potentials, gradients) -> None:
        surrogate = self.surrogate
        positions, potentials, gradients = finite_rows(positions, potentials, gradients)
        if positions.shape[0] == 0:
            return
        whitening, quadratic, layer = surrogate.whitening, surrogate.quadratic_part, surrogate.layer
        whitened = whitening.to_whitened(positions)
        values = potentials.copy()
        if quadratic is not None:
            values -= quadratic.potential(whitened)
        design = np.column_stack(
            [layer.features(whitened) - self._feature_shift, np.ones(positions.shape[0])]
        )
        gram = design.T @ design
        projection = design.T @ values
        n_rows = positions.shape[0]
        weight = surrogate.gradient_weight
        if gradients is not None and weight > 0:
            targets = whitening.gradient_to_whitened(gradients)
            if quadratic is not None:
                targets = targets - quadratic.gradient(whitened)
            gram[:-1, :-1] += weight * layer.gradient_gram(whitened)
            projection[:-1] += weight * layer.gradient_projection(whitened, targets)
            n_rows += gradients.size
        self.estimator.add_normal_equations(gram, projection, n_rows)
        self._n_folded += positions.shape[0]

    @property
    def n_points(self) -> int:
        """Exact evaluations learned from (the initial fit's included)."""
        return self._n_folded + len(self._pending)

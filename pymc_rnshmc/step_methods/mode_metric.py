"""The exploring NUTS's metric from the posterior's mode.

PyMC's diagonal adaptation, in the coordinates that the Laplace approximation whitens. On a
correlated posterior, NUTS exploring with PyMC's diagonal metric builds deep trees until
its first adaptation window closes, and a diagonal metric cannot undo the correlation anyway.
On the correlated logistic regression of the wide-models benchmark (d = 80), 200 exploration draws
took 6,333 exact gradients from PyMC's default start, and 1,860 from the mode with the Laplace
covariance as a fixed metric. PyMC's ``QuadPotentialFullAdapt`` started at that covariance took
4,461: at the end of its first window it replaces the given covariance by the sample covariance of
about 100 draws, which is too noisy in 80 dimensions.

So the metric here is ``M^-1 = L diag(v) L^T``, with ``L`` the Cholesky factor of the Laplace
covariance and ``v`` adapted by PyMC's own diagonal adaptation (its windows and estimator) on the
whitened draws ``L^-1 (x - mode)``. Where the Laplace approximation is right, ``v`` stays near 1;
where it is off in scale, the adaptation corrects it. Each window's estimate is shrunk toward 1
with the weight of ``PRIOR_DRAWS`` draws, so that the first, short windows do not throw the
approximation away.

Where no Laplace approximation is given (the search found no mode, or its importance check
rejected it), ``L`` comes from the exploration's own draws instead: it is PyMC's diagonal
adaptation itself (computed by PyMC's own methods) until the end of PyMC's first window, and at
the end of each window ``L`` becomes the Cholesky factor of the covariance of the tuning draws
so far (PyMC's discarded first draws left out), with only the correlations that stand out of
sampling noise (:mod:`~pymc_rnshmc.hmc.low_rank_covariance`; where none do, the metric stays as
it was). A diagonal metric cannot undo a
correlated posterior: on the non-centred hierarchical logistic regression with 50 groups
(d = 56), where the importance check rejects the Laplace approximation, RNSHMC continuing with
exact NUTS after the verdict reached bulk ESS 46-67 per 1000 draws with the diagonal metric,
and 347 with this one (PyMC's NUTS with its dense adaptation: 281-304;
``docs/benchmarks.md``). ``L^-1`` is computed once with the factor:
whitening a draw and drawing a momentum are then products, where SciPy's triangular solve, at
about 35 microseconds a call for its checks, took a fifth of exact NUTS's draws on cheap
posteriordb models. The factor, its inverse and the mode are part of its sampling state, so
PyMC and the pooled chains' workers carry them with the rest. PyMC has no potential that adapts
around a given dense matrix, which is why this one is written here, over PyMC's class; it
changes only the coordinates.

References
----------
.. [1] Betancourt, M. (2017). A conceptual introduction to Hamiltonian Monte Carlo.
   arXiv:1701.02434, section 4.2 (the Euclidean metric, and tuning it to the posterior's
   covariance).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

import numpy as np
from pymc.step_methods.hmc.quadpotential import (
    QuadPotentialDiagAdapt,
    QuadPotentialDiagAdaptState,
)
from pymc.step_methods.state import dataclass_state
from scipy import linalg

from pymc_rnshmc.hmc.low_rank_covariance import covariance_beyond_noise

__all__ = ["MIN_WHITENING_DRAWS", "PRIOR_DRAWS", "WhitenedDiagAdapt"]

PRIOR_DRAWS = 50
"""The Laplace covariance counts as this many draws in each window's variance estimate (about
as many as PyMC's first window uses)."""
MIN_WHITENING_DRAWS = 20
"""Without a Laplace approximation, the draws are whitened by once at least this many are kept."""


@dataclass_state
class WhitenedDiagAdaptState(QuadPotentialDiagAdaptState):
    _factor: Any = field(default=None)
    _inverse_factor: Any = field(default=None)
    _mode: Any = field(default=None)
    _from_laplace: bool = field(default=False)
    _seen: int = field(default=0)
    _draws: Any = field(default=None)


class WhitenedDiagAdapt(QuadPotentialDiagAdapt):
    """PyMC's diagonally adapted potential, in the coordinates ``L^-1 (x - mode)`` once given.

    Built with PyMC's arguments (:meth:`like` copies them from the potential it replaces), it
    is that potential until :meth:`use_laplace` gives it a mode and covariance.

    References
    ----------
    .. [1] Betancourt, M. (2017). A conceptual introduction to Hamiltonian Monte Carlo.
       arXiv:1701.02434.
    """

    _state_class = WhitenedDiagAdaptState

    def __init__(self, *args, **kwargs) -> None:
        self._factor = self._inverse_factor = self._mode = None
        self._from_laplace, self._seen, self._draws = False, 0, []
        super().__init__(*args, **kwargs)

    @classmethod
    def like(cls, potential: QuadPotentialDiagAdapt) -> WhitenedDiagAdapt:
        """A potential with the adaptation settings of PyMC's ``potential`` (and its generator).

        PyMC compares those settings when it restores a sampling state.
        """
        made = cls(
            potential._n,
            potential._initial_mean,
            potential._initial_diag,
            potential._initial_weight,
            adaptation_window=potential.adaptation_window,
            adaptation_window_multiplier=potential.adaptation_window_multiplier,
            dtype=potential.dtype,
            discard_window=potential._discard_window,
            early_update=potential._early_update,
            store_mass_matrix_trace=potential._store_mass_matrix_trace,
        )
        made.set_rng(potential.rng)
        return made

    @property
    def whitened(self) -> bool:
        """Whether the coordinates are whitened (by a Laplace approximation, or by the draws)."""
        return self._factor is not None

    def use_laplace(self, mode: np.ndarray, covariance: np.ndarray) -> None:
        """Adapt afresh around ``mode`` and ``covariance``.

        A covariance that is not positive definite raises ``numpy.linalg.LinAlgError`` and
        changes nothing.
        """
        factor = linalg.cholesky(np.asarray(covariance, dtype=float), lower=True)
        inverse = linalg.solve_triangular(factor, np.eye(len(factor)), lower=True)
        self._whiten_by(mode, factor, inverse)
        self._from_laplace, self._draws = True, []

    def reset(self) -> None:
        """PyMC's reset, and back to its coordinates (and to whitening by the draws)."""
        super().reset()
        self._factor = self._inverse_factor = self._mode = None
        self._from_laplace, self._seen, self._draws = False, 0, []

    def _whiten_by(self, centre: np.ndarray, factor: np.ndarray, inverse: np.ndarray) -> None:
        """Adapt afresh in the coordinates ``inverse (x - centre)``."""
        super().reset()
        self._factor = factor.astype(self.dtype)
        self._inverse_factor = inverse.astype(self.dtype)
        self._mode = np.asarray(centre, dtype=self.dtype)

    def _whiten_by_draws(self) -> None:
        """Whiten by the covariance of the tuning draws kept so far, where it is not diagonal.

        Only correlations that stand out of sampling noise count
        (:func:`~pymc_rnshmc.hmc.low_rank_covariance.covariance_beyond_noise`); where none do,
        PyMC's diagonal adaptation goes on as it was.
        """
        if len(self._draws) < MIN_WHITENING_DRAWS:
            return
        draws = np.asarray(self._draws)
        covariance = covariance_beyond_noise(draws)
        if covariance is None:
            return
        try:
            factor = linalg.cholesky(covariance, lower=True)
        except linalg.LinAlgError:
            return
        inverse = linalg.solve_triangular(factor, np.eye(len(factor)), lower=True)
        self._whiten_by(draws.mean(axis=0), factor, inverse)

    def whiten(self, position: np.ndarray) -> np.ndarray:
        """``L^-1 (x - mode)``."""
        return self._inverse_factor @ (position - self._mode)

    def covariance(self) -> np.ndarray:
        """The inverse mass matrix ``L diag(v) L^T`` (or ``diag(v)``)."""
        if not self.whitened:
            return np.diag(self._var)
        return (self._factor * self._var) @ self._factor.T

    def velocity(self, x, out=None):
        """``M^-1 p``."""
        if not self.whitened:
            return super().velocity(x, out=out)
        velocity = self._factor @ (self._var * (self._factor.T @ x))
        velocity = velocity.astype(self.dtype, copy=False)
        if out is None:
            return velocity
        out[...] = velocity
        return out

    def energy(self, x, velocity=None):
        """Kinetic energy ``0.5 p^T M^-1 p``."""
        if not self.whitened or velocity is not None:
            return super().energy(x, velocity=velocity)
        whitened = self._factor.T @ x
        return 0.5 * whitened.dot(self._var * whitened)

    def random(self):
        """A momentum ``~ N(0, M)``: ``L^-T`` times a whitened one."""
        momentum = super().random()
        if not self.whitened:
            return momentum
        return (self._inverse_factor.T @ momentum).astype(self.dtype, copy=False)

    def update(self, sample, grad, tune):
        """PyMC's adaptation, told the whitened draw (and gradient).

        Without a Laplace approximation, the tuning draws after PyMC's discarded first ones
        are kept, and at the end of each of PyMC's windows the coordinates are whitened by
        their shrunk covariance.
        """
        by_draws = tune and not self._from_laplace
        if by_draws:
            self._seen += 1
            if self._seen > self._discard_window:
                self._draws.append(np.array(sample, dtype=float))
        window_ends = tune and self._n_samples > 0 and self._n_samples % self.adaptation_window == 0
        if self.whitened:
            sample, grad = self.whiten(sample), self._factor.T @ grad
        super().update(sample, grad, tune)
        if by_draws and window_ends:
            self._whiten_by_draws()

    def _update_from_weightvar(self, weightvar):
        """The window's variances, shrunk toward the Laplace approximation's (1)."""
        super()._update_from_weightvar(weightvar)
        if not self.whitened:
            return
        seen = float(weightvar.n_samples)
        self._var = (seen * self._var + PRIOR_DRAWS) / (seen + PRIOR_DRAWS)
        np.sqrt(self._var, out=self._stds)
        np.divide(1, self._stds, out=self._inv_stds)
        self._var_pytensor.set_value(self._var)

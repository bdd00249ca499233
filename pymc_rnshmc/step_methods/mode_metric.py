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
approximation away. Until a mode is given (and after ``reset``) it is PyMC's diagonal
adaptation itself, computed by PyMC's own methods.

Where there is no Laplace approximation (no mode found, or its importance check failed), a
chain whose exact NUTS resumes while tuning (the surrogate did not pay, or the collapse watch
resumed exact draws until a refit, whose dynamics then take this metric too) can whiten by its
own draws instead (:meth:`WhitenedDiagAdapt.use_draws`): their covariance, with
only the correlations that stand out of sampling noise
(:mod:`~pymc_rnshmc.hmc.low_rank_covariance`), where these are strong enough to matter. A
diagonal metric cannot undo a correlated posterior: on the non-centred hierarchical logistic
regression with 50 groups (d = 56), where the importance check fails, exact NUTS after the
verdict reached a bulk ESS of 46-67 per 1000 draws with the diagonal metric the exploration had
adapted (PyMC's NUTS with its dense adaptation: 281-304; ``docs/benchmarks.md``). Whitening
the exploration itself by its draws was tried and left out: on small curved posteriors (the
bananas, eight schools) it lost as often as it won. ``L^-1`` is computed once with the factor:
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

import hashlib
from dataclasses import field
from typing import Any

import numpy as np
from pymc.step_methods.hmc.quadpotential import (
    QuadPotentialDiagAdapt,
    QuadPotentialDiagAdaptState,
)
from pymc.step_methods.state import dataclass_state
from scipy import linalg

from pymc_rnshmc.hmc.low_rank_covariance import correlation_condition, covariance_beyond_noise

__all__ = ["CORRELATED_CONDITION", "PRIOR_DRAWS", "WhitenedDiagAdapt"]

PRIOR_DRAWS = 50
"""The Laplace covariance counts as this many draws in each window's variance estimate (about
as many as PyMC's first window uses)."""
CORRELATED_CONDITION = 25.0
"""A chain's draws whiten the metric only where their correlation matrix (beyond noise) has at
least this condition number: a diagonal metric would leave NUTS about five times the leapfrog
steps per trajectory (the square root). Below it, a diagonal metric is kept. In the exploration
draws recorded by the economy study (``benchmarks/economy.py``, 22 posteriors), the curved and
funnel-shaped posteriors where whitening by the draws lost had condition numbers of 1-13
(bananas, eight schools, GARCH); the hierarchical regressions had 400-1200."""


@dataclass_state
class WhitenedDiagAdaptState(QuadPotentialDiagAdaptState):
    _factor: Any = field(default=None)
    _inverse_factor: Any = field(default=None)
    _mode: Any = field(default=None)
    _from_draws: bool = field(default=False)
    _inverse_mass: Any = field(default=None)
    _served: int = field(default=0)
    _forms: bool = field(default=True)


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
        self._factor = self._inverse_factor = self._mode = self._inverse_mass = None
        self._from_draws = False
        self._served, self._forms = 0, True
        self._last_asked: tuple[tuple, np.ndarray | None] | None = None
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
        """Whether a mode and covariance are in use."""
        return self._factor is not None

    @property
    def from_draws(self) -> bool:
        """Whether the covariance in use came from a chain's draws (:meth:`use_draws`)."""
        return self._from_draws

    def use_laplace(self, mode: np.ndarray, covariance: np.ndarray) -> None:
        """Adapt afresh around ``mode`` and ``covariance``.

        A covariance that is not positive definite raises ``numpy.linalg.LinAlgError`` and
        changes nothing.
        """
        factor = linalg.cholesky(np.asarray(covariance, dtype=float), lower=True)
        inverse = linalg.solve_triangular(factor, np.eye(len(factor)), lower=True)
        super().reset()
        self._inverse_mass = None
        self._served, self._forms = 0, True
        self._factor = factor.astype(self.dtype)
        self._inverse_factor = inverse.astype(self.dtype)
        self._mode = np.asarray(mode, dtype=self.dtype)
        self._from_draws = False

    def metric_from_draws(self, draws: np.ndarray) -> np.ndarray | None:
        """The covariance a chain's ``draws`` ``(n, d)`` would whiten by (``None``: they would not).

        Their correlations beyond sampling noise, PyMC's discarded first draws left out, if
        these have a condition number of at least ``CORRELATED_CONDITION``.
        """
        draws = self._settled(draws)
        if len(draws) < 2:
            return None
        key = _content_key(draws)
        if self._last_asked is not None and self._last_asked[0] == key:
            return self._last_asked[1]
        covariance = covariance_beyond_noise(draws)
        if covariance is not None and correlation_condition(covariance) < CORRELATED_CONDITION:
            covariance = None
        self._last_asked = (key, covariance)
        return covariance

    def _settled(self, draws: np.ndarray) -> np.ndarray:
        """A chain's draws without PyMC's discarded first ones."""
        return np.asarray(draws, dtype=float)[self._discard_window :]

    def use_draws(self, draws: np.ndarray) -> bool:
        """Adapt afresh around the mean and covariance of a chain's ``draws`` ``(n, d)``.

        Only where :meth:`metric_from_draws` gives a covariance; returns whether they did (else
        nothing changes).
        """
        covariance = self.metric_from_draws(draws)
        self._last_asked = None
        if covariance is None:
            return False
        try:
            self.use_laplace(np.mean(self._settled(draws), axis=0), covariance)
        except np.linalg.LinAlgError:
            return False
        self._from_draws = True
        return True

    def reset(self) -> None:
        """PyMC's reset, and back to its coordinates."""
        super().reset()
        self._factor = self._inverse_factor = self._mode = self._inverse_mass = None
        self._from_draws = False
        self._served, self._forms = 0, True
        self._last_asked = None

    def whiten(self, position: np.ndarray) -> np.ndarray:
        """``L^-1 (x - mode)``."""
        return self._inverse_factor @ (position - self._mode)

    def covariance(self) -> np.ndarray:
        """The inverse mass matrix ``L diag(v) L^T`` (or ``diag(v)``)."""
        if not self.whitened:
            return np.diag(self._var)
        return (self._factor * self._var) @ self._factor.T

    def velocity(self, x, out=None):
        """``M^-1 p``: one product with ``M^-1`` where forming it pays, else two with its factors.

        It is called at every leapfrog step, so its Python overhead counts on cheap models:
        2.4 microseconds a call with the two triangular products, 0.5 with ``M^-1`` formed
        (d = 4). Forming it costs about ``d^3`` flops, against ``2 d^2`` saved a call: 2 (d = 4)
        to 10 (d = 50) microseconds, but 0.36 ms at d = 200 and 22 ms at d = 800 (break-even
        after 89 and 284 calls), and PyMC's adaptation changes the metric at every tuning draw
        after its first window. At d = 1507 (a hierarchical model whose exact NUTS took a metric
        from its draws) forming it at every tuning draw made them 184 ms each. So ``M^-1`` is
        formed for a metric whose predecessor served at least ``d / 2`` calls (forming would
        have paid for it), or once the metric itself has served that many (a fixed metric after
        tuning); until then the two products serve.
        """
        if self._factor is None:
            return super().velocity(x, out=out)
        self._served += 1
        if self._inverse_mass is not None:  # the common case first: 0.45 microseconds
            return _product(self._inverse_mass, x, out)
        if not self._forms and self._served >= 0.5 * len(self._var):
            self._forms = True
        if not self._forms:
            return _written(self._factor @ (self._var * (self._factor.T @ x)), out)
        self._inverse_mass = self.covariance().astype(self.dtype)
        return _product(self._inverse_mass, x, out)

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
        """PyMC's adaptation, told the whitened draw (and gradient)."""
        if self.whitened:
            sample, grad = self.whiten(sample), self._factor.T @ grad
        super().update(sample, grad, tune)

    def _update_from_weightvar(self, weightvar):
        """The window's variances, shrunk toward the Laplace approximation's (1)."""
        super()._update_from_weightvar(weightvar)
        self._inverse_mass = None
        self._forms = self._served >= 0.5 * len(self._var)
        self._served = 0
        if not self.whitened:
            return
        seen = float(weightvar.n_samples)
        self._var = (seen * self._var + PRIOR_DRAWS) / (seen + PRIOR_DRAWS)
        np.sqrt(self._var, out=self._stds)
        np.divide(1, self._stds, out=self._inv_stds)
        self._var_pytensor.set_value(self._var)


def _product(matrix: np.ndarray, vector: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``matrix @ vector``, into ``out`` where given (``numpy.dot``: bit for bit the same).

    Writing through ``numpy.dot``'s ``out`` takes half the time of assigning the product (1.0
    microseconds at d = 4); it refuses an ``out`` of another dtype or layout, which gets the
    assignment.
    """
    if out is None:
        return matrix @ vector
    try:
        return np.dot(matrix, vector, out=out)
    except ValueError:
        return _written(matrix @ vector, out)


def _written(result: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``result``, copied into ``out`` where given (PyMC's ``velocity(x, out)`` protocol)."""
    if out is None:
        return result
    out[...] = result
    return out


def _content_key(draws: np.ndarray) -> tuple:
    """A key for the values of ``draws``: the verdict asks about the same draws twice.

    Whether exact NUTS would take a metric from them (:meth:`WhitenedDiagAdapt.metric_from_draws`
    through the explorer) and then, resuming, takes it; each asking costs five
    eigendecompositions of the held-out covariance, about 3.7 s at d = 1507, and the hash
    about 0.05 s for 4000 such draws.
    """
    contiguous = np.ascontiguousarray(draws)
    return contiguous.shape, hashlib.blake2b(contiguous.view(np.uint8), digest_size=16).digest()

"""A surrogate built on the user's own coarse model: the coarse potential plus a fitted correction.

Whoever has an expensive model nearly always has a cheaper version of it (a coarser mesh, a
looser solver tolerance, a reduced-order model). Its potential ``U_c`` already has the
posterior's shape, so a random network only has to learn the difference ``U - U_c`` between the
exact and the coarse potentials, which is small and smooth where the coarse model is good, and
beyond the training points the surrogate falls back on the coarse model's physics instead of on
a network's extrapolation.

Each fit compares, on the same held-out training points, three ways to predict the exact force:

- the coarse model alone (no fit),
- the coarse model plus the correction,
- a random network alone, fitted to the exact potentials (and gradients).

It moves by the better of the first two, and its report names the third when that predicts
better still. Batched simulations that choose the dynamics (metric, step size, path length) call
the force thousands of times on rows of points, which a coarse model evaluated point by point
cannot afford; they run on the network fitted alone (:meth:`simulation_proxy`), a tuning choice
that leaves the exact correction of the draws as it is.

The coarse model is any callable ``q -> (U_c(q), grad U_c(q))`` on the sampler's coordinates;
:mod:`pymc_rnshmc.step_methods.coarse_model` builds one from a PyMC model. Where it fails (an
error or a non-finite value), its training points are left out of the fit and the network alone
stands in for the surrogate: a force that is a fixed function of the position, as the exact
force standing in for a failing surrogate's is (:mod:`~pymc_rnshmc.hmc.force_field`), so the
trajectories stay reversible and the draws exact.

References
----------
.. [1] Lykkegaard, M. B., Dodwell, T. J., Fox, C., Mingas, G., & Scheichl, R. (2023).
   Multilevel delayed acceptance MCMC. SIAM/ASA Journal on Uncertainty Quantification, 11(1),
   1-30.
.. [2] Kennedy, M. C., & O'Hagan, A. (2000). Predicting the output from a complex computer code
   when fast approximations are available. Biometrika, 87(1), 1-13.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pymc_rnshmc.exceptions import SurrogateFitError
from pymc_rnshmc.surrogates.network.held_out_selection import validation_mask
from pymc_rnshmc.surrogates.network.random_network import RandomNetworkSurrogate
from pymc_rnshmc.surrogates.training import finite_rows
from pymc_rnshmc.surrogates.whitening import Whitening

__all__ = [
    "CoarseCorrectionLearner",
    "CoarseFitReport",
    "CoarseCorrectedSurrogate",
    "HeldOutErrors",
]

CoarsePotential = Callable[[np.ndarray], tuple[float, np.ndarray]]
"""``q -> (U_c(q), grad U_c(q))`` at one point of the sampler's coordinates."""


@dataclass(frozen=True)
class HeldOutErrors:
    """Relative held-out errors of the three predictors of one fit (NaN where not measured).

    Gradient errors (root-mean-square, relative to the spread of the exact gradients, in the
    whitened coordinates the network's own report uses) for fits to gradients; potential
    errors relative to the potentials' standard deviation, after removing the mean offset, for
    fits to values alone.

    Examples
    --------
    >>> from pymc_rnshmc.surrogates import HeldOutErrors
    >>> HeldOutErrors(coarse=0.04, corrected=0.06, network=0.2).best_with_coarse()
    'coarse'
    >>> HeldOutErrors(coarse=0.3, corrected=0.02, network=0.05).best_with_coarse()
    'corrected'
    """

    coarse: float
    corrected: float
    network: float

    def best_with_coarse(self) -> str:
        """What to move by: ``"coarse"`` if alone it is as good as corrected, else ``"corrected"``.

        ``"corrected"`` also when neither error could be measured.
        """
        return "coarse" if self.coarse <= self.corrected else "corrected"


@dataclass(frozen=True)
class CoarseFitReport:
    """What a coarse-plus-correction fit chose, and how well each candidate predicts.

    Attributes
    ----------
    errors : HeldOutErrors
    choice : {"coarse", "corrected"}
        What the trajectories move by.
    n_points : int
        Training points used (those where the exact and the coarse model are both finite).
    coarse_failures : int
        Training points left out because the coarse model failed there.
    seconds : float
        Wall time of the fit, coarse evaluations included.
    with_gradients : bool

    Examples
    --------
    A coarse model that fails beyond ``q_0 = 1.5``, corrected towards
    ``U(q) = |q|^2 / 2 + 0.3 sin(q_0)``:

    >>> import numpy as np
    >>> from pymc_rnshmc.surrogates import CoarseCorrectedSurrogate
    >>> def coarse(q):
    ...     if q[0] > 1.5:
    ...         raise ValueError("the coarse solver diverged")
    ...     return 0.5 * q @ q, q
    >>> rng = np.random.default_rng(1)
    >>> positions = rng.normal(size=(200, 2))
    >>> potentials = 0.5 * np.sum(positions**2, axis=1) + 0.3 * np.sin(positions[:, 0])
    >>> gradients = positions + np.column_stack([0.3 * np.cos(positions[:, 0]), np.zeros(200)])
    >>> surrogate = CoarseCorrectedSurrogate(coarse).fit(positions, potentials, gradients, rng=rng)
    >>> report = surrogate.report
    >>> report.choice, report.n_points + report.coarse_failures
    ('corrected', 200)
    >>> bool(report.coarse_failures == np.sum(positions[:, 0] > 1.5))
    True
    >>> bool(report.errors.corrected < report.errors.coarse)
    True
    """

    errors: HeldOutErrors
    choice: str
    n_points: int
    coarse_failures: int
    seconds: float
    with_gradients: bool

    @property
    def held_out_error(self) -> float:
        """The held-out error of what the trajectories move by."""
        return self.errors.coarse if self.choice == "coarse" else self.errors.corrected

    @property
    def network_predicts_better(self) -> bool:
        """Whether the network alone has a lower held-out error than the choice."""
        return bool(self.errors.network < self.held_out_error)

    def summary(self) -> str:
        """One phrase for the step's log."""
        kind = "gradient" if self.with_gradients else "potential"
        errors = self.errors
        text = (
            f" in {self.seconds:.2g} s; held-out {kind} error: coarse "
            f"model alone {errors.coarse:.1%}, coarse + correction {errors.corrected:.1%}, "
            f"network alone {errors.network:.1%}; moving by "
            + ("the coarse model alone" if self.choice == "coarse" else "coarse + correction")
        )
        if self.network_predicts_better:
            text += " (the network alone predicts better: RNSHMC without coarse= may be faster)"
        if self.coarse_failures:
            text += f"; the coarse model failed at {self.coarse_failures} training points"
        return text


class CoarseCorrectedSurrogate:
    """The potential of a coarse model plus a random network fitted to its error.

    ``U~(q) = U_c(q) + r(q)``, with ``r`` fitted to ``U - U_c`` (and ``grad U - grad U_c``) at
    the training points; or ``U_c`` alone where that predicts held-out points at least as well.
    See the module docstring for the comparison and the simulation proxy.

    Parameters
    ----------
    coarse : callable
        ``q -> (U_c(q), grad U_c(q))`` at one point; ``U_c = -logp`` of the coarse model.
    correction : RandomNetworkSurrogate, optional
        The unfitted network of the correction (and of the network alone); default
        ``RandomNetworkSurrogate()``.
    moves_by : {"coarse", "corrected"}, optional
        Move by this whatever the held-out errors say (for studies); default: the better one.

    Attributes
    ----------
    report : CoarseFitReport or None
        Set by :meth:`fit`.

    References
    ----------
    .. [1] Lykkegaard, M. B., Dodwell, T. J., Fox, C., Mingas, G., & Scheichl, R. (2023).
       Multilevel delayed acceptance MCMC. SIAM/ASA JUQ, 11(1), 1-30.
    .. [2] Kennedy, M. C., & O'Hagan, A. (2000). Predicting the output from a complex computer
       code when fast approximations are available. Biometrika, 87(1), 1-13.

    Examples
    --------
    ``RNSHMC(coarse=...)`` builds one from a coarse model; fitted here by hand, with the
    coarse potential ``|q|^2 / 2`` of ``U(q) = |q|^2 / 2 + 0.3 sin(q_0)``:

    >>> import numpy as np
    >>> from pymc_rnshmc.surrogates import CoarseCorrectedSurrogate
    >>> def coarse(q):
    ...     return 0.5 * q @ q, q
    >>> rng = np.random.default_rng(1)
    >>> positions = rng.normal(size=(200, 2))
    >>> potentials = 0.5 * np.sum(positions**2, axis=1) + 0.3 * np.sin(positions[:, 0])
    >>> gradients = positions + np.column_stack([0.3 * np.cos(positions[:, 0]), np.zeros(200)])
    >>> surrogate = CoarseCorrectedSurrogate(coarse).fit(positions, potentials, gradients, rng=rng)
    >>> surrogate.report.choice
    'corrected'
    >>> q = np.array([0.5, -0.3])
    >>> bool(np.allclose(surrogate.gradient(q), q + [0.3 * np.cos(0.5), 0.0], atol=0.01))
    True
    """

    defined_everywhere = True
    is_gradient_field = True
    fit_evaluates_models = True

    def __init__(
        self,
        coarse: CoarsePotential,
        correction: RandomNetworkSurrogate | None = None,
        moves_by: str | None = None,
    ):
        if not callable(coarse):
            raise TypeError(f"coarse must be callable q -> (U, grad U); got {coarse!r}.")
        if moves_by not in (None, "coarse", "corrected"):
            raise ValueError(f"moves_by must be None, 'coarse' or 'corrected'; got {moves_by!r}.")
        self.moves_by = moves_by
        self.coarse = coarse
        self.template = RandomNetworkSurrogate() if correction is None else correction
        self.correction: RandomNetworkSurrogate | None = None
        self.network: RandomNetworkSurrogate | None = None
        self.choice = "corrected"
        self.report: CoarseFitReport | None = None

    def __deepcopy__(self, memo: dict) -> CoarseCorrectedSurrogate:
        """A copy with its own fits that shares the coarse model (compiled once, stateless)."""
        other = copy.copy(self)
        for name in ("template", "correction", "network", "report"):
            setattr(other, name, copy.deepcopy(getattr(self, name), memo))
        return other

    # ------------------------------------------------------------------ fitting
    def coarse_rows(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The coarse potential and gradient at rows ``(n, d)`` (inf and NaN where it fails)."""
        potentials = np.empty(len(positions))
        gradients = np.empty(positions.shape)
        for i, position in enumerate(positions):
            potentials[i], gradients[i] = self._coarse_at(position)
        return potentials, gradients

    def _coarse_at(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        try:
            potential, gradient = self.coarse(position)
            potential = float(potential)
            gradient = np.asarray(gradient, dtype=float).reshape(np.shape(position))
        except Exception:  # a failing coarse model only loses its own force there
            return np.inf, np.full(np.shape(position), np.nan)
        if not (np.isfinite(potential) and np.all(np.isfinite(gradient))):
            return np.inf, np.full(np.shape(position), np.nan)
        return potential, gradient

    def fit(
        self,
        positions: np.ndarray,
        potentials: np.ndarray,
        gradients: np.ndarray | None = None,
        rng: np.random.Generator | None = None,
    ) -> CoarseCorrectedSurrogate:
        """Fit the correction (and the network alone) at the training points; choose.

        Raises
        ------
        SurrogateFitError
            Too few training points where both models are finite, or no fit succeeded.
        """
        start = time.perf_counter()
        rng = np.random.default_rng(rng)
        exact = _TrainingRows.finite(positions, potentials, gradients)
        rows, usable = exact.with_coarse(self.coarse_rows)
        if not usable.any():
            raise SurrogateFitError("the coarse model failed at every training point.")
        network = self._network_alone(exact, rng)
        self.correction = self._fitted(rows.differences(), rng)
        errors = rows.held_out_errors(self.correction, network, self.template.validation_fraction)
        self.choice = self.moves_by or errors.best_with_coarse()
        if self.correction is None:
            self.choice = "coarse"
        if rows.gradients is None:  # the proxy follows the force the chain will move by
            network = self._network_alone(self._at_training_points(rows), rng)
        self.network = network
        self.report = CoarseFitReport(
            errors,
            self.choice,
            n_points=len(rows.positions),
            coarse_failures=int(np.sum(~usable)),
            seconds=time.perf_counter() - start,
            with_gradients=rows.gradients is not None,
        )
        return self

    def _fitted(self, rows: _TrainingRows, rng):
        """A copy of the template fitted to ``rows``, or ``None`` if that fit failed."""
        network = copy.deepcopy(self.template)
        try:
            return network.fit(rows.positions, rows.potentials, rows.gradients, rng=rng)
        except SurrogateFitError:
            return None

    def _network_alone(self, rows: _TrainingRows, rng):
        """The network fitted alone, or ``None`` without gradients (not worth a fit here)."""
        return None if rows.gradients is None else self._fitted(rows, rng)

    def _at_training_points(self, rows: _TrainingRows) -> _TrainingRows:
        """Rows of this surrogate's own potentials and gradients: the proxy's targets.

        From the coarse values already computed there.
        """
        if self.choice == "coarse":
            return rows._replace(potentials=rows.coarse_potentials, gradients=rows.coarse_gradients)
        return rows._replace(
            potentials=rows.coarse_potentials + self.correction.potential(rows.positions),
            gradients=rows.coarse_gradients + self.correction.gradient(rows.positions),
        )

    def online_estimator(
        self,
        positions: np.ndarray,
        potentials: np.ndarray,
        gradients: np.ndarray | None = None,
    ) -> CoarseCorrectionLearner:
        """An online learner of the correction's output weights, from these training rows.

        See :class:`CoarseCorrectionLearner`; for ARNSHMC.
        """
        return CoarseCorrectionLearner(self, positions, potentials, gradients)

    # ------------------------------------------------------------------ evaluation
    def simulation_proxy(self):
        """What batched trajectory simulations run on: the network alone (or this, unfitted)."""
        return self if self.network is None else self.network

    def approximate_covariance(self) -> np.ndarray | None:
        """The network alone's suggestion of a posterior covariance, if it has one."""
        method = getattr(self.network, "approximate_covariance", None)
        return method() if callable(method) else None

    def potential_and_gradient(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        """``U~`` and ``grad U~`` at one point; the network alone's where the coarse model fails.

        Inf and NaN there if the network alone could not be fitted.
        """
        potential, gradient = self._coarse_at(position)
        if not np.isfinite(potential) and self.network is not None:
            return self.network.potential_and_gradient(position)
        if self.choice == "corrected" and self.correction is not None:
            correction, correction_gradient = self.correction.potential_and_gradient(position)
            return potential + correction, gradient + correction_gradient
        return potential, gradient

    def potential(self, positions: np.ndarray) -> np.ndarray | float:
        """``U~`` at one point ``(d,)`` or at rows ``(n, d)``."""
        positions = np.asarray(positions, dtype=float)
        if positions.ndim == 1:
            return float(self.potential_and_gradient(positions)[0])
        return np.array([self.potential_and_gradient(row)[0] for row in positions])

    def gradient(self, position: np.ndarray) -> np.ndarray:
        """``grad U~`` at one point ``(d,)`` or at rows ``(n, d)``."""
        position = np.asarray(position, dtype=float)
        if position.ndim == 1:
            return self.potential_and_gradient(position)[1]
        return np.stack([self.potential_and_gradient(row)[1] for row in position])


class CoarseCorrectionLearner:
    """Online least squares of the correction: every exact evaluation enters as ``U - U_c``.

    The coarse model is evaluated at each new point (one coarse call per exact one), and its
    difference from the exact potential (and gradient) goes to the correction network's own
    online learner (:class:`~pymc_rnshmc.surrogates.network.online_network.OnlineNetworkLearner`).
    Points where the coarse model fails are left out, as in the batch fit. What the surrogate
    moves by (coarse alone or corrected) stays the batch fit's choice; without a fitted
    correction there is nothing to learn and the surrogate stays as it is.

    Parameters
    ----------
    surrogate : CoarseCorrectedSurrogate
        A fitted surrogate; it is not modified (see :meth:`updated_surrogate`).
    positions, potentials, gradients : ndarray
        The exact training rows it was fitted to: the learner starts from them.
    """

    def __init__(
        self,
        surrogate: CoarseCorrectedSurrogate,
        positions: np.ndarray,
        potentials: np.ndarray,
        gradients: np.ndarray | None = None,
    ) -> None:
        self.surrogate = surrogate
        self.learner = None
        if surrogate.correction is None:
            return
        exact = _TrainingRows.finite(positions, potentials, gradients)
        differences = exact.with_coarse(surrogate.coarse_rows)[0].differences()
        self.learner = surrogate.correction.online_estimator(
            differences.positions, differences.potentials, differences.gradients
        )

    def add(self, position: np.ndarray, potential: float, gradient: np.ndarray | None = None):
        """Learn from one exact evaluation ``U`` (and ``grad U``) at ``position``."""
        if self.learner is None:
            return
        coarse_potential, coarse_gradient = self.surrogate._coarse_at(np.asarray(position))
        if not np.isfinite(coarse_potential):
            return
        difference = None if gradient is None else np.asarray(gradient) - coarse_gradient
        self.learner.add(position, potential - coarse_potential, difference)

    def updated_surrogate(self, fast_only: bool = False) -> CoarseCorrectedSurrogate:
        """A copy of the surrogate whose correction has the weights of every point so far.

        Raises as :meth:`OnlineNetworkLearner.updated_surrogate` does.
        """
        if self.learner is None:
            return self.surrogate
        updated = copy.copy(self.surrogate)
        updated.correction = self.learner.updated_surrogate(fast_only)
        return updated

    @property
    def n_points(self) -> int:
        """Exact evaluations learned from (the batch fit's included)."""
        return 0 if self.learner is None else self.learner.n_points


class _TrainingRows(NamedTuple):
    """Training rows with the coarse model's potentials and gradients there."""

    positions: np.ndarray
    potentials: np.ndarray
    gradients: np.ndarray | None
    coarse_potentials: np.ndarray | None = None
    coarse_gradients: np.ndarray | None = None

    @classmethod
    def finite(cls, positions, potentials, gradients) -> _TrainingRows:
        """The rows where the exact position, potential and gradient are finite."""
        return cls(*finite_rows(positions, potentials, gradients))

    def with_coarse(self, coarse_rows) -> tuple[_TrainingRows, np.ndarray]:
        """The rows where the coarse model is finite, with its values, and that mask.

        ``coarse_rows``: positions ``(n, d)`` -> the coarse potentials and gradients there (inf
        and NaN where the coarse model fails).
        """
        coarse_potentials, coarse_gradients = coarse_rows(self.positions)
        usable = np.isfinite(coarse_potentials)
        rows = self._replace(coarse_potentials=coarse_potentials, coarse_gradients=coarse_gradients)
        return rows.where(usable), usable

    def where(self, mask: np.ndarray) -> _TrainingRows:
        """The rows ``mask`` selects."""
        return _TrainingRows(*(None if field is None else field[mask] for field in self))

    def differences(self) -> _TrainingRows:
        """Rows of ``U - U_c`` (and ``grad U - grad U_c``): the correction's targets."""
        gradients = None if self.gradients is None else self.gradients - self.coarse_gradients
        return _TrainingRows(self.positions, self.potentials - self.coarse_potentials, gradients)

    def held_out_errors(self, correction, network, fraction: float) -> HeldOutErrors:
        """The three predictors' relative errors on the correction's held-out points.

        The correction holds out the same points of the same rows (``validation_mask``) and
        whitens the same way, so its absolute held-out error of ``U - U_c`` is the corrected
        surrogate's error of ``U``. The network alone was fitted to the rows before the coarse
        model's failures were dropped, so its error is comparable only when there were none
        (else it is NaN), and without gradients it is not fitted (NaN).
        """
        held_out = validation_mask(len(self.positions), fraction)
        if not held_out.any():
            return HeldOutErrors(np.nan, np.nan, np.nan)
        if self.gradients is None:
            scale = float(np.std(self.potentials[held_out]))
            miss = self.potentials[held_out] - self.coarse_potentials[held_out]
            corrected = np.nan if correction is None else correction.report.potential_error
            return HeldOutErrors(float(np.std(miss)) / scale, corrected / scale, np.nan)
        whitening = Whitening.from_positions(self.positions)
        exact = whitening.gradient_to_whitened(self.gradients[held_out])
        miss = exact - whitening.gradient_to_whitened(self.coarse_gradients[held_out])
        spread = _spread(exact)
        coarse = float(np.sqrt(np.mean(np.sum(miss**2, axis=1)) / spread))
        corrected = np.nan
        if correction is not None:
            corrected = correction.report.gradient_error * np.sqrt(_spread(miss) / spread)
        comparable = network is not None and network.report.n_points == len(self.positions)
        network_error = network.report.gradient_error if comparable else np.nan
        return HeldOutErrors(coarse, float(corrected), float(network_error))


def _spread(gradients: np.ndarray) -> float:
    """Mean squared distance of the rows from their mean (the network's error scale)."""
    return float(np.mean(np.sum((gradients - gradients.mean(axis=0)) ** 2, axis=1)))

"""The interface a surrogate must offer to drive surrogate Hamiltonian dynamics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = [
    "Capabilities",
    "PotentialSurrogate",
    "approximate_covariance",
    "fit_summary",
    "for_simulation",
    "held_out_error",
    "reports_held_out_error",
    "with_gaussian_base",
    "potential_and_gradient",
    "simulation_proxy",
]


@runtime_checkable
class PotentialSurrogate(Protocol):
    """A cheap approximation of the potential energy ``U(q) = -logp(q)``.

    ``fit`` receives exact evaluations in the sampler's (transformed, raveled) coordinates;
    ``gradient`` is called once per leapfrog step, one point at a time, so it must be fast;
    ``potential`` is used only for diagnostics (the exact Metropolis test never sees it).
    Fitting may raise :class:`~pymc_rnshmc.surrogates.SurrogateFitError`.

    Examples
    --------
    A Gaussian surrogate with the training points' mean and variances, driving RNSHMC:

    >>> import numpy as np
    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSHMC, PotentialSurrogate
    >>> class Gaussian:
    ...     def fit(self, positions, potentials, gradients=None, rng=None):
    ...         self.mean, self.var = positions.mean(axis=0), positions.var(axis=0)
    ...         return self
    ...     def potential(self, positions):
    ...         return np.sum((positions - self.mean) ** 2 / (2 * self.var), axis=-1)
    ...     def gradient(self, position):
    ...         return (position - self.mean) / self.var
    >>> isinstance(Gaussian(), PotentialSurrogate)
    True
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     step = RNSHMC(surrogate=Gaussian(), exploration_steps=100, weigh_costs=False)
    ...     idata = pm.sample(
    ...         step=step, tune=300, draws=200, chains=1, random_seed=1, progressbar=False,
    ...         compute_convergence_checks=False,
    ...     )
    >>> bool(abs(idata.posterior["x"].mean() - 1.0) < 0.3)
    True
    """

    def fit(
        self,
        positions: np.ndarray,
        potentials: np.ndarray,
        gradients: np.ndarray | None = None,
        rng: np.random.Generator | None = None,
    ) -> PotentialSurrogate:
        """Fit to exact ``U`` (and ``grad U``) at ``positions`` ``(n, d)``; return ``self``."""
        ...

    def potential(self, positions: np.ndarray) -> np.ndarray | float:
        """Surrogate ``U`` at one point or at rows."""
        ...

    def gradient(self, position: np.ndarray) -> np.ndarray:
        """Surrogate ``grad U`` at one point."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """What a surrogate declares beyond :class:`PotentialSurrogate` (read with :meth:`of`).

    Attributes
    ----------
    online : bool
        ``online_estimator(positions, potentials, gradients)`` returns a learner whose
        ``updated_surrogate(fast_only)`` includes every point ``add``-ed since (ARNSHMC needs
        it); with ``fast_only=True`` it raises ``LinAlgError`` rather than run a slow solve.
    defined_everywhere : bool
        Finite everywhere by design. ``False`` (a grid's box): NaN outside its domain is how it
        works, and the exact potential and gradient are used there.
    gradient_field : bool
        The force is the gradient of the surrogate potential. ``False`` for a piecewise-constant
        force map, whose energy the step size cannot be adapted on.
    """

    online: bool = False
    defined_everywhere: bool = True
    gradient_field: bool = True

    @classmethod
    def of(cls, surrogate) -> Capabilities:
        """The capabilities a surrogate declares (attributes of the same names, else defaults)."""
        return cls(
            online=callable(getattr(surrogate, "online_estimator", None)),
            defined_everywhere=bool(getattr(surrogate, "defined_everywhere", True)),
            gradient_field=bool(getattr(surrogate, "is_gradient_field", True)),
        )


def for_simulation(surrogate):
    """The surrogate as trajectory simulations see it: finite everywhere, no exact evaluations.

    A surrogate defined only in a domain offers ``for_simulation()``; others are used as they are.
    """
    method = getattr(surrogate, "for_simulation", None)
    return method() if callable(method) else surrogate


def simulation_proxy(surrogate):
    """What batched simulations that choose the dynamics run on: the surrogate, or its proxy.

    A surrogate that is slow on rows of points (one that calls the user's coarse model point
    by point) offers ``simulation_proxy()``: a cheap stand-in fitted to the same points. The
    dynamics chosen on it are a tuning choice; the draws' exact correction is unchanged.
    """
    method = getattr(surrogate, "simulation_proxy", None)
    return method() if callable(method) else surrogate


def approximate_covariance(surrogate) -> np.ndarray | None:
    """A posterior covariance the surrogate suggests as a metric candidate, if it has one."""
    method = getattr(surrogate, "approximate_covariance", None)
    return method() if callable(method) else None


def fit_summary(surrogate) -> str:
    """One phrase on the fit for the log (empty if the surrogate has no report)."""
    summary = getattr(getattr(surrogate, "report", None), "summary", None)
    return summary() if callable(summary) else ""


def held_out_error(surrogate) -> float:
    """The relative held-out error of the surrogate's fit (NaN if it reports none).

    The gradient error for a fit to gradients, the potential error for a fit to values only
    (``FitReport.held_out_error``).
    """
    report = getattr(surrogate, "report", None)
    error = getattr(report, "held_out_error", None)
    if error is None:
        error = getattr(report, "gradient_error", np.nan)
    return float(error)


def reports_held_out_error(surrogate) -> bool:
    """Whether the surrogate's fits report a held-out error at all (a network's do, a grid's not).

    Where they do, :func:`held_out_error` is NaN only for a fit that held no point out.
    """
    report = getattr(surrogate, "report", None)
    return hasattr(report, "held_out_error") or hasattr(report, "gradient_error")


def fit_evaluates_models(surrogate) -> bool:
    """Whether the surrogate's fit evaluates a model (a grid's exact nodes, a coarse model).

    Such a fit's seconds are mostly evaluations, the first of which may compile the model's
    function; a fit that only computes declares nothing (``fit_evaluates_models`` false).
    """
    return bool(getattr(surrogate, "fit_evaluates_models", False))


def with_gaussian_base(surrogate, mean: np.ndarray, covariance: np.ndarray):
    """The surrogate with ``N(mean, covariance)`` as the base of its fits to values.

    For surrogates that offer ``with_gaussian_base``; others are returned as they are.
    """
    method = getattr(surrogate, "with_gaussian_base", None)
    return method(mean, covariance) if callable(method) else surrogate


def potential_and_gradient(surrogate):
    """``q -> (U~(q), grad U~(q))`` at one point: the surrogate's fused method if it has one."""
    method = getattr(surrogate, "potential_and_gradient", None)
    if callable(method):
        return method

    def separately(position: np.ndarray) -> tuple[float, np.ndarray]:
        return float(surrogate.potential(position)), np.asarray(surrogate.gradient(position))

    return separately

"""What a fit is set up with: its time limit, weighed error, the setup deadline, and dynamics.

The steps of the warm-up's first fit and of each refit between fitting a surrogate and starting
it, as functions of explicit values rather than of the warm-up: the held-out error the economy
weighs, when the setup budget runs out, the trajectories chosen by simulation on the surrogate
(metric, step size and path length; no exact evaluation), and the log line that reports the fit.
numpy only.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Callable

import numpy as np

from pymc_rnshmc.exceptions import SurrogateWarning
from pymc_rnshmc.hmc.trajectory_tuning import TrajectoryChoice
from pymc_rnshmc.step_methods.collapse_watch import COLLAPSE_WINDOW
from pymc_rnshmc.step_methods.dynamics import DynamicsSetting
from pymc_rnshmc.step_methods.economy import Economy
from pymc_rnshmc.step_methods.kernel_fit import candidate_metrics, fit_surrogate
from pymc_rnshmc.step_methods.time_limit import RESUME_AT_ONCE, Deadline, why_unenforceable
from pymc_rnshmc.surrogates.base import (
    fit_evaluates_models,
    fit_summary,
    held_out_error,
    reports_held_out_error,
)

__all__ = [
    "choose_dynamics",
    "fit_time_limit",
    "fit_window",
    "log_fit",
    "log_fit_stopped",
    "setup_deadline",
    "warn_if_unchecked",
    "weighed_error",
]

_log = logging.getLogger("pymc.rnshmc")


def fit_window(
    host, window: tuple, laplace, rng: np.random.Generator, limit: float = np.inf
) -> tuple:
    """``(surrogate, gradients)``: a new surrogate of ``host``'s fitted to the training ``window``.

    ``window``: positions, potentials and gradients (``None`` without); ``laplace``: the mode
    search's approximation, if any, as a base
    (:func:`~pymc_rnshmc.step_methods.kernel_fit.fit_surrogate`). ``limit``: seconds after
    which the fit is abandoned (:func:`fit_time_limit`), unless it evaluates a model
    (:func:`~pymc_rnshmc.surrogates.base.fit_evaluates_models`): a sparse grid's exact nodes
    are its sampler's design, bounded by its own ``max_grid``, and a model's first evaluation
    compiles its function (on PyMC 5 in a fresh environment the grid's fit in the banana
    notebook's smoke run passed a limit of about 0.4 s that way).
    """
    positions, potentials, gradients = window
    surrogate = host.new_surrogate()
    with fit_time_limit(np.inf if fit_evaluates_models(surrogate) else limit):
        return fit_surrogate(surrogate, positions, potentials, gradients, laplace, rng.spawn(1)[0])


def fit_time_limit(seconds: float) -> contextlib.AbstractContextManager:
    """A limit of ``seconds`` on a fit: :class:`~pymc_rnshmc.step_methods.time_limit.Deadline`.

    Raises :class:`~pymc_rnshmc.exceptions.EvaluationTimeout` once they pass. No limit for
    infinite ``seconds`` or where a signal cannot interrupt the fit (another thread than the
    main one, no SIGALRM: :func:`~pymc_rnshmc.step_methods.time_limit.why_unenforceable`); a fit
    makes a fresh surrogate, so abandoning one leaves nothing half-changed.
    """
    if not np.isfinite(seconds) or why_unenforceable() is not None:
        return contextlib.nullcontext()
    return Deadline(max(float(seconds), RESUME_AT_ONCE))


def weighed_error(surrogate, values_only: bool) -> float:
    """The held-out gradient error the economy weighs (NaN for a fit to values only)."""
    return np.nan if values_only else held_out_error(surrogate)


def setup_deadline(
    economy: Economy,
    started: float,
    fit_error: float,
    tuning_left: int | None,
    draws_left: int,
    spent: float,
) -> Callable[[], bool] | None:
    """``out_of_time()`` for a fit begun at ``started`` (``time.perf_counter``).

    True once past the economy's setup budget for the ``draws_left`` still to come (those of
    every chain sharing the surrogate), less the ``spent`` seconds of earlier fits; at once for
    a poor fit (weighed ``fit_error``) awaiting the verdict with ``tuning_left`` draws
    (:meth:`~pymc_rnshmc.step_methods.economy.Economy.skips_setup`). ``None`` where it is
    unbounded (costs not weighed, or not yet measured).
    """
    if economy.skips_setup(fit_error, tuning_left):
        return lambda: True
    budget = economy.setup_budget(draws_left, spent)
    if not np.isfinite(budget):
        return None
    deadline = started + budget
    return lambda: time.perf_counter() > deadline


def choose_dynamics(
    settings,
    surrogate,
    positions: np.ndarray,
    gradients: np.ndarray,
    explorer_metric: tuple[np.ndarray | None, np.ndarray | None, float],
    first_guess: float,
    rng: np.random.Generator,
    previous: TrajectoryChoice | None = None,
    out_of_time: Callable[[], bool] | None = None,
) -> TrajectoryChoice:
    """Metric, step size and path length, by simulating surrogate chains (no exact calls).

    ``settings``: the warm-up's
    (:class:`~pymc_rnshmc.step_methods.warmup.WarmupSettings`); ``explorer_metric``: the exact
    explorer's diagonal metric, chain covariance and step size; ``first_guess``: the step size
    the search starts from; ``previous``: the last fit's choice, for a refit's shorter scan
    (``None`` for a first fit). ``out_of_time()``, if given, ends the comparison of metrics and
    the scan of path lengths early (the setup budget).
    """
    explorer_variances, explorer_covariance, _ = explorer_metric
    setting = DynamicsSetting(
        positions=positions,
        gradients=gradients,
        explorer_variances=explorer_variances,
        extra_metrics=candidate_metrics(surrogate, explorer_covariance),
        step_size=first_guess,
        target_accept=settings.surrogate_target_accept,
        max_steps=settings.max_steps,
        rng=rng.spawn(1)[0],
        path_length=settings.path_length,
        simulated_draws=settings.schedule.simulated_draws,
        refit=previous is not None,
        previous=None if previous is None else previous.best,
        out_of_time=out_of_time,
    )
    return settings.dynamics.choose(surrogate, setting)


def log_fit(settings, surrogate, choice: TrajectoryChoice, n_points: int, first: bool) -> None:
    """One log line: the fit and the trajectories chosen (INFO for the ``first``, else DEBUG)."""
    best, dynamics = choice.best, settings.dynamics
    _log.log(
        logging.INFO if first else logging.DEBUG,
        "%s fitted its surrogate on %d exact draws%s; trajectories: %s metric, "
        "step size %.3g, %s (simulated ESS %.2f per draw).",
        settings.name,
        n_points,
        fit_summary(surrogate),
        best.metric.kind,
        best.step_size,
        f"path length {best.path_length:.3g}" if dynamics.chooses_path_length else "NUTS trees",
        best.ess_mean,
    )


def log_fit_stopped(settings, shape: tuple[int, int], limit: float, draws_left: int) -> None:
    """One log line: a first fit on ``shape`` (points, dimensions) ran past its ``limit``.

    The limit is what exact NUTS needs for the ``draws_left`` draws still to come
    (:meth:`~pymc_rnshmc.step_methods.economy.Economy.fit_limit`); the chain continues with it.
    """
    exact = settings.exact_sampler
    _log.info(
        "%s continues with %s: its surrogate cannot pay on this model (its fit on %d points in "
        "%d dimensions was stopped after %.3g s, as long as %s needs for the %d draws left).",
        settings.name,
        exact,
        *shape,
        limit,
        exact,
        draws_left,
    )


def warn_if_unchecked(name: str, surrogate, points: int, tuning_left: int | None) -> None:
    """Warn of a first fit nothing will check: none held out, too little tuning left.

    ``surrogate`` fitted on ``points`` draws by the sampler called ``name``; ``tuning_left``:
    tuning draws after it (``None``: not known, or none because tuning ends; such a fit has its
    own warning). Only for a surrogate whose fits report a held-out error
    (:func:`~pymc_rnshmc.surrogates.base.reports_held_out_error`) and this one held no point
    out. Its draws stay exact (each is corrected), but a surrogate fitted on a handful of draws
    may move them poorly: ``tune=5`` on a 1-d normal, PyMC 6.4, fitted on 3 draws and gave a
    bulk ESS of 49, 1729 and 618 per 1000 draws on seeds 1-3.
    """
    if tuning_left is None or tuning_left >= COLLAPSE_WINDOW:
        return
    if not reports_held_out_error(surrogate) or np.isfinite(held_out_error(surrogate)):
        return
    warnings.warn(
        f"{name} fitted its surrogate on {points} exact draws, too few to hold any out and "
        f"check the fit, with {tuning_left} tuning draws left to watch it (it needs "
        f"{COLLAPSE_WINDOW}). The draws stay exact but may mix poorly. Increase `tune`.",
        SurrogateWarning,
        stacklevel=5,
    )

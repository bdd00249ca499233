"""A chain's exact sampler: what explores, catches (safety net) and takes over (fall-back).

The step holds one of two, chosen by whether the model's logp has a gradient:

- :class:`NUTSExplorer`: PyMC's own NUTS, held as a part rather than inherited, so its tree,
  step-size and mass-matrix adaptation and divergence reports are PyMC's, unchanged. What a
  surrogate chain adds: where each trajectory ended (a training point with its gradient), the
  explored metric and step size for the first surrogate dynamics, and a step-size adaptation
  restarted when exact draws resume while tuning. By default its first tuning draw starts at
  the mode, with a metric from the curvature there
  (:func:`~pymc_rnshmc.surrogates.laplace.laplace_from_gradients`,
  :class:`~pymc_rnshmc.step_methods.mode_metric.WhitenedDiagAdapt`), where a mode is found.
- :class:`RandomWalkExplorer`: adaptive random-walk Metropolis for a values-only model
  (:mod:`~pymc_rnshmc.exploration.adaptive_metropolis`, numpy), started at the mode with the
  curvature's covariance (:func:`~pymc_rnshmc.surrogates.laplace.laplace_start`).

Both answer ``draw(q0, start, tune, rng) -> ExactDraw``: the new position, PyMC-style stats in
this package's names (:data:`~pymc_rnshmc.step_methods.reporting.SURROGATE_HMC_STATS`), and the
exact evaluation the draw made that the warm-up may record.
"""

from __future__ import annotations

import copy
import functools
import logging
import time
from typing import Any, NamedTuple

import numpy as np
from pymc.blocking import RaveledVars
from pymc.step_methods.hmc.integration import IntegrationError
from pymc.step_methods.hmc.nuts import NUTS
from pymc.step_methods.hmc.quadpotential import QuadPotentialDiag, QuadPotentialDiagAdapt
from pymc.step_methods.state import DataClassState, WithSamplingState, dataclass_state
from pymc.step_methods.step_sizes import DualAverageAdaptation

from pymc_rnshmc.exceptions import ModelEvaluationError
from pymc_rnshmc.exploration.adaptive_metropolis import AdaptiveMetropolis
from pymc_rnshmc.hmc.transition import CachedPoint
from pymc_rnshmc.step_methods.mode_metric import WhitenedDiagAdapt
from pymc_rnshmc.step_methods.model_failures import GuardedLogpGradient
from pymc_rnshmc.step_methods.options import nuts_option
from pymc_rnshmc.step_methods.reporting import exact_draw_stats, nuts_stats_to_surrogate_stats
from pymc_rnshmc.surrogates.laplace import (
    LaplaceStart,
    importance_check,
    laplace_from_gradients,
    laplace_start,
)

__all__ = ["ExactDraw", "NUTSExplorer", "RandomWalkExplorer", "new_explorer"]

_log = logging.getLogger("pymc.rnshmc")

FRESH_ADAPTATION_DRAWS = 100
"""Exact NUTS resuming while tuning adapts its step size afresh if at least this many tuning
draws remain (or PyMC 5 does not say how many), and otherwise keeps exploration's."""


def new_explorer(
    sampler: str, exact_model, vars, function, nuts_options: dict, from_mode: bool = True
):
    """The chain's exact sampler: PyMC's NUTS, or a random walk for a model without gradients.

    NUTS shares the step's compiled ``function``, and its leapfrog fails and is limited in time
    as the exact model is. With ``from_mode`` it starts tuning at the mode with the curvature's
    metric, where there is one (see :class:`NUTSExplorer`).
    """
    dual_averaging = tuple(nuts_option(nuts_options, name) for name in ("gamma", "k", "t0"))
    if exact_model.has_gradient:

        def guard(function):
            return GuardedLogpGradient(exact_model.limited(function), exact_model.failures)

        find_mode = functools.partial(search_mode, sampler, exact_model) if from_mode else None
        return NUTSExplorer(vars, function, guard, dual_averaging, find_mode, **nuts_options)
    _log.info(
        "%s: the model's logp has no gradient, so it explores with adaptive random-walk "
        "Metropolis and fits its surrogate to log-density values; after tuning a draw "
        "still costs one logp.",
        sampler,
    )
    first_step = nuts_option(nuts_options, "step_scale") / exact_model.size**0.25
    first_step = float(np.exp(np.log(first_step)))  # as NUTS's dual averaging gives it back
    return RandomWalkExplorer(exact_model, first_step, dual_averaging)


def search_mode(sampler: str, exact_model, start: np.ndarray, rng) -> LaplaceStart:
    """The mode and the curvature's covariance there, if the approximation holds (else none).

    The search probes where the chain may never go (its line searches), so it evaluates a copy
    of the exact model whose failures are not the chain's: failures there are not counted, and
    an error the failure policy would stop sampling for ends the search instead (sampling stops
    only if the chain's own draws meet it). The joint logp-and-gradient function serves every
    evaluation, also the importance check's, so that the logp-only function is compiled, or not,
    as it would be without the search.
    """
    searcher = exact_model.for_another_chain()
    calls = 0

    def potential_and_gradient(position):
        nonlocal calls
        calls += 1
        return searcher.potential_and_gradient(position)

    def log_density(position):
        return -potential_and_gradient(position)[0]

    try:
        laplace = laplace_from_gradients(potential_and_gradient, start, exact_model.dtype)
        laplace, spread = importance_check(log_density, laplace, rng)
    except ModelEvaluationError as error:
        _log.debug("%s: the mode search met an error of the model, so it ended: %s", sampler, error)
        laplace, spread = LaplaceStart(np.asarray(start, dtype=float), -np.inf, None, 0), np.inf
    _log.debug("%s: mode search, log importance weights' spread %.3g", sampler, spread)
    return laplace._replace(n_evaluations=calls, n_gradients=calls)


class ExactDraw(NamedTuple):
    """One exact draw: where the chain went, the draw's stats, and what it evaluated."""

    position: np.ndarray
    logp: float
    stats: dict[str, Any]
    evaluated: tuple[np.ndarray, float, np.ndarray | None] | None
    """A point the draw evaluated exactly, ``(x, U, grad U or None)``, for the record."""
    laplace: LaplaceStart | None = None
    """The mode search that moved the chain's first draw (random walk only), and ..."""
    setup_seconds: float = 0.0
    """... the seconds it took."""
    seconds: float = float("nan")
    """The draw's own compute time where it ran, where an evaluator measured it."""


class _NUTSKeepingTheEnd(NUTS):
    """PyMC's NUTS, remembering where its last trajectory ended (position, logp, gradient)."""

    last_end = None

    def _hamiltonian_step(self, start, p0, step_size):
        result = super()._hamiltonian_step(start, p0, step_size)
        self.last_end = result.end
        return result


@dataclass_state
class _NUTSExplorerState(DataClassState):
    nuts: Any
    _mode_searched: bool


class NUTSExplorer(WithSamplingState):
    """PyMC's NUTS as a surrogate chain's exact sampler.

    Parameters
    ----------
    vars : list
        The step's value variables.
    function : pymc ValueGradFunction
        The step's compiled logp-and-gradient function (shared, not compiled again).
    guard : callable
        Wraps the function PyMC's leapfrog calls, so that it fails and is limited in time as
        the step's exact model is (:mod:`~pymc_rnshmc.step_methods.model_failures`).
    dual_averaging : tuple
        PyMC's ``(gamma, k, t0)``, for an adaptation restarted while tuning (and for the
        surrogate step size's).
    find_mode : callable, optional
        ``find_mode(x, rng) -> LaplaceStart``: a search from the chain's first position. If given,
        the first tuning draw moves to the mode it finds and adapts a metric around its
        covariance (:class:`~pymc_rnshmc.step_methods.mode_metric.WhitenedDiagAdapt`) instead
        of PyMC's diagonal one from the identity; if it finds no mode, nothing changes. Not
        used with a metric of the user's (``scaling`` or ``potential``).
    **nuts_options
        Passed on to :class:`pymc.NUTS` (``model``, ``target_accept``, ``scaling``, ...).

    References
    ----------
    .. [1] Hoffman, M. D., & Gelman, A. (2014). The No-U-Turn Sampler. Journal of Machine
       Learning Research, 15, 1593-1623.
    .. [2] Betancourt, M. (2017). A conceptual introduction to Hamiltonian Monte Carlo.
       arXiv:1701.02434.
    """

    _state_class = _NUTSExplorerState
    needs_logp = False
    """NUTS evaluates its own starting point."""
    description = "exact NUTS"
    """What samples when the surrogate does not, for messages."""

    def __init__(
        self, vars, function, guard, dual_averaging: tuple, find_mode=None, **nuts_options
    ) -> None:
        self.nuts = _NUTSKeepingTheEnd(vars, logp_dlogp_func=function, **nuts_options)
        self.nuts.integrator._logp_dlogp_func = guard(self.nuts.integrator._logp_dlogp_func)
        self.dual_averaging = dual_averaging
        users_metric = {"scaling", "potential"} & set(nuts_options)
        self.find_mode = None if users_metric else find_mode
        if self.find_mode is not None:  # PyMC's own metric: its diagonal adaptation
            potential = WhitenedDiagAdapt.like(self.nuts.potential)
            self.nuts.potential = self.nuts.integrator._potential = potential
        self._initial_adaptation = copy.deepcopy(self.nuts.step_adapt)
        self._mode_searched = False

    def use_rng(self, rng: np.random.Generator) -> np.random.Generator:
        """Draw from the chain's generator, and a child of it for the momenta (as PyMC's)."""
        self.nuts.rng = rng
        self.nuts.potential.set_rng(rng.spawn(1)[0])
        return rng

    def share_rng(self, rng: np.random.Generator) -> None:
        """Draw from ``rng`` (the step's, after PyMC restored the two separately)."""
        self.nuts.rng = rng

    def start_chain(self) -> None:
        """Forget the previous chain's adaptation, step size and metric from the mode."""
        self.nuts.reset()
        self.nuts._num_divs_sample = 0
        self.nuts.step_adapt = copy.deepcopy(self._initial_adaptation)
        self._mode_searched = False

    def draw(self, q0: RaveledVars, start: CachedPoint | None, tune: bool, rng=None) -> ExactDraw:
        """One NUTS draw from ``q0`` (``start``: the chain's cached point, if it is ``q0``).

        The chain's first draw, if tuning, starts at the mode (``find_mode``) where one is found.
        """
        nuts = self.nuts
        nuts.tune = tune
        laplace, seconds = None, 0.0
        if tune and not self._mode_searched and self.find_mode is not None:
            q0, laplace, seconds = self._start_at_mode(q0)
        self._mode_searched = True
        try:
            q_new, (stats,) = nuts.astep(q0)
        except IntegrationError:  # raised only where NUTS starts: its trajectories catch it
            return self._unstarted(start, tune)
        end = nuts.last_end
        evaluated = (end.q.data, -float(end.logp), -np.asarray(end.q_grad))
        stats = nuts_stats_to_surrogate_stats(stats)
        if laplace is not None:
            stats["n_logp_evals"] += laplace.n_evaluations
            stats["n_gradient_evals"] += laplace.n_gradients
        return ExactDraw(q_new.data, stats["model_logp"], stats, evaluated, laplace, seconds)

    def _start_at_mode(self, q0: RaveledVars) -> tuple[RaveledVars, LaplaceStart, float]:
        """Search the mode from ``q0``; if one is found, start there with its metric.

        The search's evaluations are not training points (its line searches reach far into the
        tails, see :class:`RandomWalkExplorer`); they and the time count as the draw's.
        """
        clock = time.perf_counter()
        laplace = self.find_mode(q0.data, self.nuts.rng)
        if laplace.covariance is not None:
            try:
                self.nuts.potential.use_laplace(laplace.position, laplace.covariance)
            except np.linalg.LinAlgError:
                pass
            else:
                position = laplace.position.astype(q0.data.dtype)
                q0 = RaveledVars(position, q0.point_map_info)
        return q0, laplace, time.perf_counter() - clock

    def _unstarted(self, start: CachedPoint | None, tune: bool) -> ExactDraw:
        """A draw that could not start: a counted rejection, the chain stays.

        The model's gradient raised a rejected error at the chain's point (the guard counted
        it), which a logp-only evaluation had accepted (a surrogate or safety-net draw's end, a
        resumed exploration), as at a divergence of NUTS's first step.
        """
        self.nuts.iter_count += 1
        adaptation = self.nuts.step_adapt
        stats = exact_draw_stats(
            accept=0.0,
            accepted=False,
            logp=np.nan if start is None else start.logp,
            energy_error=np.nan,
            n_steps=0,
            step_size=float(adaptation.current(tune)),
            step_size_bar=float(adaptation.current(False)),
            n_logp_evals=1,
            n_gradient_evals=1,
            divergences=self.nuts.divergences,
        )
        return ExactDraw(None, stats["model_logp"], stats, None)

    def metric(self) -> tuple[np.ndarray | None, np.ndarray | None, float]:
        """The explored metric, as variances or a covariance (``None`` if neither), step size."""
        potential, step_size = self.nuts.potential, float(self.nuts.step_adapt.current(False))
        if isinstance(potential, WhitenedDiagAdapt) and potential.whitened:
            return None, potential.covariance(), step_size
        variances = None
        if isinstance(potential, QuadPotentialDiagAdapt):
            variances = potential.velocity(np.ones(potential._n))
        elif isinstance(potential, QuadPotentialDiag):  # the user's scaling
            variances = np.array(potential.v, dtype=float)
        return variances, None, step_size

    def resume(self, tuning_draws_left: int | None, draws: np.ndarray | None = None) -> None:
        """Adapt the step size afresh for exact draws resuming while tuning.

        ``draws``: the chain's positions so far ``(n, d)``. Where no Laplace approximation
        whitens the metric, and the step size is adapted afresh, they may whiten it
        (:meth:`~pymc_rnshmc.step_methods.mode_metric.WhitenedDiagAdapt.use_draws`).

        A fresh dual averaging from the step size exploration ended with, as Stan restarts it
        after each metric window, unless fewer than ``FRESH_ADAPTATION_DRAWS`` tuning draws
        remain. Exploration's own adaptation carries hundreds of draws of history from another
        phase of the chain. On Neal's funnel (d = 10, 2 x (1000 + 1000) draws, seeds 1 and 2),
        chains that resumed with it at draw 625 ended tuning at step sizes of 0.02-0.07, stuck
        in the neck, and diverged in 202 and 970 of 1000 draws; adapted afresh, they diverged
        in 3 and 4, and their 90 % intervals of ``v`` were about (-3.5, 3.5) (exact: +-4.93).
        """
        explored = self.nuts.step_adapt
        if not _adapts_afresh(tuning_draws_left):
            self.nuts.step_adapt = copy.deepcopy(explored)
            return
        self.nuts.step_adapt = DualAverageAdaptation(
            float(explored.current(False)), self.nuts.target_accept, *self.dual_averaging
        )
        if draws is not None and self._draws_may_set_metric():
            if self.nuts.potential.use_draws(draws):
                _log.debug("exact NUTS: a metric from the chain's correlated draws")

    def _draws_may_set_metric(self) -> bool:
        """Whether the metric is PyMC's diagonal one or from draws (not the user's or a mode's)."""
        potential = self.nuts.potential
        if not isinstance(potential, WhitenedDiagAdapt):
            return False
        return potential.from_draws or not potential.whitened

    def takes_metric_from(self, draws: np.ndarray, tuning_draws_left: int | None) -> bool:
        """Whether exact NUTS has, or would have on resuming, a metric from the chain's draws.

        ``draws``: the chain's positions so far ``(n, d)``; ``tuning_draws_left`` as for
        :meth:`resume`, which takes a metric only where it adapts afresh. Such a metric is one
        the exploration before the first fit did not have.
        """
        if not self._draws_may_set_metric():
            return False
        potential = self.nuts.potential
        if potential.from_draws:
            return True
        return _adapts_afresh(tuning_draws_left) and potential.metric_from_draws(draws) is not None

    def step_size(self) -> float:
        """The averaged step size of the exact draws."""
        return float(self.nuts.step_adapt.current(False))

    @property
    def adapting(self) -> bool:
        """Whether the step size and mass matrix still adapt (while tuning)."""
        return bool(self.nuts.tune)

    def stop_tuning(self) -> None:
        self.nuts.stop_tuning()


def _adapts_afresh(tuning_draws_left: int | None) -> bool:
    """Whether exact NUTS resuming now adapts afresh (PyMC 5 does not say: it does)."""
    return tuning_draws_left is None or tuning_draws_left >= FRESH_ADAPTATION_DRAWS


@dataclass_state
class _RandomWalkState(DataClassState):
    walk: AdaptiveMetropolis
    _started: bool


class RandomWalkExplorer(WithSamplingState):
    """Adaptive random-walk Metropolis as the exact sampler of a model without gradients.

    Parameters
    ----------
    exact_model : ExactModel
        The step's door to the model (``logp``, ``cast``, ``extra_values``).
    first_step_size : float
        The surrogate dynamics' first guess of a leapfrog step size, which a random walk's
        scale is not: PyMC's NUTS starts from ``0.25 / d ** 0.25``.
    dual_averaging : tuple
        PyMC's ``(gamma, k, t0)``, for the surrogate step size's adaptation.

    References
    ----------
    .. [1] Haario, H., Saksman, E., & Tamminen, J. (2001). An adaptive Metropolis algorithm.
       Bernoulli, 7(2), 223-242.
    """

    _state_class = _RandomWalkState
    needs_logp = True
    """A draw starts from the chain's ``logp``, which the step knows or evaluates."""
    description = "the exact random-walk Metropolis (its adaptation fixed after tuning)"

    def __init__(self, exact_model, first_step_size: float, dual_averaging: tuple) -> None:
        self.exact_model = exact_model
        self.first_step_size = first_step_size
        self.dual_averaging = dual_averaging
        self.start_chain()

    def use_rng(self, rng: np.random.Generator) -> np.random.Generator:
        """The chain's generator, which each draw is given."""
        return rng

    def share_rng(self, rng: np.random.Generator) -> None:
        """Nothing to share: each draw is given the step's generator."""

    def start_chain(self) -> None:
        """A fresh random walk, adapting, whose first tuning draw will search for the mode."""
        self.walk = AdaptiveMetropolis(self.exact_model.size)
        self._started = False

    def draw(self, q0: RaveledVars, start: CachedPoint, tune: bool, rng) -> ExactDraw:
        """One random-walk Metropolis draw from ``start`` (whose ``logp`` the step knows).

        The first draw of a tuning chain first moves to the mode. The proposal is returned as
        the evaluated point, accepted or not, if its ``logp`` is finite.
        """
        laplace, seconds, n_start = None, 0.0, 0
        if tune and not self._started:
            start, laplace, seconds = self._start_at_mode(start)
            n_start = laplace.n_evaluations
        self._started = True
        step = self.walk.step(start.position, start.logp, self.exact_model.logp, rng)
        evaluated = None
        if np.isfinite(step.proposal_logp):
            evaluated = (step.proposal, -step.proposal_logp, None)
        stats = exact_draw_stats(
            accept=step.accept,
            accepted=step.accepted,
            logp=step.logp,
            energy_error=start.logp - step.proposal_logp,
            n_steps=1,
            step_size=self.walk.scale,
            step_size_bar=self.walk.scale,
            n_logp_evals=1 + n_start,
            n_gradient_evals=0,
            divergences=0,
            eigenvalue_range=self.walk.eigenvalue_range(),
        )
        position = self.exact_model.cast(step.position)
        return ExactDraw(position, step.logp, stats, evaluated, laplace, seconds)

    def _start_at_mode(self, start: CachedPoint) -> tuple[CachedPoint, LaplaceStart, float]:
        """Move the chain's first draw to the mode, with the curvature's covariance.

        The search's evaluations are not training points: its line searches reach far into the
        tails, where the values are huge and the chain never goes, and they pulled the
        surrogate's fit and the trajectories' covariance estimate there (pharmacokinetic ODE:
        path length 10 where the posterior needs about 2). The time counts as setup.
        """
        clock = time.perf_counter()
        laplace = laplace_start(self.exact_model.logp, start.position, start.logp)
        if laplace.covariance is not None:
            try:
                self.walk.use_covariance(laplace.covariance)
            except np.linalg.LinAlgError:
                pass
        position = self.exact_model.cast(laplace.position)
        point = CachedPoint(position, laplace.logp, self.exact_model.extra_values())
        return point, laplace, time.perf_counter() - clock

    def metric(self) -> tuple[np.ndarray | None, np.ndarray | None, float]:
        """The random walk's chain covariance stands in for NUTS's metric."""
        return None, self.walk.chain_covariance(), self.first_step_size

    def resume(self, tuning_draws_left: int | None, draws: np.ndarray | None = None) -> None:
        """Nothing to restart: the random walk adapts as it goes."""

    def takes_metric_from(self, draws: np.ndarray, tuning_draws_left: int | None) -> bool:
        """Never: the random walk's covariance adapts as it goes."""
        return False

    def step_size(self) -> float:
        return self.walk.scale

    @property
    def adapting(self) -> bool:
        """Whether the random walk's covariance and scale still adapt (while tuning)."""
        return bool(self.walk.adapting)

    def stop_tuning(self) -> None:
        self.walk.adapting = False  # a fixed random walk: an invariant kernel

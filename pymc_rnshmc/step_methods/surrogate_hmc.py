"""SurrogateHMC: the PyMC step that every surrogate sampler of this package configures.

The step drives a chain; its :class:`~pymc_rnshmc.step_methods.warmup.SurrogateWarmup` decides:

1. explore exactly: PyMC's NUTS, with its adaptation, recording every draw in the warm-up
   (:meth:`SurrogateHMC._hamiltonian_step`) until the schedule's exploration length;
2. fit a surrogate to the record, choose the dynamics (metric, step size and path length, by
   simulating on the surrogate) and build the chain's kernel (the warm-up's ``fit``, with this
   step as its host);
3. sample: one :func:`~pymc_rnshmc.hmc.kernel.kernel_step` of the kernel a draw, corrected by the
   exact model (:meth:`SurrogateHMC._surrogate_draw`); a share of the draws are the safety
   net's exact ones;
4. while tuning, if the schedule learns: record the plausible proposals with their exact
   gradients and refit while that still improves the fit; the kernel is frozen when tuning
   ends, so the kept draws are an ordinary Markov chain.

A model whose logp has no gradient is explored by an adaptive random-walk Metropolis instead of
NUTS (:meth:`SurrogateHMC._random_walk_draw`), every evaluated point is recorded with its value
alone, the surrogate is fitted to values, and the surrogate's own gradients stand in for the exact
ones where the dynamics are chosen; a trajectory that meets a point where the surrogate's force is
unusable is rejected, as there is no exact force to use there.

The hot path of a draw after tuning: ``step`` -> ``astep`` -> ``_surrogate_draw`` ->
:func:`~pymc_rnshmc.hmc.kernel.kernel_step` on the frozen kernel: the cached
:class:`~pymc_rnshmc.hmc.transition.CachedPoint` -> ``proposal.propose`` (leapfrog on the
:class:`~pymc_rnshmc.hmc.force_field.ForceField`, one surrogate gradient per step) ->
``correction.decide`` (one exact ``logp``) -> :class:`~pymc_rnshmc.hmc.transition.DrawResult`
-> ``_stats``.

Configurations change behaviour through the constructor's parts (the surrogate, the schedule,
``start_error``) and six hooks: ``_new_surrogate``, ``_correction``, ``_after_fit``,
``_before_draw``, ``_evaluate_end`` and ``_after_draw``.
"""

from __future__ import annotations

import copy
import inspect
import logging
import time
import warnings
from typing import Any

import numpy as np
from pymc.blocking import RaveledVars
from pymc.exceptions import SamplingError
from pymc.model import modelcontext
from pymc.stats.convergence import SamplerWarning, WarningType
from pymc.step_methods.compound import Competence
from pymc.step_methods.hmc.base_hmc import BaseHMC
from pymc.step_methods.hmc.integration import IntegrationError
from pymc.step_methods.hmc.nuts import NUTS, NUTSState
from pymc.step_methods.hmc.quadpotential import QuadPotentialDiag, QuadPotentialDiagAdapt
from pymc.step_methods.state import dataclass_state
from pymc.step_methods.step_sizes import DualAverageAdaptation
from pymc.util import get_random_generator
from pymc.vartypes import continuous_types

from pymc_rnshmc._checks import check_positive_integer, check_positive_number, check_probability
from pymc_rnshmc.exceptions import (
    ModelEvaluationError,
    SurrogateWarning,
)
from pymc_rnshmc.exploration.adaptive_metropolis import AdaptiveMetropolis, RandomWalkStep
from pymc_rnshmc.hmc.corrections import Correction, Evaluation
from pymc_rnshmc.hmc.force_field import EXACT_FORCE_FLOOR, EXACT_FORCE_SHARE
from pymc_rnshmc.hmc.kernel import SurrogateKernel, kernel_step
from pymc_rnshmc.hmc.trajectory_tuning import TrajectoryChoice
from pymc_rnshmc.hmc.transition import CachedPoint, DrawResult
from pymc_rnshmc.step_methods.acceptance_monitor import AcceptanceMonitor
from pymc_rnshmc.step_methods.dynamics import get_dynamics
from pymc_rnshmc.step_methods.exact_model import ExactModel, has_gradient
from pymc_rnshmc.step_methods.model_failures import GuardedLogpGradient, check_reject_errors
from pymc_rnshmc.step_methods.reporting import (
    SURROGATE_HMC_STATS,
    exact_draw_stats,
    nuts_stats_to_surrogate_stats,
    progressbar_config,
    progressbar_update,
    surrogate_draw_stats,
)
from pymc_rnshmc.step_methods.safety_net import SafetyNet
from pymc_rnshmc.step_methods.schedule import RNSHMC_SCHEDULE, ExplorationSchedule, Phase
from pymc_rnshmc.step_methods.variables import continuous_value_vars
from pymc_rnshmc.step_methods.wall_watch import WALL_NATS, WallWatch
from pymc_rnshmc.step_methods.warmup import SurrogateWarmup, WarmupSettings
from pymc_rnshmc.surrogates.base import (
    Capabilities,
)
from pymc_rnshmc.surrogates.laplace import laplace_start

__all__ = ["SurrogateHMC", "SurrogateHMCState"]

_log = logging.getLogger("pymc.rnshmc")
_DUAL_AVERAGING = ("gamma", "k", "t0")
"""PyMC's dual-averaging hyperparameters, as ``BaseHMC`` takes them."""
FRESH_ADAPTATION_DRAWS = 100
"""Exact NUTS resuming while tuning adapts its step size afresh if at least this many tuning
draws remain (or PyMC 5 does not say how many), and otherwise keeps exploration's."""
SURROGATE_ERROR_EVERY = 10
"""After tuning, the ``surrogate_error`` statistic is computed on every this-many-th draw."""


@dataclass_state
class SurrogateHMCState(NUTSState):
    """A chain's state: NUTS's plus the surrogate, the dynamics and the record (PyMC copies it)."""

    _warmup: SurrogateWarmup
    _tune_steps: int | None
    _cache: CachedPoint | None
    _warned_exact_forces: bool
    _explorer: Any


class SurrogateHMC(NUTS):
    r"""Surrogate HMC: explore with exact NUTS, fit a surrogate, propose with it, correct exactly.

    Not used directly: :class:`~pymc_rnshmc.RNSHMC`, :class:`~pymc_rnshmc.ARNSHMC` and
    :class:`~pymc_rnshmc.SparseGridHMC` configure it. After the exploration, each draw moves
    with the surrogate's dynamics and is accepted by the Metropolis test on the exact
    Hamiltonian, so for a fixed surrogate every draw is a Markov transition that leaves the
    posterior invariant, however good or bad the surrogate.

    Parameters
    ----------
    vars : list, optional
        Continuous variables to sample; default all continuous variables of the model.
    surrogate : PotentialSurrogate
        The unfitted surrogate each chain fits a copy of.
    schedule : ExplorationSchedule
        When the exploration ends and what the first fit uses.
    start_error : float, optional
        Start the surrogate dynamics only with a fit whose held-out gradient error is below
        this, postponing while the schedule allows; ``None`` starts with any fit (always, for
        a model without gradients).
    refit_during_tuning : bool
        Learn from the tuning draws and refit, if the schedule learns during tuning.
    dynamics : {"hmc", "nuts"}
        The surrogate proposals (:mod:`~pymc_rnshmc.step_methods.dynamics`): a fixed-length
        leapfrog corrected on the exact Hamiltonian, or a NUTS transition on the surrogate
        corrected by delayed acceptance (which needs a surrogate defined everywhere whose
        gradient is the force).
    safety_net : float, optional
        As for :class:`~pymc_rnshmc.RNSHMC`.
    reject_errors : exception type or tuple of them
        As for :class:`~pymc_rnshmc.RNSHMC`.
    time_limit : float, optional
        As for :class:`~pymc_rnshmc.RNSHMC`: seconds after which an exact evaluation of the
        model is abandoned and counted as a rejection (stat ``model_failures``), so that the
        sampler targets the posterior truncated to where the model finishes in time.
    exploration_steps, training_window, path_length, max_steps : optional
        As for :class:`~pymc_rnshmc.RNSHMC`.
    target_accept, surrogate_target_accept : float
        As for :class:`~pymc_rnshmc.RNSHMC`.
    **kwargs
        Passed on to :class:`pymc.NUTS`.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
    """

    default_blocked = True
    stats_dtypes_shapes = SURROGATE_HMC_STATS
    _richer_surrogate = "the network more units (n_hidden)"
    """How to give the surrogate more capacity, for the low-acceptance warning."""
    _state_class = SurrogateHMCState

    def __init__(
        self,
        vars=None,
        *,
        surrogate,
        schedule: ExplorationSchedule = RNSHMC_SCHEDULE,
        exploration_steps: int | None = None,
        training_window: int | None = None,
        path_length: float | None = None,
        max_steps: int = 1024,
        target_accept: float = 0.8,
        surrogate_target_accept: float | None = None,
        start_error: float | None = None,
        refit_during_tuning: bool = True,
        dynamics: str = "hmc",
        safety_net: float | None = None,
        reject_errors: type[Exception] | tuple[type[Exception], ...] = (),
        time_limit: float | None = None,
        model=None,
        **kwargs,
    ) -> None:
        model = modelcontext(model)
        self._take_options(
            surrogate,
            dynamics,
            path_length=path_length,
            target_accept=target_accept,
            surrogate_target_accept=surrogate_target_accept,
            exploration_steps=exploration_steps,
            training_window=training_window,
            max_steps=max_steps,
            start_error=start_error,
            time_limit=time_limit,
        )
        self.refit_during_tuning = bool(refit_during_tuning)
        self.schedule = schedule
        self._surrogate_template = surrogate
        defaults = inspect.signature(BaseHMC.__init__).parameters
        self._dual_averaging = tuple(
            kwargs.get(name, defaults[name].default) for name in _DUAL_AVERAGING
        )
        vars = continuous_value_vars(vars, model, type(self).__name__)
        gradient = has_gradient(model, vars)
        if not gradient:
            self._check_gradient_free(surrogate)
            kwargs["logp_dlogp_func"] = self._logp_only_function(model, vars, kwargs)
        super().__init__(vars, model=model, target_accept=target_accept, **kwargs)
        self._set_up_exact_model(model, kwargs, gradient, check_reject_errors(reject_errors))
        self.safety_net = SafetyNet.default(
            safety_net, gradient_free=not gradient, dim=self.exact_model.size
        )
        if not gradient:
            self._without_gradients()
        self._tune_steps = None
        self._exploration_step_adapt = copy.deepcopy(self.step_adapt)
        self._warmup_settings = self._settings_of_the_warmup()
        self._start_chain()

    def _take_options(
        self,
        surrogate,
        dynamics: str,
        *,
        path_length: float | None,
        target_accept: float,
        surrogate_target_accept: float | None,
        exploration_steps: int | None,
        training_window: int | None,
        max_steps: int,
        start_error: float | None,
        time_limit: float | None,
    ) -> None:
        """Check the options and keep them; an invalid one raises, naming it."""
        self.time_limit = check_positive_number("time_limit", time_limit, allow_none=True)
        self.dynamics = get_dynamics(dynamics)
        self.dynamics.check(surrogate, type(self).__name__)
        if path_length is not None and not self.dynamics.chooses_path_length:
            raise ValueError(
                f"path_length applies to dynamics='hmc' only; dynamics={dynamics!r} chooses each "
                "trajectory's length by its own criterion."
            )
        check_probability("target_accept", target_accept)
        if surrogate_target_accept is None:
            surrogate_target_accept = self.dynamics.target_accept
        self.surrogate_target_accept = check_probability(
            "surrogate_target_accept", surrogate_target_accept
        )
        self.exploration_steps = check_positive_integer(
            "exploration_steps", exploration_steps, allow_none=True
        )
        self.training_window = check_positive_integer(
            "training_window", training_window, allow_none=True
        )
        self.user_path_length = check_positive_number("path_length", path_length, allow_none=True)
        self.max_steps = check_positive_integer("max_steps", max_steps)
        self.start_error = check_positive_number("start_error", start_error, allow_none=True)

    def _set_up_exact_model(self, model, kwargs: dict, gradient: bool, reject_errors) -> None:
        """The one door to the model: logp, gradients, failures and the time limit."""
        self.exact_model = ExactModel(
            model,
            self.vars,
            kwargs.get("initial_point"),
            self.dtype,
            self._logp_dlogp_func if gradient else None,
            gradient=gradient,
            logp_function=None if gradient else self._logp_dlogp_func,
            reject_errors=reject_errors,
            time_limit=self.time_limit,
        )
        if gradient:  # PyMC's leapfrog (the exploration) fails, and is limited, as the model is
            self.integrator._logp_dlogp_func = GuardedLogpGradient(
                self.exact_model.limited(self.integrator._logp_dlogp_func),
                self.exact_model.failures,
            )

    def _without_gradients(self) -> None:
        """A values-only model: the schedule for a random walk, and no postponed start."""
        self.schedule = self.schedule.without_gradients()
        # Postponing a values-only start wasted the tuning that learning from surrogate
        # proposals uses better (pharmacokinetic ODE: starts at draw 675 with 23 % held-out
        # error, no refit left, acceptance 0.3, then a collapse).
        self.start_error = None
        _log.info(
            "%s: the model's logp has no gradient, so it explores with adaptive random-walk "
            "Metropolis and fits its surrogate to log-density values; after tuning a draw "
            "still costs one logp.",
            type(self).__name__,
        )

    def _settings_of_the_warmup(self) -> WarmupSettings:
        return WarmupSettings(
            name=type(self).__name__,
            exact_sampler=self._exact_sampler,
            schedule=self.schedule,
            dynamics=self.dynamics,
            dim=self.exact_model.size,
            values_only=self.gradient_free,
            learns=self.refit_during_tuning and self.schedule.learns_during_tuning,
            exploration_steps=self.exploration_steps,
            training_window=self.training_window,
            path_length=self.user_path_length,
            start_error=self.start_error,
            surrogate_target_accept=self.surrogate_target_accept,
            max_steps=self.max_steps,
            max_depth=self.max_treedepth,
            max_energy_change=self.Emax,
        )

    def _check_gradient_free(self, surrogate) -> None:
        """Raise if this configuration cannot sample a model without gradients."""

    @staticmethod
    def _logp_only_function(model, vars, kwargs: dict):
        """PyMC's logp function without the gradient, for a model that has none.

        The NUTS base class needs a compiled function; a gradient-free chain never asks it for
        a gradient.
        """
        function = model.logp_dlogp_function(
            vars,
            compute_grads=False,
            dtype=kwargs.get("dtype"),
            ravel_inputs=True,
            initial_point=kwargs.get("initial_point"),
            **(kwargs.pop("compile_kwargs", None) or {}),
        )
        function.trust_input = True
        return function

    @property
    def gradient_free(self) -> bool:
        """Whether the model's logp has no gradient (explored by a random walk; values only)."""
        return not self.exact_model.has_gradient

    @property
    def _exact_sampler(self) -> str:
        """What samples when the surrogate does not, for messages."""
        if self.gradient_free:
            return "the exact random-walk Metropolis (its adaptation fixed after tuning)"
        return "exact NUTS"

    @property
    def dtype(self) -> str:
        """Floating-point type of the sampled vector."""
        return self._logp_dlogp_func.dtype

    @property
    def phase(self) -> Phase:
        """What the chain is doing: exploring, sampling with its surrogate, or exact for good."""
        return self._warmup.phase

    @property
    def surrogate(self):
        """The chain's fitted surrogate (``None`` before its first fit)."""
        return self._warmup.surrogate

    @property
    def trajectory_choice(self) -> TrajectoryChoice | None:
        """How the surrogate dynamics' metric, step size and path length were chosen."""
        return self._warmup.choice

    @property
    def setup_seconds(self) -> float:
        """Seconds the chain spent fitting and choosing (and on a gradient-free mode search)."""
        return self._warmup.setup_seconds

    @property
    def kernel(self) -> SurrogateKernel | None:
        """The chain's surrogate kernel (``None`` before its first fit); frozen after tuning.

        A value: :func:`~pymc_rnshmc.hmc.kernel.kernel_step` applies it with the exact model
        (``step.exact_model``) outside ``pm.sample`` too (``docs/architecture.md``). After
        several chains it is the last one's; with ``cores > 1`` the chains run on copies of the
        step in other processes, and it stays ``None`` here.
        """
        return self._warmup.kernel

    @property
    def path_length(self) -> float | None:
        """Integration time of the surrogate trajectories (``None`` until chosen)."""
        kernel = self._warmup.kernel
        return self.user_path_length if kernel is None else kernel.proposal.path_length

    # ----------------------------------------------------------------- chain lifecycle
    def _start_chain(self) -> None:
        """Forget everything a previous chain learned or adapted: a step object is reusable."""
        self.reset()  # PyMC's: iteration and divergence counts, mass-matrix adaptation
        self._num_divs_sample = 0
        self.step_adapt = copy.deepcopy(self._exploration_step_adapt)
        self._warmup = SurrogateWarmup(self._warmup_settings, self._tune_steps)
        self._cache = None
        self._warned_exact_forces = False
        self._explorer = AdaptiveMetropolis(self.exact_model.size) if self.gradient_free else None
        self._acceptance_monitor = AcceptanceMonitor(
            type(self).__name__, richer_surrogate=self._richer_surrogate
        )
        self._wall_watch = WallWatch(type(self).__name__)
        self._chain_draws = []  # kept for a ModelEvaluationError: PyMC drops them on an error
        self._tuning_draws = 0
        self._told_failures = False
        self.exact_model.failures.take()

    def _surrogate_installed(self) -> None:
        """Forget the old surrogate's cached values, then the ``_after_fit`` hook."""
        if self._cache is not None:  # keep the exact logp, drop the old surrogate's values
            self._cache = self._cache.without_surrogate_values()
        self._after_fit()

    def _explorer_metric(self) -> tuple[np.ndarray | None, np.ndarray | None, float]:
        """The exact explorer's diagonal metric, chain covariance and averaged step size.

        The random walk's covariance stands in for NUTS's metric without gradients.
        """
        variances = covariance = None
        if self.gradient_free:
            covariance = self._explorer.chain_covariance()
        elif isinstance(self.potential, QuadPotentialDiag | QuadPotentialDiagAdapt):
            variances = self.potential.velocity(np.ones(self.exact_model.size))
        return variances, covariance, float(self.step_adapt.current(False))

    def setup_chain(self, rng, tune: int, draws: int) -> None:  # PyMC >= 6
        self._tune_steps = int(tune)
        super().setup_chain(rng, tune, draws)
        self._start_chain()

    def set_rng(self, rng) -> None:
        """Give the step a random generator and start a chain (PyMC 5's per-chain call)."""
        if hasattr(super(), "set_rng"):
            super().set_rng(rng)
        else:  # PyMC 6 replaced it by setup_chain
            self.rng = get_random_generator(rng, copy=False)
            self.potential.set_rng(self.rng.spawn(1)[0])
        self._start_chain()

    def reset_tuning(self, start=None) -> None:
        super().reset_tuning(start)
        self._start_chain()

    def stop_tuning(self) -> None:
        warmup = self._warmup
        if warmup.phase == Phase.EXPLORATION:
            try:
                warmup.fit(self.iter_count, self.rng, _Host(self), end_of_tuning=True)
            except ModelEvaluationError as error:
                self._locate(error, "while fitting the surrogate at the end of tuning")
                raise
        elif warmup.phase == Phase.SURROGATE:
            warmup.stop_learning()
            self._warn_if_capped()
        if self._explorer is not None:
            self._explorer.adapting = False  # a fixed random walk: an invariant kernel
        super().stop_tuning()
        warmup.freeze()  # the kept draws share one kernel

    def _warn_if_capped(self) -> None:
        """Say so if the tuned step size makes every trajectory stop at ``max_steps``."""
        if not self.dynamics.chooses_path_length:
            return
        path_length = self.path_length
        step_size = self._warmup.bounded_step_size(self.tune)
        if path_length / step_size <= self.max_steps:
            return
        warnings.warn(
            f"{type(self).__name__}'s step size tuned to {step_size:.3g}, so its trajectories "
            f"stop at max_steps={self.max_steps} after {self.max_steps * step_size:.3g} of the "
            f"chosen path length {path_length:.3g}, and each costs {self.max_steps} surrogate "
            "steps. The surrogate's dynamics need steps this small somewhere (often where it is "
            "wrong or very curved): the draws stay exact but mix slowly. Check it with "
            f"plot_surrogate(step, idata); a longer tuning, or {self._richer_surrogate}, may "
            "help (a grid in more than a few dimensions seldom does: use RNSHMC there).",
            SurrogateWarning,
            stacklevel=2,
        )

    # ----------------------------------------------------------------- stepping
    def step(self, point):
        self.exact_model.set_extra_values(point)
        return super().step(point)

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        perf_start, process_start = time.perf_counter(), time.process_time()
        self._before_draw()
        if self.tune:
            try:
                self._warmup.fit_if_due(self.iter_count, self.rng, _Host(self))
            except ModelEvaluationError as error:
                self._locate(error, "while fitting the surrogate")
                raise
        try:
            q_new, stats = self._draw(q0)
        except ModelEvaluationError as error:
            self._locate(error, f"in a draw of the {self.phase} phase")
            raise
        self._report_failures(stats)
        self._chain_draws.append(q_new.data.copy())
        self._tuning_draws += bool(self.tune)
        stats["perf_counter_start"] = perf_start
        stats["perf_counter_diff"] = time.perf_counter() - perf_start
        stats["process_time_diff"] = time.process_time() - process_start
        return q_new, [stats]

    def _draw(self, q0: RaveledVars) -> tuple[RaveledVars, dict[str, Any]]:
        """One draw of the chain's current phase, with its stats."""
        result = None
        if self.phase != Phase.SURROGATE:
            q_new, (stats,) = self._exact_draw(q0)
        elif self._net_applies() and self.safety_net.catches(self.rng):
            q_new, (stats,) = self._safety_net_draw(q0)
        else:
            result = self._surrogate_draw(q0.data)
            self._warmup.learn_from(result)
            q_new, stats = RaveledVars(result.end.position, q0.point_map_info), self._stats(result)
            self.iter_count += 1
            if not self.tune:
                self._judge_acceptance(result)
        stats["phase"] = self._phase_code(result, stats)
        stats.update(self._after_draw(result))
        return q_new, stats

    def _phase_code(self, result: DrawResult | None, stats: dict) -> int:
        """The ``phase`` stat: an index of ``PHASES``."""
        if result is not None:
            return 1
        if stats["safety_net"]:
            return 2
        return 3 if self.phase == Phase.EXACT else 0

    def _locate(self, error: ModelEvaluationError, activity: str) -> None:
        """Tell ``error`` what the chain was doing, and give it the chain's draws so far."""
        error.where = f"{activity}, draw {len(self._chain_draws)} of the chain"
        if self._chain_draws:
            error.draws = self.exact_model.failures.layout.unravel_rows(self._chain_draws)
        error.tuning_draws = self._tuning_draws

    def _report_failures(self, stats: dict[str, Any]) -> None:
        """Set the ``model_failures`` stat; the first time in a chain, a warning saying where."""
        count, first = self.exact_model.failures.take()
        stats["model_failures"] = count
        if first is None or self._told_failures:
            return
        self._told_failures = True
        stats["warning"] = SamplerWarning(
            WarningType.BAD_PARAMS,
            f"{type(self).__name__}: the model's logp failed ({first}, draw "
            f"{len(self._chain_draws)} of the chain). Such points are rejected, as PyMC's NUTS "
            "rejects a divergent trajectory, and counted in the sample stat model_failures. If "
            "the model should be defined there, check it with model.point_logps().",
            "warn",
            self.iter_count,
        )

    def _exact_draw(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        """An exact NUTS draw (exploration, or no usable surrogate)."""
        if self.gradient_free:
            return self._random_walk_draw(q0)
        try:
            q_new, (stats,) = super().astep(q0)
        except IntegrationError:  # raised only where NUTS starts: its trajectories catch it
            return q0, [self._unstarted_exact_stats(q0)]
        stats = nuts_stats_to_surrogate_stats(stats)
        extras = self.exact_model.extra_values()
        self._cache = CachedPoint(q_new.data.copy(), stats["model_logp"], extras)
        return q_new, [stats]

    def _unstarted_exact_stats(self, q0: RaveledVars) -> dict[str, Any]:
        """The stats of an exact NUTS draw that could not start: a counted rejection.

        The model's gradient raised a rejected error at the chain's point (the guard counted
        it), which a logp-only evaluation had accepted (a surrogate or safety-net draw's end, a
        resumed exploration). The chain stays, as at a divergence of the first step.
        """
        self.iter_count += 1
        step_size = float(self.step_adapt.current(self.tune))
        cache = self._cache
        known = cache is not None and np.array_equal(cache.position, q0.data)
        return exact_draw_stats(
            accept=0.0,
            accepted=False,
            logp=cache.logp if known else np.nan,
            energy_error=np.nan,
            n_steps=0,
            step_size=step_size,
            step_size_bar=float(self.step_adapt.current(False)),
            n_logp_evals=1,
            n_gradient_evals=1,
            divergences=self.divergences,
        )

    def _net_applies(self) -> bool:
        """Whether this surrogate-phase draw may be a safety-net draw.

        After tuning, always. While tuning, only with gradients: the net's exact NUTS draws
        then also teach the surrogate where its own trajectories do not go (they are recorded
        with their gradients, and one that crossed a wall brings a refit: :meth:`_watch_wall`).
        Without gradients the random walk's steps are not taken while tuning: taking them, and
        learning from its proposals, left ``log V_m`` of the pharmacokinetic ODE 3.2-4.1 MCSE
        low in four of six seeds of 2 x (1000 + 1000) draws; after tuning only, at most 1.6
        MCSE off.
        """
        return not (self.tune and self.gradient_free)

    def _safety_net_draw(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        """An exact draw in the surrogate phase (:mod:`~pymc_rnshmc.step_methods.safety_net`).

        The fixed random walk without gradients; with them, NUTS with the step size it adapted
        while exploring (the surrogate dynamics have their own). After tuning, a draw that
        moves is looked at for the wall it crossed
        (:mod:`~pymc_rnshmc.step_methods.wall_watch`), and while tuning so is every one.
        """
        start = self._cache
        q_new, (stats,) = self._exact_draw(q0)  # NUTS with the step size it adapted exploring
        stats["safety_net"] = True
        if start is not None and np.array_equal(start.position, q0.data):
            self._watch_wall(start, q_new.data, stats)
        return q_new, [stats]

    def _watch_wall(self, start: CachedPoint, end: np.ndarray, stats: dict[str, Any]) -> None:
        """Set a net draw's ``surrogate_error`` from the wall it crossed, and act on a high one.

        While tuning, a wall of ``WALL_NATS`` or more brings a refit that includes the draw's
        point, if the schedule learns and tuning has room for one; after tuning, the first such
        wall of the chain is told.
        """
        if np.array_equal(start.position, end):
            return
        with np.errstate(all="ignore"):
            wall = float(self.surrogate.potential(end)) - float(
                self.surrogate.potential(start.position)
            )
            wall += float(stats["model_logp"]) - start.logp
        if not np.isfinite(wall):
            return
        stats["surrogate_error"] = -wall
        if self.tune:
            if wall >= WALL_NATS:
                self._warmup.refit_behind_wall()
            return
        where = self.exact_model.failures.layout.describe(end)
        message = self._wall_watch.record(wall, where)
        if message is not None:
            warnings.warn(message, SurrogateWarning, stacklevel=4)

    def _random_walk_draw(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        """An exact random-walk Metropolis draw, for a model without gradients.

        While exploring during tuning, the evaluated proposal is recorded, accepted or not.
        """
        start, n_evals, _ = self._current_logp(q0.data)
        explorer = self._explorer
        if self.tune and self.iter_count == 0:
            start, n_start = self._laplace_start(start)
            n_evals += n_start
        step = explorer.step(start.position, start.logp, self.exact_model.logp, self.rng)
        if self.tune and self.phase == Phase.EXPLORATION and np.isfinite(step.proposal_logp):
            self._warmup.record.append(step.proposal, -step.proposal_logp)
        position = self.exact_model.cast(step.position)
        extras = self.exact_model.extra_values()
        self._cache = CachedPoint(position.copy(), step.logp, extras)
        self.iter_count += 1
        stats = self._random_walk_stats(step, start.logp, n_evals)
        return RaveledVars(position, q0.point_map_info), [stats]

    def _laplace_start(self, start: CachedPoint) -> tuple[CachedPoint, int]:
        """Move a gradient-free chain's first draw to the mode, with the curvature's covariance.

        The search's evaluations are not training points: its line searches reach far into the
        tails, where the values are huge and the chain never goes, and they pulled the
        surrogate's fit and the trajectories' covariance estimate there (pharmacokinetic ODE:
        path length 10 where the posterior needs about 2). The time counts as setup.
        """
        clock = time.perf_counter()
        laplace = laplace_start(self.exact_model.logp, start.position, start.logp)
        self._warmup.laplace = laplace
        if laplace.covariance is not None:
            try:
                self._explorer.use_covariance(laplace.covariance)
            except np.linalg.LinAlgError:
                pass
        position = self.exact_model.cast(laplace.position)
        point = CachedPoint(position, laplace.logp, self.exact_model.extra_values())
        self._warmup.setup_seconds += time.perf_counter() - clock
        return point, laplace.n_evaluations

    def _random_walk_stats(
        self, step: RandomWalkStep, start_logp: float, n_start_evals: int
    ) -> dict[str, Any]:
        return exact_draw_stats(
            accept=step.accept,
            accepted=step.accepted,
            logp=step.logp,
            energy_error=start_logp - step.proposal_logp,
            n_steps=1,
            step_size=self._explorer.scale,
            step_size_bar=self._explorer.scale,
            n_logp_evals=1 + n_start_evals,
            n_gradient_evals=0,
            divergences=self.divergences,
            eigenvalue_range=self._explorer.eigenvalue_range(),
        )

    def _hamiltonian_step(self, start, p0, step_size):
        result = super()._hamiltonian_step(start, p0, step_size)
        if self.tune and self.phase != Phase.EXACT:  # exploring, or the net while tuning
            end = result.end
            self._warmup.record.append(end.q.data, -float(end.logp), -np.asarray(end.q_grad))
        return result

    # ----------------------------------------------------------------- one surrogate draw
    def _surrogate_draw(self, position: np.ndarray) -> DrawResult:
        """One transition of the chain's surrogate kernel from ``position``.

        While tuning, the kernel takes the adapting step size, the exact model is also asked
        for its gradient where the surrogate learns, and proposals far outside the explored
        region are rejected unevaluated; after tuning the kernel is the frozen value.
        """
        warmup = self._warmup
        start, n_logp_evals, approximate = self._current_logp(position)
        kernel = warmup.tuning_kernel() if self.tune else warmup.kernel
        result = kernel_step(
            kernel,
            start,
            self.rng,
            self.exact_model,
            extras=self.exact_model.extra_values(),
            diagnose=self.tune or self.iter_count % SURROGATE_ERROR_EVERY == 0,
            evaluate=self._evaluate_end if self.tune else None,
            evaluable=warmup.explored_region.contains if self.tune else None,
        )
        result = result._replace(
            n_logp_evals=n_logp_evals + result.n_logp_evals,
            approximate_test=approximate or result.approximate_test,
        )
        if self.tune:
            warmup.adapt(self._adaptation_accept(result.accept, result.integrator_accept))
            self._watch_for_collapse(result.accept)
        self._cache = result.end
        self._note_exact_forces(result)
        return result

    def _judge_acceptance(self, result: DrawResult) -> None:
        """Warn once per chain if the exact acceptance after tuning is poor, and why."""
        message = self._acceptance_monitor.record(
            result.accept, result.integrator_accept, result.surrogate_error
        )
        if message is not None:
            warnings.warn(message, SurrogateWarning, stacklevel=3)

    def _watch_for_collapse(self, accept: float) -> None:
        """Resume exact NUTS while tuning if the warm-up says the surrogate has collapsed.

        Its step size adapted afresh (:meth:`_resumed_adaptation`), until the warm-up's next
        start, or to the end of tuning and beyond (``Phase.EXACT``).
        """
        if self._warmup.watch_for_collapse(accept, self.iter_count) is not None:
            self.step_adapt = self._resumed_adaptation()

    def _current_logp(self, position: np.ndarray) -> tuple[CachedPoint, int, bool]:
        """The chain's point with its target ``logp``: cached if still valid, else evaluated.

        Also returns the exact evaluations spent and whether the ``logp`` came from an
        approximate test.
        """
        cache = self._cache
        if (
            cache is not None
            and np.array_equal(cache.position, position)
            and self.exact_model.extras_unchanged(cache.extras)
        ):
            return cache, 0, False
        if self.phase == Phase.SURROGATE:
            evaluation = self._warmup.kernel.correction.target(position, self._evaluate_logp)
        else:
            evaluation = self._evaluate_logp(position)
        logp = evaluation.logp
        if not np.isfinite(logp):
            raise SamplingError(
                f"Bad initial energy: the model's logp is {logp} at the current point. "
                "Check the initial values with model.debug() or model.point_logps()."
            )
        extras = self.exact_model.extra_values()
        point = CachedPoint(position.copy(), logp, extras)
        return point, int(evaluation.exact), not evaluation.exact

    def _evaluate_logp(self, position: np.ndarray) -> Evaluation:
        return Evaluation(position, self.exact_model.logp(position))

    def _evaluate_with_gradient(self, position: np.ndarray) -> Evaluation:
        potential, gradient = self.exact_model.potential_and_gradient(position)
        return Evaluation(position, -potential, gradient)

    def _resumed_adaptation(self) -> DualAverageAdaptation:
        """NUTS's step-size adaptation for exact draws resuming during tuning.

        A fresh dual averaging from the step size exploration ended with, as Stan restarts it
        after each metric window, unless fewer than ``FRESH_ADAPTATION_DRAWS`` tuning draws
        remain. Exploration's own adaptation carries hundreds of draws of history from another
        phase of the chain. On Neal's funnel (d = 10, 2 x (1000 + 1000) draws, seeds 1 and 2),
        chains that resumed with it at draw 625 ended tuning at step sizes of 0.02-0.07, stuck
        in the neck, and diverged in 202 and 970 of 1000 draws; adapted afresh, they diverged
        in 3 and 4, and their 90 % intervals of ``v`` were about (-3.5, 3.5) (exact: +-4.93).
        """
        explored = self.step_adapt  # exploration's: surrogate draws adapt the warm-up's own
        left = self._warmup.tuning_draws_left(self.iter_count)
        if left is not None and left < FRESH_ADAPTATION_DRAWS:
            return copy.deepcopy(explored)
        return DualAverageAdaptation(
            float(explored.current(False)), self.target_accept, *self._dual_averaging
        )

    def _adaptation_accept(self, accept: float, integrator_accept: float) -> float:
        """The acceptance the step size adapts on.

        The integrator's share of rejections, on the surrogate's own Hamiltonian (a smaller step
        cannot fix the surrogate's own error), unless the force is the gradient of no potential:
        then the exact acceptance.
        """
        if Capabilities.of(self.surrogate).gradient_field:
            return integrator_accept
        return accept

    def _note_exact_forces(self, result: DrawResult) -> None:
        if not result.exact_forces or self.tune or self._warned_exact_forces:
            return
        if not Capabilities.of(self.surrogate).defined_everywhere:
            return  # leaving a grid's box is how such a surrogate works
        self._warned_exact_forces = True
        warnings.warn(
            "The surrogate's gradient was not finite, or implausibly large, at some points "
            f"of a trajectory; {type(self).__name__} used the exact gradient there (counted in "
            "n_gradient_evals), and rejected trajectories that needed it at more than "
            f"{EXACT_FORCE_FLOOR} points and {EXACT_FORCE_SHARE:.0%} of their points (stat "
            "left_trust_region). The posterior stays exact, but a surrogate trained on more of "
            "the region would mix better.",
            SurrogateWarning,
            stacklevel=2,
        )

    def _stats(self, result: DrawResult) -> dict[str, Any]:
        """The sampler statistics of a surrogate draw (see ``SURROGATE_HMC_STATS``)."""
        warning = self._divergence_warning(result.divergence) if result.divergence else None
        return surrogate_draw_stats(
            result,
            divergences=self.divergences,
            step_size_bar=float(self._warmup.adaptation.current(False)),
            tuning=self.tune,
            # the metric the draw used, not PyMC's mass matrix (which only the exploration uses)
            metric_range=result.metric_range or self.kernel.proposal.metric.eigenvalue_range(),
            warning=warning,
        )

    def _divergence_warning(self, message: str) -> SamplerWarning:
        if self.tune:
            kind = WarningType.TUNING_DIVERGENCE
        else:
            kind = WarningType.DIVERGENCE
            self.divergences += 1
            self._num_divs_sample += 1
        return SamplerWarning(kind, message, "debug", self.iter_count)

    # ----------------------------------------------------------------- the warm-up's record
    def _training_window(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Positions, potentials and gradients (``None`` without) of the draws to train on."""
        return self._warmup.training_window()

    def held_out_points(self) -> tuple[np.ndarray, np.ndarray]:
        """Recorded tuning points the current surrogate was not fitted to, with their exact ``U``.

        The exploration draws before its training window and the proposals learned after its
        fit; kept when tuning ends (:func:`~pymc_rnshmc.plot_surrogate` shows the surrogate
        against them). Empty before the first fit.
        """
        return self._warmup.held_out_points()

    # ----------------------------------------------------------------- hooks
    def _new_surrogate(self):
        """An unfitted surrogate for this chain."""
        return copy.deepcopy(self._surrogate_template)

    def _correction(self) -> Correction:
        """The correction of the surrogate proposals: Metropolis on the exact Hamiltonian."""
        return self.dynamics.correction(self.Emax)

    def _after_fit(self) -> None:
        """Called once the surrogate phase has started."""

    def _before_draw(self) -> None:
        """Called at the start of every draw, before anything else."""

    def _evaluate_end(self, position: np.ndarray) -> Evaluation:
        """The exact model at a proposal: ``logp``, and its gradient while learning."""
        if self.tune and self._warmup.wants_gradients:
            return self._evaluate_with_gradient(position)
        return self._evaluate_logp(position)

    def _after_draw(self, result: DrawResult | None) -> dict[str, Any]:
        """Extra statistics of a draw (``result`` is ``None`` for an exact NUTS draw)."""
        return {}

    # ----------------------------------------------------------------- PyMC protocol
    @staticmethod
    def competence(var, has_grad):
        """Compatible with continuous variables, with or without gradients (never preferred)."""
        if var.dtype in continuous_types:
            return Competence.COMPATIBLE
        return Competence.INCOMPATIBLE

    @staticmethod
    def _progressbar_config(n_chains=1):
        return progressbar_config(n_chains)

    @staticmethod
    def _make_progressbar_update_functions():
        return (progressbar_update,)


class _Host:
    """A step as its warm-up's host (:class:`~pymc_rnshmc.step_methods.warmup.WarmupHost`).

    Made for each call that may fit and never kept, so the warm-up holds no reference to the
    step (PyMC deep-copies it in ``sampling_state``).
    """

    def __init__(self, step: SurrogateHMC) -> None:
        self.step = step

    def new_surrogate(self):
        return self.step._new_surrogate()

    def correction(self) -> Correction:
        return self.step._correction()

    def new_adaptation(self, initial_step: float, target: float) -> DualAverageAdaptation:
        return DualAverageAdaptation(initial_step, target, *self.step._dual_averaging)

    def explorer_metric(self) -> tuple[np.ndarray | None, np.ndarray | None, float]:
        return self.step._explorer_metric()

    def surrogate_installed(self) -> None:
        self.step._surrogate_installed()

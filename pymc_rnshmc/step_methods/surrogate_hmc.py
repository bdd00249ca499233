"""SurrogateHMC: the PyMC step that every surrogate sampler of this package configures.

A chain's lifecycle, one short method each:

1. explore exactly: PyMC's NUTS, with its adaptation, recording every draw
   (:meth:`SurrogateHMC._hamiltonian_step`) until the schedule's exploration length;
2. fit a surrogate to the record (:meth:`SurrogateHMC._fit_candidate`);
3. choose the dynamics, metric, step size and path length, by simulating on the surrogate
   (:meth:`SurrogateHMC._choose_dynamics`);
4. sample: a surrogate proposal corrected by the exact model (:meth:`SurrogateHMC._surrogate_draw`);
5. while tuning, if the schedule learns: record the plausible proposals with their exact gradients
   and refit, re-choosing the dynamics (fewer path lengths), each time the record has grown
   enough (:meth:`SurrogateHMC._refit`), while that still improves the fit; the surrogate is
   frozen when tuning ends, so the kept draws are an ordinary Markov chain.

A model whose logp has no gradient is explored by an adaptive random-walk Metropolis instead of
NUTS (:meth:`SurrogateHMC._random_walk_draw`), every evaluated point is recorded with its value
alone, the surrogate is fitted to values, and the surrogate's own gradients stand in for the exact
ones where the dynamics are chosen; a trajectory that meets a point where the surrogate's force is
unusable is rejected, as there is no exact force to use there.

The hot path of a draw after tuning: ``step`` -> ``astep`` -> ``_surrogate_draw`` ->
:func:`~pymc_rnshmc.hmc.transition.surrogate_transition`: the cached
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
    FIT_ERRORS,
    ModelEvaluationError,
    SurrogateWarning,
)
from pymc_rnshmc.exploration.adaptive_metropolis import AdaptiveMetropolis, RandomWalkStep
from pymc_rnshmc.hmc.corrections import Correction, Evaluation
from pymc_rnshmc.hmc.explored_region import ExploredRegion
from pymc_rnshmc.hmc.force_field import EXACT_FORCE_FLOOR, EXACT_FORCE_SHARE
from pymc_rnshmc.hmc.kernel import SurrogateKernel, kernel_step
from pymc_rnshmc.hmc.trajectory_tuning import TrajectoryChoice
from pymc_rnshmc.hmc.transition import CachedPoint, DrawResult
from pymc_rnshmc.step_methods.acceptance_monitor import AcceptanceMonitor
from pymc_rnshmc.step_methods.blas import single_blas_thread
from pymc_rnshmc.step_methods.dynamics import DynamicsSetting, get_dynamics
from pymc_rnshmc.step_methods.exact_model import ExactModel, has_gradient
from pymc_rnshmc.step_methods.kernel_fit import candidate_metrics, fit_surrogate, new_kernel
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
from pymc_rnshmc.surrogates.base import (
    Capabilities,
    fit_summary,
    held_out_error,
)
from pymc_rnshmc.surrogates.laplace import laplace_start
from pymc_rnshmc.surrogates.training import TrainingBuffer

__all__ = ["SurrogateHMC", "SurrogateHMCState"]

_log = logging.getLogger("pymc.rnshmc")
_DUAL_AVERAGING = ("gamma", "k", "t0")
"""PyMC's dual-averaging hyperparameters, as ``BaseHMC`` takes them."""
LEARNING_ENERGY_LIMIT = 20.0
"""Proposals whose exact energy error exceeds this (acceptance below 2e-9) are not learned."""
COLLAPSE_WINDOW = 50
"""Surrogate draws of tuning over which the exact acceptance is watched for a collapse."""
COLLAPSE_ACCEPT = 0.05
"""Below this mean exact acceptance over ``COLLAPSE_WINDOW`` tuning draws, exact NUTS resumes."""
FRESH_ADAPTATION_DRAWS = 100
"""Exact NUTS resuming while tuning adapts its step size afresh if at least this many tuning
draws remain (or PyMC 5 does not say how many), and otherwise keeps exploration's."""
WALL_REFIT_GROWTH = 1.1
"""A net draw behind a wall brings a refit once the record has grown by this factor since the
last fit ..."""
WALL_REFITS = 2
"""... at most this many times in a chain. A surrogate that cannot represent the region keeps
its wall: a test surrogate with a wall built in (``tests/step_methods/helpers.py``) brought 30
refits of 13 s each in two chains of 800 tuning draws without this limit."""
SURROGATE_ERROR_EVERY = 10
"""After tuning, the ``surrogate_error`` statistic is computed on every this-many-th draw."""


@dataclass_state
class SurrogateHMCState(NUTSState):
    """A chain's state: NUTS's plus the surrogate, the dynamics and the record (PyMC copies it)."""

    phase: Phase
    surrogate: Any
    trajectory_choice: Any
    setup_seconds: float
    _kernel: SurrogateKernel | None
    _record: TrainingBuffer
    _tune_steps: int | None
    _cache: CachedPoint | None
    _step_size_bounds: tuple
    _postponed_until: int | None
    _warned_exact_forces: bool
    _exploration_adapt: tuple
    _recent_accept: list
    _next_refit: int | None
    _fit_error: float
    _explorer: Any
    _laplace: Any
    _explored_region: Any
    _wall_refits: int


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
        reject_errors = check_reject_errors(reject_errors)
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
        self.safety_net = SafetyNet.default(
            safety_net, gradient_free=not gradient, dim=self.exact_model.size
        )
        if not gradient:
            self.schedule = schedule.without_gradients()
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
        self._tune_steps = None
        self._exploration_step_adapt = copy.deepcopy(self.step_adapt)
        self._start_chain()

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
    def kernel(self) -> SurrogateKernel | None:
        """The chain's surrogate kernel (``None`` before its first fit); frozen after tuning.

        A value: :func:`~pymc_rnshmc.hmc.kernel.kernel_step` applies it with the exact model
        (``step.exact_model``) outside ``pm.sample`` too (``docs/architecture.md``). After
        several chains it is the last one's; with ``cores > 1`` the chains run on copies of the
        step in other processes, and it stays ``None`` here.
        """
        return self._kernel

    @property
    def path_length(self) -> float | None:
        """Integration time of the surrogate trajectories (``None`` until chosen)."""
        return self.user_path_length if self._kernel is None else self._kernel.proposal.path_length

    # ----------------------------------------------------------------- chain lifecycle
    def _start_chain(self) -> None:
        """Forget everything a previous chain learned or adapted: a step object is reusable."""
        self.reset()  # PyMC's: iteration and divergence counts, mass-matrix adaptation
        self._num_divs_sample = 0
        self.step_adapt = copy.deepcopy(self._exploration_step_adapt)
        self.phase = Phase.EXPLORATION
        self.surrogate = None
        self.trajectory_choice = None
        self.setup_seconds = 0.0
        self._kernel = None
        self._record = self._new_record()
        self._cache = None
        self._step_size_bounds = (0.0, np.inf)
        self._postponed_until = None
        self._warned_exact_forces = False
        self._exploration_adapt = ()
        self._recent_accept = []
        self._next_refit = None
        self._fit_error = np.nan
        self._explorer = AdaptiveMetropolis(self.exact_model.size) if self.gradient_free else None
        self._laplace = None
        self._explored_region = None
        self._wall_refits = 0
        self._fitted_rows = (0, 0)
        self._held_out = None
        self._acceptance_monitor = AcceptanceMonitor(
            type(self).__name__, richer_surrogate=self._richer_surrogate
        )
        self._wall_watch = WallWatch(type(self).__name__)
        self._chain_draws = []  # kept for a ModelEvaluationError: PyMC drops them on an error
        self._tuning_draws = 0
        self._told_failures = False
        self.exact_model.failures.take()

    def _new_record(self) -> TrainingBuffer:
        return TrainingBuffer(self.exact_model.size, with_gradients=not self.gradient_free)

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
        if self.phase == Phase.EXPLORATION:
            try:
                self._fit(end_of_tuning=True)
            except ModelEvaluationError as error:
                self._locate(error, "while fitting the surrogate at the end of tuning")
                raise
        elif self.phase == Phase.SURROGATE:
            self._next_refit = None  # frozen: the kept draws share one kernel
            self._held_out = self.held_out_points()  # for plot_surrogate, before it goes
            self._record = self._new_record()  # only refits need it
            self._warn_if_capped()
        if self._explorer is not None:
            self._explorer.adapting = False  # a fixed random walk: an invariant kernel
        super().stop_tuning()
        if self._kernel is not None:  # frozen: the kept draws share one kernel
            self._kernel = self._kernel._replace(step_size=self._bounded_step_size(False))

    def _warn_if_capped(self) -> None:
        """Say so if the tuned step size makes every trajectory stop at ``max_steps``."""
        if not self.dynamics.chooses_path_length:
            return
        path_length = self.path_length
        step_size = self._bounded_step_size(self.tune)
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

    def _exploration_length(self) -> int:
        if self._postponed_until is not None:
            return self._postponed_until
        if self.exploration_steps is not None:
            return self.exploration_steps
        return self.schedule.exploration_length(self._tune_steps, self.exact_model.size)

    # ----------------------------------------------------------------- stepping
    def step(self, point):
        self.exact_model.set_extra_values(point)
        return super().step(point)

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        perf_start, process_start = time.perf_counter(), time.process_time()
        self._before_draw()
        if self.tune:
            try:
                self._fit_if_due()
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
            self._learn_from(result)
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

    def _fit_if_due(self) -> None:
        """The first fit at the end of the exploration, or a refit once the record has grown.

        A refit needs ``refit_adaptation`` tuning draws after it (when PyMC tells the tuning
        length); without them learning stops.
        """
        if self.phase == Phase.EXPLORATION:
            if self.iter_count >= self._exploration_length():
                self._fit(end_of_tuning=False)
        elif self._next_refit is not None and len(self._record) >= self._next_refit:
            draws_left = self._tuning_draws_left()
            if draws_left is not None and draws_left < self.schedule.refit_adaptation:
                self._next_refit = None
            else:
                self._refit()

    def _learns_during_tuning(self) -> bool:
        return self.refit_during_tuning and self.schedule.learns_during_tuning

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
        surrogate_adapt = self.step_adapt
        self.step_adapt = self._exploration_adapt[0]  # set whenever the surrogate phase starts
        try:
            q_new, (stats,) = self._exact_draw(q0)
        finally:
            self.step_adapt = surrogate_adapt
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
                self._refit_behind_wall()
            return
        where = self.exact_model.failures.layout.describe(end)
        message = self._wall_watch.record(wall, where)
        if message is not None:
            warnings.warn(message, SurrogateWarning, stacklevel=4)

    def _refit_behind_wall(self) -> None:
        """Refit at the next draw (the record holds the net draw's point).

        Only if the schedule learns, once the record has grown by ``WALL_REFIT_GROWTH`` since
        the last fit, and at most ``WALL_REFITS`` times a chain: a wall the refits cannot remove
        (a surrogate that cannot represent the region) costs a few refits, not one for every
        net draw behind it. :meth:`_fit_if_due` drops it when too little tuning is left.
        """
        if not self._learns_during_tuning() or self._wall_refits >= WALL_REFITS:
            return
        if len(self._record) < WALL_REFIT_GROWTH * self._fitted_rows[1]:
            return
        self._wall_refits += 1
        if self._next_refit is None or self._next_refit > len(self._record):
            self._next_refit = len(self._record)

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
            self._record.append(step.proposal, -step.proposal_logp)
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
        self._laplace = laplace
        if laplace.covariance is not None:
            try:
                self._explorer.use_covariance(laplace.covariance)
            except np.linalg.LinAlgError:
                pass
        position = self.exact_model.cast(laplace.position)
        point = CachedPoint(position, laplace.logp, self.exact_model.extra_values())
        self.setup_seconds += time.perf_counter() - clock
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
            self._record.append(end.q.data, -float(end.logp), -np.asarray(end.q_grad))
        return result

    # ----------------------------------------------------------------- one surrogate draw
    def _surrogate_draw(self, position: np.ndarray) -> DrawResult:
        """One transition of the chain's surrogate kernel from ``position``.

        While tuning, the kernel takes the adapting step size, the exact model is also asked
        for its gradient where the surrogate learns, and proposals far outside the explored
        region are rejected unevaluated; after tuning the kernel is the frozen value.
        """
        start, n_logp_evals, approximate = self._current_logp(position)
        kernel = self._kernel
        if self.tune:
            kernel = kernel._replace(step_size=self._bounded_step_size(True))
        result = kernel_step(
            kernel,
            start,
            self.rng,
            self.exact_model,
            extras=self.exact_model.extra_values(),
            diagnose=self.tune or self.iter_count % SURROGATE_ERROR_EVERY == 0,
            evaluate=self._evaluate_end if self.tune else None,
            evaluable=self._explored_region.contains if self.tune else None,
        )
        result = result._replace(
            n_logp_evals=n_logp_evals + result.n_logp_evals,
            approximate_test=approximate or result.approximate_test,
        )
        if self.tune:
            accept = self._adaptation_accept(result.accept, result.integrator_accept)
            self.step_adapt.update(accept, True)
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
        """Resume exact NUTS while tuning if the surrogate's exact acceptance has collapsed.

        A poor first fit can make every proposal implausible, so nothing is learned and no refit
        comes (sblrc-blr: a fit with 29 % held-out error, exact acceptance 0 for good). If the
        mean exact acceptance of ``COLLAPSE_WINDOW`` tuning draws is below ``COLLAPSE_ACCEPT``,
        exact NUTS explores again, its step size adapted afresh (:meth:`_resumed_adaptation`),
        until the schedule's next start; too late in tuning for another start, it goes on to
        the end (``Phase.EXACT``). Only schedules that learn during tuning watch: a refit of
        another surrogate (a grid) would not learn anything new.
        """
        if not (self._learns_during_tuning() and self._exploration_adapt):
            return
        self._recent_accept.append(float(accept) if np.isfinite(accept) else 0.0)
        if len(self._recent_accept) < COLLAPSE_WINDOW:
            return
        mean_accept = float(np.mean(self._recent_accept))
        self._recent_accept = []
        if mean_accept >= COLLAPSE_ACCEPT:
            return
        self.step_adapt = self._resumed_adaptation()
        self._next_refit = None
        restart = self.schedule.postponed_start(self.iter_count + 1)
        if restart > self.schedule.latest_start(self._tune_steps, self.exact_model.size):
            self._fall_back_to_exact(
                f"{type(self).__name__}'s surrogate proposals were almost all rejected late in "
                f"tuning (mean exact acceptance {mean_accept:.2f} over {COLLAPSE_WINDOW} draws), "
                f"too late to fit another. Sampling continues with {self._exact_sampler}. "
                "Increase `tune`."
            )
            return
        self.phase = Phase.EXPLORATION
        self._postponed_until = restart
        _log.debug(
            "%s resumes %s until draw %d: its surrogate's exact acceptance was %.2f.",
            type(self).__name__,
            self._exact_sampler,
            self._postponed_until,
            mean_accept,
        )

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
            evaluation = self._kernel.correction.target(position, self._evaluate_logp)
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

    def _learn_from(self, result: DrawResult) -> None:
        """Record a plausible proposal with its exact gradient while learning during tuning.

        Rejected proposals are recorded too, unless the chain could not plausibly have moved
        there (energy error above ``LEARNING_ENERGY_LIMIT``, or divergent): with a poor first
        surrogate few proposals are accepted, and learning only from those would stall exactly
        when it is most needed.

        Without gradients the test is on the point, not the move: its potential within
        ``LEARNING_ENERGY_LIMIT + d`` of the lowest recorded. Where a values-only surrogate is
        wrong, its proposals have large energy errors, and those are the values it must learn
        (pharmacokinetic ODE: a chain in the ``log K_m`` tail met errors of 20 nats there, learned
        nothing, and its acceptance collapsed).
        """
        evaluation = result.proposal
        if self._next_refit is None or evaluation is None:
            return
        if self.gradient_free:
            limit = self._record.lowest_potential + LEARNING_ENERGY_LIMIT + self.exact_model.size
            if -evaluation.logp < limit:
                self._record.append(evaluation.position, -evaluation.logp)
            return
        if result.divergence is not None or not result.energy_change < LEARNING_ENERGY_LIMIT:
            return
        gradient = evaluation.potential_gradient
        if gradient is not None and np.all(np.isfinite(gradient)):
            self._record.append(evaluation.position, -evaluation.logp, gradient)

    def _exact_gradient(self, position: np.ndarray) -> np.ndarray:
        return self.exact_model.potential_and_gradient(position)[1]

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
        explored = self._exploration_adapt[0]
        left = self._tuning_draws_left()
        if left is not None and left < FRESH_ADAPTATION_DRAWS:
            return copy.deepcopy(explored)
        return DualAverageAdaptation(
            float(explored.current(False)), self.target_accept, *self._dual_averaging
        )

    def _tuning_draws_left(self) -> int | None:
        """Tuning draws still to come (``None`` on PyMC 5, which does not tell the step)."""
        return None if self._tune_steps is None else self._tune_steps - self.iter_count

    def _bounded_step_size(self, tune: bool) -> float:
        """The adapted step size (the last iterate while tuning, else the average), bounded.

        Within a decade of the simulated choice while the surrogate runs; the exploration's
        NUTS step size is unbounded. Dual averaging itself is not: where the exact test kept
        rejecting, its average sank to 1e-42 (posteriordb ``kilpisjarvi``), and a refit that
        started its step-size search there chose trajectories that did not move.
        """
        step_size = float(self.step_adapt.current(tune))
        low, high = self._step_size_bounds
        return float(np.clip(step_size, low, high))

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
            step_size_bar=float(self.step_adapt.current(False)),
            tuning=self.tune,
            # the metric the draw used, not PyMC's mass matrix (which only the exploration uses)
            metric_range=result.metric_range or self._kernel.proposal.metric.eigenvalue_range(),
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

    # ----------------------------------------------------------------- fitting
    def _fit(self, end_of_tuning: bool) -> None:
        start = time.perf_counter()
        try:
            with single_blas_thread():
                self._set_up_surrogate(end_of_tuning)
        finally:
            self.setup_seconds += time.perf_counter() - start

    def _refit(self) -> None:
        """Refit on the grown record and re-choose the dynamics (a shorter scan of lengths).

        The refit chooses its width, penalty and weight scale afresh. Reusing the last fit's
        choices is cheaper but worse on the elliptic PDE (d = 20, 30 x 30): capping the width
        near the last fit's left the surrogate at 50 units and 13 % held-out gradient error
        where 1575 units reach 8.7 %, and keeping the first fit's weight scale (1, chosen on 38
        points) gave 11 % at 600 points against 6.7 % with the scale searched (0.1), and a
        min bulk / tail ESS of 698 / 364 against 1147 / 543.
        """
        start = time.perf_counter()
        positions, potentials, gradients = self._training_window()
        try:
            with single_blas_thread():
                surrogate, gradients = self._fit_candidate(positions, potentials, gradients)
                choice = self._choose_dynamics(surrogate, positions, gradients, refit=True)
        except FIT_ERRORS as err:
            self._next_refit = None
            _log.debug("%s keeps its surrogate: the refit failed (%s).", type(self).__name__, err)
            return
        finally:
            self.setup_seconds += time.perf_counter() - start
        self._start_surrogate_phase(surrogate, choice, positions, gradients, end_of_tuning=False)
        self._after_fit()

    def _set_up_surrogate(self, end_of_tuning: bool) -> None:
        """Fit, choose the dynamics and start the surrogate phase; or postpone, or fall back."""
        positions, potentials, gradients = self._training_window()
        needed = self.schedule.minimum_points(positions.shape[1])
        if positions.shape[0] < needed:
            when = "tuning ended" if end_of_tuning else "the end of exploration"
            self._postpone_or_fall_back(
                end_of_tuning,
                f"{type(self).__name__} collected {positions.shape[0]} exact draws for its "
                f"surrogate before {when}, but needs at least {needed} in {positions.shape[1]} "
                f"dimensions. Sampling continues with {self._exact_sampler}. Increase `tune` (or "
                "`exploration_steps`).",
            )
            return
        try:
            surrogate, gradients = self._fit_candidate(positions, potentials, gradients)
        except FIT_ERRORS as err:
            self._postpone_or_fall_back(
                end_of_tuning,
                f"{type(self).__name__} could not fit its surrogate ({err}). Sampling continues "
                f"with {self._exact_sampler}, which is correct but gets no speed-up.",
            )
            return
        if not self._ready_to_start(surrogate, end_of_tuning):
            return
        try:
            choice = self._choose_dynamics(surrogate, positions, gradients)
        except FIT_ERRORS as err:
            self._fall_back_to_exact(
                f"{type(self).__name__} could not set up its surrogate dynamics ({err}). "
                f"Sampling continues with {self._exact_sampler}."
            )
            return
        self._start_surrogate_phase(surrogate, choice, positions, gradients, end_of_tuning)
        self._after_fit()

    def _training_window(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Positions, potentials and gradients (``None`` without) of the draws to train on."""
        n_explored = len(self._record)
        window = self.training_window or self.schedule.training_size(n_explored)
        first = max(0, n_explored - window)
        return self._record.window(first)

    def held_out_points(self) -> tuple[np.ndarray, np.ndarray]:
        """Recorded tuning points the current surrogate was not fitted to, with their exact ``U``.

        The exploration draws before its training window and the proposals learned after its
        fit; kept when tuning ends (:func:`~pymc_rnshmc.plot_surrogate` shows the surrogate
        against them). Empty before the first fit.
        """
        if self._held_out is not None:
            return self._held_out
        positions, potentials, _ = self._record.window(0)
        if self.surrogate is None:
            return positions[:0], potentials[:0]
        first, last = self._fitted_rows
        outside = np.ones(len(positions), dtype=bool)
        outside[first:last] = False
        return positions[outside], potentials[outside]

    def _fit_candidate(self, positions, potentials, gradients):
        """A new surrogate fitted to the window, and the gradients to choose its dynamics with."""
        return fit_surrogate(
            self._new_surrogate(),
            positions,
            potentials,
            gradients,
            self._laplace,
            self.rng.spawn(1)[0],
        )

    def _ready_to_start(self, surrogate, end_of_tuning: bool) -> bool:
        """Whether to start with this fit.

        Not if its held-out error exceeds ``start_error`` and the start can still be postponed
        (early exploration draws may not have reached the bulk yet).
        """
        if end_of_tuning or self.start_error is None:
            return True
        error = held_out_error(surrogate)
        if not error > self.start_error:
            return True
        return not self._postpone_start()

    def _postpone_start(self) -> bool:
        """Keep exploring (``True``) if the schedule allows another try before its latest."""
        if not self.schedule.early:
            return False
        next_try = self.schedule.postponed_start(self.iter_count)
        if next_try > self.schedule.latest_start(self._tune_steps, self.exact_model.size):
            return False
        self._postponed_until = next_try
        _log.debug("%s keeps exploring until draw %d.", type(self).__name__, next_try)
        return True

    def _postpone_or_fall_back(self, end_of_tuning: bool, message: str) -> None:
        if not end_of_tuning and self._postpone_start():
            return
        self._fall_back_to_exact(message)

    def _fall_back_to_exact(self, message: str) -> None:
        self.phase = Phase.EXACT
        warnings.warn(message, SurrogateWarning, stacklevel=3)

    def _choose_dynamics(self, surrogate, positions, gradients, refit=False) -> TrajectoryChoice:
        """Metric, step size and path length, by simulating surrogate chains (no exact calls)."""
        explorer_covariance, explorer_variances = None, None
        if self.gradient_free:  # the random walk's covariance in place of NUTS's metric
            explorer_covariance = self._explorer.chain_covariance()
        elif isinstance(self.potential, QuadPotentialDiag | QuadPotentialDiagAdapt):
            explorer_variances = self.potential.velocity(np.ones(positions.shape[1]))
        previous = self.trajectory_choice if refit else None
        setting = DynamicsSetting(
            positions=positions,
            gradients=gradients,
            explorer_variances=explorer_variances,
            extra_metrics=candidate_metrics(surrogate, explorer_covariance),
            step_size=self._bounded_step_size(tune=False),
            target_accept=self.surrogate_target_accept,
            max_steps=self.max_steps,
            rng=self.rng.spawn(1)[0],
            path_length=self.user_path_length,
            simulated_draws=self.schedule.simulated_draws,
            refit=refit,
            previous=None if previous is None else previous.best,
        )
        return self.dynamics.choose(surrogate, setting)

    def _start_surrogate_phase(
        self,
        surrogate,
        choice: TrajectoryChoice,
        positions: np.ndarray,
        gradients: np.ndarray,
        end_of_tuning: bool,
    ) -> None:
        """Install the surrogate and the chosen dynamics, and restart the step-size adaptation."""
        best = choice.best
        log_level = logging.INFO if self.surrogate is None else logging.DEBUG  # refits: debug
        self.surrogate = surrogate
        # the training window is the record's last rows, and the record has not grown since
        self._fitted_rows = (len(self._record) - positions.shape[0], len(self._record))
        if self._cache is not None:  # keep the exact logp, drop the old surrogate's values
            self._cache = self._cache.without_surrogate_values()
        self.trajectory_choice = choice
        self._explored_region = ExploredRegion.around(positions)
        self._step_size_bounds = (0.1 * best.step_size, 10.0 * best.step_size)
        # Dual averaging explores around ten times its initial step; start it at a tenth so it
        # centres on the simulated step size, unless no tuning is left to adapt.
        initial = best.step_size if end_of_tuning else 0.1 * best.step_size
        if self.phase == Phase.EXPLORATION:
            self._exploration_adapt = (self.step_adapt,)  # NUTS's, should the surrogate collapse
        self._recent_accept = []
        self.step_adapt = DualAverageAdaptation(
            initial, self.surrogate_target_accept, *self._dual_averaging
        )
        self.phase = Phase.SURROGATE
        self._kernel = new_kernel(
            self.dynamics,
            surrogate,
            best,
            positions,
            gradients,
            self._correction(),
            max_steps=self.max_steps,
            max_depth=self.max_treedepth,
            max_energy_change=self.Emax,
            values_only=self.gradient_free,
        )
        self._plan_learning(surrogate, end_of_tuning)
        _log.log(
            log_level,
            "%s fitted its surrogate on %d exact draws%s; trajectories: %s metric, "
            "step size %.3g, %s (simulated ESS %.2f per draw).",
            type(self).__name__,
            gradients.shape[0],
            fit_summary(surrogate),
            best.metric.kind,
            best.step_size,
            f"path length {best.path_length:.3g}"
            if self.dynamics.chooses_path_length
            else "NUTS trees",
            best.ess_mean,
        )
        if end_of_tuning:
            warnings.warn(
                f"Tuning ended before {type(self).__name__} finished exploring "
                f"({len(self._record)} of {self._exploration_length()} draws), so the surrogate "
                "dynamics use the step size chosen by simulation on the surrogate, without "
                "re-adaptation on the exact acceptance. Increase `tune` or lower "
                "`exploration_steps` for better acceptance.",
                SurrogateWarning,
                stacklevel=3,
            )

    def _plan_learning(self, surrogate, end_of_tuning: bool) -> None:
        """After a fit: when to refit next, or ``None`` once refits stop paying."""
        error = held_out_error(surrogate)
        draws_left = self._tuning_draws_left()
        learning = (
            self._learns_during_tuning()
            and not end_of_tuning
            and self.schedule.keeps_learning(len(self._record), error, self._fit_error, draws_left)
        )
        self._next_refit = self.schedule.next_refit(len(self._record)) if learning else None
        self._fit_error = error

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
        if self.tune and self._next_refit is not None and not self.gradient_free:
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

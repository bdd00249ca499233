"""SurrogateHMC: the PyMC step that every surrogate sampler of this package configures.

The step is PyMC's side of a chain: the step protocol, the statistics, the progress bar. Its
parts do the sampling:

- the **explorer** (:mod:`~pymc_rnshmc.step_methods.explorers`): PyMC's NUTS, held as a part, or
  a random walk for a model without gradients; it explores, makes the safety net's draws, and
  takes over if no surrogate can be used;
- the **warm-up** (:class:`~pymc_rnshmc.step_methods.warmup.SurrogateWarmup`): records the exact
  evaluations, fits, chooses the dynamics, learns and refits, and freezes the kernel when
  tuning ends; it decides every phase change;
- the **kernel** (:class:`~pymc_rnshmc.hmc.kernel.SurrogateKernel`, numpy): one surrogate draw,
  corrected by one exact ``logp`` (:meth:`SurrogateHMC._surrogate_draw`);
- the **exact model** (:class:`~pymc_rnshmc.step_methods.exact_model.ExactModel`): the only
  door to PyMC's compiled functions, with the failing-model policy.

The hot path of a draw after tuning: ``step`` -> ``astep`` -> ``_draw`` -> ``_surrogate_draw`` ->
:func:`~pymc_rnshmc.hmc.kernel.kernel_step` on the frozen kernel (leapfrog or NUTS on the
surrogate, one exact ``logp`` for the correction) -> ``surrogate_draw_stats``.

Configurations change behaviour through the constructor's parts (the surrogate, the schedule,
``start_error``) and six hooks: ``_new_surrogate``, ``_correction``, ``_after_fit``,
``_before_draw``, ``_evaluate_end`` and ``_after_draw``.
"""

from __future__ import annotations

import copy
import logging
import time
import warnings
from typing import Any

import numpy as np
from pymc.blocking import RaveledVars
from pymc.model import modelcontext
from pymc.stats.convergence import SamplerWarning, WarningType
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.state import WithSamplingState, dataclass_state
from pymc.step_methods.step_sizes import DualAverageAdaptation
from pymc.util import get_random_generator
from pymc.vartypes import continuous_types

from pymc_rnshmc.exceptions import ModelEvaluationError, SurrogateWarning
from pymc_rnshmc.hmc.corrections import Correction, Evaluation
from pymc_rnshmc.hmc.kernel import SurrogateKernel, kernel_step
from pymc_rnshmc.hmc.trajectory_tuning import TrajectoryChoice
from pymc_rnshmc.hmc.transition import CachedPoint, DrawResult
from pymc_rnshmc.step_methods.acceptance_monitor import AcceptanceMonitor
from pymc_rnshmc.step_methods.chain_log import ChainLog
from pymc_rnshmc.step_methods.exact_model import ExactModel, has_gradient
from pymc_rnshmc.step_methods.explorers import ExactDraw, NUTSExplorer, RandomWalkExplorer
from pymc_rnshmc.step_methods.model_failures import GuardedLogpGradient, check_reject_errors
from pymc_rnshmc.step_methods.options import (
    check_nuts_options,
    check_options,
    compile_options,
    nuts_option,
)
from pymc_rnshmc.step_methods.reporting import (
    SURROGATE_HMC_STATS,
    progressbar_config,
    progressbar_update,
    surrogate_draw_stats,
)
from pymc_rnshmc.step_methods.safety_net import SafetyNet
from pymc_rnshmc.step_methods.schedule import RNSHMC_SCHEDULE, ExplorationSchedule, Phase
from pymc_rnshmc.step_methods.surrogate_draws import (
    adaptation_accept,
    current_point,
    exact_forces_message,
    uses_exact_forces,
)
from pymc_rnshmc.step_methods.variables import continuous_value_vars
from pymc_rnshmc.step_methods.wall_watch import WALL_NATS, WallWatch, wall_between
from pymc_rnshmc.step_methods.warmup import SurrogateWarmup

__all__ = ["SurrogateHMC", "SurrogateHMCState"]

_log = logging.getLogger("pymc.rnshmc")
SURROGATE_ERROR_EVERY = 10
"""After tuning, the ``surrogate_error`` statistic is computed on every this-many-th draw."""


@dataclass_state
class SurrogateHMCState(StepMethodState):
    """A chain's state: its parts' and counters (PyMC copies it)."""

    tune: bool
    iter_count: int
    divergences: int
    _tune_steps: int | None
    _explorer: Any
    _warmup: SurrogateWarmup
    _cache: CachedPoint | None
    _warned_exact_forces: bool


class SurrogateHMC(ArrayStepShared):
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
        Passed on to :class:`pymc.NUTS`, the exact draws' sampler (an unknown one raises).

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
        name = type(self).__name__
        self.options = check_options(
            name,
            surrogate,
            dynamics=dynamics,
            path_length=path_length,
            target_accept=target_accept,
            surrogate_target_accept=surrogate_target_accept,
            exploration_steps=exploration_steps,
            training_window=training_window,
            max_steps=max_steps,
            start_error=start_error,
            time_limit=time_limit,
            refit_during_tuning=refit_during_tuning,
        )
        check_nuts_options(name, kwargs)
        reject_errors = check_reject_errors(reject_errors)
        self.schedule = schedule
        self._surrogate_template = surrogate
        vars = continuous_value_vars(vars, model, name)
        gradient = has_gradient(model, vars)
        if not gradient:
            self._check_gradient_free(surrogate)
            self.schedule = schedule.without_gradients()
        function = _compiled_logp(model, vars, gradient, kwargs)
        super().__init__(
            vars, function._extra_vars_shared, kwargs.get("blocked", True), kwargs.get("rng")
        )
        self.exact_model = ExactModel(
            model,
            self.vars,
            kwargs.get("initial_point"),
            function.dtype,
            function if gradient else None,
            gradient=gradient,
            logp_function=None if gradient else function,
            reject_errors=reject_errors,
            time_limit=self.options.time_limit,
        )
        self.safety_net = SafetyNet.default(
            safety_net, gradient_free=not gradient, dim=self.exact_model.size
        )
        self._nuts_options = {"model": model, "target_accept": target_accept, **kwargs}
        self._explorer = self._new_explorer(vars, function)
        self.rng = self._explorer.use_rng(self.rng)
        self._warmup_settings = self.options.warmup_settings(
            name,
            self.schedule,
            dim=self.exact_model.size,
            values_only=not gradient,
            exact_sampler=self._exact_sampler,
            nuts_options=self._nuts_options,
        )
        if not gradient:
            _tell_gradient_free(name)
        self._tune_steps = None
        self._start_chain()

    def _new_explorer(self, vars, function) -> NUTSExplorer | RandomWalkExplorer:
        """The chain's exact sampler: PyMC's NUTS, or a random walk without gradients."""
        options = self._nuts_options
        self._dual_averaging = tuple(nuts_option(options, name) for name in ("gamma", "k", "t0"))
        if self.gradient_free:
            first_step = nuts_option(options, "step_scale") / self.exact_model.size**0.25
            first_step = float(np.exp(np.log(first_step)))  # as NUTS's dual averaging has it
            return RandomWalkExplorer(self.exact_model, first_step)
        exact_model = self.exact_model

        def guard(function):  # PyMC's leapfrog fails, and is limited, as the model is
            return GuardedLogpGradient(exact_model.limited(function), exact_model.failures)

        return NUTSExplorer(vars, function, guard, self._dual_averaging, **options)

    def _check_gradient_free(self, surrogate) -> None:
        """Raise if this configuration cannot sample a model without gradients."""

    # ----------------------------------------------------------------- what the step is
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
        return self.exact_model.dtype

    @property
    def dynamics(self):
        """The surrogate proposals (:mod:`~pymc_rnshmc.step_methods.dynamics`)."""
        return self.options.dynamics

    @property
    def max_steps(self) -> int:
        """The most leapfrog steps of one surrogate trajectory."""
        return self.options.max_steps

    @property
    def time_limit(self) -> float | None:
        """Seconds after which an exact evaluation is abandoned (``None``: no limit)."""
        return self.options.time_limit

    @property
    def Emax(self) -> float:
        """The energy change above which a trajectory is divergent (PyMC's ``Emax``)."""
        return self._warmup_settings.max_energy_change

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
        return self.options.path_length if kernel is None else kernel.proposal.path_length

    def held_out_points(self) -> tuple[np.ndarray, np.ndarray]:
        """Recorded tuning points the current surrogate was not fitted to, with their exact ``U``.

        The exploration draws before its training window and the proposals learned after its
        fit; kept when tuning ends (:func:`~pymc_rnshmc.plot_surrogate` shows the surrogate
        against them). Empty before the first fit.
        """
        return self._warmup.held_out_points()

    # ----------------------------------------------------------------- chain lifecycle
    def _start_chain(self) -> None:
        """Forget everything a previous chain learned or adapted: a step object is reusable."""
        self.iter_count = 0
        self.divergences = 0
        self.tune = True
        self._explorer.start_chain()
        self._warmup = SurrogateWarmup(self._warmup_settings, self._tune_steps)
        self._cache = None
        self._warned_exact_forces = False
        self._acceptance_monitor = AcceptanceMonitor(
            type(self).__name__, richer_surrogate=self._richer_surrogate
        )
        self._wall_watch = WallWatch(type(self).__name__)
        self._chain = ChainLog(type(self).__name__)
        self.exact_model.failures.take()

    def _surrogate_installed(self) -> None:
        """Forget the old surrogate's cached values, then the ``_after_fit`` hook."""
        if self._cache is not None:  # keep the exact logp, drop the old surrogate's values
            self._cache = self._cache.without_surrogate_values()
        self._after_fit()

    def setup_chain(self, rng, tune: int, draws: int) -> None:  # PyMC >= 6
        self._tune_steps = int(tune)
        self.set_rng(rng)

    def set_rng(self, rng) -> None:
        """Give the step a random generator and start a chain (PyMC 5's per-chain call)."""
        self.rng = self._explorer.use_rng(get_random_generator(rng, copy=False))
        self._start_chain()

    @property
    def sampling_state(self) -> SurrogateHMCState:
        return WithSamplingState.sampling_state.fget(self)

    @sampling_state.setter
    def sampling_state(self, state: SurrogateHMCState) -> None:
        WithSamplingState.sampling_state.fset(self, state)
        self._explorer.share_rng(self.rng)  # restored separately; a chain has one stream

    def reset_tuning(self, start=None) -> None:
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
        self._explorer.stop_tuning()
        self.tune = False
        warmup.freeze()  # the kept draws share one kernel

    def _warn_if_capped(self) -> None:
        """Say so if the tuned step size makes every trajectory stop at ``max_steps``."""
        if not self.dynamics.chooses_path_length:
            return
        path_length, max_steps = self.path_length, self.max_steps
        step_size = self._warmup.bounded_step_size(self.tune)
        if path_length / step_size <= max_steps:
            return
        warnings.warn(
            f"{type(self).__name__}'s step size tuned to {step_size:.3g}, so its trajectories "
            f"stop at max_steps={max_steps} after {max_steps * step_size:.3g} of the "
            f"chosen path length {path_length:.3g}, and each costs {max_steps} surrogate "
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
        activity = "while fitting the surrogate"
        try:
            if self.tune:
                self._warmup.fit_if_due(self.iter_count, self.rng, _Host(self))
            activity = f"in a draw of the {self.phase} phase"
            q_new, stats = self._draw(q0)
        except ModelEvaluationError as error:
            self._locate(error, activity)
            raise
        self.iter_count += 1
        count, first = self.exact_model.failures.take()
        stats["model_failures"] = count
        warning = self._chain.failure_warning(first, self.iter_count)
        if warning is not None:
            stats["warning"] = warning
        self._chain.add(q_new.data, self.tune)
        stats["perf_counter_start"] = perf_start
        stats["perf_counter_diff"] = time.perf_counter() - perf_start
        stats["process_time_diff"] = time.process_time() - process_start
        return q_new, [stats]

    def _draw(self, q0: RaveledVars) -> tuple[RaveledVars, dict[str, Any]]:
        """One draw of the chain's current phase, with its stats."""
        result = None
        if self.phase != Phase.SURROGATE:
            q_new, stats = self._exact_draw(q0)
            stats["phase"] = 3 if self.phase == Phase.EXACT else 0
        elif self._net_applies() and self.safety_net.catches(self.rng):
            q_new, stats = self._safety_net_draw(q0)
            stats["phase"] = 2
        else:
            result = self._surrogate_draw(q0.data)
            self._warmup.learn_from(result)
            q_new, stats = RaveledVars(result.end.position, q0.point_map_info), self._stats(result)
            stats["phase"] = 1
            if not self.tune:
                self._judge_acceptance(result)
        stats.update(self._after_draw(result))
        return q_new, stats

    def _locate(self, error: ModelEvaluationError, activity: str) -> None:
        self._chain.locate(error, activity, self.exact_model.failures.layout)

    def _exact_draw(self, q0: RaveledVars) -> tuple[RaveledVars, dict[str, Any]]:
        """A draw of the explorer (exploration, safety net, or no usable surrogate)."""
        cache, n_start = self._cache, 0
        if self.gradient_free:  # the walk needs the chain's logp
            cache, n_start, _ = self._current_logp(q0.data)
        elif cache is not None and not np.array_equal(cache.position, q0.data):
            cache = None
        draw: ExactDraw = self._explorer.draw(q0, cache, self.tune, self.rng)
        if draw.laplace is not None:
            self._warmup.laplace = draw.laplace
            self._warmup.setup_seconds += draw.setup_seconds
        stats = draw.stats
        stats["n_logp_evals"] += n_start
        self.divergences += bool(stats["diverging"]) and not self.tune
        stats["divergences"] = self.divergences
        if draw.position is None:  # could not start: the chain stays
            return q0, stats
        if self.tune and self.phase != Phase.EXACT and draw.evaluated is not None:
            self._warmup.record.append(*draw.evaluated)
        extras = self.exact_model.extra_values()
        self._cache = CachedPoint(draw.position.copy(), draw.logp, extras)
        return RaveledVars(draw.position, q0.point_map_info), stats

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

    def _safety_net_draw(self, q0: RaveledVars) -> tuple[RaveledVars, dict[str, Any]]:
        """An exact draw in the surrogate phase (:mod:`~pymc_rnshmc.step_methods.safety_net`).

        The explorer's draw, with the step size it adapted while exploring (the surrogate
        dynamics have their own), looked at for the wall it crossed.
        """
        start = self._cache
        q_new, stats = self._exact_draw(q0)
        stats["safety_net"] = True
        if start is not None and np.array_equal(start.position, q0.data):
            self._watch_wall(start, q_new.data, stats)
        return q_new, stats

    def _watch_wall(self, start: CachedPoint, end: np.ndarray, stats: dict[str, Any]) -> None:
        """Set a net draw's ``surrogate_error`` from the wall it crossed, and act on a high one.

        While tuning, a wall of ``WALL_NATS`` or more brings a refit that includes the draw's
        point, if the schedule learns and tuning has room for one; after tuning, the first such
        wall of the chain is told (:mod:`~pymc_rnshmc.step_methods.wall_watch`).
        """
        wall = wall_between(self.surrogate, start, end, stats["model_logp"])
        if np.isnan(wall):
            return
        stats["surrogate_error"] = -wall
        if self.tune:
            if wall >= WALL_NATS:
                self._warmup.refit_behind_wall()
            return
        message = self._wall_watch.record(wall, self.exact_model.failures.layout.describe(end))
        if message is not None:
            warnings.warn(message, SurrogateWarning, stacklevel=4)

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
            warmup.adapt(adaptation_accept(self.surrogate, result))
            self._watch_for_collapse(result.accept)
        self._cache = result.end
        self._note_exact_forces(result)
        return result

    def _current_logp(self, position: np.ndarray) -> tuple[CachedPoint, int, bool]:
        """The chain's point with its target ``logp`` (see :func:`current_point`)."""
        correction = self._warmup.kernel.correction if self.phase == Phase.SURROGATE else None
        return current_point(self._cache, position, self.exact_model, correction)

    def _judge_acceptance(self, result: DrawResult) -> None:
        """Warn once per chain if the exact acceptance after tuning is poor, and why."""
        message = self._acceptance_monitor.record(
            result.accept, result.integrator_accept, result.surrogate_error
        )
        if message is not None:
            warnings.warn(message, SurrogateWarning, stacklevel=3)

    def _watch_for_collapse(self, accept: float) -> None:
        """Resume the explorer while tuning if the warm-up says the surrogate has collapsed.

        Exact NUTS adapts its step size afresh (:meth:`NUTSExplorer.resume`), until the
        warm-up's next start, or to the end of tuning and beyond (``Phase.EXACT``).
        """
        if self._warmup.watch_for_collapse(accept, self.iter_count) is not None:
            self._explorer.resume(self._warmup.tuning_draws_left(self.iter_count))

    def _evaluate_logp(self, position: np.ndarray) -> Evaluation:
        return Evaluation(position, self.exact_model.logp(position))

    def _evaluate_with_gradient(self, position: np.ndarray) -> Evaluation:
        potential, gradient = self.exact_model.potential_and_gradient(position)
        return Evaluation(position, -potential, gradient)

    def _note_exact_forces(self, result: DrawResult) -> None:
        """Warn once after tuning if a trajectory needed the exact force somewhere."""
        if self.tune or self._warned_exact_forces or not uses_exact_forces(self.surrogate, result):
            return
        self._warned_exact_forces = True
        warnings.warn(exact_forces_message(type(self).__name__), SurrogateWarning, stacklevel=2)

    def _stats(self, result: DrawResult) -> dict[str, Any]:
        """The sampler statistics of a surrogate draw (see ``SURROGATE_HMC_STATS``)."""
        warning = None
        if result.divergence:
            kind = WarningType.TUNING_DIVERGENCE if self.tune else WarningType.DIVERGENCE
            warning = SamplerWarning(kind, result.divergence, "debug", self.iter_count)
            self.divergences += not self.tune
        return surrogate_draw_stats(
            result,
            divergences=self.divergences,
            step_size_bar=float(self._warmup.adaptation.current(False)),
            tuning=self.tune,
            # the metric the draw used, not PyMC's mass matrix (which only the exploration uses)
            metric_range=result.metric_range or self.kernel.proposal.metric.eigenvalue_range(),
            warning=warning,
        )

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
        """Extra statistics of a draw (``result`` is ``None`` for an exact draw)."""
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


def _compiled_logp(model, vars, gradient: bool, options: dict):
    """PyMC's joint logp-and-gradient function of ``vars``, or logp alone without gradients."""
    function = model.logp_dlogp_function(
        vars,
        compute_grads=gradient,
        dtype=options.get("dtype"),
        ravel_inputs=True,
        initial_point=options.get("initial_point"),
        **compile_options(options),
    )
    function.trust_input = True
    return function


def _tell_gradient_free(name: str) -> None:
    _log.info(
        "%s: the model's logp has no gradient, so it explores with adaptive random-walk "
        "Metropolis and fits its surrogate to log-density values; after tuning a draw "
        "still costs one logp.",
        name,
    )


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
        return self.step._explorer.metric()

    def surrogate_installed(self) -> None:
        self.step._surrogate_installed()

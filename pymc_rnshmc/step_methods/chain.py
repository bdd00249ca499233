"""One chain of a surrogate sampler, advanced a draw at a time.

:class:`SurrogateChain` holds what a chain has (its exact explorer, its warm-up, its current
point with what is known there, its counters and monitors) and makes each draw: an exact draw
while exploring or after a fall-back, a safety-net draw, or a surrogate draw of the warm-up's
kernel. It knows nothing of PyMC's step protocol: the step
(:class:`~pymc_rnshmc.step_methods.surrogate_hmc.SurrogateHMC`) hands it each draw's position,
tuning flag and generator, and its configuration's hooks (:class:`ChainHooks`), and passes the
stats on to PyMC.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import numpy as np
from pymc.blocking import RaveledVars
from pymc.stats.convergence import SamplerWarning, WarningType
from pymc.step_methods.state import DataClassState, WithSamplingState, dataclass_state
from pymc.step_methods.step_sizes import DualAverageAdaptation

from pymc_rnshmc.exceptions import ModelEvaluationError, SurrogateWarning
from pymc_rnshmc.hmc.corrections import Correction, Evaluation, SurrogateTarget
from pymc_rnshmc.hmc.kernel import PendingDraw, kernel_finish, kernel_propose
from pymc_rnshmc.hmc.transition import CachedPoint, DrawResult
from pymc_rnshmc.step_methods.acceptance_monitor import AcceptanceMonitor
from pymc_rnshmc.step_methods.chain_log import ChainLog
from pymc_rnshmc.step_methods.economy import logp_function_pays
from pymc_rnshmc.step_methods.explorers import ExactDraw
from pymc_rnshmc.step_methods.reporting import ALONE_PHASE, surrogate_draw_stats
from pymc_rnshmc.step_methods.safety_net import SafetyNet
from pymc_rnshmc.step_methods.schedule import Phase
from pymc_rnshmc.step_methods.surrogate_draws import (
    adaptation_accept,
    current_point,
    exact_forces_message,
    uses_exact_forces,
)
from pymc_rnshmc.step_methods.wall_watch import WALL_NATS, WallWatch, wall_between
from pymc_rnshmc.step_methods.warmup import SurrogateWarmup, WarmupSettings

__all__ = ["BegunDraw", "ChainHooks", "SurrogateChain"]

SURROGATE_ERROR_EVERY = 10
"""After tuning, the ``surrogate_error`` statistic is computed on every this-many-th draw."""


class BegunDraw(NamedTuple):
    """A chain's draw between its two halves (:meth:`SurrogateChain.begin`, ``finish``).

    Either an exact draw waits for the explorer (``exact_phase`` set: the explorer's draw from
    ``q0`` and ``exact_start``), or a surrogate move waits for its exact ``logp`` at
    ``position_to_evaluate``.
    """

    q0: RaveledVars
    kernel: Any = None
    """The kernel the surrogate move used (the tuning kernel while tuning)."""
    pending: PendingDraw | None = None
    """The surrogate move, waiting for its correction."""
    start_evals: int = 0
    approximate: bool = False
    wants_gradient: bool = False
    """The correction's evaluation should carry the gradient (the surrogate learns from it)."""
    exact_phase: int | None = None
    """An exact draw's ``phase`` stat: 0 exploring, 2 safety net, 3 exact for good."""
    exact_start: CachedPoint | None = None
    """The chain's point with its ``logp``, where known, for the explorer."""
    net_start: CachedPoint | None = None
    """A safety-net draw's start, to measure the wall it crosses."""
    fitting: float = 0.0
    """Seconds spent fitting in :meth:`SurrogateChain.begin` (not charged to the draw)."""
    on_surrogate: bool = False
    """A tuning move on the surrogate alone: its test needs no exact evaluation."""

    @property
    def position_to_evaluate(self) -> np.ndarray | None:
        if self.pending is None or self.on_surrogate:
            return None
        return self.pending.position_to_evaluate


class ChainHooks(Protocol):
    """What a configuration adds to a chain (the step's hooks; see its module docstring)."""

    def _new_surrogate(self) -> Any: ...
    def _correction(self) -> Correction: ...
    def _after_fit(self) -> None: ...
    def _before_draw(self) -> None: ...
    def _evaluate_end(self, position: np.ndarray) -> Evaluation: ...
    def _wants_end_gradient(self) -> bool: ...
    def _after_draw(self, result: DrawResult | None) -> dict[str, Any]: ...


@dataclass_state
class _ChainState(DataClassState):
    iter_count: int
    divergences: int
    tune: bool
    warmup: SurrogateWarmup
    cache: CachedPoint | None
    anchor: CachedPoint | None
    warned_exact_forces: bool
    explorer: Any


class SurrogateChain(WithSamplingState):
    """A surrogate sampler's chain: explorer, warm-up, current point, counters and monitors.

    Parameters
    ----------
    settings : WarmupSettings
        The configuration's fixed choices (its name, dynamics, schedule, ...).
    tune : int, optional
        The chain's tuning length (``None`` on PyMC 5, which does not say).
    explorer : NUTSExplorer or RandomWalkExplorer
        The exact sampler (:mod:`~pymc_rnshmc.step_methods.explorers`), started afresh here.
    exact_model : ExactModel
        The door to the model.
    safety_net : SafetyNet
        The share of exact draws in the surrogate phase.
    dual_averaging : tuple
        PyMC's ``(gamma, k, t0)`` for the surrogate step size's adaptation.
    richer_surrogate : str
        How to give the surrogate more capacity, for warnings.
    warmup : SurrogateWarmup, optional
        A warm-up shared with other chains (a population's: one record, one surrogate, one
        step-size adaptation); default the chain's own.
    draws : int, optional
        The chain's kept draws (``None`` on PyMC 5), for the warm-up's cost estimates.
    """

    _state_class = _ChainState

    def __init__(
        self,
        settings: WarmupSettings,
        tune: int | None,
        explorer,
        exact_model,
        safety_net: SafetyNet,
        dual_averaging: tuple,
        richer_surrogate: str,
        warmup: SurrogateWarmup | None = None,
        draws: int | None = None,
    ) -> None:
        self.settings, self.explorer, self.exact_model = settings, explorer, exact_model
        self.safety_net, self.dual_averaging = safety_net, dual_averaging
        self.richer_surrogate = richer_surrogate
        self.iter_count = self.divergences = 0
        self.tune = True
        self.warmup = SurrogateWarmup(settings, tune, draws=draws) if warmup is None else warmup
        self.sharing: list[SurrogateChain] = [self]
        """The chains whose cached surrogate values a new surrogate makes stale (a population's
        chains share one warm-up)."""
        self.cache: CachedPoint | None = None
        self.anchor: CachedPoint | None = None
        """The chain's last point with its exact ``logp``: where it returns if a stretch on the
        surrogate alone ended where the model's ``logp`` is not finite."""
        self.warned_exact_forces = False
        self.acceptance_monitor = AcceptanceMonitor(
            settings.name, richer_surrogate=richer_surrogate
        )
        self.wall_watch = WallWatch(settings.name)
        self.log = ChainLog(settings.name)
        explorer.start_chain()
        exact_model.failures.take()

    @property
    def phase(self) -> Phase:
        return self.warmup.phase

    def forget_surrogate_values(self) -> None:
        """Keep the cached exact ``logp``, drop the old surrogate's values (it changed)."""
        if self.cache is not None:
            self.cache = self.cache.without_surrogate_values()

    # ----------------------------------------------------------------- one draw
    def draw(
        self, q0: RaveledVars, tune: bool, rng, hooks: ChainHooks
    ) -> tuple[RaveledVars, dict[str, Any]]:
        """Fit if due, then one draw of the chain's phase; its stats, with its timings.

        Its two halves, :meth:`begin` and :meth:`finish`, with what lies between made here:
        the explorer's draw, or the exact evaluation of a surrogate move (when asked).
        """
        clock, process_clock = time.perf_counter(), time.process_time()
        begun = self.begin(q0, tune, rng, hooks)
        exact = None
        if begun.exact_phase is not None:
            try:
                exact = self.explorer.draw(begun.q0, begun.exact_start, tune, rng)
            except ModelEvaluationError as error:
                self.log.locate(error, f"in a draw of the {self.phase} phase", self.failures.layout)
                raise
        evaluate = hooks._evaluate_end if tune else self.exact_model.evaluate
        q_new, stats = self.finish(begun, rng, hooks, evaluate, exact)
        seconds = time.perf_counter() - clock
        stats["perf_counter_start"] = clock
        stats["perf_counter_diff"] = seconds
        stats["process_time_diff"] = time.process_time() - process_clock
        self.account(begun, stats, seconds)
        return q_new, stats

    def begin(self, q0: RaveledVars, tune: bool, rng, hooks: ChainHooks) -> BegunDraw:
        """The first half of a draw: fit if due, then the start of an exact draw or a move.

        An exact or safety-net draw waits for the explorer's draw from ``q0``; a surrogate move
        waits for the exact ``logp`` at ``position_to_evaluate`` (with the gradient if
        ``wants_gradient``). A driver of many chains runs these with the other chains'.
        """
        self.tune = tune
        hooks._before_draw()
        setup_seconds = self.warmup.setup_seconds
        if tune:
            self._fit_if_due(rng, hooks)
        fitting = self.warmup.setup_seconds - setup_seconds
        try:
            return self._begin_move(q0, rng, hooks)._replace(fitting=fitting)
        except ModelEvaluationError as error:
            self.log.locate(error, f"in a draw of the {self.phase} phase", self.failures.layout)
            raise

    def _fit_if_due(self, rng, hooks: ChainHooks) -> None:
        """The warm-up's fit or refit when due; the ``logp`` function chosen at the first."""
        exploring = self.phase == Phase.EXPLORATION
        try:
            self.warmup.fit_if_due(self.iter_count, rng, _Host(self, hooks))
        except ModelEvaluationError as error:
            self.log.locate(error, "while fitting the surrogate", self.failures.layout)
            raise
        if exploring and self.phase == Phase.SURROGATE:
            self._choose_logp_function()

    def _begin_move(self, q0: RaveledVars, rng, hooks: ChainHooks) -> BegunDraw:
        """An exact draw (exploring, exact for good, or the safety net's) or a surrogate move.

        Any draw but a move on the surrogate alone starts from the exact ``logp`` of its point
        (:meth:`_back_on_the_posterior`).
        """
        if self.phase != Phase.SURROGATE:
            q0, evals = self._back_on_the_posterior(q0)
            return self._counted(
                self._begin_exact(q0, 3 if self.phase == Phase.EXACT else 0), evals
            )
        net = self._net_applies() and self.safety_net.catches(rng)
        if not net and self.tune and self.warmup.moves_alone(self.iter_count):
            return self._propose(q0, rng, hooks, alone=True)
        q0, evals = self._back_on_the_posterior(q0)
        begun = self._begin_exact(q0, 2) if net else self._propose(q0, rng, hooks)
        return self._counted(begun, evals)

    @staticmethod
    def _counted(begun: BegunDraw, evaluations: int) -> BegunDraw:
        return begun._replace(start_evals=begun.start_evals + evaluations)

    def _back_on_the_posterior(self, q0: RaveledVars) -> tuple[RaveledVars, int]:
        """The chain's point, with its exact ``logp``, after moves on the surrogate alone.

        The exact ``logp`` there checks the surrogate
        (:meth:`~pymc_rnshmc.step_methods.tuning_alone.AloneTuning.check`).
        Where it is not finite (the surrogate led the chain where the model fails), the stretch
        on the surrogate alone ends and the chain returns to its last exactly evaluated point,
        ``anchor``: a tuning draw, discarded. Also returns the exact evaluations made.
        """
        cache = self.cache
        if cache is None or not cache.on_surrogate:
            return q0, 0
        if not np.array_equal(cache.position, q0.data):  # not the chain's point: of no use
            self.cache = None
            return q0, 0
        logp = self.exact_model.logp(q0.data)
        if np.isfinite(logp):
            self.cache = CachedPoint(q0.data.copy(), logp, self.exact_model.extra_values())
            self.anchor = self.cache
            self.warmup.alone.check(logp, -cache.logp)
            return q0, 1
        self.warmup.alone.end(f"the model's logp is {logp} where the chain went")
        self.cache = self.anchor
        if self.anchor is None:  # never evaluated exactly: PyMC's error follows, as for NUTS
            return q0, 1
        return RaveledVars(self.anchor.position.copy(), q0.point_map_info), 1

    def finish(
        self,
        begun: BegunDraw,
        rng,
        hooks: ChainHooks,
        evaluate: Callable[[np.ndarray], Evaluation],
        exact: ExactDraw | None = None,
        tell_warmup: Callable[[ExactDraw, bool], None] | None = None,
    ) -> tuple[RaveledVars, dict[str, Any]]:
        """The second half: the correction or the explorer's draw, bookkeeping, and stats.

        ``evaluate`` gives the exact ``logp`` where a surrogate move's correction asks for it;
        ``exact`` is the explorer's draw of an exact draw, which ``tell_warmup(exact, record)``
        hands to the warm-up (default its ``learn_from_exact`` at once; a driver of chains
        that draw out of step defers it).
        """
        result = None
        try:
            if begun.exact_phase is not None:
                tell = self.warmup.learn_from_exact if tell_warmup is None else tell_warmup
                q_new, stats = self._finish_exact(begun, exact, tell)
            else:
                result = self._judge(begun, rng, evaluate)
                q_new = RaveledVars(result.end.position, begun.q0.point_map_info)
                stats = self._stats(result)
                stats["phase"] = ALONE_PHASE if begun.on_surrogate else 1
                if not self.tune:
                    self._judge_acceptance(result)
        except ModelEvaluationError as error:
            self.log.locate(error, f"in a draw of the {self.phase} phase", self.failures.layout)
            raise
        stats.update(hooks._after_draw(result))
        self.iter_count += 1
        count, first = self.exact_model.failures.take()
        stats["model_failures"] = count
        warning = self.log.failure_warning(first, self.iter_count)
        if warning is not None:
            stats["warning"] = warning
        self.log.add(q_new.data, self.tune)
        return q_new, stats

    @property
    def failures(self):
        return self.exact_model.failures

    # ----------------------------------------------------------------- what draws cost
    def account(self, begun: BegunDraw, stats: dict[str, Any], seconds: float) -> None:
        """Charge a finished tuning draw's measured ``seconds`` to the warm-up's economy.

        ``begun`` and ``stats`` are the draw's halves; its fitting is left out. The driver
        measures the seconds (this chain's :meth:`draw`, or a population's round). Once the
        first surrogate has made enough tuning draws, the warm-up judges whether it pays
        (:meth:`~pymc_rnshmc.step_methods.warmup.SurrogateWarmup.judge_sampling`); if not, the
        exact explorer resumes for good.
        """
        if not self.tune:
            return
        warmup = self.warmup
        gradients = int(stats.get("n_gradient_evals", 0))
        warmup.economy.note_draw(int(stats["phase"]), gradients, seconds - begun.fitting)
        if warmup.verdict_due:
            draws, left = np.asarray(self.log.draws), warmup.tuning_draws_left(self.iter_count)
            new_metric = self.explorer.takes_metric_from(draws, left)
            if not warmup.judge_sampling(draws, new_metric).surrogate_pays:
                self.explorer.resume(left, draws)

    def _resume_explorer(self) -> None:
        """Exact draws resume while tuning (a collapse, a wall): told the chain's draws so far."""
        self.explorer.resume(
            self.warmup.tuning_draws_left(self.iter_count), np.asarray(self.log.draws)
        )

    def _choose_logp_function(self) -> None:
        """At the first fit, choose the function that evaluates ``logp`` alone.

        The joint function if compiling the logp-only one would cost more than it saves
        (:func:`~pymc_rnshmc.step_methods.economy.logp_function_pays`).
        """
        model, costs = self.exact_model, self.warmup.economy.costs
        if not model.has_gradient or model.logp_function_ready:
            return
        model.note_compile_seconds(costs.compile_seconds())
        evaluations_left = self.warmup.draws_left(self.iter_count) * len(self.sharing)
        by_joint = not logp_function_pays(
            costs.seconds_per_gradient(), model.logp_function_seconds(), evaluations_left
        )
        for chain in self.sharing:  # a population's chains: one choice, as one function
            chain.exact_model.logp_by_joint = by_joint

    def _begin_exact(self, q0: RaveledVars, phase_code: int) -> BegunDraw:
        """An exact draw's first half: the chain's point, with its ``logp`` where known."""
        cache, n_start = self.cache, 0
        if self.explorer.needs_logp:  # the random walk starts from the chain's logp
            cache, n_start, _ = self._current_logp(q0.data)
        elif cache is not None and not np.array_equal(cache.position, q0.data):
            cache = None
        net_start = self.cache if phase_code == 2 else None
        return BegunDraw(
            q0, start_evals=n_start, exact_phase=phase_code, exact_start=cache, net_start=net_start
        )

    def _finish_exact(
        self, begun: BegunDraw, draw: ExactDraw, tell_warmup: Callable[[ExactDraw, bool], None]
    ) -> tuple[RaveledVars, dict[str, Any]]:
        """An exact draw's second half: record what it evaluated, cache where it went.

        A safety-net draw (the explorer's, with the step size it adapted while exploring; the
        surrogate dynamics have their own) is also looked at for the wall it crossed.
        """
        q0 = begun.q0
        tell_warmup(draw, self.tune and self.phase != Phase.EXACT and draw.position is not None)
        stats = draw.stats
        stats["n_logp_evals"] += begun.start_evals
        self.divergences += bool(stats["diverging"]) and not self.tune
        stats["divergences"] = self.divergences
        stats["phase"] = begun.exact_phase
        q_new = q0
        if draw.position is not None:  # else it could not start: the chain stays
            extras = self.exact_model.extra_values()
            self.cache = self.anchor = CachedPoint(draw.position.copy(), draw.logp, extras)
            q_new = RaveledVars(draw.position, q0.point_map_info)
        if begun.exact_phase == 2:
            stats["safety_net"] = True
            start = begun.net_start
            if start is not None and np.array_equal(start.position, q0.data):
                self._watch_wall(start, q_new.data, stats)
        return q_new, stats

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
        return not (self.tune and self.settings.values_only)

    def _watch_wall(self, start: CachedPoint, end: np.ndarray, stats: dict[str, Any]) -> None:
        """Set a net draw's ``surrogate_error`` from the wall it crossed, and act on a high one.

        While tuning, a wall of ``WALL_NATS`` or more brings a refit that includes the draw's
        point, or exact NUTS for good where the surrogate cannot learn it
        (:meth:`~pymc_rnshmc.step_methods.warmup.SurrogateWarmup.wall_crossed`); after tuning,
        the first such wall of the chain is told (:mod:`~pymc_rnshmc.step_methods.wall_watch`).
        """
        wall = wall_between(self.warmup.surrogate, start, end, stats["model_logp"])
        if np.isnan(wall):
            return
        stats["surrogate_error"] = -wall
        if self.tune:
            if wall >= WALL_NATS:
                if self.warmup.wall_crossed(wall):
                    self._resume_explorer()
            return
        message = self.wall_watch.record(wall, self.exact_model.failures.layout.describe(end))
        if message is not None:
            warnings.warn(message, SurrogateWarning, stacklevel=6)

    # ----------------------------------------------------------------- one surrogate draw
    def _propose(self, q0: RaveledVars, rng, hooks: ChainHooks, alone: bool = False) -> BegunDraw:
        """The surrogate move of the chain's kernel from ``q0`` (its first half).

        While tuning, the kernel takes the adapting step size, the exact model is also asked
        for its gradient where the surrogate learns, and proposals far outside the explored
        region are rejected unevaluated; after tuning the kernel is the frozen value. A tuning
        move on the surrogate ``alone`` is tested on the surrogate
        (:class:`~pymc_rnshmc.hmc.corrections.SurrogateTarget`); one that starts from an
        exactly evaluated point tells the warm-up the surrogate's error there.
        """
        warmup = self.warmup
        kernel = warmup.tuning_kernel() if self.tune else warmup.kernel
        if alone:
            cache = self.cache
            exact_here = cache is not None and not cache.on_surrogate
            if exact_here and np.array_equal(cache.position, q0.data):
                warmup.alone.check(cache.logp, float(warmup.surrogate.potential(cache.position)))
            on_surrogate = SurrogateTarget(kernel.correction, warmup.surrogate.potential)
            kernel = kernel._replace(correction=on_surrogate)
        start, n_logp_evals, approximate = current_point(
            self.cache, q0.data, self.exact_model, kernel.correction
        )
        pending = kernel_propose(
            kernel,
            start,
            rng,
            self.exact_model,
            extras=self.exact_model.extra_values(),
            diagnose=self.tune or self.iter_count % SURROGATE_ERROR_EVERY == 0,
            evaluable=warmup.explored_region.contains if self.tune else None,
        )
        wants_gradient = self.tune and not alone and hooks._wants_end_gradient()
        return BegunDraw(
            q0,
            kernel=kernel,
            pending=pending,
            start_evals=n_logp_evals,
            approximate=approximate,
            wants_gradient=wants_gradient,
            on_surrogate=alone,
        )

    def _judge(self, begun: BegunDraw, rng, evaluate) -> DrawResult:
        """The correction of a surrogate move (its second half), and what the chain learns."""
        warmup = self.warmup
        result = kernel_finish(begun.kernel, begun.pending, rng, evaluate)
        result = result._replace(
            n_logp_evals=begun.start_evals + result.n_logp_evals,
            approximate_test=begun.approximate or result.approximate_test,
        )
        if self.tune:
            warmup.adapt(adaptation_accept(warmup.surrogate, result))
            if not begun.on_surrogate and warmup.watch_for_collapse(result.accept, self.iter_count):
                self._resume_explorer()
        self.cache = result.end
        if not result.end.on_surrogate:
            self.anchor = result.end
        self._note_exact_forces(result)
        warmup.learn_from(result)
        return result

    def _current_logp(self, position: np.ndarray) -> tuple[CachedPoint, int, bool]:
        """The chain's point with its target ``logp`` (see :func:`current_point`)."""
        correction = self.warmup.kernel.correction if self.phase == Phase.SURROGATE else None
        return current_point(self.cache, position, self.exact_model, correction)

    def _judge_acceptance(self, result: DrawResult) -> None:
        """Warn once per chain if the exact acceptance after tuning is poor, and why."""
        message = self.acceptance_monitor.record(
            result.accept, result.integrator_accept, result.surrogate_error
        )
        if message is not None:
            warnings.warn(message, SurrogateWarning, stacklevel=5)

    def _note_exact_forces(self, result: DrawResult) -> None:
        """Warn once after tuning if a trajectory needed the exact force somewhere."""
        if self.tune or self.warned_exact_forces:
            return
        if not uses_exact_forces(self.warmup.surrogate, result):
            return
        self.warned_exact_forces = True
        warnings.warn(exact_forces_message(self.settings.name), SurrogateWarning, stacklevel=5)

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
            step_size_bar=float(self.warmup.adaptation.current(False)),
            tuning=self.tune,
            # the metric the draw used, not PyMC's mass matrix (which only the exploration uses)
            metric_range=result.metric_range
            or self.warmup.kernel.proposal.metric.eigenvalue_range(),
            warning=warning,
        )

    # ----------------------------------------------------------------- end of tuning
    def stop_tuning(self, rng, hooks: ChainHooks) -> None:
        """Fit if the chain is still exploring, stop learning, and freeze the kernel.

        Tuning may end in exact NUTS for good: a poor fit at its end, or a wall that stands.
        """
        warmup = self.warmup
        if warmup.phase == Phase.EXPLORATION:
            try:
                warmup.fit(self.iter_count, rng, _Host(self, hooks), end_of_tuning=True)
            except ModelEvaluationError as error:
                activity = "while fitting the surrogate at the end of tuning"
                self.log.locate(error, activity, self.exact_model.failures.layout)
                raise
        elif warmup.phase == Phase.SURROGATE:
            warmup.stop_learning()
            if warmup.phase == Phase.SURROGATE:
                self._warn_if_capped()
        self.explorer.stop_tuning()
        self.tune = False
        warmup.freeze()  # the kept draws share one kernel

    def _warn_if_capped(self) -> None:
        """Say so if the tuned step size makes every trajectory stop at ``max_steps``."""
        settings = self.settings
        if not settings.dynamics.chooses_path_length:
            return
        path_length, max_steps = self.warmup.kernel.proposal.path_length, settings.max_steps
        step_size = self.warmup.bounded_step_size(self.tune)
        if path_length / step_size <= max_steps:
            return
        warnings.warn(
            f"{settings.name}'s step size tuned to {step_size:.3g}, so its trajectories "
            f"stop at max_steps={max_steps} after {max_steps * step_size:.3g} of the "
            f"chosen path length {path_length:.3g}, and each costs {max_steps} surrogate "
            "steps. The surrogate's dynamics need steps this small somewhere (often where it is "
            "wrong or very curved): the draws stay exact but mix slowly. Check it with "
            f"plot_surrogate(step, idata); a longer tuning, or {self.richer_surrogate}, may "
            "help (a grid in more than a few dimensions seldom does: use RNSHMC there).",
            SurrogateWarning,
            stacklevel=4,
        )


class _Host:
    """A chain and its hooks as the warm-up's host (:class:`~.warmup.WarmupHost`).

    Made for each call that may fit and never kept, so the warm-up holds no reference to the
    chain (PyMC deep-copies it in ``sampling_state``).
    """

    def __init__(self, chain: SurrogateChain, hooks: ChainHooks) -> None:
        self.chain, self.hooks = chain, hooks

    def new_surrogate(self):
        return self.hooks._new_surrogate()

    def correction(self) -> Correction:
        return self.hooks._correction()

    def new_adaptation(self, initial_step: float, target: float) -> DualAverageAdaptation:
        return DualAverageAdaptation(initial_step, target, *self.chain.dual_averaging)

    def explorer_metric(self) -> tuple[np.ndarray | None, np.ndarray | None, float]:
        return self.chain.explorer.metric()

    def surrogate_installed(self) -> None:
        for chain in self.chain.sharing:
            chain.forget_surrogate_values()
        self.hooks._after_fit()

    def chains_sharing(self) -> int:
        return len(self.chain.sharing)

"""A chain's warm-up: from exact draws to a frozen surrogate kernel.

The warm-up holds everything a chain learns while tuning (the record of exact evaluations, the
surrogate, its kernel, the surrogate's step-size adaptation) and makes every decision between
exploring and sampling:

- **start**: fit once the exploration is long enough (:meth:`SurrogateWarmup.fit_if_due`),
  postponing while the fit's held-out error is above ``start_error`` and the schedule allows;
- **fall back**: exact draws for good (``Phase.EXACT``) when no usable surrogate can be had;
- **learn**: record the plausible proposals of tuning draws (:meth:`~SurrogateWarmup.learn_from`)
  and refit when the record has grown, while refits still pay (its
  :class:`~pymc_rnshmc.step_methods.learning_plan.LearningPlan`);
- **resume**: exact exploration again when the surrogate's exact acceptance collapses
  (:meth:`~SurrogateWarmup.watch_for_collapse`), and a refit when a safety-net draw crossed a
  wall; exact NUTS for good where no refit removes the wall (:meth:`~SurrogateWarmup.wall_crossed`);
- **tune on the surrogate alone**: once learning has ended, tuning draws move on the surrogate
  with no exact evaluation (:meth:`~SurrogateWarmup.moves_alone`; its stretch and the check
  that ends it are an :class:`~pymc_rnshmc.step_methods.tuning_alone.AloneTuning`);
- **freeze**: when tuning ends, the kernel becomes one value (:meth:`~SurrogateWarmup.freeze`);
- **pay**: refits only while they cost less than what they can save, and exact NUTS for good
  when the surrogate gives fewer effective draws per second than the exploration did (its
  :class:`~pymc_rnshmc.step_methods.economy.Economy`, fed the chain's measured draws).

The start and refit thresholds are the schedule's (:mod:`~pymc_rnshmc.step_methods.schedule`);
the wall rules' are the learning plan's, the collapse's in
:mod:`~pymc_rnshmc.step_methods.collapse_watch`. The warm-up never evaluates the model: exact
draws come to it (the driver records them), and the kernel asks the driver for the exact
``logp`` of its proposals (with the gradient while :attr:`SurrogateWarmup.wants_gradients`).
numpy only: the configuration's parts (a new surrogate, the correction, a step-size adaptation)
come in as callables.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from pymc_rnshmc.exceptions import FIT_ERRORS, EvaluationTimeout, SurrogateWarning
from pymc_rnshmc.hmc.explored_region import ExploredRegion
from pymc_rnshmc.hmc.kernel import SurrogateKernel
from pymc_rnshmc.hmc.trajectory_tuning import TrajectoryChoice
from pymc_rnshmc.hmc.transition import DrawResult
from pymc_rnshmc.step_methods.blas import single_blas_thread
from pymc_rnshmc.step_methods.collapse_watch import COLLAPSE_WINDOW, CollapseWatch
from pymc_rnshmc.step_methods.dynamics import Dynamics
from pymc_rnshmc.step_methods.economy import Economy, Verdict, unchecked_fit_too_poor
from pymc_rnshmc.step_methods.fit_setup import (
    choose_dynamics,
    fit_window,
    log_fit,
    log_fit_stopped,
    setup_deadline,
    warn_if_unchecked,
    weighed_error,
)
from pymc_rnshmc.step_methods.kernel_fit import new_kernel
from pymc_rnshmc.step_methods.learning_plan import LearningPlan
from pymc_rnshmc.step_methods.schedule import ASSUMED_TUNE, ExplorationSchedule, Phase
from pymc_rnshmc.step_methods.start_rule import StartRule
from pymc_rnshmc.step_methods.tuning_alone import AloneTuning
from pymc_rnshmc.step_methods.wall_watch import WALL_NATS
from pymc_rnshmc.surrogates.base import Capabilities, held_out_error
from pymc_rnshmc.surrogates.training import TrainingBuffer

__all__ = ["SurrogateWarmup", "WarmupHost", "WarmupSettings"]

_log = logging.getLogger("pymc.rnshmc")

LEARNING_ENERGY_LIMIT = 20.0
"""Proposals whose exact energy error exceeds this (acceptance below 2e-9) are not learned."""


@dataclass(frozen=True)
class WarmupSettings:
    """A configuration's fixed choices for every chain's warm-up."""

    name: str
    """The sampler's name, for messages."""
    exact_sampler: str
    """What samples when the surrogate does not, for messages."""
    schedule: ExplorationSchedule
    dynamics: Dynamics
    dim: int
    values_only: bool
    """The model has no gradient: fits to values, no gradients asked."""
    learns: bool
    """Learn from tuning draws and refit (the user's choice and the schedule's)."""
    exploration_steps: int | None
    training_window: int | None
    path_length: float | None
    start_error: float | None
    surrogate_target_accept: float
    max_steps: int
    max_depth: int
    max_energy_change: float
    weighs_costs: bool = True
    """Let measured costs decide later refits and whether the surrogate is given up for exact
    NUTS (``weigh_costs``)."""
    tunes_on_surrogate: bool = False
    """Once learning has ended, tuning draws move on the surrogate alone
    (``tune_on_surrogate``)."""


class WarmupHost(Protocol):
    """What the warm-up asks of its driver when it fits (the PyMC step is one).

    Passed to each call that may fit, never kept: the warm-up is a value the driver owns.
    """

    def new_surrogate(self) -> Any:
        """An unfitted surrogate for this chain."""
        ...

    def correction(self) -> Any:
        """The correction of the surrogate proposals, once the surrogate phase has started."""
        ...

    def new_adaptation(self, initial_step: float, target: float) -> Any:
        """A step-size adaptation (dual averaging: ``current(tune)``, ``update(accept, tune)``)."""
        ...

    def explorer_metric(self) -> tuple[np.ndarray | None, np.ndarray | None, float]:
        """The exact explorer's diagonal metric, chain covariance and averaged step size."""
        ...

    def surrogate_installed(self) -> None:
        """Called each time a new surrogate is installed (values cached for the old one go)."""
        ...

    def chains_sharing(self) -> int:
        """How many chains draw with this warm-up's surrogate (a population's, else one)."""
        ...


class SurrogateWarmup:
    """One chain's warm-up: the record, the surrogate, its kernel, and when each changes.

    Parameters
    ----------
    settings : WarmupSettings
    tune : int, optional
        The chain's tuning length (``None`` on PyMC 5, which does not tell the step).
    chains : int
        Chains that share the exploration (pooled chains with ``share_exploration``): each
        explores ``1 / chains`` of one chain's length.
    draws : int, optional
        The chain's kept draws (``None`` on PyMC 5, which does not tell the step), for the
        costs still ahead.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
       (Exploration, then a surrogate fitted to it; here the fit is refitted while tuning.)
    .. [2] Hoffman, M. D., & Gelman, A. (2014). The No-U-Turn Sampler. Journal of Machine
       Learning Research, 15, 1593-1623 (the dual averaging of the step size).
    """

    def __init__(
        self, settings: WarmupSettings, tune: int | None, chains: int = 1, draws: int | None = None
    ) -> None:
        self.settings = settings
        self.draws = draws
        self.economy = Economy(weighs=settings.weighs_costs)
        self.plan = LearningPlan(settings.schedule, settings.learns, self.economy, settings.name)
        self.phase = Phase.EXPLORATION
        self.record = self._new_record()
        self.surrogate = None
        self.choice: TrajectoryChoice | None = None
        self.kernel: SurrogateKernel | None = None
        self.adaptation = None
        self.explored_region: ExploredRegion | None = None
        self.laplace = None
        self.start = StartRule(
            settings.schedule,
            settings.exploration_steps,
            settings.start_error,
            tune,
            settings.dim,
            int(chains),
            settings.name,
        )
        self.fitted_rows = (0, 0)
        self.held_out: tuple[np.ndarray, np.ndarray] | None = None
        self.collapse = CollapseWatch()
        self.setup_seconds = 0.0
        self.alone = AloneTuning(settings.tunes_on_surrogate, settings.name)
        self.standing_wall = -np.inf
        """The highest wall a safety-net draw crossed since the last fit (nats; tuning only)."""

    def _new_record(self) -> TrainingBuffer:
        return TrainingBuffer(self.settings.dim, with_gradients=not self.settings.values_only)

    # ----------------------------------------------------------------- schedule
    @property
    def tune(self) -> int | None:
        """The chain's tuning length (``None`` on PyMC 5); the start rule's, held once."""
        return self.start.tune

    def tuning_draws_left(self, iteration: int) -> int | None:
        """Tuning draws still to come (``None`` on PyMC 5)."""
        return None if self.tune is None else self.tune - iteration

    def draws_left(self, iteration: int) -> int:
        """Tuning and kept draws still to come (``pm.sample``'s defaults where not told)."""
        tune = ASSUMED_TUNE if self.tune is None else self.tune
        draws = ASSUMED_TUNE if self.draws is None else self.draws
        return max(tune - iteration, 0) + draws

    @property
    def wants_gradients(self) -> bool:
        """Whether a tuning proposal's exact gradient is learned from (ask the model for it)."""
        return self.plan.learning and not self.settings.values_only

    def bounded_step_size(self, tune: bool) -> float:
        """The surrogate's adapted step size (last iterate while tuning, else the average).

        Within a decade of the simulated choice. Dual averaging itself is not bounded: where
        the exact test kept rejecting, its average sank to 1e-42 (posteriordb ``kilpisjarvi``),
        and a refit that started its step-size search there chose trajectories that did not
        move.
        """
        return self._bounded(float(self.adaptation.current(tune)))

    def _bounded(self, step_size: float) -> float:
        """``step_size`` within a decade of the chosen one (as it is before the first choice)."""
        if self.choice is None:
            return float(step_size)
        chosen = self.choice.best.step_size
        return float(np.clip(step_size, 0.1 * chosen, 10.0 * chosen))

    # ----------------------------------------------------------------- fits
    def fit_if_due(self, iteration: int, rng, host: WarmupHost) -> None:
        """The first fit at the end of the exploration, or a refit when the plan says.

        The :class:`~pymc_rnshmc.step_methods.learning_plan.LearningPlan` stops learning as soon
        as the next refit could not come in time or would not pay: the exact gradients of the
        learned proposals would teach nothing.
        """
        if self.phase == Phase.EXPLORATION:
            if iteration >= self.start.exploration_length():
                self.fit(iteration, rng, host, end_of_tuning=False)
            return
        tuning_left, draws_left = self.tuning_draws_left(iteration), self.draws_left(iteration)
        if self.plan.refit_due(len(self.record), tuning_left, draws_left, host.chains_sharing()):
            self.refit(iteration, rng, host)

    def fit(self, iteration: int, rng, host: WarmupHost, end_of_tuning: bool) -> None:
        """Fit, choose the dynamics and start the surrogate phase; or postpone, or fall back."""
        clock = time.perf_counter()
        try:
            with single_blas_thread():
                self._set_up(iteration, rng, host, end_of_tuning, clock)
        finally:
            spent = time.perf_counter() - clock
            self.setup_seconds += spent
            self.economy.fit_took(self.fitted_rows[1] - self.fitted_rows[0], spent, refit=False)

    def _set_up(
        self, iteration: int, rng, host: WarmupHost, end_of_tuning: bool, started: float
    ) -> None:
        """The first fit, its trajectory choice and the surrogate's start; or why not."""
        name, exact = self.settings.name, self.settings.exact_sampler
        positions, potentials, gradients = self.training_window()
        needed = self.settings.schedule.minimum_points(positions.shape[1])
        if positions.shape[0] < needed:
            when = "tuning ended" if end_of_tuning else "the end of exploration"
            self._postpone_or_fall_back(
                iteration,
                end_of_tuning,
                f"{name} collected {positions.shape[0]} exact draws for its surrogate before "
                f"{when}, but needs at least {needed} in {positions.shape[1]} dimensions. "
                f"Sampling continues with {exact}. Increase `tune` (or `exploration_steps`).",
            )
            return
        try:
            fitted = self._fit_in_time(iteration, host, (positions, potentials, gradients), rng)
        except FIT_ERRORS as err:
            self._postpone_or_fall_back(
                iteration,
                end_of_tuning,
                f"{name} could not fit its surrogate ({err}). Sampling continues with {exact}, "
                "which is correct but gets no speed-up.",
            )
            return
        if fitted is None:
            return
        surrogate, gradients = fitted
        if self.start.postpones(held_out_error(surrogate), iteration, end_of_tuning):
            return
        error = weighed_error(surrogate, self.settings.values_only)
        if end_of_tuning and unchecked_fit_too_poor(error):
            self._fall_back_to_exact(
                f"Tuning ended before {name} finished exploring (draw {iteration} of "
                f"{self.start.exploration_length()}), and the surrogate it fitted then has a "
                f"held-out gradient error of {100 * error:.0f} %: too poor to draw with, with no "
                f"tuning left to check it. Sampling continues with {exact}. Increase `tune`."
            )
            return
        try:
            choice = self._dynamics(
                surrogate,
                positions,
                gradients,
                rng,
                host,
                (started, iteration, error),
                end_of_tuning,
            )
        except FIT_ERRORS as err:
            self._fall_back_to_exact(
                f"{name} could not set up its surrogate dynamics ({err}). Sampling continues "
                f"with {exact}."
            )
            return
        tuning_left = None if end_of_tuning else self.tuning_draws_left(iteration)
        warn_if_unchecked(self.settings.name, surrogate, positions.shape[0], tuning_left)
        self._start(surrogate, choice, positions, gradients, iteration, host, end_of_tuning)
        host.surrogate_installed()

    def _fit_in_time(self, iteration: int, host: WarmupHost, window: tuple, rng) -> tuple | None:
        """The first fit, ``(surrogate, gradients)``, within the economy's fit limit.

        ``None`` if it ran out (:meth:`~pymc_rnshmc.step_methods.economy.Economy.fit_limit`):
        exact NUTS then continues for good, and says why in one log line.
        """
        draws_left = self.draws_left(iteration) * host.chains_sharing()
        limit = self.economy.fit_limit(draws_left)
        try:
            return fit_window(host, window, self.laplace, rng, limit)
        except EvaluationTimeout:
            self.phase = Phase.EXACT
            self.plan.stop()
            log_fit_stopped(self.settings, window[0].shape, limit, draws_left)
            return None

    def refit(self, iteration: int, rng, host: WarmupHost) -> None:
        """Refit on the grown record and re-choose the dynamics (a shorter scan of lengths).

        The refit chooses its width, penalty and weight scale afresh. Reusing the last fit's
        choices is cheaper but worse on the elliptic PDE (d = 20, 30 x 30): capping the width
        near the last fit's left the surrogate at 50 units and 13 % held-out gradient error
        where 1575 units reach 8.7 %, and keeping the first fit's weight scale (1, chosen on 38
        points) gave 11 % at 600 points against 6.7 % with the scale searched (0.1), and a
        min bulk / tail ESS of 698 / 364 against 1147 / 543. A failed refit keeps the
        surrogate and stops learning.
        """
        clock = time.perf_counter()
        positions, potentials, gradients = self.training_window()
        try:
            with single_blas_thread():
                surrogate, gradients = fit_window(
                    host, (positions, potentials, gradients), self.laplace, rng
                )
                error = weighed_error(surrogate, self.settings.values_only)
                choice = self._dynamics(
                    surrogate,
                    positions,
                    gradients,
                    rng,
                    host,
                    (clock, iteration, error),
                    refit=True,
                )
        except FIT_ERRORS as err:
            self.plan.stop()
            _log.debug("%s keeps its surrogate: the refit failed (%s).", self.settings.name, err)
            return
        finally:
            self.setup_seconds += time.perf_counter() - clock
        self._start(surrogate, choice, positions, gradients, iteration, host, False)
        self.economy.fit_took(positions.shape[0], time.perf_counter() - clock, refit=True)
        host.surrogate_installed()

    def training_window(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Positions, potentials and gradients (``None`` without) of the draws to train on."""
        n_explored = len(self.record)
        window = self.settings.training_window or self.settings.schedule.training_size(n_explored)
        first = max(0, n_explored - window)
        return self.record.window(first)

    def held_out_points(self) -> tuple[np.ndarray, np.ndarray]:
        """Recorded tuning points the current surrogate was not fitted to, with their exact ``U``.

        The exploration draws before its training window and the proposals learned after its
        fit; kept when tuning ends. Empty before the first fit.
        """
        if self.held_out is not None:
            return self.held_out
        positions, potentials, _ = self.record.window(0)
        if self.surrogate is None:
            return positions[:0], potentials[:0]
        first, last = self.fitted_rows
        outside = np.ones(len(positions), dtype=bool)
        outside[first:last] = False
        return positions[outside], potentials[outside]

    def _postpone_or_fall_back(self, iteration: int, end_of_tuning: bool, message: str) -> None:
        if not end_of_tuning and self.start.postpone(iteration):
            return
        self._fall_back_to_exact(message)

    def _fall_back_to_exact(self, message: str) -> None:
        self.phase = Phase.EXACT
        warnings.warn(message, SurrogateWarning, stacklevel=4)

    def _dynamics(
        self,
        surrogate,
        positions: np.ndarray,
        gradients: np.ndarray,
        rng,
        host: WarmupHost,
        fit: tuple[float, int, float],
        end_of_tuning: bool = False,
        refit: bool = False,
    ) -> TrajectoryChoice:
        """The fitted ``surrogate``'s trajectories, chosen within what is left of the setup budget.

        ``fit``: when it began (``time.perf_counter``), at which iteration, and its weighed
        error. The choice starts from the surrogate's adapted step size on a refit, else from
        the explorer's (:func:`~pymc_rnshmc.step_methods.fit_setup.choose_dynamics`); the setup
        budget is the chain's, less what its earlier fits took, and none for a poor fit awaiting
        the verdict (:func:`~pymc_rnshmc.step_methods.fit_setup.setup_deadline`).
        """
        started, iteration, error = fit
        tuning_left = 0 if end_of_tuning else self.tuning_draws_left(iteration)
        draws_left = self.draws_left(iteration) * host.chains_sharing()
        out_of_time = setup_deadline(
            self.economy, started, error, tuning_left, draws_left, self.setup_seconds
        )
        explorer_metric = host.explorer_metric()
        if self.phase == Phase.SURROGATE:
            first_guess = self.bounded_step_size(tune=False)
        else:
            first_guess = self._bounded(explorer_metric[2])
        previous = self.choice if refit else None
        return choose_dynamics(
            self.settings,
            surrogate,
            positions,
            gradients,
            explorer_metric,
            first_guess,
            rng,
            previous,
            out_of_time,
        )

    def _start(
        self,
        surrogate,
        choice: TrajectoryChoice,
        positions: np.ndarray,
        gradients: np.ndarray,
        iteration: int,
        host: WarmupHost,
        end_of_tuning: bool,
    ) -> None:
        """Install the surrogate, its kernel and a fresh step-size adaptation."""
        settings, best = self.settings, choice.best
        first = self.surrogate is None  # refits log at DEBUG
        self.surrogate = surrogate
        # the training window is the record's last rows, and the record has not grown since
        self.fitted_rows = (len(self.record) - positions.shape[0], len(self.record))
        self.choice = choice
        self.explored_region = ExploredRegion.around(positions)
        self.standing_wall = -np.inf
        # Dual averaging explores around ten times its initial step; start it at a tenth so it
        # centres on the simulated step size, unless no tuning is left to adapt.
        initial = best.step_size if end_of_tuning else 0.1 * best.step_size
        self.collapse.restart()
        self.adaptation = host.new_adaptation(initial, settings.surrogate_target_accept)
        self.phase = Phase.SURROGATE
        self.economy.surrogate_started(iteration)
        self.alone.new_surrogate()
        self.kernel = new_kernel(
            settings.dynamics,
            surrogate,
            best,
            positions,
            gradients,
            host.correction(),
            max_steps=settings.max_steps,
            max_depth=settings.max_depth,
            max_energy_change=settings.max_energy_change,
            values_only=settings.values_only,
        )
        self.plan.after_fit(
            len(self.record),
            held_out_error(surrogate),
            self.tuning_draws_left(iteration),
            end_of_tuning,
            host.chains_sharing(),
        )
        log_fit(settings, surrogate, choice, gradients.shape[0], first)
        if end_of_tuning:
            warnings.warn(
                f"Tuning ended before {settings.name} finished exploring (draw {iteration} of "
                f"{self.start.exploration_length()}), so the surrogate dynamics use the step size "
                "chosen by simulation on the surrogate, without re-adaptation on the exact "
                "acceptance. Increase `tune` or lower `exploration_steps` for better acceptance.",
                SurrogateWarning,
                stacklevel=5,
            )

    # ----------------------------------------------------------------- while sampling
    def adapt(self, accept: float) -> None:
        """Feed one tuning draw's acceptance to the surrogate's step-size adaptation."""
        self.adaptation.update(accept, True)

    def tuning_kernel(self) -> SurrogateKernel:
        """The kernel with the step size the adaptation proposes for the next tuning draw."""
        return self.kernel._replace(step_size=self.bounded_step_size(True))

    def replace_surrogate(self, surrogate) -> None:
        """Drive the kernel by another surrogate (ARNSHMC's refreshes), all else unchanged.

        A refresh learned from every exact evaluation so far, a wall's too: no wall stands.
        """
        self.surrogate = surrogate
        self.kernel = self.kernel._replace(surrogate=surrogate)
        self.standing_wall = -np.inf

    def learn_from_exact(self, draw, record: bool) -> None:
        """Learn what an exact draw found: a Laplace approximation, and its evaluations.

        The approximation its mode search found (with the search's seconds), and its
        evaluations for the record if ``record``. The one write of an exact draw into the
        warm-up, so that pooled chains that draw out of step can make these writes in their
        lockstep order (:mod:`~pymc_rnshmc.step_methods.draw_stream`).
        """
        if draw.laplace is not None:
            self.laplace = draw.laplace
            self.setup_seconds += draw.setup_seconds
        if record and draw.evaluated is not None:
            self.record.append(*draw.evaluated)

    def learn_from(self, result: DrawResult) -> None:
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
        if not self.plan.learning or evaluation is None or not evaluation.exact:
            return
        if self.settings.values_only:
            limit = self.record.lowest_potential + LEARNING_ENERGY_LIMIT + self.settings.dim
            if -evaluation.logp < limit:
                self.record.append(evaluation.position, -evaluation.logp)
            return
        if result.divergence is not None or not result.energy_change < LEARNING_ENERGY_LIMIT:
            return
        gradient = evaluation.potential_gradient
        if gradient is not None and np.all(np.isfinite(gradient)):
            self.record.append(evaluation.position, -evaluation.logp, gradient)

    def watch_for_collapse(self, accept: float, iteration: int) -> str | None:
        """``"resume"`` or ``"exact"`` if the surrogate's exact acceptance has collapsed.

        A poor first fit can make every proposal implausible, so nothing is learned and no refit
        comes (sblrc-blr: a fit with 29 % held-out error, exact acceptance 0 for good). If the
        :class:`~pymc_rnshmc.step_methods.collapse_watch.CollapseWatch` reports a window of
        tuning draws whose mean exact acceptance collapsed, the exact explorer resumes until the
        schedule's next start (``"resume"``); too late in tuning for another start, it goes on
        to the end (``"exact"``, ``Phase.EXACT``). Only warm-ups that learn watch: a refit of
        another surrogate (a grid) would not learn anything new.
        """
        if not self.settings.learns:
            return None
        mean_accept = self.collapse.record(accept)
        if mean_accept is None:
            return None
        self.plan.restart()
        name = self.settings.name
        restart = self.start.restart(iteration)
        if restart is None:
            self._fall_back_to_exact(
                f"{name}'s surrogate proposals were almost all rejected late in tuning (mean "
                f"exact acceptance {mean_accept:.2f} over {COLLAPSE_WINDOW} draws), too late to "
                f"fit another. Sampling continues with {self.settings.exact_sampler}. Increase "
                "`tune`."
            )
            return "exact"
        self.phase = Phase.EXPLORATION
        _log.debug(
            "%s resumes %s until draw %d: its surrogate's exact acceptance was %.2f.",
            name,
            self.settings.exact_sampler,
            restart,
            mean_accept,
        )
        return "resume"

    def wall_crossed(self, wall: float) -> bool:
        """A safety-net draw crossed a wall of ``wall`` nats (``WALL_NATS`` or more) while tuning.

        A refit that includes its point comes at the next draw, within the plan's bounds
        (:meth:`LearningPlan.refit_behind_wall`; :meth:`fit_if_due` drops it when too little
        tuning is left). A wall met where no such refit can come (a warm-up that does not refit
        while tuning, or whose refits for walls are spent) is one the surrogate cannot learn,
        and so is one no fit followed before tuning ends (:meth:`stop_learning`): its kept
        draws would reach the region behind it about ``exp(-wall)`` times as often as they
        should (:mod:`~pymc_rnshmc.step_methods.wall_watch`), so the chain continues with exact
        NUTS for good. Only in the surrogate phase: pooled chains may report a wall after
        another chain's verdict or collapse changed it. Returns whether exact NUTS takes over now.
        """
        if self.phase != Phase.SURROGATE:
            return False
        self.standing_wall = max(self.standing_wall, wall)
        if self.plan.wall_refits_spent:
            why = "its refits for walls were spent" if self.plan.learns else "it does not refit"
            self._give_up_behind_wall(why)
            return True
        self.plan.refit_behind_wall(len(self.record), self.fitted_rows[1])
        return False

    def _give_up_behind_wall(self, why: str) -> None:
        """Exact draws for good: a wall stands that the surrogate did not learn (one log line)."""
        self.phase = Phase.EXACT
        self.plan.stop()
        _log.info(
            "%s continues with %s: a safety-net draw crossed a wall of %.0f nats, where the "
            "surrogate's trajectories would go about exp(-%.0f) times as often as they should, "
            "and %s.",
            self.settings.name,
            self.settings.exact_sampler,
            self.standing_wall,
            self.standing_wall,
            why,
        )

    @property
    def verdict_due(self) -> bool:
        """Whether the first surrogate has made enough tuning draws to judge what it pays."""
        return self.phase == Phase.SURROGATE and self.economy.verdict_due

    def judge_sampling(self, draws: np.ndarray, new_metric: bool = False) -> Verdict:
        """Continue with exact NUTS for good if the surrogate does not pay (one log line).

        ``draws``: the chain's positions so far ``(n, d)``, judged by the economy with the
        surrogate's held-out gradient error
        (:meth:`~pymc_rnshmc.step_methods.economy.Economy.judge`); ``new_metric``: whether
        exact NUTS would continue with a metric from these draws. Once a chain.
        """
        verdict = self.economy.judge(
            draws, weighed_error(self.surrogate, self.settings.values_only), new_metric
        )
        if verdict.kept_poor_fit:  # its trajectories were chosen without a scan
            self.plan.refit_now(len(self.record))
        if not verdict.surrogate_pays:
            self.phase = Phase.EXACT
            self.plan.stop()
            _log.info(
                "%s continues with %s: its surrogate does not pay on this model (%s).",
                self.settings.name,
                self.settings.exact_sampler,
                verdict.reason(self.settings.exact_sampler),
            )
        return verdict

    # ----------------------------------------------------------------- tuning on the surrogate
    def tunes_alone(self, iteration: int) -> bool:
        """Whether tuning draw ``iteration`` falls in the stretch tuned on the surrogate alone.

        Once learning has ended (no refit due or planned) and the economy's verdict is in, with
        a surrogate defined everywhere whose force is its gradient, while the stretch is open
        (:meth:`~pymc_rnshmc.step_methods.tuning_alone.AloneTuning.open_at`).
        """
        if self.phase != Phase.SURROGATE or not self.alone.open_at(iteration, self.tune):
            return False
        if self.plan.learning:  # a wall's refit too
            return False
        if self.economy.weighs and self.economy.verdict is None:
            return False
        capabilities = Capabilities.of(self.surrogate)
        return capabilities.defined_everywhere and capabilities.gradient_field

    def moves_alone(self, iteration: int) -> bool:
        """Whether tuning draw ``iteration`` moves on the surrogate alone (no exact evaluation)."""
        return self.tunes_alone(iteration) and self.alone.moves_alone(iteration)

    def stop_learning(self) -> None:
        """End of tuning in the surrogate phase: no more refits, and the record can go.

        The points the surrogate was not fitted to are kept for ``plot_surrogate``. A wall no
        fit followed leaves the kept draws to exact NUTS (:meth:`wall_crossed`).
        """
        if self.standing_wall >= WALL_NATS:
            self._give_up_behind_wall("no refit followed before tuning ended")
        self.plan.stop()
        self.held_out = self.held_out_points()
        self.record = self._new_record()

    def freeze(self) -> None:
        """The kernel the kept draws share: today's, with the averaged step size."""
        if self.kernel is not None:
            self.kernel = self.kernel._replace(step_size=self.bounded_step_size(False))

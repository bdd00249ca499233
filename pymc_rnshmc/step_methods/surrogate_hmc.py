"""SurrogateHMC: the PyMC step that every surrogate sampler of this package configures.

The step is PyMC's side of a chain and owns no sampling logic: the step protocol (``vars``,
stats, ``sampling_state``, ``setup_chain``/``set_rng``, ``stop_tuning``, ``competence``), the
progress bar, the constructor's checks, and the configuration's hooks. The parts sample:

- the **chain** (:class:`~pymc_rnshmc.step_methods.chain.SurrogateChain`, one per chain): each
  draw, exact, safety-net or surrogate, as the phase says;
- its **explorer** (:mod:`~pymc_rnshmc.step_methods.explorers`): PyMC's NUTS, held as a part,
  or a random walk for a model without gradients; it explores, makes the safety net's draws,
  and takes over if no surrogate can be used;
- its **warm-up** (:class:`~pymc_rnshmc.step_methods.warmup.SurrogateWarmup`): records the
  exact evaluations, fits, chooses the dynamics, learns and refits, freezes the kernel when
  tuning ends, and decides every phase change;
- the **kernel** (:class:`~pymc_rnshmc.hmc.kernel.SurrogateKernel`, numpy): one surrogate draw,
  corrected by one exact ``logp``;
- the **exact model** (:class:`~pymc_rnshmc.step_methods.exact_model.ExactModel`): the only
  door to PyMC's compiled functions, with the failing-model policy.

The hot path of a draw after tuning: ``step`` -> ``astep`` -> ``SurrogateChain.draw`` ->
``begin`` (:func:`~pymc_rnshmc.hmc.kernel.kernel_propose` on the frozen kernel: leapfrog or
NUTS on the surrogate) -> ``finish`` (:func:`~pymc_rnshmc.hmc.kernel.kernel_finish`: one exact
``logp`` for the correction) -> ``surrogate_draw_stats``.

Configurations change behaviour through the constructor's parts (the surrogate, the schedule,
``start_error``) and its hooks (:class:`~pymc_rnshmc.step_methods.chain.ChainHooks`):
``_new_surrogate``, ``_correction``, ``_after_fit``, ``_before_draw``, ``_evaluate_end``
(which asks ``_wants_end_gradient``) and ``_after_draw``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from pymc.blocking import RaveledVars
from pymc.model import modelcontext
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.state import WithSamplingState, dataclass_state
from pymc.util import get_random_generator
from pymc.vartypes import continuous_types

from pymc_rnshmc.hmc.corrections import Correction, Evaluation
from pymc_rnshmc.hmc.kernel import SurrogateKernel
from pymc_rnshmc.hmc.trajectory_tuning import TrajectoryChoice
from pymc_rnshmc.hmc.transition import DrawResult
from pymc_rnshmc.step_methods.chain import SurrogateChain
from pymc_rnshmc.step_methods.coarse_model import coarse_corrected
from pymc_rnshmc.step_methods.evaluators import Evaluator, InProcessEvaluator
from pymc_rnshmc.step_methods.exact_model import ExactModel
from pymc_rnshmc.step_methods.explorers import new_explorer
from pymc_rnshmc.step_methods.model_failures import check_reject_errors
from pymc_rnshmc.step_methods.options import (
    check_nuts_options,
    check_options,
)
from pymc_rnshmc.step_methods.reporting import (
    SURROGATE_HMC_STATS,
    progressbar_config,
    progressbar_update_functions,
)
from pymc_rnshmc.step_methods.safety_net import SafetyNet
from pymc_rnshmc.step_methods.schedule import RNSHMC_SCHEDULE, ExplorationSchedule, Phase
from pymc_rnshmc.step_methods.variables import continuous_value_vars
from pymc_rnshmc.step_methods.warmup import SurrogateWarmup

__all__ = ["SurrogateHMC", "SurrogateHMCState"]


@dataclass_state
class SurrogateHMCState(StepMethodState):
    """A chain's state: the step's flags and its chain's (PyMC copies it)."""

    tune: bool
    _tune_steps: int | None
    _draws: int | None
    _chain: Any


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
    coarse : pymc.Model or callable, optional
        The user's cheaper version of the model; ``surrogate`` (a random network) then learns
        its error (:class:`~pymc_rnshmc.surrogates.coarse.CoarseCorrectedSurrogate`) and the
        first fit comes without a share of tuning (``schedule.with_coarse_model()``).
    schedule : ExplorationSchedule
        When the exploration ends and what the first fit uses.
    start_error : float, optional
        Start the surrogate dynamics only with a fit whose held-out gradient error is below
        this, postponing while the schedule allows; ``None`` starts with any fit (always, for
        a model without gradients).
    refit_during_tuning : bool
        Learn from the tuning draws and refit, if the schedule learns during tuning.
    weigh_costs, tune_on_surrogate, explore_from_mode : bool
        As for :class:`~pymc_rnshmc.RNSHMC`.
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
    _refuses_coarse: str | None = None
    """Why this sampler cannot use a coarse model (``coarse=`` is then refused), or ``None``."""
    _state_class = SurrogateHMCState
    batch_evaluator: Evaluator = InProcessEvaluator()
    """Where batches of exact evaluations made for a fit run (SparseGridHMC's grid nodes): in
    this process; pooled chains set their evaluator
    (:mod:`~pymc_rnshmc.step_methods.evaluators`)."""

    def __init__(
        self,
        vars=None,
        *,
        surrogate,
        coarse=None,
        schedule: ExplorationSchedule = RNSHMC_SCHEDULE,
        exploration_steps: int | None = None,
        training_window: int | None = None,
        path_length: float | None = None,
        max_steps: int = 1024,
        target_accept: float = 0.8,
        surrogate_target_accept: float | None = None,
        start_error: float | None = None,
        refit_during_tuning: bool = True,
        weigh_costs: bool = True,
        tune_on_surrogate: bool = True,
        explore_from_mode: bool = True,
        dynamics: str = "hmc",
        safety_net: float | None = None,
        reject_errors: type[Exception] | tuple[type[Exception], ...] = (),
        time_limit: float | None = None,
        model=None,
        **kwargs,
    ) -> None:
        model = modelcontext(model)
        name = type(self).__name__
        if coarse is not None and self._refuses_coarse:
            raise TypeError(
                f"{name} does not take `coarse`: {self._refuses_coarse}. Use "
                "RNSHMC(coarse=...) or ARNSHMC(coarse=...)."
            )
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
            weigh_costs=weigh_costs,
            tune_on_surrogate=tune_on_surrogate,
            explore_from_mode=explore_from_mode,
        )
        check_nuts_options(name, kwargs)
        vars = continuous_value_vars(vars, model, name)
        self.exact_model = ExactModel.compile(
            model,
            vars,
            kwargs,
            reject_errors=check_reject_errors(reject_errors),
            time_limit=self.options.time_limit,
        )
        if coarse is not None:
            surrogate = coarse_corrected(
                surrogate,
                coarse,
                vars,
                kwargs.get("initial_point") or model.initial_point(),
                self.exact_model.dtype,
                name,
            )
        self._surrogate_template = surrogate
        function = self.exact_model.step_function
        super().__init__(
            vars, function._extra_vars_shared, kwargs.get("blocked", True), kwargs.get("rng")
        )
        if coarse is not None:
            schedule = schedule.with_coarse_model()
        self.schedule = schedule.without_gradients() if self.gradient_free else schedule
        if self.gradient_free:
            self._check_gradient_free(surrogate)
        self.safety_net = SafetyNet.default(
            safety_net, gradient_free=self.gradient_free, dim=self.exact_model.size
        )
        nuts_options = {"model": model, "target_accept": target_accept, **kwargs}
        self._nuts_options = nuts_options
        self._explorer = new_explorer(
            name,
            self.exact_model,
            vars,
            function,
            nuts_options,
            from_mode=self.options.explore_from_mode,
        )
        self.rng = self._explorer.use_rng(self.rng)
        self._warmup_settings = self.options.warmup_settings(
            name,
            self.schedule,
            dim=self.exact_model.size,
            values_only=self.gradient_free,
            exact_sampler=self._explorer.description,
            nuts_options=nuts_options,
        )
        self._tune_steps = self._draws = None
        self._start_chain()

    def _check_gradient_free(self, surrogate) -> None:
        """Raise if this configuration cannot sample a model without gradients."""

    # ----------------------------------------------------------------- what the step is
    @property
    def gradient_free(self) -> bool:
        """Whether the model's logp has no gradient (explored by a random walk; values only)."""
        return not self.exact_model.has_gradient

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
    def _warmup(self) -> SurrogateWarmup:
        """The chain's warm-up (for configurations and tests)."""
        return self._chain.warmup

    @property
    def phase(self) -> Phase:
        """What the chain is doing: exploring, sampling with its surrogate, or exact for good."""
        return self._chain.warmup.phase

    @property
    def surrogate(self):
        """The chain's fitted surrogate (``None`` before its first fit)."""
        return self._chain.warmup.surrogate

    @property
    def trajectory_choice(self) -> TrajectoryChoice | None:
        """How the surrogate dynamics' metric, step size and path length were chosen."""
        return self._chain.warmup.choice

    @property
    def setup_seconds(self) -> float:
        """Seconds the chain spent fitting and choosing (and on a gradient-free mode search)."""
        return self._chain.warmup.setup_seconds

    @property
    def kernel(self) -> SurrogateKernel | None:
        """The chain's surrogate kernel (``None`` before its first fit); frozen after tuning.

        A value: :func:`~pymc_rnshmc.hmc.kernel.kernel_step` applies it with the exact model
        (``step.exact_model``) outside ``pm.sample`` too (``docs/architecture.md``). After
        several chains it is the last one's; with ``cores > 1`` the chains run on copies of the
        step in other processes, and it stays ``None`` here.
        """
        return self._chain.warmup.kernel

    @property
    def path_length(self) -> float | None:
        """Integration time of the surrogate trajectories (``None`` until chosen)."""
        kernel = self._chain.warmup.kernel
        return self.options.path_length if kernel is None else kernel.proposal.path_length

    def held_out_points(self) -> tuple[np.ndarray, np.ndarray]:
        """Recorded tuning points the current surrogate was not fitted to, with their exact ``U``.

        The exploration draws before its training window and the proposals learned after its
        fit; kept when tuning ends (:func:`~pymc_rnshmc.plot_surrogate` shows the surrogate
        against them). Empty before the first fit.
        """
        return self._chain.warmup.held_out_points()

    # ----------------------------------------------------------------- chain lifecycle
    def _start_chain(self) -> None:
        """Forget everything a previous chain learned or adapted: a step object is reusable."""
        self.tune = True
        self._chain = SurrogateChain(
            self._warmup_settings,
            self._tune_steps,
            self._explorer,
            self.exact_model,
            self.safety_net,
            self._explorer.dual_averaging,
            self._richer_surrogate,
            draws=self._draws,
        )

    def setup_chain(self, rng, tune: int, draws: int) -> None:  # PyMC >= 6
        self._tune_steps, self._draws = int(tune), int(draws)
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
        self._explorer = self._chain.explorer
        self._explorer.share_rng(self.rng)  # restored separately; a chain has one stream

    def reset_tuning(self, start=None) -> None:
        self._start_chain()

    def stop_tuning(self) -> None:
        self._chain.stop_tuning(self.rng, self)
        self.tune = False

    # ----------------------------------------------------------------- stepping
    def step(self, point):
        self.exact_model.set_extra_values(point)
        return super().step(point)

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        q_new, stats = self._chain.draw(q0, self.tune, self.rng, self)
        return q_new, [stats]

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
        return self.exact_model.evaluate(position, self._wants_end_gradient())

    def _wants_end_gradient(self) -> bool:
        """Whether a tuning draw's proposal is evaluated with its gradient (to learn from)."""
        return self.tune and self._chain.warmup.wants_gradients

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

    _progressbar_config = staticmethod(progressbar_config)
    _make_progressbar_update_functions = staticmethod(progressbar_update_functions)

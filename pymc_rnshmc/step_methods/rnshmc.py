"""RNSHMC: exact HMC whose trajectories follow a random network surrogate of the potential."""

from __future__ import annotations

import copy
import logging
import time
import warnings
from typing import Any

import numpy as np
from pymc.step_methods.compound import Competence
from pymc.step_methods.hmc.nuts import NUTS, NUTSState
from pymc.step_methods.state import dataclass_state
from pymc.step_methods.step_sizes import DualAverageAdaptation
from pymc.vartypes import continuous_types
from threadpoolctl import threadpool_limits

from pymc_rnshmc._checks import (
    check_positive_integer,
    check_positive_number,
    check_probability,
)
from pymc_rnshmc.exceptions import FIT_ERRORS, SurrogateFitError, SurrogateWarning
from pymc_rnshmc.step_methods.exact_logp import ExactLogp
from pymc_rnshmc.step_methods.reporting import (
    SURROGATE_HMC_STATS,
    nuts_stats_to_surrogate_stats,
    progressbar_config,
    progressbar_update,
)
from pymc_rnshmc.step_methods.surrogate_dynamics import SurrogateDynamicsMixin
from pymc_rnshmc.step_methods.trajectory_candidates import choose_trajectory, rows
from pymc_rnshmc.step_methods.variables import continuous_value_vars
from pymc_rnshmc.surrogates import PotentialSurrogate, RandomNetworkSurrogate
from pymc_rnshmc.surrogates.training import TrainingBuffer

__all__ = ["RNSHMC", "SurrogateWarning"]

_log = logging.getLogger("pymc.rnshmc")

EXPLORATION = "exploration"
SURROGATE = "surrogate"
EXACT = "exact"
DEFAULT_EXPLORATION_STEPS = 700
FORCE_BOUND_FACTOR = 1e3
"""A surrogate force component this many times larger than any exact one seen in training is
treated as a surrogate failure (like a non-finite one): the exact gradient is used there."""


@dataclass_state
class RNSHMCState(NUTSState):
    phase: str
    surrogate: Any
    path_length: float | None
    trajectory_choice: Any
    setup_seconds: float
    _metric: Any
    _training: TrainingBuffer
    _jump_lengths: list
    _tree_lengths: list
    _tune_steps: int | None
    _cache: Any
    _step_size_bounds: tuple
    _force_bound: Any
    _warned_exact_forces: bool


class RNSHMC(SurrogateDynamicsMixin, NUTS):
    r"""Random network surrogate Hamiltonian Monte Carlo.

    Tuning starts with PyMC's NUTS on the exact log density (with its step-size dual averaging
    and mass-matrix adaptation) and records every draw with its exact ``logp`` and gradient.
    Before tuning ends, a random network surrogate of the potential ``U = -logp`` is fitted to
    those values and gradients; the rest of tuning re-adapts the step size of HMC trajectories
    that follow the surrogate's gradient. After tuning, each draw draws a momentum, integrates
    the surrogate dynamics for a path length learned from NUTS (with jitter), evaluates the exact
    ``logp`` once at the end point and accepts with the exact Hamiltonian: zero exact gradients
    per draw, and the chain leaves the exact posterior invariant however good the surrogate is.

    Parameters
    ----------
    vars : list, optional
        Continuous variables to sample; default all continuous variables of the model.
    n_hidden : int, optional
        Hidden units of the random network; default from the number of training points
        (up to 2000).
    hidden_units : {"additive", "radial"}
        Node type of the hidden layer.
    activation : str
        Activation of additive nodes (``"softplus"``, ``"tanh"``, ``"logistic"``, ``"cosine"``).
    quadratic : bool
        Fit a quadratic base to the exact gradients and the network to the residual.
    penalty : float, optional
        Relative ridge penalty; default chosen on held-out training points.
    surrogate : PotentialSurrogate, optional
        A surrogate object to fit instead of the random network (overrides the options above).
    exploration_steps : int, optional
        Exact NUTS draws before the surrogate is fitted. Default: 70 % of ``tune`` on PyMC 6
        (which tells the step the tuning length), 700 on PyMC 5. If tuning ends first, the
        surrogate is fitted then and the NUTS step size is used unchanged.
    training_window : int, optional
        How many of the last exploration draws to train on; default the last 75 %.
    path_length : float, optional
        Integration time of the surrogate trajectories. Default: chosen, together with the
        metric (PyMC's adapted diagonal one, or a dense one from the exact gradients) and the
        step size, by simulating surrogate chains for integration times around NUTS's.
    max_steps : int
        Largest number of leapfrog steps in one surrogate trajectory.
    target_accept : float
        Target acceptance of the exploration NUTS, in (0, 1).
    surrogate_target_accept : float
        Target acceptance of the surrogate dynamics on the surrogate's own Hamiltonian (the
        integrator's share of rejections), in (0, 1). Surrogate steps are cheap next to the one
        exact ``logp`` of a draw, so it is higher than NUTS's: going from 0.9 to 0.95 raised the
        min bulk ESS per second of the draws by 10-30 % on the logistic regression and elliptic
        PDE benchmarks. The exact acceptance is lower by whatever the surrogate gets wrong,
        which no step size can fix.
    **kwargs
        Passed on to :class:`pymc.NUTS` (``max_treedepth``, ``scaling``, ``potential``, ...).

    Notes
    -----
    Sampler statistics (``idata.sample_stats``): ``accept``, ``accepted``, ``diverging``,
    ``energy``, ``energy_error``, ``n_steps``, ``step_size``, ``lp`` as in PyMC; ``tree_depth``
    (0 for surrogate draws); ``n_logp_evals`` and ``n_gradient_evals``, the exact model
    evaluations of the draw; ``used_surrogate``; and ``surrogate_error``, how much the
    surrogate misjudged the potential change of the proposal.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
    .. [2] Hoffman, M. D., & Gelman, A. (2014). The No-U-Turn sampler. JMLR, 15, 1593-1623.
    """

    name = "rnshmc"
    default_blocked = True
    _shortest_jump = 0.0
    _simulated_draws = 100
    stats_dtypes_shapes = SURROGATE_HMC_STATS
    _state_class = RNSHMCState

    def __init__(
        self,
        vars=None,
        *,
        n_hidden: int | None = None,
        hidden_units: str = "additive",
        activation: str = "softplus",
        quadratic: bool = True,
        penalty: float | None = None,
        surrogate: PotentialSurrogate | None = None,
        exploration_steps: int | None = None,
        training_window: int | None = None,
        path_length: float | None = None,
        max_steps: int = 1024,
        target_accept: float = 0.8,
        surrogate_target_accept: float = 0.95,
        model=None,
        **kwargs,
    ) -> None:
        from pymc.model import modelcontext

        model = modelcontext(model)
        check_probability("target_accept", target_accept)
        surrogate_target_accept = check_probability(
            "surrogate_target_accept", surrogate_target_accept
        )
        exploration_steps = check_positive_integer(
            "exploration_steps", exploration_steps, allow_none=True
        )
        training_window = check_positive_integer(
            "training_window", training_window, allow_none=True
        )
        path_length = check_positive_number("path_length", path_length, allow_none=True)
        max_steps = check_positive_integer("max_steps", max_steps)
        if surrogate is None:
            surrogate = RandomNetworkSurrogate(
                n_hidden=n_hidden,
                hidden_units=hidden_units,
                activation=activation,
                quadratic=quadratic,
                penalty=penalty,
            )
        elif isinstance(surrogate, type) or not isinstance(surrogate, PotentialSurrogate):
            raise TypeError(
                "surrogate must be an instance (not a class) providing fit(positions, "
                f"potentials, gradients, rng), potential(positions) and gradient(position); got "
                f"{surrogate!r}."
            )
        vars = continuous_value_vars(vars, model, type(self).__name__)
        super().__init__(vars, model=model, target_accept=target_accept, **kwargs)
        self._exact_logp = ExactLogp(model, self.vars, kwargs.get("initial_point"), self.dtype)
        self._surrogate_template = surrogate
        self.exploration_steps = exploration_steps
        self.training_window = training_window
        self.user_path_length = path_length
        self.max_steps = max_steps
        self.surrogate_target_accept = surrogate_target_accept
        self._tune_steps = None
        self._start_chain()

    @property
    def dtype(self) -> str:
        """Floating-point type of the sampled vector."""
        return self._logp_dlogp_func.dtype

    # ----------------------------------------------------------------- chain lifecycle
    def _start_chain(self) -> None:
        """Forget everything learned on a previous chain."""
        self.phase = EXPLORATION
        self.surrogate = None
        self.path_length = self.user_path_length
        self.trajectory_choice = None
        self.setup_seconds = 0.0
        self._metric = None
        self._training = TrainingBuffer(self._exact_logp.size)
        self._jump_lengths = []
        self._tree_lengths = []
        self._cache = None
        self._step_size_bounds = (0.0, np.inf)
        self._force_bound = None
        self._warned_exact_forces = False

    def setup_chain(self, rng, tune: int, draws: int) -> None:  # PyMC >= 6
        self._tune_steps = int(tune)
        super().setup_chain(rng, tune, draws)
        self._start_chain()

    def set_rng(self, rng) -> None:  # PyMC 5
        super().set_rng(rng)
        self._start_chain()

    def reset_tuning(self, start=None) -> None:
        super().reset_tuning(start)
        self._start_chain()

    def _exploration_length(self) -> int:
        if self.exploration_steps is not None:
            return self.exploration_steps
        if self._tune_steps is not None:
            return max(1, round(0.7 * self._tune_steps))
        return DEFAULT_EXPLORATION_STEPS

    def stop_tuning(self) -> None:
        if self.phase == EXPLORATION:
            self._fit_surrogate(end_of_tuning=True)
        super().stop_tuning()

    # ----------------------------------------------------------------- stepping
    def step(self, point):
        self._exact_logp.set_extra_values(point)
        return super().step(point)

    def astep(self, q0):
        exploring = self.phase == EXPLORATION and self.tune
        if exploring and self.iter_count >= self._exploration_length():
            self._fit_surrogate(end_of_tuning=False)
        if self.phase == SURROGATE:
            return self._surrogate_astep(q0)
        q_new, (stats,) = super().astep(q0)
        stats = nuts_stats_to_surrogate_stats(stats)
        self._cache = (q_new.data.copy(), stats["model_logp"], self._exact_logp.extra_values())
        return q_new, [stats]

    def _hamiltonian_step(self, start, p0, step_size):
        result = super()._hamiltonian_step(start, p0, step_size)
        if self.tune and self.phase == EXPLORATION:
            end = result.end
            self._training.append(end.q.data, -float(end.logp), -np.asarray(end.q_grad))
            self._jump_lengths.append(abs(int(end.index_in_trajectory)) * float(step_size))
            self._tree_lengths.append(float(result.stats["tree_size"]) * float(step_size))
        return result

    # ----------------------------------------------------------------- fitting
    def _fit_surrogate(self, end_of_tuning: bool) -> None:
        start = time.perf_counter()
        try:
            # One BLAS thread: a multithreaded BLAS rounds differently from one run to the
            # next, which would make the fit, and so the draws, depend on more than the seed.
            with threadpool_limits(limits=1, user_api="blas"):
                self._set_up_surrogate(end_of_tuning)
        finally:
            self.setup_seconds = time.perf_counter() - start

    def _training_window(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """Index of the first training draw, then positions, potentials and gradients from it."""
        n_explored = len(self._training)
        window = self.training_window or max(1, round(0.75 * n_explored))
        first = max(0, n_explored - window)
        return (first, *self._training.window(first))

    def _set_up_surrogate(self, end_of_tuning: bool) -> None:
        n_explored = len(self._training)
        first, positions, potentials, gradients = self._training_window()
        dim = positions.shape[1]
        needed = self._minimum_training_points(dim)
        if positions.shape[0] < needed:
            if not end_of_tuning and self._postpone_start():
                return
            self.phase = EXACT
            warnings.warn(
                f"{type(self).__name__} collected {positions.shape[0]} exact draws for its "
                f"surrogate before "
                f"{'tuning ended' if end_of_tuning else 'the end of exploration'}, but needs at "
                f"least {needed} in {dim} dimensions. Sampling continues with exact NUTS. "
                "Increase `tune` (or `exploration_steps`).",
                SurrogateWarning,
                stacklevel=2,
            )
            return
        surrogate = self._new_surrogate()
        try:
            surrogate.fit(positions, potentials, gradients, rng=self.rng.spawn(1)[0])
            check = rows(self._simulation_surrogate(surrogate).gradient)(positions)
            failing = np.mean(~np.all(np.isfinite(check), axis=1))
            if failing > 0.5:  # isolated failures are handled by exact gradients there
                raise SurrogateFitError(
                    f"the fitted surrogate's gradient is not finite at {failing:.0%} of the "
                    "training points"
                )
        except FIT_ERRORS as err:
            if not end_of_tuning and self._postpone_start():
                return
            self.phase = EXACT
            warnings.warn(
                f"{type(self).__name__} could not fit its surrogate ({err}). Sampling continues "
                "with exact NUTS, which is correct but gets no speed-up.",
                SurrogateWarning,
                stacklevel=2,
            )
            return
        if not self._ready_to_start(surrogate, end_of_tuning):
            return
        nuts_step_size = float(self.step_adapt.current(False))
        try:
            choice = choose_trajectory(
                self._simulation_surrogate(surrogate),
                self.potential,
                positions,
                gradients,
                jumps=np.asarray(self._jump_lengths[first:]),
                tree_lengths=np.asarray(self._tree_lengths[first:]),
                step_size=nuts_step_size,
                target_accept=self.surrogate_target_accept,
                max_steps=self.max_steps,
                rng=self.rng.spawn(1)[0],
                path_length=self.user_path_length,
                shortest_jump=self._shortest_jump,
                simulated_draws=self._simulated_draws,
                extra_metrics=self._extra_metrics(surrogate),
            )
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as err:
            self.phase = EXACT
            warnings.warn(
                f"{type(self).__name__} could not set up its surrogate dynamics ({err}). "
                "Sampling continues with exact NUTS.",
                SurrogateWarning,
                stacklevel=2,
            )
            return
        self.surrogate = surrogate
        self.trajectory_choice = choice
        best = choice.best
        self._metric = best.metric
        largest = np.max(np.abs(gradients), axis=0)
        self._force_bound = FORCE_BOUND_FACTOR * np.maximum(
            largest, 1e-8 * float(np.max(largest)) + np.finfo(float).tiny
        )
        self.path_length = best.path_length
        self._step_size_bounds = (0.1 * best.step_size, 10.0 * best.step_size)
        k, t0, gamma = self.step_adapt._k, self.step_adapt._t0, self.step_adapt._gamma
        # Dual averaging explores around ten times its initial step; start it at a tenth so it
        # centres on the simulated step size, unless no tuning is left to adapt.
        initial = best.step_size if end_of_tuning else 0.1 * best.step_size
        self.step_adapt = DualAverageAdaptation(initial, self.surrogate_target_accept, gamma, k, t0)
        self.phase = SURROGATE
        _log.info(
            "%s fitted its surrogate on %d exact draws%s; trajectories: %s metric, "
            "step size %.3g, path length %.3g.",
            type(self).__name__,
            positions.shape[0],
            self._describe_fit(getattr(surrogate, "report", None)),
            best.metric.kind,
            best.step_size,
            best.path_length,
        )
        if end_of_tuning:
            warnings.warn(
                f"Tuning ended before {type(self).__name__} finished exploring "
                f"({n_explored} of {self._exploration_length()} draws), so the surrogate "
                "dynamics use the step size chosen by simulation on the surrogate, without "
                "re-adaptation on the exact acceptance. Increase `tune` or lower "
                "`exploration_steps` for better acceptance.",
                SurrogateWarning,
                stacklevel=2,
            )

    @staticmethod
    def _describe_fit(report) -> str:
        if report is None:
            return ""
        return (
            f" in {report.seconds:.2g} s ({report.n_hidden} hidden units, weight scale "
            f"{getattr(report, 'weight_scale', 1.0):g}, held-out gradient error "
            f"{report.gradient_error:.1%})"
        )

    @staticmethod
    def _extra_metrics(surrogate) -> tuple:
        """Candidate metrics the surrogate itself suggests."""
        return ()

    @staticmethod
    def _simulation_surrogate(surrogate):
        """The surrogate as the trajectory simulations (which spend no exact evaluation) see it."""
        return surrogate

    def _new_surrogate(self):
        """An unfitted surrogate for this chain."""
        return copy.deepcopy(self._surrogate_template)

    @staticmethod
    def _minimum_training_points(dim: int) -> int:
        """Exploration draws the first fit needs: enough for a well-determined quadratic."""
        return 2 * dim + 2

    def _ready_to_start(self, surrogate, end_of_tuning: bool) -> bool:
        """Whether to start the surrogate dynamics with this fit (or keep exploring)."""
        return True

    def _postpone_start(self) -> bool:
        """Keep exploring after a failed first fit (``True``) instead of giving up on it."""
        return False

    # ----------------------------------------------------------------- PyMC protocol
    @staticmethod
    def competence(var, has_grad):
        """Compatible with continuous variables that have gradients (never preferred)."""
        if var.dtype in continuous_types and has_grad:
            return Competence.COMPATIBLE
        return Competence.INCOMPATIBLE

    @staticmethod
    def _progressbar_config(n_chains=1):
        return progressbar_config(n_chains)

    @staticmethod
    def _make_progressbar_update_functions():
        return (progressbar_update,)

"""ARNSHMC: a surrogate that starts early in tuning and keeps learning from every evaluation.

The surrogate's refreshes follow a vanishing schedule (diminishing adaptation).
"""

from __future__ import annotations

import logging
import numbers
import warnings
from typing import Any

import numpy as np
from pymc.step_methods.state import dataclass_state

from pymc_rnshmc._checks import check_flag, check_positive_number
from pymc_rnshmc.exceptions import SurrogateWarning
from pymc_rnshmc.hmc.transition import DrawResult
from pymc_rnshmc.step_methods.blas import single_blas_thread
from pymc_rnshmc.step_methods.reporting import SURROGATE_HMC_STATS
from pymc_rnshmc.step_methods.schedule import ARNSHMC_SCHEDULE, Phase
from pymc_rnshmc.step_methods.surrogate_hmc import SurrogateHMC, SurrogateHMCState
from pymc_rnshmc.step_methods.warmup import LEARNING_ENERGY_LIMIT
from pymc_rnshmc.surrogates.base import Capabilities
from pymc_rnshmc.surrogates.network.options import NETWORK_OPTIONS, network_surrogate

__all__ = ["ARNSHMC", "refresh_probability"]

_log = logging.getLogger("pymc.rnshmc")

ADAPTIVE_SURROGATE_HMC_STATS: dict[str, tuple[Any, list | None]] = {
    **SURROGATE_HMC_STATS,
    "surrogate_refreshes": (np.int64, []),
    "estimator_points": (np.int64, []),
}


def refresh_probability(draw: int, scale: float, exponent: float) -> float:
    """``a_t = min(1, (scale / t)^exponent)`` for the ``t``-th surrogate draw (``t >= 1``)."""
    return float(min(1.0, (scale / max(draw, 1)) ** exponent))


@dataclass_state
class ARNSHMCState(SurrogateHMCState):
    refreshes: int
    _learner: Any
    _surrogate_draws: int
    _warned_refresh: bool


class ARNSHMC(SurrogateHMC):
    r"""Adaptive random network surrogate Hamiltonian Monte Carlo: RNSHMC that keeps learning.

    Tuning runs as in :class:`~pymc_rnshmc.RNSHMC` (a short exact exploration, surrogate
    dynamics for the rest of tuning, refits as the evaluated proposals double). In addition, every
    exact evaluation the sampler makes once the surrogate dynamics run (the end point of each
    trajectory, with its gradient during tuning) feeds an online least-squares estimator of the
    network's output weights
    (:class:`~pymc_rnshmc.surrogates.network.online_network.OnlineNetworkLearner`, ``O(s^2)`` per
    point), and the output weights used for proposals are replaced by the estimator's current
    ones at the ``t``-th surrogate draw with probability ``a_t = min(1, (refresh_scale / t) ^
    refresh_exponent)``, during tuning and after it: the surrogate goes on adapting while the
    kept draws are made.

    Why the chain targets the posterior: for a fixed surrogate the draw is a
    Metropolis-Hastings kernel with a reversible, volume-preserving proposal and the exact
    Hamiltonian in the acceptance test, so each kernel leaves the posterior invariant whatever
    the surrogate is. After tuning the surrogate changes only at refreshes, decided before the
    trajectory and independently of it, and the probability that the kernel of draw ``t``
    differs from that of draw ``t - 1`` is at most ``a_t -> 0``: the adaptation diminishes
    (condition (b) of Roberts & Rosenthal 2007, Theorem 5). Given containment (their condition
    (a); it holds, for example, when the surrogate kernels are simultaneously uniformly
    ergodic), the theorem gives convergence of the chain's marginal distributions to the
    posterior; this is an asymptotic guarantee for an adaptive chain, not the invariance of a
    single Markov kernel. ``sum a_t = inf`` (``refresh_exponent <= 1``) keeps refreshing
    forever, so the surrogate goes on improving from every new point. With
    ``freeze_after_tuning=True`` the surrogate is fixed after tuning and the draws form an
    ordinary Markov chain that leaves the posterior invariant.

    Parameters
    ----------
    tuning_gradients : bool
        Evaluate the exact gradient with the end-point logp during tuning and learn from it
        (more information per evaluation; needed for the batch refits). After tuning no exact
        gradient is computed.
    refresh_scale : float
        ``t`` below which every surrogate draw refreshes the weights.
    refresh_exponent : float
        Decay exponent of the refresh probability, in (0, 1].
    freeze_after_tuning : bool
        Keep the surrogate fixed after tuning (no adaptation during sampling).
    refit_during_tuning : bool
        Refit the whole surrogate in batch (re-choosing the dynamics) when the evaluated proposals
        have doubled, as RNSHMC does.
    weigh_costs : bool
        As for :class:`~pymc_rnshmc.RNSHMC`. (RNSHMC's ``tune_on_surrogate`` does not apply:
        the online estimator learns from the exact evaluation of every tuning draw.)
    start_error : float
        The surrogate dynamics start once a fit's held-out relative gradient error is below
        this; until then (at most until 70 % of tuning; on PyMC 5, which does not tell the step
        the tuning length, at most four postponements) exploration continues, as it does after a
        failed first fit. A fit without held-out points (very few draws, or ``n_hidden``,
        ``penalty`` and ``weight_scale`` all fixed) has no error estimate and starts at once.
    time_limit : float, optional
        As for :class:`~pymc_rnshmc.RNSHMC`: an exact evaluation longer than this many seconds
        is a rejection (stat ``model_failures``), which truncates the posterior to where the
        model finishes in time. Default ``None``: no limit.
    **kwargs
        As for :class:`~pymc_rnshmc.RNSHMC`: the network options (``n_hidden``,
        ``hidden_units``, ``activation``, ``quadratic``, ``penalty``, ``surrogate``), the
        exploration and trajectory options (``exploration_steps`` defaults to
        ``max(50, 1.5 d, 0.2 tune)``; with fewer than ``d + 2`` usable draws no surrogate is
        fitted and sampling stays exact), ``coarse`` (the user's coarse model; the online
        estimator then learns the correction ``U - U_c`` from every exact evaluation, at one
        coarse call each, and the first fit comes after ``max(50, 1.5 d)`` draws) and NUTS's
        options.

    Notes
    -----
    Sampler statistics: those of :class:`~pymc_rnshmc.RNSHMC`, plus ``surrogate_refreshes``
    (surrogate changes so far in the chain: weight refreshes and batch refits) and
    ``estimator_points`` (exact evaluations the surrogate has learned from; during exploration,
    those collected for the first fit). ``n_gradient_evals`` counts the tuning-time gradients.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490
       (section 4, Algorithm 4).
    .. [2] Roberts, G. O., & Rosenthal, J. S. (2007). Coupling and ergodicity of adaptive
       Markov chain Monte Carlo algorithms. Journal of Applied Probability, 44(2), 458-475.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_rnshmc import ARNSHMC
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     idata = pm.sample(
    ...         step=ARNSHMC(exploration_steps=100, weigh_costs=False),
    ...         tune=300, draws=200, chains=1, random_seed=1, progressbar=False,
    ...         compute_convergence_checks=False,
    ...     )
    >>> bool(abs(idata.posterior["x"].mean() - 1.0) < 0.3)
    True
    >>> bool(idata.sample_stats["surrogate_refreshes"].max() > 0)  # it kept learning
    True
    """

    name = "arnshmc"
    stats_dtypes_shapes = ADAPTIVE_SURROGATE_HMC_STATS
    _state_class = ARNSHMCState

    def __init__(
        self,
        vars=None,
        *,
        tuning_gradients: bool = True,
        refresh_scale: float = 10.0,
        refresh_exponent: float = 1.0,
        freeze_after_tuning: bool = False,
        refit_during_tuning: bool = True,
        weigh_costs: bool = True,
        start_error: float = 0.3,
        time_limit: float | None = None,
        **kwargs,
    ) -> None:
        refresh_scale = check_positive_number("refresh_scale", refresh_scale)
        if (
            isinstance(refresh_exponent, bool)
            or not isinstance(refresh_exponent, numbers.Real)
            or not 0 < refresh_exponent <= 1
        ):
            raise ValueError(
                "refresh_exponent must be in (0, 1]: the refresh probability must vanish but "
                f"sum to infinity; got {refresh_exponent!r}."
            )
        network = {name: kwargs.pop(name) for name in NETWORK_OPTIONS if name in kwargs}
        surrogate = network_surrogate(kwargs.pop("surrogate", None), **network)
        if not Capabilities.of(surrogate).online:
            raise TypeError(
                "ARNSHMC needs a surrogate that can learn online (an `online_estimator(positions,"
                " potentials, gradients)` method), such as RandomNetworkSurrogate; got "
                f"{surrogate!r}. Use RNSHMC for a surrogate that is fitted once."
            )
        self.tuning_gradients = check_flag("tuning_gradients", tuning_gradients)
        self.refresh_scale = refresh_scale
        self.refresh_exponent = float(refresh_exponent)
        self.freeze_after_tuning = check_flag("freeze_after_tuning", freeze_after_tuning)
        super().__init__(
            vars,
            surrogate=surrogate,
            schedule=ARNSHMC_SCHEDULE,
            start_error=start_error,
            refit_during_tuning=check_flag("refit_during_tuning", refit_during_tuning)
            and self.tuning_gradients,
            weigh_costs=weigh_costs,
            tune_on_surrogate=False,  # the online estimator learns from every exact test
            time_limit=time_limit,
            **kwargs,
        )

    def _start_chain(self) -> None:
        super()._start_chain()
        self.refreshes = 0
        self._learner = None
        self._surrogate_draws = 0
        self._warned_refresh = False

    # ----------------------------------------------------------------- hooks
    def _after_fit(self) -> None:
        positions, potentials, gradients = self._warmup.training_window()
        self._learner = self.surrogate.online_estimator(positions, potentials, gradients)

    def _before_draw(self) -> None:
        if self.phase == Phase.SURROGATE:
            self._surrogate_draws += 1
            self._update_surrogate()

    def _wants_end_gradient(self) -> bool:
        return self.tune and self.tuning_gradients and not self.gradient_free

    def _after_draw(self, result: DrawResult | None) -> dict[str, Any]:
        if result is not None:
            self._learn_from_proposal(result)
        return {
            "surrogate_refreshes": self.refreshes,
            "estimator_points": (
                len(self._warmup.record) if self._learner is None else self._learner.n_points
            ),
        }

    # ----------------------------------------------------------------- learning
    def _learn_from_proposal(self, result: DrawResult) -> None:
        """Feed the proposal's exact evaluation to the estimator.

        Proposals the chain could not plausibly move to (energy error above
        ``LEARNING_ENERGY_LIMIT``, or divergent) are left out: a trajectory that flew off would
        otherwise put an outlier with a huge potential into the least squares.
        """
        evaluation = result.proposal
        if evaluation is None or not evaluation.exact or result.divergence is not None:
            return
        if not result.energy_change < LEARNING_ENERGY_LIMIT:
            return
        position, logp = evaluation.position, evaluation.logp
        gradient = evaluation.potential_gradient
        if not (self.freeze_after_tuning and not self.tune):
            self._learner.add(position, -logp, gradient)

    def _update_surrogate(self) -> None:
        """Refresh or keep the surrogate's output weights before a draw (see the class doc)."""
        if self.freeze_after_tuning and not self.tune:
            return
        probability = refresh_probability(
            self._surrogate_draws, self.refresh_scale, self.refresh_exponent
        )
        if self.rng.random() < probability:
            try:
                with single_blas_thread():
                    surrogate = self._learner.updated_surrogate(fast_only=True)
            except (np.linalg.LinAlgError, ValueError, FloatingPointError) as err:
                if not self._warned_refresh:
                    self._warned_refresh = True
                    warnings.warn(
                        f"ARNSHMC could not refresh its surrogate from the online estimator "
                        f"({err}); it keeps the current one, which stays exact but stops "
                        "improving.",
                        SurrogateWarning,
                        stacklevel=2,
                    )
                return
            self._replace_surrogate(surrogate)

    def _replace_surrogate(self, surrogate) -> None:
        self._warmup.replace_surrogate(surrogate)
        self.refreshes += 1
        self._chain.forget_surrogate_values()

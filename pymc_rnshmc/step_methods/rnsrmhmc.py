"""RNSRMHMC: exact Riemannian HMC whose metric and forces come from a random network surrogate."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from pymc_rnshmc.exceptions import SurrogateWarning
from pymc_rnshmc.hmc.transition import DrawResult
from pymc_rnshmc.step_methods.dynamics import RiemannianDynamics
from pymc_rnshmc.step_methods.reporting import SURROGATE_HMC_STATS
from pymc_rnshmc.step_methods.schedule import RNSHMC_SCHEDULE
from pymc_rnshmc.step_methods.surrogate_hmc import SurrogateHMC
from pymc_rnshmc.surrogates import PotentialSurrogate
from pymc_rnshmc.surrogates.network.options import network_surrogate

__all__ = ["RIEMANNIAN_STATS", "RNSRMHMC"]

RIEMANNIAN_STATS: dict[str, tuple[Any, list | None]] = {
    **SURROGATE_HMC_STATS,
    "fixed_point_iterations": (np.float64, []),
    "unconverged": (bool, []),
    "irreversible": (bool, []),
}
""":data:`~pymc_rnshmc.step_methods.reporting.SURROGATE_HMC_STATS` and, for surrogate draws,
the fixed-point iterations per generalized leapfrog step (forward and, with the check, back),
and whether the trajectory was rejected because a step's iteration did not converge
(``unconverged``) or the integration back did not return to the start (``irreversible``).
Exact draws report NaN and ``False``."""


class RNSRMHMC(SurrogateHMC):
    r"""Random network surrogate Riemannian manifold HMC (RNS-RMHMC).

    Tuning is RNSHMC's (exact NUTS explores, a random network with a quadratic base is fitted
    to the values and gradients, refitted while it learns from the surrogate draws). The
    surrogate dynamics are Riemannian: the metric ``G(q)`` is the SoftAbs map of the
    surrogate's Hessian (Betancourt 2013; or of its diagonal), the Hamiltonian
    ``U~(q) + 1/2 log det G(q) + 1/2 p^T G(q)^-1 p`` is integrated by the generalized leapfrog
    with fixed-point iterations, and the metric's derivatives come in closed form from the
    network's third derivatives. Each draw evaluates the exact ``logp`` once, at the end, and
    accepts with the Metropolis test on ``U + 1/2 log det G + 1/2 p^T G^-1 p`` with the exact
    ``U``: a Markov transition that leaves the posterior invariant for any smooth positive
    definite ``G`` (up to the tolerance the implicit equations are solved to), however good or
    bad the surrogate. A trajectory whose fixed-point iteration does not converge is rejected,
    and so, by default, is one that does not return to its start when integrated back, which
    is what keeps rejecting non-convergence reversible.

    Position-dependent curvature is where it helps: funnels of hierarchical models, scale
    parameters, where one mass matrix fits nowhere and NUTS diverges. A generalized leapfrog step
    costs ``O(s d^2 + d^3)`` (``O(s d)`` with ``metric="diagonal"``) per fixed-point iteration,
    tens of times a leapfrog step on the surrogate, so on posteriors a constant mass matrix
    fits, :class:`~pymc_rnshmc.RNSHMC` is faster (the paper's Table 1 shows the same).

    Parameters
    ----------
    vars : list, optional
        Continuous variables to sample; default all continuous variables of the model.
    metric : {"softabs", "diagonal"}
        SoftAbs of the surrogate's whole Hessian, or of its diagonal.
    softabs_alpha : float, optional
        SoftAbs sharpness: Hessian eigenvalues well above ``1 / softabs_alpha`` keep their
        absolute value, smaller ones are lifted to about ``1 / softabs_alpha``. Default:
        the largest variance of the training draws.
    tolerance : float
        Relative tolerance of the fixed-point iterations.
    max_iterations : int
        Fixed-point iterations of one implicit equation before its trajectory is rejected.
    check_reversibility : bool
        Integrate every trajectory back and reject it unless it returns to its start (twice
        the surrogate work per draw). ``False`` halves that work but gives up exactness: the
        implicit steps' fixed-point solves can converge to another root, so a trajectory need
        not be reversible (a converged forward and backward pair missed its start by 1.17), and
        the chain then no longer leaves the posterior invariant. It warns.
    n_hidden, activation, quadratic, penalty, surrogate : optional
        As for :class:`~pymc_rnshmc.RNSHMC` (additive units only: a given ``surrogate`` must
        be a :class:`~pymc_rnshmc.RandomNetworkSurrogate` with ``hidden_units="additive"``).
    exploration_steps, training_window, path_length : optional
        As for :class:`~pymc_rnshmc.RNSHMC`; by default the path length is chosen around a
        quarter oscillation (``pi / 2``) by simulating on the surrogate, with the step size.
    max_steps : int
        Largest number of generalized leapfrog steps of a trajectory. Where the surrogate's
        curvature fits the posterior, a quarter oscillation takes a few steps (the paper used
        2 to 6); a surrogate whose geometry needs more than 50 is not worth a step that costs
        tens of surrogate gradients: if no path length can be simulated within ``max_steps``,
        the sampler says so and continues with exact NUTS. (On the centred eight schools, a
        surrogate with 59 % held-out gradient error chose a step of 0.0017 for a path of 0.79,
        470 steps a trajectory, about a second a draw.)
    target_accept, start_error, refit_during_tuning, weigh_costs, safety_net : optional
        As for :class:`~pymc_rnshmc.RNSHMC`.
    tune_on_surrogate, explore_from_mode : bool, optional
        As for :class:`~pymc_rnshmc.RNSHMC`.
    time_limit : float, optional
        As for :class:`~pymc_rnshmc.RNSHMC`: an exact evaluation longer than this many seconds
        is a rejection (stat ``model_failures``), which truncates the posterior to where the
        model finishes in time. Default ``None``: no limit.
    surrogate_target_accept : float, optional
        Target acceptance on the surrogate's own Hamiltonian; default 0.9.
    **kwargs
        Passed on to :class:`pymc.NUTS`.

    Notes
    -----
    Statistics: RNSHMC's, plus ``fixed_point_iterations``, ``unconverged`` and
    ``irreversible`` (:data:`RIEMANNIAN_STATS`). ``smallest_eigval`` and ``largest_eigval``
    are those of ``G(q)^-1`` at the draw's start.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
    .. [2] Girolami, M., & Calderhead, B. (2011). Riemann manifold Langevin and Hamiltonian
       Monte Carlo methods. JRSS B, 73(2), 123-214.
    .. [3] Betancourt, M. (2013). A general metric for Riemannian manifold Hamiltonian Monte
       Carlo. Geometric Science of Information, LNCS 8085, 327-334.
    .. [4] Zappa, E., Holmes-Cerfon, M., & Goodman, J. (2018). Monte Carlo on manifolds:
       sampling densities and integrating functions. CPAM, 71(12), 2609-2647.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSRMHMC
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     idata = pm.sample(
    ...         step=RNSRMHMC(exploration_steps=100, weigh_costs=False),
    ...         tune=300, draws=200, chains=1, random_seed=1, progressbar=False,
    ...         compute_convergence_checks=False,
    ...     )
    >>> bool(abs(idata.posterior["x"].mean() - 1.0) < 0.3)
    True
    >>> bool(idata.sample_stats["unconverged"].sum() == 0)
    True
    """

    name = "rnsrmhmc"
    stats_dtypes_shapes = RIEMANNIAN_STATS
    _refuses_coarse = (
        "its Riemannian metric is the network's own Hessian, which a coarse model does not give"
    )

    def __init__(
        self,
        vars=None,
        *,
        metric: str = "softabs",
        softabs_alpha: float | None = None,
        tolerance: float = 1e-9,
        max_iterations: int = 100,
        check_reversibility: bool = True,
        n_hidden: int | None = None,
        activation: str = "softplus",
        quadratic: bool = True,
        penalty: float | None = None,
        surrogate: PotentialSurrogate | None = None,
        exploration_steps: int | None = None,
        training_window: int | None = None,
        path_length: float | None = None,
        max_steps: int = 50,
        target_accept: float = 0.8,
        surrogate_target_accept: float | None = None,
        start_error: float | None = 0.3,
        refit_during_tuning: bool = True,
        weigh_costs: bool = True,
        tune_on_surrogate: bool = True,
        explore_from_mode: bool = True,
        safety_net: float | None = None,
        time_limit: float | None = None,
        model=None,
        **kwargs,
    ) -> None:
        surrogate = network_surrogate(
            surrogate,
            n_hidden=n_hidden,
            hidden_units="additive",
            activation=activation,
            quadratic=quadratic,
            penalty=penalty,
            ceiling=False,  # the trajectories follow the network's own curvature
        )
        if not check_reversibility:
            warnings.warn(
                "RNSRMHMC(check_reversibility=False) does not check that each implicit "
                "trajectory returns to its start: a fixed-point solve can converge to another "
                "root, and then the draws are no longer exact. Keep the default (True) unless "
                "you accept an approximate posterior.",
                SurrogateWarning,
                stacklevel=2,
            )
        dynamics = RiemannianDynamics(
            metric, softabs_alpha, tolerance, max_iterations, check_reversibility
        )
        super().__init__(
            vars,
            surrogate=surrogate,
            schedule=RNSHMC_SCHEDULE,
            exploration_steps=exploration_steps,
            training_window=training_window,
            path_length=path_length,
            max_steps=max_steps,
            target_accept=target_accept,
            surrogate_target_accept=surrogate_target_accept,
            start_error=start_error,
            refit_during_tuning=refit_during_tuning,
            weigh_costs=weigh_costs,
            tune_on_surrogate=tune_on_surrogate,
            explore_from_mode=explore_from_mode,
            dynamics=dynamics,
            safety_net=safety_net,
            time_limit=time_limit,
            model=model,
            **kwargs,
        )

    def _after_draw(self, result: DrawResult | None) -> dict[str, Any]:
        if result is None:
            return {"fixed_point_iterations": np.nan, "unconverged": False, "irreversible": False}
        return {
            "fixed_point_iterations": result.solver_iterations,
            "unconverged": result.unconverged,
            "irreversible": result.irreversible,
        }

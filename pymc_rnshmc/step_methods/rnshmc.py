"""RNSHMC: exact HMC whose trajectories follow a random network surrogate of the potential."""

from __future__ import annotations

from pymc_rnshmc.step_methods.schedule import RNSHMC_SCHEDULE
from pymc_rnshmc.step_methods.surrogate_hmc import SurrogateHMC
from pymc_rnshmc.surrogates import PotentialSurrogate
from pymc_rnshmc.surrogates.network.options import network_surrogate

__all__ = ["RNSHMC"]


class RNSHMC(SurrogateHMC):
    r"""Random network surrogate Hamiltonian Monte Carlo.

    Tuning is spent on learning the surrogate:

    1. a short exact exploration with PyMC's NUTS (its step-size dual averaging and mass-matrix
       adaptation, started at the mode with the curvature's metric where there is a mode, see
       ``explore_from_mode``), recording every draw with its exact ``logp`` and gradient:
       ``max(50, 1.5 d)`` draws and at least 20 % of tuning (200 on PyMC 5, which does not tell
       the step ``tune``), extended by half again while the fit's held-out gradient error
       exceeds ``start_error``, at most until 70 % of tuning;
    2. a random network surrogate of the potential ``U = -logp`` fitted to those values and
       gradients, and the metric, step size and path length chosen by simulating chains on it;
    3. for the rest of tuning, HMC trajectories that follow the surrogate's gradient, corrected
       by the exact Metropolis test; each proposal's exact gradient is computed with its
       ``logp``, the plausible proposals are recorded, and each time they have doubled the
       surrogate is refitted and the dynamics re-chosen, while a refit still helps (held-out
       gradient error above 10 %, or above 1 % and still falling by a tenth) and can be
       followed by 100 tuning draws of step size adaptation (the first refit, where the record
       cannot double in time, comes at the last such draw if it has grown by half);
    4. with ``weigh_costs``, a setup that costs at most half of what exact NUTS would still
       need, refits after the first only while they pay for themselves, and exact NUTS for the
       rest of the chain if the surrogate's draws are measured to give fewer effective draws
       per second than the exploration's (see ``weigh_costs``);
    5. once learning has ended, tuning draws on the surrogate alone, with no exact evaluation
       (see ``tune_on_surrogate``), until the last 50, which have the exact test again.

    The surrogate is frozen when tuning ends. Each kept draw draws a momentum, integrates the
    surrogate dynamics for the chosen path length (with jitter), evaluates the exact ``logp``
    once at the end point and accepts with the exact Hamiltonian: zero exact gradients per
    draw, and each draw is a Markov transition that leaves the exact posterior invariant
    however good the surrogate is. The paper's RNS-HMC, one fit after a long exploration, is
    ``exploration_steps=700, refit_during_tuning=False``.

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
    coarse : pymc.Model or callable, optional
        A cheaper version of the model: the same free variables (names, shapes, transforms) on
        a coarser mesh, with a looser solver tolerance or a reduced-order forward model; or a
        callable ``q -> (logp, grad logp)`` on the sampler's raveled vector. The surrogate is
        then the coarse potential plus a random network (with the options above) fitted to the
        difference between the exact and the coarse potentials and gradients; where the coarse
        model alone predicts held-out training points as well, the trajectories follow it
        alone, and the log says when a network alone would predict better
        (:class:`~pymc_rnshmc.surrogates.coarse.CoarseCorrectedSurrogate`). Each leapfrog step
        costs one coarse logp and gradient, so it pays where the coarse model is many times
        cheaper than the model; the draws are exact for the model, at one exact logp each, as
        without it. The coarse model's gradient must exist, even for a model without one.
    exploration_steps : int, optional
        Exact NUTS draws before the surrogate is first fitted (default as described above). If
        tuning ends first, the surrogate is fitted then, with the step size chosen by simulation
        and no re-adaptation.
    training_window : int, optional
        How many of the last exploration draws to train on; default the last 75 %.
    path_length : float, optional
        Integration time of the surrogate trajectories. Default: chosen, together with the
        metric (PyMC's adapted diagonal one, a dense one from the exact gradients, or the
        surrogate's own curvature) and the step size, by simulating surrogate chains for
        integration times around the metric's quarter period.
    max_steps : int
        Largest number of leapfrog steps in one surrogate trajectory.
    target_accept : float
        Target acceptance of the exploration NUTS, in (0, 1).
    start_error : float, optional
        Held-out relative gradient error below which the first fit starts the surrogate
        dynamics; ``None`` starts with any fit.
    refit_during_tuning : bool
        Learn from the surrogate draws of tuning and refit (step 3 above).
    weigh_costs : bool
        Let the seconds measured while tuning decide four things
        (:mod:`~pymc_rnshmc.step_methods.economy`): a chain's first fit is abandoned for exact
        NUTS once it has taken as long as exact NUTS needs to finish the chain; a fit's choice
        of metric and path length stops, with the best candidate scored so far, once the
        chain's fits have taken half of what exact NUTS would need for the draws still to come;
        refits after the first are made only while each is predicted to cost at most half of
        what the surrogate's draws still save against exact NUTS draws; and after the first
        fit's surrogate has made 100 tuning draws, if its seconds per effective draw are 1.5
        times the exploration's exact NUTS draws' or more (a cheap model, or a surrogate that
        mixes poorly), the chain continues with exact NUTS for good and says why in one log
        line. Either way the draws are exact.
        Because these choices depend on timings, a seed reproduces its draws only when the
        same choices are made (they are logged); ``False`` makes the draws a function of the
        seed alone and keeps the surrogate (say, to try it on a cheap version of an expensive
        model). Default ``True``.
    tune_on_surrogate : bool
        Once the surrogate has stopped learning (step 3), tuning draws move on the surrogate
        alone, with no exact evaluation: tuning draws are discarded, so they need no exact
        test. Every tenth keeps the exact test and checks the surrogate where the chain went
        (the stretch ends if the surrogate's error there drifts by 10 nats), safety-net draws
        continue, and the last 50 tuning draws have the exact test again, so the chain is back
        on the posterior when the kept draws begin. Kept draws are unchanged. Needs the tuning
        length, which PyMC 5 does not tell a step (there it has no effect). ``False``: every
        surrogate draw of tuning has the exact test. Default ``True``.
    explore_from_mode : bool
        The exploring NUTS's first draw first searches the posterior's mode (L-BFGS, finished
        by Newton steps; ``2 d`` gradients for the curvature) and, where it finds one and 20
        draws of the Laplace approximation there find the density it predicts (log importance
        weights that spread by at most one nat), starts there with a
        metric adapted around the Laplace approximation's covariance, which a correlated
        posterior needs and PyMC's diagonal metric cannot give
        (:mod:`~pymc_rnshmc.step_methods.mode_metric`). Where there is no mode, where the
        approximation fails the check (Neal's funnel, whose mode is at the bottom of its neck)
        or where a metric of the user's is given (``scaling``, ``potential``), NUTS explores as
        PyMC's would. Counted in the first draw's evaluations. Default ``True``.
    dynamics : {"hmc", "nuts"}
        ``"hmc"``: the fixed-length leapfrog described above. ``"nuts"``: each draw runs a
        complete NUTS transition on the surrogate Hamiltonian (its own no-U-turn criterion,
        step size and metric) and accepts the state it draws by delayed acceptance with the
        exact density (:class:`~pymc_rnshmc.hmc.corrections.DelayedAcceptance`); no path
        length is chosen. Also one exact ``logp`` and no exact gradient per draw, and each
        draw leaves the posterior invariant.
    surrogate_target_accept : float, optional
        Target acceptance of the surrogate dynamics on the surrogate's own Hamiltonian (the
        integrator's share of rejections), in (0, 1). Default 0.95 for both dynamics:
        surrogate steps are cheap next to the one exact ``logp`` of a draw, so it is higher
        than NUTS's (``docs/benchmarks.md`` measures the gain, and with ``dynamics="nuts"``
        the tails that NUTS's 0.8 missed on a curved posterior). The exact acceptance is
        lower by whatever the surrogate gets wrong, which no step size can fix.
    safety_net : float, optional
        Probability, drawn afresh for each draw after tuning and independent of the chain's
        state, that the draw is an exact transition instead of a surrogate one: PyMC's NUTS
        with the step size and mass matrix adapted while exploring, or for a model without
        gradients the fixed random walk. The mixture leaves the posterior invariant and keeps
        the chain moving where the surrogate is wrong
        (:mod:`~pymc_rnshmc.step_methods.safety_net`). With gradients the net also draws
        while tuning, and the surrogate learns from its draws: one that lands where the
        surrogate is far too high brings a refit. After tuning, the first such landing of a
        chain is told (:mod:`~pymc_rnshmc.step_methods.wall_watch`). Default 0.1 with
        gradients (each exact draw costs a NUTS trajectory of exact gradients); for a model
        without gradients 0.2 in up to five dimensions and ``1 / d`` beyond, after tuning only
        (an exact draw then costs one ``logp``, as a surrogate draw does, but a random-walk
        step moves less the more dimensions there are). 0 turns it off: the draws are then
        all surrogate draws, still exact, but a region the surrogate walls off may be missed
        without a sign.
    reject_errors : exception type or tuple of them, optional
        Errors of the model's logp that reject the point instead of stopping sampling. By
        default only a NaN or infinite logp, ``numpy.linalg.LinAlgError`` and scipy's
        non-finite-input ``ValueError`` are rejections (as in PyMC's NUTS); any other error
        stops with a :class:`~pymc_rnshmc.ModelEvaluationError` naming the parameters, which
        holds the chain's draws so far. Listing a type makes the sampler target the posterior
        truncated to where the model succeeds: use it only when the model cannot be evaluated
        there by design. Rejections are counted in the stat ``model_failures``.
    time_limit : float, optional
        Seconds after which an exact evaluation of the model (``logp``, or ``logp`` and
        gradient) is abandoned, for simulators and ODE solvers that can run for minutes at
        absurd parameters. An abandoned evaluation is a rejection in every phase (exploration,
        the fit's evaluations, surrogate and safety-net draws), counted in the stat
        ``model_failures`` and told once per chain with the parameters. A time limit makes the
        sampler target the posterior truncated to where the model finishes in time: harmless
        only where such points carry negligible mass (far out in a tail); ``model_failures``
        shows how often it happened. It is enforced by a SIGALRM timer
        (:mod:`~pymc_rnshmc.step_methods.time_limit`), so compiled code that does not call
        back into Python (a C or Fortran solver without Python callbacks) is interrupted only
        when it next runs Python code, and where signals cannot be used (a thread other than
        the main one, Windows) the limit is ignored with a warning. A limited evaluation costs
        four system calls more, and the first in each process is made once without a limit at
        the initial point, to compile the model. Default ``None``: no limit and no overhead.
    **kwargs
        Passed on to :class:`pymc.NUTS` (``max_treedepth``, ``scaling``, ``potential``, ...).

    Notes
    -----
    Sampler statistics (``idata.sample_stats``): ``accept``, ``accepted``, ``diverging``,
    ``energy``, ``energy_error``, ``n_steps``, ``step_size``, ``lp`` as in PyMC; ``tree_depth``
    (0 for surrogate draws); ``n_logp_evals`` and ``n_gradient_evals``, the exact model
    evaluations of the draw; ``used_surrogate``; ``safety_net``, an exact draw after tuning in
    place of a surrogate one; and ``surrogate_error``, how much the surrogate misjudged the
    potential change of the proposal.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
    .. [2] Hoffman, M. D., & Gelman, A. (2014). The No-U-Turn sampler. JMLR, 15, 1593-1623.

    Examples
    --------
    Sample as with any PyMC step method (``weigh_costs=False`` makes the draws a function of
    the seed alone):

    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSHMC
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     idata = pm.sample(
    ...         step=RNSHMC(exploration_steps=100, weigh_costs=False),
    ...         tune=300, draws=200, chains=1, random_seed=1, progressbar=False,
    ...         compute_convergence_checks=False,
    ...     )
    >>> bool(abs(idata.posterior["x"].mean() - 1.0) < 0.3)
    True
    >>> bool(idata.sample_stats["used_surrogate"].mean() > 0.5)  # most draws followed it
    True
    """

    name = "rnshmc"

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
        coarse=None,
        exploration_steps: int | None = None,
        training_window: int | None = None,
        path_length: float | None = None,
        max_steps: int = 1024,
        target_accept: float = 0.8,
        surrogate_target_accept: float | None = None,
        start_error: float | None = 0.3,
        refit_during_tuning: bool = True,
        weigh_costs: bool = True,
        tune_on_surrogate: bool = True,
        explore_from_mode: bool = True,
        dynamics: str = "hmc",
        safety_net: float | None = None,
        time_limit: float | None = None,
        model=None,
        **kwargs,
    ) -> None:
        surrogate = network_surrogate(
            surrogate,
            n_hidden=n_hidden,
            hidden_units=hidden_units,
            activation=activation,
            quadratic=quadratic,
            penalty=penalty,
        )
        super().__init__(
            vars,
            surrogate=surrogate,
            coarse=coarse,
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
